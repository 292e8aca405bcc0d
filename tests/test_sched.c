/* sched: every schedule computes exactly the pairs the global mask needs,
 * with the right mask, and moves as many bytes as it receives. */
#include <string.h>

#include "compute.h"
#include "exec.h"
#include "layer.h"
#include "plan_buf.h"
#include "scenario.h"
#include "sched/hamilton.h"
#include "sched/ulysses.h"
#include "sched/sched.h"
#include "search_bound.h"
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

/* What an alias (TransformerEngine's names) runs. */
static const sched_ops *target(const sched_ops *s) { return s->alias_of ? s->alias_of : s; }

static bool ulysses_family(const sched_ops *s) {
  s = target(s);
  return s == &sched_ulysses || s == &sched_usp || s == &sched_usp_zigzag;
}

static bool ring_family(const sched_ops *s) {
  s = target(s);
  return s == &sched_ring || s == &sched_zigzag || s == &sched_tasp || s == &sched_tasp_mkm ||
         s == &sched_stripe || s == &sched_double_ring;
}

/* Heads: 2 query heads over 1 KV head; the Ulysses family needs them to
 * divide among the GPUs, so it gets 2n (KV heads 1: replicated). */
static workload shape(uint32_t n, uint64_t seq, bool causal, pass_kind pass) {
  workload w = {.gpus = n, .seq_len = seq, .batch = 1, .heads = 2, .kv_heads = 1,
                .head_dim = 4, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                .causal = causal, .pass = pass, .linear_block = 4};
  return w;
}

/* Global block matrix per head: full[h][qb][kb] of unmasked computations,
 * diag[h][qb] of causal diagonal ones, at granularity g tokens; backward
 * keeps two, the queries' gradients (dQ) and the keys' (dK, dV).  A
 * softmax kernel or a linear intra-chunk task counts in both, under its
 * mask; a linear apply (a state of keys applied to queries; backward dQ)
 * counts unmasked in the queries' matrix, a backward linear state (keys'
 * dK, dV from queries' dM) in the keys'; a forward state covers nothing yet
 * (it has no queries).  Every (query block, key block, head) the mask needs
 * is computed exactly once, with the right mask, and nothing else: for
 * linear layers, each query block receives exactly the states of the key
 * blocks its mask allows.  Softmax pairs and FLOPs add up to the analytic
 * totals (linear FLOPs: check_linear_flops). */
typedef struct {
  uint32_t *full, *diag;
} cover;

static void mark(cover *c, const workload *w, uint64_t nb, uint64_t g, const plan_op *op,
                 bool masked, const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk,
                 unsigned *bad_mask) {
  for (uint32_t a = 0; a < nq; a++)
    for (uint32_t b = 0; b < nk; b++) {
      CU_ASSERT(q[a].start % g == 0 && q[a].len % g == 0);
      CU_ASSERT(k[b].start % g == 0 && k[b].len % g == 0);
      for (uint64_t h = op->head_off; h < op->head_off + op->heads; h++)
        for (uint64_t qb = q[a].start / g; qb < (q[a].start + q[a].len) / g; qb++)
          for (uint64_t kb = k[b].start / g; kb < (k[b].start + k[b].len) / g; kb++) {
            if (!masked) c->full[(h * nb + qb) * nb + kb]++;
            else if (kb < qb) c->full[(h * nb + qb) * nb + kb]++;
            else if (kb == qb) c->diag[h * nb + qb]++;
            /* unmasked work must never touch the diagonal or above under causal */
            if (w->causal && !masked) *bad_mask += kb >= qb;
          }
      if (!w->causal && masked) (*bad_mask)++;
    }
}

static unsigned wrong_blocks(const cover *c, const workload *w, uint64_t nb) {
  unsigned wrong = 0;
  for (uint64_t h = 0; h < w->heads; h++)
    for (uint64_t qb = 0; qb < nb; qb++) {
      for (uint64_t kb = 0; kb < nb; kb++)
        wrong += c->full[(h * nb + qb) * nb + kb] != (uint32_t)(!w->causal || kb < qb);
      wrong += c->diag[h * nb + qb] != (w->causal ? 1u : 0u);
    }
  return wrong;
}

/* nominal: the kernels' nominal FLOPs (a causal kernel's counted as half
 * its sq x sk) add up to the mask's; not so for striped attention, whose
 * causal blocks all sit on a shifted diagonal (t_stripe_closed_form).
 * The model FLOPs (layer_op_model_flops) add up to the mask's for every
 * scheduler, striped attention's included. */
static void check_coverage(const plan *p, const workload *w, uint64_t g, const char *what,
                           bool backward, bool nominal) {
  uint64_t nb = w->seq_len / g, H = w->heads;
  cover dq = {g_new0(uint32_t, H * nb * nb), g_new0(uint32_t, H * nb)};
  cover dkv = {g_new0(uint32_t, H * nb * nb), g_new0(uint32_t, H * nb)};
  double pairs = 0, flops = 0, model = 0;
  unsigned bad_mask = 0, bad_heads = 0, bad_kind = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE || t->op.backward != backward) continue;
    const plan_op *op = &t->op;
    bool attn = op->kind == OP_ATTN || op->kind == OP_LIN_INTRA;
    if (!attn && op->kind != OP_LIN_APPLY && op->kind != OP_LIN_STATE) continue;
    /* a layer's kernels are of its own kind */
    bad_kind += (op->kind == OP_ATTN) != (w->attention == ATTN_SOFTMAX);
    if (op->kind == OP_ATTN) {
      pairs += op->pairs * op->heads;
      flops += compute_op_flops(op);
      model += layer_op_model_flops(op);
    }
    if (op->head_off + op->heads > H || op->heads == 0) { bad_heads++; continue; }
    const plan_seg *q = &g_array_index(p->segs, plan_seg, t->seg_off);
    const plan_seg *k = q + t->n_qseg;
    if (attn) {
      mark(&dq, w, nb, g, op, op->causal, q, t->n_qseg, k, t->n_kseg, &bad_mask);
      mark(&dkv, w, nb, g, op, op->causal, q, t->n_qseg, k, t->n_kseg, &bad_mask);
    } else if (op->kind == OP_LIN_APPLY) {
      bad_mask += op->causal;
      mark(&dq, w, nb, g, op, false, q, t->n_qseg, k, t->n_kseg, &bad_mask);
    } else {
      bad_mask += op->causal;
      if (!backward) CU_ASSERT_EQUAL(t->n_qseg, 0); /* a forward state has no queries yet */
      mark(&dkv, w, nb, g, op, false, q, t->n_qseg, k, t->n_kseg, &bad_mask);
    }
  }
  unsigned wrong = wrong_blocks(&dq, w, nb), wrong_k = backward ? wrong_blocks(&dkv, w, nb) : 0;
  if (wrong || wrong_k || bad_mask || bad_heads || bad_kind)
    fprintf(stderr, "%s: %u query blocks and %u key blocks wrong, %u tasks with a wrong mask, "
            "%u with bad heads, %u of the wrong kind\n", what, wrong, wrong_k, bad_mask,
            bad_heads, bad_kind);
  CU_ASSERT_EQUAL(wrong, 0);
  CU_ASSERT_EQUAL(wrong_k, 0);
  CU_ASSERT_EQUAL(bad_mask, 0);
  CU_ASSERT_EQUAL(bad_heads, 0);
  CU_ASSERT_EQUAL(bad_kind, 0);
  if (w->attention == ATTN_SOFTMAX) {
    double S = (double)w->seq_len;
    CU_ASSERT_DOUBLE_EQUAL(pairs, H * (w->causal ? S * (S + 1) / 2 : S * S), 0.5);
    /* nominal FLOPs: 4·B·H·D per pair, the causal diagonal counted half */
    double mask_flops = 4.0 * w->batch * H * w->head_dim * S * S / (w->causal ? 2 : 1);
    if (nominal) CU_ASSERT_CLOSE(flops, mask_flops, 1e-12);
    CU_ASSERT_CLOSE(model, mask_flops, 1e-12);
  }
  g_free(dq.full);
  g_free(dq.diag);
  g_free(dkv.full);
  g_free(dkv.diag);
}

/* The plan p stands for, transfer by transfer and task by task. */
static plan *expanded(plan *p) {
  plan *q = plan_expand(p);
  plan_free(p);
  return q;
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
static void check_ring_family(const plan *p, const workload *w, double dkv_chunks) {
  uint32_t n = w->gpus;
  double chunk = workload_kv_bytes(w, (double)w->seq_len / n), per_gpu = 0;
  if (w->pass != PASS_BWD) per_gpu += (n - 1) * chunk;
  if (w->pass != PASS_FWD) per_gpu += (n - 1) * chunk + dkv_chunks * chunk;
  uint32_t *attn = g_new0(uint32_t, n), *merge = g_new0(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), per_gpu, 1e-9);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE || t->op.backward) continue;
    if (t->op.kind == OP_ATTN) attn[t->gpu]++;
    if (t->op.kind == OP_MERGE) merge[t->gpu]++;
  }
  /* linear layers add block outputs: nothing to merge */
  for (uint32_t g = 0; g < n; g++)
    if (w->pass != PASS_BWD)
      CU_ASSERT_EQUAL(merge[g] + (w->attention == ATTN_SOFTMAX), attn[g]);
  g_free(attn);
  g_free(merge);
}

/* Ulysses and USP: the all-to-alls move (u-1)/u of Q, K, V and the output
 * (forward) and of dO, dQ, dK, dV (backward, bf16), KV heads replicated up
 * to u; plus, for USP, the ring part's KV of (r-1) ring chunks forward and
 * r accumulators backward.  Calls: 4 per direction, 2 when fused. */
static void check_ulysses_family(const plan *p, const workload *w, uint32_t u,
                                 double dkv_chunks) {
  uint32_t n = w->gpus, r = n / u;
  double c = (double)w->seq_len / n, e = w->elem_bytes, hd = (double)w->head_dim;
  double kvh = w->kv_heads < u ? u : w->kv_heads;
  double qo = c * w->heads * hd * e, kv = c * kvh * hd * e;
  double a2a = u > 1 ? (2 * qo + 2 * kv) * (u - 1) / u : 0;
  double ring = 2.0 * c * u * (kvh / u) * hd * e; /* KV a GPU passes along its ring */
  double per_gpu = 0;
  if (w->pass != PASS_BWD) per_gpu += a2a + (r - 1) * ring;
  if (w->pass != PASS_FWD)
    per_gpu += a2a + (r > 1 ? (r - 1) * ring + dkv_chunks * ring : 0);
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), per_gpu, 1e-9);
  unsigned calls = 0;
  for (guint i = 0; i < p->tasks->len; i++)
    calls += plan_task_at(p, i)->kind == TASK_COMM &&
             plan_task_at(p, i)->api == COMM_ALL_TO_ALL;
  unsigned per_dir = u < 2 ? 0 : sched_opt_num(w, &ulysses_opt_fused) ? 2 : 4;
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

