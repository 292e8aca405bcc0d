/* sched: every schedule computes exactly the pairs the global mask needs,
 * with the right mask, and moves as many bytes as it receives. */
#include <string.h>

#include "compute.h"
#include "scenario.h"
#include "sched/hamilton.h"
#include "sched/ulysses.h"
#include "sched/sched.h"
#include "testutil.h"

static topology *complete_topo(uint32_t n) {
  topology *t = topo_new("test", n);
  topo_routes_begin(t);
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      topo_route(t, s, d, NULL, 0, 0);
      t->direct[s * n + d] = s != d;
    }
  topo_routes_done(t);
  return t;
}

static bool ulysses_family(const sched_ops *s) {
  return s == &sched_ulysses || s == &sched_usp || s == &sched_usp_zigzag;
}

static bool ring_family(const sched_ops *s) {
  return s == &sched_ring || s == &sched_zigzag || s == &sched_tasp || s == &sched_tasp_mkm;
}

/* Heads: 2 query heads over 1 KV head; the Ulysses family needs them to
 * divide among the GPUs, so it gets 2n (KV heads 1: replicated). */
static workload shape(uint32_t n, uint64_t seq, bool causal, pass_kind pass) {
  workload w = {.gpus = n, .seq_len = seq, .batch = 1, .heads = 2, .kv_heads = 1,
                .head_dim = 4, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                .causal = causal, .pass = pass};
  return w;
}

/* Global block matrix per head: count[h][qb][kb] of full computations,
 * diag[h][qb] of causal diagonal ones, at granularity g tokens.  Every
 * (query block, key block, head) the mask needs is computed exactly once,
 * with the right mask, and nothing else; pairs and FLOPs add up to the
 * analytic totals. */
static void check_coverage(const plan *p, const workload *w, uint64_t g, const char *what,
                           bool backward) {
  uint64_t nb = w->seq_len / g, H = w->heads;
  uint32_t *full = g_new0(uint32_t, H * nb * nb), *diag = g_new0(uint32_t, H * nb);
  double pairs = 0, flops = 0;
  unsigned bad_mask = 0, bad_heads = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE || t->op.kind != OP_ATTN || t->op.backward != backward) continue;
    const plan_op *op = &t->op;
    pairs += op->pairs * op->heads;
    flops += compute_op_flops(op);
    if (op->head_off + op->heads > H || op->heads == 0) { bad_heads++; continue; }
    const plan_seg *q = &g_array_index(p->segs, plan_seg, t->seg_off);
    const plan_seg *k = q + t->n_qseg;
    for (uint32_t a = 0; a < t->n_qseg; a++)
      for (uint32_t b = 0; b < t->n_kseg; b++) {
        CU_ASSERT(q[a].start % g == 0 && q[a].len % g == 0);
        CU_ASSERT(k[b].start % g == 0 && k[b].len % g == 0);
        for (uint64_t h = op->head_off; h < op->head_off + op->heads; h++)
          for (uint64_t qb = q[a].start / g; qb < (q[a].start + q[a].len) / g; qb++)
            for (uint64_t kb = k[b].start / g; kb < (k[b].start + k[b].len) / g; kb++) {
              if (!op->causal) full[(h * nb + qb) * nb + kb]++;
              else if (kb < qb) full[(h * nb + qb) * nb + kb]++;
              else if (kb == qb) diag[h * nb + qb]++;
              /* a full kernel must never touch the diagonal or above under causal */
              if (w->causal && !op->causal) bad_mask += kb >= qb;
            }
        if (!w->causal && op->causal) bad_mask++;
      }
  }
  unsigned wrong = 0;
  for (uint64_t h = 0; h < H; h++)
    for (uint64_t qb = 0; qb < nb; qb++) {
      for (uint64_t kb = 0; kb < nb; kb++)
        wrong += full[(h * nb + qb) * nb + kb] != (uint32_t)(!w->causal || kb < qb);
      wrong += diag[h * nb + qb] != (w->causal ? 1u : 0u);
    }
  if (wrong || bad_mask || bad_heads)
    fprintf(stderr, "%s: %u blocks wrong, %u kernels with a wrong mask, %u with bad heads\n",
            what, wrong, bad_mask, bad_heads);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(bad_mask, 0);
  CU_ASSERT_EQUAL(bad_heads, 0);
  double S = (double)w->seq_len;
  CU_ASSERT_DOUBLE_EQUAL(pairs, H * (w->causal ? S * (S + 1) / 2 : S * S), 0.5);
  /* nominal FLOPs: 4·B·H·D per pair, the causal diagonal counted half */
  CU_ASSERT_CLOSE(flops, 4.0 * w->batch * H * w->head_dim * S * S / (w->causal ? 2 : 1), 1e-12);
  g_free(full);
  g_free(diag);
}

