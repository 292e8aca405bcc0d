/* double-ring: LoongTrain's double-ring attention (Gu et al. 2024, arXiv
 * 2406.18485, sec. 4.2; InternEvo's implementation).
 *
 * The N GPUs form o windows of w consecutive GPUs (w: the inner ring's
 * size, --double-ring-inner, by default the GPUs of a node; with a
 * head-parallel degree, below, of w context ranks), run as InternEvo runs
 * them (internlm/model/ops/ring_flash_attn/zigzag_ring_flash_attn_with_
 * sliding_window.py, zigzag_double_ring_flash_attn_forward/_backward; the
 * program measured in calibration/h100x4-sp is calibrate.py DoubleRing):
 * o rounds of w steps; at step t = r·w + s GPU (b, p) (window b, place p)
 * holds the KV of GPU ((b - r) mod o, (p - s) mod w).
 * Forward: as a round starts (but the last), each GPU sends the KV it
 * holds then across to the same place of the next window, (b, p) to
 * (b + 1, p), on the inter-window communicator, and waits for it only as
 * the next round starts: the hop across runs beside the whole round
 * (rotate_ops.ahead).  Each step but a round's last sends the held KV one
 * hop around the window (intra-window communicator), waited for after the
 * step's kernels.  Per GPU: (w - 1)·o hops around, o - 1 across; the hops
 * across are taken by every GPU of a window at once, each on its own NIC,
 * where a single ring of N GPUs crosses between nodes from one GPU per
 * node at every step.
 * Backward: the KV moves as in forward; the dK/dV of the KV held follows
 * it one hop around after every step, w a round (the last brings it to
 * the GPU that started the round with that KV), then, once that hop is
 * done (the next round's kernels wait for it too), one across to the same
 * place of the next window, after every round, the last one home
 * (rotate_ops.grads_then_ahead): o·(w + 1) hops per GPU, not N.  The first
 * round's sums are float32 (the gradient dtype) and cast to the inputs'
 * dtype as it ends; every later hop carries bf16 (grads_cast_step).
 * Causal: the zigzag layout (chunks g and 2N-1-g on GPU g), with
 * Zigzag-Ring's blocks (ring.c).  An inner ring of one (or one window) is
 * Zigzag-Ring's ring: each hop across one step, dK/dV in the gradient
 * dtype.
 *
 * Head parallelism (LoongTrain's 2D-Attention, sec. 4.1: head-parallel
 * degree x context-parallel degree; InternEvo's sequence_2D head_size x
 * context_size): --double-ring-ulysses u splits the N GPUs into u-GPU
 * Ulysses groups and a double ring over the r = N/u context ranks, as USP
 * puts a ring around Ulysses (usp.c; the all-to-alls and their memory are
 * USP's: ulysses.c, usp_mem.c).  GPU g is context rank g / u on the query
 * heads of Ulysses rank g % u: InternEvo's head-first placement
 * (device_placement_strategy.head_first, its default: the head groups of
 * consecutive ranks, made first), so the all-to-alls stay inside a node
 * and a window of w context ranks spans w·u consecutive GPUs; the default
 * inner size is then the largest divisor of r whose window (w·u GPUs)
 * fits in a node.  --double-ring-context-first takes InternEvo's other
 * placement (head_first False): context rank a of head group h on GPU
 * h·r + a, so the windows are consecutive GPUs (a window fits in a node)
 * and each all-to-all spans GPUs r apart; the plan is built head-first and
 * its GPUs moved (plan_relabel).
 *
 * Not modelled: the bf16 adds of later rounds' block gradients (compute
 * prices no dK/dV add of softmax attention; measured 1-4% faster than
 * zigzag's float32 ones, docs/validation.md), and dQ's cast with the
 * dK/dV's (dQ stays float32 in the plan's buffers). */
#include "usp_mem.h"

