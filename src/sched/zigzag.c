/* zigzag: Zigzag-Ring attention (zigzag_ring_flash_attn).
 *
 * The sequence is cut into 2N chunks of c/2 tokens; GPU i holds chunks i
 * and 2N-1-i, so under a causal mask every GPU does the same work.  KV
 * moves around one ring as in Ring.  With the KV of GPU j at step t:
 * j = i: one causal block over both local chunks; j < i: all local queries
 * against the first half of j's KV (chunk j); j > i: the second half of the
 * queries (chunk 2N-1-i) against all of j's KV.  Every step past the first
 * is half a full block. */
#include "rotate.h"

typedef struct {
  const workload *w;
  uint64_t half; /* tokens per zigzag chunk: S / 2N */
} zigzag_self;

static void zigzag_chunks(const zigzag_self *z, uint32_t gpu, plan_seg out[2]) {
  uint32_t n = z->w->gpus;
  out[0] = (plan_seg){gpu * z->half, z->half};
  out[1] = (plan_seg){(2 * n - 1 - gpu) * z->half, z->half};
}

static void zigzag_xfers(const void *self, rotate_emit *e, uint32_t step) {
  const zigzag_self *z = self;
  (void)step;
  uint32_t n = z->w->gpus;
  for (uint32_t i = 0; i < n; i++)
    rotate_xfer(e, i, (i + 1) % n, workload_kv_bytes(z->w, 2.0 * (double)z->half), 1);
}

static void zigzag_kernels(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step) {
  const zigzag_self *z = self;
  uint32_t n = z->w->gpus, src = (gpu + n - step) % n;
  plan_seg q[2], k[2];
  zigzag_chunks(z, gpu, q);
  zigzag_chunks(z, src, k);
  if (!z->w->causal) rotate_kernel(e, false, q, 2, k, 2);
  else if (src == gpu) rotate_kernel(e, true, q, 2, k, 2);
  else if (src < gpu) rotate_kernel(e, false, q, 2, k, 1);
  else rotate_kernel(e, false, &q[1], 1, k, 2);
}

static bool zigzag_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return sched_check_divisible(w, 2, "zigzag cuts the sequence into 2N equal chunks", err);
}

static plan *zigzag_build(const workload *w, const topology *t, bool record_segs) {
  zigzag_self self = {w, w->seq_len / (2 * (uint64_t)w->gpus)};
  rotate_ops ops = {w->gpus, zigzag_xfers, zigzag_kernels};
  return rotate_build(&ops, &self, w, t, record_segs);
}

const sched_ops sched_zigzag = {
    "zigzag", "Zigzag-Ring: 2N chunks, GPU i holds i and 2N-1-i; balanced causal",
    zigzag_check, zigzag_build};
