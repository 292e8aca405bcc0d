/* exec_internal: the state of one replay, shared by exec's files; not a
 * contract outside them (exec.h is).
 *
 * exec is split by responsibility, each file owning one part of the state
 * below and the functions that change it:
 *   exec.c          the replay: task readiness, start and end, the per-task
 *                   hooks, the run and its result's totals (exec_graph);
 *   exec_result.c   the result: allocation, adding layers, freeing;
 *   exec_host.c     PyTorch's host-issue clock, known before the run
 *                   (exec_host: issue times and earliest ends);
 *   exec_comm.c     communication: a group's launch cost, its flows
 *                   sorted into bundles, their delivery, and each GPU's
 *                   time with transfers in flight (exec_comm);
 *   exec_slowdown.c compute slowed while its GPU's transfers run
 *                   (exec_slow);
 *   exec_idle.c     the split of the last GPU's idle time into imbalance
 *                   and exposed communication (split_idle; no state kept).
 * A file reads another's part only through the functions declared here,
 * except where noted at the field. */
#ifndef TASP_EXEC_INTERNAL_H
#define TASP_EXEC_INTERNAL_H

#include "engine.h"
#include "exec.h"
#include "exec_mem.h"
#include "net.h"

typedef struct exec_state exec_state;

/* exec.c: the task graph being replayed. */
typedef struct {
  uint32_t *waiting;        /* unfinished predecessors per task */
  uint32_t *succ_off, *succ;
  double *start_s;          /* per task: when it started (freed by split_idle) */
  double *dur_s;            /* per compute task: its time alone (compute_time);
                               split_idle overwrites it */
  double end_s;             /* the last task's end (voided events pass it) */
  uint32_t finished;        /* tasks done, for opts.progress */
} exec_graph;

/* exec_host.c: when each task may start as far as its host is concerned. */
typedef struct {
  double *issue_s;          /* when the task may start: the host has issued it
                               (all its GPUs), or begun to, for a call whose
                               kernels start while it issues (done_by_s);
                               split_idle overwrites it */
  double *done_by_s;        /* per task, NULL if none: a multi-kernel call
                               cannot end before its host start + its time
                               alone (compute_op_alone_s) */
} exec_host;

/* exec_comm.c: groups in flight and what the network needs of them. */
typedef struct {
  uint32_t *flows_left;     /* per task (comm): flows not yet delivered */
  net_member **members;     /* per comm task in flight: its flows, for the network */
  GPtrArray *shapes;        /* per pattern: pattern_launch variants, made at first use */
  uint32_t *pattern_groups; /* per pattern: its groups not yet done */
  uint32_t *pattern_live;   /* per pattern: its groups launched and not yet done */
  uint8_t *pattern_sparse;  /* per pattern: its groups further apart than its pairs */
  double *launched_s;       /* per task, with keep_trace: when its flows started */
  uint32_t *active;         /* per GPU: groups in flight (read by exec_slowdown.c) */
  double *since;            /* per GPU: since when `active` is nonzero */
  uint32_t *stamp;          /* per GPU, for de-duplicating a group's GPUs */
  uint32_t stamp_now;
  uint32_t *msgs;           /* per GPU, scratch for exec_comm_launch_s (all zero) */
} exec_comm;

/* exec_slowdown.c, where compute.comm_slowdown > 0: per GPU, the running
 * compute task (UINT32_MAX none), its work left at full speed as of
 * since, and a generation that voids its earlier completion events. */
typedef struct {
  uint32_t *task, *gen;
  double *left, *since;
} exec_slow;

/* exec.c: kernel prices by operation, the last few distinct ones: the
 * compute model is a pure function of the op (its bytes: plan_op has no
 * padding), and a causal plan prices a million tasks of a handful of
 * shapes (a ring step: one block and one merge shape). */
#define EXEC_PRICE_WAYS 8
typedef struct {
  plan_op op[EXEC_PRICE_WAYS];
  double s[EXEC_PRICE_WAYS];
  uint32_t n, next;
} exec_prices;

struct exec_state {
  const plan *p;
  const topology *t;
  exec_opts opts;
  engine *eng;
  net *net;
  exec_result *r;
  exec_graph g;
  exec_host host;
  exec_comm comm;
  exec_slow slow;
  exec_mem *mem;            /* live bytes per GPU (exec_mem.c) */
  exec_prices prices;
};

/* ---- exec.c ---- */

