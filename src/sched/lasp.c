/* lasp: LASP (LASP-1; Sun et al. 2024, arXiv 2404.02882; OpenNLPLab/LASP),
 * linear-attention layers only.
 *
 * GPU r holds chunk r.  Causal forward (the paper's algorithm with
 * masking, restated as Algorithm 6 of arXiv 2502.07563): every GPU first
 * computes its own state M_r = K_r^T V_r and its intra-chunk output, in
 * parallel; then the running state travels the ring serially: GPU r waits
 * for M_{1:r-1} from r-1, applies it to its queries (O_r += Q_r M_{1:r-1}),
 * adds its own state and sends M_{1:r} to r+1, one point-to-point send of
 * the float32 B x H x D x D state per hop (lasp_naive.py: dist.recv(KV) /
 * dist.send(KV)), n-1 hops one after the other.  The intra-chunk work runs
 * while a GPU waits for its predecessors.  The public code receives before
 * its fused kernel (no such overlap); the paper's order is modelled.
 * Backward runs the chain the other way with dKV, the suffix of
 * dM = Q^T dO (lasp_naive.py backward: recv DKV from r+1, send to r-1):
 * GPU r first computes its intra-chunk gradients, dQ from the cached
 * M_{1:r-1} and its dM_r; after the suffix dM_{r+1:n} arrives it computes
 * its keys' dK, dV from it (added to the intra-chunk ones, as dQ from the
 * prefix is: memory-bound adds, lasp_grad_add), adds dM_r and sends
 * dM_{r:n} on.
 * Bidirectional (no mask): no intra-chunk part; the running sum makes one
 * lap to GPU n-1, which then holds the total, and a second lap hands the
 * total on to GPUs 0..n-2 (2(n-1) serial hops; LASP gives no other way for
 * every GPU to receive the whole sum), each applying it to its queries. */
#include "lasp_common.h"

/* One hop of the chain: the running state from src to dst. */
static uint32_t hop(const sched_ctx *c, uint32_t step, uint32_t src, uint32_t dst, bool grads) {
  uint32_t g = plan_comm(c->p, step, COMM_P2P);
  plan_task_at(c->p, g)->grads = grads;
  plan_xfer_add(c->p, g, src, dst, workload_state_bytes(c->w));
  plan_issue(c->p, g, NULL, -1, false);
  lasp_recv(c, g, dst, workload_state_bytes(c->w), grads ? "received dM state (float32)"
                                                    : "received kv state (float32)");
  return g;
}

static int64_t causal_fwd(const sched_ctx *c, int64_t after) {
  const workload *w = c->w;
  uint32_t n = w->gpus;
  for (uint32_t r = 0; r < n; r++) {
    plan_seg own = lasp_chunk(w, r);
    lasp_task(c, r, 0, OP_LIN_STATE, false, NULL, &own, after);
    lasp_task(c, r, 0, OP_LIN_INTRA, false, &own, &own, -1);
  }
  int64_t arrived = -1;
  for (uint32_t r = 0; r < n; r++) {
    plan_seg own = lasp_chunk(w, r), before = lasp_before(w, r);
    if (r > 0) { /* O_r += Q_r M_{1:r-1}, into the intra-chunk output */
      uint32_t ap = lasp_task(c, r, r, OP_LIN_APPLY, false, &own, &before, arrived);
      plan_task_at(c->p, ap)->op.into = true;
    }
    if (r + 1 == n) break;
    if (r > 0) lasp_sum(c, r, r, 2, -1); /* M_{1:r} = M_{1:r-1} + M_r */
    arrived = hop(c, r, r, r + 1, false);
  }
  return arrived;
}