/* Whether `anc` is `t` or one of its predecessors, through dependencies. */
static bool reaches(const plan *p, uint32_t t, uint32_t anc) {
  g_autofree uint8_t *seen = g_new0(uint8_t, p->tasks->len);
  g_autoptr(GArray) stack = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_array_append_val(stack, t);
  while (stack->len) {
    uint32_t x = g_array_index(stack, uint32_t, stack->len - 1);
    g_array_set_size(stack, stack->len - 1);
    if (x == anc) return true;
    if (x < anc || seen[x]) continue; /* dependencies point backwards */
    seen[x] = 1;
    const plan_task *k = plan_task_at(p, x);
    g_array_append_vals(stack, p->deps + k->dep_off, k->n_dep);
  }
  return false;
}

/* Linear layers: the FLOPs of a pass against an analytic total from the
 * method's algorithm, per head and batch with c = S/n tokens per GPU:
 * intra-chunk 4cD² (+ 4cbD causal, blocks of b), a state or an apply 2cD²;
 * backward 2.5x a causal intra-chunk task, 2x the others.
 *   lasp, lasp2: causal n intra + n states + (n-1) applies; bidirectional
 *     n states + n applies (no intra); backward causal n intra, n-1
 *     applies, n-1 states; bidirectional n of each.
 *   ring: n intra + one state and one apply per (GPU, earlier chunk), or
 *     per (GPU, other chunk) bidirectional.
 *   ulysses: one intra-chunk task over the whole sequence on every head. */
static void check_linear_flops(const plan *p, const workload *w, const sched_ops *s,
                               bool backward) {
  double n = w->gpus, S = (double)w->seq_len, c = S / n, D = w->head_dim;
  bool causal = w->causal;
  double b = fmin(w->linear_block, c), rb = backward ? (causal ? 2.5 : 2) : 1,
         r = backward ? 2 : 1;
  double intra = (4 * c * D * D + (causal ? 4 * c * b * D : 0)) * rb, sa = 2 * c * D * D * r;
  double want;
  if (s == &sched_ulysses)
    want = (4 * S * D * D + (causal ? 4 * S * fmin(w->linear_block, S) * D : 0)) * rb;
  else if (s == &sched_ring)
    want = n * intra + (causal ? n * (n - 1) / 2 : n * (n - 1)) * 2 * sa;
  else if (causal)
    want = n * intra + (backward ? 2 * (n - 1) : (2 * n - 1)) * sa;
  else
    want = 2 * n * sa;
  want *= w->batch * w->heads;
  double got = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind == TASK_COMPUTE && t->op.backward == backward) got += compute_op_flops(&t->op);
  }
  CU_ASSERT_CLOSE(got, want, 1e-12);
}

static unsigned count_api(const plan *p, comm_api api) {
  unsigned k = 0;
  for (guint i = 0; i < p->tasks->len; i++)
    k += plan_task_at(p, i)->kind == TASK_COMM && plan_task_at(p, i)->api == api;
  return k;
}

/* LASP: only point-to-point hops, each one float32 B·H·D·D state from one
 * GPU to the next, one after the other (every hop waits for the one
 * before it).  Causal: n-1 hops up the ring forward (r to r+1), n-1 down it
 * backward (r to r-1); bidirectional: two laps, 2(n-1) hops r to r+1 mod n,
 * per pass. */
static void check_lasp(const plan *p, const workload *w) {
  uint32_t n = w->gpus;
  double Z = workload_state_bytes(w);
  CU_ASSERT_DOUBLE_EQUAL(Z, 4.0 * w->batch * w->heads * w->head_dim * w->head_dim, 0);
  g_autoptr(GArray) hops = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMM || t->api == COMM_BARRIER) continue;
    CU_ASSERT_EQUAL(t->api, COMM_P2P);
    CU_ASSERT_EQUAL_FATAL(t->n_xfer, 1);
    CU_ASSERT_DOUBLE_EQUAL(g_array_index(p->xfers, plan_xfer, t->xfer_off).bytes, Z, 0);
    g_array_append_val(hops, i);
  }
  uint32_t per_pass = w->causal ? n - 1 : 2 * (n - 1), passes = w->pass == PASS_FWDBWD ? 2 : 1;
  CU_ASSERT_EQUAL_FATAL(hops->len, per_pass * passes);
  for (uint32_t h = 0; h < hops->len; h++) {
    const plan_task *t = plan_task_at(p, g_array_index(hops, uint32_t, h));
    const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, t->xfer_off);
    uint32_t k = h % per_pass;
    bool bwd = w->pass == PASS_BWD || h >= per_pass;
    CU_ASSERT_EQUAL(t->grads, bwd);
    if (!w->causal) {
      CU_ASSERT(x->src == k % n && x->dst == (k + 1) % n);
    } else if (!bwd) {
      CU_ASSERT(x->src == k && x->dst == k + 1);
    } else {
      CU_ASSERT(x->src == n - 1 - k && x->dst == n - 2 - k);
    }
    if (k > 0) /* serial: each hop waits for the one before */
      CU_ASSERT_TRUE(reaches(p, g_array_index(hops, uint32_t, h), g_array_index(hops, uint32_t, h - 1)));
  }
}

/* LASP-2: one all-gather of the float32 B·H·D·D states per pass (every GPU
 * sends the n-1 shards around NCCL's ring), nothing else; causal forward,
 * the intra-chunk work does not wait for the all-gather (it overlaps) and
 * every apply does. */
static void check_lasp2(const plan *p, const workload *w) {
  uint32_t n = w->gpus, passes = w->pass == PASS_FWDBWD ? 2 : 1;
  double Z = workload_state_bytes(w);
  CU_ASSERT_EQUAL(count_api(p, COMM_ALL_GATHER), passes);
  CU_ASSERT_EQUAL(count_api(p, COMM_P2P) + count_api(p, COMM_ALL_TO_ALL) +
                  count_api(p, COMM_REDUCE_SCATTER) + count_api(p, COMM_ALL_REDUCE), 0);
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), passes * (n - 1) * Z, 1e-12);
  int64_t ag = -1;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind == TASK_COMM && t->api == COMM_ALL_GATHER) {
      CU_ASSERT_EQUAL(t->grads, w->pass == PASS_BWD || ag >= 0);
      ag = i;
      continue;
    }
    if (t->kind != TASK_COMPUTE || t->op.backward || ag < 0) continue;
    if (t->op.kind == OP_LIN_INTRA) CU_ASSERT_FALSE(reaches(p, i, (uint32_t)ag));
    if (t->op.kind == OP_LIN_APPLY) CU_ASSERT_TRUE(reaches(p, i, (uint32_t)ag));
  }
}

/* TransformerEngine's all_gather: K and V gathered in two calls in each
 * pass (forward and again in backward: every GPU sends n-1 shards of each
 * around the ring), dK and dV reduce-scattered in two calls in the input
 * dtype (TransformerEngine ignores --grad-dtype: shape() asks float32);
 * every backward kernel waits for a gather issued after the forward ended,
 * and the forward hands on no gathered K, V (only the output and
 * log-sum-exp beside the inputs). */
static void check_te_allgather(const plan *p, const workload *w) {
  uint32_t n = w->gpus, passes = w->pass == PASS_FWDBWD ? 2 : 1;
  double shard = workload_kv_bytes(w, (double)w->seq_len / n), per_gpu = passes * (n - 1) * shard;
  if (w->pass != PASS_FWD) per_gpu += (n - 1) * shard;
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), per_gpu, 1e-9);
  CU_ASSERT_EQUAL(count_api(p, COMM_ALL_GATHER), 2 * passes);
  CU_ASSERT_EQUAL(count_api(p, COMM_REDUCE_SCATTER), w->pass != PASS_FWD ? 2u : 0u);
  int64_t bwd_ag = -1;
  unsigned bwd_kernels = 0;
  bool in_bwd = w->pass == PASS_BWD; /* fwdbwd: from the barrier between the passes on */
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    in_bwd |= t->kind == TASK_COMM && t->api == COMM_BARRIER;
    if (t->kind == TASK_COMM && t->api == COMM_ALL_GATHER && in_bwd && bwd_ag < 0) bwd_ag = i;
    if (t->kind != TASK_COMPUTE || t->op.kind != OP_ATTN || !t->op.backward) continue;
    bwd_kernels++;
    CU_ASSERT_TRUE(bwd_ag >= 0 && reaches(p, i, (uint32_t)bwd_ag));
  }
  CU_ASSERT_EQUAL(bwd_kernels, w->pass == PASS_FWD ? 0 : 2 * n);
  if (w->pass != PASS_FWD) return;
  double c = (double)w->seq_len / n, kept = 0;
  for (uint32_t b = 0; b < plan_buf_count(p); b++)
    if (plan_buf_at(p, b)->keep) kept += plan_buf_at(p, b)->bytes;
  double q = w->batch * c * w->heads * w->head_dim * w->elem_bytes, lse = 4.0 * w->batch * c * w->heads;
  CU_ASSERT_CLOSE(kept, 2 * q + shard + lse, 1e-12); /* q, out; k, v; lse */
}

static uint32_t usp_degree(const workload *w, const topology *t) {
  uint32_t u = sched_opt_num(w, &usp_opt_ulysses);
  return u ? u : ulysses_default_degree(w, t);
}

/* Memory balance: every buffer the plan declares is used, read only after
 * something wrote it, and freed after its last use or handed on (kept),
 * exactly once (exec_mem counts what does not hold as mem_errors); the
 * lockstep plan and the plan it stands for (plan_expand) reach the same
 * peak on every GPU; the peak holds at least the layer's inputs. */
