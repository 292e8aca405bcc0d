/* plan_same: a lockstep plan against the per-GPU plan it stands for, for
 * the tests of schedulers whose full-mask plans are lockstep (tokenring,
 * usp, ulysses): the expansion equal task by task and transfer by
 * transfer, and every figure of the two runs equal to 1e-9. */
#ifndef TASP_TEST_PLAN_SAME_H
#define TASP_TEST_PLAN_SAME_H

#include <stdbool.h>

#include "exec.h"
#include "plan.h"

/* |a - b| within 1e-9 of the larger (and 1e-15 absolute). */
bool close_rel(double a, double b);
/* Expansion e of a lockstep plan is the per-GPU plan r: the same tasks in
 * the same order (GPU, step, operation, predecessors) and the same
 * transfers, pair by pair, in the same order (which sets the network's
 * bundles). */
bool same_structure(const plan *e, const plan *r);
/* The same, but for the order in which tasks of different GPUs are
 * interleaved (a lockstep kernel and its merge expand into every GPU's
 * kernel, then every GPU's merge; the per-GPU plan emits each GPU's
 * kernel and merge together): every GPU's compute stream the same tasks
 * in the same order, the groups the same in the same order, each group
 * after the same compute of every GPU, and every task's predecessors and
 * host issue place the same tasks. */
bool same_streams(const plan *e, const plan *r);
/* Every figure of the two runs, to 1e-9: step and its split, FLOPs, per
 * GPU busy, finish, idle and memory peaks, per channel bytes and busy
 * time, the flows, and what is live at the peak. */
bool same_figures(const exec_result *x, const exec_result *y);

#endif
