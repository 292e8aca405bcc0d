/* exec_idle: the split of the step into the last GPU's compute, imbalance
 * and exposed time (exec.h: exposed_s, imbalance_s, exposed_fixed_s,
 * exposed_host_s, gpu_imbalance_s), from replays of the finished run's
 * task graph without the network's time.  Runs once, after the run
 * (exec_split_idle); keeps no state of its own beyond that call. */
#include "exec_internal.h"

/* Each GPU's end in the replay without the network (a), as tasks are
 * replayed: gpu_end[g] the latest of its tasks' ends, task_end the end of
 * the task at hand. */
typedef struct {
  double *gpu_end;
  double task_end;
} gpu_ends;

static void gpu_end_at(exec_state *s, uint32_t g, const plan_task *t, void *ctx) {
  (void)s;
  (void)t;
  gpu_ends *e = ctx;
  if (e->task_end > e->gpu_end[g]) e->gpu_end[g] = e->task_end;
}

/* The split of the step (exec.h), from three replays of the finished
 * run's task graph in task order (ids are in dependency order: plan_dep):
 * every task as early as its predecessors allow, each kernel taking its
 * time alone (dur_s: not slowed by transfers), every group in no time,
 * and (a) nothing else: the step without the network's time, the last
 * GPU's compute and its waits on others' compute however they reach it (a
 * transfer held by a late producer waits on that producer); (b) each task
 * waiting for its host to issue it and each group taking its launch cost,
 * as in the run: only the flights left out; (c) each kernel waiting for
 * its host as if the hosts issued no groups: kernel issue alone.  The
 * step less (a) is exposed: of it, (b) - (c) launch costs and group issue,
 * (c) - (a) kernel issue.  The ends overwrite dur_s (a), issue_s (b) and
 * the kernel-only issue times (c), each read at a task before it is
 * written there.  start_s is no longer needed: freed first. */
void exec_split_idle(exec_state *s) {
  const plan *p = s->p;
  exec_result *r = s->r;
  g_clear_pointer(&s->g.start_s, g_free);
  g_autofree double *kdone = NULL;
  g_autofree double *kernel = exec_issue_times(p, s->t, &s->opts, true, &kdone);
  double *fin = s->g.dur_s, *staged = s->host.issue_s;
  double free_s = 0, staged_s = 0, kernel_s = 0;
  gpu_ends ends = {g_new0(double, r->n_gpus), 0};
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    double at = 0, st = staged[i], kt = 0;
    for (uint32_t d = 0; d < t->n_dep; d++) {
      if (!exec_dep_kept(s, t, d)) continue;
      uint32_t k = p->deps[t->dep_off + d];
      if (fin[k] > at) at = fin[k];
      if (staged[k] > st) st = staged[k];
      if (kernel && kernel[k] > kt) kt = kernel[k];
    }
    if (t->kind == TASK_COMM) {
      if (!s->opts.no_comm && t->n_xfer > 0) st += exec_comm_launch_s(s, t);
    } else {
      if (kernel && kernel[i] > kt) kt = kernel[i];
      at += fin[i];
      st += fin[i];
      kt += fin[i];
      if (s->host.done_by_s && s->host.done_by_s[i] > st) st = s->host.done_by_s[i];
      if (kdone && kdone[i] > kt) kt = kdone[i];
    }
    fin[i] = at;
    staged[i] = st;
    if (kernel) kernel[i] = kt;
    if (at > free_s) free_s = at;
    if (st > staged_s) staged_s = st;
    if (kt > kernel_s) kernel_s = kt;
    ends.task_end = at;
    if (t->kind != TASK_COMM) {
      uint32_t lo, hi;
      exec_task_gpus(s, t, &lo, &hi);
      for (uint32_t g = lo; g < hi; g++) gpu_end_at(s, g, t, &ends);
    } else if (t->n_xfer > 0) {
      exec_group_gpus(s, t, gpu_end_at, &ends);
    }
  }
  for (uint32_t g = 0; g < r->n_gpus; g++)
    r->gpu_imbalance_s[g] = ends.gpu_end[g] > r->gpu_compute_s[g] ? ends.gpu_end[g] - r->gpu_compute_s[g] : 0;
  g_free(ends.gpu_end);
  /* the last GPU waits until the step's end, whoever ends it */
  uint32_t last = r->last_gpu;
  double imbalance = free_s - r->gpu_compute_s[last];
  r->gpu_imbalance_s[last] = r->imbalance_s = imbalance > 0 ? imbalance : 0;
  r->exposed_s = r->step_s - r->gpu_compute_s[last] - r->imbalance_s;
  if (r->exposed_s < 0) r->exposed_s = 0;
  /* kernel_s is free_s where the kernel-only clock is not known (a
   * lockstep plan whose hosts would part) */
  double host = kernel ? kernel_s - free_s : 0, fixed = staged_s - (kernel ? kernel_s : free_s);
  r->exposed_host_s = host < 0 ? 0 : host < r->exposed_s ? host : r->exposed_s;
  double left = r->exposed_s - r->exposed_host_s;
  r->exposed_fixed_s = fixed < 0 ? 0 : fixed < left ? fixed : left;
}
