/* plan_quotient: a finished plan's representatives (plan_quotient.h). */
#include "plan_quotient.h"

#include "plan_buf.h"

#define DROPPED UINT32_MAX

typedef struct {
  const plan *p;
  plan *q;
  const uint8_t *sim;  /* per GPU of p: a representative */
  const uint32_t *rep;
  uint32_t *first;     /* per task of p: its (first) copy in q, DROPPED: none */
  uint32_t *nth;       /* per GPU: its place among the representatives */
} quot;

static bool lockstep(const plan_task *t) { return t->kind == TASK_COMPUTE && t->gpu == PLAN_ALL; }

/* The copy of p's task d that a copy on GPU g (PLAN_ALL: a group) waits for. */
static uint32_t copy_of(const quot *s, uint32_t d, uint32_t g) {
  if (s->first[d] == DROPPED || !lockstep(plan_task_at(s->p, d)) || g == PLAN_ALL)
    return s->first[d];
  return s->first[d] + s->nth[g];
}

/* q's task id (a copy of p's task old on GPU g, PLAN_ALL: a group) waits
 * for what old waited for; false where it must wait for a dropped task. */
static bool copy_deps(const quot *s, uint32_t old, uint32_t id, uint32_t g) {
  const plan_task *t = plan_task_at(s->p, old);
  for (uint32_t i = 0; i < t->n_dep; i++) {
    uint32_t d = s->p->deps[t->dep_off + i];
    bool overlap = plan_dep_is_overlap(t, i);
    bool all = g == PLAN_ALL && lockstep(plan_task_at(s->p, d));
    uint32_t n = all ? s->nth[s->p->n_gpus] : 1;
    if (s->first[d] == DROPPED) {
      if (g != PLAN_ALL) return false;
      continue; /* a group waits for the representatives' images too */
    }
    for (uint32_t k = 0; k < n; k++) {
      uint32_t before = all ? s->first[d] + k : copy_of(s, d, g);
      if (overlap) plan_overlap_dep(s->q, before, id);
      else plan_dep(s->q, before, id);
    }
  }
  return true;
}

static bool copy_tasks(quot *s) {
  const plan *p = s->p;
  plan *q = s->q;
  uint32_t n = p->n_gpus;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    plan_task c = *t;
    c.dep_off = c.n_dep = c.n_overlap = 0;
    c.n_qseg = c.n_kseg = 0;
    s->first[i] = DROPPED;
    if (t->kind == TASK_COMM) {
      uint32_t nx = plan_xfer_count(p, t), kept = 0;
      c.xfer_off = q->xfers->len;
      for (uint32_t x = 0; x < nx; x++) {
        plan_xfer e = plan_xfer_at(p, t, x);
        if (!s->sim[e.src]) continue;
        uint32_t to = e.dst;
        e.dst = s->rep[e.dst];
        g_array_append_val(q->xfers, e);
        g_array_append_val(q->xfer_to, to);
        kept++;
      }
      if (nx && !kept) return false;
      c.n_xfer = kept;
      if (t->host_at != PLAN_IN_PLACE) {
        c.host_at = copy_of(s, t->host_at, 0);
        if (c.host_at == DROPPED) return false;
      }
      s->first[i] = q->tasks->len;
      g_array_append_val(q->tasks, c);
      if (!copy_deps(s, i, s->first[i], PLAN_ALL)) return false;
      continue;
    }
    /* a task of one GPU: that GPU alone (not a walk over all of them: a
     * causal plan has a task per GPU and step) */
    uint32_t lo = t->gpu == PLAN_ALL ? 0 : t->gpu, hi = t->gpu == PLAN_ALL ? n : t->gpu + 1;
    for (uint32_t g = lo; g < hi; g++) {
      if (!s->sim[g]) continue;
      c.gpu = g;
      uint32_t id = q->tasks->len;
      if (s->first[i] == DROPPED) s->first[i] = id;
      g_array_append_val(q->tasks, c);
      q->last_compute[g] = id;
      if (!copy_deps(s, i, id, g)) return false;
    }
  }
  return true;
}

/* The representatives' buffers and the uses of the tasks kept.  A buffer
 * of every GPU becomes one per representative: exec (exec_mem_class)
 * would hold it on the GPUs the plan leaves out as well, declared and
 * never used. */
