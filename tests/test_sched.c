/* sched: every schedule computes exactly the pairs the global mask needs,
 * with the right mask, and moves as many bytes as it receives. */
#include <string.h>

#include "sched/hamilton.h"
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

static workload shape(uint32_t n, uint64_t seq, bool causal, pass_kind pass) {
  workload w = {.gpus = n, .seq_len = seq, .batch = 1, .heads = 2, .kv_heads = 1,
                .head_dim = 4, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                .causal = causal, .pass = pass};
  return w;
}

/* Global block matrix: count[qb][kb] of full computations, diag[qb] of
 * causal diagonal computations, at granularity g tokens. */
static void check_coverage(const plan *p, const workload *w, uint64_t g, const char *what,
                           bool backward) {
  uint64_t nb = w->seq_len / g;
  uint32_t *full = g_new0(uint32_t, nb * nb), *diag = g_new0(uint32_t, nb);
  double pairs = 0;
  unsigned bad_mask = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_ATTN || t->backward != backward) continue;
    pairs += t->pairs;
    const plan_seg *q = &g_array_index(p->segs, plan_seg, t->seg_off);
    const plan_seg *k = q + t->n_qseg;
    for (uint32_t a = 0; a < t->n_qseg; a++)
      for (uint32_t b = 0; b < t->n_kseg; b++) {
        CU_ASSERT(q[a].start % g == 0 && q[a].len % g == 0);
        CU_ASSERT(k[b].start % g == 0 && k[b].len % g == 0);
        for (uint64_t qb = q[a].start / g; qb < (q[a].start + q[a].len) / g; qb++)
          for (uint64_t kb = k[b].start / g; kb < (k[b].start + k[b].len) / g; kb++) {
            if (!t->causal) { full[qb * nb + kb]++; continue; }
            if (kb < qb) full[qb * nb + kb]++;
            else if (kb == qb) diag[qb]++;
          }
        /* a full kernel must never touch the diagonal or above under causal */
        if (w->causal && !t->causal)
          for (uint64_t qb = q[a].start / g; qb < (q[a].start + q[a].len) / g; qb++)
            for (uint64_t kb = k[b].start / g; kb < (k[b].start + k[b].len) / g; kb++)
              bad_mask += kb >= qb;
        if (!w->causal && t->causal) bad_mask++;
      }
  }
  unsigned wrong = 0;
  for (uint64_t qb = 0; qb < nb; qb++)
    for (uint64_t kb = 0; kb < nb; kb++) {
      uint32_t want_full = !w->causal || kb < qb;
      if (full[qb * nb + kb] != want_full) wrong++;
    }
  for (uint64_t qb = 0; qb < nb; qb++)
    if (diag[qb] != (w->causal ? 1u : 0u)) wrong++;
  if (wrong || bad_mask)
    fprintf(stderr, "%s: %u blocks wrong, %u kernels with a wrong mask\n", what, wrong, bad_mask);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(bad_mask, 0);
  double S = (double)w->seq_len;
  double want_pairs = w->causal ? S * (S + 1) / 2 : S * S;
  CU_ASSERT_DOUBLE_EQUAL(pairs, want_pairs, 0.5);
  g_free(full);
  g_free(diag);
}

/* Bytes: per GPU sent == received; in forward each GPU moves the KV of
 * (n-1) chunks' worth; backward adds the dK/dV that follows (n chunks, in
 * the accumulators' precision: float32 here, twice the bf16 KV). */
