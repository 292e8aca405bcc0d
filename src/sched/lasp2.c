/* lasp2: LASP-2 (Sun et al. 2025, arXiv 2502.07563, Algorithms 1-4;
 * OpenSparseLLMs/Linear-MoE), linear-attention layers only.
 *
 * GPU t holds chunk t.  Forward: every GPU computes its state
 * M_t = K_t^T V_t, then ONE all-gather of the states (NCCL's ring: every
 * GPU receives the other n-1 float32 B x H x D x D states).  Causal
 * (Algorithm 2): the intra-chunk output [(Q_t K_t^T) (.) M] V_t is computed
 * while the all-gather runs (issued after it, so it overlaps: the paper's
 * lines 7-8 "on separate threads"), then the prefix M_{1:t-1} is summed
 * locally from the gathered states and applied, O_t += Q_t M_{1:t-1}
 * (GPU 0 has nothing before it).  Bidirectional (Algorithm 1): no
 * intra-chunk part; the sum of all n states is applied to every chunk.
 * Backward (Algorithms 3, 4): every GPU computes dQ from the cached
 * prefix and its dM_t = Q_t^T dO_t, ONE all-gather of the dM, the
 * intra-chunk gradients overlapping it, then the suffix dM_{t+1:T} (all of
 * them, bidirectional) is summed and gives the chunk's dK, dV.  Causal,
 * the programs add the prefix's dQ and the suffix's dK, dV to the
 * intra-chunk gradients in place (lasp_grad_add), and keep a copy of the
 * prefix state for backward.
 * Two collective calls per layer, forward and backward, against LASP's
 * 2(n-1) point-to-point hops; the same bytes per GPU. */
#include "lasp_common.h"

/* The all-gather of every GPU's state; *got: the gathered states (n per
 * GPU: LASP-2's all-gathered memory states), read by the tasks after it. */
static int64_t gather(const sched_ctx *c, uint32_t step, bool grads, int64_t after,
                      uint32_t *got) {
  uint32_t n = c->w->gpus;
  *got = UINT32_MAX;
  if (n < 2) return -1;
  g_autofree uint32_t *gpus = g_new(uint32_t, n);
  for (uint32_t r = 0; r < n; r++) gpus[r] = r;
  uint32_t ag = plan_comm(c->p, step, COMM_ALL_GATHER);
  plan_task_at(c->p, ag)->grads = grads;
  plan_coll_ring(c->p, ag, gpus, n, workload_state_bytes(c->w), c->t->gpus_per_node);
  if (after >= 0) plan_dep(c->p, (uint32_t)after, ag);
  plan_issue(c->p, ag, NULL, after, true);
  *got = lasp_recv(c, ag, PLAN_ALL, n * workload_state_bytes(c->w),
                   grads ? "gathered dM states (float32)" : "gathered kv states (float32)");
  return ag;
}

static void reads(const sched_ctx *c, uint32_t task, uint32_t got) {
  if (got != UINT32_MAX) plan_buf_reads(c->p, task, got);
}

static int64_t fwd(const sched_ctx *c, int64_t after) {
  const workload *w = c->w;
  uint32_t n = w->gpus;
  for (uint32_t r = 0; r < n; r++) {
    plan_seg own = lasp_chunk(w, r);
    lasp_task(c, r, 0, OP_LIN_STATE, false, NULL, &own, after);
  }
  uint32_t got;
  int64_t ag = gather(c, 0, false, after, &got);
  for (uint32_t r = 0; r < n && w->causal; r++) {
    plan_seg own = lasp_chunk(w, r);
    lasp_task(c, r, 0, OP_LIN_INTRA, false, &own, &own, -1);
  }
  for (uint32_t r = w->causal ? 1 : 0; r < n; r++) {
    plan_seg own = lasp_chunk(w, r), src = w->causal ? lasp_before(w, r) : lasp_all(w);
    uint32_t states = w->causal ? r : n;
    if (states > 1) reads(c, lasp_sum(c, r, 1, states, ag), got);
    /* causal: the prefix is kept for backward, a copy of one state (the
     * gathered buffer is reused) */
    if (w->causal) reads(c, lasp_sum(c, r, 1, 1, ag), got);
    /* causal: O_t += Q_t M_{1:t-1}, into the intra-chunk output */
    uint32_t ap = lasp_task(c, r, 1, OP_LIN_APPLY, false, &own, &src, ag);
    plan_task_at(c->p, ap)->op.into = w->causal;
    reads(c, ap, got);
  }
  return ag;
}

