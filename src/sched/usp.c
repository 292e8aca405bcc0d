/* usp: Unified Sequence Parallelism (Fang and Zhao 2024, arXiv 2405.07719;
 * feifeibear/long-context-attention's LongContextAttention).
 *
 * The n GPUs form u x r: Ulysses groups of u consecutive GPUs (inside a
 * node, where the all-to-alls are cheap) and r = n / u ring groups across
 * them (GPU g is ring rank g / u; ring neighbours are u apart, so on
 * several nodes the ring crosses the NICs).  A pass is the Ulysses head
 * scatter inside each group, then Ring (usp) or Zigzag-Ring (usp-zigzag)
 * attention over the r ring ranks on the group's heads, then the head
 * gather.  After the scatter a GPU holds its Ulysses group's u·c tokens:
 * the ring chunk.  The degree u is `--usp-ulysses` (scenario key
 * `usp_ulysses`), by default the largest that fits in a node and divides
 * the heads (ulysses_default_degree). */
#include "ring.h"
#include "ulysses.h"

static uint32_t degree(const workload *w, const topology *t) {
  return w->ulysses ? w->ulysses : ulysses_default_degree(w, t);
}

/* yunchang's attention function saves its head-scattered Q, K, V (and
 * the ring's output and log-sum-exp) for the backward, as DeepSpeed's
 * does (ulysses.c): the forward keeps the scattered tensors; the backward
 * holds them (a backward alone: as one input) until the ring's backward
 * has returned, and frees them then (read by the gathers, which follow). */
static int64_t prologue(const void *self, plan *p, bool backward, int64_t after,
                        const sched_io *io) {
  const ring_geom *g = self;
  const workload *w = g->w;
  g->held->n = 0;
  int64_t r = ulysses_scatter_heads(p, w, g->u, backward, 0, after, io, g->held);
  if (g->u < 2) return r;
  if (!backward) {
    *g->saved = *g->held;
    for (uint32_t i = 0; i < g->saved->n; i++) sched_io_save(p, w, g->saved->id[i]);
    return r;
  }
  if (g->saved->n == 0) {
    double rows = (double)w->batch * w->seq_len * w->heads / w->gpus;
    double bytes = 2 * rows * w->head_dim * w->elem_bytes + rows * 4.0 + g->kv_bytes;
    g->saved->id[g->saved->n++] =
        plan_buf_saved_input(p, PLAN_ALL, bytes, "saved by forward: q, k, v, out, lse on H/u heads");
  }
  for (uint32_t i = 0; i < g->saved->n && g->held->n < G_N_ELEMENTS(g->held->id); i++)
    g->held->id[g->held->n++] = g->saved->id[i];
  return r;
}

/* The gather sends the ring's result (rotate_buf's accumulators, converted
 * into the pass's output) and keeps the scattered tensors until then. */
static int64_t epilogue(const void *self, plan *p, bool backward, int64_t last) {
  const ring_geom *g = self;
  ulysses_bufs none = {{0}, 0};
  int64_t out = ulysses_gather_heads(p, g->w, g->u, backward, g->ranks, &none, g->held);
  return out >= 0 ? out : last;
}

static bool check(const workload *w, const topology *t, bool zigzag, const char *who,
                  GError **err) {
  uint32_t u = degree(w, t);
  if (u == 0 || w->gpus % u != 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                "%s: the Ulysses degree %u does not divide the SP degree %u (usp_ulysses)", who,
                u, w->gpus);
    return false;
  }
  if (!ulysses_check_heads(w, u, who, err)) return false;
  return sched_check_divisible(w, zigzag ? 2 : 1,
                               zigzag ? "usp-zigzag cuts each ring chunk into two halves per GPU"
                                      : "usp gives every GPU an equal contiguous piece", err);
}

static plan *build(const workload *w, const topology *t, bool record_segs, bool zigzag) {
  uint32_t u = degree(w, t);
  ring_geom g = ring_geom_make(w, u, zigzag);
  ulysses_bufs held = {{0}, 0}, saved = {{0}, 0};
  g.held = &held;
  g.saved = &saved;
  rotate_ops ops = {.prologue = prologue, .epilogue = epilogue};
  plan *p = ring_geom_build(&g, ops, t, record_segs);
  g_string_printf(p->note, "%s: Ulysses degree %u x ring degree %u", zigzag ? "usp-zigzag" : "usp",
                  u, g.ranks);
  return p;
}

static bool usp_check(const workload *w, const topology *t, GError **err) {
  return check(w, t, false, "usp", err);
}
static bool uspz_check(const workload *w, const topology *t, GError **err) {
  return check(w, t, true, "usp-zigzag", err);
}
static plan *usp_build(const workload *w, const topology *t, bool record_segs) {
  return build(w, t, record_segs, false);
}
static plan *uspz_build(const workload *w, const topology *t, bool record_segs) {
  return build(w, t, record_segs, true);
}

const sched_ops sched_usp = {
    "usp", "USP: Ulysses all-to-all inside a node x Ring across (--usp-ulysses)", usp_check,
    usp_build, SCHED_RUNS(ATTN_SOFTMAX)};
const sched_ops sched_usp_zigzag = {
    "usp-zigzag", "USP with Zigzag-Ring as its ring part (balanced causal)", uspz_check,
    uspz_build, SCHED_RUNS(ATTN_SOFTMAX)};