/* Generic: transfers stay inside the SP group and carry bytes, the bytes
 * sent are the bytes received; dependencies point backwards.  (Per GPU
 * the families' checks pin what each sends.) */
static void check_generic(const plan *p, const workload *w) {
  uint32_t n = w->gpus;
  double *sent = g_new0(double, n), *recv = g_new0(double, n);
  for (guint i = 0; i < p->xfers->len; i++) {
    const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, i);
    CU_ASSERT(x->src != x->dst && x->src < n && x->dst < n && x->bytes > 0);
    sent[x->src] += x->bytes;
    recv[x->dst] += x->bytes;
  }
  double ts = 0, tr = 0;
  for (uint32_t g = 0; g < n; g++) ts += sent[g], tr += recv[g];
  CU_ASSERT_CLOSE(ts, tr, 1e-12);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    for (uint32_t d = 0; d < t->n_dep; d++) CU_ASSERT(p->deps[t->dep_off + d] < i);
  }
  g_free(sent);
  g_free(recv);
}

/* Bytes one GPU sends in the whole plan. */
static double sent_by(const plan *p, uint32_t gpu) {
  double s = 0;
  for (guint i = 0; i < p->xfers->len; i++) {
    const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, i);
    if (x->src == gpu) s += x->bytes;
  }
  return s;
}

static double grad_scale(const workload *w) {
  return w->grad_bytes ? (double)w->grad_bytes / w->elem_bytes : 1.0;
}

/* Ring family: in forward each GPU moves the KV of (n-1) chunks' worth;
 * backward adds the dK/dV that follows (n chunks, in the accumulators'
 * precision: float32 here, twice the bf16 KV); every GPU merges one block
 * output less than it has kernels. */
static void check_ring_family(const plan *p, const workload *w) {
  uint32_t n = w->gpus;
  double chunk = workload_kv_bytes(w, (double)w->seq_len / n), per_gpu = 0;
  if (w->pass != PASS_BWD) per_gpu += (n - 1) * chunk;
  if (w->pass != PASS_FWD) per_gpu += (n - 1) * chunk + n * chunk * grad_scale(w);
  uint32_t *attn = g_new0(uint32_t, n), *merge = g_new0(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), per_gpu, 1e-9);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE || t->op.backward) continue;
    if (t->op.kind == OP_ATTN) attn[t->gpu]++;
    if (t->op.kind == OP_MERGE) merge[t->gpu]++;
  }
  for (uint32_t g = 0; g < n; g++)
    if (w->pass != PASS_BWD) CU_ASSERT_EQUAL(merge[g] + 1, attn[g]);
  g_free(attn);
  g_free(merge);
}

/* Ulysses and USP: the all-to-alls move (u-1)/u of Q, K, V and the output
 * (forward) and of dO, dQ, dK, dV (backward, bf16), KV heads replicated up
 * to u; plus, for USP, the ring part's KV of (r-1) ring chunks forward and
 * r accumulators backward.  Calls: 4 per direction, 2 when fused. */
static void check_ulysses_family(const plan *p, const workload *w, uint32_t u) {
  uint32_t n = w->gpus, r = n / u;
  double c = (double)w->seq_len / n, e = w->elem_bytes, hd = (double)w->head_dim;
  double kvh = w->kv_heads < u ? u : w->kv_heads;
  double qo = c * w->heads * hd * e, kv = c * kvh * hd * e;
  double a2a = u > 1 ? (2 * qo + 2 * kv) * (u - 1) / u : 0;
  double ring = 2.0 * c * u * (kvh / u) * hd * e; /* KV a GPU passes along its ring */
  double per_gpu = 0;
  if (w->pass != PASS_BWD) per_gpu += a2a + (r - 1) * ring;
  if (w->pass != PASS_FWD)
    per_gpu += a2a + (r > 1 ? (r - 1) * ring + r * ring * grad_scale(w) : 0);
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), per_gpu, 1e-9);
  unsigned calls = 0;
  for (guint i = 0; i < p->tasks->len; i++)
    calls += plan_task_at(p, i)->kind == TASK_COMM &&
             plan_task_at(p, i)->api == COMM_ALL_TO_ALL;
  unsigned per_dir = u < 2 ? 0 : w->ulysses_fused ? 2 : 4;
  CU_ASSERT_EQUAL(calls, per_dir * (w->pass == PASS_FWDBWD ? 2 : 1));
}

