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
 * the compute stream only.
 *
 * What of this depends on src alone (the GPUs each task touches, where
 * each buffer's copies lie, per range which groups wait on nothing in it
 * and which tasks are its sinks) is worked out once per src plan
 * (plan_append_src) and shared by its appenders: a model's step appends
 * one attention plan per layer, TP rank and replica. */
#include <stdlib.h>

#include "plan.h"
#include "plan_buf.h"

/* A buffer use of src's as a range's appenders read it (once per
 * appender, in src's order: read from one array, not through src's uses
 * and buffers). */
typedef struct {
  uint32_t task, buf;
  uint32_t slot;    /* the buffer's first copy's slot */
  bool all;         /* a buffer of every GPU: a copy per GPU the task touches */
  bool write;
  /* neither the first nor the last of the range's uses with its task,
   * buffer and kind (read, write): not appended (range_of says why) */
  bool repeat;
} range_use;

/* One range of src as plan_append_range met it. */
typedef struct {
  uint32_t from, to;
  uint8_t *inner;   /* per task of the range: a wait on a task of the range */
  GArray *sinks;    /* uint32 pairs (task, src GPU): no successor in the
                       range touches that GPU, in task order */
  GArray *uses;     /* range_use: src's buffer uses of the range's tasks, in order */
} src_range;

struct plan_append_src {
  const plan *src;
  uint32_t *touch_off; /* per task + 1: into touch */
  uint32_t *touch;     /* the src GPUs each task runs on or moves data between */
  uint32_t *slot;      /* per src buffer: its first copy's slot (one per GPU
                          of a PLAN_ALL buffer, else one) */
  uint32_t n_slots;
  GArray *ranges;      /* src_range */
};

struct plan_append {
  unsigned own;        /* PLAN_APPEND_* */
  plan *dst;
  plan_append_src *s;
  bool owns_src;
  uint32_t *gpus;      /* src GPU -> dst GPU */
  uint32_t *id;        /* src task -> dst task, UINT32_MAX: not appended yet */
  uint32_t *bufs;      /* per slot: dst buffer, UINT32_MAX: none yet */
  uint32_t *born;      /* per slot: the range (counted from 1) whose use made
                          it, as an input the host makes; 0: none */
  uint32_t n_ranges;
  GArray **pending;    /* per dst GPU: sinks of the last range touching it */
  bool unfit;          /* a kept task waited on one left out (dst's quotient) */
};

/* a src task left out of a dst built for representatives (plan_quotient) */
#define DROPPED (UINT32_MAX - 1)

/* The src GPUs task t runs on or moves data between, each once, in the
 * order its transfers name them. */
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

plan_append_src *plan_append_src_new(const plan *src) {
  g_assert(!src->has_lockstep && src->deps && !src->xfer_to);
  plan_append_src *s = g_new0(plan_append_src, 1);
  s->src = src;
  guint nt = src->tasks->len;
  s->touch_off = g_new(uint32_t, nt + 1);
  GArray *touch = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_autofree uint8_t *mark = g_new0(uint8_t, src->n_gpus);
  g_autofree uint32_t *out = g_new(uint32_t, src->n_gpus);
  for (guint i = 0; i < nt; i++) {
    s->touch_off[i] = touch->len;
    g_array_append_vals(touch, out, task_gpus(src, plan_task_at(src, i), mark, out));
  }
  s->touch_off[nt] = touch->len;
  s->touch = (uint32_t *)g_array_free(touch, FALSE);
  uint32_t nb = plan_buf_count(src);
  s->slot = g_new(uint32_t, nb);
  for (uint32_t b = 0; b < nb; b++) {
    s->slot[b] = s->n_slots;
    s->n_slots += plan_buf_at(src, b)->gpu == PLAN_ALL ? src->n_gpus : 1;
  }
  s->ranges = g_array_new(FALSE, FALSE, sizeof(src_range));
  return s;
}

