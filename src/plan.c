/* plan: building the task graph, and the stream rules. */
#include "plan.h"
#include "plan_buf.h"

#include <stdlib.h>
#include <string.h>

/* the sizes plan.h and plan_buf.h state */
G_STATIC_ASSERT(sizeof(plan_task) == 160);
G_STATIC_ASSERT(sizeof(plan_buf_use) == 12);
G_STATIC_ASSERT(sizeof(plan_buf) == 16);

plan *plan_new(uint32_t n_gpus, bool record_segs) {
  plan *p = g_new0(plan, 1);
  p->n_gpus = n_gpus;
  p->record_segs = record_segs;
  p->tasks = g_array_new(FALSE, TRUE, sizeof(plan_task));
  p->xfers = g_array_new(FALSE, FALSE, sizeof(plan_xfer));
  p->segs = g_array_new(FALSE, FALSE, sizeof(plan_seg));
  p->dep_from = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->dep_to = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->dep_overlap = g_array_new(FALSE, FALSE, sizeof(uint8_t));
  p->last_compute = g_new(int64_t, n_gpus);
  p->last_coll = g_new(int64_t, n_gpus);
  for (uint32_t g = 0; g < n_gpus; g++) p->last_compute[g] = p->last_coll[g] = -1;
  p->scratch = g_new0(uint8_t, n_gpus);
  p->gpu_buf = g_new(uint32_t, n_gpus);
  p->coll_buf = g_new(int64_t, n_gpus);
  p->note = g_string_new(NULL);
  p->patterns = g_array_new(FALSE, FALSE, sizeof(plan_pattern_info));
  p->pairs = g_array_new(FALSE, FALSE, sizeof(plan_pair));
  p->pattern_gpus = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->pattern_degree = g_array_new(FALSE, TRUE, sizeof(uint32_t));
  p->pass_barrier = UINT32_MAX;
  p->attn_out = UINT32_MAX;
  return p;
}

void plan_free(plan *p) {
  if (!p) return;
  g_array_free(p->tasks, TRUE);
  g_array_free(p->xfers, TRUE);
  if (p->xfer_to) g_array_free(p->xfer_to, TRUE);
  g_array_free(p->segs, TRUE);
  if (p->dep_from) g_array_free(p->dep_from, TRUE);
  if (p->dep_to) g_array_free(p->dep_to, TRUE);
  if (p->dep_overlap) g_array_free(p->dep_overlap, TRUE);
  g_free(p->deps);
  g_free(p->last_compute);
  g_free(p->last_coll);
  g_free(p->scratch);
  g_free(p->gpu_buf);
  g_free(p->coll_buf);
  g_string_free(p->note, TRUE);
  g_array_free(p->patterns, TRUE);
  g_array_free(p->pairs, TRUE);
  g_array_free(p->pattern_gpus, TRUE);
  g_array_free(p->pattern_degree, TRUE);
  plan_buf_free_all(p);
  if (p->phases) g_array_free(p->phases, TRUE);
  g_free(p);
}

void plan_phase_from(plan *p, plan_phase ph) {
  if (!p->phases) p->phases = g_array_new(FALSE, FALSE, 2 * sizeof(uint32_t));
  uint32_t mark[2] = {p->tasks->len, ph};
  g_array_append_val(p->phases, mark);
}

plan_phase plan_task_phase(const plan *p, uint32_t id) {
  if (!p->phases) return PLAN_BODY;
  /* the last mark at or before id */
  guint lo = 0, hi = p->phases->len;
  while (lo < hi) {
    guint mid = (lo + hi) / 2;
    if (((const uint32_t *)p->phases->data)[2 * mid] <= id) lo = mid + 1;
    else hi = mid;
  }
  return lo ? (plan_phase)((const uint32_t *)p->phases->data)[2 * (lo - 1) + 1] : PLAN_BODY;
}

static uint32_t add_task(plan *p, plan_task *t) {
  g_array_append_val(p->tasks, *t);
  return p->tasks->len - 1;
}

bool plan_lockstep(const plan *p) {
  for (uint32_t g = 1; g < p->n_gpus; g++)
    if (p->last_compute[g] != p->last_compute[0]) return false;
  return true;
}

/* Compute tasks of one GPU run in order on its compute stream; a lockstep
 * task is on every stream. */