static void check_memory(const sched_ops *s, const topology *t, const workload *w,
                         const char *what) {
  plan *p = s->build(w, t, false);
  CU_ASSERT_TRUE(plan_buf_count(p) > 0);
  exec_opts o = {0};
  exec_result *r = exec_run(p, t, &o);
  plan *q = plan_expand(p);
  exec_result *x = exec_run(q, t, &o);
  if (r->mem_errors || x->mem_errors)
    fprintf(stderr, "%s: %" G_GUINT64_FORMAT " memory errors\n", what, r->mem_errors);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  CU_ASSERT_EQUAL(x->mem_errors, 0);
  double inputs = (w->pass == PASS_FWD ? 1 : 2) * (double)w->batch * w->seq_len / w->gpus *
                  (w->heads + 2.0 * w->kv_heads) * w->head_dim * w->elem_bytes;
  for (uint32_t g = 0; g < w->gpus; g++) {
    CU_ASSERT_CLOSE(r->gpu_peak_bytes[g], x->gpu_peak_bytes[g], 1e-12);
    CU_ASSERT_TRUE(r->gpu_peak_bytes[g] >= inputs);
  }
  CU_ASSERT_TRUE(r->peak_live->len > 0);
  /* the expansion keeps the barrier between the passes, and so the bytes
   * the forward keeps for the backward (the search's memory bound) */
  CU_ASSERT_EQUAL(q->pass_barrier == UINT32_MAX, p->pass_barrier == UINT32_MAX);
  if (p->pass_barrier != UINT32_MAX) {
    CU_ASSERT_EQUAL(plan_task_at(q, q->pass_barrier)->api, COMM_BARRIER);
    g_autofree double *kp = g_new(double, w->gpus), *kq = g_new(double, w->gpus);
    CU_ASSERT_CLOSE(search_plan_kept_bytes(p, p->attn_out, kp),
                    search_plan_kept_bytes(q, q->attn_out, kq), 1e-12);
  }
  exec_result_free(r);
  exec_result_free(x);
  plan_free(q);
  plan_free(p);
}

/* double-ring's head-parallel degree (0: unset, none) */
static uint32_t dring_ulysses(const workload *w) {
  return sched_opt_num(w, sched_option_find("double_ring_ulysses"));
}

/* Double ring's dK/dV bytes per GPU, in KV chunks (of its r context
 * ranks): InternEvo's w hops around a window in float32, then bf16 (the
 * first window's sums cast) for the later rounds' hops and the o hops
 * across; r in the gradient dtype where there is one window or an inner
 * ring of one.  The inner size as doublering.c's default or option. */
static double dring_dkv_chunks(const workload *w, const topology *t) {
  uint32_t u = dring_ulysses(w) ? dring_ulysses(w) : 1, r = w->gpus / u;
  uint32_t inner = sched_opt_num(w, sched_option_find("double_ring_inner"));
  bool cf = u > 1 && sched_opt_num(w, sched_option_find("double_ring_context_first"));
  uint32_t node = (t->gpus_per_node ? t->gpus_per_node : t->n_gpus) / (cf ? 1 : u);
  for (uint32_t v = r < node ? r : node; !inner; v--)
    if (v <= 1 || r % v == 0) inner = v > 1 ? v : 1;
  uint32_t outer = r / inner;
  if (inner > 1 && outer > 1) return inner * grad_scale(w) + (outer - 1) * inner + outer;
  return r * grad_scale(w);
}

/* per_node: GPUs per node (0: one node), for tasp-mkm's node chains */
static void check_sched_w(const sched_ops *s, topology *t, workload w) {
  g_autofree char *what = g_strdup_printf("%s n=%u u=%u %s %s %s", s->name, w.gpus,
                                          sched_opt_num(&w, &usp_opt_ulysses),
                                          w.causal ? "causal" : "full", pass_name(w.pass),
                                          w.attention == ATTN_LINEAR ? "linear" : "softmax");
  g_autoptr(GError) err = NULL;
  bool ok = sched_check(s, &w, t, &err);
  if (!ok) fprintf(stderr, "%s: %s\n", what, err->message);
  CU_ASSERT_TRUE_FATAL(ok);
  plan *p = expanded(s->build(&w, t, true));
  /* TASP pieces are 1/k of a chunk; n = 4, 6 use fewer cycles: finer grid */
  uint64_t gran = 3;
  if ((s == &sched_tasp || s == &sched_tasp_mkm) && (w.gpus % 2 == 0 || t->gpus_per_node < w.gpus))
    gran = 1;
  if (s == &sched_stripe) gran = 1; /* one token at stride N */
  bool nominal = s != &sched_stripe;
  if (w.pass != PASS_BWD) check_coverage(p, &w, gran, what, false, nominal);
  if (w.pass != PASS_FWD) check_coverage(p, &w, gran, what, true, nominal);
  check_generic(p, &w);
  if (w.attention == ATTN_LINEAR) {
    if (w.pass != PASS_BWD) check_linear_flops(p, &w, s == &sched_lasp2h ? &sched_lasp2 : s, false);
    if (w.pass != PASS_FWD) check_linear_flops(p, &w, s == &sched_lasp2h ? &sched_lasp2 : s, true);
  }
  s = target(s);
  if (s == &sched_lasp) check_lasp(p, &w);
  else if (s == &sched_lasp2 || (s == &sched_lasp2h && w.attention == ATTN_LINEAR))
    check_lasp2(p, &w);
  else if (s == &sched_lasp2h) check_allgather(p, &w);
  else if (s == &sched_double_ring && dring_ulysses(&w) > 1)
    check_ulysses_family(p, &w, dring_ulysses(&w), dring_dkv_chunks(&w, t));
  else if (s == &sched_double_ring) check_ring_family(p, &w, dring_dkv_chunks(&w, t));
  else if (ring_family(s)) check_ring_family(p, &w, w.gpus * grad_scale(&w));
  else if (s == &sched_ulysses) check_ulysses_family(p, &w, w.gpus, 0);
  else if (ulysses_family(s)) {
    uint32_t u = usp_degree(&w, t);
    check_ulysses_family(p, &w, u, w.gpus / u * grad_scale(&w));
  }
  else if (s == &sched_allgather) check_allgather(p, &w);
  else if (s == &sched_te_all_gather) check_te_allgather(p, &w);
  else if (s == &sched_tokenring) check_tokenring(p, &w);
  else CU_FAIL("a scheduler without family checks");
  plan_free(p);
  check_memory(s, t, &w, what);
}

static void check_sched_nodes(const sched_ops *s, uint32_t n, uint32_t per_node, bool causal,
                              pass_kind pass, attn_kind attention) {
  topology *t = complete_topo(n);
  if (per_node) t->gpus_per_node = per_node;
  /* granularity 3 x one piece of TASP's causal layout (2n(n-1) pieces) */
  workload w = shape(n, 3 * 2 * (uint64_t)n * (n > 1 ? n - 1 : 1), causal, pass);
  w.attention = attention;
  if (ulysses_family(s)) w.heads = 2 * n;
  check_sched_w(s, t, w);
  topo_free(t);
}

/* Every kind of layer the scheduler runs. */
static void check_sched(const sched_ops *s, uint32_t n, bool causal, pass_kind pass) {
  for (int a = 0; a < ATTN_KINDS; a++) {
    workload w = shape(n, 1, causal, pass);
    w.attention = (attn_kind)a;
    if (sched_check_attention(s, &w, NULL)) check_sched_nodes(s, n, 0, causal, pass, (attn_kind)a);
  }
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
        check_sched_nodes(&sched_tasp_mkm, n, m, causal, PASS_FWDBWD, ATTN_SOFTMAX);
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
      sched_opt_set_text(&w, sched_option_find("tasp_cycles"), cases[c].spec);
      g_autoptr(GError) err = NULL;
      CU_ASSERT_TRUE(sched_tasp.check(&w, t, &err));
      plan *p = expanded(sched_tasp.build(&w, t, true));
      CU_ASSERT(strstr(p->note->str, "given by tasp_cycles") != NULL);
      /* step 1 of the first cycle: GPU 0 sends to GPU 1 */
      bool to_next = false;
      for (guint i = 0; i < p->xfers->len; i++) {
        const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, i);
        to_next |= x->src == 0 && x->dst == 1;
      }
      CU_ASSERT_TRUE(to_next);
      check_coverage(p, &w, 1, "given cycles", false, true);
      check_coverage(p, &w, 1, "given cycles", true, true);
      check_ring_family(p, &w, w.gpus * grad_scale(&w));
      plan_free(p);
    }
    topo_free(t);
  }
}

/* Striped attention, in closed form: at step s GPU i attends the KV of
 * j = (i - s) mod N in a causal c x c block, with its diagonal (c(c+1)/2
 * pairs) where j <= i, without it (c(c-1)/2) where j > i; so GPU i
 * computes (i+1) c(c+1)/2 + (N-1-i) c(c-1)/2 pairs, within c of every
 * other GPU, and every hop goes to GPU i+1.  Each block is priced as the
 * causal call it is (c x c, or (c-1) x (c-1): its area len^2 / 2), and
 * counts in model FLOPs as the mask's pairs it holds: all of them, but
 * half the diagonal of GPU i's own block (j = i), the only one on the
 * sequence's diagonal; so the plan's model FLOPs are the mask's S^2 / 2
 * exactly, where the calls' areas are N(N-1)(2c-1)/4 pairs short. */
static void t_stripe_closed_form(void) {
  uint32_t n = 8;
  topology *t = complete_topo(n);
  workload w = shape(n, 8 * 1024, true, PASS_FWD);
  plan *p = sched_stripe.build(&w, t, false);
  double c = (double)w.seq_len / n, pairs[8] = {0}, area = 0, model = 0;
  double per_pair = 4.0 * w.batch * w.heads * w.head_dim;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *k = plan_task_at(p, i);
    if (k->kind != TASK_COMPUTE || k->op.kind != OP_ATTN) continue;
    uint32_t j = (k->gpu + n - k->step) % n;
    CU_ASSERT_TRUE(k->op.causal);
    CU_ASSERT_DOUBLE_EQUAL(k->op.pairs, j <= k->gpu ? c * (c + 1) / 2 : c * (c - 1) / 2, 0);
    double len = j <= k->gpu ? c : c - 1;
    CU_ASSERT_DOUBLE_EQUAL(compute_op_flops(&k->op), per_pair * len * len / 2, 0);
    double mask_pairs = j == k->gpu ? c * c / 2 : k->op.pairs;
    CU_ASSERT_DOUBLE_EQUAL(layer_op_model_flops(&k->op), per_pair * mask_pairs, 0);
    pairs[k->gpu] += k->op.pairs;
    area += compute_op_flops(&k->op);
    model += layer_op_model_flops(&k->op);
  }
  double S = (double)w.seq_len;
  CU_ASSERT_CLOSE(model, per_pair * S * S / 2, 1e-15);
  CU_ASSERT_CLOSE(area, per_pair * (S * S / 2 - n * (n - 1) * (2 * c - 1) / 4), 1e-15);
  CU_ASSERT_CLOSE(layer_model_flops(p), model, 1e-15);
  for (uint32_t g = 0; g < n; g++)
    CU_ASSERT_DOUBLE_EQUAL(pairs[g], (g + 1) * c * (c + 1) / 2 + (n - 1 - g) * c * (c - 1) / 2, 0);
  for (guint i = 0; i < p->xfers->len; i++) {
    const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, i);
    if (x->src == PLAN_ALL) continue; /* a pattern: checked below */
    CU_ASSERT_EQUAL(x->dst, (x->src + 1) % n);
  }
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *k = plan_task_at(p, i);
    const plan_pattern_info *pi = k->kind == TASK_COMM ? plan_task_pattern(p, k) : NULL;
    for (uint32_t a = 0; pi && a < pi->n_pairs; a++) {
      const plan_pair *pr = &g_array_index(p->pairs, plan_pair, pi->pair_off + a);
      CU_ASSERT_EQUAL(pr->dst, (pr->src + 1) % n);
    }
  }
  plan_free(p);
  topo_free(t);
}

