/* layer_build: what layer.c, layer_block.c and layer_step.c share while
 * they build one plan (layer.h): the builder's state, and each part's
 * functions.  Not for other modules. */
#ifndef TASP_LAYER_BUILD_H
#define TASP_LAYER_BUILD_H

#include "compute.h"
#include "layer.h"
#include "layers.h"
#include "plan_buf.h"

/* What a layer's forward saves for its backward: SV_W AMP's bf16 weights;
 * the last four only unfused, as plain PyTorch's autograd keeps them (each
 * RMSNorm's float32 input and normalized rows, SiLU's output, and the
 * fused QKV projection's query and key parts, which the attention's saved
 * V keeps alive as a view of that one output: lb.qkv_view).  SV_X and
 * SV_H1, the layer's input and the residual between the two blocks, saved
 * only fused: the fused RMSNorm saves its input, the unfused one its
 * float32 copy (layer_block.c's saves() is the list).  SV_AO, the
 * attention's output as the out projection reads it (not a buffer of the
 * layer's own: the appended attention plan's, plan.h attn_out), which the
 * projection saves for its weight gradient. */
enum { SV_X, SV_N1, SV_H1, SV_N2, SV_FC1, SV_SWI, SV_W, SV_N1F, SV_N2F, SV_SILU, SV_QK,
       SV_AO, SV_COUNT };

typedef struct {
  plan *p;
  const topology *t;
  const workload *w;
  layer_dims d;
  uint32_t tp, sp, dp, n, layers;
  uint32_t grad_group;     /* SP x DP: the ranks holding the same weights */
  pass_kind pass;
  bool model;              /* scope model: embedding, head, loss, gradients, optimizer */
  uint32_t zero;
  recompute_kind recompute;
  const plan *attn;        /* the current layer's scheduler plan (expanded); NULL: none */
  uint32_t split;          /* its first backward task */
  const plan *attns[ATTN_KINDS]; /* the scheduler's plan of each kind of layer */
  uint32_t splits[ATTN_KINDS];
  /* each one's kernels read the layer's own K and V (layer.c,
   * attn_keeps_own_kv), so autograd saves them: unfused, V is a view of
   * the QKV projection's output */
  bool qkv_view[ATTN_KINDS];
  plan_append_src *attn_srcs[ATTN_KINDS]; /* each one's appenders' shared part */
  plan_append_src *attn_src; /* the current layer's */
  const attn_kind *kind;   /* per layer */
  int64_t *grad_last;      /* per GPU: the last group on its gradient group's NCCL stream */
  plan_append **ranks;     /* the current layer's appenders, tp x dp; NULL: none */
  uint32_t *saved;         /* layers x n x SV_COUNT buffers */
  uint32_t *weights;       /* layers x n: each layer's weights on each GPU (inputs) */
  uint32_t *wcur;          /* per GPU: the weights the GEMMs read now */
  uint32_t *grads;         /* n x 4: the current layer's weight gradients */
  uint32_t *cur;           /* per GPU: the tensor the next op reads (UINT32_MAX: none) */
  uint32_t *group;         /* scratch: one group's GPUs */
  uint32_t step;
  bool transient;          /* a forward whose activations are not saved (full recompute) */
  uint32_t mbs;            /* micro-batches (gradient accumulation) */
  bool last_mb;            /* the step's last micro-batch: its gradients are reduced */
  bool first_mb;           /* the step's first: FP8 weights are cast in its forward */
  bool recomputing;        /* a forward run again before its backward (full recompute) */
  uint32_t layer;          /* the layer whose backward is being built (layers: the ends) */
  uint32_t *main_grad;     /* (layers + 1) x n x 4: each GEMM's float32 main grad, NONE: none yet */
  /* The GPU each GPU of the builder's numbering (TP rank + tp (SP rank +
   * sp DP rank)) is under the placement; NULL: the same (layer_gpu) */
  uint32_t *phys;
  /* A job simulated on its representatives (orbits.h, layer_orbits): per
   * GPU of the builder's numbering, whether it is one (the builder adds
   * tasks and buffers for those only), and each GPU's representative;
   * NULL: every GPU */
  uint8_t *sim;
  uint32_t *rep;
  /* an appender kept a task of the representatives' that waited on one
   * left out (plan_append_unfit): the plan is not the job's quotient */
  bool unfit;
} lb;

