/* te_allgather: TransformerEngine's all-gather context parallelism, as
 * Megatron-Core runs it under cp_comm_type "all_gather"
 * (AttnFuncWithCPAndKVAllGather in TransformerEngine's
 * transformer_engine/pytorch/attention/dot_product_attention/
 * context_parallel.py, at commit d0067d0; the Llama 3 CP, arXiv
 * 2407.21783 sec. 3.3.2).  The layout is always Megatron's two chunks
 * (get_batch_on_this_cp_rank): GPU g holds chunks g and 2N-1-g of S/2N
 * tokens, under either mask.  Tensors in Megatron's sbhd format, sequence
 * first, so that slicing the keys and selecting a query chunk are views.
 *
 * Forward: K all-gathered, then V, in two blocking calls
 * (gather_along_first_dim each; the kernels wait: not overlapped), each
 * gathered tensor put in sequence order by index_select (a new tensor; the
 * rank-order one freed).  Then the two local chunks: chunk g against the
 * keys [0, (g+1)S/2N), chunk 2N-1-g against [0, (2N-g)S/2N) (causal,
 * aligned bottom-right; the full mask: all S keys each), each kernel's
 * output copied into its half of the output tensor (allocated before the
 * kernels).  Saved for backward: q, the local k and v, the output and the
 * two kernels' log-sum-exps; the gathered K, V are dropped as forward
 * returns.
 * Backward: dK and dV of the whole sequence zero-filled in the input dtype
 * (torch.zeros; TransformerEngine keeps them in fwd_nominal_dtype, so
 * --grad-dtype does not apply), K and V gathered again (two calls) and put
 * in sequence order, the two chunks' backward kernels, each one's dQ
 * copied into its half of dQ and its dK, dV added into the key range it
 * saw (dk[range].add_), then dK and dV put back in owner order
 * (index_select, one then the other) and reduce-scattered (two calls).
 *
 * What differs from allgather (allgather.c, the same method as the Llama 3
 * paper states it): K and V gathered in two calls, not one packed call;
 * the gather repeated in backward, where allgather keeps the forward's
 * (the memory of the gathered K, V is held in neither pass's gap here);
 * dK, dV accumulated in the input dtype and reduce-scattered in two calls;
 * the full mask also runs two half-length kernels.  The per-step lists
 * (out_per_step, dq/dk/dv_per_step) and the gathered K, V are locals of the
 * autograd function: held until it returns.
 *
 * Not modelled: TransformerEngine runs the second chunk's kernel on a
 * second stream (cp_stream) "to resolve wave quantization", beside the
 * first; here the two run one after the other on the GPU's one compute
 * stream (an upper bound on the pair's time where neither fills the
 * GPU).  Packed documents (its THD path) are refused. */
#include "sched.h"

/* The keys chunk `q` attends: all those up to its end (causal), or all. */
static plan_seg keys_of(const workload *w, plan_seg q) {
  return (plan_seg){0, w->causal ? q.start + q.len : w->seq_len};
}

/* One blocking all-gather of every GPU's `shard` bytes, reading `from`;
 * returns the group (its output: the gathered tensor, in rank order). */
static uint32_t gather(const sched_ctx *c, const uint32_t *gpus, double shard, uint32_t from,
                       int64_t after, uint32_t *out, const char *name) {
  plan *p = c->p;
  uint32_t ag = plan_comm(p, 0, COMM_ALL_GATHER);
  plan_coll_ring(p, ag, gpus, c->w->gpus, shard, c->t->gpus_per_node);
  if (after >= 0) plan_dep(p, (uint32_t)after, ag);
  plan_issue(p, ag, NULL, after, true);
  plan_buf_reads(p, ag, from);
  *out = plan_buf_out(p, ag, shard * c->w->gpus, name);
  return ag;
}

/* Both gathers, then on each GPU both index_selects into sequence order,
 * which the kernels (after them on the stream) read.  ordered[0], [1]: K
 * and V in sequence order. */
