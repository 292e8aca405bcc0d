/* budget: the memory a run will take, estimated and checked before any
 * point is built.
 *
 * A point's plan and its replay cost at most BUDGET_TASK_BYTES per task
 * (its record, dependencies, buffer declarations and their replay:
 * plan.h, plan_buf.h, exec_mem.c) and BUDGET_XFER_BYTES per transfer
 * listed in a group; a plan that moves transfers along patterns stores
 * each pattern's pairs once, and the replay sorts and routes them once
 * however many groups move along it (plan_pattern, exec_comm.c's
 * pattern_launch): BUDGET_PAIR_BYTES per pair (or listed transfer) of
 * those, the expanded transfers nothing of their own.  With
 * --trace each point's spans, transfers (every one, patterns expanded)
 * and rate changes are held until the point is written (trace.h).  How
 * many tasks and transfers a scheduler's plan has grows as a polynomial
 * in the SP degree P, per pass; each scheduler's file holds its
 * coefficients (sched.h's sched_size), and tests/test_budget.c checks
 * them against the plans the schedulers build: never below, and within a
 * small factor.
 *
 * The budget is half the memory the process may use: the least of the
 * machine's physical memory, its cgroup's memory.max and RLIMIT_AS /
 * RLIMIT_DATA; or TASP_MEMORY_BUDGET (bytes, K/M/G suffixes of 1024) when
 * set.  A point over it is refused; points run on as many threads as the
 * largest points fit in it together. */
#ifndef TASP_BUDGET_H
#define TASP_BUDGET_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "scenario.h"

/* Peak RSS (/usr/bin/time %M) above the topology's own (8 MB: a
 * 1,024-GPU full-mask ring) per task the plan builds, 2,048 tokens per
 * GPU on an NVSwitch of 1,024 GPUs: 570 bytes for the causal ring's
 * forward (1.05 M tasks, 659 MB) and TASP's (3.95 M tasks, 2.39 GB),
 * 580 for zigzag's causal fwdbwd, 733 for the ring's causal fwdbwd
 * (1.58 M tasks, 1.22 GB: 4.7 dependencies a task against the
 * forward's 3).  Those were measured with 160-byte tasks, 24-byte buffers
 * and 16-byte uses; since those are 152, 16 and 12 bytes (and the memory
 * replay's instances 24, not 32) the same points peak 14-15% lower (the
 * ring's causal forward 567 MB, 545 bytes a task; TASP's 2.04 GB, 526),
 * which the test's recorded peaks follow (measured with 152-byte tasks;
 * plan_op.diag_pairs makes them 160 again, 8 MB more at a million
 * tasks, about 1.5% of those peaks).  A plan_task is in an array
 * that grows by doubling; a causal task declares about 3 buffers and 8
 * uses.  640 bounds every point measured, as the coefficients
 * count more tasks than the plans have (the ring's causal fwdbwd: 2.52 M
 * counted, 1.61 GB against 1.22), and is what a plan of few
 * dependencies a task (TASP's, the ring's forward) costs and some. */
#define BUDGET_TASK_BYTES 640.0
/* A pair of a pattern: 86 bytes measured with one thread (TASP's
 * full-mask forward, one pattern of P (P - 1) pairs: 90 MB above the
 * topology's own at P = 1,024, 22.5 MB at 512), 97 with tasp-sim's two
 * (its ring baseline beside it in another malloc arena: 101 MB): the
 * pair (8), its net member (16) and switched route (8: on nvswitch and
 * multi_node a route is computed and kept with the members, exec_comm.c),
 * its channel uses in the net shape, and the sort into kinds (flow_kind,
 * 32) at its first launch. */
#define BUDGET_PAIR_BYTES 112.0
/* Of those, what a stored pair costs without its launch: the pair (8)
 * and its share of the pattern's per-GPU lists, with room (a pattern of
 * freed launches: TokenRing's full mask, 1.05 M pairs at 1,024 GPUs,
 * 15 MB above the topology's own for both passes). */
#define BUDGET_STORED_PAIR_BYTES 16.0
/* A listed transfer: 51 bytes measured (a 1,024-GPU Ulysses, 4.2 M
 * transfers in a few thousand tasks, 215 MB): its plan_xfer (24) and its
 * member and route while its group is in flight. */
#define BUDGET_XFER_BYTES 64.0
/* with --trace: an exec_span (32 bytes) per span, an exec_xfer (40) per
 * transfer and an exec_rate (24) per rate change */
#define BUDGET_SPAN_BYTES 32.0
#define BUDGET_TRACE_XFER_BYTES 40.0
#define BUDGET_RATE_BYTES 24.0

/* Upper estimates of what one point builds and records. */
typedef struct {
  double tasks, xfers;   /* plan tasks; transfers, patterns expanded */
  double stored;         /* transfers the plan stores where it moves some
                            along patterns: listed, and each pattern's
                            pairs once (sched_size's xs2, xs1); 0: it
                            lists every transfer (xfers) */
  double launched;       /* of those, the pairs whose launches are held at
                            once (sched_size's xl1f); 0: every one */
  double spans, rates;   /* trace: spans and channel rate changes */
} budget_counts;

/* The point's counts; FALSE when its scheduler has no coefficients.  With
 * t, at scope layer or model, those of the plan for layer_orbits'
 * representatives where t gives it some (a run without a trace: sim.c). */
bool budget_counts_of(const scenario_point *pt, const topology *t, budget_counts *out);
/* Bytes the point takes while it runs on t (trace: its trace too, every
 * GPU simulated). */
double budget_point_bytes(const scenario_point *pt, const topology *t, bool trace);

/* Bytes as a message gives them: GiB from 1 GiB, else MiB (a budget of
 * a few MiB, as tests and small machines set, read "0.0 GiB"); owned by
 * the caller. */
char *budget_bytes_text(double bytes);

/* The budget in bytes; FALSE with an error naming TASP_MEMORY_BUDGET when
 * it is set to something else than a size. */
bool budget_limit(double *bytes, GError **err);

/* The budget budget_check held the run's points to (INFINITY before
 * any): a step replayed whole after its extension came out wrong (sim.c),
 * whose plan was not budgeted, must fit in it alone.  Not less what the
 * other threads hold, so that whether a point is replayed does not depend
 * on --jobs (the budget is half of what the process may use). */
double budget_run_limit(void);

/* Checks every point of the scenarios (scenario *) against the budget,
 * before anything runs.  FALSE with an error blaming `sp_source` (the
 * option or file field the SP degrees come from), or --trace where the
 * trace tips a point over, with the estimate and the budget; a hidden
 * point (a baseline the user did not ask for) over it is not run instead
 * (its `na` says why), as one its scheduler cannot run.  *jobs (the
 * threads asked for, 0: one per CPU) comes back as the threads whose
 * points fit together. */
bool budget_check(GPtrArray *scens, bool trace, const char *sp_source, unsigned *jobs,
                  GError **err);

#endif
