/* plan: building the task graph. */
#include "plan.h"

plan *plan_new(uint32_t n_gpus, bool record_segs) {
  plan *p = g_new0(plan, 1);
  p->n_gpus = n_gpus;
  p->record_segs = record_segs;
  p->tasks = g_array_new(FALSE, TRUE, sizeof(plan_task));
  p->xfers = g_array_new(FALSE, FALSE, sizeof(plan_xfer));
  p->segs = g_array_new(FALSE, FALSE, sizeof(plan_seg));
  p->dep_from = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->dep_to = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  p->last_compute = g_new(int64_t, n_gpus);
  for (uint32_t g = 0; g < n_gpus; g++) p->last_compute[g] = -1;
  p->note = g_string_new(NULL);
  return p;
}

void plan_free(plan *p) {
  if (!p) return;
  g_array_free(p->tasks, TRUE);
  g_array_free(p->xfers, TRUE);
  g_array_free(p->segs, TRUE);
  g_array_free(p->dep_from, TRUE);
  g_array_free(p->dep_to, TRUE);
  g_free(p->deps);
  g_free(p->last_compute);
  g_string_free(p->note, TRUE);
  g_free(p);
}

static uint32_t add_task(plan *p, plan_task *t) {
  g_array_append_val(p->tasks, *t);
  return p->tasks->len - 1;
}

/* Compute tasks of one GPU run in order on its compute stream. */
static uint32_t add_compute(plan *p, plan_task *t) {
  uint32_t id = add_task(p, t);
  if (p->last_compute[t->gpu] >= 0) plan_dep(p, (uint32_t)p->last_compute[t->gpu], id);
  p->last_compute[t->gpu] = id;
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

uint32_t plan_attn(plan *p, uint32_t gpu, uint32_t step, bool causal, bool backward,
                   const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk) {
  plan_task t = {.kind = TASK_ATTN, .gpu = gpu, .step = step, .causal = causal,
                 .backward = backward};
  for (uint32_t i = 0; i < nq; i++) t.sq += (double)q[i].len;
  for (uint32_t j = 0; j < nk; j++) t.sk += (double)k[j].len;
  if (!causal) {
    t.pairs = t.sq * t.sk;
  } else {
    for (uint32_t i = 0; i < nq; i++)
      for (uint32_t j = 0; j < nk; j++) t.pairs += plan_causal_pairs(q[i], k[j]);
  }
  if (p->record_segs) {
    t.seg_off = p->segs->len;
    t.n_qseg = nq;
    t.n_kseg = nk;
    g_array_append_vals(p->segs, q, nq);
    g_array_append_vals(p->segs, k, nk);
  }
  return add_compute(p, &t);
}

uint32_t plan_merge(plan *p, uint32_t gpu, uint32_t step, double rows) {
  plan_task t = {.kind = TASK_MERGE, .gpu = gpu, .step = step, .sq = rows};
  return add_compute(p, &t);
}

uint32_t plan_comm(plan *p, uint32_t step) {
  plan_task t = {.kind = TASK_COMM, .step = step, .xfer_off = p->xfers->len};
  return add_task(p, &t);
}

void plan_xfer_add(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes) {
  plan_xfer_add_msgs(p, comm, src, dst, bytes, 1);
}

void plan_xfer_add_msgs(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes,
                        uint32_t msgs) {
  plan_task *t = plan_task_at(p, comm);
  /* transfers of a group are added while it is the newest group */
  g_assert(t->kind == TASK_COMM && t->xfer_off + t->n_xfer == p->xfers->len);
  plan_xfer x = {src, dst, bytes, msgs};
  g_array_append_val(p->xfers, x);
  t->n_xfer++;
}

void plan_dep(plan *p, uint32_t before, uint32_t after) {
  g_assert(before < after);
  g_array_append_val(p->dep_from, before);
  g_array_append_val(p->dep_to, after);
}

void plan_finish(plan *p) {
  guint n = p->tasks->len, m = p->dep_to->len;
  for (guint i = 0; i < n; i++) plan_task_at(p, i)->n_dep = 0;
  for (guint e = 0; e < m; e++) plan_task_at(p, g_array_index(p->dep_to, uint32_t, e))->n_dep++;
  uint32_t off = 0;
  for (guint i = 0; i < n; i++) {
    plan_task *t = plan_task_at(p, i);
    t->dep_off = off;
    off += t->n_dep;
    t->n_dep = 0;
  }
  p->deps = g_new(uint32_t, m + 1);
  for (guint e = 0; e < m; e++) {
    plan_task *t = plan_task_at(p, g_array_index(p->dep_to, uint32_t, e));
    p->deps[t->dep_off + t->n_dep++] = g_array_index(p->dep_from, uint32_t, e);
  }
}
