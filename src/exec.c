/* exec: dependency-driven replay of a plan. */
#include "exec.h"

#include "compute.h"
#include "engine.h"
#include "exec_mem.h"
#include "groups.h"
#include "net.h"

#include <string.h>

typedef struct {
  const plan *p;
  const topology *t;
  exec_opts opts;
  engine *eng;
  net *net;
  uint32_t *waiting;        /* unfinished predecessors per task */
  uint32_t *succ_off, *succ;
  uint32_t *flows_left;     /* per task (comm) */
  double *start_s;
  double *issue_s;          /* when the task may start: the host has issued it
                               (all its GPUs), or begun to, for a call whose
                               kernels start while it issues (done_by_s) */
  double *done_by_s;        /* per task, NULL if none: a multi-kernel call
                               cannot end before its host start + its time
                               alone (compute_op_alone_s) */
  uint32_t *comm_active;    /* per GPU: groups in flight */
  double *comm_since;
  uint32_t *stamp;          /* per GPU, for de-duplicating a group's GPUs */
  uint32_t stamp_now;
  uint32_t *msgs;           /* per GPU, scratch for comm_launch_s (all zero) */
  double *dur_s;            /* per compute task: its time alone (compute_time) */
  double *gpu_end;          /* per GPU, for split_idle: when its last task would end */
  double task_end;          /* for split_idle: the end of the task it is at */
  /* per GPU, where compute.comm_slowdown > 0: the running compute task
   * (UINT32_MAX none), its work left at full speed as of run_since, and a
   * generation that voids its earlier completion events */
  uint32_t *run_task, *run_gen;
  double *run_left, *run_since;
  double end_s;             /* the last task's end (voided events pass it) */
  double *launched_s;       /* per task, with keep_trace: when its flows started */
  uint32_t finished;        /* tasks done, for opts.progress */
  net_member **members;     /* per comm task in flight: its flows, for the network */
  GPtrArray *shapes;        /* per pattern: pattern_launch variants, made at first use */
  exec_mem *mem;            /* live bytes per GPU (exec_mem.c) */
  exec_result *r;
} exec_state;

/* The GPUs compute task t runs on: [*lo, *hi). */
static void task_gpus(const exec_state *s, const plan_task *t, uint32_t *lo, uint32_t *hi) {
  *lo = t->gpu == PLAN_ALL ? 0 : t->gpu;
  *hi = t->gpu == PLAN_ALL ? s->p->n_gpus : t->gpu + 1;
}

static void start_task(exec_state *s, uint32_t id);
static void ready_task(exec_state *s, uint32_t id);
static void gpu_rate(exec_state *s, uint32_t g, uint32_t id, double work);
static void kernels_done(void *ctx, uint64_t arg);

static void span(exec_state *s, uint32_t gpu, bool comm, const plan_task *t, double t0) {
  if (!s->opts.keep_trace) return;
  exec_span sp = {gpu, comm, comm ? (uint8_t)t->api : (uint8_t)t->op.kind,
                  comm ? t->grads : t->op.backward, t->step, t0, engine_now(s->eng)};
  g_array_append_val(s->r->spans, sp);
}

/* Calls fn for every GPU taking part in comm task t, each once. */
static void for_group_gpus(exec_state *s, const plan_task *t,
                           void (*fn)(exec_state *, uint32_t, const plan_task *)) {
  const plan_pattern_info *pi = plan_task_pattern(s->p, t);
  if (pi) {
    for (uint32_t i = 0; i < pi->n_gpus; i++)
      fn(s, g_array_index(s->p->pattern_gpus, uint32_t, pi->gpu_off + i), t);
    return;
  }
  s->stamp_now++;
  for (uint32_t i = 0; i < t->n_xfer; i++) {
    const plan_xfer *x = &g_array_index(s->p->xfers, plan_xfer, t->xfer_off + i);
    uint32_t g2[2] = {x->src, x->dst};
    for (int k = 0; k < 2; k++) {
      if (s->stamp[g2[k]] == s->stamp_now) continue;
      s->stamp[g2[k]] = s->stamp_now;
      fn(s, g2[k], t);
    }
  }
}

static void gpu_comm_begin(exec_state *s, uint32_t g, const plan_task *t) {
  (void)t;
  if (s->comm_active[g]++ == 0) {
    s->comm_since[g] = engine_now(s->eng);
    gpu_rate(s, g, UINT32_MAX, 0);
  }
}

static double task_start_of(exec_state *s, const plan_task *t) {
  return s->start_s[t - (const plan_task *)s->p->tasks->data];
}