/* --double-ring-inner (model.double_ring_inner): the inner ring's size;
 * 0: the default (inner_size). */
static const sched_opt opt_inner = {
    .key = "double_ring_inner",
    .in_model = true,
    .type = SCHED_OPT_COUNT,
    .max = 16384, /* scenario.h's SCENARIO_MAX_SP */
    .splits_sp = true,
    .metavar = "W",
    .help = "The inner ring's size (context ranks per window; it divides the SP degree over "
            "the head-parallel degree); default: the largest whose window fits in a node"};

/* --double-ring-ulysses (model.double_ring_ulysses): the head-parallel
 * degree; 0: none (1). */
static const sched_opt opt_ulysses = {
    .key = "double_ring_ulysses",
    .in_model = true,
    .type = SCHED_OPT_COUNT,
    .max = 16384,
    .splits_heads = true,
    .divides_sp_first = true,
    .metavar = "U",
    .help = "The head-parallel (Ulysses) degree of LoongTrain's 2D-Attention: all-to-all "
            "groups of U consecutive GPUs, the double ring over the SP degree / U context "
            "ranks; it divides the SP degree and the heads; default: 1 (none)"};

/* --double-ring-context-first (model.double_ring_context_first). */
static const sched_opt opt_context_first = {
    .key = "double_ring_context_first",
    .in_model = true,
    .type = SCHED_OPT_FLAG,
    .help = "With --double-ring-ulysses: the context ranks on consecutive GPUs and each "
            "head-parallel group across them (InternEvo's context-first placement); default: "
            "head-first"};

static const sched_opt *const opts[] = {&opt_inner, &opt_ulysses, &opt_context_first,
                                        &ulysses_opt_fused, NULL};

typedef struct {
  ring_geom geom; /* first: usp_mem's prologue and epilogue read it as self */
  uint32_t inner, outer; /* context ranks per window, windows */
  /* the hop across: GPU (b, p) to (b + 1, p), on the same heads */
  plan_pair *across;
  int64_t *across_pattern;
} dring;

static uint32_t ulysses_degree(const workload *w) {
  uint32_t u = sched_opt_num(w, &opt_ulysses);
  return u ? u : 1;
}

static bool context_first(const workload *w) {
  return ulysses_degree(w) > 1 && sched_opt_num(w, &opt_context_first);
}

/* The inner size: the option, or the largest divisor of the r context
 * ranks whose window (head-first: w·u GPUs; context-first: w) fits in a
 * node. */
static uint32_t inner_size(const workload *w, const topology *t) {
  uint32_t given = sched_opt_num(w, &opt_inner);
  if (given) return given;
  uint32_t u = ulysses_degree(w), r = w->gpus / u;
  uint32_t node = (t->gpus_per_node ? t->gpus_per_node : t->n_gpus) / (context_first(w) ? 1 : u);
  for (uint32_t v = r < node ? r : node; v > 1; v--)
    if (r % v == 0) return v;
  return 1;
}

/* The context rank at window b, place p. */
static uint32_t rank_at(const dring *d, uint32_t b, uint32_t p) {
  return (b % d->outer) * d->inner + p % d->inner;
}

/* The context rank whose KV context rank a holds at `step`. */
static uint32_t source(const dring *d, uint32_t a, uint32_t step) {
  uint32_t b = a / d->inner, p = a % d->inner, r = step / d->inner, s = step % d->inner;
  return rank_at(d, b + d->outer - r % d->outer, p + d->inner - s);
}

/* The step chain: one hop around the window (an inner ring of one: the
 * hop across).  The KV makes none after a round's last step (it goes
 * across ahead: dring_ahead); the dK/dV makes w a round, then one across
 * (dring_grads_across). */
static void dring_xfers(const void *self, rotate_emit *e, uint32_t step) {
  const dring *d = self;
  (void)step;
  if (d->geom.ranks < 2) return;
  rotate_xfer_all(e, d->geom.kv_bytes, 1);
}