void plan_append_src_free(plan_append_src *s) {
  if (!s) return;
  for (guint r = 0; r < s->ranges->len; r++) {
    src_range *sr = &g_array_index(s->ranges, src_range, r);
    g_free(sr->inner);
    g_array_free(sr->sinks, TRUE);
    g_array_free(sr->uses, TRUE);
  }
  g_array_free(s->ranges, TRUE);
  g_free(s->touch_off);
  g_free(s->touch);
  g_free(s->slot);
  g_free(s);
}

/* The pass barrier joins the GPUs' forward passes (plan_barrier), not
 * their backward starts: a backward task waiting on it alone is one with
 * nothing before it in its range, and so follows its own GPUs' compute
 * issued at the seam (each GPU where its program calls the backward).
 * Counted as a wait, it let a backward that opens with a transfer
 * (TokenRing's Q, dO, O and LSE; a ring's K and V) start as soon as the
 * forward's attention ended, during the next layers' forward. */
static bool is_pass_barrier(const plan *src, uint32_t task) {
  const plan_task *t = plan_task_at(src, task);
  return t->kind == TASK_COMM && t->api == COMM_BARRIER;
}

/* The range's uses that repeat one before and one after them (the same
 * task, buffer and kind), marked.  A use of src naming one GPU's copy of
 * a buffer of every GPU (a ring's group reads each GPU's arrived
 * gradient, a use per GPU: rotate_buf.c) is appended as a use of every
 * copy its task touches (plan_append_range), so a group of n GPUs has n
 * uses of each copy, n^2 in all: a causal ring's backward at SP 256 made
 * 25 M of the 26 M uses of its decoder layer's plan.  Such a repeat
 * changes nothing in the replay (exec_mem.c): a copy is allocated at its
 * task's first use of it (a later one finds it live) and freed at the
 * last (each earlier one only drops a reference the later ones still
 * hold); what it does count, a read of a copy nothing wrote, once per
 * use, is an error either way.  The first and the last are kept, in
 * their places, so that each copy is made and freed where it was. */
typedef struct { uint64_t key; uint32_t at; } use_key;

static gint by_key_then_place(gconstpointer a, gconstpointer b) {
  const use_key *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->at > y->at) - (x->at < y->at);
}

static void mark_repeats(GArray *uses) {
  guint n = uses->len;
  g_autofree use_key *k = g_new(use_key, n ? n : 1);
  for (guint i = 0; i < n; i++) {
    const range_use *u = &g_array_index(uses, range_use, i);
    k[i] = (use_key){((uint64_t)u->task << 33) | ((uint64_t)u->buf << 1) | u->write, i};
  }
  qsort(k, n, sizeof *k, by_key_then_place);
  /* in each run of one key, every use but the run's first and last */
  for (guint i = 1; i + 1 < n; i++)
    if (k[i].key == k[i - 1].key && k[i].key == k[i + 1].key)
      g_array_index(uses, range_use, k[i].at).repeat = true;
}

/* Range [from, to) of src: which tasks wait on one of it, which are its
 * sinks on each GPU they touch, which buffer uses are its tasks'. */