static void gpu_comm_end(exec_state *s, uint32_t g, const plan_task *t) {
  double now = engine_now(s->eng);
  if (--s->comm_active[g] == 0) {
    s->r->gpu_comm_s[g] += now - s->comm_since[g];
    gpu_rate(s, g, UINT32_MAX, 0);
  }
  if (now > s->r->gpu_finish_s[g]) s->r->gpu_finish_s[g] = now;
  span(s, g, true, t, task_start_of(s, t));
}

static void publish(exec_state *s) {
  g_atomic_pointer_set(&s->opts.progress->events, (gsize)engine_events(s->eng));
  g_atomic_int_set(&s->opts.progress->done, (gint)s->finished);
}

static void task_done(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  uint32_t id = (uint32_t)arg;
  if (s->opts.progress && ++s->finished % 1024 == 0) publish(s);
  const plan_task *t = plan_task_at(s->p, id);
  double now = engine_now(s->eng);
  s->end_s = now;
  exec_mem_end(s->mem, id, now);
  if (t->kind == TASK_COMM) {
    for_group_gpus(s, t, gpu_comm_end);
  } else {
    uint32_t lo, hi;
    task_gpus(s, t, &lo, &hi);
    for (uint32_t g = lo; g < hi; g++) {
      if (now > s->r->gpu_finish_s[g]) s->r->gpu_finish_s[g] = now;
      span(s, g, false, t, s->start_s[id]);
    }
  }
  for (uint32_t i = s->succ_off[id]; i < s->succ_off[id + 1]; i++)
    if (--s->waiting[s->succ[i]] == 0) ready_task(s, s->succ[i]);
}

/* Flows delivered: the tag is their group's task id; a member's id is its
 * transfer's index in the group. */
static void flow_done(void *ctx, uint64_t tag, const net_member *m, uint32_t count) {
  exec_state *s = ctx;
  uint32_t task = (uint32_t)tag;
  if (s->opts.keep_trace) {
    const plan_task *t = plan_task_at(s->p, task);
    for (uint32_t i = 0; i < count; i++) {
      plan_xfer x = plan_xfer_at(s->p, t, m[i].id);
      exec_xfer e = {x.src, x.dst, t->step, x.bytes, s->launched_s[task], engine_now(s->eng)};
      g_array_append_val(s->r->xfers, e);
    }
  }
  g_assert(s->flows_left[task] >= count);
  s->flows_left[task] -= count;
  if (s->flows_left[task] == 0) {
    g_free(s->members[task]);
    s->members[task] = NULL;
    task_done(s, task);
  }
}

/* What makes two flows of a group alike: they then start as one bundle. */
typedef struct {
  double bytes, cap, latency;
  uint32_t hops;
} flow_kind;

static guint flow_kind_hash(gconstpointer p) {
  const flow_kind *k = p;
  return g_double_hash(&k->bytes) ^ (g_double_hash(&k->cap) * 31) ^
         (g_double_hash(&k->latency) * 17) ^ k->hops;
}

static gboolean flow_kind_equal(gconstpointer a, gconstpointer b) {
  const flow_kind *x = a, *y = b;
  return x->bytes == y->bytes && x->cap == y->cap && x->latency == y->latency &&
         x->hops == y->hops;
}

/* A group's transfers sorted into kinds, in first-seen order: members
 * [at[k], at[k+1]) are of kind k and start as one bundle. */
typedef struct {
  net_member *m;
  flow_kind *kinds;
  uint32_t nk, *at;
} flow_kinds;

static void flow_kinds_clear(flow_kinds *f) {
  g_free(f->kinds);
  g_free(f->at);
}

/* Sorts group t's transfers into kinds; a member's id is its transfer's
 * index in the group. */
static flow_kinds sort_kinds(exec_state *s, const plan_task *t) {
  uint32_t nx = plan_xfer_count(s->p, t);
  g_autofree flow_kind *kinds = g_new(flow_kind, nx);
  g_autofree net_member *m = g_new(net_member, nx);
  for (uint32_t i = 0; i < nx; i++) {
    plan_xfer x = plan_xfer_at(s->p, t, i);
    size_t pair = (size_t)x.src * s->t->n_gpus + x.dst;
    /* a ring collective's edge is several NCCL channels, not one
     * connection (plan_coll.c), and pays the latency once per step */
    double cap = plan_api_is_ring(t->api) ? 0 : s->t->route_cap_Bps[pair];
    m[i].route = topo_route_chans(s->t, x.src, x.dst, &kinds[i].hops);
    m[i].id = i;
    kinds[i].bytes = x.bytes;
    kinds[i].cap = cap;
    kinds[i].latency = s->t->route_latency_s[pair] * x.steps;
  }
  groups g;
  groups_make(&g, kinds, sizeof *kinds, nx, flow_kind_hash, flow_kind_equal);
  flow_kinds f = {.nk = g.n, .m = g_new(net_member, nx), .at = g.at};
  f.kinds = g_new(flow_kind, f.nk);
  for (uint32_t k = 0; k < f.nk; k++) f.kinds[k] = kinds[g.order[g.at[k]]];
  for (uint32_t i = 0; i < nx; i++) f.m[i] = m[g.order[i]];
  g_free(g.order);  /* f owns g.at */
  return f;
}

