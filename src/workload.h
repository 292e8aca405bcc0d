/* workload: one attention layer to simulate (one sweep point, less the
 * scheduler and topology). */
#ifndef TASP_WORKLOAD_H
#define TASP_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { PASS_FWD, PASS_BWD, PASS_FWDBWD } pass_kind;

/* What a layer's attention is: softmax (flash attention), or linear
 * attention in its chunked form (lightning attention; LASP, arXiv
 * 2404.02882): intra-block masked (Q K^T (.) M) V, inter-block through
 * D x D states K^T V per head. */
typedef enum { ATTN_SOFTMAX, ATTN_LINEAR, ATTN_KINDS } attn_kind;

/* What a point's time covers (--scope): the attention of the model's
 * layers (today's figures), one decoder layer around it, or the whole
 * training step (layer.h). */
typedef enum { SCOPE_ATTENTION, SCOPE_LAYER, SCOPE_MODEL, SCOPE_KINDS } scope_kind;

/* Activation recomputation (--recompute, layer.h). */
typedef enum { RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } recompute_kind;

/* Where a job's dimensions lie on its GPUs (--placement): TP, SP and DP
 * from the innermost (consecutive GPUs, inside a node) to the outermost.
 * Megatron's default order is TP, then CP (SP), then DP. */
typedef enum {
  PLACE_TP_SP_DP,
  PLACE_TP_DP_SP,
  PLACE_SP_TP_DP,
  PLACE_SP_DP_TP,
  PLACE_DP_TP_SP,
  PLACE_DP_SP_TP,
  PLACE_KINDS
} placement_kind;

/* The precision recipe (--precision, layer.h): Megatron's (bf16 weights,
 * float32 main grads and main weights in the optimizer), PyTorch AMP's
 * (float32 weights and gradients, autocast's bf16 copy of each weight
 * made in every forward), pure bf16 (bf16 weights and gradients, and
 * torch.optim's states in the weights' dtype: a bf16 model trained as
 * plain PyTorch trains it), or Megatron's with TransformerEngine's FP8
 * recipe (the linear layers' GEMMs in FP8, priced from the topology's
 * compute.fp8_gemm_table; everything else as Megatron's). */
typedef enum {
  PRECISION_MEGATRON,
  PRECISION_AMP,
  PRECISION_BF16,
  PRECISION_FP8,
  PRECISION_KINDS
} precision_kind;

/* One scheduler option's value (sched.h): COUNT and FLAG in num (0:
 * unset, the scheduler's default / false), TEXT in text (NULL: unset). */
typedef struct {
  uint32_t num;
  const char *text;
} workload_opt;
#define WORKLOAD_MAX_OPTS 8

typedef struct {
  uint32_t gpus;       /* SP degree N */
  uint64_t seq_len;    /* S, tokens of the whole sequence */
  uint32_t batch, heads, kv_heads, head_dim;
  uint32_t elem_bytes; /* 2 for bf16/fp16, 4 for fp32 */
  uint32_t grad_bytes; /* per element of the dK/dV accumulators backward moves
                          (4: float32, as ring_flash_attn); 0: elem_bytes */
  const char *dtype;
  bool causal;
  pass_kind pass;
  /* The schedulers' own options (sched.h's sched_opt), each in the slot
   * of its index among them (sched_option_index): a number, or a text
   * (NULL: unset), owned by whoever set it (the scenario). */
  workload_opt opts[WORKLOAD_MAX_OPTS];
  /* Packed documents (--docs): their lengths in tokens, in sequence order,
   * adding up to seq_len; the mask (causal or full) holds within each
   * document, and no pair across two.  NULL: one document. */
  const uint64_t *docs;
  uint32_t n_docs;
  /* The layer a scheduler builds, and the model's layers of each kind
   * (layers.h): a point's times are the sum over the model's layers. */
  attn_kind attention;
  uint32_t layers[ATTN_KINDS];
  /* Linear layers: a scalar decay per head (RetNet, lightning attention),
   * and the block length of the chunked kernels (their FLOPs depend on it). */
  bool decay;
  uint32_t linear_block;
  /* The rest of the model (model.h), for the layer and model scopes; 0
   * where no model gives them (attention alone needs none). */
  uint32_t hidden, ffn, vocab;
  /* The scope (SCOPE_ATTENTION: 0, the attention alone), the
   * tensor-parallel degree around SP (0 or 1: none; layer.h) and
   * whether element-wise ops run unfused (compute.h). */
  scope_kind scope;
  uint32_t tp;
  bool unfused;
  /* Scope model: data-parallel replicas (0 or 1: one), the ZeRO stage
   * (0-3) and activation recomputation. */
  uint32_t dp, zero;
  recompute_kind recompute;
  uint32_t micro_batches;   /* scope model: gradient accumulation (0 or 1: one) */
  /* scope model: tokens per optimizer step (0: micro_batches gives them);
   * micro-batches = these / (batch x seq_len x DP) (layer_micro_batches) */
  uint64_t global_batch_tokens;
  placement_kind placement; /* scopes layer and model (layer.h) */
  precision_kind precision; /* scopes layer and model (--precision) */
  /* The most tasks a point's plan may have (sched_check_tasks); 0: as
   * many as the memory budget holds (budget_limit).  A search sets a
   * fixed one (search.h), so that which configurations it simulates does
   * not depend on the machine it runs on (its shards may run on others). */
  double plan_cap_tasks;
} workload;

/* Bytes of K and V for `tokens` tokens: 2·B·tokens·Hkv·D·e. */
static inline double workload_kv_bytes(const workload *w, double tokens) {
  return 2.0 * w->batch * tokens * w->kv_heads * w->head_dim * w->elem_bytes;
}

/* Bytes of one linear-attention state per GPU: B·H·D·D in float32, as
 * LASP keeps its KV state (OpenNLPLab/LASP lasp/lasp_naive.py: KV is
 * torch.float32 of shape (b, h, d, e)).  K and V are repeated to the query
 * heads before the kernel (grouped KV heads are expanded, as
 * flash-linear-attention's layers do), so the state has H heads. */
static inline double workload_state_bytes(const workload *w) {
  return 4.0 * w->batch * w->heads * w->head_dim * w->head_dim;
}

#endif
