/* plan_append: one finished plan appended into another (plan.h).
 *
 * What makes a scheduler's plan usable inside a larger one (a decoder
 * layer around its attention, every tensor-parallel rank's copy of it):
 * its tasks, dependencies, transfers, segments and buffers are copied
 * with task ids and GPUs remapped, and the stream rules are re-applied at
 * the seams only.  Inside a range every dependency is the scheduler's own
 * (copied, never re-derived); at its start the first compute task of each
 * GPU follows the GPU's compute stream in the host plan, and a group with
 * no predecessor in the range waits for the compute its GPUs had issued
 * (PyTorch's NCCL stream waits for the current stream at issue); at its
 * end the tasks with no successor in the range are what the host plan's
 * next compute task of each GPU must wait for (plan_append_after): an
 * output can come home by a transfer (Ulysses' last all-to-all), not by
 * the compute stream only. */
#include "plan.h"
#include "plan_buf.h"

struct plan_append {
  unsigned own;        /* PLAN_APPEND_* */
  plan *dst;
  const plan *src;
  uint32_t *gpus;      /* src GPU -> dst GPU */
  uint32_t *id;        /* src task -> dst task, UINT32_MAX: not appended yet */
  GHashTable *bufs;    /* (src buffer, src GPU) -> dst buffer + 1 */
  GArray **pending;    /* per dst GPU: sinks of the last range touching it */
};

plan_append *plan_append_new(plan *dst, const plan *src, const uint32_t *gpus, unsigned own) {
  g_assert(!src->has_lockstep && src->deps && !src->xfer_to);
  plan_append *a = g_new0(plan_append, 1);
  a->own = own;
  a->dst = dst;
  a->src = src;
  a->gpus = g_memdup2(gpus, src->n_gpus * sizeof *gpus);
  for (uint32_t g = 0; g < src->n_gpus; g++) g_assert(gpus[g] < dst->n_gpus);
  a->id = g_new(uint32_t, src->tasks->len);
  for (guint i = 0; i < src->tasks->len; i++) a->id[i] = UINT32_MAX;
  a->bufs = g_hash_table_new(g_int64_hash, g_int64_equal);
  a->pending = g_new0(GArray *, dst->n_gpus);
  return a;
}

void plan_append_free(plan_append *a) {
  if (!a) return;
  g_free(a->gpus);
  g_free(a->id);
  GHashTableIter it;
  gpointer k;
  g_hash_table_iter_init(&it, a->bufs);
  while (g_hash_table_iter_next(&it, &k, NULL)) g_free(k);
  g_hash_table_destroy(a->bufs);
  for (uint32_t g = 0; g < a->dst->n_gpus; g++)
    if (a->pending[g]) g_array_free(a->pending[g], TRUE);
  g_free(a->pending);
  g_free(a);
}

/* The dst buffer standing for src buffer b's copy on src GPU g (a
 * buffer of every GPU becomes one per GPU: the dst plan has GPUs the
 * src plan does not). */
static uint32_t buf_of(plan_append *a, uint32_t b, uint32_t g, bool *fresh) {
  const plan_buf *sb = plan_buf_at(a->src, b);
  if (sb->gpu != PLAN_ALL) g = sb->gpu;
  gint64 key = (gint64)b * a->src->n_gpus + g;
  gpointer v = g_hash_table_lookup(a->bufs, &key);
  *fresh = !v;
  if (v) return GPOINTER_TO_UINT(v) - 1;
  uint32_t id = plan_buf_new(a->dst, a->gpus[g], sb->bytes, sb->name);
  plan_buf *db = (plan_buf *)plan_buf_at(a->dst, id);
  /* the host plan may own what src's caller would: its inputs made by the
   * host's own tasks (allocated where first used here), what it hands on
   * consumed by them (inputs and outputs alike freed after their last use
   * here, not kept) */
  db->input = sb->input && !(a->own & PLAN_APPEND_OWN_INPUTS);
  db->keep = sb->keep && !(a->own & PLAN_APPEND_OWN_OUTPUTS);
  gint64 *k = g_new(gint64, 1);
  *k = key;
  g_hash_table_insert(a->bufs, k, GUINT_TO_POINTER(id + 1));
  return id;
}