/* All-gather CP: one all-gather of the packed KV (every GPU sends n-1
 * shards around the ring) forward; one reduce-scatter of the float32 dK/dV
 * backward. */
static void check_allgather(const plan *p, const workload *w) {
  uint32_t n = w->gpus;
  double shard = workload_kv_bytes(w, (double)w->seq_len / n), per_gpu = 0;
  if (w->pass != PASS_BWD) per_gpu += (n - 1) * shard;
  if (w->pass != PASS_FWD) per_gpu += (n - 1) * shard * grad_scale(w);
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), per_gpu, 1e-9);
  unsigned ag = 0, rs = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    ag += t->kind == TASK_COMM && t->api == COMM_ALL_GATHER;
    rs += t->kind == TASK_COMM && t->api == COMM_REDUCE_SCATTER;
  }
  CU_ASSERT_EQUAL(ag, w->pass != PASS_BWD);
  CU_ASSERT_EQUAL(rs, w->pass != PASS_FWD);
}

/* TokenRing: the queries (backward with dO, output and log-sum-exp) move
 * n-1 hops; every block computed away from its owner comes back (output in
 * bf16 + float32 log-sum-exp; backward dQ in float32); each owner merges
 * the n-1 blocks others computed for it. */
static void check_tokenring(const plan *p, const workload *w) {
  uint32_t n = w->gpus;
  double c = (double)w->seq_len / n, row = (double)w->heads * w->head_dim * w->batch;
  double lse = 4.0 * w->heads * w->batch;
  uint32_t *merges = g_new0(uint32_t, n);
  double *back = g_new0(double, n);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind == TASK_COMPUTE && t->op.kind == OP_MERGE) merges[t->gpu]++;
    if (t->kind != TASK_COMPUTE || t->op.kind != OP_ATTN) continue;
    /* which owner's queries: the segment's position in the layout */
    const plan_seg *q = &g_array_index(p->segs, plan_seg, t->seg_off);
    uint64_t half = w->seq_len / (2 * (uint64_t)n), at = q[0].start / (w->causal ? half : (uint64_t)c);
    uint32_t owner = (uint32_t)(at < n ? at : 2 * n - 1 - at);
    if (owner != t->gpu)
      back[t->gpu] += t->op.sq * (t->op.backward ? row * w->grad_bytes : row * w->elem_bytes + lse);
  }
  for (uint32_t g = 0; g < n; g++) {
    double want = back[g];
    if (w->pass != PASS_BWD) want += (n - 1) * c * row * w->elem_bytes;
    if (w->pass != PASS_FWD) want += (n - 1) * c * (3 * row * w->elem_bytes + lse);
    CU_ASSERT_CLOSE(sent_by(p, g), want, 1e-9);
    if (w->pass != PASS_BWD) CU_ASSERT_EQUAL(merges[g], n - 1);
  }
  g_free(merges);
  g_free(back);
}

static uint32_t usp_degree(const workload *w, const topology *t) {
  return w->ulysses ? w->ulysses : ulysses_default_degree(w, t);
}

/* per_node: GPUs per node (0: one node), for tasp-mkm's node chains */
static void check_sched_w(const sched_ops *s, topology *t, workload w) {
  g_autofree char *what = g_strdup_printf("%s n=%u u=%u %s %s", s->name, w.gpus, w.ulysses,
                                          w.causal ? "causal" : "full", pass_name(w.pass));
  g_autoptr(GError) err = NULL;
  bool ok = s->check(&w, t, &err);
  if (!ok) fprintf(stderr, "%s: %s\n", what, err->message);
  CU_ASSERT_TRUE_FATAL(ok);
  plan *p = s->build(&w, t, true);
  /* TASP pieces are 1/k of a chunk; n = 4, 6 use fewer cycles: finer grid */
  uint64_t gran = 3;
  if ((s == &sched_tasp || s == &sched_tasp_mkm) && (w.gpus % 2 == 0 || t->gpus_per_node < w.gpus))
    gran = 1;
  if (w.pass != PASS_BWD) check_coverage(p, &w, gran, what, false);
  if (w.pass != PASS_FWD) check_coverage(p, &w, gran, what, true);
  check_generic(p, &w);
  if (ring_family(s)) check_ring_family(p, &w);
  else if (s == &sched_ulysses) check_ulysses_family(p, &w, w.gpus);
  else if (ulysses_family(s)) check_ulysses_family(p, &w, usp_degree(&w, t));
  else if (s == &sched_allgather) check_allgather(p, &w);
  else if (s == &sched_tokenring) check_tokenring(p, &w);
  else CU_FAIL("a scheduler without family checks");
  plan_free(p);
}

