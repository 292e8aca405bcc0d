/* double-ring: LoongTrain's double-ring attention (Gu et al. 2024, arXiv
 * 2406.18485, sec. 4.2; InternEvo's implementation).
 *
 * The N GPUs form o windows of w consecutive GPUs (w: the inner ring's
 * size, --double-ring-inner, by default the GPUs of a node).  KV moves w
 * - 1 hops around the inner ring of its window, then one hop across to
 * the next window, o rounds in all: at step t = r·w + s GPU (b, p)
 * (window b, place p) holds the KV of GPU ((b - r) mod o, (p - s) mod w).
 * Inner hops stay inside a node; the hop across is taken by every GPU of
 * a window at once, each on its own NIC, where a single ring of N GPUs
 * crosses between nodes from one GPU per node at every step.  The hop
 * across goes from (b, p) to (b + 1, p + 1): the place that needs that KV
 * first in the next round.  Causal: the zigzag layout (chunks g and
 * 2N-1-g on GPU g), with Zigzag-Ring's blocks (ring.c).
 *
 * Not modelled: LoongTrain issues the hop across at the start of a round
 * so that it overlaps all w inner steps; here it overlaps the round's
 * last step only, as every hop of rotate.c overlaps its step (so the
 * time is an upper bound where the hop across is slower than a step);
 * and its head-parallel (Ulysses) dimension (usp-zigzag is Ulysses x
 * one ring). */
#include "rotate.h"

/* --double-ring-inner (model.double_ring_inner): the inner ring's size;
 * 0: the default (double_ring_inner). */
static const sched_opt opt_inner = {
    .key = "double_ring_inner",
    .in_model = true,
    .type = SCHED_OPT_COUNT,
    .max = 16384, /* scenario.h's SCENARIO_MAX_SP */
    .splits_sp = true,
    .metavar = "W",
    .help = "The inner ring's size (GPUs per window; it divides the SP degree); default: the "
            "largest that fits in a node"};

static const sched_opt *const opts[] = {&opt_inner, NULL};

typedef struct {
  const workload *w;
  uint32_t inner, outer;
  plan_pair *across; /* (b, p) to (b + 1, p + 1) */
  int64_t *across_pattern;
} dring;

/* The inner size: the option, or the largest divisor of N that fits in a
 * node. */
static uint32_t inner_size(const workload *w, const topology *t) {
  uint32_t given = sched_opt_num(w, &opt_inner);
  if (given) return given;
  uint32_t node = t->gpus_per_node ? t->gpus_per_node : t->n_gpus;
  for (uint32_t u = w->gpus < node ? w->gpus : node; u > 1; u--)
    if (w->gpus % u == 0) return u;
  return 1;
}

static uint32_t gpu_at(const dring *d, uint32_t b, uint32_t p) {
  return (b % d->outer) * d->inner + p % d->inner;
}

/* The GPU whose KV GPU g holds at `step`. */
static uint32_t source(const dring *d, uint32_t g, uint32_t step) {
  uint32_t b = g / d->inner, p = g % d->inner, r = step / d->inner, s = step % d->inner;
  return gpu_at(d, b + d->outer - r % d->outer, p + d->inner - s);
}

static void dring_xfers(const void *self, rotate_emit *e, uint32_t step) {
  const dring *d = self;
  const workload *w = d->w;
  if (w->gpus < 2) return;
  double bytes = workload_kv_bytes(w, (double)w->seq_len / w->gpus);
  /* the last hop of a round crosses to the next window */
  if ((step + 1) % d->inner == 0)
    rotate_xfer_pairs(e, d->across, w->gpus, d->across_pattern, bytes, 1);
  else rotate_xfer_all(e, bytes, 1);
}

static bool dring_alike(const void *self, uint32_t step) {
  (void)step;
  return !((const dring *)self)->w->causal;
}

/* Zigzag-Ring's blocks (ring.c), by the ring ranks of the two GPUs. */
static void dring_kernels(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step) {
  const dring *d = self;
  const workload *w = d->w;
  uint32_t src = source(d, gpu, step);
  plan_seg q[2], k[2];
  uint32_t nq = sched_layout(w->seq_len, gpu, w->gpus, true, q);
  uint32_t nk = sched_layout(w->seq_len, src, w->gpus, true, k);
  if (!w->causal) rotate_kernel(e, false, q, nq, k, nk);
  else if (src == gpu) rotate_kernel(e, true, q, nq, k, nk);
  else if (src < gpu) rotate_kernel(e, false, q, 2, k, 1);
  else rotate_kernel(e, false, &q[1], 1, k, 2);
}

static bool dring_check(const workload *w, const topology *t, GError **err) {
  uint32_t inner = inner_size(w, t);
  if (w->gpus % inner != 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                "double-ring: the inner ring's size %u does not divide the SP degree %u "
                "(double_ring_inner)", inner, w->gpus);
    return false;
  }
  return sched_check_divisible(w, 2, "double-ring cuts the sequence into 2N equal chunks", err);
}

static plan *dring_build(const workload *w, const topology *t, bool record_segs) {
  uint32_t n = w->gpus, inner = inner_size(w, t);
  int64_t pattern = -1;
  dring d = {w, inner, n / inner, g_new(plan_pair, n), &pattern};
  g_autofree plan_pair *around = g_new(plan_pair, n);
  for (uint32_t g = 0; g < n; g++) {
    uint32_t b = g / inner, p = g % inner;
    d.across[g] = (plan_pair){g, gpu_at(&d, b + 1, p + 1)};
    around[g] = (plan_pair){g, gpu_at(&d, b, p + 1)};
  }
  /* an inner ring of one: every hop is across */
  rotate_ops ops = {.n_steps = n, .xfers = dring_xfers, .kernels = dring_kernels,
                    .alike = dring_alike, .pairs = inner > 1 ? around : d.across,
                    .n_pairs = n < 2 ? 0 : n, .grads_in_place = true};
  plan *p = rotate_build(&ops, &d, w, record_segs);
  if (n / inner > 1)
    g_string_printf(p->note, "double-ring: inner ring %u x outer ring %u", inner, n / inner);
  else
    g_string_printf(p->note, "double-ring: one window of %u GPUs: Zigzag-Ring's ring", n);
  g_free(d.across);
  return p;
}

const sched_ops sched_double_ring = {
    .name = "double-ring",
    .summary = "Double-Ring (LoongTrain): KV around an inner ring in a node, then across",
    .check = dring_check,
    .build = dring_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = opts,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 (sched.h) */
    .size = {2.1, 0, 3, 3, 0, 2, 0, 3, 3, 8}};