uint32_t plan_compute(plan *p, uint32_t gpu, uint32_t step, const plan_op *op) {
  plan_task t = {.kind = TASK_COMPUTE, .gpu = gpu, .step = step, .op = *op,
                 .host_at = PLAN_IN_PLACE};
  uint32_t id = add_task(p, &t);
  if (gpu == PLAN_ALL) {
    g_assert(plan_lockstep(p));
    p->has_lockstep = true;
    if (p->last_compute[0] >= 0) plan_dep(p, (uint32_t)p->last_compute[0], id);
    for (uint32_t g = 0; g < p->n_gpus; g++) p->last_compute[g] = id;
    return id;
  }
  g_assert(gpu < p->n_gpus);
  if (p->last_compute[gpu] >= 0) plan_dep(p, (uint32_t)p->last_compute[gpu], id);
  p->last_compute[gpu] = id;
  return id;
}

double plan_causal_pairs(plan_seg q, plan_seg k) {
  /* pairs (x, y), x in q, y in k, y <= x: for each query x the keys of k
   * at or before x */
  double total = 0;
  uint64_t q0 = q.start, q1 = q.start + q.len, k0 = k.start, k1 = k.start + k.len;
  /* queries before k0 see nothing; queries at or after k1 see all of k */
  if (q1 > k1) {
    uint64_t from = q0 > k1 ? q0 : k1;
    total += (double)(q1 - from) * (double)k.len;
  }
  /* queries x in [max(q0,k0), min(q1,k1)) see x - k0 + 1 keys */
  uint64_t a = q0 > k0 ? q0 : k0, b = q1 < k1 ? q1 : k1;
  if (b > a) {
    double first = (double)(a - k0 + 1), last = (double)(b - 1 - k0 + 1);
    total += (first + last) * (double)(b - a) / 2;
  }
  return total;
}

/* Tokens in both segments: a causal block's pairs of a token with itself. */
static double plan_seg_overlap(plan_seg q, plan_seg k) {
  uint64_t a = q.start > k.start ? q.start : k.start;
  uint64_t b = q.start + q.len < k.start + k.len ? q.start + q.len : k.start + k.len;
  return b > a ? (double)(b - a) : 0;
}

static void record_segs(plan *p, uint32_t id, const plan_seg *q, uint32_t nq,
                        const plan_seg *k, uint32_t nk) {
  if (!p->record_segs) return;
  plan_task *t = plan_task_at(p, id);
  t->seg_off = p->segs->len;
  t->n_qseg = nq;
  t->n_kseg = nk;
  g_array_append_vals(p->segs, q, nq);
  g_array_append_vals(p->segs, k, nk);
}

uint32_t plan_attn(plan *p, uint32_t gpu, uint32_t step, const plan_op *shape,
                   const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk) {
  plan_op op = *shape;
  op.kind = OP_ATTN;
  op.sq = op.sk = op.pairs = op.diag_pairs = 0;
  for (uint32_t i = 0; i < nq; i++) op.sq += (double)q[i].len;
  for (uint32_t j = 0; j < nk; j++) op.sk += (double)k[j].len;
  if (!op.causal) {
    op.pairs = op.sq * op.sk;
  } else {
    for (uint32_t i = 0; i < nq; i++)
      for (uint32_t j = 0; j < nk; j++) {
        op.pairs += plan_causal_pairs(q[i], k[j]);
        op.diag_pairs += plan_seg_overlap(q[i], k[j]);
      }
  }
  uint32_t id = plan_compute(p, gpu, step, &op);
  record_segs(p, id, q, nq, k, nk);
  return id;
}

uint32_t plan_linear(plan *p, uint32_t gpu, uint32_t step, const plan_op *shape, op_kind kind,
                     const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk) {
  g_assert(kind == OP_LIN_INTRA || kind == OP_LIN_STATE || kind == OP_LIN_APPLY);
  plan_op op = *shape;
  op.kind = kind;
  op.sq = op.sk = op.pairs = 0;
  for (uint32_t i = 0; i < nq; i++) op.sq += (double)q[i].len;
  for (uint32_t j = 0; j < nk; j++) op.sk += (double)k[j].len;
  uint32_t id = plan_compute(p, gpu, step, &op);
  record_segs(p, id, q, nq, k, nk);
  return id;
}

uint32_t plan_merge(plan *p, uint32_t gpu, uint32_t step, const plan_op *shape, double rows) {
  plan_op op = *shape;
  op.kind = OP_MERGE;
  op.causal = false;
  op.sq = rows;
  op.sk = op.pairs = 0;
  return plan_compute(p, gpu, step, &op);
}

