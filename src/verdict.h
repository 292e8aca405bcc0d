/* verdict: a point group's answer in a few words — which scheduler is
 * fastest, by how much each other one trails, and why each takes the time
 * it takes, derived from the same split of the step as the table's
 * columns (exec.h): the share of the step the network adds (exposed
 * communication; of it, launch and group issue costs, and kernel issue),
 * the share lost to imbalance (the GPU finishing last waiting on other
 * GPUs' compute, through transfers or not, or the busiest GPU computing
 * more than the mean, whichever is larger), and the kind of its busiest
 * channel.  Each names the cause whose removal would shorten the step:
 * faster links for communication-bound on a kind, balanced work for load
 * imbalance. */
#ifndef TASP_VERDICT_H
#define TASP_VERDICT_H

#include <glib.h>

#include "sim.h"

/* Below this share of the step, a loss is not worth naming (10%). */
#define VERDICT_MINOR 0.10

/* "compute-bound: communication hidden" (both shares under 10%; "no
 * communication" where no transfer was ever in flight), else the larger:
 * "load imbalance: busiest GPU computes 1.88x the mean", "serialized: 64%
 * of the step waiting on other GPUs' compute in turn (...)" (the busiest
 * GPU within 5% of the mean: a dependency chain, not uneven work),
 * "communication-bound on nic: 31% of the step exposed", or, where they
 * are the largest part of the exposed time (exec.h), "communication-bound
 * on launch and issue costs: ..." and "host-bound: 25% of the step
 * waiting on kernel issue" (all of it with no communication).
 * Compute-bound with more compute than `best` (NULL: none) by 5%:
 * "compute-bound: 1.35x the compute of zigzag" (more or longer kernels).
 * A step of no time: "no time: nothing to do". */
char *verdict_reason(const topology *t, const sim_result *r, const sim_result *best);
/* "zigzag fastest (compute-bound: communication hidden); tasp +6.3%
 * (...), ring +76.8% (load imbalance ...)" over rows[0..n) of one group;
 * schedulers within 0.05% of the fastest tie ("zigzag and tasp tie (...)").
 * Rows that did not run (n/a) are not ranked: "...; n/a: ulysses" names
 * them; with none that ran, "no scheduler can run this point; n/a: ...".
 * Rows that do not fit in memory (sim_fits) are not ranked either:
 * "...; allgather (does not fit: 96.2 GiB > 78.0 GiB usable)"; with none
 * that fits, "no scheduler fits in memory; ...". */
char *verdict_line(const topology *t, sim_result *const *rows, guint n);
/* Kind of the channel with the highest utilisation ("-" when none moved). */
const char *verdict_busiest_kind(const topology *t, const sim_result *r);

#endif