static const src_range *range_of(plan_append_src *s, uint32_t from, uint32_t to) {
  for (guint r = 0; r < s->ranges->len; r++) {
    const src_range *sr = &g_array_index(s->ranges, src_range, r);
    if (sr->from == from && sr->to == to) return sr;
  }
  const plan *src = s->src;
  src_range sr = {.from = from, .to = to, .inner = g_new0(uint8_t, to - from + 1),
                  .sinks = g_array_new(FALSE, FALSE, 2 * sizeof(uint32_t)),
                  .uses = g_array_new(FALSE, FALSE, sizeof(range_use))};
  /* per touch of a task of the range: a successor in the range touches
   * that GPU too */
  uint32_t base = s->touch_off[from];
  g_autofree uint8_t *succ = g_new0(uint8_t, s->touch_off[to] - base + 1);
  for (uint32_t i = from; i < to; i++) {
    const plan_task *st = plan_task_at(src, i);
    const uint32_t *touch = s->touch + s->touch_off[i];
    uint32_t k = s->touch_off[i + 1] - s->touch_off[i];
    for (uint32_t d = 0; d < st->n_dep; d++) {
      uint32_t before = src->deps[st->dep_off + d];
      if (before < from) continue;
      /* an overlap edge is no wait where the hardware lets the group run
       * beside the kernel: it still waits for what the host had issued */
      sr.inner[i - from] |= !plan_dep_is_overlap(st, d) && !is_pass_barrier(src, before);
      const uint32_t *touch2 = s->touch + s->touch_off[before];
      uint32_t k2 = s->touch_off[before + 1] - s->touch_off[before];
      for (uint32_t j = 0; j < k; j++)
        for (uint32_t j2 = 0; j2 < k2; j2++)
          if (touch[j] == touch2[j2]) succ[s->touch_off[before] + j2 - base] = 1;
    }
  }
  for (uint32_t i = from; i < to; i++)
    for (uint32_t j = s->touch_off[i]; j < s->touch_off[i + 1]; j++)
      if (!succ[j - base]) {
        uint32_t sink[2] = {i, s->touch[j]};
        g_array_append_val(sr.sinks, sink);
      }
  for (uint32_t u = 0; u < plan_buf_use_count(src); u++) {
    const plan_buf_use *use = plan_buf_use_at(src, u);
    if (use->task < from || use->task >= to) continue;
    range_use ru = {.task = use->task, .buf = use->buf, .slot = s->slot[use->buf],
                    .all = plan_buf_at(src, use->buf)->gpu == PLAN_ALL, .write = use->write};
    g_array_append_val(sr.uses, ru);
  }
  mark_repeats(sr.uses);
  g_array_append_val(s->ranges, sr);
  return &g_array_index(s->ranges, src_range, s->ranges->len - 1);
}

plan_append *plan_append_new_shared(plan *dst, plan_append_src *s, const uint32_t *gpus,
                                    unsigned own) {
  const plan *src = s->src;
  plan_append *a = g_new0(plan_append, 1);
  a->own = own;
  a->dst = dst;
  a->s = s;
  a->gpus = g_memdup2(gpus, src->n_gpus * sizeof *gpus);
  for (uint32_t g = 0; g < src->n_gpus; g++) g_assert(gpus[g] < dst->n_gpus);
  a->id = g_new(uint32_t, src->tasks->len);
  for (guint i = 0; i < src->tasks->len; i++) a->id[i] = UINT32_MAX;
  a->bufs = g_new(uint32_t, s->n_slots);
  for (uint32_t i = 0; i < s->n_slots; i++) a->bufs[i] = UINT32_MAX;
  a->born = g_new0(uint32_t, s->n_slots);
  a->pending = g_new0(GArray *, dst->n_gpus);
  return a;
}

plan_append *plan_append_new(plan *dst, const plan *src, const uint32_t *gpus, unsigned own) {
  plan_append *a = plan_append_new_shared(dst, plan_append_src_new(src), gpus, own);
  a->owns_src = true;
  return a;
}

void plan_append_free(plan_append *a) {
  if (!a) return;
  g_free(a->gpus);
  g_free(a->id);
  g_free(a->bufs);
  g_free(a->born);
  for (uint32_t g = 0; g < a->dst->n_gpus; g++)
    if (a->pending[g]) g_array_free(a->pending[g], TRUE);
  g_free(a->pending);
  if (a->owns_src) plan_append_src_free(a->s);
  g_free(a);
}

/* Whether dst, built for representatives (sim), keeps src task t: a
 * kernel of a representative, a group with a transfer leaving one or
 * with none at all (a barrier). */
static bool kept(const plan_append *a, const plan_task *t, const uint8_t *sim) {
  if (t->kind == TASK_COMPUTE) return sim[a->gpus[t->gpu]];
  if (!t->n_xfer) return true;
  for (uint32_t x = 0; x < t->n_xfer; x++)
    if (sim[a->gpus[g_array_index(a->s->src->xfers, plan_xfer, t->xfer_off + x).src]])
      return true;
  return false;
}

/* The dst GPU src GPU g's work stands on: its own, or in a dst built for
 * representatives its representative's (rep; NULL: its own). */
static uint32_t on_gpu(const plan_append *a, uint32_t g, const uint32_t *rep) {
  return rep ? rep[a->gpus[g]] : a->gpus[g];
}