uint32_t plan_copy(plan *p, uint32_t gpu, uint32_t step, double bytes) {
  plan_op op = {.kind = OP_COPY, .bytes = bytes};
  return plan_compute(p, gpu, step, &op);
}

uint32_t plan_comm(plan *p, uint32_t step, comm_api api) {
  plan_task t = {.kind = TASK_COMM, .step = step, .api = api, .xfer_off = p->xfers->len,
                 .host_at = PLAN_IN_PLACE};
  return add_task(p, &t);
}

void plan_xfer_push(plan *p, uint32_t comm, plan_xfer x) {
  plan_task *t = plan_task_at(p, comm);
  /* transfers of a group are added while it is the newest group */
  g_assert(t->kind == TASK_COMM && t->xfer_off + t->n_xfer == p->xfers->len);
  g_assert(x.src != x.dst && x.src < p->n_gpus && x.dst < p->n_gpus);
  g_assert(t->n_xfer == 0 || g_array_index(p->xfers, plan_xfer, t->xfer_off).src != PLAN_ALL);
  uint32_t to = x.dst;
  if (p->q_sim) {
    if (!p->q_sim[x.src]) return;
    x.dst = p->q_rep[x.dst];
  }
  g_array_append_val(p->xfers, x);
  if (p->xfer_to) g_array_append_val(p->xfer_to, to);
  t->n_xfer++;
}

void plan_quotient(plan *p, const uint8_t *sim, const uint32_t *rep) {
  g_assert(!p->patterns->len && !p->has_lockstep);
  p->q_sim = sim;
  p->q_rep = rep;
  if (!p->xfer_to) {
    p->xfer_to = g_array_sized_new(FALSE, FALSE, sizeof(uint32_t), p->xfers->len);
    for (guint i = 0; i < p->xfers->len; i++)
      g_array_append_val(p->xfer_to, g_array_index(p->xfers, plan_xfer, i).dst);
  }
}

void plan_quotient_end(plan *p) { p->q_sim = NULL, p->q_rep = NULL; }

uint32_t plan_xfer_to(const plan *p, const plan_task *t, uint32_t i) {
  if (p->xfer_to) return g_array_index(p->xfer_to, uint32_t, t->xfer_off + i);
  return plan_xfer_at(p, t, i).dst;
}

void plan_xfer_add(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes) {
  plan_xfer_add_msgs(p, comm, src, dst, bytes, 1);
}

void plan_xfer_add_msgs(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes,
                        uint32_t msgs) {
  plan_xfer_push(p, comm, (plan_xfer){src, dst, bytes, msgs, 1});
}

uint32_t plan_pattern(plan *p, const plan_pair *pairs, uint32_t n) {
  plan_pattern_info info = {p->pairs->len, n, p->pattern_gpus->len, 0, p->pattern_degree->len, 0};
  g_array_append_vals(p->pairs, pairs, n);
  g_array_set_size(p->pattern_degree, info.degree_off + p->n_gpus);
  uint32_t *deg = &g_array_index(p->pattern_degree, uint32_t, info.degree_off);
  for (uint32_t i = 0; i < n; i++) {
    g_assert(pairs[i].src != pairs[i].dst && pairs[i].src < p->n_gpus && pairs[i].dst < p->n_gpus);
    deg[pairs[i].src]++;
    deg[pairs[i].dst]++;
  }
  for (uint32_t g = 0; g < p->n_gpus; g++) {
    if (!deg[g]) continue;
    g_array_append_val(p->pattern_gpus, g);
    info.n_gpus++;
    if (deg[g] > info.max_degree) info.max_degree = deg[g];
  }
  g_array_append_val(p->patterns, info);
  return p->patterns->len - 1;
}

void plan_xfer_pattern(plan *p, uint32_t comm, uint32_t pattern, double bytes, uint32_t msgs) {
  plan_task *t = plan_task_at(p, comm);
  g_assert(t->kind == TASK_COMM && t->n_xfer == 0 && t->xfer_off == p->xfers->len);
  g_assert(pattern < p->patterns->len);
  plan_xfer x = {PLAN_ALL, pattern, bytes, msgs, 1};
  g_array_append_val(p->xfers, x);
  t->n_xfer = 1;
  p->has_lockstep = true;
}

const plan_pattern_info *plan_task_pattern(const plan *p, const plan_task *t) {
  if (t->kind != TASK_COMM || t->n_xfer != 1) return NULL;
  const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, t->xfer_off);
  return x->src == PLAN_ALL ? &g_array_index(p->patterns, plan_pattern_info, x->dst) : NULL;
}

