/* exec_comm: communication groups in the replay.  A group that starts
 * (exec_comm_start) waits its launch cost (a collective call's, or a
 * grouped send/receive's by the messages of its busiest GPU), then its
 * transfers start as flows over the topology's routes, alike flows as one
 * bundle (a pattern's bundles' channel uses made once per run); it is
 * done when its last flow is delivered.  Owns exec_comm: the flows left
 * per group, the net members and pattern shapes, and each GPU's groups in
 * flight and its time with communication in flight (the result's
 * gpu_comm_s). */
#include "exec_internal.h"

#include <string.h>

#include "groups.h"
#include "orbits.h"

/* exec_internal.h */
void exec_group_gpus(exec_state *s, const plan_task *t, exec_gpu_fn fn, void *ctx) {
  const plan_pattern_info *pi = plan_task_pattern(s->p, t);
  if (pi) {
    for (uint32_t i = 0; i < pi->n_gpus; i++)
      fn(s, g_array_index(s->p->pattern_gpus, uint32_t, pi->gpu_off + i), t, ctx);
    return;
  }
  exec_comm *c = &s->comm;
  c->stamp_now++;
  for (uint32_t i = 0; i < t->n_xfer; i++) {
    const plan_xfer *x = &g_array_index(s->p->xfers, plan_xfer, t->xfer_off + i);
    uint32_t g2[2] = {x->src, x->dst};
    for (int k = 0; k < 2; k++) {
      if (c->stamp[g2[k]] == c->stamp_now) continue;
      c->stamp[g2[k]] = c->stamp_now;
      fn(s, g2[k], t, ctx);
    }
  }
}

static void gpu_comm_begin(exec_state *s, uint32_t g, const plan_task *t, void *ctx) {
  (void)t;
  (void)ctx;
  if (s->comm.active[g]++ == 0) {
    s->comm.since[g] = engine_now(s->eng);
    if (exec_slow_on(s)) exec_slow_comm_changed(s, g);
  }
}

static double task_start_of(exec_state *s, const plan_task *t) {
  return s->g.start_s[t - (const plan_task *)s->p->tasks->data];
}

static void gpu_comm_end(exec_state *s, uint32_t g, const plan_task *t, void *ctx) {
  (void)ctx;
  double now = engine_now(s->eng);
  if (--s->comm.active[g] == 0) {
    s->r->gpu_comm_s[g] += now - s->comm.since[g];
    if (exec_slow_on(s)) exec_slow_comm_changed(s, g);
  }
  if (now > s->r->gpu_finish_s[g]) s->r->gpu_finish_s[g] = now;
  exec_span_add(s, g, true, t, task_start_of(s, t));
}

void exec_comm_end(exec_state *s, const plan_task *t) {
  exec_group_gpus(s, t, gpu_comm_end, NULL);
}

/* A group along a pattern is done.  A pattern's launches (members,
 * routes and net shapes: as many as its pairs) are freed after its last
 * group, and, where its groups lie further apart in the plan than it has
 * pairs, after each group with none other in flight: remade at the next,
 * that costs less than the tasks between.  A plan of many patterns each
 * used a few times (TokenRing's N-1 shifts, each a hand-back's once a
 * pass) then holds those in flight, not all (8,192 GPUs: 56 bytes a
 * pair, 3.7 GB), while a pattern used step after step (a lockstep
 * all-to-all) is made once.  Freeing is never wrong: a pattern launched
 * again is made again. */
static void pattern_variants_free(gpointer p);

static void pattern_group_done(exec_state *s, const plan_task *t) {
  exec_comm *c = &s->comm;
  if (!plan_task_pattern(s->p, t)) return;
  uint32_t pattern = g_array_index(s->p->xfers, plan_xfer, t->xfer_off).dst;
  c->pattern_live[pattern]--;
  if (--c->pattern_groups[pattern] > 0 && !(c->pattern_sparse[pattern] && !c->pattern_live[pattern]))
    return;
  if (!c->shapes || pattern >= c->shapes->len) return;
  pattern_variants_free(g_ptr_array_index(c->shapes, pattern));
  g_ptr_array_index(c->shapes, pattern) = NULL;
}

/* Flows delivered: the tag is their group's task id; a member's id is its
 * transfer's index in the group. */
