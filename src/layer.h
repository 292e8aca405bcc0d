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
 * Placement (--placement): by default TP innermost, then SP, then DP:
 * GPU g is TP rank g % tp of SP rank g / tp; another order places the
 * dimensions as it says (layer_gpu).  Every GPU of the job is in the
 * plan, unless the run asks for its representatives (layer_orbits:
 * replicas and TP ranks that are exact images of others are left to
 * them): the plan is built with the default
 * numbering and its GPUs moved to the placement's at the end
 * (plan_relabel); each collective's ring follows its GPUs' order on the
 * topology (NCCL's rings per node).  The scheduler's plan over SP ranks
 * 0..sp-1 is appended for every TP and DP rank onto its SP GPUs.  The
 * scheduler builds its plan for a view of the topology (layer_view) that
 * holds TP rank 0's GPUs only (GPU i of the view is SP rank i % sp of DP
 * rank i / sp): their node blocks and direct links, so its
 * topology-aware choices (TASP's cycles, Ulysses' node size, rings' node
 * crossings) are those of the GPUs it runs on, while its transfers run on
 * the real routes between them.  Exact where every TP rank's SP GPUs are
 * alike (TP dividing the node size, or TP groups of whole nodes, on a
 * homogeneous topology); at TP 1 with the default placement the view is
 * the topology itself.
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

/* The GPU of TP rank r, SP rank s and DP rank d under w's placement
 * (TP innermost, then SP, then DP by default: r + tp (s + sp d)). */
uint32_t layer_gpu(const workload *w, uint32_t r, uint32_t s, uint32_t d);
/* Whether w's GPUs lie as the default order puts them (placement
 * TP,SP,DP, or another that differs only in dimensions of one). */
bool layer_placed_by_default(const workload *w);
/* "tp,sp,dp"; and the order from such a text (each of tp, sp, dp once,
 * innermost first). */
const char *layer_placement_name(placement_kind k);
bool layer_placement_parse(const char *text, placement_kind *out);

/* The layer_dims of a point: its TP group's tokens (batch x seq / sp). */
layer_dims layer_dims_of(const workload *w);
/* The TP degree (w->tp, 1 where 0); the DP degree (scope model's w->dp,
 * else 1); the job's GPUs (TP x SP x DP; the SP GPUs at scope attention). */
uint32_t layer_tp(const workload *w);
uint32_t layer_dp(const workload *w);
uint32_t layer_job_gpus(const workload *w);
/* Micro-batches per step at scope model: global_batch_tokens / (batch x
 * seq_len x DP) where a global batch is given (scenario.c checks it is
 * whole), else micro_batches; 1 at the other scopes. */
uint32_t layer_micro_batches(const workload *w);
/* The workload the scheduler plans: one TP rank's heads over the SP GPUs. */
workload layer_attention_workload(const workload *w);

/* The layer's plan on tp x w->gpus GPUs (finished); with_attention false:
 * the same layer without its attention part (what the attention part's
 * time is measured against). */
plan *layer_build(const sched_ops *s, const workload *w, const topology *t, bool with_attention,
                  bool record_segs);

/* Identical replicas and TP ranks, simulated once (orbits.h).  The
 * symmetry of a job at scope layer or model: shifts of the replicas and
 * of the TP ranks, each by the fewest that the topology (orbits_new) and
 * the collectives' rings (layer_orbits.c) allow: by one where replicas
 * (TP groups) are whole nodes or one NVSwitch domain holds the job, by a
 * node's worth where several share a node; where no shift of the whole
 * dimension is exact, a shift by one inside blocks of its ranks (replicas
 * innermost over several nodes: turned inside each node).  Representatives: the least
 * GPU of each class, whole TP ranks of whole replicas.  NULL where no
 * shift is exact or there is nothing to gain (scope attention, TP 1 and
 * DP 1).  Free with orbits_free. */
struct orbits *layer_orbits(const workload *w, const topology *t);
/* The same, and scheduler s's turn (sched.h: USP's Ulysses groups under
 * a causal mask) inside every SP group, of every TP rank and replica
 * alike, where it keeps the topology and the collectives' rings: the
 * representatives are then the least SP rank of each of the turn's
 * orbits in each of those ranks (layer_build_orbits keeps their part of
 * the scheduler's plan, plan_append).  s NULL: layer_orbits. */
struct orbits *layer_orbits_sched(const sched_ops *s, const workload *w, const topology *t);
/* layer_build's plan for o's representatives only (o NULL: every GPU):
 * exec_run it with exec_opts.orbits = o.  NULL where the scheduler's
 * plan, cut to the representatives of its SP GPUs, is not of the form a
 * quotient takes (plan_append_unfit: a kernel waiting on another GPU's
 * task); the caller replays every GPU then. */
plan *layer_build_orbits(const sched_ops *s, const workload *w, const topology *t,
                         bool with_attention, bool record_segs, const struct orbits *o);

/* Scope model, forward then backward: bytes every GPU holds at the end of
 * the last micro-batch's forward, whatever the scheduler: the weights
 * (ZeRO 3: their shard), the embedding and LM head, the optimizer's
 * float32 states (ZeRO 1-3: a shard), the float32 main grads where they
 * are kept whole, and each layer's saved input (without recomputation,
 * also its saved norms, residual and MLP activations; not the
 * attention's), and the loss's float32 softmax of the logits.  A lower bound on the
 * step's peak (search.h excludes on it before simulating); the plan's own
 * declarations are what it is checked against (test_layer). */
double layer_resident_bytes(const workload *w);
/* What of layer_resident_bytes full recomputation has freed when the last
 * layer's out projection begins its backward (its recomputed forward
 * done, its attention's backward next): the loss's softmax.  The rest is
 * live then (search_bound.h, search_memory_bound_bytes). */
double layer_resident_gone_bytes(const workload *w);

/* About how many tasks layer_build's plan has (for the plan budget,
 * sched_check_tasks): an overestimate for every scheduler; with t, of the
 * plan for layer_orbits' representatives where it has them. */
double layer_tasks_estimate(const workload *w, const topology *t);
/* The same for a plan whose representatives stand for `mult` GPUs each
 * (layer_orbits' mult; 1: every GPU simulated), for a caller that holds
 * the orbits already (the search: once per TP x SP x DP x placement). */
double layer_tasks_estimate_mult(const workload *w, double mult);

/* Model FLOPs of a plan (Megatron's convention, as its training log
 * reports them): each GEMM's forward 2MNK and each attention kernel's
 * nominal forward FLOPs, backward twice the forward; element-wise ops,
 * merges and copies count nothing; a forward run again under full
 * recomputation counts nothing (plan.recomputed_flops). */
double layer_model_flops(const plan *p);

/* One op's forward model FLOPs: compute_op_flops, but a causal attention
 * block's diagonal counted half only where it is the sequence's
 * (plan_op.diag_pairs), as the mask's S^2 / 2 counts it, not the call's. */
double layer_op_model_flops(const plan_op *op);

/* The same count over the plan's tasks [from, to). */
double layer_tasks_flops(const plan *p, guint from, guint to);

#endif
