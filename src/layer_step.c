/* layer_step: the rest of a training step around the layers (layer.h):
 * embedding, final norm, LM head and loss, forward and backward, and the
 * optimizer step. */
#include "layer_build.h"

/* ---- the model's ends: embedding, final norm, LM head, loss ---- */

/* The embedding's, the LM head's (untied, as Llama 3's) and the final
 * norm's on one GPU: the vocabulary split by TP (Megatron's
 * VocabParallelEmbedding and column-parallel output layer). */
static double outer_params(const lb *b) {
  return 2.0 * b->w->vocab / b->tp * b->d.hidden + b->d.hidden;
}


/* The LM head's GEMM: bf16 under every recipe (under --precision fp8 too:
 * Megatron's output layer is its own ColumnParallelLinear, not a
 * TransformerEngine module, so it stays out of the FP8 autocast) */
static plan_op gemm_op(const lb *b, double n, double k, bool backward) {
  return (plan_op){.kind = OP_GEMM, .backward = backward, .batch = 1,
                   .elem_bytes = b->d.elem_bytes, .gemm_m = b->d.tokens, .gemm_n = n,
                   .gemm_k = k};
}

static plan_op copy_op(double bytes) { return (plan_op){.kind = OP_COPY, .bytes = bytes}; }


/* The embedding lookup of the GPU's T/tp tokens: a gather of rows of
 * hidden (Megatron's VocabParallelEmbedding, then the sequence-parallel
 * reduce-scatter it ends with, priced as the copy it is at TP 1). */
void lb_embed(lb *b, ends *e) {
  double local = b->d.tokens / b->tp, h = b->d.hidden;
  b->step++;
  ALL_GPUS(g) {
    if (e->emb[g] == NONE)
      e->emb[g] = plan_buf_input(b->p, g, (double)b->w->vocab / b->tp * h * lb_param_bytes(b),
                                 "embedding");
    plan_op o = copy_op(lb_act_bytes(b, local, h));
    b->cur[g] = NONE;
    lb_emit(b, g, &o, e->emb[g], lb_act_bytes(b, local, h), "embedded");
  }
}

/* Final RMSNorm, LM head (column-parallel over the vocabulary: the
 * sequence all-gathered first) and the loss: Megatron's
 * vocab_parallel_cross_entropy makes the logits float32 and saves their
 * softmax for backward (T x V/tp x 4 bytes: the known OOM of large
 * vocabularies at long context). */
