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
 * reduce-scattered back in one call (scripts/calibrate's allgather pass).
 *
 * Memory, as Llama 3's CP holds it (arXiv 2407.21783 sec. 3.3.2: "all-gather
 * the K and V tensors"): every GPU holds the gathered K and V of the whole
 * sequence (2·B·S·Hkv·D·e), in sequence order (causal: a rearranged copy;
 * the gathered one is freed after it), kept from forward for backward;
 * causal kernels' two outputs until torch.cat joins them; backward, each
 * kernel's dK and dV of the keys it saw, the float32 dQ accumulator of
 * flash backward, and the float32 dK/dV accumulator of the whole
 * sequence until the reduce-scatter has sent it. */
#include "sched.h"

/* The kernels of GPU g, reading kv; their ids into ids and, backward, the
 * dK/dV buffer each writes into dkv (returns how many). */
static uint32_t kernels(plan *p, const workload *w, uint32_t g, bool backward, int64_t ready,
                        uint32_t kv, uint32_t ids[2], uint32_t dkv[2]) {
  plan_seg q[2];
  uint32_t nq = sched_layout(w->seq_len, g, w->gpus, w->causal, q);
  plan_op shape = sched_shape(w, w->causal, backward);
  for (uint32_t i = 0; i < nq; i++) {
    plan_seg k = {0, w->causal ? q[i].start + q[i].len : w->seq_len};
    uint32_t id = plan_attn(p, g, 0, &shape, &q[i], 1, &k, 1);
    if (ready >= 0) plan_dep(p, (uint32_t)ready, id);
    plan_buf_reads(p, id, kv);
    double rows = (double)w->batch * q[i].len * w->heads;
    if (backward) {
      plan_buf_out(p, id, rows * w->head_dim * 4.0, "dq_accum (flash backward, float32)");
      dkv[i] = plan_buf_out(p, id, workload_kv_bytes(w, (double)k.len), "dk, dv of the gathered keys");
    }
    ids[i] = id;
  }
  return nq;
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
  uint32_t ids[2], dkv[2];
  if (!backward) {
    uint32_t ag = plan_comm(p, 0, COMM_ALL_GATHER);
    plan_coll_ring(p, ag, gpus, n, shard, t->gpus_per_node);
    if (after >= 0) plan_dep(p, (uint32_t)after, ag);
    plan_issue(p, ag, NULL, after, true);
    plan_buf_reads(p, ag, c->io->kv);
    uint32_t kv = plan_buf_out(p, ag, whole, "gathered k, v");
    uint32_t ordered = w->causal ? plan_buf_new(p, PLAN_ALL, whole, "gathered k, v in sequence order")
                                 : kv;
    c->io->saved = ordered; /* backward attends it again */
    for (uint32_t g = 0; g < n; g++) {
      int64_t ready = ag;
      if (w->causal) {
        ready = plan_copy(p, g, 0, whole);
        plan_dep(p, ag, (uint32_t)ready);
        plan_buf_reads(p, (uint32_t)ready, kv);
        plan_buf_writes(p, (uint32_t)ready, ordered);
      }
      uint32_t nk = kernels(p, w, g, false, ready, ordered, ids, dkv);
      if (w->causal) {
        uint32_t cat = plan_copy(p, g, 0, out);
        for (uint32_t i = 0; i < nk; i++) {
          double rows = out / w->elem_bytes / w->head_dim / nk;
          plan_buf_reads(p, cat, plan_buf_out(p, ids[i], out / nk, "out (one chunk)"));
          plan_buf_reads(p, cat, plan_buf_out(p, ids[i], rows * 4.0, "softmax_lse (one chunk)"));
        }
      }
    }
    return ag;
  }
  double grad = w->grad_bytes ? (double)w->grad_bytes / w->elem_bytes : 1.0;
  if (c->io->saved == UINT32_MAX) /* backward alone: forward kept it */
    c->io->saved = plan_buf_input(p, PLAN_ALL, whole, "gathered k, v (from forward)");
  uint32_t acc = plan_buf_new(p, PLAN_ALL, whole * grad, "dk, dv of the sequence (float32)");
  for (uint32_t g = 0; g < n; g++) {
    uint32_t nk = kernels(p, w, g, true, after, c->io->saved, ids, dkv);
    /* the first kernel's part into the accumulator; causal: the queries'
     * two dQ halves joined, then the second kernel's part added */
    uint32_t first = plan_copy(p, g, 0, whole * grad);
    plan_buf_writes(p, first, acc);
    plan_buf_reads(p, first, dkv[0]);
    if (w->causal) {
      uint32_t cat = plan_copy(p, g, 0, out);
      for (uint32_t i = 0; i < nk; i++)
        plan_buf_reads(p, cat, plan_buf_out(p, ids[i], out / nk, "dq (one chunk)"));
      uint32_t second = plan_copy(p, g, 0, whole * grad);
      plan_buf_writes(p, second, acc);
      plan_buf_reads(p, second, dkv[nk - 1]);
    }
  }
  uint32_t rs = plan_comm(p, 1, COMM_REDUCE_SCATTER);
  plan_task_at(p, rs)->grads = true;
  plan_coll_ring(p, rs, gpus, n, shard * grad, t->gpus_per_node);
  plan_issue(p, rs, NULL, -1, true);
  plan_buf_reads(p, rs, acc);
  plan_buf_out(p, rs, shard * grad, "dk, dv shard (float32)");
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