static bool copy_bufs(quot *s) {
  const plan *p = s->p;
  plan *q = s->q;
  uint32_t nb = plan_buf_count(p), n = p->n_gpus;
  g_autofree uint32_t *to = g_new(uint32_t, nb + 1);
  for (uint32_t b = 0; b < nb; b++) {
    plan_buf sb = *plan_buf_at(p, b);
    to[b] = DROPPED;
    uint32_t lo = sb.gpu == PLAN_ALL ? 0 : sb.gpu, hi = sb.gpu == PLAN_ALL ? n : sb.gpu + 1;
    for (uint32_t g = lo; g < hi; g++) {
      if (!s->sim[g]) continue;
      uint32_t id = plan_buf_new(q, g, sb.bytes, plan_buf_name(p, &sb));
      plan_buf *db = &g_array_index(q->bufs, plan_buf, id);
      db->input = sb.input;
      db->keep = sb.keep;
      if (to[b] == DROPPED) to[b] = id;
    }
  }
  /* the GPUs a use touches (each once, in `on`), marked in `touch` */
  g_autofree uint8_t *touch = g_new0(uint8_t, n);
  g_autofree uint32_t *on = g_new(uint32_t, n);
  for (uint32_t i = 0; i < plan_buf_use_count(p); i++) {
    plan_buf_use u = *plan_buf_use_at(p, i);
    const plan_task *t = plan_task_at(p, u.task);
    uint32_t at = s->first[u.task], b = u.buf, k = 0;
    uint32_t bgpu = plan_buf_at(p, b)->gpu;
    /* a use on another GPU, or of another GPU's buffer (a group's on the
     * buffer of a GPU it reaches: double ring's dK/dV hops) */
    if (at == DROPPED || (u.gpu != PLAN_ALL && !s->sim[u.gpu]) ||
        (bgpu != PLAN_ALL && !s->sim[bgpu]))
      continue;
    if (to[b] == DROPPED) return false;
    /* a compute copy's GPU, or a group's ends */
    if (t->kind == TASK_COMPUTE && t->gpu != PLAN_ALL) {
      on[k++] = t->gpu;
    } else if (t->kind == TASK_COMPUTE) {
      for (uint32_t g = 0; g < n; g++)
        if (s->sim[g]) on[k++] = g;
    } else {
      const plan_task *c = plan_task_at(q, at);
      for (uint32_t x = 0; x < c->n_xfer; x++) {
        plan_xfer e = plan_xfer_at(q, c, x);
        uint32_t ends[2] = {e.src, e.dst};
        for (int j = 0; j < 2; j++)
          if (!touch[ends[j]]) touch[ends[j]] = 1, on[k++] = ends[j];
      }
      for (uint32_t j = 0; j < k; j++) touch[on[j]] = 0;
    }
    if (!q->buf_uses) q->buf_uses = g_array_new(FALSE, FALSE, sizeof(plan_buf_use));
    for (uint32_t j = 0; j < k; j++) {
      uint32_t g = on[j];
      if ((u.gpu != PLAN_ALL && u.gpu != g) || (bgpu != PLAN_ALL && bgpu != g)) continue;
      plan_buf_use c = u;
      c.task = lockstep(t) ? at + s->nth[g] : at;
      c.buf = bgpu == PLAN_ALL ? to[b] + s->nth[g] : to[b];
      c.gpu = g;
      g_array_append_val(q->buf_uses, c);
    }
  }
  if (p->attn_out != UINT32_MAX && to[p->attn_out] == DROPPED) return false;
  q->attn_out = p->attn_out == UINT32_MAX ? UINT32_MAX : to[p->attn_out];
  return true;
}

plan *plan_quotient_of(const plan *p, const orbits *o) {
  g_assert(p->deps && !p->xfer_to && p->n_gpus <= o->n_gpus);
  if (p->record_segs || p->phases) return NULL;
  uint32_t n = p->n_gpus;
  quot s = {.p = p, .q = plan_new(n, false), .rep = o->rep};
  g_autofree uint8_t *sim = g_new(uint8_t, n);
  g_autofree uint32_t *first = g_new(uint32_t, p->tasks->len + 1);
  g_autofree uint32_t *nth = g_new(uint32_t, n + 1);
  nth[0] = 0;
  for (uint32_t g = 0; g < n; g++) {
    sim[g] = orbits_is_rep(o, g);
    nth[g + 1] = nth[g] + sim[g];
  }
  s.sim = sim;
  s.first = first;
  s.nth = nth;
  plan *q = s.q;
  g_string_assign(q->note, p->note->str);
  q->xfer_to = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  q->recomputed_flops = p->recomputed_flops;
  if (!copy_tasks(&s) || !copy_bufs(&s)) {
    plan_free(q);
    return NULL;
  }
  if (p->pass_barrier != UINT32_MAX) q->pass_barrier = first[p->pass_barrier];
  plan_finish(q);
  return q;
}