void lb_head_forward(lb *b, ends *e) {
  double T = b->d.tokens, local = T / b->tp, h = b->d.hidden, V = (double)b->w->vocab / b->tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  lb_none_of(b, cm);
  b->step++;
  ALL_GPUS(g) {
    e->norm_in[g] = b->cur[g];
    if (b->pass == PASS_FWD) plan_buf_keep(b->p, b->cur[g]);
    plan_op n = compute_layer_op(&b->d, LAYER_NORM_ATTN, false);
    uint32_t t = lb_emit(b, g, &n, NONE, 0, NULL);
    e->norm_out[g] = b->cur[g] = plan_buf_out(b->p, t, lb_act_bytes(b, local, h), "norm_out");
    if (b->pass == PASS_FWD) plan_buf_keep(b->p, b->cur[g]);
  }
  if (b->tp > 1) lb_coll(b, COMM_ALL_GATHER, lb_act_bytes(b, local, h), NULL, lb_act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  ALL_GPUS(g) {
    if (e->head[g] == NONE)
      e->head[g] = plan_buf_input(b->p, g, V * h * lb_param_bytes(b), "lm_head");
    plan_op o = gemm_op(b, V, h, false);
    b->wcur[g] = e->head[g];
    lb_after(b, lb_emit(b, g, &o, NONE, lb_act_bytes(b, T, V), "logits"), cm, g);
    plan_op loss = copy_op(T * V * (b->d.elem_bytes + 4));
    uint32_t t = lb_emit(b, g, &loss, NONE, 0, NULL);
    e->probs[g] = plan_buf_out(b->p, t, T * V * 4, "softmax");
    if (b->pass == PASS_FWD) plan_buf_keep(b->p, e->probs[g]);
    b->cur[g] = NONE;
  }
}

void lb_head_backward(lb *b, ends *e) {
  double T = b->d.tokens, local = T / b->tp, h = b->d.hidden, V = (double)b->w->vocab / b->tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  g_autofree uint32_t *gath = g_new(uint32_t, b->n);
  lb_none_of(b, cm);
  if (b->pass == PASS_BWD)
    ALL_GPUS(g) {
      e->norm_in[g] = plan_buf_input(b->p, g, lb_act_bytes(b, local, h), "x");
      e->norm_out[g] = plan_buf_input(b->p, g, lb_act_bytes(b, local, h), "norm_out");
      e->probs[g] = plan_buf_input(b->p, g, T * V * 4, "softmax");
      if (e->head[g] == NONE)
        e->head[g] = plan_buf_input(b->p, g, V * h * lb_param_bytes(b), "lm_head");
    }
  b->step++;
  /* the loss's gradient: softmax less the one-hot target, in the logits' dtype */
  ALL_GPUS(g) {
    plan_op o = copy_op(T * V * (4 + b->d.elem_bytes));
    b->cur[g] = NONE;
    lb_emit(b, g, &o, e->probs[g], lb_act_bytes(b, T, V), "dlogits");
  }
  if (b->tp > 1) {
    g_autofree uint32_t *keep_cur = g_memdup2(b->cur, b->n * sizeof *b->cur);
    lb_coll(b, COMM_ALL_GATHER, lb_act_bytes(b, local, h), e->norm_out, lb_act_bytes(b, T, h),
         "gathered", cm);
    ALL_GPUS(g) {
      gath[g] = b->cur[g];
      b->cur[g] = keep_cur[g];
    }
  }
  b->step++;
  ALL_GPUS(g) {
    plan_op o = gemm_op(b, V, h, true);
    b->wcur[g] = e->head[g];
    uint32_t t = lb_after(b, lb_emit(b, g, &o, b->tp > 1 ? gath[g] : e->norm_out[g],
                               lb_act_bytes(b, T, h), "dnorm"), cm, g);
    b->layer = b->layers;
    lb_wgrad_bytes(b, t, lb_grad_bytes(b) * V * h, 0);
  }
  lb_none_of(b, cm);
  if (b->tp > 1) lb_coll(b, COMM_REDUCE_SCATTER, lb_act_bytes(b, local, h), NULL,
                      lb_act_bytes(b, local, h), "dscattered", cm);
  b->step++;
  ALL_GPUS(g) {
    plan_op n = compute_layer_op(&b->d, LAYER_NORM_ATTN, true);
    lb_after(b, lb_emit(b, g, &n, e->norm_in[g], lb_act_bytes(b, local, h), "dx"), cm, g);
  }
}

/* The embedding's backward: the rows' gradients added into its float32
 * main grad; then the ends' gradient reduction. */
void lb_embed_backward(lb *b, ends *e) {
  double local = b->d.tokens / b->tp, h = b->d.hidden;
  b->step++;
  ALL_GPUS(g) {
    if (e->emb[g] == NONE)
      e->emb[g] = plan_buf_input(b->p, g, (double)b->w->vocab / b->tp * h * lb_param_bytes(b),
                                 "embedding");
    plan_op o = copy_op(lb_act_bytes(b, local, h) + lb_grad_bytes(b) * local * h);
    uint32_t t = lb_emit(b, g, &o, e->emb[g], 0, NULL);
    b->layer = b->layers;
    lb_wgrad_bytes(b, t, lb_grad_bytes(b) * b->w->vocab / b->tp * h, 1);
    for (int i = 0; i < 4; i++) b->grads[g * 4 + i] = NONE;
  }
  lb_reduce_grads(b, outer_params(b));
}

/* Adam's states per parameter: Megatron's float32 main weight and the
 * two moments (12 bytes); under AMP the weights are float32 already and
 * only the moments are added (8); pure bf16, the moments in the weights'
 * dtype (torch.optim.AdamW keeps them as the parameter: 4). */
static double state_bytes(const lb *b) {
  switch (b->w->precision) {
  case PRECISION_AMP: return 8.0;
  case PRECISION_BF16: return 2.0 * b->d.elem_bytes;
  default: return 12.0;
  }
}

/* The optimizer step on every GPU after its gradients are reduced: Adam
 * over the parameters it owns (ZeRO 1-3: 1 / (SP x DP) of its TP shard),
 * reading its float32 master weights and moments (12 bytes a parameter,
 * Megatron's bf16 recipe), then (ZeRO 1-2) the updated bf16 weights
 * all-gathered back. */
void lb_optimizer(lb *b) {
  uint32_t k = b->grad_group, shard = b->zero >= 1 ? k : 1;
  double params = lb_layer_params(b) * b->layers + outer_params(b);
  b->step++;
  ALL_GPUS(g) {
    uint32_t st = plan_buf_input(b->p, g, state_bytes(b) * params / shard, "optimizer_states");
    plan_op o = compute_layer_optimizer_op(&b->d);
    o.sq = params / shard;
    o.batch *= b->layers;
    o.batch += 3; /* embedding, head, final norm */
    b->cur[g] = NONE;
    uint32_t t = lb_emit(b, g, &o, st, 0, NULL);
    /* after every gradient reduction touching it: they run in issue order
     * on the gradient group's stream, so after its last one */
    int64_t lc = b->grad_last[g];
    if (lc >= 0) plan_dep(b->p, (uint32_t)lc, t);
  }
  if (b->zero >= 1 && b->zero <= 2 && k > 1) {
    double bytes = params * lb_param_bytes(b);
    for (uint32_t r = 0; r < b->tp; r++) {
      lb_grad_group(b, r);
      if (lb_group_sim(b, k)) lb_ring(b, COMM_ALL_GATHER, k, bytes / k, NULL, 0, NULL, NULL, NULL, true);
    }
  }
}

/* Where the scheduler's backward begins: after its pass barrier (forward
 * then backward), at 0 (backward only), at the end (forward only). */

/* The loss's float32 softmax of the logits (lb_head_forward: T x V/tp x
 * 4 bytes, saved for the backward). */
static double softmax_bytes(const lb *b) {
  return b->d.tokens * ((double)b->w->vocab / b->tp) * 4;
}

double layer_resident_bytes(const workload *w) {
  lb b = {.w = w, .d = layer_dims_of(w), .tp = layer_tp(w), .sp = w->gpus, .dp = layer_dp(w),
          .model = true, .zero = w->zero, .layers = layers_total(w)};
  b.grad_group = b.sp * b.dp;
  double e = lb_param_bytes(&b), params = lb_layer_params(&b) * b.layers;
  double shard = b.zero >= 1 ? b.grad_group : 1;
  double weights = params * e / (b.zero >= 3 ? b.grad_group : 1);
  double ends = 2.0 * w->vocab / b.tp * b.d.hidden * e;
  double states = state_bytes(&b) * (params + outer_params(&b)) / shard;
  /* the GEMMs' main grads (lb_wgrad_bytes: 4 bytes a weight), kept whole
   * unless ZeRO 2-3 scatters them (one micro-batch) */
  bool whole = b.zero < 2 || b.grad_group < 2 || layer_micro_batches(w) > 1;
  double gemm = (compute_layer_params(&b.d) - 2.0 * b.d.hidden) * b.layers;
  double grads = whole ? lb_grad_bytes(&b) * gemm : 0;
  weights += lb_fp8_weight_bytes(&b) * b.layers;
  /* each layer's input; without recomputation also what lb_forward_layer
   * saves for its backward besides the attention's: both norms' outputs
   * and the residual (its GPU's tokens), fc1's and SwiGLU's outputs (the
   * TP group's tokens, 2 ffn / tp and ffn / tp wide) */
  double local = b.d.tokens / b.tp, f = (double)b.d.ffn / b.tp;
  double saved = lb_act_bytes(&b, local, b.d.hidden);
  if (w->recompute == RECOMPUTE_NONE)
    saved += 3 * lb_act_bytes(&b, local, b.d.hidden) + lb_act_bytes(&b, b.d.tokens, 3 * f) +
             (w->precision == PRECISION_AMP ? (compute_layer_params(&b.d) - 2.0 * b.d.hidden) * b.d.elem_bytes : 0);
  /* and at the end of the forward, the loss's float32 softmax of the
   * logits (lb_head_forward: saved for the backward) */
  return weights + ends + states + grads + saved * b.layers + softmax_bytes(&b);
}

/* Full recomputation has freed, by the time the last layer's out
 * projection begins its backward (its recomputed forward done), the
 * loss's softmax (its last reader is the first task of the loss's
 * backward, lb_head_backward); the last layer's saved input is still live
 * (its norm's backward reads it after the attention's,
 * lb_backward_layer). */
double layer_resident_gone_bytes(const workload *w) {
  lb b = {.w = w, .d = layer_dims_of(w), .tp = layer_tp(w)};
  return softmax_bytes(&b);
}