/* Double ring, in closed form, as InternEvo runs it (calibrate.py
 * DoubleRing): with inner rings of w of n = 8 GPUs (o = n / w windows),
 * every GPU's forward makes (w - 1) o hops around its window ((b, p) to
 * (b, p+1)), none after a round's last step, and o - 1 across to the same
 * place of the next window ((b, p) to (b+1, p)); each hop across is issued
 * at a round's start (beside that step's kernels, after nothing of the
 * round) and the next round's first kernels wait for it; every GPU holds
 * every KV once (check_sched_w); an inner size that does not divide the SP
 * degree is refused naming the option; by default the inner ring is a
 * node. */
static void t_double_ring_closed_form(void) {
  uint32_t n = 8;
  topology *t = complete_topo(n);
  workload w = shape(n, 2 * n * 6, true, PASS_FWD);
  for (uint32_t inner = 2; inner <= 4; inner += 2) {
    uint32_t outer = n / inner;
    t->gpus_per_node = inner;
    check_sched_w(&sched_double_ring, t, w);
    plan *p = sched_double_ring.build(&w, t, false);
    g_autofree char *note = g_strdup_printf("double-ring: inner ring %u x outer ring %u", inner,
                                            outer);
    CU_ASSERT_STRING_EQUAL(p->note->str, note);
    uint32_t across = 0, around = 0, waited = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *k = plan_task_at(p, i);
      const plan_pattern_info *pi = k->kind == TASK_COMM ? plan_task_pattern(p, k) : NULL;
      if (!pi) continue;
      CU_ASSERT_EQUAL(pi->n_pairs, n);
      bool cross = false;
      for (uint32_t a = 0; a < pi->n_pairs; a++) {
        const plan_pair *pr = &g_array_index(p->pairs, plan_pair, pi->pair_off + a);
        uint32_t b = pr->src / inner, q = pr->src % inner;
        cross = pr->dst / inner != b;
        uint32_t want = cross ? ((b + 1) % outer) * inner + q : b * inner + (q + 1) % inner;
        CU_ASSERT_EQUAL(pr->dst, want);
        across += cross;
        around += !cross;
      }
      if (!cross) {
        CU_ASSERT_NOT_EQUAL((k->step + 1) % inner, 0);
        continue;
      }
      /* across: at a round's start, before all but its last round */
      CU_ASSERT_EQUAL(k->step % inner, 0);
      CU_ASSERT(k->step / inner + 1 < outer);
      for (uint32_t d = 0; d < k->n_dep; d++) {
        const plan_task *before = plan_task_at(p, p->deps[k->dep_off + d]);
        if (before->kind != TASK_COMPUTE) continue;
        if (plan_dep_is_overlap(k, d)) { CU_ASSERT_EQUAL(before->step, k->step); } /* beside it */
        else { CU_ASSERT(before->step < k->step); } /* after nothing of its round */
      }
      /* the next round's kernels wait for it */
      for (guint j = i + 1; j < p->tasks->len; j++) {
        const plan_task *c = plan_task_at(p, j);
        if (c->kind != TASK_COMPUTE || c->op.kind != OP_ATTN || c->step != k->step + inner)
          continue;
        bool found = false;
        for (uint32_t d = 0; d < c->n_dep; d++) found |= p->deps[c->dep_off + d] == i;
        CU_ASSERT_TRUE(found);
        waited++;
      }
    }
    CU_ASSERT_EQUAL(across, n * (outer - 1));
    CU_ASSERT_EQUAL(around, n * (inner - 1) * outer);
    CU_ASSERT_EQUAL(waited, n * (outer - 1)); /* one causal block per GPU per step */
    plan_free(p);
  }
  t->gpus_per_node = 4;
  /* a given inner size: 2 divides 8; 3 does not */
  sched_opt_set_num(&w, sched_option_find("double_ring_inner"), 2);
  plan *p = sched_double_ring.build(&w, t, false);
  CU_ASSERT_STRING_EQUAL(p->note->str, "double-ring: inner ring 2 x outer ring 4");
  plan_free(p);
  sched_opt_set_num(&w, sched_option_find("double_ring_inner"), 3);
  g_autoptr(GError) err = NULL;
  CU_ASSERT_FALSE(sched_double_ring.check(&w, t, &err));
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_EQUAL(err->code, TASP_ERROR_SP);
  CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "inner ring's size 3 does not divide the SP "
                                              "degree 8 (double_ring_inner)"));
  topo_free(t);
}

/* Double ring's backward, in closed form, as InternEvo runs it
 * (calibrate.py DoubleRing.run_backward): the KV moves as in forward; the
 * dK/dV makes w hops around its window a round (the last brings it to the
 * GPU that started the round with its KV) and then one across to the same
 * place of the next window, o rounds: o (w + 1) hops per GPU, not n; each
 * hop across leaves once the round's last hop around is done, and the next
 * round's first kernels wait for that hop around too; the first round's
 * hops around carry float32 sums, every later hop bf16 (InternEvo casts
 * the first window's sums). */
static void t_double_ring_backward(void) {
  uint32_t n = 8;
  topology *t = complete_topo(n);
  workload w = shape(n, 2 * n * 6, true, PASS_BWD);
  double chunk = workload_kv_bytes(&w, (double)w.seq_len / n), gs = grad_scale(&w);
  CU_ASSERT_EQUAL(gs, 2.0);
  for (uint32_t inner = 2; inner <= 4; inner += 2) {
    uint32_t outer = n / inner;
    t->gpus_per_node = inner;
    check_sched_w(&sched_double_ring, t, w);
    workload full = w; /* lockstep steps: the same hops */
    full.causal = false;
    full.pass = PASS_FWDBWD;
    check_sched_w(&sched_double_ring, t, full);
    plan *p = sched_double_ring.build(&w, t, false);
    uint32_t around = 0, across = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *k = plan_task_at(p, i);
      const plan_pattern_info *pi = k->kind == TASK_COMM ? plan_task_pattern(p, k) : NULL;
      if (!pi || !k->grads) continue;
      const plan_pair *pr = &g_array_index(p->pairs, plan_pair, pi->pair_off);
      bool cross = pr->dst / inner != pr->src / inner;
      plan_xfer x = plan_xfer_at(p, k, 0);
      if (!cross) {
        CU_ASSERT_EQUAL(pr->dst, pr->src / inner * inner + (pr->src + 1) % inner);
        CU_ASSERT_DOUBLE_EQUAL(x.bytes, k->step < inner ? chunk * gs : chunk, 1e-9);
        around++;
        continue;
      }
      CU_ASSERT_EQUAL(pr->dst, (pr->src / inner + 1) % outer * inner + pr->src % inner);
      CU_ASSERT_DOUBLE_EQUAL(x.bytes, chunk, 1e-9);
      CU_ASSERT_EQUAL(k->step % inner, inner - 1); /* after a round */
      across++;
      /* after the round's last hop around, which the next kernels wait for */
      int64_t last_around = -1;
      for (uint32_t d = 0; d < k->n_dep; d++) {
        const plan_task *b = plan_task_at(p, p->deps[k->dep_off + d]);
        if (b->kind == TASK_COMM && b->grads && b->step == k->step)
          last_around = p->deps[k->dep_off + d];
      }
      CU_ASSERT_FATAL(last_around >= 0);
      unsigned waiting = 0;
      for (guint j = i + 1; j < p->tasks->len; j++) {
        const plan_task *c = plan_task_at(p, j);
        if (c->kind != TASK_COMPUTE || c->op.kind != OP_ATTN || c->step != k->step + 1) continue;
        bool found = false;
        for (uint32_t d = 0; d < c->n_dep; d++) found |= p->deps[c->dep_off + d] == last_around;
        CU_ASSERT_TRUE(found);
        waiting++;
      }
      CU_ASSERT_EQUAL(waiting, k->step + 1 < n ? n : 0);
    }
    CU_ASSERT_EQUAL(around, n);   /* groups: one a step */
    CU_ASSERT_EQUAL(across, outer); /* one a round, the last one home */
    plan_free(p);
    p = expanded(sched_double_ring.build(&w, t, false));
    double dkv = inner * chunk * gs + ((outer - 1) * inner + outer) * chunk;
    for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(sent_by(p, g), (n - 1) * chunk + dkv, 1e-9);
    plan_free(p);
  }
  topo_free(t);
}

/* Double ring with a head-parallel degree u (LoongTrain's 2D-Attention,
 * head-first): at every u, inner size and mask, fused or not, it covers
 * the mask exactly and moves USP's bytes (check_ulysses_family: the
 * all-to-alls' (u-1)/u of Q, K, V, O and their gradients, the ring's
 * r-1 chunks forward, r-1 and r accumulators backward over r = n/u
 * context ranks); every all-to-all stays inside a head-parallel group (u
 * consecutive GPUs head-first, GPUs r apart context-first), every ring hop
 * keeps its heads, goes to the next place of its window and across windows
 * once a round; refused where u
 * does not divide the SP degree or the heads, or the inner size the
 * context ranks. */
