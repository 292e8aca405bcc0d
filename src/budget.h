/* budget: the memory a run will take, estimated and checked before any
 * point is built.
 *
 * A point's plan and its replay cost about BUDGET_TASK_BYTES per task and
 * BUDGET_XFER_BYTES per transfer (measured with /usr/bin/time: a 1024-GPU
 * causal ring, about 1.08 M tasks and 1.05 M transfers, peaks 207 MB
 * above the topology's own; a 1024-GPU Ulysses, 4.2 M transfers in a few
 * thousand tasks, 215 MB; a 4096-GPU causal ring 3.7 GB in all), and
 * the plan's buffer declarations and their replay (plan_buf.h,
 * exec_mem.c) about 210 bytes per task more (the 1024-GPU causal ring's
 * forward: 424 MB above the topology's own); with
 * --trace each point's spans, transfers and rate changes are held until
 * the point is written (trace.h).  How many tasks and transfers a
 * scheduler's plan has grows as a polynomial in the SP degree P, per
 * pass; budget.c holds each scheduler's coefficients, and
 * tests/test_budget.c checks them against the plans the schedulers
 * build: never below, and within a small factor.
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

#define BUDGET_TASK_BYTES 370.0
/* 56 bytes measured, and 8 more: on a switched topology (nvswitch,
 * multi_node) a transfer's route is computed and kept with its group's
 * members (exec_comm.c) instead of pointing into a table per GPU pair */
#define BUDGET_XFER_BYTES 64.0
/* with --trace: an exec_span (32 bytes) per span, an exec_xfer (40) per
 * transfer and an exec_rate (24) per rate change */
#define BUDGET_SPAN_BYTES 32.0
#define BUDGET_TRACE_XFER_BYTES 40.0
#define BUDGET_RATE_BYTES 24.0

/* Upper estimates of what one point builds and records. */
typedef struct {
  double tasks, xfers;   /* plan tasks; transfers, patterns expanded */
  double spans, rates;   /* trace: spans and channel rate changes */
} budget_counts;

/* The point's counts; FALSE when its scheduler has no coefficients.  With
 * t, at scope layer or model, those of the plan for layer_orbits'
 * representatives where t gives it some (a run without a trace: sim.c). */
bool budget_counts_of(const scenario_point *pt, const topology *t, budget_counts *out);
/* Bytes the point takes while it runs on t (trace: its trace too, every
 * GPU simulated). */
double budget_point_bytes(const scenario_point *pt, const topology *t, bool trace);

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
 * trace tips a point over, with the estimate and the budget.  *jobs (the
 * threads asked for, 0: one per CPU) comes back as the threads whose
 * points fit together. */
bool budget_check(const GPtrArray *scens, bool trace, const char *sp_source, unsigned *jobs,
                  GError **err);

#endif
