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

/* The most a Ulysses degree can be: the most GPUs a sequence may share
 * (scenario.h's SCENARIO_MAX_SP). */
const sched_opt usp_opt_ulysses = {
    .key = "usp_ulysses",
    .in_model = true,
    .type = SCHED_OPT_COUNT,
    .max = 16384,
    .splits_sp = true,
    .metavar = "N",
    .help = "USP's Ulysses degree (all-to-all groups inside it, ring across); default: the "
            "largest that fits in a node and divides the heads"};

static const sched_opt *const usp_opts[] = {&usp_opt_ulysses, &ulysses_opt_fused, NULL};

static uint32_t degree(const workload *w, const topology *t) {
  uint32_t u = sched_opt_num(w, &usp_opt_ulysses);
  return u ? u : ulysses_default_degree(w, t);
}

/* What the forward saves for the backward, and where the pass began. */
struct usp_mem {
  ulysses_bufs saved;
  uint32_t first_task;
};

/* yunchang's attention function saves its head-scattered Q, K, V (and
 * the ring's output and log-sum-exp) for the backward, as DeepSpeed's
 * does (ulysses.c): the forward keeps the scattered tensors; the backward
 * holds them (a backward alone: as one input) until the ring's backward
 * has returned, and frees them then (read by the gathers, which follow).
 * With u = 1 there is no scatter, but ring_flash_attn's autograd function
 * makes K and V contiguous (`k.contiguous()` of the packed KV's views)
 * and saves those: declared by the epilogue on the pass's first and last
 * kernels. */
static int64_t prologue(const void *self, plan *p, bool backward, int64_t after,
                        const sched_io *io) {
  const ring_geom *g = self;
  const workload *w = g->w;
  struct usp_mem *m = g->mem;
  g->held->n = 0;
  m->first_task = p->tasks->len;
  int64_t r = ulysses_scatter_heads(p, w, g->u, backward, 0, after, io, g->held);
  if (!backward && g->u >= 2) {
    m->saved = *g->held;
    for (uint32_t i = 0; i < m->saved.n; i++) sched_io_save(p, w, m->saved.id[i]);
    return r;
  }
  if (!backward) return r;
  if (m->saved.n == 0) {
    double rows = (double)w->batch * w->seq_len * w->heads / w->gpus;
    double bytes = g->u < 2 ? g->kv_bytes
                            : 2 * rows * w->head_dim * w->elem_bytes + rows * 4.0 + g->kv_bytes;
    m->saved.id[m->saved.n++] = plan_buf_saved_input(
        p, PLAN_ALL, bytes,
        g->u < 2 ? "k, v made contiguous (saved by forward)"
                 : "saved by forward: q, k, v, out, lse on H/u heads");
  }
  for (uint32_t i = 0; g->u >= 2 && i < m->saved.n && g->held->n < G_N_ELEMENTS(g->held->id); i++)
    g->held->id[g->held->n++] = m->saved.id[i];
  return r;
}

/* The gather sends the ring's result (rotate_buf's accumulators, converted
 * into the pass's output) and keeps the scattered tensors until then. */
static int64_t epilogue(const void *self, plan *p, bool backward, int64_t last) {
  const ring_geom *g = self;
  struct usp_mem *m = g->mem;
  const workload *w = g->w;
  ulysses_bufs src = {{0}, 0};
  if (!backward && g->u >= 2) {
    /* the ring's bf16 output and log-sum-exp on H/u heads, made as its
     * last kernel ends (`out.to(q.dtype)`), gathered back, and saved for
     * the backward (calibrate.py USP.run: self.saved holds o, lse) */
    double rows = (double)w->batch * w->seq_len * w->heads / w->gpus;
    uint32_t ro = plan_buf_new(p, PLAN_ALL, rows * (w->head_dim * w->elem_bytes + 4.0),
                               "ring out, lse on H/u heads");
    int64_t done = -1;
    for (uint32_t gpu = 0; gpu < p->n_gpus; gpu++) {
      int64_t t = p->last_compute[gpu];
      if (t < 0 || t == done) continue;
      done = t;
      plan_buf_writes_late(p, (uint32_t)t, ro);
    }
    sched_io_save(p, w, ro);
    src.id[src.n++] = ro;
    if (m->saved.n < G_N_ELEMENTS(m->saved.id)) m->saved.id[m->saved.n++] = ro;
  }
  int64_t out = ulysses_gather_heads(p, w, g->u, backward, g->ranks, &src, g->held);
  if (g->u >= 2) return out >= 0 ? out : last;
  int64_t done = -1;
  if (!backward) { /* u = 1: the contiguous K, V, made before the first kernel */
    uint32_t kv = plan_buf_new(p, PLAN_ALL, g->kv_bytes, "k, v made contiguous (ring_flash_attn)");
    g_autofree bool *seen = g_new0(bool, p->n_gpus);
    for (uint32_t t = m->first_task; t < p->tasks->len; t++) {
      const plan_task *k = plan_task_at(p, t);
      if (k->kind != TASK_COMPUTE) continue;
      if (k->gpu == PLAN_ALL ? seen[0] : seen[k->gpu]) continue;
      plan_buf_writes(p, t, kv);
      if (k->gpu == PLAN_ALL) break;
      seen[k->gpu] = true;
    }
    sched_io_save(p, g->w, kv);
    m->saved.n = 0;
    m->saved.id[m->saved.n++] = kv;
  }
  /* ... and referenced to the end of every GPU's last compute of the pass
   * (forward: kept for the backward; backward: freed as it returns, after
   * the last add) */
  for (uint32_t gpu = 0; gpu < p->n_gpus; gpu++) {
    int64_t t = p->last_compute[gpu];
    if (t < 0 || t == done) continue;
    done = t;
    for (uint32_t i = 0; i < m->saved.n; i++) plan_buf_reads_late(p, (uint32_t)t, m->saved.id[i]);
  }
  return last;
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
  ulysses_bufs held = {{0}, 0};
  struct usp_mem mem = {{{0}, 0}, 0};
  g.held = &held;
  g.mem = &mem;
  rotate_ops ops = {.prologue = prologue, .epilogue = epilogue};
  plan *p = ring_geom_build(&g, ops, record_segs);
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
    .name = "usp",
    .summary = "USP: Ulysses all-to-all inside a node x Ring across",
    .check = usp_check,
    .build = usp_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = usp_opts,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 (sched.h) */
    .size = {0.5, 0.5, 12, 12, 0, 3.5, 0, 1.2, 1.2, 20}};
const sched_ops sched_usp_zigzag = {
    .name = "usp-zigzag",
    .summary = "USP with Zigzag-Ring as its ring part (balanced causal)",
    .check = uspz_check,
    .build = uspz_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = usp_opts,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 (sched.h) */
    .size = {0.5, 0.5, 12, 12, 0, 3.5, 0, 1.2, 1.2, 20}};