static uint32_t gather_kv(const sched_ctx *c, int64_t after, uint32_t ordered[2]) {
  plan *p = c->p;
  const workload *w = c->w;
  uint32_t n = w->gpus;
  g_autofree uint32_t *gpus = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) gpus[g] = g;
  double shard = workload_kv_bytes(w, (double)w->seq_len / n) / 2; /* K or V */
  uint32_t ranked[2], ag[2];
  ag[0] = gather(c, gpus, shard, c->io->kv, after, &ranked[0], "k gathered (rank order)");
  ag[1] = gather(c, gpus, shard, c->io->kv, after, &ranked[1], "v gathered (rank order)");
  ordered[0] = plan_buf_new(p, PLAN_ALL, shard * n, "k_ag (sequence order)");
  ordered[1] = plan_buf_new(p, PLAN_ALL, shard * n, "v_ag (sequence order)");
  for (uint32_t g = 0; g < n; g++)
    for (int i = 0; i < 2; i++) {
      uint32_t sel = plan_copy(p, g, 0, shard * n);
      plan_dep(p, ag[i], sel);
      plan_buf_reads(p, sel, ranked[i]);
      plan_buf_writes(p, sel, ordered[i]);
    }
  return ag[1];
}

static int64_t forward(const sched_ctx *c, int64_t after) {
  plan *p = c->p;
  const workload *w = c->w;
  uint32_t n = w->gpus, kv[2];
  uint32_t last_ag = gather_kv(c, after, kv);
  double out = sched_rows_bytes(w, w->heads); /* a GPU's rows of output */
  uint32_t per_step = plan_buf_new(p, PLAN_ALL, out, "out_per_step (both chunks)");
  plan_op shape = sched_shape(w, w->causal, false);
  for (uint32_t g = 0; g < n; g++) {
    plan_seg q[2];
    sched_layout(w->seq_len, g, n, true, q);
    for (int i = 0; i < 2; i++) {
      plan_seg k = keys_of(w, q[i]);
      uint32_t id = plan_attn(p, g, 0, &shape, &q[i], 1, &k, 1);
      plan_buf_reads(p, id, c->io->q);
      plan_buf_reads(p, id, kv[0]);
      plan_buf_reads(p, id, kv[1]);
      plan_buf_writes(p, id, per_step);
    }
    /* out_f16[i].copy_(out_per_step[i]); the gathered K, V live until
     * forward returns, after the second copy */
    for (int i = 0; i < 2; i++) {
      uint32_t cp = plan_copy(p, g, 0, out / 2);
      plan_buf_reads(p, cp, per_step);
      plan_buf_writes(p, cp, c->io->o);
      if (i == 1) plan_buf_reads(p, cp, kv[0]), plan_buf_reads(p, cp, kv[1]);
    }
  }
  return last_ag;
}

