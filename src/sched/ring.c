/* ring: RingAttention with contiguous chunks.
 *
 * GPU i holds tokens [i·c, (i+1)·c).  At step t it attends its queries to
 * the KV chunk of GPU (i - t) mod N while passing the chunk it holds to
 * GPU i+1 (Li et al. 2021; Liu et al. 2023; ring_flash_attn).  Causal:
 * the own chunk is a causal block, earlier chunks are full blocks, later
 * chunks are skipped, as ring_flash_attn does: GPU i computes i+1 blocks,
 * so the last GPU does almost N times the first one's work. */
#include "rotate.h"

typedef struct {
  const workload *w;
  uint64_t chunk; /* tokens per GPU */
} ring_self;

static void ring_xfers(const void *self, rotate_emit *e, uint32_t step) {
  const ring_self *r = self;
  (void)step;
  uint32_t n = r->w->gpus;
  for (uint32_t i = 0; i < n; i++)
    rotate_xfer(e, i, (i + 1) % n, workload_kv_bytes(r->w, (double)r->chunk), 1);
}

static void ring_kernels(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step) {
  const ring_self *r = self;
  uint32_t n = r->w->gpus, src = (gpu + n - step) % n;
  plan_seg q = {gpu * r->chunk, r->chunk}, k = {src * r->chunk, r->chunk};
  if (!r->w->causal) rotate_kernel(e, false, &q, 1, &k, 1);
  else if (src == gpu) rotate_kernel(e, true, &q, 1, &k, 1);
  else if (src < gpu) rotate_kernel(e, false, &q, 1, &k, 1);
}

static bool ring_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return sched_check_divisible(w, 1, "ring gives every GPU an equal contiguous chunk", err);
}

static plan *ring_build(const workload *w, const topology *t, bool record_segs) {
  ring_self self = {w, w->seq_len / w->gpus};
  rotate_ops ops = {w->gpus, ring_xfers, ring_kernels};
  return rotate_build(&ops, &self, w, t, record_segs);
}

const sched_ops sched_ring = {
    "ring", "RingAttention: contiguous chunks, KV passed around one ring", ring_check,
    ring_build};
