/* exec_slowdown: compute slowed while its GPU's transfers run.  Where the
 * topology's compute.comm_slowdown is above 0, a compute task progresses
 * at 1 - slowdown of its speed alone while any group of its GPU is in
 * flight (the linear kernels and NCCL's copies share the GPU's memory
 * bandwidth: calibration/h200x2-linfid/overlap-n2.jsonl).  Owns exec_slow:
 * per GPU the running task, its work left and a generation that voids its
 * earlier completion events; reads exec_comm's groups in flight. */
#include "exec_internal.h"

/* A compute task's completion event, (generation << 32) | task: void if its
 * GPU's speed changed since it was scheduled. */
static void compute_done(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  uint32_t id = (uint32_t)arg, g = plan_task_at(s->p, id)->gpu;
  if ((uint32_t)(arg >> 32) != s->slow.gen[g]) return;
  s->slow.task[g] = UINT32_MAX;
  exec_kernels_done(s, id);
}

/* Starts task id with `work` seconds at full speed (id = UINT32_MAX: the
 * GPU's transfers started or all ended; the running task's rest is
 * rescheduled). */
static void gpu_rate(exec_state *s, uint32_t g, uint32_t id, double work) {
  double slow = s->t->compute.comm_slowdown, now = engine_now(s->eng);
  exec_slow *w = &s->slow;
  if (slow <= 0) return;
  if (id != UINT32_MAX) {
    w->task[g] = id;
    w->left[g] = work;
  } else if (w->task[g] == UINT32_MAX) {
    return;
  } else { /* the speed changes now: take off the work done at the old one */
    double old = s->comm.active[g] > 0 ? 1 : 1 - slow; /* the count has just changed */
    w->left[g] -= (now - w->since[g]) * old;
    if (w->left[g] < 0) w->left[g] = 0;
  }
  w->since[g] = now;
  double rate = s->comm.active[g] > 0 ? 1 - slow : 1;
  uint64_t arg = ((uint64_t)++w->gen[g] << 32) | w->task[g];
  engine_at(s->eng, now + w->left[g] / rate, compute_done, s, arg);
}

void exec_slow_start(exec_state *s, uint32_t g, uint32_t id, double work) {
  gpu_rate(s, g, id, work);
}

void exec_slow_comm_changed(exec_state *s, uint32_t g) { gpu_rate(s, g, UINT32_MAX, 0); }

void exec_slow_init(exec_state *s) {
  uint32_t n = s->p->n_gpus;
  exec_slow *w = &s->slow;
  w->task = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) w->task[g] = UINT32_MAX;
  w->gen = g_new0(uint32_t, n);
  w->left = g_new0(double, n);
  w->since = g_new0(double, n);
}

void exec_slow_clear(exec_state *s) {
  exec_slow *w = &s->slow;
  g_free(w->task);
  g_free(w->gen);
  g_free(w->left);
  g_free(w->since);
}