static void check_sched_nodes(const sched_ops *s, uint32_t n, uint32_t per_node, bool causal,
                              pass_kind pass) {
  topology *t = complete_topo(n);
  if (per_node) t->gpus_per_node = per_node;
  /* granularity 3 x one piece of TASP's causal layout (2n(n-1) pieces) */
  workload w = shape(n, 3 * 2 * (uint64_t)n * (n > 1 ? n - 1 : 1), causal, pass);
  if (ulysses_family(s)) w.heads = 2 * n;
  check_sched_w(s, t, w);
  topo_free(t);
}

static void check_sched(const sched_ops *s, uint32_t n, bool causal, pass_kind pass) {
  check_sched_nodes(s, n, 0, causal, pass);
}

/* (m-K_m-m)^u: m edge-disjoint Hamiltonian cycles (fewer where K_{m+1}*
 * has none), each GPU leaving its node on exactly one of them, and the
 * schedule over them covers the mask exactly. */
static void t_tasp_node_chain(void) {
  static const uint32_t mu[][2] = {{2, 2}, {3, 3}, {4, 2}, {5, 2}, {8, 2}, {8, 4}, {7, 3}};
  for (size_t c = 0; c < sizeof mu / sizeof mu[0]; c++) {
    uint32_t m = mu[c][0], u = mu[c][1], n = m * u;
    ham_decomp d;
    uint32_t k = ham_node_chain(m, u, &d);
    CU_ASSERT_EQUAL(k, (m + 1 == 4 || m + 1 == 6) ? m - 1 : m);
    g_autoptr(GError) err = NULL;
    CU_ASSERT_TRUE(ham_verify(&d, NULL, &err));
    uint32_t *nic_out = g_new0(uint32_t, n), *nic_in = g_new0(uint32_t, n);
    for (uint32_t j = 0; j < k; j++)
      for (uint32_t v = 0; v < n; v++) {
        uint32_t w = d.succ[(size_t)j * n + v];
        if (v / m != w / m) {
          nic_out[v]++;
          nic_in[w]++;
          CU_ASSERT_EQUAL(w / m, (v / m + 1) % u); /* next node only */
        }
      }
    for (uint32_t v = 0; v < n; v++) {
      CU_ASSERT(nic_out[v] <= 1 && nic_in[v] <= 1);
      if (k == m) CU_ASSERT(nic_out[v] == 1 && nic_in[v] == 1);
    }
    g_free(nic_out);
    g_free(nic_in);
    ham_clear(&d);
    if (n <= 16)
      for (int causal = 0; causal < 2; causal++)
        check_sched_nodes(&sched_tasp_mkm, n, m, causal, PASS_FWDBWD);
  }
}

/* Cycles given by the user (a ring and its reverse; the 4 step sizes mod
 * 5) are used as given, and the schedule still covers the mask exactly. */
static void t_tasp_given_cycles(void) {
  static const struct { uint32_t n; const char *spec; } cases[] = {
      {4, "0-1-2-3,0-3-2-1"}, {5, "0-1-2-3-4,0-2-4-1-3,0-3-1-4-2,0-4-3-2-1"}};
  for (size_t c = 0; c < 2; c++) {
    uint32_t n = cases[c].n;
    topology *t = complete_topo(n);
    for (int causal = 0; causal < 2; causal++) {
      workload w = shape(n, 2 * n * 12, causal, PASS_FWDBWD);
      w.tasp_cycles = cases[c].spec;
      g_autoptr(GError) err = NULL;
      CU_ASSERT_TRUE(sched_tasp.check(&w, t, &err));
      plan *p = sched_tasp.build(&w, t, true);
      CU_ASSERT(strstr(p->note->str, "given by tasp_cycles") != NULL);
      /* step 1 of the first cycle: GPU 0 sends to GPU 1 */
      bool to_next = false;
      for (guint i = 0; i < p->xfers->len; i++) {
        const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, i);
        to_next |= x->src == 0 && x->dst == 1;
      }
      CU_ASSERT_TRUE(to_next);
      check_coverage(p, &w, 1, "given cycles", false);
      check_coverage(p, &w, 1, "given cycles", true);
      check_ring_family(p, &w);
      plan_free(p);
    }
    topo_free(t);
  }
}