/* InternEvo sends the KV held at a round's start across to the same place
 * of the next window as the round starts, on the inter-window
 * communicator, and waits for it as the next round starts: it runs beside
 * all w steps of the round.  With an inner ring of one every hop is
 * across, and the step chain's. */
static uint32_t dring_ahead(const void *self, uint32_t step) {
  const dring *d = self;
  if (d->inner < 2 || step % d->inner != 0 || step / d->inner + 1 >= d->outer) return 0;
  return d->inner;
}

/* Backward: after a round's w hops around, the dK/dV goes across to the
 * same place of the next window (InternEvo's dK/dV hop across, after
 * every round, the last one home). */
static bool dring_grads_across(const void *self, uint32_t step) {
  const dring *d = self;
  return d->inner > 1 && d->outer > 1 && (step + 1) % d->inner == 0;
}

static void dring_ahead_xfers(const void *self, rotate_emit *e, uint32_t step) {
  const dring *d = self;
  (void)step;
  rotate_xfer_pairs(e, d->across, d->geom.w->gpus, d->across_pattern, d->geom.kv_bytes, 1);
}

static bool dring_alike(const void *self, uint32_t step) {
  (void)step;
  return !((const dring *)self)->geom.w->causal;
}

/* Zigzag-Ring's blocks (ring.c), by the context ranks of the two GPUs, on
 * the GPU's heads. */
static void dring_kernels(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step) {
  const dring *d = self;
  const workload *w = d->geom.w;
  uint32_t u = d->geom.u, r = d->geom.ranks, a = gpu / u, src = source(d, a, step);
  uint32_t heads = w->heads / u, h0 = (gpu % u) * heads;
  plan_seg q[2], k[2];
  uint32_t nq = sched_layout(w->seq_len, a, r, true, q);
  uint32_t nk = sched_layout(w->seq_len, src, r, true, k);
  if (!w->causal) rotate_kernel_heads(e, h0, heads, false, q, nq, k, nk);
  else if (src == a) rotate_kernel_heads(e, h0, heads, true, q, nq, k, nk);
  else if (src < a) rotate_kernel_heads(e, h0, heads, false, q, 2, k, 1);
  else rotate_kernel_heads(e, h0, heads, false, &q[1], 1, k, 2);
}

static bool dring_check(const workload *w, const topology *t, GError **err) {
  uint32_t u = ulysses_degree(w);
  if (w->gpus % u != 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                "double-ring: the head-parallel degree %u does not divide the SP degree %u "
                "(double_ring_ulysses)", u, w->gpus);
    return false;
  }
  if (u > 1 && !ulysses_check_heads(w, u, "double-ring", err)) return false;
  uint32_t inner = inner_size(w, t), r = w->gpus / u;
  if (r % inner != 0) {
    if (u > 1)
      g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                  "double-ring: the inner ring's size %u does not divide the %u context ranks "
                  "(SP degree %u over head-parallel degree %u; double_ring_inner)", inner, r,
                  w->gpus, u);
    else
      g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                  "double-ring: the inner ring's size %u does not divide the SP degree %u "
                  "(double_ring_inner)", inner, w->gpus);
    return false;
  }
  return sched_check_divisible(w, 2, "double-ring cuts the sequence into 2N equal chunks", err);
}