uint32_t plan_xfer_count(const plan *p, const plan_task *t) {
  const plan_pattern_info *pi = plan_task_pattern(p, t);
  return pi ? pi->n_pairs : t->n_xfer;
}

plan_xfer plan_xfer_at(const plan *p, const plan_task *t, uint32_t i) {
  const plan_pattern_info *pi = plan_task_pattern(p, t);
  if (!pi) return g_array_index(p->xfers, plan_xfer, t->xfer_off + i);
  plan_xfer x = g_array_index(p->xfers, plan_xfer, t->xfer_off);
  plan_pair pr = g_array_index(p->pairs, plan_pair, pi->pair_off + i);
  x.src = pr.src;
  x.dst = pr.dst;
  return x;
}

uint32_t plan_comm_gpus(plan *p, uint32_t comm, uint32_t *out) {
  const plan_task *c = plan_task_at(p, comm);
  const plan_pattern_info *pi = plan_task_pattern(p, c);
  if (pi) {
    memcpy(out, &g_array_index(p->pattern_gpus, uint32_t, pi->gpu_off),
           pi->n_gpus * sizeof(uint32_t));
    return pi->n_gpus;
  }
  for (uint32_t i = 0; i < c->n_xfer; i++) {
    const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, c->xfer_off + i);
    p->scratch[x->src] = p->scratch[x->dst] = 1;
  }
  uint32_t k = 0;
  for (uint32_t g = 0; g < p->n_gpus; g++)
    if (p->scratch[g]) {
      out[k++] = g;
      p->scratch[g] = 0;
    }
  return k;
}

