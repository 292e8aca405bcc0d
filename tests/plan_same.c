/* plan_same: lockstep and per-GPU plans compared (plan_same.h). */
#include "plan_same.h"

#include <math.h>
#include <string.h>

bool close_rel(double a, double b) {
  return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-15;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Task i's predecessors, sorted. */
static GArray *deps_of(const plan *p, const plan_task *t) {
  GArray *d = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_array_append_vals(d, &p->deps[t->dep_off], t->n_dep);
  g_array_sort(d, cmp_u32);
  return d;
}

/* The fields of compute task or group a of e and b of r: operation,
 * transfers in order. */
static bool same_task(const plan *e, const plan_task *a, const plan *r, const plan_task *b) {
  if (a->kind == TASK_COMPUTE)
    return a->gpu == b->gpu && a->op.kind == b->op.kind && a->op.sq == b->op.sq &&
           a->op.sk == b->op.sk && a->op.pairs == b->op.pairs && a->op.bytes == b->op.bytes &&
           a->op.causal == b->op.causal && a->op.backward == b->op.backward;
  if (a->api != b->api || plan_xfer_count(e, a) != plan_xfer_count(r, b)) return false;
  for (uint32_t x = 0; x < plan_xfer_count(e, a); x++) {
    plan_xfer u = plan_xfer_at(e, a, x), v = plan_xfer_at(r, b, x);
    if (u.src != v.src || u.dst != v.dst || u.bytes != v.bytes || u.msgs != v.msgs ||
        u.steps != v.steps)
      return false;
  }
  return true;
}

/* Expansion e of the lockstep plan is the per-GPU plan r: the same tasks
 * in the same order (GPU, step, operation, predecessors) and the same
 * transfers, pair by pair, in the same order (which sets the network's
 * bundles). */
bool same_structure(const plan *e, const plan *r) {
  if (e->tasks->len != r->tasks->len) return false;
  for (guint i = 0; i < e->tasks->len; i++) {
    const plan_task *a = plan_task_at(e, i), *b = plan_task_at(r, i);
    if (a->kind != b->kind || a->step != b->step || a->n_dep != b->n_dep ||
        a->n_overlap != b->n_overlap || a->host_at != b->host_at || a->grads != b->grads)
      return false;
    g_autoptr(GArray) da = deps_of(e, a);
    g_autoptr(GArray) db = deps_of(r, b);
    if (da->len && memcmp(da->data, db->data, da->len * sizeof(uint32_t)) != 0) return false;
    if (!same_task(e, a, r, b)) return false;
  }
  return true;
}

/* A task's place in the plan, whatever the interleaving of GPUs: a
 * compute task's GPU and rank on that GPU's stream; a group's rank among
 * the groups (gpu UINT32_MAX). */
typedef struct { uint32_t gpu, rank; } place;

static place *places_of(const plan *p) {
  place *at = g_new(place, p->tasks->len);
  g_autofree uint32_t *ranks = g_new0(uint32_t, p->n_gpus + 1);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    uint32_t g = t->kind == TASK_COMPUTE ? t->gpu : p->n_gpus;
    g_assert(g <= p->n_gpus); /* an expanded plan: no lockstep task */
    at[i] = (place){t->kind == TASK_COMPUTE ? g : UINT32_MAX, ranks[g]++};
  }
  return at;
}

