/* allgather: all-gather context parallelism (Llama 3, arXiv 2407.21783,
 * sec. 3.3.2; the standard-attention half of LASP-2H, arXiv 2502.07563).
 *
 * Forward: one all-gather of every GPU's K and V (packed in one call),
 * then each GPU attends its local queries to the whole KV it needs.  Full
 * mask: GPU i holds a contiguous chunk and runs one kernel against all S
 * keys.  Causal: the zigzag layout (chunks i and 2N-1-i, so every GPU has
 * the same work, as Llama 3 does); the gathered KV arrives in rank order
 * and is first rearranged into sequence order (one copy), then two causal
 * kernels: chunk i against keys [0, (i+1)·h) and chunk 2N-1-i against
 * [0, (2N-i)·h), the mask aligned to the end of the keys (flash
 * attention's causal mask when sq < sk); their two outputs are joined by
 * one copy (torch.cat).  No output merge.
 * Backward: the same kernels backward against the KV gathered in forward
 * (kept, not gathered again); dQ stays (causal: its two halves joined by a
 * copy); dK and dV of the whole sequence are gathered into one float32
 * accumulator (--grad-dtype; a copy, and for causal a second one that adds
 * the other kernel's part and puts them in owner order) and
 * reduce-scattered back in one call (scripts/calibrate's allgather pass). */
#include "sched.h"

static void kernels(plan *p, const workload *w, uint32_t g, bool backward, int64_t ready) {
  plan_seg q[2];
  uint32_t nq = sched_layout(w->seq_len, g, w->gpus, w->causal, q);
  plan_op shape = sched_shape(w, w->causal, backward);
  for (uint32_t i = 0; i < nq; i++) {
    plan_seg k = {0, w->causal ? q[i].start + q[i].len : w->seq_len};
    uint32_t id = plan_attn(p, g, 0, &shape, &q[i], 1, &k, 1);
    if (ready >= 0) plan_dep(p, (uint32_t)ready, id);
  }
}

static void ranks(uint32_t n, uint32_t *gpus) {
  for (uint32_t g = 0; g < n; g++) gpus[g] = g;
}

static int64_t pass(const sched_ctx *c, bool backward, int64_t after) {
  plan *p = c->p;
  const workload *w = c->w;
  const topology *t = c->t;
  uint32_t n = w->gpus;
  g_autofree uint32_t *gpus = g_new(uint32_t, n);
  ranks(n, gpus);
  double shard = workload_kv_bytes(w, (double)w->seq_len / n);
  double whole = workload_kv_bytes(w, (double)w->seq_len);
  /* a GPU's query rows of output (or dQ) */
  double out = (double)w->batch * w->seq_len / n * w->heads * w->head_dim * w->elem_bytes;
  if (!backward) {
    uint32_t ag = plan_comm(p, 0, COMM_ALL_GATHER);
    plan_coll_ring(p, ag, gpus, n, shard, t->gpus_per_node);
    if (after >= 0) plan_dep(p, (uint32_t)after, ag);
    plan_issue(p, ag, NULL, after, true);
    for (uint32_t g = 0; g < n; g++) {
      int64_t ready = ag;
      if (w->causal) {
        ready = plan_copy(p, g, 0, whole);
        plan_dep(p, ag, (uint32_t)ready);
      }
      kernels(p, w, g, false, ready);
      if (w->causal) plan_copy(p, g, 0, out);
    }
    return ag;
  }
  double grad = w->grad_bytes ? (double)w->grad_bytes / w->elem_bytes : 1.0;
  for (uint32_t g = 0; g < n; g++) {
    kernels(p, w, g, true, after);
    plan_copy(p, g, 0, whole * grad);
    if (w->causal) {
      plan_copy(p, g, 0, out);
      plan_copy(p, g, 0, whole * grad);
    }
  }
  uint32_t rs = plan_comm(p, 1, COMM_REDUCE_SCATTER);
  plan_task_at(p, rs)->grads = true;
  plan_coll_ring(p, rs, gpus, n, shard * grad, t->gpus_per_node);
  plan_issue(p, rs, NULL, -1, true);
  return rs;
}

static bool allgather_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return sched_check_divisible(w, w->causal ? 2 : 1,
                               w->causal ? "allgather's causal layout cuts the sequence into "
                                           "2N equal chunks"
                                         : "allgather gives every GPU an equal chunk", err);
}

static plan *allgather_build(const workload *w, const topology *t, bool record_segs) {
  return sched_passes(w, t, record_segs, pass);
}

const sched_ops sched_allgather = {
    "allgather", "All-gather CP (Llama 3): gather all KV once, local queries attend to it",
    allgather_check, allgather_build, SCHED_RUNS(ATTN_SOFTMAX)};