static plan *dring_build(const workload *w, const topology *t, bool record_segs) {
  uint32_t n = w->gpus, u = ulysses_degree(w), r = n / u, inner = inner_size(w, t);
  int64_t pattern = -1;
  ulysses_bufs held = {{0}, 0};
  struct usp_mem mem = {{{0}, 0}, 0};
  dring d = {ring_geom_make(w, u, true), inner, r / inner, g_new(plan_pair, n), &pattern};
  d.geom.held = &held;
  d.geom.mem = &mem;
  g_autofree plan_pair *around = g_new(plan_pair, n);
  for (uint32_t g = 0; g < n; g++) {
    uint32_t a = g / u, h = g % u, b = a / inner, p = a % inner;
    d.across[g] = (plan_pair){g, rank_at(&d, b + 1, p) * u + h};
    around[g] = (plan_pair){g, rank_at(&d, b, p + 1) * u + h};
  }
  /* an inner ring of one: every hop is across */
  rotate_ops ops = {.n_steps = r, .xfers = dring_xfers, .kernels = dring_kernels,
                    .ahead = dring_ahead, .ahead_xfers = dring_ahead_xfers,
                    .grads_then_ahead = dring_grads_across,
                    /* InternEvo casts the first window's sums to bf16 */
                    .grads_cast_step = inner > 1 && r > inner ? inner : 0,
                    .alike = dring_alike, .pairs = inner > 1 ? around : d.across,
                    .n_pairs = r < 2 ? 0 : n, .grads_in_place = true,
                    /* dg_in, not g_in (calibrate.py DoubleRing) */
                    .grads_own_comm = true};
  if (u > 1) {
    ops.prologue = usp_mem_prologue;
    ops.epilogue = usp_mem_epilogue;
    ops.kv_bytes = d.geom.kv_bytes;
  }
  plan *p = rotate_build(&ops, &d, w, record_segs);
  if (context_first(w)) { /* head-first's GPU h + u·a is context-first's h·r + a */
    plan *q = plan_expand(p);
    plan_free(p);
    p = q;
    g_autofree uint32_t *to = g_new(uint32_t, n);
    for (uint32_t g = 0; g < n; g++) to[g] = (g % u) * r + g / u;
    plan_relabel(p, to);
  }
  if (u > 1)
    g_string_printf(p->note, "double-ring: Ulysses degree %u x inner ring %u x outer ring %u%s",
                    u, inner, r / inner, context_first(w) ? " (context-first)" : "");
  else if (r / inner > 1)
    g_string_printf(p->note, "double-ring: inner ring %u x outer ring %u", inner, r / inner);
  else
    g_string_printf(p->note, "double-ring: one window of %u GPUs: Zigzag-Ring's ring", n);
  g_free(d.across);
  return p;
}

/* With a head-parallel degree, every Ulysses group's GPUs turned by one
 * (the next Ulysses rank of the same context rank; with a block, the next
 * of its block of the group), as USP's (usp.c turn): they hold the same
 * tokens, run the same blocks on their own heads, hop around and across
 * to the same Ulysses rank of other context ranks, and every pair of a
 * group exchanges alike in the all-to-alls (test_usp:
 * t_double_ring_turn).  Context-first, group h's rank a is GPU h r + a:
 * the turn moves a GPU r on.  A full mask is lockstep already. */
static bool dring_turn(const workload *w, const topology *t, uint32_t block, uint32_t *pi) {
  uint32_t u = ulysses_degree(w), k = block ? block : u, r = w->gpus / u;
  (void)t;
  if (!w->causal || u < 2 || w->gpus % u || k < 2 || u % k) return false;
  for (uint32_t g = 0; g < w->gpus; g++) {
    uint32_t h = context_first(w) ? g / r : g % u, a = context_first(w) ? g % r : g / u;
    uint32_t next = h - h % k + (h % k + 1) % k;
    pi[g] = context_first(w) ? next * r + a : a * u + next;
  }
  return true;
}

const sched_ops sched_double_ring = {
    .name = "double-ring",
    .summary = "Double-Ring (LoongTrain): KV around an inner ring in a node, then across",
    .check = dring_check,
    .build = dring_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = opts,
    .turn = dring_turn,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h); backward's dK/dV
     * make up to P + P/2 hops (inner rings of 2): x2 2.5 */
    .size = {2.1, 0, 3, 3.5, 0, 2.5, 0, 4.2, 4.2, 8, 0, 0, 0}};