static void flow_done(void *ctx, uint64_t tag, const net_member *m, uint32_t count) {
  exec_state *s = ctx;
  exec_comm *c = &s->comm;
  uint32_t task = (uint32_t)tag;
  if (s->opts.keep_trace) {
    const plan_task *t = plan_task_at(s->p, task);
    for (uint32_t i = 0; i < count; i++) {
      plan_xfer x = plan_xfer_at(s->p, t, m[i].id);
      exec_xfer e = {x.src, x.dst, t->step, x.bytes, c->launched_s[task], engine_now(s->eng)};
      g_array_append_val(s->r->xfers, e);
    }
  }
  g_assert(c->flows_left[task] >= count);
  c->flows_left[task] -= count;
  if (c->flows_left[task] == 0) {
    g_free(c->members[task]);
    c->members[task] = NULL;
    pattern_group_done(s, plan_task_at(s->p, task));
    exec_task_done(s, task);
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
 * index in the group.  Where the topology computes its routes (a switched
 * generator's: no table to point into), each member's channels are written
 * after the members, in the same block, freed with them. */
static flow_kinds sort_kinds(exec_state *s, const plan_task *t) {
  uint32_t nx = plan_xfer_count(s->p, t);
  bool computed = s->t->switched.on;
  size_t room = computed ? (size_t)nx * TOPO_SWITCHED_HOPS : 0;
  net_member *fm = g_malloc(nx * sizeof(net_member) + room * sizeof(uint32_t) + 1);
  uint32_t *routes = (uint32_t *)(fm + nx);
  g_autofree flow_kind *kinds = g_new(flow_kind, nx);
  g_autofree net_member *m = g_new(net_member, nx);
  for (uint32_t i = 0; i < nx; i++) {
    plan_xfer x = plan_xfer_at(s->p, t, i);
    /* the route to the GPU the bytes reach (a representative's transfer
     * to another GPU: orbits.h), on the quotient network where replayed */
    uint32_t to = plan_xfer_to(s->p, t, i);
    /* a ring collective's edge is several NCCL channels, not one
     * connection (plan_coll.c), and pays the latency once per step */
    double cap = plan_api_is_ring(t->api) ? 0 : topo_route_cap(s->t, x.src, to);
    if (computed) {
      uint32_t *r = &routes[(size_t)i * TOPO_SWITCHED_HOPS];
      m[i].route = r;
      kinds[i].hops = topo_route_fill(s->t, x.src, to, r);
      if (s->opts.orbits) orbits_route(s->opts.orbits, r, kinds[i].hops);
    } else {
      m[i].route = topo_route_chans(s->t, x.src, to, &kinds[i].hops);
    }
    m[i].id = i;
    kinds[i].bytes = x.bytes;
    kinds[i].cap = cap;
    kinds[i].latency = topo_route_latency(s->t, x.src, to) * x.steps;
  }
  /* a group's transfers come in runs of alike ones (TASP at TP 4 x SP
   * 128 x DP 2 on 1,024 GPUs: 108.6M transfers in 110K groups, 110K runs:
   * about one run of 990 a group), so the runs are grouped, by their
   * first transfer's kind, and their transfers follow in order: the same
   * kinds in the same first-seen order, each kind's transfers in theirs,
   * as grouping them one by one gives */
  g_autofree uint32_t *run = g_new(uint32_t, nx + 1);
  uint32_t nr = 0;
  for (uint32_t i = 0; i < nx; i++) {
    if (i && flow_kind_equal(&kinds[i], &kinds[i - 1])) continue;
    kinds[nr] = kinds[i];  /* the run's kind (nr <= i: read already) */
    run[nr++] = i;
  }
  run[nr] = nx;
  groups g;
  groups_make(&g, kinds, sizeof *kinds, nr, flow_kind_hash, flow_kind_equal);
  flow_kinds f = {.nk = g.n, .m = fm, .at = g_new(uint32_t, g.n + 1)};
  f.kinds = g_new(flow_kind, f.nk);
  uint32_t at = 0;
  for (uint32_t k = 0; k < f.nk; k++) {
    f.kinds[k] = kinds[g.order[g.at[k]]];
    f.at[k] = at;
    for (uint32_t j = g.at[k]; j < g.at[k + 1]; j++)
      for (uint32_t i = run[g.order[j]]; i < run[g.order[j] + 1]; i++) f.m[at++] = m[i];
  }
  f.at[f.nk] = at;
  groups_clear(&g);
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
  if (!s->comm.shapes) s->comm.shapes = g_ptr_array_new_with_free_func(pattern_variants_free);
  if (s->comm.shapes->len <= x->dst) g_ptr_array_set_size(s->comm.shapes, x->dst + 1);
  GPtrArray *vs = g_ptr_array_index(s->comm.shapes, x->dst);
  if (!vs) vs = g_ptr_array_index(s->comm.shapes, x->dst) = g_ptr_array_new_with_free_func(pattern_launch_free);
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

/* A flow's cap: its route's, held to the topology's rate at its message
 * size where it has comm.flow_rate_by_size (size_rate.h).  A ring
 * collective's edge is several NCCL channels, not one connection: the
 * table, measured on single transfers, is not its rate. */
static double flow_cap(const exec_state *s, const plan_task *t, double route_cap, double bytes) {
  if (plan_api_is_ring(t->api)) return route_cap;
  return size_rate_cap(&s->t->flow_rate, route_cap, bytes);
}

static void comm_launched(void *ctx, uint64_t arg) {
  exec_state *s = ctx;
  exec_comm *c = &s->comm;
  uint32_t id = (uint32_t)arg;
  const plan_task *t = plan_task_at(s->p, id);
  c->flows_left[id] = plan_xfer_count(s->p, t);
  if (s->opts.keep_trace) c->launched_s[id] = engine_now(s->eng);
  if (plan_task_pattern(s->p, t)) {
    c->pattern_live[g_array_index(s->p->xfers, plan_xfer, t->xfer_off).dst]++;
    const pattern_launch *l = pattern_launch_of(s, t);
    double bytes = g_array_index(s->p->xfers, plan_xfer, t->xfer_off).bytes;
    for (uint32_t k = 0; k < l->f.nk; k++) {
      const flow_kind *fk = &l->f.kinds[k];
      net_shape_start(s->net, l->shapes[k], fk->latency, bytes, flow_cap(s, t, fk->cap, bytes),
                      flow_done, s, id);
    }
    return;
  }
  flow_kinds f = sort_kinds(s, t);
  c->members[id] = f.m;  /* freed when the group is done */
  for (uint32_t k = 0; k < f.nk; k++) {
    const flow_kind *fk = &f.kinds[k];
    net_bundle_start(s->net, &f.m[f.at[k]], f.at[k + 1] - f.at[k], fk->hops, fk->latency,
                     fk->bytes, flow_cap(s, t, fk->cap, fk->bytes), flow_done, s, id);
  }
  flow_kinds_clear(&f);
}

/* Device-side fixed cost of a group before its data moves: a collective
 * call's, or a grouped send/receive's, which grows with the messages the
 * busiest GPU in it sends and receives (calibration/h200x4-tool: 0.17 ms
 * for one message each way, 0.32 ms for six). */
double exec_comm_launch_s(exec_state *s, const plan_task *t) {
  if (t->api != COMM_P2P) return s->t->launch_s;
  if (s->t->p2p_msg_s == 0) return s->t->p2p_launch_s;
  const plan_pattern_info *pi = plan_task_pattern(s->p, t);
  uint32_t *msgs = s->comm.msgs, busiest = 0;
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

/* exec_internal.h */
void exec_comm_start(exec_state *s, uint32_t id, const plan_task *t) {
  double now = engine_now(s->eng);
  if (t->n_xfer == 0) {  /* a pure synchronisation point */
    engine_at(s->eng, now, exec_task_done, s, id);
    return;
  }
  exec_group_gpus(s, t, gpu_comm_begin, NULL);
  if (s->opts.no_comm) engine_at(s->eng, now, exec_task_done, s, id);
  else engine_at(s->eng, now + exec_comm_launch_s(s, t), comm_launched, s, id);
}

static void on_rate(void *ctx, uint32_t chan, double t_s, double rate) {
  exec_state *s = ctx;
  exec_rate r = {chan, t_s, rate};
  g_array_append_val(s->r->rates, r);
}

void exec_comm_init(exec_state *s) {
  uint32_t n = s->p->n_gpus;
  guint nt = s->p->tasks->len;
  exec_comm *c = &s->comm;
  if (s->opts.keep_trace) net_set_rate_observer(s->net, on_rate, s);
  net_set_per_flow(s->net, s->opts.per_flow);
  c->members = g_new0(net_member *, nt);
  c->flows_left = g_new0(uint32_t, nt);
  c->active = g_new0(uint32_t, n);
  c->since = g_new0(double, n);
  c->stamp = g_new0(uint32_t, n);
  c->msgs = g_new0(uint32_t, n);
  if (s->opts.keep_trace) c->launched_s = g_new0(double, nt);
  guint np = s->p->patterns->len;
  c->pattern_groups = g_new0(uint32_t, np);
  c->pattern_live = g_new0(uint32_t, np);
  c->pattern_sparse = g_new(uint8_t, np);
  if (np) memset(c->pattern_sparse, 1, np);
  g_autofree guint *last = g_new(guint, np);
  for (guint k = 0; k < np; k++) last[k] = G_MAXUINT;
  for (guint i = 0; i < nt; i++) {
    const plan_task *t = plan_task_at(s->p, i);
    const plan_pattern_info *pi = t->kind == TASK_COMM ? plan_task_pattern(s->p, t) : NULL;
    if (!pi) continue;
    uint32_t k = g_array_index(s->p->xfers, plan_xfer, t->xfer_off).dst;
    c->pattern_groups[k]++;
    if (last[k] != G_MAXUINT && i - last[k] <= pi->n_pairs) c->pattern_sparse[k] = 0;
    last[k] = i;
  }
}

void exec_comm_clear(exec_state *s) {
  exec_comm *c = &s->comm;
  g_free(c->flows_left);
  g_free(c->active);
  g_free(c->since);
  g_free(c->stamp);
  g_free(c->msgs);
  g_free(c->launched_s);
  g_free(c->pattern_groups);
  g_free(c->pattern_live);
  g_free(c->pattern_sparse);
  for (guint i = 0; i < s->p->tasks->len; i++) g_free(c->members[i]);
  g_free(c->members);
  if (c->shapes) g_ptr_array_unref(c->shapes);
}