static int64_t backward(const sched_ctx *c, int64_t after) {
  plan *p = c->p;
  const workload *w = c->w;
  uint32_t n = w->gpus;
  double whole = workload_kv_bytes(w, (double)w->seq_len) / 2; /* K or V of the sequence */
  double out = sched_rows_bytes(w, w->heads);
  /* torch.zeros of dk and dv, issued before the gathers (which wait for it) */
  uint32_t acc[2] = {plan_buf_new(p, PLAN_ALL, whole, "dk of the sequence"),
                     plan_buf_new(p, PLAN_ALL, whole, "dv of the sequence")};
  for (uint32_t g = 0; g < n; g++) {
    uint32_t z = plan_copy(p, g, 0, 2 * whole); /* written once (rotate.c's zero_) */
    if (after >= 0) plan_dep(p, (uint32_t)after, z);
    plan_buf_writes(p, z, acc[0]);
    plan_buf_writes(p, z, acc[1]);
  }
  uint32_t kv[2];
  gather_kv(c, -1, kv);
  /* dq, dk, dv_per_step of both chunks, held until backward returns:
   * the two chunks' keys add up to (2N+1)S/2N causal, 2S full, on every GPU */
  plan_seg q0[2];
  sched_layout(w->seq_len, 0, n, true, q0);
  double keys = keys_of(w, q0[0]).len + keys_of(w, q0[1]).len;
  uint32_t per_step = plan_buf_new(p, PLAN_ALL, out + workload_kv_bytes(w, keys),
                                   "dq, dk, dv_per_step (both chunks)");
  plan_op shape = sched_shape(w, w->causal, true);
  for (uint32_t g = 0; g < n; g++) {
    plan_seg q[2];
    sched_layout(w->seq_len, g, n, true, q);
    for (int i = 0; i < 2; i++) {
      plan_seg k = keys_of(w, q[i]);
      uint32_t id = plan_attn(p, g, 0, &shape, &q[i], 1, &k, 1);
      uint32_t reads[] = {c->io->q, kv[0], kv[1], c->io->o, c->io->dout, c->io->lse};
      for (size_t r = 0; r < G_N_ELEMENTS(reads); r++) plan_buf_reads(p, id, reads[r]);
      plan_buf_writes(p, id, per_step);
      plan_buf_out(p, id, (double)w->batch * q[i].len * w->heads * w->head_dim * 4.0,
                   "dq_accum (flash backward, float32)");
    }
    for (int i = 0; i < 2; i++) {
      /* dq[i].copy_(dq_per_step[i]) */
      uint32_t cp = plan_copy(p, g, 0, out / 2);
      plan_buf_reads(p, cp, per_step);
      plan_buf_writes(p, cp, c->io->dq);
      /* dk[range].add_(dk_per_step[i]), dv likewise: read two, write one */
      uint32_t add = plan_copy(p, g, 0, 3 * workload_kv_bytes(w, keys_of(w, q[i]).len));
      plan_buf_reads(p, add, per_step);
      plan_buf_writes(p, add, acc[0]);
      plan_buf_writes(p, add, acc[1]);
    }
  }
  /* index_select into owner order, dK then dV: each rebinds its name, so
   * the sequence-order one is freed as the new one is made */
  uint32_t sent[2] = {plan_buf_new(p, PLAN_ALL, whole, "dk in owner order"),
                      plan_buf_new(p, PLAN_ALL, whole, "dv in owner order")};
  for (uint32_t g = 0; g < n; g++)
    for (int i = 0; i < 2; i++) {
      uint32_t sel = plan_copy(p, g, 0, whole);
      plan_buf_reads(p, sel, acc[i]);
      plan_buf_writes(p, sel, sent[i]);
    }
  g_autofree uint32_t *gpus = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) gpus[g] = g;
  uint32_t rs = 0;
  for (int i = 0; i < 2; i++) {
    rs = plan_comm(p, 1, COMM_REDUCE_SCATTER);
    plan_task_at(p, rs)->grads = true;
    plan_coll_ring(p, rs, gpus, n, whole / n, c->t->gpus_per_node);
    plan_issue(p, rs, NULL, -1, true);
    plan_buf_reads(p, rs, sent[i]);
    plan_buf_writes(p, rs, c->io->dkv); /* dk, then dv: the pass's gradients */
  }
  /* the per-step lists and the gathered K, V: locals until it returns */
  plan_buf_reads(p, rs, per_step);
  plan_buf_reads(p, rs, kv[0]);
  plan_buf_reads(p, rs, kv[1]);
  c->io->end_task = rs;
  return rs;
}

static int64_t pass(const sched_ctx *c, bool backward_pass, int64_t after) {
  return backward_pass ? backward(c, after) : forward(c, after);
}

static bool te_ag_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return sched_check_divisible(w, 2, "TransformerEngine's all_gather cuts the sequence into 2N "
                               "equal chunks", err);
}

static plan *te_ag_build(const workload *w, const topology *t, bool record_segs) {
  return sched_passes(w, t, record_segs, pass);
}

const sched_ops sched_te_all_gather = {
    .name = "all_gather",
    .summary = "TransformerEngine cp_comm_type all_gather: K, V gathered in each pass (Llama 3 CP)",
    .check = te_ag_check,
    .build = te_ag_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {0, 0, 12, 12, 0, 1, 0, 0, 0, 16, 0, 0, 0}};
