/* verdict: a point group's answer in a few words — which scheduler is
 * fastest, by how much each other one trails, and why each takes the time
 * it takes, derived from its figures: the share of the step the GPU that
 * finishes last spends waiting on transfers (exposed communication), the
 * share lost to imbalance (that GPU waiting on other GPUs' compute, or the
 * busiest GPU computing more than the mean, whichever is larger), and the
 * kind of its busiest channel. */
#ifndef TASP_VERDICT_H
#define TASP_VERDICT_H

#include <glib.h>

#include "sim.h"

/* Below this share of the step, a loss is not worth naming (10%). */
#define VERDICT_MINOR 0.10

/* "compute-bound: communication hidden" (both shares under 10%), else the
 * larger: "load imbalance: busiest GPU computes 1.88x the mean" or
 * "communication-bound on nic: 31% of the step exposed".  Compute-bound
 * with more compute than `best` (NULL: none) by 5%: "compute-bound: 1.35x
 * the compute of zigzag" (more or longer kernels). */
char *verdict_reason(const topology *t, const sim_result *r, const sim_result *best);
/* "zigzag fastest (compute-bound: communication hidden); tasp +6.3%
 * (...), ring +76.8% (load imbalance ...)" over rows[0..n) of one group;
 * schedulers within 0.05% of the fastest tie ("zigzag and tasp tie (...)").
 * Rows that did not run (n/a) are not ranked: "...; n/a: ulysses" names
 * them; with none that ran, "no scheduler can run this point; n/a: ...". */
char *verdict_line(const topology *t, sim_result *const *rows, guint n);
/* Kind of the channel with the highest utilisation ("-" when none moved). */
const char *verdict_busiest_kind(const topology *t, const sim_result *r);

#endif