static void t_double_ring_heads(void) {
  const sched_opt *ou = sched_option_find("double_ring_ulysses");
  const sched_opt *oi = sched_option_find("double_ring_inner");
  const sched_opt *ocf = sched_option_find("double_ring_context_first");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ou);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ocf);
  CU_ASSERT_TRUE(sched_uses_option(&sched_double_ring, ou));
  for (uint32_t n = 2; n <= 8; n++)
    for (uint32_t u = 2; u <= n; u++) {
      if (n % u) continue;
      uint32_t r = n / u;
      for (uint32_t inner = 1; inner <= r; inner++) {
        if (r % inner) continue;
        for (int c = 0; c < 2; c++)
          for (int fused = 0; fused < 2; fused++)
          for (int cf = 0; cf < 2; cf++) {
            /* head-first: context rank g / u, heads g mod u; context-first:
             * context rank g mod r, heads g / r */
#define CTX(g) (cf ? (g) % r : (g) / u)
#define HEADS(g) (cf ? (g) / r : (g) % u)
            topology *t = complete_topo(n);
            t->gpus_per_node = cf ? inner : inner * u;
            workload w = shape(n, 3 * 2 * (uint64_t)n * (n - 1), c, PASS_FWDBWD);
            w.heads = 2 * n;
            w.kv_heads = fused ? n : 1;
            sched_opt_set_num(&w, ou, u);
            sched_opt_set_num(&w, &ulysses_opt_fused, (uint32_t)fused);
            sched_opt_set_num(&w, ocf, (uint32_t)cf);
            check_sched_w(&sched_double_ring, t, w); /* the default inner: a window = a node */
            sched_opt_set_num(&w, oi, inner);
            check_sched_w(&sched_double_ring, t, w);
            plan *p = expanded(sched_double_ring.build(&w, t, false));
            g_autofree char *note = g_strdup_printf(
                "double-ring: Ulysses degree %u x inner ring %u x outer ring %u%s", u, inner,
                r / inner, cf ? " (context-first)" : "");
            CU_ASSERT_STRING_EQUAL(p->note->str, note);
            unsigned a2a = 0, hops = 0, across = 0;
            for (guint i = 0; i < p->tasks->len; i++) {
              const plan_task *k = plan_task_at(p, i);
              if (k->kind != TASK_COMM) continue;
              for (uint32_t x = 0; x < k->n_xfer; x++) {
                const plan_xfer *tx = &g_array_index(p->xfers, plan_xfer, k->xfer_off + x);
                if (k->api == COMM_ALL_TO_ALL) {
                  CU_ASSERT_EQUAL(CTX(tx->src), CTX(tx->dst));
                  a2a++;
                  continue;
                }
                if (k->api != COMM_P2P) continue;
                hops++;
                uint32_t a = CTX(tx->src), b = CTX(tx->dst);
                CU_ASSERT_EQUAL(HEADS(tx->src), HEADS(tx->dst));
                bool cross = a / inner != b / inner || inner == 1;
                across += cross;
                /* place p + 1; a hop across keeps its place */
                uint32_t next = (a % inner + !cross) % inner;
                CU_ASSERT_EQUAL(b % inner, next);
                if (!cross) CU_ASSERT_EQUAL(b / inner, a / inner);
              }
            }
            CU_ASSERT_EQUAL(a2a, (fused ? 4u : 8u) * n * (u - 1)); /* fwd and bwd */
            /* forward r - 1 hops, backward r - 1 of KV and of dK, dV w + 1 a
             * round (r where one window or an inner ring of one), on every GPU */
            uint32_t outer = r / inner, dkv = inner > 1 && outer > 1 ? r + outer : r;
            CU_ASSERT_EQUAL(hops, (2 * r - 2 + dkv) * n * (r > 1));
            if (r / inner > 1) CU_ASSERT(across > 0);
            plan_free(p);
            topo_free(t);
#undef CTX
#undef HEADS
          }
      }
    }
  topology *t = complete_topo(8);
  workload w = shape(8, 2 * 8 * 6, true, PASS_FWD);
  w.heads = 16;
  g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL;
  sched_opt_set_num(&w, ou, 3);
  CU_ASSERT_FALSE(sched_double_ring.check(&w, t, &e1));
  CU_ASSERT_PTR_NOT_NULL(e1 ? strstr(e1->message, "head-parallel degree 3 does not divide the SP "
                                                  "degree 8 (double_ring_ulysses)") : NULL);
  sched_opt_set_num(&w, ou, 4);
  sched_opt_set_num(&w, oi, 3);
  CU_ASSERT_FALSE(sched_double_ring.check(&w, t, &e2));
  CU_ASSERT_PTR_NOT_NULL(e2 ? strstr(e2->message, "inner ring's size 3 does not divide the 2 "
                                                  "context ranks") : NULL);
  sched_opt_set_num(&w, oi, 0);
  w.heads = 6;
  CU_ASSERT_FALSE(sched_double_ring.check(&w, t, &e3));
  CU_ASSERT_PTR_NOT_NULL(e3 ? strstr(e3->message, "query heads") : NULL);
  topo_free(t);
}

/* TransformerEngine's cp_comm_type names run exactly the scheduler they
 * name: the same tasks and the same bytes from every GPU. */
static void t_te_aliases(void) {
  uint32_t n = 4;
  topology *t = complete_topo(n);
  t->gpus_per_node = 2;
  unsigned aliases = 0;
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    if (!(*s)->alias_of) continue;
    aliases++;
    for (int c = 0; c < 2; c++) {
      workload w = shape(n, 2 * n * 6, c, PASS_FWDBWD);
      w.heads = w.kv_heads = 2 * n;
      plan *a = expanded((*s)->build(&w, t, false));
      plan *b = expanded((*s)->alias_of->build(&w, t, false));
      CU_ASSERT_EQUAL(a->tasks->len, b->tasks->len);
      for (uint32_t g = 0; g < n; g++) CU_ASSERT_DOUBLE_EQUAL(sent_by(a, g), sent_by(b, g), 0);
      CU_ASSERT(sent_by(a, 0) > 0);
      plan_free(a);
      plan_free(b);
    }
  }
  CU_ASSERT_EQUAL(aliases, 3); /* p2p, a2a, a2a+p2p; all_gather is its own */
  CU_ASSERT_PTR_EQUAL(sched_find("a2a+p2p")->alias_of, &sched_usp_zigzag);
  CU_ASSERT_PTR_EQUAL(sched_find("p2p")->alias_of, &sched_zigzag);
  CU_ASSERT_PTR_EQUAL(sched_find("a2a")->alias_of, &sched_ulysses);
  CU_ASSERT_PTR_NULL(sched_find("all_gather")->alias_of);
  topo_free(t);
}

/* Packed documents: every (query, key) pair within a document computed
 * exactly once (keys at or before the query under a causal mask), none
 * across two, for random document lists; forward and backward. */
static void check_doc_coverage(const plan *p, const workload *w, bool backward) {
  uint64_t S = w->seq_len;
  g_autofree uint32_t *doc = g_new(uint32_t, S);
  for (uint32_t d = 0, t = 0; d < w->n_docs; d++)
    for (uint64_t i = 0; i < w->docs[d]; i++) doc[t++] = d;
  uint64_t H = w->heads;
  g_autofree uint32_t *seen = g_new0(uint32_t, H * S * S);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE || t->op.kind != OP_ATTN || t->op.backward != backward) continue;
    CU_ASSERT_FATAL(t->op.head_off + t->op.heads <= H);
    const plan_seg *q = &g_array_index(p->segs, plan_seg, t->seg_off), *k = q + t->n_qseg;
    /* flash attention's causal mask is aligned to the ends of the queries
     * and keys (sq < sk: bottom-right): it is the mask by position counted
     * below only where the keys end where the queries do */
    if (t->op.causal && t->n_qseg == 1 && t->n_kseg == 1)
      CU_ASSERT_EQUAL(q[0].start + q[0].len, k[0].start + k[0].len);
    for (uint64_t h = t->op.head_off; h < t->op.head_off + t->op.heads; h++)
      for (uint32_t a = 0; a < t->n_qseg; a++)
        for (uint32_t b = 0; b < t->n_kseg; b++)
          for (uint64_t x = q[a].start; x < q[a].start + q[a].len; x++)
            for (uint64_t y = k[b].start; y < k[b].start + k[b].len; y++)
              if (!t->op.causal || y <= x) seen[(h * S + x) * S + y]++;
  }
  unsigned wrong = 0;
  for (uint64_t h = 0; h < H; h++)
    for (uint64_t x = 0; x < S; x++)
      for (uint64_t y = 0; y < S; y++)
        wrong += seen[(h * S + x) * S + y] != (uint32_t)(doc[x] == doc[y] && (!w->causal || y <= x));
  CU_ASSERT_EQUAL(wrong, 0);
}

/* Packed documents: a GPU's kernels of one step of one pass (a ring step,
 * Ulysses' pass, an all-gather stride) are one varlen call over
 * cu_seqlens, as the varlen functions make one call a step: every task of
 * a call says how many it is one of (plan_op.call_parts), and a plan with
 * several documents has calls of several parts. */
static void check_varlen_calls(const plan *p, const workload *w, bool any) {
  uint32_t n = p->n_gpus, steps = 0, several = 0;
  for (guint i = 0; i < p->tasks->len; i++)
    steps = MAX(steps, plan_task_at(p, i)->step + 1);
  g_autofree uint32_t *count = g_new0(uint32_t, (gsize)n * steps * 2);
#define CALL(t) count[((t)->gpu * steps + (t)->step) * 2 + (t)->op.backward]
  for (int round = 0; round < 2; round++)
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *t = plan_task_at(p, i);
      if (t->kind != TASK_COMPUTE || t->op.kind != OP_ATTN) continue;
      CU_ASSERT_FATAL(t->gpu < n);
      if (round == 0) {
        CALL(t)++;
        continue;
      }
      CU_ASSERT_EQUAL(t->op.call_parts, CALL(t));
      several += CALL(t) > 1;
    }
#undef CALL
  /* rings and Ulysses hold a piece of every document; all-gather CP a
   * slice that may lie in one (any) */
  CU_ASSERT(w->n_docs < 2 || several > 0 || any);
}

/* A ring's forward with packed documents: a step's kernels are one varlen
 * call with one output for every document (ring_flash_attn's
 * *_varlen_forward), so the first step's call merges nothing (its output
 * is the first: update_out_and_lse takes it as it is) and every later
 * step's merges each of its parts into the running output: per GPU no
 * merge at its first step with kernels, then one per kernel. */
static void check_doc_merges(const plan *p) {
  uint32_t n = p->n_gpus, steps = 0;
  for (guint i = 0; i < p->tasks->len; i++) steps = MAX(steps, plan_task_at(p, i)->step + 1);
  g_autofree uint32_t *kernels = g_new0(uint32_t, (gsize)n * steps);
  g_autofree uint32_t *merges = g_new0(uint32_t, (gsize)n * steps);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE || t->op.backward || t->gpu >= n) continue;
    if (t->op.kind == OP_ATTN) kernels[t->gpu * steps + t->step]++;
    if (t->op.kind == OP_MERGE) merges[t->gpu * steps + t->step]++;
  }
  unsigned wrong = 0;
  for (uint32_t g = 0; g < n; g++) {
    bool first = true;
    for (uint32_t s = 0; s < steps; s++) {
      uint32_t k = kernels[g * steps + s], m = merges[g * steps + s];
      if (!k) continue;
      wrong += m != (first ? 0 : k);
      first = false;
    }
  }
  if (wrong) fprintf(stderr, "%u GPU steps with merges not as one call's\n", wrong);
  CU_ASSERT_EQUAL(wrong, 0);
}

