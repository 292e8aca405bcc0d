/* lasp2h: LASP-2H (Sun et al. 2025, arXiv 2502.07563, sec. 3.5 and
 * Algorithm 7), hybrid models of linear and softmax layers.
 *
 * Linear layers are LASP-2's (one all-gather of the states); softmax
 * layers are all-gather context parallelism, the K and V of every GPU
 * gathered and the local queries attended to them (the Llama 3 method the
 * paper follows): the `allgather` scheduler's plan, used as it is.  For a
 * pure softmax model lasp2h is the allgather scheduler. */
#include "sched.h"

static const sched_ops *of(const workload *w) {
  return w->attention == ATTN_LINEAR ? &sched_lasp2 : &sched_allgather;
}

static bool check(const workload *w, const topology *t, GError **err) {
  return of(w)->check(w, t, err);
}

static plan *build(const workload *w, const topology *t, bool record_segs) {
  return of(w)->build(w, t, record_segs);
}

const sched_ops sched_lasp2h = {
    .name = "lasp2h",
    .summary = "LASP-2H: linear layers as lasp2, softmax layers by the all-gather of K and V",
    .check = check,
    .build = build,
    .attention = SCHED_RUNS(ATTN_LINEAR) | SCHED_RUNS(ATTN_SOFTMAX),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {0, 0, 6, 3.2, 0, 0.5, 0, 0, 0, 7, 0, 0, 0}};