/* A pattern's kinds and each kind's net shape, made at its first launch
 * (per api family and pipelined steps, which set caps and latencies) and
 * kept for the run: a pattern launched every step costs its channels, not
 * its pairs. */
typedef struct {
  bool ring;
  uint32_t steps;
  flow_kinds f;
  net_shape **shapes;
} pattern_launch;

static void pattern_launch_free(gpointer p) {
  pattern_launch *l = p;
  for (uint32_t k = 0; k < l->f.nk; k++) net_shape_free(l->shapes[k]);
  g_free(l->shapes);
  g_free(l->f.m);
  flow_kinds_clear(&l->f);
  g_free(l);
}

static void pattern_variants_free(gpointer p) {
  if (p) g_ptr_array_unref(p);
}

static const pattern_launch *pattern_launch_of(exec_state *s, const plan_task *t) {
  const plan_xfer *x = &g_array_index(s->p->xfers, plan_xfer, t->xfer_off);
  bool ring = plan_api_is_ring(t->api);
  if (!s->shapes) s->shapes = g_ptr_array_new_with_free_func(pattern_variants_free);
  if (s->shapes->len <= x->dst) g_ptr_array_set_size(s->shapes, x->dst + 1);
  GPtrArray *vs = g_ptr_array_index(s->shapes, x->dst);
  if (!vs) vs = g_ptr_array_index(s->shapes, x->dst) = g_ptr_array_new_with_free_func(pattern_launch_free);
  for (guint i = 0; i < vs->len; i++) {
    const pattern_launch *l = g_ptr_array_index(vs, i);
    if (l->ring == ring && l->steps == x->steps) return l;
  }
  pattern_launch *l = g_new(pattern_launch, 1);
  *l = (pattern_launch){ring, x->steps, sort_kinds(s, t), NULL};
  l->shapes = g_new(net_shape *, l->f.nk);
  for (uint32_t k = 0; k < l->f.nk; k++)
    l->shapes[k] = net_shape_new(&l->f.m[l->f.at[k]], l->f.at[k + 1] - l->f.at[k], l->f.kinds[k].hops);
  g_ptr_array_add(vs, l);
  return l;
}

static void comm_launched(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  uint32_t id = (uint32_t)arg;
  const plan_task *t = plan_task_at(s->p, id);
  s->flows_left[id] = plan_xfer_count(s->p, t);
  if (s->opts.keep_trace) s->launched_s[id] = engine_now(s->eng);
  if (plan_task_pattern(s->p, t)) {
    const pattern_launch *l = pattern_launch_of(s, t);
    double bytes = g_array_index(s->p->xfers, plan_xfer, t->xfer_off).bytes;
    for (uint32_t k = 0; k < l->f.nk; k++) {
      const flow_kind *fk = &l->f.kinds[k];
      net_shape_start(s->net, l->shapes[k], fk->latency, bytes, fk->cap, flow_done, s, id);
    }
    return;
  }
  flow_kinds f = sort_kinds(s, t);
  s->members[id] = f.m;  /* freed when the group is done */
  for (uint32_t k = 0; k < f.nk; k++) {
    const flow_kind *fk = &f.kinds[k];
    net_bundle_start(s->net, &f.m[f.at[k]], f.at[k + 1] - f.at[k], fk->hops, fk->latency,
                     fk->bytes, fk->cap, flow_done, s, id);
  }
  flow_kinds_clear(&f);
}

/* Device-side fixed cost of a group before its data moves: a collective
 * call's, or a grouped send/receive's, which grows with the messages the
 * busiest GPU in it sends and receives (calibration/h200x4-tool: 0.17 ms
 * for one message each way, 0.32 ms for six). */