static void check_bytes(const plan *p, const workload *w, const char *what) {
  uint32_t n = w->gpus;
  double *sent = g_new0(double, n), *recv = g_new0(double, n), total = 0;
  for (guint i = 0; i < p->xfers->len; i++) {
    const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, i);
    CU_ASSERT(x->src != x->dst && x->src < n && x->dst < n);
    sent[x->src] += x->bytes;
    recv[x->dst] += x->bytes;
    total += x->bytes;
  }
  double chunk = workload_kv_bytes(w, (double)w->seq_len / n);
  double per_gpu = 0;
  if (w->pass != PASS_BWD) per_gpu += (n - 1) * chunk;
  double grad = w->grad_bytes ? (double)w->grad_bytes / w->elem_bytes : 1.0;
  if (w->pass != PASS_FWD) per_gpu += (n - 1) * chunk + n * chunk * grad;
  for (uint32_t g = 0; g < n; g++) {
    CU_ASSERT_DOUBLE_EQUAL(sent[g], recv[g], 1e-6 * chunk);
    CU_ASSERT_DOUBLE_EQUAL(sent[g], per_gpu, 1e-6 * chunk);
  }
  CU_ASSERT_DOUBLE_EQUAL(total, per_gpu * n, 1e-6 * chunk * n);
  (void)what;
  g_free(sent);
  g_free(recv);
}

/* Plan sanity: dependencies point backwards; in forward every GPU merges
 * one block output less than it has kernels. */
static void check_structure(const plan *p, const workload *w) {
  uint32_t *attn = g_new0(uint32_t, w->gpus), *merge = g_new0(uint32_t, w->gpus);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    for (uint32_t d = 0; d < t->n_dep; d++) CU_ASSERT(p->deps[t->dep_off + d] < i);
    if (t->kind == TASK_ATTN && !t->backward) attn[t->gpu]++;
    if (t->kind == TASK_MERGE) merge[t->gpu]++;
  }
  for (uint32_t g = 0; g < w->gpus; g++)
    if (w->pass != PASS_BWD) CU_ASSERT_EQUAL(merge[g] + 1, attn[g]);
  g_free(attn);
  g_free(merge);
}

/* per_node: GPUs per node (0: one node), for tasp-mkm's node chains */
static void check_sched_nodes(const sched_ops *s, uint32_t n, uint32_t per_node, bool causal,
                              pass_kind pass) {
  topology *t = complete_topo(n);
  if (per_node) t->gpus_per_node = per_node;
  /* granularity: one piece of TASP's causal layout (2n(n-1) pieces) */
  uint64_t g = 3, pieces = 2 * (uint64_t)n * (n > 1 ? n - 1 : 1);
  workload w = shape(n, g * pieces, causal, pass);
  g_autofree char *what = g_strdup_printf("%s n=%u %s %s", s->name, n,
                                          causal ? "causal" : "full", pass == PASS_FWD ? "fwd" : "fwdbwd");
  g_autoptr(GError) err = NULL;
  CU_ASSERT_TRUE(s->check(&w, t, &err));
  plan *p = s->build(&w, t, true);
  /* TASP pieces are 1/k of a chunk; n = 4, 6 use fewer cycles: finer grid */
  uint64_t gran = g;
  if ((s == &sched_tasp || s == &sched_tasp_mkm) && (n % 2 == 0 || per_node)) gran = 1;
  if (pass == PASS_FWD || pass == PASS_FWDBWD) check_coverage(p, &w, gran, what, false);
  if (pass != PASS_FWD) check_coverage(p, &w, gran, what, true);
  check_bytes(p, &w, what);
  check_structure(p, &w);
  plan_free(p);
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
      check_bytes(p, &w, "given cycles");
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
    for (uint32_t n = 2; n <= 5; n++)
      for (int c = 0; c < 2; c++) check_sched(*s, n, c, PASS_FWDBWD);
}

/* Ring causal is unbalanced: GPU i computes i full blocks and one causal
 * block; zigzag and tasp give every GPU the same pairs. */
static void t_balance(void) {
  uint32_t n = 8;
  topology *t = complete_topo(n);
  workload w = shape(n, 2 * 8 * 7 * 4, true, PASS_FWD);
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    plan *p = (*s)->build(&w, t, false);
    double pairs[8] = {0};
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *k = plan_task_at(p, i);
      if (k->kind == TASK_ATTN) pairs[k->gpu] += k->pairs;
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
                                    {NULL, NULL}};
  return test_run("sched", cases);
}