static int64_t causal_bwd(const sched_ctx *c, int64_t after) {
  const workload *w = c->w;
  uint32_t n = w->gpus;
  for (uint32_t r = 0; r < n; r++) {
    plan_seg own = lasp_chunk(w, r), before = lasp_before(w, r);
    uint32_t dqa = UINT32_MAX;
    if (r > 0) {
      /* `dqa, dm = lin_apply_bwd(...)`: the prefix's dQ, held through the
       * intra-chunk kernel until it is added (calibrate.py Lasp) */
      uint32_t a = lasp_task(c, r, 0, OP_LIN_APPLY, true, &own, &before, after);
      dqa = plan_buf_out(c->p, a, (double)w->batch * own.len * w->heads * w->head_dim *
                                      w->elem_bytes, "dq of the prefix state's product");
    }
    uint32_t intra = lasp_task(c, r, 0, OP_LIN_INTRA, true, &own, &own, after);
    if (r > 0) {
      plan_buf_reads(c->p, intra, dqa);
      plan_buf_reads(c->p, lasp_grad_add(c, r, 0, 1, -1), dqa); /* dQ += the prefix's dQ */
    }
  }
  int64_t arrived = -1;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t r = n - 1 - i;
    plan_seg own = lasp_chunk(w, r), later = lasp_after(w, r);
    if (r + 1 < n) {
      lasp_task(c, r, i, OP_LIN_STATE, true, &later, &own, arrived);
      lasp_grad_add(c, r, i, 2, -1); /* dK +=, dV += the suffix's */
    }
    if (r == 0) break;
    if (r + 1 < n) lasp_sum(c, r, i, 2, -1); /* dM_{r:n} = dM_{r+1:n} + dM_r */
    arrived = hop(c, i, r, r - 1, true);
  }
  return arrived;
}

/* Bidirectional, forward or backward: `pre` on every GPU (forward its
 * state; backward dQ and dM from the cached total), two laps of the
 * running sum, then `post` with the total (forward the output; backward
 * the keys' dK, dV). */
static int64_t two_laps(const sched_ctx *c, bool backward, int64_t after) {
  const workload *w = c->w;
  uint32_t n = w->gpus;
  plan_seg all = lasp_all(w);
  for (uint32_t r = 0; r < n; r++) {
    plan_seg own = lasp_chunk(w, r);
    if (backward) lasp_task(c, r, 0, OP_LIN_APPLY, true, &own, &all, after);
    else lasp_task(c, r, 0, OP_LIN_STATE, false, NULL, &own, after);
  }
  int64_t arrived = -1, last = -1;
  for (uint32_t r = 0; r < n; r++) {
    if (r > 0) lasp_sum(c, r, r, 2, arrived);
    /* lap 1 on to r+1; GPU n-1, now holding the total, starts lap 2 */
    if (n > 1) arrived = last = hop(c, r, r, (r + 1) % n, backward);
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t r = (n - 1 + i) % n; /* n-1 first: it has the total already */
    if (i > 0 && i + 1 < n) {
      /* the total goes on as soon as it is here, on the same stream */
      uint32_t on = hop(c, n + i, r, r + 1, backward);
      plan_dep(c->p, (uint32_t)arrived, on);
      last = on;
    }
    plan_seg own = lasp_chunk(w, r);
    int64_t ready = i > 0 ? arrived : -1;
    if (backward) lasp_task(c, r, n + i, OP_LIN_STATE, true, &all, &own, ready);
    else lasp_task(c, r, n + i, OP_LIN_APPLY, false, &own, &all, ready);
    if (i > 0 && i + 1 < n) arrived = last;
  }
  return last;
}

static int64_t pass(const sched_ctx *c, bool backward, int64_t after) {
  if (!c->w->causal) return two_laps(c, backward, after);
  return backward ? causal_bwd(c, after) : causal_fwd(c, after);
}

static bool check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return lasp_check(w, "lasp", err);
}

static plan *build(const workload *w, const topology *t, bool record_segs) {
  return sched_passes(w, t, record_segs, pass);
}

const sched_ops sched_lasp = {
    .name = "lasp",
    .summary = "LASP: the running linear-attention state travels the ring, rank by rank",
    .check = check,
    .build = build,
    .attention = SCHED_RUNS(ATTN_LINEAR),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {0, 0, 8, 8, 0, 0, 2, 0, 0, 8, 0, 0, 0}};