static void t_docs_cover_mask(void) {
  GRand *rng = g_rand_new_with_seed(23);
  const sched_ops *runs[] = {&sched_ring, &sched_zigzag, &sched_te_p2p, &sched_ulysses,
                             &sched_te_a2a, &sched_allgather, &sched_usp, &sched_usp_zigzag};
  for (int iter = 0; iter < 12; iter++)
    for (size_t s = 0; s < G_N_ELEMENTS(runs); s++) {
      uint32_t n = (uint32_t)g_rand_int_range(rng, 2, 5), parts = 2 * n;
      uint32_t nd = (uint32_t)g_rand_int_range(rng, 1, 6);
      uint64_t docs[6], seq = 0;
      for (uint32_t d = 0; d < nd; d++) seq += docs[d] = parts * (uint64_t)g_rand_int_range(rng, 1, 5);
      topology *t = complete_topo(n);
      for (int c = 0; c < 2; c++) {
        workload w = shape(n, seq, c, PASS_FWDBWD);
        if (ulysses_family(runs[s])) w.heads = 2 * n;
        /* USP: a Ulysses degree that leaves a ring of 2 where n is even
         * (the documents then cut over the ring ranks), else all of n */
        if (target(runs[s]) == &sched_usp || target(runs[s]) == &sched_usp_zigzag)
          sched_opt_set_num(&w, &usp_opt_ulysses, n % 2 ? n : n / 2);
        w.docs = docs;
        w.n_docs = nd;
        g_autoptr(GError) err = NULL;
        CU_ASSERT_TRUE_FATAL(sched_check(runs[s], &w, t, &err));
        plan *p = expanded(runs[s]->build(&w, t, true));
        check_doc_coverage(p, &w, false);
        check_doc_coverage(p, &w, true);
        check_generic(p, &w);
        check_varlen_calls(p, &w, target(runs[s]) == &sched_allgather);
        if (target(runs[s]) != &sched_allgather) check_doc_merges(p);
        plan_free(p);
      }
      topo_free(t);
    }
  g_rand_free(rng);
  /* the others refuse, naming those that run documents; ring and zigzag
   * refuse documents that do not cut into their pieces */
  topology *t = complete_topo(4);
  uint64_t docs[] = {16, 48};
  workload w = shape(4, 64, true, PASS_FWD);
  w.docs = docs;
  w.n_docs = 2;
  w.heads = 8;
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    if ((*s)->docs || !sched_check_attention(*s, &w, NULL)) continue;
    g_autoptr(GError) err = NULL;
    CU_ASSERT_FALSE(sched_check(*s, &w, t, &err));
    CU_ASSERT_EQUAL(err->code, TASP_ERROR_DOCS);
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "schedulers that do: ring, zigzag, ulysses, usp, usp-zigzag, allgather, p2p, a2a"));
  }
  docs[0] = 12;
  docs[1] = 52;
  g_autoptr(GError) err = NULL;
  CU_ASSERT_TRUE(sched_check(&sched_ring, &w, t, &err)); /* 12 and 52 cut into 4 */
  CU_ASSERT_FALSE(sched_check(&sched_zigzag, &w, t, &err));
  CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "document 1 (12 tokens) does not divide into 8"));
  /* USP cuts documents over its ring ranks: with a Ulysses degree of 2,
   * 4 ring pieces (usp-zigzag) where zigzag on 4 GPUs needs 8 */
  sched_opt_set_num(&w, &usp_opt_ulysses, 2);
  g_clear_error(&err);
  CU_ASSERT_TRUE(sched_check(&sched_usp_zigzag, &w, t, &err));
  docs[0] = 14;
  docs[1] = 50;
  CU_ASSERT_FALSE(sched_check(&sched_usp_zigzag, &w, t, &err));
  CU_ASSERT(err && strstr(err->message, "document 1 (14 tokens) does not divide into 4"));
  g_clear_error(&err);
  CU_ASSERT_TRUE(sched_check(&sched_usp, &w, t, &err)); /* 14 and 50 cut into 2 */
  /* linear layers: no scheduler runs documents on them (the varlen
   * layouts are flash attention's), and none is named as one that does */
  w.attention = ATTN_LINEAR;
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    if (!sched_check_attention(*s, &w, NULL)) continue;
    g_clear_error(&err);
    CU_ASSERT_FALSE(sched_check(*s, &w, t, &err));
    CU_ASSERT_EQUAL(err->code, TASP_ERROR_DOCS);
    /* ring and ulysses say so in their own words */
    CU_ASSERT(strstr(err->message, "packed documents (--docs)") &&
                           strstr(err->message, "on softmax"));
    CU_ASSERT_PTR_NULL(strstr(err->message, "schedulers that do"));
  }
  topo_free(t);
}

/* All-gather CP on packed documents (llama3_flash_attn_varlen_func): the
 * sequence cut contiguously, K and V gathered in two calls per KV-head
 * stride, forward and again backward, dK and dV reduce-scattered in two:
 * each GPU sends 3 (N-1) shares of its K and V whatever the stride; every
 * kernel one document's piece on one stride's query heads, its queries
 * inside GPU g's contiguous slice. */
static void t_allgather_docs(void) {
  topology *t = complete_topo(4);
  uint64_t docs[] = {5, 30, 1, 20, 8};
  for (uint32_t stride = 0; stride <= 2; stride++)
    for (int c = 0; c < 2; c++) {
      workload w = shape(4, 64, c, PASS_FWDBWD);
      w.heads = 8;
      w.kv_heads = 4;
      w.docs = docs;
      w.n_docs = G_N_ELEMENTS(docs);
      sched_opt_set_num(&w, sched_option_find("allgather_heads_k_stride"), stride);
      g_autoptr(GError) err = NULL;
      CU_ASSERT_TRUE_FATAL(sched_check(&sched_allgather, &w, t, &err));
      plan *p = expanded(sched_allgather.build(&w, t, true));
      check_doc_coverage(p, &w, false);
      check_doc_coverage(p, &w, true);
      check_generic(p, &w);
      check_varlen_calls(p, &w, false);
      uint32_t strides = stride ? w.kv_heads / stride : 1, comms = 0;
      double share = workload_kv_bytes(&w, 16);
      for (uint32_t g = 0; g < 4; g++) CU_ASSERT_DOUBLE_EQUAL(sent_by(p, g), 3 * 3 * share, 1e-9);
      for (guint i = 0; i < p->tasks->len; i++) {
        const plan_task *k = plan_task_at(p, i);
        if (k->kind == TASK_COMM && k->api != COMM_BARRIER) comms++;
        if (k->kind != TASK_COMPUTE || k->op.kind != OP_ATTN) continue;
        const plan_seg *q = &g_array_index(p->segs, plan_seg, k->seg_off);
        CU_ASSERT(k->n_qseg == 1 && k->n_kseg == 1);
        CU_ASSERT(q->start >= k->gpu * 16 && q->start + q->len <= (k->gpu + 1) * 16);
        CU_ASSERT_EQUAL(k->op.heads, w.heads / strides);
      }
      CU_ASSERT_EQUAL(comms, 6 * strides); /* forward 2 gathers; backward 2 and 2 scatters */
      plan_free(p);
    }
  /* the stride divides the KV heads, and is for documents only */
  workload w = shape(4, 64, true, PASS_FWD);
  w.heads = 8;
  w.kv_heads = 4;
  sched_opt_set_num(&w, sched_option_find("allgather_heads_k_stride"), 3);
  w.docs = docs;
  w.n_docs = G_N_ELEMENTS(docs);
  g_autoptr(GError) err = NULL;
  CU_ASSERT_FALSE(sched_check(&sched_allgather, &w, t, &err));
  CU_ASSERT(err && strstr(err->message, "expected a divisor of the 4 KV heads, got 3"));
  g_clear_error(&err);
  sched_opt_set_num(&w, sched_option_find("allgather_heads_k_stride"), 2);
  w.docs = NULL;
  w.n_docs = 0;
  CU_ASSERT_FALSE(sched_check(&sched_allgather, &w, t, &err));
  CU_ASSERT(err && strstr(err->message, "for packed documents (--docs)"));
  topo_free(t);
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
          sched_opt_set_num(&w, &usp_opt_ulysses, u);
          sched_opt_set_num(&w, &ulysses_opt_fused, (uint32_t)fused);
          check_sched_w(&sched_usp, t, w);
          check_sched_w(&sched_usp_zigzag, t, w);
          sched_opt_set_num(&w, &usp_opt_ulysses, 0); /* default: the node */
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
    if (!sched_check_attention(*s, &w, NULL)) continue; /* linear layers only */
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
    } else if (*s == &sched_stripe) {
      /* a diagonal per step more on later GPUs (t_stripe_closed_form) */
      for (uint32_t g = 1; g < n; g++) CU_ASSERT_DOUBLE_EQUAL(pairs[g] - pairs[0], g * c, 0.5);
    } else {
      /* balanced up to the diagonal's half-token terms */
      for (uint32_t g = 1; g < n; g++) CU_ASSERT(fabs(pairs[g] - pairs[0]) <= c);
    }
    plan_free(p);
  }
  topo_free(t);
}

/* Whether task `id` of finished plan p waits on a group moving dK/dV. */
static bool waits_on_grads(const plan *p, uint32_t id) {
  const plan_task *t = plan_task_at(p, id);
  for (uint32_t i = 0; i < t->n_dep; i++) {
    const plan_task *d = plan_task_at(p, p->deps[t->dep_off + i]);
    if (d->kind == TASK_COMM && d->grads) return true;
  }
  return false;
}

/* The ring family's backward sums each block's gradients in float32 as
 * ring_flash_attn does (rotate.c grad_sums, cast_results): on every GPU
 * its first block's dQ copy and zeros (2 ops), its dK/dV adds (2 ops),
 * each later block's three adds in one task (dQ's and dK's and dV's), all
 * mixed float32 += bf16 but the first copy and zeros; the later blocks'
 * adds wait for the dK/dV that arrived; the pass ends with dQ and dK/dV
 * cast to bf16, dK/dV's once the last hop is home; a forward with its
 * output cast and its log-sum-exp laid out.  Bytes from the kernels'
 * shapes: float32 is 4 bytes, the inputs 2. */
