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

/* The kernels of GPU g, reading kv (and saved: the forward's outputs
 * they need, UINT32_MAX none); their ids into ids; backward, each writes
 * its dK and dV into dkv (returns how many). */
static uint32_t kernels(plan *p, const workload *w, uint32_t g, bool backward, int64_t ready,
                        uint32_t kv, uint32_t saved, uint32_t ids[2], uint32_t dkv) {
  plan_seg q[2];
  uint32_t nq = sched_layout(w->seq_len, g, w->gpus, w->causal, q);
  plan_op shape = sched_shape(w, w->causal, backward);
  for (uint32_t i = 0; i < nq; i++) {
    plan_seg k = {0, w->causal ? q[i].start + q[i].len : w->seq_len};
    uint32_t id = plan_attn(p, g, 0, &shape, &q[i], 1, &k, 1);
    if (ready >= 0) plan_dep(p, (uint32_t)ready, id);
    plan_buf_reads(p, id, kv);
    if (saved != UINT32_MAX) plan_buf_reads(p, id, saved);
    double rows = (double)w->batch * q[i].len * w->heads;
    if (backward) {
      plan_buf_out(p, id, rows * w->head_dim * 4.0, "dq_accum (flash backward, float32)");
      plan_buf_writes(p, id, dkv);
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
  uint32_t ids[2];
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
    sched_io_save(p, w, ordered);
    /* causal: each kernel's output and log-sum-exp, saved for the
     * backward kernel of the same queries (the joined output is the
     * pass's out; the program's `outs`) */
    c->io->n_keep = 0;
    uint32_t chunks = UINT32_MAX;
    if (w->causal) {
      double rows = out / w->elem_bytes / w->head_dim; /* the GPU's query rows x heads */
      chunks = plan_buf_new(p, PLAN_ALL, out + rows * 4.0, "out, softmax_lse of each chunk");
      sched_io_save(p, w, chunks);
      c->io->keep[c->io->n_keep++] = chunks;
    }
    for (uint32_t g = 0; g < n; g++) {
      int64_t ready = ag;
      if (w->causal) {
        ready = plan_copy(p, g, 0, whole);
        plan_dep(p, ag, (uint32_t)ready);
        plan_buf_reads(p, (uint32_t)ready, kv);
        plan_buf_writes(p, (uint32_t)ready, ordered);
      }
      uint32_t nk = kernels(p, w, g, false, ready, ordered, UINT32_MAX, ids, UINT32_MAX);
      if (w->causal) {
        uint32_t cat = plan_copy(p, g, 0, out);
        for (uint32_t i = 0; i < nk; i++) plan_buf_writes(p, ids[i], chunks);
        plan_buf_reads(p, cat, chunks);
      }
    }
    return ag;
  }
  double grad = w->grad_bytes ? (double)w->grad_bytes / w->elem_bytes : 1.0;
  if (c->io->saved == UINT32_MAX) { /* backward alone: forward kept them */
    c->io->saved = plan_buf_saved_input(p, PLAN_ALL, whole, "gathered k, v (from forward)");
    if (w->causal) {
      double rows = out / w->elem_bytes / w->head_dim;
      c->io->keep[c->io->n_keep++] =
          plan_buf_saved_input(p, PLAN_ALL, out + rows * 4.0, "out, softmax_lse of each chunk");
    }
  }
  uint32_t acc = plan_buf_new(p, PLAN_ALL, whole * grad, "dk, dv of the sequence (float32)");
  uint32_t sent = acc;
  if (w->causal) sent = plan_buf_new(p, PLAN_ALL, whole * grad, "dk, dv in owner order (float32)");
  for (uint32_t g = 0; g < n; g++) {
    /* the kernels run one after the other, each one's dK, dV added into
     * the accumulator and freed before the next (the larger key range
     * first): one buffer of the larger size stands for them */
    plan_seg q[2];
    uint32_t nq = sched_layout(w->seq_len, g, n, w->causal, q);
    double keys = w->causal ? q[nq - 1].start + q[nq - 1].len : w->seq_len;
    uint32_t dkv = plan_buf_new(p, g, workload_kv_bytes(w, keys), "dk, dv of the gathered keys");
    uint32_t nk = kernels(p, w, g, true, after, c->io->saved,
                          w->causal ? c->io->keep[0] : UINT32_MAX, ids, dkv);
    /* the accumulator is made before the kernels run (torch.empty), and
     * the full mask's one kernel returns the pass's dQ itself */
    plan_buf_writes(p, ids[0], acc);
    if (nk == 1) plan_buf_writes(p, ids[0], c->io->dq);
    /* the first kernel's part into the accumulator; causal: the queries'
     * two dQ halves joined (torch.cat: the pass's dQ), then the second
     * kernel's part added and the whole put in owner order (index_select:
     * a new float32 buffer beside the accumulator) */
    uint32_t first = plan_copy(p, g, 0, whole * grad);
    plan_buf_writes(p, first, acc);
    plan_buf_reads(p, first, dkv);
    if (w->causal) {
      uint32_t cat = plan_copy(p, g, 0, out);
      uint32_t dq = plan_buf_new(p, g, out, "dq (one chunk each)");
      for (uint32_t i = 0; i < nk; i++) plan_buf_writes(p, ids[i], dq);
      plan_buf_reads(p, cat, dq);
      plan_buf_writes(p, cat, c->io->dq);
      uint32_t second = plan_copy(p, g, 0, whole * grad);
      plan_buf_writes(p, second, acc);
      plan_buf_reads(p, second, dkv);
      /* the kernel's dK, dV are gone (added right after it) before
       * index_select makes the owner-order copy */
      plan_buf_reads_late(p, second, acc);
      plan_buf_writes_late(p, second, sent);
    }
  }
  uint32_t rs = plan_comm(p, 1, COMM_REDUCE_SCATTER);
  c->io->end_task = rs; /* dK, dV: the shard converted after the reduce-scatter */
  plan_task_at(p, rs)->grads = true;
  plan_coll_ring(p, rs, gpus, n, shard * grad, t->gpus_per_node);
  plan_issue(p, rs, NULL, -1, true);
  plan_buf_reads(p, rs, sent);
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
    .name = "allgather",
    .summary = "All-gather CP (Llama 3): gather all KV once, local queries attend to it",
    .check = allgather_check,
    .build = allgather_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 (sched.h) */
    .size = {0, 0, 5.1, 2.1, 0, 0.5, 0, 0, 0, 6}};