/* Backward, causal: the program's temporaries (calibrate.py
 * Lasp2.run_backward, lin_apply_bwd, lin_state_bwd): the prefix's dQ
 * (`dqa`, bf16) and dM (float32) come out of the apply's backward before
 * the intra-chunk backward and live through it (`self.dq += dqa` after it;
 * `dm` until the pass returns); the suffix's dK and dV (`dks`, `dvs`, two
 * bf16 tensors) until they are added in.  Bidirectional, dQ and dK, dV
 * are those tensors themselves (sched_io's). */
static int64_t bwd(const sched_ctx *c, int64_t after) {
  const workload *w = c->w;
  uint32_t n = w->gpus;
  plan *p = c->p;
  double rows = sched_rows_bytes(w, w->heads);
  double half_kv = workload_kv_bytes(w, (double)lasp_chunk(w, 0).len) / 2;
  g_autofree uint32_t *dqa = g_new(uint32_t, n), *dm = g_new(uint32_t, n);
  for (uint32_t r = 0; r < n; r++) dqa[r] = dm[r] = UINT32_MAX;
  for (uint32_t r = w->causal ? 1 : 0; r < n; r++) {
    plan_seg own = lasp_chunk(w, r), src = w->causal ? lasp_before(w, r) : lasp_all(w);
    uint32_t ap = lasp_task(c, r, 0, OP_LIN_APPLY, true, &own, &src, after);
    if (!w->causal) continue;
    dqa[r] = plan_buf_out(p, ap, rows, "dqa (the prefix's dq)");
    dm[r] = plan_buf_out(p, ap, workload_state_bytes(w), "dm (float32)");
  }
  uint32_t got;
  int64_t ag = gather(c, 0, true, after, &got);
  for (uint32_t r = 1; r < n && w->causal && ag >= 0; r++) plan_buf_reads(p, (uint32_t)ag, dm[r]);
  for (uint32_t r = 0; r < n && w->causal; r++) {
    plan_seg own = lasp_chunk(w, r);
    uint32_t intra = lasp_task(c, r, 0, OP_LIN_INTRA, true, &own, &own, after);
    if (r == 0) continue;
    plan_buf_reads(p, intra, dm[r]);
    plan_buf_reads(p, lasp_grad_add(c, r, 0, 1, -1), dqa[r]); /* dQ += the prefix's dQ */
  }
  for (uint32_t r = 0; r < (w->causal ? n - 1 : n); r++) {
    plan_seg own = lasp_chunk(w, r), src = w->causal ? lasp_after(w, r) : lasp_all(w);
    uint32_t states = w->causal ? n - 1 - r : n;
    if (states > 1) reads(c, lasp_sum(c, r, 1, states, ag), got);
    uint32_t st = lasp_task(c, r, 1, OP_LIN_STATE, true, &src, &own, ag);
    reads(c, st, got);
    if (!w->causal) continue;
    /* added to the intra-chunk dK, dV (bidirectional: the only ones) */
    uint32_t add = lasp_grad_add(c, r, 1, 2, -1);
    plan_buf_reads(p, add, plan_buf_out(p, st, half_kv, "dks (the suffix's dk)"));
    plan_buf_reads(p, add, plan_buf_out(p, st, half_kv, "dvs (the suffix's dv)"));
  }
  return ag;
}

static int64_t pass(const sched_ctx *c, bool backward, int64_t after) {
  return backward ? bwd(c, after) : fwd(c, after);
}

static bool check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return lasp_check(w, "lasp2", err);
}

static plan *build(const workload *w, const topology *t, bool record_segs) {
  return sched_passes(w, t, record_segs, pass);
}

const sched_ops sched_lasp2 = {
    .name = "lasp2",
    .summary = "LASP-2: one all-gather of the linear-attention states, local prefix sums",
    .check = check,
    .build = build,
    .attention = SCHED_RUNS(ATTN_LINEAR),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {0, 0, 6, 3.2, 0, 0.5, 0, 0, 0, 7, 0, 0, 0}};