/* Per GPU of the builder's numbering (TP rank + tp (SP rank + sp DP
 * rank)), the GPU w's placement puts it on (layer_gpu); g_free it. */
uint32_t *lb_placement(const workload *w);

#define NONE UINT32_MAX
/* The next simulated GPU after g (UINT32_MAX: from the first), or b->n. */
static inline uint32_t lb_next(const lb *b, uint32_t g) {
  for (g++; b->sim && g < b->n && !b->sim[g]; g++) {}
  return g;
}
static inline bool lb_sim(const lb *b, uint32_t g) { return !b->sim || b->sim[g]; }
/* Every simulated GPU of builder b. */
#define LB_GPUS(b, g) for (uint32_t g = lb_next(b, UINT32_MAX); g < (b)->n; g = lb_next(b, g))
#define ALL_GPUS(g) LB_GPUS(b, g)
#define SAVED(l, g, k) b->saved[((size_t)(l) * b->n + (g)) * SV_COUNT + (k)]

/* One layer (layer_block.c): helpers shared with the step's ends. */
double lb_act_bytes(const lb *b, double rows, double width);
double lb_layer_params(const lb *b);
/* Bytes of a parameter as the GPU holds it: the activation dtype, or
 * float32 under AMP; of its gradient: float32 (Megatron's main grads,
 * AMP's .grad), or the activation dtype under pure bf16
 * (workload.precision). */
double lb_param_bytes(const lb *b);
/* --precision fp8: the FP8 copy of one layer's GEMM weights and its
 * transpose TransformerEngine keeps per GPU (1 byte a weight each); 0
 * under other recipes. */
double lb_fp8_weight_bytes(const lb *b);
double lb_grad_bytes(const lb *b);
uint32_t lb_emit(lb *b, uint32_t g, const plan_op *o, uint32_t extra, double out_bytes,
                 const char *name);
uint32_t lb_after(lb *b, uint32_t id, const uint32_t *comm_of, uint32_t g);
void lb_none_of(lb *b, uint32_t *a);
void lb_coll(lb *b, comm_api api, double shard, const uint32_t *src, double out_bytes,
             const char *name, uint32_t *comm_of);
uint32_t lb_ring(lb *b, comm_api api, uint32_t k, double shard, const uint32_t *in,
                 double out_bytes, const char *name, uint32_t *out, uint32_t *comm_of,
                 bool grad_stream);
/* The GPUs of TP group i (its TP ranks) into b->group. */
void lb_tp_group(lb *b, uint32_t i);
/* The GPUs holding TP rank r's weights (every SP rank of every replica). */
void lb_grad_group(lb *b, uint32_t r);
/* The group's k GPUs (b->group) in the order NCCL's rings take them. */
void lb_ring_order(const lb *b, uint32_t k, uint32_t *ring);
/* GPUs a node of the group's ring (k GPUs in lb_ring_order's order): the
 * `per_node` plan_coll_ring takes, for the nodes the group's members lie
 * on, not the topology's whole nodes. */
uint32_t lb_ring_per_node(const lb *b, uint32_t k, const uint32_t *ring);
/* c where the n GPUs phys[] lie in consecutive blocks of c, one block a
 * node of per GPUs (and distinct from the block before); else 1. */
uint32_t lb_node_blocks(const uint32_t *phys, uint32_t n, uint32_t per);
/* Whether one of the group's k GPUs (b->group) is simulated: a group of
 * none is the image of one that is, and is not built. */
bool lb_group_sim(const lb *b, uint32_t k);
uint32_t lb_wgrad_bytes(lb *b, uint32_t task, double bytes, uint32_t slot);
void lb_reduce_grads(lb *b, double params);
void lb_open_ranks(lb *b, uint32_t l);
void lb_close_ranks(lb *b);
void lb_forward_layer(lb *b, uint32_t l);
void lb_backward_layer(lb *b, uint32_t l);

/* The model's ends and the optimizer (layer_step.c). */
/* Per GPU: the embedding table's and LM head's weights (inputs), what the
 * head's backward needs, the logits' float32 softmax Megatron's
 * vocab-parallel cross entropy saves. */
typedef struct { uint32_t *emb, *head, *norm_in, *norm_out, *probs; } ends;
void lb_embed(lb *b, ends *e);
void lb_head_forward(lb *b, ends *e);
void lb_head_backward(lb *b, ends *e);
void lb_embed_backward(lb *b, ends *e);
void lb_optimizer(lb *b);

#endif