static double comm_launch_s(exec_state *s, const plan_task *t) {
  if (t->api != COMM_P2P) return s->t->launch_s;
  if (s->t->p2p_msg_s == 0) return s->t->p2p_launch_s;
  const plan_pattern_info *pi = plan_task_pattern(s->p, t);
  uint32_t *msgs = s->msgs, busiest = 0;
  if (pi) {
    busiest = pi->max_degree * g_array_index(s->p->xfers, plan_xfer, t->xfer_off).msgs;
  } else {
    for (uint32_t i = 0; i < t->n_xfer; i++) {
      const plan_xfer *x = &g_array_index(s->p->xfers, plan_xfer, t->xfer_off + i);
      msgs[x->src] += x->msgs;
      msgs[x->dst] += x->msgs;
      if (msgs[x->src] > busiest) busiest = msgs[x->src];
      if (msgs[x->dst] > busiest) busiest = msgs[x->dst];
    }
    for (uint32_t i = 0; i < t->n_xfer; i++) {
      const plan_xfer *x = &g_array_index(s->p->xfers, plan_xfer, t->xfer_off + i);
      msgs[x->src] = msgs[x->dst] = 0;
    }
  }
  return s->t->p2p_launch_s + s->t->p2p_msg_s * busiest;
}

/* Whether compute task t runs at all (exec.h: no_comm). */
static bool skipped(const exec_opts *o, const plan_task *t) {
  return o->no_comm && t->on_arrival;
}

static double compute_time(exec_state *s, const plan_task *t) {
  return s->opts.no_compute || skipped(&s->opts, t) ? 0
         : compute_op_lookup(&s->t->compute, &t->op, &s->r->conf);
}

static void start_task(exec_state *s, uint32_t id) {
  const plan_task *t = plan_task_at(s->p, id);
  double now = engine_now(s->eng);
  s->start_s[id] = now;
  exec_mem_start(s->mem, id, now);
  if (t->kind == TASK_COMM) {
    if (t->n_xfer == 0) {  /* a pure synchronisation point */
      engine_at(s->eng, now, task_done, s, id);
      return;
    }
    for_group_gpus(s, t, gpu_comm_begin);
    if (s->opts.no_comm) engine_at(s->eng, now, task_done, s, id);
    else engine_at(s->eng, now + comm_launch_s(s, t), comm_launched, s, id);
    return;
  }
  double d = compute_time(s, t);
  uint32_t lo, hi;
  task_gpus(s, t, &lo, &hi);
  for (uint32_t g = lo; g < hi; g++) s->r->gpu_compute_s[g] += d;
  s->dur_s[id] = d;
  s->r->flops += (hi - lo) * compute_op_flops(&t->op);
  if (s->t->compute.comm_slowdown > 0) gpu_rate(s, t->gpu, id, d);  /* never lockstep */
  else engine_at(s->eng, now + d, kernels_done, s, id);
}

static void start_event(void *ctx, uint64_t arg) { start_task(ctx, (uint32_t)arg); }

/* A compute task's GPU work is done: it ends now, or once its host has
 * issued its last kernel and that kernel ran (done_by_s). */
static void kernels_done(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  uint32_t id = (uint32_t)arg;
  if (s->done_by_s && s->done_by_s[id] > engine_now(s->eng))
    engine_at(s->eng, s->done_by_s[id], task_done, s, id);
  else
    task_done(s, id);
}

/* A compute task's completion event, (generation << 32) | task: void if its
 * GPU's speed changed since it was scheduled. */
static void compute_done(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  uint32_t id = (uint32_t)arg, g = plan_task_at(s->p, id)->gpu;
  if ((uint32_t)(arg >> 32) != s->run_gen[g]) return;
  s->run_task[g] = UINT32_MAX;
  kernels_done(s, id);
}

/* compute.comm_slowdown: a compute task progresses at 1 - slowdown of its
 * speed alone while any transfer of its GPU is in flight (the linear
 * kernels and NCCL's copies share the GPU's memory bandwidth:
 * calibration/h200x2-linfid/overlap-n2.jsonl).  Starts task id with
 * `work` seconds at full speed (id = UINT32_MAX: the GPU's transfers
 * started or all ended; the running task's rest is rescheduled). */
static void gpu_rate(exec_state *s, uint32_t g, uint32_t id, double work) {
  double slow = s->t->compute.comm_slowdown, now = engine_now(s->eng);
  if (slow <= 0) return;
  if (id != UINT32_MAX) {
    s->run_task[g] = id;
    s->run_left[g] = work;
  } else if (s->run_task[g] == UINT32_MAX) {
    return;
  } else { /* the speed changes now: take off the work done at the old one */
    double old = s->comm_active[g] > 0 ? 1 : 1 - slow; /* the count has just changed */
    s->run_left[g] -= (now - s->run_since[g]) * old;
    if (s->run_left[g] < 0) s->run_left[g] = 0;
  }
  s->run_since[g] = now;
  double rate = s->comm_active[g] > 0 ? 1 - slow : 1;
  uint64_t arg = ((uint64_t)++s->run_gen[g] << 32) | s->run_task[g];
  engine_at(s->eng, now + s->run_left[g] / rate, compute_done, s, arg);
}

