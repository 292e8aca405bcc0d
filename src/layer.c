/* layer: a decoder layer's plan around a scheduler's attention (layer.h). */
#include "layer.h"

/* The layer's ops before the attention, after it, in forward order. */
static const layer_op before_attn[] = {LAYER_NORM_ATTN, LAYER_QKV, LAYER_ROPE};
static const layer_op after_attn[] = {LAYER_OUT_PROJ, LAYER_RESID_ATTN, LAYER_NORM_MLP,
                                      LAYER_FC1,      LAYER_SWIGLU,     LAYER_FC2,
                                      LAYER_RESID_MLP};

/* ops[0..k) forward, or backward in reverse, on every GPU: one lockstep
 * task each where the GPUs' streams are in step, else one per GPU. */
static void emit(plan *q, const layer_dims *d, const layer_op *ops, size_t k, bool backward) {
  for (size_t i = 0; i < k; i++) {
    plan_op op = compute_layer_op(d, ops[backward ? k - 1 - i : i], backward);
    if (plan_lockstep_after(q)) {
      plan_compute(q, PLAN_ALL, 0, &op);
      continue;
    }
    for (uint32_t g = 0; g < q->n_gpus; g++) plan_compute(q, g, 0, &op);
  }
}

plan *layer_build(const sched_ops *sched, const workload *w, const topology *t, bool record_segs) {
  g_assert(w->hidden > 0 && w->ffn > 0);
  plan *a = sched->build(w, t, record_segs);
  plan *q = plan_new(w->gpus, record_segs);
  const layer_dims d = {.tokens = (double)w->batch * w->seq_len / w->gpus,
                        .hidden = w->hidden, .ffn = w->ffn, .heads = w->heads,
                        .kv_heads = w->kv_heads, .head_dim = w->head_dim, .tp = 1,
                        .elem_bytes = w->elem_bytes, .unfused = w->unfused};
  uint32_t nt = a->tasks->len;
  /* where the attention's backward begins: at its pass barrier */
  uint32_t mid = w->pass == PASS_FWD ? nt : w->pass == PASS_BWD ? 0 : a->pass_barrier;
  g_assert(mid <= nt);
  plan_splice s;
  plan_splice_begin(&s, q, a);
  if (w->pass != PASS_BWD) {
    emit(q, &d, before_attn, G_N_ELEMENTS(before_attn), false);
    plan_splice_range(&s, q, 0, mid, LAYER_REGION_ATTN_FWD);
    emit(q, &d, after_attn, G_N_ELEMENTS(after_attn), false);
  }
  if (w->pass != PASS_FWD) {
    emit(q, &d, after_attn, G_N_ELEMENTS(after_attn), true);
    plan_splice_range(&s, q, mid, nt, LAYER_REGION_ATTN_BWD);
    emit(q, &d, before_attn, G_N_ELEMENTS(before_attn), true);
  }
  plan_splice_end(&s);
  plan_free(a);
  plan_finish(q);
  return q;
}