/* The GPUs compute task t runs on: [*lo, *hi). */
static inline void exec_task_gpus(const exec_state *s, const plan_task *t, uint32_t *lo,
                                  uint32_t *hi) {
  *lo = t->gpu == PLAN_ALL ? 0 : t->gpu;
  *hi = t->gpu == PLAN_ALL ? s->p->n_gpus : t->gpu + 1;
}
/* Whether compute task t runs at all (exec.h: no_comm). */
static inline bool exec_skipped(const exec_opts *o, const plan_task *t) {
  return o->no_comm && t->on_arrival;
}
/* Whether a compute task's kernels hold every SM while they run: a
 * flash-attention kernel does (on H200 a transfer beside it makes no
 * progress: calibration/h200x4-tool, passes with and without communication
 * differ by the whole transfer time); linear-attention kernels and copies
 * leave SMs free (calibration/h200x2-linear: the KV hop overlaps them). */
static inline bool exec_holds_sms(const plan_task *t) {
  return t->kind == TASK_COMPUTE && t->op.kind == OP_ATTN;
}
/* Whether overlap edge i of task t (plan_overlap) is kept: where the
 * topology's kernel_blocks_comm says a transfer gets no SMs beside a
 * kernel that holds them all, the group waits for such a kernel. */
static inline bool exec_overlap_kept(const exec_state *s, const plan_task *t, uint32_t i) {
  return s->t->kernel_blocks_comm && exec_holds_sms(plan_task_at(s->p, s->p->deps[t->dep_off + i]));
}
/* Whether task t waits for its i-th predecessor: a group of a run `alone`
 * waits for none (the program without its communication calls has nothing
 * to wait on); an overlap edge only where exec_overlap_kept. */
static inline bool exec_dep_kept(const exec_state *s, const plan_task *t, uint32_t i) {
  if (s->opts.alone && t->kind == TASK_COMM) return false;
  return !plan_dep_is_overlap(t, i) || exec_overlap_kept(s, t, i);
}
/* A span of the trace, from t0 to now (with keep_trace). */
void exec_span_add(exec_state *s, uint32_t gpu, bool comm, const plan_task *t, double t0);
/* Task id is done now (an engine event: ctx is the state, arg the id). */
void exec_task_done(void *ctx, uint64_t arg);
/* A compute task's GPU work is done (an engine event, as exec_task_done). */
void exec_kernels_done(void *ctx, uint64_t arg);

/* ---- exec_host.c ---- */

/* Issue times (and *done_by, or NULL), or NULL where a lockstep plan must
 * be expanded; `kernels_only`: had the hosts issued no groups. */
double *exec_issue_times(const plan *p, const topology *t, const exec_opts *o,
                         bool kernels_only, double **done_by);

/* ---- exec_comm.c ---- */

void exec_comm_init(exec_state *s);
void exec_comm_clear(exec_state *s);
/* Calls fn(s, g, t, ctx) for every GPU g taking part in comm task t, each once. */
typedef void (*exec_gpu_fn)(exec_state *s, uint32_t g, const plan_task *t, void *ctx);
void exec_group_gpus(exec_state *s, const plan_task *t, exec_gpu_fn fn, void *ctx);
/* Starts group id now: its GPUs have communication in flight, and its
 * flows start after its launch cost (at once where there is nothing to
 * move or opts.no_comm). */
void exec_comm_start(exec_state *s, uint32_t id, const plan_task *t);
/* Group t has ended now: its GPUs' communication time and finish. */
void exec_comm_end(exec_state *s, const plan_task *t);
/* Device-side fixed cost of group t before its data moves. */
double exec_comm_launch_s(exec_state *s, const plan_task *t);

/* ---- exec_slowdown.c ---- */

void exec_slow_init(exec_state *s);
void exec_slow_clear(exec_state *s);
/* Whether compute tasks' speed follows their GPU's transfers in this run. */
static inline bool exec_slow_on(const exec_state *s) { return s->t->compute.comm_slowdown > 0; }
/* Starts compute task id on GPU g with `work` seconds at full speed. */
void exec_slow_start(exec_state *s, uint32_t g, uint32_t id, double work);
/* GPU g's transfers started or all ended: its running task's rest is
 * rescheduled at the new speed. */
void exec_slow_comm_changed(exec_state *s, uint32_t g);

/* ---- exec_idle.c ---- */

/* The split of the step into imbalance and exposed time (exec.h), once
 * the run is over. */
void exec_split_idle(exec_state *s);

#endif
