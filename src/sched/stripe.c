/* stripe: Striped Attention (Brandon et al. 2023, arXiv 2311.09431;
 * ring_flash_attn's stripe_flash_attn_func).
 *
 * Token t lives on GPU t mod N (the caller permutes the sequence so), so
 * GPU i holds tokens i, i+N, i+2N, ...: c = S/N tokens at stride N.  KV
 * moves around one ring exactly as in Ring (send_recv_kv, then wait).  At
 * step s GPU i holds the KV of GPU j = (i - s) mod N; under a causal mask
 * key r·N + j may be seen by query p·N + i when r <= p (j <= i) or r < p
 * (j > i), so every step's block is a causal c x c kernel: j <= i the
 * whole triangle with its diagonal (flash attention's causal call on all
 * of q, k, v), j > i the triangle without it (the call on q[1:] against
 * k[:-1], v[:-1]: c - 1 rows).  Every GPU then does nearly the same work
 * at every step, where Ring's causal steps leave the early GPUs idle.
 * Backward: KV and dK/dV around the ring as Ring's; stripe_flash_attn_backward
 * receives the dK/dV into the buffer it sent last step and adds a shifted
 * block (step > GPU) into the arrived one in place, making a new float32
 * sum only at the other steps (rotate_ops.grads_stripe).
 * stripe_flash_attn_func asserts a causal mask; under a full one the
 * layout makes no difference and the blocks are Ring's full blocks.
 *
 * FLOPs: every block is priced as the flash attention call it is, a
 * causal c x c (or (c-1) x (c-1)) call, whose kernel area counts its own
 * diagonal half (compute_op_flops).  The model's FLOPs count the mask's
 * diagonal half, and only GPU i's block with its own keys (step 0) lies on
 * it: a block between two GPUs holds c(c+1)/2 (j < i) or c(c-1)/2 (j > i)
 * pairs of distinct tokens, all of them model work (plan_op.diag_pairs 0).
 * Counted as their calls' areas they would leave out N(N-1)(2c-1)/4 pairs
 * of the mask's S^2/2, about 1/c of it.
 *
 * Kernels record their tokens one by one (a segment of one token each):
 * plan segments are contiguous, the stripe's are not.  A kernel's pairs
 * are counted over every pair of its segments, so that is done up to
 * STRIPE_MAX_RECORDED tokens in the sequence (the coverage tests' sizes);
 * past it, and in a plan that records no segments, the kernel gets the
 * aligned block, which has the same lengths and pairs, and is told which
 * of them lie on the sequence's diagonal (rotate_kernel_diag_pairs). */
#define STRIPE_MAX_RECORDED 8192u
#include "rotate.h"

typedef struct {
  const workload *w;
  uint64_t c; /* tokens per GPU */
} stripe;

static void stripe_xfers(const void *self, rotate_emit *e, uint32_t step) {
  (void)step;
  const stripe *s = self;
  if (s->w->gpus > 1) rotate_xfer_all(e, workload_kv_bytes(s->w, (double)s->c), 1);
}

/* Under a full mask every GPU's block is c x c. */
static bool stripe_alike(const void *self, uint32_t step) {
  (void)step;
  return !((const stripe *)self)->w->causal;
}

/* GPU g's tokens from its `first` to its `first + n - 1`-th, one segment
 * each. */
static plan_seg *tokens(const stripe *s, uint32_t g, uint64_t first, uint64_t n) {
  plan_seg *out = g_new(plan_seg, n);
  for (uint64_t p = 0; p < n; p++) out[p] = (plan_seg){(first + p) * s->w->gpus + g, 1};
  return out;
}

static void stripe_kernels(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step) {
  const stripe *s = self;
  uint32_t n = s->w->gpus, src = (gpu + n - step) % n;
  /* j > i under a causal mask: the diagonal is masked too (q[1:], k[:-1]) */
  bool shifted = s->w->causal && src > gpu;
  uint64_t len = s->c - (shifted ? 1 : 0);
  if (len == 0) return;
  if (!rotate_records_segs(e) || s->w->seq_len > STRIPE_MAX_RECORDED) {
    /* a causal c x c (or (c-1) x (c-1)) block over aligned keys prices
     * the same pairs as the stripe's */
    plan_seg q = {(uint64_t)gpu * s->c, len}, k = q;
    rotate_kernel(e, s->w->causal, &q, 1, &k, 1);
    if (s->w->causal) rotate_kernel_diag_pairs(e, src == gpu ? (double)len : 0);
    return;
  }
  g_autofree plan_seg *q = tokens(s, gpu, shifted ? 1 : 0, len);
  g_autofree plan_seg *k = tokens(s, src, 0, len);
  rotate_kernel(e, s->w->causal, q, (uint32_t)len, k, (uint32_t)len);
}

static bool stripe_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return sched_check_divisible(w, 1, "stripe gives every GPU every N-th token", err);
}

static plan *stripe_build(const workload *w, const topology *t, bool record_segs) {
  (void)t;
  stripe s = {w, w->seq_len / w->gpus};
  uint32_t n = w->gpus;
  g_autofree plan_pair *pairs = g_new(plan_pair, n);
  for (uint32_t i = 0; i < n; i++) pairs[i] = (plan_pair){i, (i + 1) % n};
  rotate_ops ops = {.n_steps = n, .xfers = stripe_xfers, .kernels = stripe_kernels,
                    .alike = stripe_alike, .pairs = pairs, .n_pairs = n < 2 ? 0 : n,
                    .grads_stripe = true};
  return rotate_build(&ops, &s, w, record_segs);
}

const sched_ops sched_stripe = {
    .name = "stripe",
    .summary = "Striped Attention: token t on GPU t mod N, KV around one ring; balanced causal",
    .check = stripe_check,
    .build = stripe_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {2.1, 0, 3, 3.5, 0, 2, 0, 4, 4, 8, 0, 0, 0}};