static void t_all_schedulers_cover_mask(void) {
  for (const sched_ops *const *s = sched_all(); *s; s++)
    for (uint32_t n = 2; n <= 8; n++)
      for (int c = 0; c < 2; c++) check_sched(*s, n, c, PASS_FWD);
}

static void t_backward_covers_mask(void) {
  for (const sched_ops *const *s = sched_all(); *s; s++)
    for (uint32_t n = 2; n <= 8; n++)
      for (int c = 0; c < 2; c++) {
        check_sched(*s, n, c, PASS_FWDBWD);
        if (n <= 4) check_sched(*s, n, c, PASS_BWD);
      }
}

/* USP at every Ulysses degree that divides n (1: pure ring; n: pure
 * Ulysses), fused and not, on one node and on nodes of u GPUs; Ulysses with
 * GQA KV heads that divide among the GPUs and that must be replicated. */
static void t_ulysses_variants(void) {
  for (uint32_t n = 2; n <= 8; n++)
    for (uint32_t u = 1; u <= n; u++) {
      if (n % u) continue;
      for (int c = 0; c < 2; c++)
        for (int fused = 0; fused < 2; fused++) {
          topology *t = complete_topo(n);
          t->gpus_per_node = u;
          workload w = shape(n, 3 * 2 * (uint64_t)n * (n - 1), c, PASS_FWDBWD);
          w.heads = 2 * n;
          w.kv_heads = fused ? n : 1; /* divides, or replicated */
          w.ulysses = u;
          w.ulysses_fused = fused;
          check_sched_w(&sched_usp, t, w);
          check_sched_w(&sched_usp_zigzag, t, w);
          w.ulysses = 0; /* default: the node */
          check_sched_w(&sched_usp, t, w);
          CU_ASSERT_EQUAL(ulysses_default_degree(&w, t), u);
          check_sched_w(&sched_ulysses, t, w);
          topo_free(t);
        }
    }
}

/* Ulysses is limited by heads: a degree that does not divide the query
 * heads, or KV heads that neither divide nor replicate, are refused. */
static void t_ulysses_heads(void) {
  topology *t = complete_topo(16);
  workload w = shape(16, 16 * 64, true, PASS_FWD);
  w.heads = 32;
  w.kv_heads = 8; /* Llama-3-8B at SP 16: replicated, each GPU one KV head */
  g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL;
  CU_ASSERT_TRUE(sched_ulysses.check(&w, t, &e1));
  plan *p = sched_ulysses.build(&w, t, false);
  CU_ASSERT_PTR_NOT_NULL(strstr(p->note->str, "replicated"));
  plan_free(p);
  w.heads = 24;
  w.kv_heads = 8;
  CU_ASSERT_FALSE(sched_ulysses.check(&w, t, &e2));
  CU_ASSERT_PTR_NOT_NULL(e2 ? strstr(e2->message, "query heads") : NULL);
  w.heads = 48;
  w.kv_heads = 6; /* 16 % 6 and 6 % 16 both non-zero */
  CU_ASSERT_FALSE(sched_ulysses.check(&w, t, &e3));
  CU_ASSERT_PTR_NOT_NULL(e3 ? strstr(e3->message, "KV heads") : NULL);
  topo_free(t);
}

/* NCCL-style rings of a collective: every ring is a Hamiltonian cycle over
 * the group; on several nodes ring j enters each node at local GPU j, so
 * each GPU leaves its node on exactly one ring (one NIC rail each). */
static void t_collective_rings(void) {
  static const uint32_t cases[][2] = {{8, 0}, {8, 8}, {16, 8}, {12, 4}, {6, 3}, {5, 0}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    uint32_t n = cases[c][0], m = cases[c][1];
    plan *p = plan_new(n, false);
    uint32_t *gpus = g_new(uint32_t, n);
    for (uint32_t g = 0; g < n; g++) gpus[g] = g;
    uint32_t ag = plan_comm(p, 0, COMM_ALL_GATHER);
    plan_coll_ring(p, ag, gpus, n, 100.0, m);
    uint32_t rings = m && n > m ? m : 1;
    const plan_task *t = plan_task_at(p, ag);
    CU_ASSERT_EQUAL(t->n_xfer, rings * n);
    uint32_t *out = g_new0(uint32_t, n), *cross = g_new0(uint32_t, n);
    for (uint32_t i = 0; i < t->n_xfer; i++) {
      const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, t->xfer_off + i);
      out[x->src]++;
      CU_ASSERT_EQUAL(x->steps, n - 1);
      CU_ASSERT_CLOSE(x->bytes, 100.0 * (n - 1) / rings, 1e-12);
      if (rings > 1 && x->src / m != x->dst / m) cross[x->src]++;
    }
    for (uint32_t g = 0; g < n; g++) {
      CU_ASSERT_EQUAL(out[g], rings);
      if (rings > 1) CU_ASSERT_EQUAL(cross[g], 1);
    }
    g_free(out);
    g_free(cross);
    g_free(gpus);
    plan_free(p);
  }
}

