/* exec: the dependency-driven replay of a plan (exec.h).  Owns the task
 * graph's state (exec_graph): a task is ready when its predecessors have
 * finished, starts once its host has issued it (exec_host.c), and ends
 * when its work is done: a compute task after the compute model's time
 * (slowed under communication: exec_slowdown.c), a group when its flows
 * are delivered (exec_comm.c).  task_began and task_ended are the one
 * place each where a task's start and end are seen: models that follow
 * tasks through simulated time attach there.  After the run, the result's
 * totals and the idle split (exec_idle.c). */
#include "exec_internal.h"

#include "compute.h"
#include "orbits.h"

#include <string.h>

static void start_task(exec_state *s, uint32_t id);

void exec_span_add(exec_state *s, uint32_t gpu, bool comm, const plan_task *t, double t0) {
  if (!s->opts.keep_trace) return;
  exec_span sp = {gpu, comm, comm ? (uint8_t)t->api : (uint8_t)t->op.kind,
                  comm ? t->grads : t->op.backward, t->step, t0, engine_now(s->eng)};
  g_array_append_val(s->r->spans, sp);
}

static void publish(exec_state *s) {
  g_atomic_pointer_set(&s->opts.progress->events, (gsize)engine_events(s->eng));
  g_atomic_int_set(&s->opts.progress->done, (gint)s->g.finished);
}

/* ---- per-task hooks ----
 * Called once per task at engine_now: task_began when it starts (its
 * predecessors are done and its host has issued it; a group before its
 * launch cost, a compute task before its time is taken), task_ended when
 * it is done, before its successors are released.  A model that follows
 * tasks through simulated time (live bytes per GPU: a task's buffers
 * taken when it starts, released when their last reader ends) adds one
 * call to each, and its state beside exec_graph in exec_state. */
static void task_began(exec_state *s, uint32_t id, const plan_task *t) {
  (void)t;
  s->g.start_s[id] = engine_now(s->eng);
  exec_mem_start(s->mem, id, s->g.start_s[id]);
}

static void task_ended(exec_state *s, uint32_t id, const plan_task *t) {
  double now = engine_now(s->eng);
  exec_mem_end(s->mem, id, now);
  if (t->kind == TASK_COMM) {
    exec_comm_end(s, t);
    return;
  }
  uint32_t lo, hi;
  exec_task_gpus(s, t, &lo, &hi);
  for (uint32_t g = lo; g < hi; g++) {
    if (now > s->r->gpu_finish_s[g]) s->r->gpu_finish_s[g] = now;
    exec_span_add(s, g, false, t, s->g.start_s[id]);
  }
}

static void start_event(void *ctx, uint64_t arg) { start_task(ctx, (uint32_t)arg); }

/* Dependencies met: start once the host has issued it too. */
static void ready_task(exec_state *s, uint32_t id) {
  if (s->host.issue_s[id] > engine_now(s->eng))
    engine_at(s->eng, s->host.issue_s[id], start_event, s, id);
  else
    start_task(s, id);
}

/* exec_internal.h */
void exec_task_done(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  uint32_t id = (uint32_t)arg;
  if (s->opts.progress && ++s->g.finished % 1024 == 0) publish(s);
  const plan_task *t = plan_task_at(s->p, id);
  s->g.end_s = engine_now(s->eng);
  task_ended(s, id, t);
  for (uint32_t i = s->g.succ_off[id]; i < s->g.succ_off[id + 1]; i++)
    if (--s->g.waiting[s->g.succ[i]] == 0) ready_task(s, s->g.succ[i]);
}

/* A compute task's GPU work is done: it ends now, or once its host has
 * issued its last kernel and that kernel ran (done_by_s). */
void exec_kernels_done(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  uint32_t id = (uint32_t)arg;
  if (s->host.done_by_s && s->host.done_by_s[id] > engine_now(s->eng))
    engine_at(s->eng, s->host.done_by_s[id], exec_task_done, s, id);
  else
    exec_task_done(s, id);
}

/* compute_op_lookup through s->prices.  A repeated op's lookup is not
 * folded into r->conf again: folding one twice changes nothing (the worst
 * is kept, and this op's is in already). */
static double priced(exec_state *s, const plan_op *op) {
  G_STATIC_ASSERT(sizeof(plan_op) == 9 * sizeof(double) + 8 * sizeof(uint32_t) + 8);
  exec_prices *c = &s->prices;
  for (uint32_t i = 0; i < c->n; i++)
    if (!memcmp(&c->op[i], op, sizeof *op)) return c->s[i];
  double d = compute_op_lookup(&s->t->compute, op, &s->r->conf);
  uint32_t i = c->next;
  c->op[i] = *op;
  c->s[i] = d;
  c->next = (i + 1) % EXEC_PRICE_WAYS;
  if (c->n < EXEC_PRICE_WAYS) c->n++;
  return d;
}

static double compute_time(exec_state *s, const plan_task *t) {
  return s->opts.no_compute || exec_skipped(&s->opts, t) ? 0 : priced(s, &t->op);
}

static void start_task(exec_state *s, uint32_t id) {
  const plan_task *t = plan_task_at(s->p, id);
  double now = engine_now(s->eng);
  task_began(s, id, t);
  if (t->kind == TASK_COMM) {
    exec_comm_start(s, id, t);
    return;
  }
  double d = compute_time(s, t);
  uint32_t lo, hi;
  exec_task_gpus(s, t, &lo, &hi);
  for (uint32_t g = lo; g < hi; g++) s->r->gpu_compute_s[g] += d;
  s->g.dur_s[id] = d;
  s->r->flops += (hi - lo) * compute_op_flops(&t->op);
  if (exec_slow_on(s)) exec_slow_start(s, t->gpu, id, d);  /* never lockstep */
  else engine_at(s->eng, now + d, exec_kernels_done, s, id);
}