/* Dependencies met: start once the host has issued it too. */
static void ready_task(exec_state *s, uint32_t id) {
  if (s->issue_s[id] > engine_now(s->eng)) engine_at(s->eng, s->issue_s[id], start_event, s, id);
  else start_task(s, id);
}

/* The host thread of each GPU issues its tasks in plan order (a group
 * with host_at, at that task's place instead) and never waits for the GPU
 * (PyTorch's stream semantics: a NCCL wait() makes the stream wait, not
 * the host), so issue times are known before the run.
 * A collective costs each GPU in it comm_host_s; a grouped send/receive
 * p2p_host_s plus p2p_op_host_s per isend or irecv that GPU puts in it (one
 * per message it sends or receives): calibration/h200x2-host, where
 * batch_isend_irecv's host time grows with its ops.  A group starts once
 * every GPU in it has issued it.  A compute task starts once its host has
 * issued it, except a call whose time alone is known
 * (compute_op_alone_s): its kernels start while its host still issues the
 * later ones (calibration/h200x2-linfid: a causal intra call at 2K tokens
 * is 154 us of host work and 195 us of GPU work, 280 us alone), so it may
 * start when its host begins it and ends no earlier than that plus its
 * time alone. */
typedef struct {
  const plan *p;
  const topology *t;
  const exec_opts *o;
  double *issue, *done_by; /* the results (done_by NULL until needed) */
  double *host;            /* per GPU: its host's clock */
  guint *in;               /* per GPU: i+1 once it took part in group i */
  uint32_t *ops;           /* per GPU: scratch, isends and irecvs */
  bool kernels_only;       /* hosts that issue no groups (split_idle) */
} host_clock;

static void issue_comm(host_clock *h, guint i, const plan_task *k) {
  const topology *t = h->t;
  double *host = h->host, *issue = h->issue;
  bool p2p = k->api == COMM_P2P;
  double base = p2p && t->p2p_host_s >= 0 ? t->p2p_host_s : t->comm_host_s;
  double per_op = p2p ? t->p2p_op_host_s : 0;
  const plan_pattern_info *pi = plan_task_pattern(h->p, k);
  if (pi) {
    uint32_t msgs = g_array_index(h->p->xfers, plan_xfer, k->xfer_off).msgs;
    for (uint32_t j = 0; j < pi->n_gpus; j++) {
      uint32_t g = g_array_index(h->p->pattern_gpus, uint32_t, pi->gpu_off + j);
      uint32_t deg = g_array_index(h->p->pattern_degree, uint32_t, pi->degree_off + g);
      host[g] += base + per_op * deg * msgs;
      if (host[g] > issue[i]) issue[i] = host[g];
    }
    return;
  }
  for (uint32_t x = 0; x < k->n_xfer; x++) {
    const plan_xfer *tx = &g_array_index(h->p->xfers, plan_xfer, k->xfer_off + x);
    h->ops[tx->src] += tx->msgs;
    h->ops[tx->dst] += tx->msgs;
  }
  for (uint32_t x = 0; x < k->n_xfer; x++) {
    const plan_xfer *tx = &g_array_index(h->p->xfers, plan_xfer, k->xfer_off + x);
    uint32_t g2[2] = {tx->src, tx->dst};
    for (int e = 0; e < 2; e++) {
      uint32_t g = g2[e];
      if (h->in[g] == i + 1) continue;
      h->in[g] = i + 1;
      host[g] += base + per_op * h->ops[g];
      h->ops[g] = 0;
      if (host[g] > issue[i]) issue[i] = host[g];
    }
  }
}

/* False where a lockstep task's GPUs would issue it at different times. */
static bool issue_compute(host_clock *h, guint i, const plan_task *k) {
  const compute_model *m = &h->t->compute;
  bool skip = skipped(h->o, k);
  double c = skip ? 0 : compute_op_host_s(m, &k->op);
  double alone = skip ? 0 : compute_op_alone_s(m, &k->op);
  uint32_t g0 = k->gpu == PLAN_ALL ? 0 : k->gpu;
  /* a lockstep task's copies are issued at once only if every host got
   * there at the same time: else the plan must be expanded */
  if (k->gpu == PLAN_ALL)
    for (uint32_t g = 1; g < h->p->n_gpus; g++)
      if (h->host[g] != h->host[0]) return false;
  double begun = h->host[g0];
  if (k->gpu == PLAN_ALL)
    for (uint32_t g = 0; g < h->p->n_gpus; g++) h->host[g] += c;
  else
    h->host[g0] += c;
  h->issue[i] = alone > 0 ? begun : h->host[g0];
  if (alone > 0) {
    if (!h->done_by) h->done_by = g_new0(double, h->p->tasks->len);
    h->done_by[i] = begun + alone;
  }
  return true;
}