/* Ring causal is unbalanced: GPU i computes i full blocks and one causal
 * block; zigzag and tasp give every GPU the same pairs. */
static void t_balance(void) {
  uint32_t n = 8;
  topology *t = complete_topo(n);
  workload w = shape(n, 2 * 8 * 7 * 4, true, PASS_FWD);
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    w.heads = ulysses_family(*s) ? 8 : 2;
    plan *p = (*s)->build(&w, t, false);
    double pairs[8] = {0};
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *k = plan_task_at(p, i);
      if (k->kind == TASK_COMPUTE && k->op.kind == OP_ATTN) pairs[k->gpu] += k->op.pairs * k->op.heads / w.heads;
    }
    double c = (double)w.seq_len / n;
    if (*s == &sched_ring) {
      for (uint32_t g = 0; g < n; g++) CU_ASSERT_DOUBLE_EQUAL(pairs[g], g * c * c + c * (c + 1) / 2, 0.5);
    } else {
      /* balanced up to the diagonal's half-token terms */
      for (uint32_t g = 1; g < n; g++) CU_ASSERT(fabs(pairs[g] - pairs[0]) <= c);
    }
    plan_free(p);
  }
  topo_free(t);
}

/* TASP's step is one all-to-all: every GPU sends to n-1 distinct peers. */
static void t_tasp_all_to_all(void) {
  uint32_t n = 8;
  topology *t = complete_topo(n);
  workload w = shape(n, 2 * 8 * 7 * 2, false, PASS_FWD);
  plan *p = sched_tasp.build(&w, t, false);
  unsigned groups = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *k = plan_task_at(p, i);
    if (k->kind != TASK_COMM) continue;
    groups++;
    CU_ASSERT_EQUAL(k->n_xfer, n * (n - 1));
    uint8_t pair[64] = {0};
    for (uint32_t x = 0; x < k->n_xfer; x++) {
      const plan_xfer *tx = &g_array_index(p->xfers, plan_xfer, k->xfer_off + x);
      pair[tx->src * n + tx->dst]++;
    }
    for (uint32_t a = 0; a < n; a++)
      for (uint32_t b = 0; b < n; b++) CU_ASSERT_EQUAL(pair[a * n + b], a == b ? 0 : 1);
  }
  CU_ASSERT_EQUAL(groups, n - 1);
  plan_free(p);
  topo_free(t);
}

/* Bad sizes are refused with a message. */
static void t_checks_refuse(void) {
  topology *t = complete_topo(8);
  workload w = shape(8, 1000, true, PASS_FWD); /* 1000 % 16 != 0 */
  g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL;
  CU_ASSERT_FALSE(sched_zigzag.check(&w, t, &e1));
  CU_ASSERT_PTR_NOT_NULL(e1 ? strstr(e1->message, "not divisible") : NULL);
  w.seq_len = 1001;
  CU_ASSERT_FALSE(sched_ring.check(&w, t, &e2));
  w.seq_len = 16 * 3; /* chunks of 3 tokens cannot split into 7 sub-chunks */
  CU_ASSERT_FALSE(sched_tasp.check(&w, t, &e3));
  CU_ASSERT_PTR_NOT_NULL(e3 ? strstr(e3->message, "too short") : NULL);
  topo_free(t);
}

int main(void) {
  static const test_case cases[] = {TEST(t_all_schedulers_cover_mask),
                                    TEST(t_backward_covers_mask), TEST(t_balance),
                                    TEST(t_tasp_all_to_all), TEST(t_checks_refuse),
                                    TEST(t_tasp_node_chain), TEST(t_tasp_given_cycles),
                                    TEST(t_ulysses_variants), TEST(t_ulysses_heads),
                                    TEST(t_collective_rings),
                                    {NULL, NULL}};
  return test_run("sched", cases);
}