/* exec_held_fn: where the hardware holds a group back by a kernel it
 * overlaps (whether or not this run waits on groups at all: `alone`) */
static bool held_back(const plan_task *t, uint32_t i, const void *ctx) {
  return exec_overlap_kept(ctx, t, i);
}

static void build_successors(exec_state *s) {
  const plan *p = s->p;
  exec_graph *gr = &s->g;
  guint n = p->tasks->len;
  gr->succ_off = g_new0(uint32_t, n + 1);
  for (guint i = 0; i < n; i++) {
    const plan_task *t = plan_task_at(p, i);
    gr->waiting[i] = 0;
    for (uint32_t d = 0; d < t->n_dep; d++)
      if (exec_dep_kept(s, t, d)) {
        gr->waiting[i]++;
        gr->succ_off[p->deps[t->dep_off + d] + 1]++;
      }
  }
  for (guint i = 0; i < n; i++) gr->succ_off[i + 1] += gr->succ_off[i];
  g_autofree uint32_t *fill = g_new0(uint32_t, n);
  gr->succ = g_new(uint32_t, gr->succ_off[n] + 1);
  for (guint i = 0; i < n; i++) {
    const plan_task *t = plan_task_at(p, i);
    for (uint32_t d = 0; d < t->n_dep; d++) {
      if (!exec_dep_kept(s, t, d)) continue;
      uint32_t from = p->deps[t->dep_off + d];
      gr->succ[gr->succ_off[from] + fill[from]++] = i;
    }
  }
}

/* The reference: the plan task by task, transfer by transfer. */
static exec_result *run_expanded(const plan *p, const topology *t, const exec_opts *opts) {
  plan *q = plan_expand(p);
  exec_result *r = exec_run(q, t, opts);
  plan_free(q);
  return r;
}

exec_result *exec_run(const plan *p, const topology *t, const exec_opts *opts) {
  /* a kernel's speed under compute.comm_slowdown follows its own GPU's
   * transfers: lockstep copies are run one by one there too */
  if (p->has_lockstep && (opts->per_flow || t->compute.comm_slowdown > 0))
    return run_expanded(p, t, opts);
  double *done_by;
  double *issue = exec_issue_times(p, t, opts, false, &done_by);
  if (!issue) return run_expanded(p, t, opts);
  uint32_t n = p->n_gpus, nc = t->channels->len;
  guint nt = p->tasks->len;
  exec_result *r = exec_result_new(n, nc, opts->keep_trace);
  r->tasks = nt;
  g_autofree double *caps = g_new(double, nc);
  for (uint32_t c = 0; c < nc; c++) caps[c] = topo_chan(t, c)->cap_Bps;
  g_assert(!opts->orbits || (!opts->keep_trace && p->xfer_to));
  if (opts->orbits) orbits_caps(opts->orbits, t, caps);

  exec_state s = {.p = p, .t = t, .opts = *opts, .r = r};
  s.eng = engine_new();
  s.net = net_new(s.eng, nc, caps);
  s.host.issue_s = issue;
  s.host.done_by_s = done_by;
  s.g.waiting = g_new0(uint32_t, nt);
  s.g.start_s = g_new0(double, nt);
  s.g.dur_s = g_new0(double, nt);
  exec_comm_init(&s);
  exec_slow_init(&s);
  build_successors(&s);
  s.mem = exec_mem_new(p, r, opts->keep_trace, held_back, &s, t->record_stream ? issue : NULL,
                       s.g.start_s, opts->mem_per_gpu,
                       (uint64_t)(topo_usable_gib(t) * 1073741824.0), t->empty_cache_first);

  if (opts->progress) {
    g_atomic_int_set(&opts->progress->done, 0);
    g_atomic_int_set(&opts->progress->total, (gint)nt);
  }
  for (guint i = 0; i < nt; i++)
    if (s.g.waiting[i] == 0) ready_task(&s, i);
  engine_run(s.eng);
  if (opts->progress) publish(&s);

  /* the last task's end, not the engine's clock: a wake the network
   * armed for a completion that came earlier once rates rose fires after
   * it, doing nothing (net.c arm_wake), and may be the last event
   * (torus4x4, TP 2 across, zigzag SP 2, a layer's forward: 7.8 us past
   * the last kernel) */
  r->step_s = s.g.end_s;
  for (uint32_t g = 0; g < n; g++) {
    if (r->gpu_compute_s[g] > r->compute_s) r->compute_s = r->gpu_compute_s[g];
    if (r->gpu_comm_s[g] > r->comm_s) r->comm_s = r->gpu_comm_s[g];
    if (r->gpu_finish_s[g] > r->gpu_finish_s[r->last_gpu]) r->last_gpu = g;
  }
  exec_mem_finish(s.mem);
  exec_split_idle(&s);
  for (uint32_t c = 0; c < nc; c++) {
    r->chan_bytes[c] = net_chan_bytes(s.net, c);
    r->chan_busy_s[c] = net_chan_busy_s(s.net, c);
  }
  r->events = engine_events(s.eng);
  r->flows = net_flows_started(s.net);
  r->bundles = net_bundles_started(s.net);
  r->solves = net_solves(s.net);
  if (opts->orbits) orbits_expand(opts->orbits, r);

  net_free(s.net);
  engine_free(s.eng);
  exec_comm_clear(&s);
  exec_slow_clear(&s);
  g_free(s.host.issue_s);
  g_free(s.host.done_by_s);
  g_free(s.g.waiting);
  g_free(s.g.start_s);
  g_free(s.g.dur_s);
  g_free(s.g.succ_off);
  g_free(s.g.succ);
  return r;
}