/* Marks the src GPUs a task runs on or moves data between (scratch). */
static uint32_t task_gpus(const plan *src, const plan_task *t, uint8_t *mark, uint32_t *out) {
  uint32_t k = 0;
  if (t->kind == TASK_COMPUTE) {
    out[k++] = t->gpu;
    return k;
  }
  for (uint32_t x = 0; x < t->n_xfer; x++) {
    const plan_xfer *e = &g_array_index(src->xfers, plan_xfer, t->xfer_off + x);
    uint32_t ends[2] = {e->src, e->dst};
    for (int j = 0; j < 2; j++)
      if (!mark[ends[j]]) {
        mark[ends[j]] = 1;
        out[k++] = ends[j];
      }
  }
  for (uint32_t j = 0; j < k; j++) mark[out[j]] = 0;
  return k;
}

void plan_append_range(plan_append *a, uint32_t from, uint32_t to) {
  const plan *src = a->src;
  plan *dst = a->dst;
  uint32_t n = src->n_gpus;
  g_assert(from <= to && to <= src->tasks->len);
  g_autofree uint8_t *mark = g_new0(uint8_t, n);
  g_autofree uint32_t *touch = g_new(uint32_t, n);
  g_autofree uint8_t *started = g_new0(uint8_t, n);  /* GPU's compute seen in this range */
  /* (task - from) x n + GPU: the task has a successor in the range that
   * touches that GPU too */
  g_autoptr(GHashTable) succ = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  g_autofree uint32_t *touch2 = g_new(uint32_t, n);
  /* the host plan's compute each GPU had issued when the range begins */
  g_autofree int64_t *issued = g_new(int64_t, dst->n_gpus);
  plan_issued(dst, issued);
  for (uint32_t g = 0; g < dst->n_gpus; g++)
    if (a->pending[g]) g_array_set_size(a->pending[g], 0);
  for (uint32_t i = from; i < to; i++) {
    plan_task t = *plan_task_at(src, i);
    const plan_task *st = plan_task_at(src, i);
    uint32_t id = dst->tasks->len;
    a->id[i] = id;
    plan_task c = t;
    c.dep_off = c.n_dep = 0;
    if (t.kind == TASK_COMPUTE) c.gpu = a->gpus[t.gpu];
    if (t.host_at != PLAN_IN_PLACE) {
      g_assert(a->id[t.host_at] != UINT32_MAX);
      c.host_at = a->id[t.host_at];
    }
    if (t.kind == TASK_COMM) {
      c.xfer_off = dst->xfers->len;
      for (uint32_t x = 0; x < t.n_xfer; x++) {
        plan_xfer e = g_array_index(src->xfers, plan_xfer, t.xfer_off + x);
        e.src = a->gpus[e.src];
        e.dst = a->gpus[e.dst];
        g_array_append_val(dst->xfers, e);
        if (dst->xfer_to) g_array_append_val(dst->xfer_to, e.dst);
      }
    }
    if (dst->record_segs && src->record_segs && t.n_qseg + t.n_kseg) {
      c.seg_off = dst->segs->len;
      g_array_append_vals(dst->segs, &g_array_index(src->segs, plan_seg, t.seg_off),
                          t.n_qseg + t.n_kseg);
    } else if (!dst->record_segs) {
      c.n_qseg = c.n_kseg = 0;
    }
    g_array_append_val(dst->tasks, c);
    bool inner = false;
    uint32_t k = task_gpus(src, st, mark, touch);
    for (uint32_t d = 0; d < st->n_dep; d++) {
      uint32_t from_id = src->deps[st->dep_off + d];
      g_assert(a->id[from_id] != UINT32_MAX);
      bool overlap = plan_dep_is_overlap(st, d);
      if (overlap) plan_overlap_dep(dst, a->id[from_id], id);
      else plan_dep(dst, a->id[from_id], id);
      if (from_id < from) continue;
      /* an overlap edge is no wait where the hardware lets the group run
       * beside the kernel: it still waits for what the host had issued */
      inner |= !overlap;
      uint32_t k2 = task_gpus(src, plan_task_at(src, from_id), mark, touch2);
      for (uint32_t j = 0; j < k; j++)
        for (uint32_t j2 = 0; j2 < k2; j2++)
          if (touch[j] == touch2[j2]) {
            gint64 *key = g_new(gint64, 1);
            *key = (gint64)(from_id - from) * n + touch[j];
            g_hash_table_add(succ, key);
          }
    }
    /* the seams: the host plan's streams before the range */
    if (t.kind == TASK_COMPUTE) {
      if (!started[t.gpu]) {
        started[t.gpu] = 1;
        int64_t last = issued[c.gpu];
        if (last >= 0) plan_dep(dst, (uint32_t)last, id);
      }
      dst->last_compute[c.gpu] = id;
    } else if (!inner) {
      /* a group with nothing before it in the range: after its GPUs'
       * compute issued in the host plan, each once */
      for (uint32_t j = 0; j < k; j++) {
        int64_t last = issued[a->gpus[touch[j]]];
        bool seen = false;
        for (uint32_t j2 = 0; j2 < j; j2++) seen |= issued[a->gpus[touch[j2]]] == last;
        if (last >= 0 && !seen) plan_dep(dst, (uint32_t)last, id);
      }
    }
  }
  /* buffers: each use of a task of the range, on the copies it touches;
   * an input the host makes comes into being in the range that first
   * touches it (the host's op that makes it ran just before): every use
   * of that range writes it, whichever runs first */
  g_autoptr(GHashTable) born = g_hash_table_new(NULL, NULL);
  for (uint32_t u = 0; u < plan_buf_use_count(src); u++) {
    const plan_buf_use *use = plan_buf_use_at(src, u);
    if (use->task < from || use->task >= to) continue;
    const plan_task *st = plan_task_at(src, use->task);
    const plan_buf *sb = plan_buf_at(src, use->buf);
    uint32_t k = sb->gpu != PLAN_ALL ? (touch[0] = sb->gpu, 1) : task_gpus(src, st, mark, touch);
    for (uint32_t j = 0; j < k; j++) {
      bool fresh;
      uint32_t b = buf_of(a, use->buf, touch[j], &fresh);
      if (fresh && sb->input && (a->own & PLAN_APPEND_OWN_INPUTS))
        g_hash_table_add(born, GUINT_TO_POINTER(b + 1));
      bool made = g_hash_table_contains(born, GUINT_TO_POINTER(b + 1));
      if (use->write || made) plan_buf_writes(dst, a->id[use->task], b);
      else plan_buf_reads(dst, a->id[use->task], b);
    }
  }
  /* the range's last tasks on each GPU they touch */
  for (uint32_t i = from; i < to; i++) {
    const plan_task *st = plan_task_at(src, i);
    uint32_t k = task_gpus(src, st, mark, touch);
    for (uint32_t j = 0; j < k; j++) {
      gint64 key = (gint64)(i - from) * n + touch[j];
      if (g_hash_table_contains(succ, &key)) continue;
      uint32_t g = a->gpus[touch[j]];
      if (!a->pending[g]) a->pending[g] = g_array_new(FALSE, FALSE, sizeof(uint32_t));
      g_array_append_val(a->pending[g], a->id[i]);
    }
  }
  if (src->note->len && !g_strstr_len(dst->note->str, -1, src->note->str))
    g_string_append_printf(dst->note, "%s%s", dst->note->len ? "; " : "", src->note->str);
}

void plan_append_after(plan_append *a, uint32_t task) {
  const plan_task *t = plan_task_at(a->dst, task);
  g_assert(t->kind == TASK_COMPUTE && t->gpu != PLAN_ALL);
  GArray *p = a->pending[t->gpu];
  if (!p) return;
  /* the compute stream already orders it after the GPU's last compute:
   * that sink needs no second edge (the edge lists grow as edges are
   * added: read them afresh) */
  GArray *from = a->dst->dep_from, *to = a->dst->dep_to;
  for (guint i = 0; i < p->len; i++) {
    uint32_t s = g_array_index(p, uint32_t, i);
    bool have = false;
    for (guint e = to->len; e-- > 0 && g_array_index(to, uint32_t, e) == task;)
      have |= g_array_index(from, uint32_t, e) == s;
    if (!have) plan_dep(a->dst, s, task);
  }
  g_array_set_size(p, 0);
}
