/* layer: one decoder layer around a scheduler's attention, on TP x SP GPUs.
 *
 * The plan of --scope layer: on every GPU of the job, pre-norm Llama's
 * layer (compute.h compute_layer_op: RMSNorm, QKV projection, RoPE,
 * attention, output projection, residual add, RMSNorm, SwiGLU MLP as fc1,
 * SwiGLU, fc2, residual add) forward, backward or both as w->pass asks,
 * with the attention part the scheduler's own plan: built once (its
 * build(), over the heads of one TP rank) and appended (plan_append) once
 * per TP rank, its forward before the output projection and, in forward
 * then backward, its backward (everything after the scheduler's pass
 * barrier) between the output projection's backward and RoPE's.
 *
 * Tensor parallelism is Megatron's with sequence parallelism (arXiv
 * 2205.05198, section 4.2.2): each GPU holds tokens / tp of the layer's
 * activations for the norms and residual adds; an all-gather along the
 * sequence precedes the column-parallel GEMMs (QKV, fc1) and a
 * reduce-scatter follows the row-parallel ones (output projection, fc2);
 * backward reduce-scatters the gradients of the gathered inputs,
 * all-gathers those of the scattered outputs and all-gathers each
 * column-parallel GEMM's input again for its weight gradient (Megatron
 * saves the local shard only: LinearWithGradAccumulationAndAsyncCommunication).
 * Every collective goes through plan_coll_ring (NCCL rings), so TP traffic
 * loads the same links as SP traffic.
 *
 * Placement: TP innermost, then SP: GPU g is TP rank g % tp of SP rank
 * g / tp.  Every GPU of the job is simulated (no rank stands for
 * another): the scheduler's plan over SP ranks 0..sp-1 is appended for TP
 * rank r onto GPUs r, tp + r, 2 tp + r, ...  The scheduler builds its plan
 * for a view of the topology (layer_view) that holds TP rank 0's GPUs
 * only (GPU i of the view is GPU i x tp): their node blocks and direct
 * links, so its topology-aware choices (TASP's cycles, Ulysses' node size,
 * rings' node crossings) are those of the GPUs it runs on, while its
 * transfers run on the real routes between them.  Exact where every TP
 * rank's SP GPUs are alike (TP dividing the node size, or TP groups of
 * whole nodes, on a homogeneous topology); at TP 1 the view is the
 * topology itself.
 *
 * Memory: the layer's weights (its parameters on the GPU, in the layer's
 * dtype) are an input; its activations are plan buffers (plan_buf.h): what
 * Megatron saves for backward (the layer input, each norm's output shard,
 * fc1's output, SwiGLU's output, the attention block's output) is kept in
 * a forward pass and read by the backward; gathered inputs and
 * pre-scatter outputs live while used; weight gradients are float32 main
 * grads, kept.  The attention's own buffers are the scheduler's. */
#ifndef TASP_LAYER_H
#define TASP_LAYER_H

#include <glib.h>

#include "plan.h"
#include "sched/sched.h"
#include "topology.h"
#include "workload.h"

/* The topology a scheduler plans one TP rank's SP group on: t itself at
 * TP 1 (or scope attention); else TP rank 0's GPUs (n_gpus / tp of them,
 * GPU i being t's i x tp), their direct links and their count per node
 * (gpus_per_node / tp where TP divides it, else 1).  The rest is t's
 * (schedulers read only these: structure, never hardware rules). */
typedef struct {
  topology t;
  bool owned;   /* t.direct is the view's own */
} layer_view;
void layer_view_init(layer_view *v, const workload *w, const topology *t);
void layer_view_clear(layer_view *v);

/* The layer_dims of a point: its TP group's tokens (batch x seq / sp). */
layer_dims layer_dims_of(const workload *w);
/* The TP degree (w->tp, 1 where 0); the DP degree (scope model's w->dp,
 * else 1); the job's GPUs (TP x SP x DP; the SP GPUs at scope attention). */
uint32_t layer_tp(const workload *w);
uint32_t layer_dp(const workload *w);
uint32_t layer_job_gpus(const workload *w);
/* The workload the scheduler plans: one TP rank's heads over the SP GPUs. */
workload layer_attention_workload(const workload *w);

/* The layer's plan on tp x w->gpus GPUs (finished); with_attention false:
 * the same layer without its attention part (what the attention part's
 * time is measured against). */
plan *layer_build(const sched_ops *s, const workload *w, const topology *t, bool with_attention,
                  bool record_segs);

/* About how many tasks layer_build's plan has (for the plan budget,
 * sched_check_tasks): an overestimate for every scheduler. */
double layer_tasks_estimate(const workload *w);

/* Model FLOPs of a plan (Megatron's convention, as its training log
 * reports them): each GEMM's forward 2MNK and each attention kernel's
 * nominal forward FLOPs, backward twice the forward; element-wise ops,
 * merges and copies count nothing. */
double layer_model_flops(const plan *p);

#endif