static int cmp_place(const void *a, const void *b) {
  const place *x = a, *y = b;
  if (x->gpu != y->gpu) return (x->gpu > y->gpu) - (x->gpu < y->gpu);
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Task t's predecessors as places, sorted. */
static GArray *dep_places(const plan *p, const place *at, const plan_task *t) {
  GArray *d = g_array_new(FALSE, FALSE, sizeof(place));
  for (uint32_t i = 0; i < t->n_dep; i++) g_array_append_val(d, at[p->deps[t->dep_off + i]]);
  g_array_sort(d, cmp_place);
  return d;
}

bool same_streams(const plan *e, const plan *r) {
  if (e->tasks->len != r->tasks->len || e->n_gpus != r->n_gpus) return false;
  g_autofree place *pe = places_of(e), *pr = places_of(r);
  /* the same task at each place (r's task at e's task's place) */
  uint32_t n = e->n_gpus;
  g_autofree uint32_t **of = g_new0(uint32_t *, n + 1);
  g_autofree uint32_t *count = g_new0(uint32_t, n + 1);
  for (guint i = 0; i < r->tasks->len; i++) count[pr[i].gpu == UINT32_MAX ? n : pr[i].gpu]++;
  for (uint32_t g = 0; g <= n; g++) of[g] = g_new(uint32_t, count[g] + 1);
  for (guint i = 0; i < r->tasks->len; i++) of[pr[i].gpu == UINT32_MAX ? n : pr[i].gpu][pr[i].rank] = i;
  /* per GPU, the compute tasks it had issued when each group came */
  g_autofree uint32_t *seen_e = g_new0(uint32_t, n), *seen_r = g_new0(uint32_t, n);
  g_autofree uint32_t **before = g_new0(uint32_t *, count[n] + 1);
  for (guint i = 0; i < r->tasks->len; i++) {
    const plan_task *t = plan_task_at(r, i);
    if (t->kind == TASK_COMPUTE) seen_r[t->gpu]++;
    else before[pr[i].rank] = g_memdup2(seen_r, n * sizeof(uint32_t));
  }
  bool ok = true;
  for (guint i = 0; ok && i < e->tasks->len; i++) {
    const plan_task *a = plan_task_at(e, i);
    uint32_t g = pe[i].gpu == UINT32_MAX ? n : pe[i].gpu;
    if (pe[i].rank >= count[g]) { ok = false; break; }
    const plan_task *b = plan_task_at(r, of[g][pe[i].rank]);
    if (a->kind != b->kind || a->step != b->step || a->n_dep != b->n_dep ||
        a->n_overlap != b->n_overlap || a->grads != b->grads ||
        (a->host_at == PLAN_IN_PLACE) != (b->host_at == PLAN_IN_PLACE))
      ok = false;
    if (ok && a->host_at != PLAN_IN_PLACE)
      ok = cmp_place(&pe[a->host_at], &pr[b->host_at]) == 0;
    if (ok) {
      g_autoptr(GArray) da = dep_places(e, pe, a);
      g_autoptr(GArray) db = dep_places(r, pr, b);
      ok = !da->len || memcmp(da->data, db->data, da->len * sizeof(place)) == 0;
    }
    ok = ok && same_task(e, a, r, b);
    if (a->kind == TASK_COMPUTE) seen_e[a->gpu]++;
    else if (ok) ok = memcmp(seen_e, before[pe[i].rank], n * sizeof(uint32_t)) == 0;
  }
  for (uint32_t g = 0; g <= n; g++) g_free(of[g]);
  for (uint32_t k = 0; k < count[n]; k++) g_free(before[k]);
  return ok;
}

/* Every figure of the two runs, to 1e-9. */
bool same_figures(const exec_result *x, const exec_result *y) {
  bool ok = close_rel(x->step_s, y->step_s) && close_rel(x->compute_s, y->compute_s) &&
            close_rel(x->comm_s, y->comm_s) && close_rel(x->exposed_s, y->exposed_s) &&
            close_rel(x->imbalance_s, y->imbalance_s) &&
            close_rel(x->exposed_fixed_s, y->exposed_fixed_s) &&
            close_rel(x->exposed_host_s, y->exposed_host_s) && close_rel(x->flops, y->flops) &&
            x->last_gpu == y->last_gpu && x->n_chan == y->n_chan && x->flows == y->flows &&
            close_rel(x->peak_bytes, y->peak_bytes) && x->peak_gpu == y->peak_gpu &&
            close_rel(x->peak_reserved_bytes, y->peak_reserved_bytes) &&
            x->mem_errors == 0 && y->mem_errors == 0 &&
            x->peak_live->len == y->peak_live->len;
  for (uint32_t g = 0; ok && g < x->n_gpus; g++)
    ok = close_rel(x->gpu_compute_s[g], y->gpu_compute_s[g]) &&
         close_rel(x->gpu_comm_s[g], y->gpu_comm_s[g]) &&
         close_rel(x->gpu_finish_s[g], y->gpu_finish_s[g]) &&
         close_rel(x->gpu_imbalance_s[g], y->gpu_imbalance_s[g]) &&
         close_rel(x->gpu_peak_bytes[g], y->gpu_peak_bytes[g]) &&
         close_rel(x->gpu_peak_reserved_bytes[g], y->gpu_peak_reserved_bytes[g]);
  for (uint32_t c = 0; ok && c < x->n_chan; c++)
    ok = close_rel(x->chan_bytes[c], y->chan_bytes[c]) &&
         close_rel(x->chan_busy_s[c], y->chan_busy_s[c]);
  for (guint i = 0; ok && i < x->peak_live->len; i++) {
    const exec_mem_live *a = &g_array_index(x->peak_live, exec_mem_live, i);
    const exec_mem_live *b = &g_array_index(y->peak_live, exec_mem_live, i);
    ok = a->gpu == b->gpu && a->count == b->count && strcmp(a->name, b->name) == 0 &&
         close_rel(a->bytes, b->bytes);
  }
  return ok;
}