static void t_backward_gradient_sums(void) {
  uint32_t n = 4;
  topology *t = complete_topo(n);
  const sched_ops *const scheds[] = {&sched_ring, &sched_zigzag, &sched_tasp, &sched_stripe};
  for (size_t s = 0; s < G_N_ELEMENTS(scheds); s++)
    for (int causal = 0; causal < 2; causal++) {
      workload w = shape(n, 64 * n, causal, PASS_FWDBWD);
      plan *lock = scheds[s]->build(&w, t, false);
      plan *p = plan_expand(lock);
      double c = (double)w.seq_len / n, row = w.batch * w.heads * (double)w.head_dim;
      double kv_row = 2.0 * w.batch * w.kv_heads * w.head_dim;
      for (uint32_t g = 0; g < n; g++) {
        bool backward = false;
        double kernels = 0, sums = 0, want = 0, got = 0, casts_seen = 0;
        int64_t last_sums = -1;
        for (guint i = 0; i < p->tasks->len; i++) {
          const plan_task *k = plan_task_at(p, i);
          if (k->kind == TASK_COMM && k->api == COMM_BARRIER) backward = true;
          if (k->kind != TASK_COMPUTE || k->gpu != g) continue;
          if (k->op.kind == OP_ATTN && k->op.backward) {
            double q = k->op.sq * row * k->op.heads / w.heads;
            double kv = k->op.sk * kv_row * k->op.heads / w.heads;
            want += kernels == 0 ? q * (2 + 4) + c * kv_row * 4 + kv * (4 + 4 + 2)
                                 : q * (4 + 4 + 2) + kv * (4 + 4 + 2);
            kernels++;
          } else if (k->op.kind == OP_COPY && k->op.block >= 2) {
            CU_ASSERT(backward);
            CU_ASSERT_EQUAL(k->op.mixed, sums != 0);
            CU_ASSERT_EQUAL(k->op.block, sums == 0 ? 2 : sums == 1 ? 2 : 3);
            /* a later step's adds wait for the dK/dV that arrived */
            if (sums >= 2 && k->step > 0) CU_ASSERT(waits_on_grads(p, i));
            got += k->op.bytes;
            sums++;
            last_sums = i;
          } else if (k->op.kind == OP_COPY && !backward) {
            /* the forward's end: its output, then its log-sum-exp */
            CU_ASSERT_DOUBLE_EQUAL(k->op.bytes, casts_seen == 0 ? c * row * (4 + 2)
                                                                : 2 * 4.0 * w.batch * w.heads * c, 1e-9);
            casts_seen++;
          } else if (k->op.kind == OP_COPY) {
            CU_ASSERT((int64_t)i > last_sums);
            CU_ASSERT_DOUBLE_EQUAL(k->op.bytes, casts_seen == 2 ? c * row * (4 + 2)
                                                                : c * kv_row * (4 + 2), 1e-9);
            if (casts_seen == 3) CU_ASSERT(waits_on_grads(p, i));
            casts_seen++;
          }
        }
        CU_ASSERT(kernels > 0);
        CU_ASSERT_EQUAL(sums, kernels + 1);
        CU_ASSERT_EQUAL(casts_seen, 4);
        CU_ASSERT_DOUBLE_EQUAL(got, want, 1e-6 * want);
      }
      plan_free(p);
      plan_free(lock);
    }
  topo_free(t);
}

/* Whether task `after` of finished plan p waits directly on `before`. */
static bool waits_on(const plan *p, uint32_t after, uint32_t before) {
  const plan_task *t = plan_task_at(p, after);
  for (uint32_t i = 0; i < t->n_dep; i++)
    if (p->deps[t->dep_off + i] == before) return true;
  return false;
}

/* The ring family's backward sends its KV hops and its dK/dV hops on one
 * communicator (calibrate.py Pass.run_backward), whose stream runs them
 * in issue order: step t's dK/dV hop after step t's KV hop, step t+1's KV
 * hop after step t's dK/dV hop; the double ring's dK/dV hops have a
 * communicator of their own (dg_in), so none of its KV hops waits on one. */
static void t_backward_hops_share_stream(void) {
  uint32_t n = 4;
  topology *t = complete_topo(n);
  const sched_ops *const scheds[] = {&sched_ring, &sched_zigzag, &sched_tasp, &sched_stripe,
                                     &sched_double_ring};
  for (size_t s = 0; s < G_N_ELEMENTS(scheds); s++)
    for (int causal = 0; causal < 2; causal++) {
      if (scheds[s] == &sched_stripe && !causal) continue;
      bool own = scheds[s] == &sched_double_ring;
      workload w = shape(n, 64 * n, causal, PASS_BWD);
      plan *p = scheds[s]->build(&w, t, false);
      int64_t kv = -1, dkv = -1;
      uint32_t kv_hops = 0, dkv_hops = 0, chained = 0;
      for (guint i = 0; i < p->tasks->len; i++) {
        const plan_task *k = plan_task_at(p, i);
        if (k->kind != TASK_COMM || k->api != COMM_P2P) continue;
        if (k->grads) {
          /* the hop of the KV held at this step went first */
          if (!own && kv >= 0 && plan_task_at(p, (uint32_t)kv)->step == k->step)
            CU_ASSERT(waits_on(p, i, (uint32_t)kv));
          dkv = i;
          dkv_hops++;
        } else {
          if (dkv >= 0) {
            CU_ASSERT_EQUAL(waits_on(p, i, (uint32_t)dkv), !own);
            chained += waits_on(p, i, (uint32_t)dkv);
          }
          kv = i;
          kv_hops++;
        }
      }
      CU_ASSERT(kv_hops > 0 && dkv_hops > 0);
      if (!own) CU_ASSERT_EQUAL(chained, n - 2); /* every KV hop but step 0's */
      plan_free(p);
    }
  topo_free(t);
}

/* TASP's step is one all-to-all: every GPU sends to n-1 distinct peers,
 * along one pattern of pairs registered once; under a full mask without
 * segments every kernel is one lockstep task of all GPUs, and the plan it
 * stands for has a task per GPU. */
static void t_tasp_all_to_all(void) {
  uint32_t n = 8;
  topology *t = complete_topo(n);
  workload w = shape(n, 2 * 8 * 7 * 2, false, PASS_FWD);
  plan *p = sched_tasp.build(&w, t, false);
  unsigned groups = 0, lock = 0, kernels = 0;
  CU_ASSERT_EQUAL(p->patterns->len, 1);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *k = plan_task_at(p, i);
    if (k->kind != TASK_COMM) {
      lock += k->gpu == PLAN_ALL;
      kernels++;
      continue;
    }
    groups++;
    CU_ASSERT_PTR_NOT_NULL(plan_task_pattern(p, k));
    CU_ASSERT_EQUAL(plan_xfer_count(p, k), n * (n - 1));
    uint8_t pair[64] = {0};
    for (uint32_t x = 0; x < plan_xfer_count(p, k); x++) {
      plan_xfer tx = plan_xfer_at(p, k, x);
      pair[tx.src * n + tx.dst]++;
    }
    for (uint32_t a = 0; a < n; a++)
      for (uint32_t b = 0; b < n; b++) CU_ASSERT_EQUAL(pair[a * n + b], a == b ? 0 : 1);
  }
  CU_ASSERT_EQUAL(groups, n - 1);
  CU_ASSERT_EQUAL(lock, kernels);
  /* n kernels, n - 1 merges, the output's cast and the log-sum-exp's layout */
  CU_ASSERT_EQUAL(kernels, 2 * n + 1);
  plan *q = plan_expand(p);
  unsigned per_gpu = 0, xfers = 0;
  for (guint i = 0; i < q->tasks->len; i++) {
    const plan_task *k = plan_task_at(q, i);
    if (k->kind == TASK_COMM) xfers += k->n_xfer;
    else per_gpu += k->gpu < n;
  }
  CU_ASSERT_EQUAL(per_gpu, n * kernels);
  CU_ASSERT_EQUAL(xfers, (n - 1) * n * (n - 1));
  plan_free(q);
  plan_free(p);
  topo_free(t);
}

/* TASP under a causal mask without segments (what runs) counts per GPU
 * and step the cycles that bring its first kernel's pieces, to declare a
 * torch.cat gather of its keys where there are several; the plan with
 * segments (each piece listed) gathers the same: the same buffers, GPU by
 * GPU, in the same order. */