static bool issue_task(host_clock *h, guint i) {
  const plan_task *k = plan_task_at(h->p, i);
  if (k->kind == TASK_COMM) {
    if (!h->o->no_comm && !h->kernels_only) issue_comm(h, i, k);
    return true;
  }
  return h->o->no_compute || issue_compute(h, i, k);
}

static gint by_host_at(gconstpointer a, gconstpointer b) {
  const uint32_t *x = a, *y = b; /* (host_at, task) */
  return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Issue times (and *done_by, or NULL), or NULL where a lockstep plan must
 * be expanded; `kernels_only`: had the hosts issued no groups. */
static double *issue_times(const plan *p, const topology *t, const exec_opts *o,
                           bool kernels_only, double **done_by) {
  guint nt = p->tasks->len;
  g_autofree double *host = g_new0(double, p->n_gpus);
  g_autofree guint *in = g_new0(guint, p->n_gpus);
  g_autofree uint32_t *ops = g_new0(uint32_t, p->n_gpus);
  host_clock h = {p, t, o, g_new0(double, nt), NULL, host, in, ops, kernels_only};
  /* groups issued ahead of their place, by the place */
  g_autoptr(GArray) early = g_array_new(FALSE, FALSE, 2 * sizeof(uint32_t));
  for (guint i = 0; i < nt; i++) {
    uint32_t at = plan_task_at(p, i)->host_at;
    if (at != PLAN_IN_PLACE) g_array_append_vals(early, (uint32_t[2]){at, i}, 1);
  }
  g_array_sort(early, by_host_at);
  bool ok = true;
  guint e = 0;
  for (guint i = 0; ok && i < nt; i++) {
    for (; ok && e < early->len && g_array_index(early, uint32_t, 2 * e) == i; e++)
      ok = issue_task(&h, g_array_index(early, uint32_t, 2 * e + 1));
    if (ok && plan_task_at(p, i)->host_at == PLAN_IN_PLACE) ok = issue_task(&h, i);
  }
  if (!ok) {
    g_free(h.issue);
    g_free(h.done_by);
    h.issue = h.done_by = NULL;
  }
  *done_by = h.done_by;
  return h.issue;
}

static void on_rate(void *ctx, uint32_t chan, double t_s, double rate) {
  exec_state *s = ctx;
  exec_rate r = {chan, t_s, rate};
  g_array_append_val(s->r->rates, r);
}

/* Predecessors task t waits for: none for a group of a run `alone` (the
 * program without its communication calls has nothing to wait on). */
static uint32_t deps_kept(const exec_state *s, const plan_task *t) {
  return s->opts.alone && t->kind == TASK_COMM ? 0 : t->n_dep;
}

static void build_successors(exec_state *s) {
  const plan *p = s->p;
  guint n = p->tasks->len;
  s->succ_off = g_new0(uint32_t, n + 1);
  for (guint i = 0; i < n; i++) {
    const plan_task *t = plan_task_at(p, i);
    uint32_t nd = deps_kept(s, t);
    s->waiting[i] = nd;
    for (uint32_t d = 0; d < nd; d++) s->succ_off[p->deps[t->dep_off + d] + 1]++;
  }
  for (guint i = 0; i < n; i++) s->succ_off[i + 1] += s->succ_off[i];
  g_autofree uint32_t *fill = g_new0(uint32_t, n);
  s->succ = g_new(uint32_t, s->succ_off[n] + 1);
  for (guint i = 0; i < n; i++) {
    const plan_task *t = plan_task_at(p, i);
    uint32_t nd = deps_kept(s, t);
    for (uint32_t d = 0; d < nd; d++) {
      uint32_t from = p->deps[t->dep_off + d];
      s->succ[s->succ_off[from] + fill[from]++] = i;
    }
  }
}

static void gpu_end_at(exec_state *s, uint32_t g, const plan_task *t) {
  (void)t;
  if (s->task_end > s->gpu_end[g]) s->gpu_end[g] = s->task_end;
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
static void split_idle(exec_state *s) {
  const plan *p = s->p;
  exec_result *r = s->r;
  g_clear_pointer(&s->start_s, g_free);
  g_autofree double *kdone = NULL;
  g_autofree double *kernel = issue_times(p, s->t, &s->opts, true, &kdone);
  double *fin = s->dur_s, *staged = s->issue_s;
  double free_s = 0, staged_s = 0, kernel_s = 0;
  s->gpu_end = g_new0(double, r->n_gpus);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    double at = 0, st = staged[i], kt = 0;
    for (uint32_t d = 0, nd = deps_kept(s, t); d < nd; d++) {
      uint32_t k = p->deps[t->dep_off + d];
      if (fin[k] > at) at = fin[k];
      if (staged[k] > st) st = staged[k];
      if (kernel && kernel[k] > kt) kt = kernel[k];
    }
    if (t->kind == TASK_COMM) {
      if (!s->opts.no_comm && t->n_xfer > 0) st += comm_launch_s(s, t);
    } else {
      if (kernel && kernel[i] > kt) kt = kernel[i];
      at += fin[i];
      st += fin[i];
      kt += fin[i];
      if (s->done_by_s && s->done_by_s[i] > st) st = s->done_by_s[i];
      if (kdone && kdone[i] > kt) kt = kdone[i];
    }
    fin[i] = at;
    staged[i] = st;
    if (kernel) kernel[i] = kt;
    if (at > free_s) free_s = at;
    if (st > staged_s) staged_s = st;
    if (kt > kernel_s) kernel_s = kt;
    s->task_end = at;
    if (t->kind != TASK_COMM) {
      uint32_t lo, hi;
      task_gpus(s, t, &lo, &hi);
      for (uint32_t g = lo; g < hi; g++) gpu_end_at(s, g, t);
    } else if (t->n_xfer > 0) {
      for_group_gpus(s, t, gpu_end_at);
    }
  }
  for (uint32_t g = 0; g < r->n_gpus; g++)
    r->gpu_imbalance_s[g] = s->gpu_end[g] > r->gpu_compute_s[g] ? s->gpu_end[g] - r->gpu_compute_s[g] : 0;
  g_clear_pointer(&s->gpu_end, g_free);
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

exec_result *exec_result_new(uint32_t n_gpus, uint32_t n_chan, bool keep_trace) {
  exec_result *r = g_new0(exec_result, 1);
  r->n_gpus = n_gpus;
  r->n_chan = n_chan;
  r->gpu_compute_s = g_new0(double, n_gpus);
  r->gpu_comm_s = g_new0(double, n_gpus);
  r->gpu_finish_s = g_new0(double, n_gpus);
  r->gpu_imbalance_s = g_new0(double, n_gpus);
  r->chan_bytes = g_new0(double, n_chan);
  r->chan_busy_s = g_new0(double, n_chan);
  if (keep_trace) {
    r->spans = g_array_new(FALSE, FALSE, sizeof(exec_span));
    r->rates = g_array_new(FALSE, FALSE, sizeof(exec_rate));
    r->xfers = g_array_new(FALSE, FALSE, sizeof(exec_xfer));
  }
  return r;
}

void exec_result_add_layers(exec_result *acc, const exec_result *r, uint32_t count,
                            double shown_s) {
  g_assert(acc->n_gpus == r->n_gpus && acc->n_chan == r->n_chan);
  double k = count, before = acc->step_s;
  /* the count-th layer of this kind ends the chain so far */
  for (uint32_t g = 0; g < r->n_gpus; g++) {
    acc->gpu_compute_s[g] += k * r->gpu_compute_s[g];
    acc->gpu_comm_s[g] += k * r->gpu_comm_s[g];
    acc->gpu_imbalance_s[g] += k * r->gpu_imbalance_s[g];
    acc->gpu_finish_s[g] = before + (k - 1) * r->step_s + r->gpu_finish_s[g];
  }
  for (uint32_t c = 0; c < r->n_chan; c++) {
    acc->chan_bytes[c] += k * r->chan_bytes[c];
    acc->chan_busy_s[c] += k * r->chan_busy_s[c];
  }
  acc->step_s += k * r->step_s;
  acc->compute_s += k * r->compute_s;
  acc->comm_s += k * r->comm_s;
  acc->exposed_s += k * r->exposed_s;
  acc->imbalance_s += k * r->imbalance_s;
  acc->exposed_fixed_s += k * r->exposed_fixed_s;
  acc->exposed_host_s += k * r->exposed_host_s;
  acc->last_gpu = r->last_gpu;
  acc->flops += k * r->flops;
  compute_lookup_merge(&acc->conf, &r->conf);
  acc->events += r->events;
  acc->flows += r->flows;
  acc->bundles += r->bundles;
  acc->solves += r->solves;
  acc->tasks += r->tasks;
  if (acc->spans && r->spans)
    for (guint i = 0; i < r->spans->len; i++) {
      exec_span sp = g_array_index(r->spans, exec_span, i);
      sp.t0_s += shown_s;
      sp.t1_s += shown_s;
      g_array_append_val(acc->spans, sp);
    }
  if (acc->rates && r->rates)
    for (guint i = 0; i < r->rates->len; i++) {
      exec_rate x = g_array_index(r->rates, exec_rate, i);
      x.t_s += shown_s;
      g_array_append_val(acc->rates, x);
    }
  if (acc->xfers && r->xfers)
    for (guint i = 0; i < r->xfers->len; i++) {
      exec_xfer x = g_array_index(r->xfers, exec_xfer, i);
      x.t0_s += shown_s;
      x.t1_s += shown_s;
      g_array_append_val(acc->xfers, x);
    }
  exec_mem_add_layers(acc, r, shown_s);
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
  double *issue = issue_times(p, t, opts, false, &done_by);
  if (!issue) return run_expanded(p, t, opts);
  uint32_t n = p->n_gpus, nc = t->channels->len;
  guint nt = p->tasks->len;
  exec_result *r = exec_result_new(n, nc, opts->keep_trace);
  r->tasks = nt;
  g_autofree double *caps = g_new(double, nc);
  for (uint32_t c = 0; c < nc; c++) caps[c] = topo_chan(t, c)->cap_Bps;

  exec_state s = {.p = p, .t = t, .opts = *opts, .r = r};
  s.eng = engine_new();
  s.net = net_new(s.eng, nc, caps);
  if (opts->keep_trace) net_set_rate_observer(s.net, on_rate, &s);
  net_set_per_flow(s.net, opts->per_flow);
  s.members = g_new0(net_member *, nt);
  s.waiting = g_new0(uint32_t, nt);
  s.flows_left = g_new0(uint32_t, nt);
  s.start_s = g_new0(double, nt);
  s.issue_s = issue;
  s.done_by_s = done_by;
  s.comm_active = g_new0(uint32_t, n);
  s.comm_since = g_new0(double, n);
  s.stamp = g_new0(uint32_t, n);
  s.msgs = g_new0(uint32_t, n);
  s.run_task = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) s.run_task[g] = UINT32_MAX;
  s.run_gen = g_new0(uint32_t, n);
  s.run_left = g_new0(double, n);
  s.run_since = g_new0(double, n);
  if (opts->keep_trace) s.launched_s = g_new0(double, nt);
  s.dur_s = g_new0(double, nt);
  build_successors(&s);
  s.mem = exec_mem_new(p, r, opts->keep_trace);

  if (opts->progress) {
    g_atomic_int_set(&opts->progress->done, 0);
    g_atomic_int_set(&opts->progress->total, (gint)nt);
  }
  for (guint i = 0; i < nt; i++)
    if (s.waiting[i] == 0) ready_task(&s, i);
  engine_run(s.eng);
  if (opts->progress) publish(&s);

  r->step_s = t->compute.comm_slowdown > 0 ? s.end_s : engine_now(s.eng);
  for (uint32_t g = 0; g < n; g++) {
    if (r->gpu_compute_s[g] > r->compute_s) r->compute_s = r->gpu_compute_s[g];
    if (r->gpu_comm_s[g] > r->comm_s) r->comm_s = r->gpu_comm_s[g];
    if (r->gpu_finish_s[g] > r->gpu_finish_s[r->last_gpu]) r->last_gpu = g;
  }
  exec_mem_finish(s.mem);
  split_idle(&s);
  for (uint32_t c = 0; c < nc; c++) {
    r->chan_bytes[c] = net_chan_bytes(s.net, c);
    r->chan_busy_s[c] = net_chan_busy_s(s.net, c);
  }
  r->events = engine_events(s.eng);
  r->flows = net_flows_started(s.net);
  r->bundles = net_bundles_started(s.net);
  r->solves = net_solves(s.net);

  net_free(s.net);
  engine_free(s.eng);
  g_free(s.waiting); g_free(s.flows_left); g_free(s.start_s); g_free(s.issue_s); g_free(s.done_by_s);
  g_free(s.comm_active); g_free(s.comm_since); g_free(s.stamp); g_free(s.msgs);
  g_free(s.succ_off); g_free(s.succ); g_free(s.dur_s);
  g_free(s.launched_s);
  g_free(s.run_task); g_free(s.run_gen); g_free(s.run_left); g_free(s.run_since);
  for (guint i = 0; i < nt; i++) g_free(s.members[i]);
  g_free(s.members);
  if (s.shapes) g_ptr_array_unref(s.shapes);
  return r;
}

void exec_result_free(exec_result *r) {
  if (!r) return;
  g_free(r->gpu_compute_s); g_free(r->gpu_comm_s); g_free(r->gpu_finish_s);
  g_free(r->gpu_imbalance_s);
  g_free(r->chan_bytes); g_free(r->chan_busy_s);
  if (r->spans) g_array_free(r->spans, TRUE);
  if (r->rates) g_array_free(r->rates, TRUE);
  if (r->xfers) g_array_free(r->xfers, TRUE);
  exec_mem_result_free(r);
  g_free(r);
}