/* The dst buffer standing for src buffer b's copy on src GPU g (a
 * buffer of every GPU becomes one per GPU: the dst plan has GPUs the
 * src plan does not), new at `slot`. */
static uint32_t buf_new(plan_append *a, uint32_t b, uint32_t g, uint32_t slot) {
  const plan_buf *sb = plan_buf_at(a->s->src, b);
  if (sb->gpu != PLAN_ALL) g = sb->gpu;
  uint32_t id = plan_buf_new(a->dst, a->gpus[g], sb->bytes, plan_buf_name(a->s->src, sb));
  plan_buf *db = (plan_buf *)plan_buf_at(a->dst, id);
  /* the host plan may own what src's caller would: its inputs made by the
   * host's own tasks (allocated where first used here), what it hands on
   * consumed by them (inputs and outputs alike freed after their last use
   * here, not kept) */
  db->input = sb->input && !(a->own & PLAN_APPEND_OWN_INPUTS);
  db->keep = sb->keep && !(a->own & PLAN_APPEND_OWN_OUTPUTS);
  a->bufs[slot] = id;
  return id;
}

void plan_append_range(plan_append *a, uint32_t from, uint32_t to) {
  plan_append_src *s = a->s;
  const plan *src = s->src;
  plan *dst = a->dst;
  g_assert(from <= to && to <= src->tasks->len);
  const src_range *sr = range_of(s, from, to);
  uint32_t range = ++a->n_ranges;
  /* dst built for representatives (plan_quotient): their part of src
   * alone, as plan_quotient_of takes a finished plan's */
  const uint8_t *sim = dst->q_sim;
  const uint32_t *rep = dst->q_rep;
  g_autofree uint8_t *started = g_new0(uint8_t, src->n_gpus); /* GPU's compute seen in this range */
  /* the host plan's compute each GPU had issued when the range begins */
  g_autofree int64_t *issued = g_new(int64_t, dst->n_gpus);
  plan_issued(dst, issued);
  for (uint32_t g = 0; g < dst->n_gpus; g++)
    if (a->pending[g]) g_array_set_size(a->pending[g], 0);
  for (uint32_t i = from; i < to; i++) {
    const plan_task *st = plan_task_at(src, i);
    if (sim && !kept(a, st, sim)) {
      a->id[i] = DROPPED;
      continue;
    }
    uint32_t id = dst->tasks->len;
    a->id[i] = id;
    plan_task c = *st;
    c.dep_off = c.n_dep = 0;
    if (st->kind == TASK_COMPUTE) c.gpu = a->gpus[st->gpu];
    if (st->host_at != PLAN_IN_PLACE) {
      g_assert(a->id[st->host_at] != UINT32_MAX);
      c.host_at = a->id[st->host_at];
      if (c.host_at == DROPPED) a->unfit = true, c.host_at = PLAN_IN_PLACE;
    }
    if (st->kind == TASK_COMM) {
      c.xfer_off = dst->xfers->len;
      c.n_xfer = 0;
      for (uint32_t x = 0; x < st->n_xfer; x++) {
        plan_xfer e = g_array_index(src->xfers, plan_xfer, st->xfer_off + x);
        e.src = a->gpus[e.src];
        e.dst = a->gpus[e.dst];
        uint32_t reaches = e.dst;
        /* a representative's transfer, received by the representative of
         * the GPU it reaches (plan.h plan_quotient) */
        if (sim && !sim[e.src]) continue;
        if (sim) e.dst = rep[e.dst];
        g_array_append_val(dst->xfers, e);
        if (dst->xfer_to) g_array_append_val(dst->xfer_to, reaches);
        c.n_xfer++;
      }
    }
    if (dst->record_segs && src->record_segs && st->n_qseg + st->n_kseg) {
      c.seg_off = dst->segs->len;
      g_array_append_vals(dst->segs, &g_array_index(src->segs, plan_seg, st->seg_off),
                          st->n_qseg + st->n_kseg);
    } else if (!dst->record_segs) {
      c.n_qseg = c.n_kseg = 0;
    }
    g_array_append_val(dst->tasks, c);
    for (uint32_t d = 0; d < st->n_dep; d++) {
      uint32_t before = a->id[src->deps[st->dep_off + d]];
      g_assert(before != UINT32_MAX);
      if (before == DROPPED) {
        /* a group waits for the representatives' images too (the plan is
         * invariant: plan_quotient.h); a kernel cannot */
        a->unfit |= st->kind == TASK_COMPUTE;
        continue;
      }
      if (plan_dep_is_overlap(st, d)) plan_overlap_dep(dst, before, id);
      else plan_dep(dst, before, id);
    }
    /* the seams: the host plan's streams before the range */
    if (st->kind == TASK_COMPUTE) {
      if (!started[st->gpu]) {
        started[st->gpu] = 1;
        int64_t last = issued[c.gpu];
        if (last >= 0) plan_dep(dst, (uint32_t)last, id);
      }
      dst->last_compute[c.gpu] = id;
    } else if (!sr->inner[i - from]) {
      /* a group with nothing before it in the range: after its GPUs'
       * compute issued in the host plan, each once */
      const uint32_t *touch = s->touch + s->touch_off[i];
      uint32_t k = s->touch_off[i + 1] - s->touch_off[i];
      for (uint32_t j = 0; j < k; j++) {
        int64_t last = issued[on_gpu(a, touch[j], rep)];
        bool seen = false;
        for (uint32_t j2 = 0; j2 < j; j2++) seen |= issued[on_gpu(a, touch[j2], rep)] == last;
        if (last >= 0 && !seen) plan_dep(dst, (uint32_t)last, id);
      }
    }
  }
  /* buffers: each use of a task of the range, on the copies it touches;
   * an input the host makes comes into being in the range that first
   * touches it (the host's op that makes it ran just before): every use
   * of that range writes it, whichever runs first */
  for (guint n = 0; n < sr->uses->len; n++) {
    const range_use *use = &g_array_index(sr->uses, range_use, n);
    if (use->repeat || a->id[use->task] == DROPPED) continue;
    const uint32_t *touch = s->touch + s->touch_off[use->task];
    uint32_t k = use->all ? s->touch_off[use->task + 1] - s->touch_off[use->task] : 1;
    uint32_t own_gpu = plan_buf_at(src, use->buf)->gpu;
    for (uint32_t j = 0; j < k; j++) {
      /* the copies on the GPUs simulated */
      if (sim && !sim[a->gpus[use->all ? touch[j] : own_gpu]]) continue;
      uint32_t slot = use->slot + (use->all ? touch[j] : 0), b = a->bufs[slot];
      if (b == UINT32_MAX) {
        b = buf_new(a, use->buf, use->all ? touch[j] : 0, slot);
        if (plan_buf_at(src, use->buf)->input && (a->own & PLAN_APPEND_OWN_INPUTS))
          a->born[slot] = range;
      }
      if (use->write || a->born[slot] == range) plan_buf_writes(dst, a->id[use->task], b);
      else plan_buf_reads(dst, a->id[use->task], b);
    }
  }
  /* the range's last tasks on each GPU they touch */
  for (guint n = 0; n < sr->sinks->len; n++) {
    const uint32_t *sink = &g_array_index(sr->sinks, uint32_t, 2 * n);
    uint32_t g = a->gpus[sink[1]];
    if (a->id[sink[0]] == DROPPED || (sim && !sim[g])) continue;
    if (!a->pending[g]) a->pending[g] = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    g_array_append_val(a->pending[g], a->id[sink[0]]);
  }
  if (src->note->len && !g_strstr_len(dst->note->str, -1, src->note->str))
    g_string_append_printf(dst->note, "%s%s", dst->note->len ? "; " : "", src->note->str);
}

uint32_t plan_append_buf(const plan_append *a, uint32_t buf, uint32_t g) {
  bool all = plan_buf_at(a->s->src, buf)->gpu == PLAN_ALL;
  return a->bufs[a->s->slot[buf] + (all ? g : 0)];
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

bool plan_append_unfit(const plan_append *a) { return a->unfit; }