static void t_tasp_causal_gathers(void) {
  uint32_t n = 9;
  topology *t = complete_topo(n);
  workload w = shape(n, 2 * 9 * 8 * 4, true, PASS_FWDBWD);
  plan *p = sched_tasp.build(&w, t, false), *q = sched_tasp.build(&w, t, true);
  GString *a = g_string_new(NULL), *b = g_string_new(NULL);
  unsigned gathers = 0;
  for (int k = 0; k < 2; k++) {
    const plan *x = k ? q : p;
    for (uint32_t i = 0; i < plan_buf_count(x); i++) {
      const plan_buf *pb = plan_buf_at(x, i);
      if (strcmp(plan_buf_name(x, pb), "keys gathered (torch.cat)")) continue;
      g_string_append_printf(k ? b : a, "%u:%g ", pb->gpu, pb->bytes);
      gathers += !k;
    }
  }
  CU_ASSERT_TRUE(gathers > n); /* more than the second halves' */
  CU_ASSERT_STRING_EQUAL(a->str, b->str);
  g_string_free(a, TRUE);
  g_string_free(b, TRUE);
  plan_free(p);
  plan_free(q);
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

/* Whether two finished plans are the same, task by task (operands,
 * dependencies with their overlap marks, host places), transfer by
 * transfer, segment by segment and buffer by buffer (sizes, names, uses). */
static bool same_plan(const plan *a, const plan *b) {
  if (a->tasks->len != b->tasks->len || a->xfers->len != b->xfers->len ||
      a->segs->len != b->segs->len || plan_buf_count(a) != plan_buf_count(b) ||
      plan_buf_use_count(a) != plan_buf_use_count(b) || strcmp(a->note->str, b->note->str))
    return false;
  for (guint i = 0; i < a->tasks->len; i++) {
    const plan_task *x = plan_task_at(a, i), *y = plan_task_at(b, i);
    const plan_op *o = &x->op, *q = &y->op;
    if (x->kind != y->kind || x->gpu != y->gpu || x->step != y->step || x->api != y->api ||
        x->grads != y->grads || x->on_arrival != y->on_arrival || x->xfer_off != y->xfer_off ||
        x->n_xfer != y->n_xfer || x->seg_off != y->seg_off || x->n_qseg != y->n_qseg ||
        x->n_kseg != y->n_kseg || x->n_dep != y->n_dep || x->n_overlap != y->n_overlap ||
        x->host_at != y->host_at)
      return false;
    if (o->kind != q->kind || o->causal != q->causal || o->backward != q->backward ||
        o->batch != q->batch || o->head_off != q->head_off || o->heads != q->heads ||
        o->head_dim != q->head_dim || o->elem_bytes != q->elem_bytes || o->sq != q->sq ||
        o->sk != q->sk || o->pairs != q->pairs || o->bytes != q->bytes || o->mixed != q->mixed ||
        o->block != q->block || o->decay != q->decay || o->into != q->into)
      return false;
    for (uint32_t d = 0; d < x->n_dep; d++)
      if (a->deps[x->dep_off + d] != b->deps[y->dep_off + d]) return false;
  }
  for (guint i = 0; i < a->xfers->len; i++) {
    const plan_xfer *x = &g_array_index(a->xfers, plan_xfer, i);
    const plan_xfer *y = &g_array_index(b->xfers, plan_xfer, i);
    if (x->src != y->src || x->dst != y->dst || x->bytes != y->bytes || x->msgs != y->msgs ||
        x->steps != y->steps)
      return false;
  }
  for (guint i = 0; i < a->segs->len; i++) {
    const plan_seg *x = &g_array_index(a->segs, plan_seg, i);
    const plan_seg *y = &g_array_index(b->segs, plan_seg, i);
    if (x->start != y->start || x->len != y->len) return false;
  }
  for (uint32_t i = 0; i < plan_buf_count(a); i++) {
    const plan_buf *x = plan_buf_at(a, i), *y = plan_buf_at(b, i);
    if (x->gpu != y->gpu || x->bytes != y->bytes || plan_buf_name(a, x) != plan_buf_name(b, y) || x->input != y->input ||
        x->keep != y->keep)
      return false;
  }
  for (uint32_t i = 0; i < plan_buf_use_count(a); i++) {
    const plan_buf_use *x = plan_buf_use_at(a, i), *y = plan_buf_use_at(b, i);
    if (x->buf != y->buf || x->task != y->task || x->gpu != y->gpu || x->write != y->write ||
        x->when != y->when)
      return false;
  }
  return true;
}

/* Schedulers are blind to hardware: on two topologies that differ only in
 * kernel_blocks_comm (whether a transfer makes progress beside a flash
 * kernel), every scheduler emits the same plan, for every layer kind it
 * runs, mask and pass; what the hardware lets overlap is exec's rule. */
static void t_blind_to_hardware(void) {
  unsigned compared = 0, overlaps = 0, memchecked = 0;
  for (uint32_t n = 2; n <= 4; n += 2) {
    topology *t[2] = {complete_topo(n), complete_topo(n)};
    t[1]->kernel_blocks_comm = true;
    for (const sched_ops *const *s = sched_all(); *s; s++)
      for (int a = 0; a < ATTN_KINDS; a++)
        for (int c = 0; c < 2; c++)
          for (pass_kind ps = PASS_FWD; ps <= PASS_FWDBWD; ps++) {
            workload w = shape(n, 3 * 2 * (uint64_t)n * (n - 1), c, ps);
            w.attention = (attn_kind)a;
            if (ulysses_family(*s)) w.heads = 2 * n;
            if (!sched_check_attention(*s, &w, NULL) || !sched_check(*s, &w, t[0], NULL)) continue;
            plan *p[2];
            for (int k = 0; k < 2; k++) p[k] = (*s)->build(&w, t[k], true);
            bool same = same_plan(p[0], p[1]);
            if (!same)
              fprintf(stderr, "%s n=%u %s %s: plans differ with kernel_blocks_comm\n", (*s)->name,
                      n, c ? "causal" : "full", pass_name(ps));
            CU_ASSERT_TRUE(same);
            for (guint i = 0; i < p[0]->tasks->len; i++) overlaps += plan_task_at(p[0], i)->n_overlap;
            compared++;
            /* where groups wait for kernels, their allocations are moved
             * onto those kernels (exec_mem): still balanced, and a lockstep
             * plan peaks as its expansion does */
            g_autofree char *what = g_strdup_printf("%s n=%u blocking", (*s)->name, n);
            if (p[0]->bufs) {
              check_memory(*s, t[1], &w, what);
              memchecked++;
            }
            plan_free(p[0]);
            plan_free(p[1]);
          }
    topo_free(t[0]);
    topo_free(t[1]);
  }
  CU_ASSERT(compared > 100);
  CU_ASSERT(overlaps > 0); /* ring, TASP, TokenRing declare what they overlap */
  CU_ASSERT(memchecked == compared);
}

/* kernel_blocks_comm is exec's rule: a ring step's KV transfer declares
 * every kernel of its step that it runs beside (plan_overlap), flash and
 * linear alike; where kernels block transfers, it waits for the flash
 * kernels (which hold every SM) and not for linear-attention kernels,
 * which leave SMs free (calibration/h200x2-linear): the linear ring's time
 * does not change with kernel_blocks_comm, the softmax ring's grows by
 * transfers no longer hidden. */
static void t_kbc_flash_only(void) {
  topology *t[2] = {test_switch(4, 10e9, 1e-6), test_switch(4, 10e9, 1e-6)};
  for (int k = 0; k < 2; k++) {
    t[k]->compute.peak_flops = 100e12;
    t[k]->compute.efficiency = 0.5;
    t[k]->compute.copy_Bps = 1e12;
  }
  t[1]->kernel_blocks_comm = true;
  for (int lin = 0; lin < 2; lin++) {
    workload w = shape(4, 4 * 4096, false, PASS_FWD);
    w.heads = 8;
    w.head_dim = 64;
    if (lin) {
      w.attention = ATTN_LINEAR;
      w.linear_block = 64;
    }
    plan *p = sched_ring.build(&w, t[0], false);
    unsigned on_kernels = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *c = plan_task_at(p, i);
      for (uint32_t d = 0; d < c->n_dep; d++) {
        const plan_task *b = plan_task_at(p, p->deps[c->dep_off + d]);
        /* a kernel of the group's own step */
        if (plan_dep_is_overlap(c, d)) on_kernels += b->kind == TASK_COMPUTE && b->step == c->step;
      }
    }
    CU_ASSERT(on_kernels >= 3); /* 3 transfer steps, lockstep kernels */
    exec_opts o = {0};
    exec_result *r[2];
    for (int k = 0; k < 2; k++) r[k] = exec_run(p, t[k], &o);
    if (lin) {
      CU_ASSERT_DOUBLE_EQUAL(r[1]->step_s, r[0]->step_s, 0);
    } else {
      CU_ASSERT(r[1]->step_s > r[0]->step_s * 1.01);
    }
    for (int k = 0; k < 2; k++) exec_result_free(r[k]);
    plan_free(p);
  }
  topo_free(t[0]);
  topo_free(t[1]);
}

/* Ring on linear layers, backward: the memory-bound work of each step
 * (rotate.c linear_grad_steps), in bytes per GPU: every step zeroes the
 * float32 dK/dV accumulator (4 bytes an element); a needed step adds dK,
 * dV into it (float32 read and written, bf16 read: 10), an add of two
 * dtypes (op.mixed); another chunk's step adds dQ (bf16: 6 per query
 * element); from the second step on the arrived accumulator is added
 * (12).  The plan is the same whatever the GPU's rate for two-dtype adds:
 * compute prices them (the scheduler reads no hardware). */
static void t_ring_linear_grad_bytes(void) {
  topology *t = complete_topo(2);
  double c = 64, row = 1 * 2 * 4, acc = 2 * c * row, dq = 6 * c * row, add = 10 * acc;
  for (int mixed = 0; mixed < 2; mixed++) {
    t->compute.copy_mixed_Bps = mixed ? t->compute.copy_Bps / 2 : 0;
    for (int causal = 0; causal < 2; causal++) {
      workload w = shape(2, 2 * (uint64_t)c, causal, PASS_BWD);
      w.attention = ATTN_LINEAR;
      plan *p = expanded(sched_ring.build(&w, t, false));
      double bytes[2] = {0, 0};
      unsigned arrival[2] = {0, 0};
      for (guint i = 0; i < p->tasks->len; i++) {
        const plan_task *k = plan_task_at(p, i);
        if (k->kind == TASK_COMPUTE && k->op.kind == OP_COPY) bytes[k->gpu] += k->op.bytes;
        if (k->kind == TASK_COMPUTE && k->op.mixed) {
          CU_ASSERT_DOUBLE_EQUAL(k->op.bytes, add, 1e-9);
          /* priced at the two-dtype rate where the GPU has one */
          CU_ASSERT_DOUBLE_EQUAL(compute_op_s(&t->compute, &k->op),
                                 t->compute.copy_fixed_s +
                                     add * (mixed ? 2 : 1) / t->compute.copy_Bps,
                                 1e-15);
        }
        /* only acc += arrived adds in what a transfer brought */
        if (k->on_arrival) {
          CU_ASSERT(k->kind == TASK_COMPUTE && k->step == 1);
          CU_ASSERT_DOUBLE_EQUAL(k->op.bytes, 12 * acc, 1e-9);
          arrival[k->gpu]++;
        }
      }
      CU_ASSERT(arrival[0] == 1 && arrival[1] == 1);
      double other = 4 * acc + add + dq + 12 * acc, own = 4 * acc + add;
      /* causal: GPU 0 skips GPU 1's later chunk but still zeroes and adds
       * the accumulator that arrived */
      CU_ASSERT_DOUBLE_EQUAL(bytes[0], causal ? own + 4 * acc + 12 * acc : own + other, 1e-9);
      CU_ASSERT_DOUBLE_EQUAL(bytes[1], own + other, 1e-9);
      plan_free(p);
    }
  }
  topo_free(t);
}

int main(void) {
  static const test_case cases[] = {TEST(t_all_schedulers_cover_mask), TEST(t_stripe_closed_form),
                                    TEST(t_double_ring_closed_form), TEST(t_double_ring_backward),
                                    TEST(t_double_ring_heads),
                                    TEST(t_te_aliases), TEST(t_docs_cover_mask), TEST(t_allgather_docs),
                                    TEST(t_backward_covers_mask), TEST(t_balance),
                                    TEST(t_tasp_all_to_all), TEST(t_backward_gradient_sums), TEST(t_backward_hops_share_stream), TEST(t_tasp_causal_gathers), TEST(t_checks_refuse),
                                    TEST(t_tasp_node_chain), TEST(t_tasp_given_cycles),
                                    TEST(t_ulysses_variants), TEST(t_ulysses_heads),
                                    TEST(t_collective_rings), TEST(t_kbc_flash_only), TEST(t_blind_to_hardware),
                                    TEST(t_ring_linear_grad_bytes),
                                    {NULL, NULL}};
  return test_run("sched", cases);
}