void plan_issued(const plan *p, int64_t *issued) {
  memcpy(issued, p->last_compute, p->n_gpus * sizeof(int64_t));
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* `to` after each task of ids[0..k) once (ids are reordered), but -1 and
 * skip. */
static void dep_each_once(plan *p, int64_t *ids, uint32_t k, int64_t skip, uint32_t to) {
  uint32_t same = 1;
  while (same < k && ids[same] == ids[0]) same++;
  if (same < k) qsort(ids, k, sizeof *ids, cmp_i64);  /* else all one (lockstep) */
  for (uint32_t i = 0; i < k; i++)
    if (ids[i] >= 0 && ids[i] != skip && (i == 0 || ids[i] != ids[i - 1]))
      plan_dep(p, (uint32_t)ids[i], to);
}

void plan_issue(plan *p, uint32_t comm, const int64_t *issued, int64_t skip, bool ordered) {
  uint32_t *gpus = p->gpu_buf;
  int64_t *colls = p->coll_buf;
  uint32_t k = plan_comm_gpus(p, comm, gpus);
  if (!issued) issued = p->last_compute;
  /* a lockstep task is the last compute of several GPUs, a collective is
   * shared by its GPUs: depend on each one once */
  for (uint32_t i = 0; i < k; i++) colls[i] = issued[gpus[i]];
  dep_each_once(p, colls, k, skip, comm);
  if (!ordered) return;
  for (uint32_t i = 0; i < k; i++) {
    colls[i] = p->last_coll[gpus[i]];
    p->last_coll[gpus[i]] = comm;
  }
  dep_each_once(p, colls, k, skip, comm);
}

uint32_t plan_barrier(plan *p, uint32_t step, int64_t after) {
  uint32_t b = plan_comm(p, step, COMM_BARRIER);
  memcpy(p->coll_buf, p->last_compute, p->n_gpus * sizeof(int64_t));
  dep_each_once(p, p->coll_buf, p->n_gpus, -1, b);
  if (after >= 0) plan_dep(p, (uint32_t)after, b);
  for (uint32_t g = 0; g < p->n_gpus; g++) p->last_coll[g] = b;
  p->pass_barrier = b;
  return b;
}

static void add_dep(plan *p, uint32_t before, uint32_t after, bool overlap) {
  g_assert(before < after);
  /* a lockstep task waits on other lockstep tasks and on groups only: a
   * task of one GPU would hold back the copies of all */
  const plan_task *a = plan_task_at(p, after), *b = plan_task_at(p, before);
  g_assert(a->kind != TASK_COMPUTE || a->gpu != PLAN_ALL || b->kind == TASK_COMM ||
           b->gpu == PLAN_ALL);
  g_assert(!overlap || a->kind == TASK_COMM);
  g_assert(p->dep_to); /* not after plan_finish */
  uint8_t o = overlap;
  g_array_append_val(p->dep_from, before);
  g_array_append_val(p->dep_to, after);
  g_array_append_val(p->dep_overlap, o);
}

void plan_dep(plan *p, uint32_t before, uint32_t after) { add_dep(p, before, after, false); }

void plan_dep_all(plan *p, const GArray *ids, uint32_t after) {
  for (guint i = 0; i < ids->len; i++) plan_dep(p, g_array_index(ids, uint32_t, i), after);
}

void plan_overlap_dep(plan *p, uint32_t task, uint32_t comm) {
  g_assert(plan_task_at(p, task)->kind == TASK_COMPUTE);
  add_dep(p, task, comm, true);
}

void plan_overlap(plan *p, const GArray *ids, uint32_t comm) {
  uint32_t first = comm;
  for (guint i = 0; i < ids->len; i++) {
    uint32_t id = g_array_index(ids, uint32_t, i);
    plan_overlap_dep(p, id, comm);
    if (id < first) first = id;
  }
  if (first < comm) plan_issue_at(p, comm, first);
}

void plan_finish(plan *p) {
  guint n = p->tasks->len, m = p->dep_to->len;
  const uint32_t *to = (const uint32_t *)p->dep_to->data;
  const uint32_t *from = (const uint32_t *)p->dep_from->data;
  const uint8_t *overlap = (const uint8_t *)p->dep_overlap->data;
  /* counted and placed in an array of its own, and the task records
   * (160 bytes each, a million in a causal 1,024-GPU plan) written once at
   * the end, where counting in them read and wrote them four times */
  g_autofree uint32_t *at = g_new0(uint32_t, n + 1);
  for (guint e = 0; e < m; e++) at[to[e] + 1]++;
  for (guint i = 0; i < n; i++) at[i + 1] += at[i];
  /* a task's ordinary predecessors first, its overlap edges last; at[i]
   * moves from task i's first place to task i + 1's */
  p->deps = g_new(uint32_t, m + 1);
  for (uint8_t pass = 0; pass < 2; pass++)
    for (guint e = 0; e < m; e++)
      if (overlap[e] == pass) p->deps[at[to[e]]++] = from[e];
  for (guint i = 0; i < n; i++) {
    plan_task *t = plan_task_at(p, i);
    t->dep_off = i ? at[i - 1] : 0;
    t->n_dep = at[i] - t->dep_off;
    t->n_overlap = 0;
  }
  /* overlap edges are few (a group's kernels it runs beside) */
  for (guint e = 0; e < m; e++)
    if (overlap[e]) plan_task_at(p, to[e])->n_overlap++;
  /* the edge lists are the builder's: 9 bytes an edge that the replay
   * would hold through the run (a causal zigzag forward+backward at 1,024
   * GPUs has 11.5 M edges) */
  g_array_free(p->dep_from, TRUE);
  g_array_free(p->dep_to, TRUE);
  g_array_free(p->dep_overlap, TRUE);
  p->dep_from = p->dep_to = p->dep_overlap = NULL;
}

/* The copy of old task d that a task of GPU g (PLAN_ALL: a group, which
 * waits for every copy) waits for, through dep(). */
static void expand_deps(plan *q, const plan *p, const uint32_t *first, uint32_t old,
                        uint32_t id, uint32_t gpu) {
  const plan_task *t = plan_task_at(p, old);
  for (uint32_t i = 0; i < t->n_dep; i++) {
    uint32_t d = p->deps[t->dep_off + i];
    bool o = plan_dep_is_overlap(t, i);
    const plan_task *dt = plan_task_at(p, d);
    bool lock = dt->kind == TASK_COMPUTE && dt->gpu == PLAN_ALL;
    if (!lock) add_dep(q, first[d], id, o);
    else if (gpu != PLAN_ALL) add_dep(q, first[d] + gpu, id, o);
    else
      for (uint32_t g = 0; g < p->n_gpus; g++) add_dep(q, first[d] + g, id, o);
  }
}

void plan_issue_at(plan *p, uint32_t comm, uint32_t at) {
  g_assert(at < comm && plan_task_at(p, comm)->kind == TASK_COMM);
  plan_task_at(p, comm)->host_at = at;
}

plan *plan_expand(const plan *p) {
  g_assert(!p->xfer_to);  /* a plan for representatives has nothing to expand */
  uint32_t n = p->n_gpus;
  guint nt = p->tasks->len;
  plan *q = plan_new(n, p->record_segs);
  g_string_assign(q->note, p->note->str);
  g_autofree uint32_t *first = g_new(uint32_t, nt);
  for (guint i = 0; i < nt; i++) {
    plan_task t = *plan_task_at(p, i);
    t.dep_off = t.n_dep = 0;
    first[i] = q->tasks->len;
    if (t.kind == TASK_COMM) {
      uint32_t nx = plan_xfer_count(p, &t);
      plan_task c = t;
      if (t.host_at != PLAN_IN_PLACE) c.host_at = first[t.host_at];
      c.xfer_off = q->xfers->len;
      c.n_xfer = nx;
      for (uint32_t x = 0; x < nx; x++) {
        plan_xfer e = plan_xfer_at(p, &t, x);
        g_array_append_val(q->xfers, e);
      }
      add_task(q, &c);
      expand_deps(q, p, first, i, first[i], PLAN_ALL);
      continue;
    }
    uint32_t copies = t.gpu == PLAN_ALL ? n : 1;
    for (uint32_t g = 0; g < copies; g++) {
      plan_task c = t;
      if (t.gpu == PLAN_ALL) c.gpu = g; /* one GPU too: a lockstep task of a 1-GPU plan */
      if (p->record_segs && t.n_qseg + t.n_kseg > 0) {
        c.seg_off = q->segs->len;
        g_array_append_vals(q->segs, &g_array_index(p->segs, plan_seg, t.seg_off),
                            t.n_qseg + t.n_kseg);
      }
      uint32_t id = add_task(q, &c);
      expand_deps(q, p, first, i, id, c.gpu);
    }
  }
  plan_buf_expand(q, p, first);
  q->attn_out = p->attn_out;
  /* the barrier between the passes is one task either way (what the
   * search's memory bound splits the plan's uses by, search_bound.c) */
  if (p->pass_barrier != UINT32_MAX) q->pass_barrier = first[p->pass_barrier];
  plan_finish(q);
  return q;
}

const char *plan_op_name(op_kind k) {
  static const char *const names[] = {"attn",      "merge",     "copy", "lin_intra",
                                      "lin_state", "lin_apply", "gemm", "elemwise"};
  G_STATIC_ASSERT(G_N_ELEMENTS(names) == OP_KINDS); /* a new kind gets its name */
  return k < OP_KINDS ? names[k] : "?";
}

const char *plan_api_name(comm_api a) {
  static const char *const names[COMM_APIS] = {"p2p", "all_to_all", "all_gather",
                                               "reduce_scatter", "all_reduce", "barrier"};
  return a < COMM_APIS ? names[a] : "?";
}

void plan_relabel(plan *p, const uint32_t *to) {
  g_assert(p->patterns->len == 0);
  for (guint i = 0; i < p->tasks->len; i++) {
    plan_task *t = plan_task_at(p, i);
    if (t->kind == TASK_COMPUTE && t->gpu != PLAN_ALL) t->gpu = to[t->gpu];
  }
  for (guint i = 0; i < p->xfers->len; i++) {
    plan_xfer *x = &g_array_index(p->xfers, plan_xfer, i);
    x->src = to[x->src];
    x->dst = to[x->dst];
    if (p->xfer_to) g_array_index(p->xfer_to, uint32_t, i) = to[g_array_index(p->xfer_to, uint32_t, i)];
  }
  for (guint i = 0; p->bufs && i < p->bufs->len; i++) {
    plan_buf *b = &g_array_index(p->bufs, plan_buf, i);
    if (b->gpu != PLAN_ALL) b->gpu = to[b->gpu];
  }
  for (guint i = 0; p->buf_uses && i < p->buf_uses->len; i++) {
    plan_buf_use *u = &g_array_index(p->buf_uses, plan_buf_use, i);
    if (u->gpu != PLAN_ALL) u->gpu = to[u->gpu];
  }
  /* the streams' last tasks follow their GPUs */
  g_autofree int64_t *lc = g_memdup2(p->last_compute, p->n_gpus * sizeof(int64_t));
  g_autofree int64_t *ll = g_memdup2(p->last_coll, p->n_gpus * sizeof(int64_t));
  for (uint32_t g = 0; g < p->n_gpus; g++) {
    p->last_compute[to[g]] = lc[g];
    p->last_coll[to[g]] = ll[g];
  }
}
