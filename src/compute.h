/* compute: how long one attention kernel, or one output merge, takes.
 *
 * Two models.  `roofline`: launch cost + FLOPs / (peak x efficiency).
 * `table`: kernel times measured on the target GPU (docs/validation.md,
 * "Kernel model"), separately for causal and full kernels, indexed by the
 * shape variables that change a flash kernel's rate:
 *  - work per kernel (nominal FLOPs 4·B·H·sq·sk·D, half that when causal,
 *    as the measurements count them): log-log interpolation; beyond the
 *    largest point time grows linearly with FLOPs (saturated), below the
 *    smallest it shrinks towards half the smallest time (launch-bound).
 *    GQA and MHA take the same time, so KV heads do not enter at all;
 *  - batch x heads (the grid's width: how many thread blocks fill the SMs):
 *    each measured B·H is its own curve; at equal FLOPs B·H = 64 runs up
 *    to 10% faster than 32 on short causal kernels (more, smaller blocks
 *    even out the masked tail) and the same on long ones (h100x1-tool,
 *    h200x2-sp); between measured B·H log(time) is interpolated in
 *    log(B·H), beyond them the nearest (FLOPs then carry the shape);
 *  - head dim: each measured head dim is its own curve (at equal FLOPs
 *    head dim 64 takes 7-10% longer than 128 in the median, 10-14% from
 *    16K tokens: calibration/h100x1-tool, h200x2-sp); between measured head
 *    dims log(time) is interpolated in log(D), beyond them the nearest;
 *  - aspect log2(sk/sq): between a shape's measured aspects linear in
 *    time; beyond them the nearest measured aspect, times the ratio that
 *    aspect change costs at the same FLOPs in the nearest shape (head dim,
 *    B·H) of the table that measures it, else in `aspect_table` (kernels of
 *    the same code on a GPU of the same die, kept for that ratio only).
 * `table_scale` k runs a table measured on another GPU on one k times
 * faster when saturated: a kernel of F FLOPs takes the table's time of
 * F / k (the fixed costs of a small kernel stay the table's).
 * Backward: its own measured times where given, else a ratio to forward.
 * Beyond the table (a lookup that would be `extrapolated` in any
 * dimension), a topology with a `kernel_model` (kernel_model.h: CTAs in
 * waves over the SMs, fitted to a kernel sweep) prices the kernel by its
 * mechanisms instead; inside the table's range the table's times stand.
 *
 * Linear attention (OP_LIN_*): FLOPs and bytes per kind, forward and
 * backward (compute_op_flops, compute_op_bytes); priced by a measured
 * table of its own where the topology has one (`compute.linear_table`,
 * interpolated like the attention table, per kind and mask), else by a
 * roofline: launch + max(FLOPs / (peak x linear_efficiency), bytes / the
 * copy rate).
 *
 * GEMMs (OP_GEMM: a linear layer's M x K by K x N product, 2MNK FLOPs;
 * backward is both products of its gradient, dX = dY W^T and dW = X^T dY,
 * 2MNK each): from `compute.gemm_table` where the topology has one, the
 * times of each product (fwd, dgrad, wgrad) measured per layer shape
 * (N x K) over token counts M (scripts/calibrate --parts gemm), looked up
 * like the attention table: log-log in FLOPs within a shape's measured
 * tokens, linear in FLOPs beyond the largest, towards half the smallest
 * time below it; a shape never measured takes the nearest measured shape's
 * time at equal FLOPs (extrapolated: COMPUTE_BEYOND_SHAPE); a product
 * never measured, another's at equal FLOPs, the forward's for a backward
 * one (extrapolated: COMPUTE_BEYOND_BACKWARD).  Without a table: a roofline, launch +
 * max(FLOPs / (peak x gemm_efficiency), bytes / copy rate).
 * FP8 GEMMs (plan_op.fp8, --precision fp8: TransformerEngine's recipe,
 * E4M3 activations and weights forward, E5M2 gradients backward, per-tensor
 * delayed scaling) are looked up the same way in `compute.fp8_gemm_table`
 * (the same products timed as torch._scaled_mm with TE's operand layouts,
 * calibration/h100x1-fp8gemm), never in the bf16 table; without one, a
 * roofline at twice the bf16 peak (the H100 datasheet's dense FP8 rate).
 * Each FP8 product also pays the casts TE runs around it, element-wise by
 * the bytes they move at the copy rate (compute_fp8_cast_bytes).
 *
 * Element-wise ops (OP_ELEMWISE: RMSNorm, RoPE, SwiGLU, residual add,
 * optimizer update) by the bytes they move (reads + writes) at their
 * kind's measured rate per pass (compute.elementwise_gbps,
 * elementwise_bwd_gbps: compute_elemwise_Bps), else the copy rate, plus
 * copy_fixed_us per kernel; `unfused` counts the kernels and
 * passes plain PyTorch runs (compute.c lists them), fused the one kernel
 * Megatron / TransformerEngine run.  Not classified (as copies).
 *
 * Confidence (compute_op_lookup): every kernel's price says how far it is
 * from measured data, decided by the lookup that priced it, in the order
 * worst..best
 *   roofline < extrapolated < scaled < interpolated < measured:
 *  - roofline: no measured kernel of its kind (a roofline model, or linear
 *    attention without a linear_table);
 *  - extrapolated: the lookup left the table in some dimension: FLOPs
 *    (tokens) beyond the largest or below the smallest measured kernel of
 *    the shape; batch x heads or head dim beyond the measured ones (the
 *    nearest curve is used); an aspect beyond every measured one (or a
 *    borrowed aspect ratio held beyond the FLOPs it was measured at); the
 *    other mask's table standing in; a backward from forward x bwd_ratio;
 *  - scaled: within the range of a table measured on another GPU, run
 *    table_scale times faster (compute.table_from names that GPU);
 *  - interpolated: between measured points in some dimension, within the
 *    table's range in all (an aspect ratio borrowed from another shape of
 *    the table, or from aspect_table, within what they measure, counts so);
 *  - measured: at a measured point (after tidy_points: repeats merged, the
 *    isotonic fit) in every dimension.
 * Why this order: a scaled table in its range keeps measured kernels'
 * shape (launch-bound small ones, the climb to saturation) and guesses
 * one rate; beyond a table the curve itself is guessed (a 1-head kernel
 * priced as the 32-head curve at equal FLOPs, a shape never timed); a
 * roofline has no measured curve at all.
 * Merges, copies, host issue and launch are lines fitted per topology and
 * are not classified.  A point's figure is its worst kernel's (exec). */
#ifndef TASP_COMPUTE_H
#define TASP_COMPUTE_H

#include <glib.h>
#include <json-c/json.h>
#include <stdbool.h>

#include "jsonio.h"
#include "kernel_model.h"
#include "plan.h"

typedef struct {
  double head_dim;/* attention: the kernel's head dim; linear: 0 */
  double bh;      /* attention: batch x heads (the kernel's grid); linear: 0 */
  double aspect;  /* log2(sk / sq): backward cost is not symmetric in sq, sk */
  double flops;   /* nominal FLOPs of the measured kernel */
  double fwd_s;
  double bwd_s;   /* 0 when not measured */
  double sq;      /* attention: query tokens; linear: tokens (the table's range, for notes) */
} compute_point;

/* How far a price is from measured data (above), worse upwards: a point
 * takes its worst kernel's.  NONE: no kernel priced (--no-compute). */
typedef enum {
  COMPUTE_CONF_NONE,
  COMPUTE_CONF_MEASURED,
  COMPUTE_CONF_INTERPOLATED,
  COMPUTE_CONF_SCALED,
  COMPUTE_CONF_EXTRAPOLATED,
  COMPUTE_CONF_ROOFLINE,
} compute_conf;

/* The dimensions in which a lookup left its table (extrapolated). */
enum {
  COMPUTE_BEYOND_TOKENS = 1 << 0,   /* FLOPs beyond its shape's measured kernels */
  COMPUTE_BEYOND_HEADS = 1 << 1,    /* batch x heads */
  COMPUTE_BEYOND_HEAD_DIM = 1 << 2,
  COMPUTE_BEYOND_ASPECT = 1 << 3,   /* sk / sq */
  COMPUTE_BEYOND_MASK = 1 << 4,     /* priced by the other mask's kernels */
  COMPUTE_BEYOND_BACKWARD = 1 << 5, /* backward not measured: forward x bwd_ratio
                                       (GEMM: the forward product at equal FLOPs) */
  COMPUTE_BEYOND_SHAPE = 1 << 6,    /* GEMM: its N x K not measured, the nearest shape's */
};

/* The worst lookup of a run so far, and the first kernel priced at it. */
typedef struct {
  compute_conf conf;
  unsigned beyond;      /* COMPUTE_BEYOND_* of that kernel */
  bool scaled;          /* some kernel came from another GPU's table */
  uint8_t kind;         /* op_kind of that kernel */
  bool causal, backward;
  double batch, heads, head_dim, sq, sk;
  double gemm_m, gemm_n, gemm_k; /* a GEMM's forward shape */
  bool fp8;             /* a GEMM priced from the FP8 table */
} compute_lookup;

/* Element-wise ops (plan_op.elemwise). */
typedef enum {
  EW_RMSNORM,   /* rows of hidden */
  EW_ROPE,      /* rows of (heads + kv heads) x head dim: Q and K */
  EW_SWIGLU,    /* rows of ffn outputs (reads the 2 x ffn gate and up) */
  EW_RESIDUAL,  /* rows of hidden; backward: the two gradients added */
  EW_OPTIMIZER, /* Adam(W) over sq parameters in `batch` tensors */
  EW_CAST,      /* a float32 weight of sq parameters copied to the activation dtype */
  EW_KINDS
} compute_elemwise;

typedef struct {
  bool table;             /* false: roofline */
  double peak_flops;      /* FLOP/s */
  double efficiency;      /* fraction of peak an attention kernel reaches */
  double launch_s;        /* per kernel, roofline only (a table includes it) */
  double bwd_ratio;       /* backward / forward time where not measured */
  double merge_fixed_s;   /* log-sum-exp merge of one block output: fixed part */
  double merge_s_per_elem;/* ... and per output element (B·sq·H·D) */
  double host_s;          /* host time to issue one kernel (framework overhead) */
  double bwd_host_s;      /* ... one backward kernel call (a ring-like pass's float32
                             gradient sums are copy tasks of their own: sched/rotate.c) */
  /* ... one linear task, [intra full, intra causal, state, apply][fwd, bwd]:
   * the PyTorch ops its function issues (compute.linear_host_us) */
  double lin_host_s[4][2];
  double merge_host_s;    /* host time to issue one merge (several small ops) */
  double copy_Bps;        /* bytes a rearranging copy (cat, permute) moves per second */
  double copy_fixed_s;    /* ... plus this per copy */
  double copy_host_s;     /* host time to issue one copy */
  double copy_mixed_Bps;  /* ... an add of two dtypes (float32 += bf16), which PyTorch's
                             elementwise kernels do not vectorise (compute.copy_mixed_GBps) */
  /* Bytes per second of each element-wise kind, [forward, backward]
   * (compute.elementwise_gbps, elementwise_bwd_gbps): the ops alone run at
   * rates of their own (an H200 moves RMSNorm's and the residual add's
   * bytes about twice as fast as RoPE's and SwiGLU's: docs/validation.md,
   * Decoder layer).  0: the forward's rate of that kind (backward), else
   * copy_Bps. */
  double ew_Bps[2][EW_KINDS];
  /* Fraction by which a compute task's progress slows while a transfer of
   * its GPU is in flight (both draw on the GPU's memory bandwidth):
   * compute.comm_slowdown, 0 where not measured. */
  double comm_slowdown;
  GArray *points[2];      /* compute_point, by (head dim, aspect, flops); [0] full, [1] causal */
  GArray *aspect_points[2]; /* the same, from a sibling GPU: aspect ratios only */
  double table_scale;     /* saturated speed of this GPU over the table's */
  char *table_from;       /* the GPU the table was measured on, where not this one
                             (compute.table_from); NULL: this GPU's own */
  double linear_efficiency;  /* fraction of peak the linear-attention kernels reach */
  /* measured linear kernels per kind (intra, state, apply) and mask, keyed
   * by forward FLOPs; empty: roofline */
  GArray *lin_points[3][2];
  /* the same kernels' GPU time alone (launch gaps hidden: queued behind a
   * busy GPU; linear_table's gpu_fwd_ms, gpu_bwd_ms); empty where not
   * measured.  Where measured, lin_points time a call from its host issue
   * on an idle GPU (launch gaps included): compute_op_alone_s */
  GArray *lin_gpu_points[3][2];
  /* measured GEMM products (compute.gemm_table): head_dim = N, bh = K,
   * aspect = the gemm_part, flops = 2MNK, fwd_s = its time, sq = M;
   * empty: roofline at gemm_efficiency of peak */
  GArray *gemm_points;
  /* the same, FP8 products (compute.fp8_gemm_table); empty: none measured */
  GArray *fp8_gemm_points;
  double gemm_efficiency;
  /* flash kernels from their mechanisms (compute.kernel_model): prices a
   * kernel the table would extrapolate (kernel_model.h); unset: none */
  kernel_model mech;
} compute_model;

void compute_model_init(compute_model *m);
void compute_model_clear(compute_model *m);

/* Read the "compute" object of a topology file. */
bool compute_model_parse(json_object *obj, json_where w, compute_model *m, GError **err);

/* Nominal FLOPs of one kernel. */
double compute_attn_flops(double batch, double heads, double head_dim, double sq,
                          double sk, bool causal);
/* Seconds for one kernel of the given nominal FLOPs, batch x heads, head
 * dim and lengths. */
double compute_attn_s(const compute_model *m, double flops, double batch_heads, double head_dim,
                      double sq, double sk, bool causal, bool backward);
/* Seconds to merge a block output of `elems` elements into the running one. */
double compute_merge_s(const compute_model *m, double elems);

/* Any compute task, through the model of its kind (attention: the table or
 * roofline above; merge: the merge line; copy: fixed + bytes / copy rate). */
double compute_op_s(const compute_model *m, const plan_op *op);
/* The same, folding how far its price is from measured data into *how
 * (the worse wins; a tie keeps the kernel already there). */
double compute_op_lookup(const compute_model *m, const plan_op *op, compute_lookup *how);
/* Folds x into acc (the worse wins; a tie keeps acc's kernel). */
void compute_lookup_merge(compute_lookup *acc, const compute_lookup *x);
/* The confidence column's value: "measured", "interpolated", "scaled from
 * h100" (the table's GPU; "scaled" where unnamed), "extrapolated",
 * "roofline", "none"; owned by the caller. */
char *compute_conf_label(const compute_model *m, const compute_lookup *l);
/* Why, in words, for a table's note (NULL for measured, interpolated and
 * none): the kernel, the dimensions it left the table in and what the
 * table holds; owned by the caller. */
char *compute_lookup_reason(const compute_model *m, const compute_lookup *l);
/* Host time to issue it (framework overhead; the GPU may run ahead). */
double compute_op_host_s(const compute_model *m, const plan_op *op);
/* Where the model knows both (a linear table with GPU times): the time of
 * the task's call alone on an idle GPU, from the start of its host issue
 * to the end of its last kernel, launch gaps included; else 0.  A task
 * whose GPU was idle when its issue began ends then (exec). */
double compute_op_alone_s(const compute_model *m, const plan_op *op);
/* The bytes of a same-dtype copy that take as long as an add of two dtypes
 * moving `bytes` (copy_Bps / copy_mixed_Bps times them). */
double compute_mixed_bytes(const compute_model *m, double bytes);
/* Nominal FLOPs of an attention task: 4·B·H·D per unmasked (query, key)
 * pair, counting the causal diagonal half (for a square causal block this
 * is 4·B·H·sq·sk·D/2, the measurements' convention); of a linear task its
 * kind's count (compute.c); 0 for other kinds. */
double compute_op_flops(const plan_op *op);
/* Bytes a linear task, a GEMM (its operands once each, per product) or
 * an element-wise op (every pass of it) reads and writes in HBM (0 for
 * other kinds). */
double compute_op_bytes(const plan_op *op);

/* ---- the rest of a decoder layer ---- */

/* plan_op.fp8 of a GEMM: FP8 operands (COMPUTE_FP8), and which casts
 * TransformerEngine runs with the product (compute_fp8_cast_bytes):
 * NORM_INPUT: the input comes from a norm fused with its FP8 cast (TE's
 * LayerNormLinear: QKV, FC1), so forward casts nothing of it and backward
 * transposes the FP8 input for the weight gradient; otherwise (out
 * projection, FC2) forward cast-transposes its bf16 input.  CAST_WEIGHT:
 * the forward also casts the weight to FP8 and its transpose (once a step:
 * the first micro-batch's, Megatron's is_first_microbatch). */
enum { COMPUTE_FP8 = 1 << 0, COMPUTE_FP8_NORM_INPUT = 1 << 1, COMPUTE_FP8_CAST_WEIGHT = 1 << 2 };
/* Bytes the FP8 casts of one GEMM task move (reads + writes; 0 for bf16):
 * forward, the input's cast-transpose (reads it in the activation dtype,
 * writes it and its transpose in FP8) unless NORM_INPUT, and with
 * CAST_WEIGHT the weight's; backward, the output gradient's
 * cast-transpose (E5M2 and its transpose for dgrad and wgrad) and, with
 * NORM_INPUT, the saved FP8 input's transpose (one byte read, one
 * written). */
double compute_fp8_cast_bytes(const plan_op *op);
/* Kernels those casts launch (each pays copy_fixed_us). */
unsigned compute_fp8_cast_kernels(const plan_op *op);

/* The three products of a linear layer: forward Y = X W, and backward's
 * dX = dY W^T (dgrad) and dW = X^T dY (wgrad). */
typedef enum { GEMM_FWD, GEMM_DGRAD, GEMM_WGRAD, GEMM_PARTS } gemm_part;
const char *compute_gemm_part_name(gemm_part p);

const char *compute_elemwise_name(compute_elemwise k);
/* Bytes per second an element-wise op of this kind and pass moves
 * (compute_model.ew_Bps, falling back as it says). */
double compute_elemwise_Bps(const compute_model *m, compute_elemwise kind, bool backward);
/* Kernels one element-wise op launches. */
unsigned compute_elemwise_kernels(const plan_op *op);
/* Seconds of one product of a GEMM task (the task's own time is its
 * forward, or dgrad + wgrad backward), folding its lookup into *how. */
double compute_gemm_part_s(const compute_model *m, const plan_op *op, gemm_part part,
                           compute_lookup *how);

/* One decoder layer's shape as one GPU of a tensor-parallel group runs it,
 * Megatron-style with sequence parallelism: norms and residual adds on the
 * GPU's tokens / tp, the sequence all-gathered to `tokens` before the
 * column-parallel GEMMs (QKV, FC1) and reduce-scattered after the
 * row-parallel ones (out projection, FC2); heads, KV heads and FFN split by
 * tp (compute_layer_check). */
typedef struct {
  double tokens;        /* T: the TP group's tokens (batch x local sequence) */
  uint32_t hidden, ffn, heads, kv_heads, head_dim;
  uint32_t tp;          /* tensor-parallel degree (1: none) */
  uint32_t elem_bytes;
  bool unfused;         /* element-wise ops as plain PyTorch runs them */
  bool fp8;             /* the GEMMs in FP8 (TransformerEngine's recipe) */
} layer_dims;

/* A decoder layer's work besides attention and its communication, in
 * order (pre-norm Llama: x + attn(norm(x)), then h + mlp(norm(h))). */
typedef enum {
  LAYER_NORM_ATTN,  /* RMSNorm before attention */
  LAYER_QKV,        /* Q, K, V projection: N = (heads + 2 kv heads) x head dim / tp */
  LAYER_ROPE,       /* rotary embedding of Q and K */
  LAYER_OUT_PROJ,   /* attention output projection: K = heads x head dim / tp */
  LAYER_RESID_ATTN, /* residual add after attention */
  LAYER_NORM_MLP,   /* RMSNorm before the MLP */
  LAYER_FC1,        /* gate and up projections as one GEMM (Megatron's linear_fc1):
                       N = 2 ffn / tp */
  LAYER_SWIGLU,     /* silu(gate) x up */
  LAYER_FC2,        /* down projection: K = ffn / tp */
  LAYER_RESID_MLP,  /* residual add after the MLP */
  LAYER_OPS
} layer_op;
const char *compute_layer_op_name(layer_op which);
/* Why d cannot be split as asked (a message naming the field), or TRUE. */
bool compute_layer_check(const layer_dims *d, GError **err);
/* The compute task of op `which` of one layer, forward or backward. */
plan_op compute_layer_op(const layer_dims *d, layer_op which, bool backward);
/* Weights of one layer held per GPU (the norms' whole, the rest / tp), and
 * the optimizer step over them (one task). */
double compute_layer_params(const layer_dims *d);
plan_op compute_layer_optimizer_op(const layer_dims *d);
/* torch.autocast's bf16 copies of one layer's GEMM weights (float32
 * parameters under PyTorch AMP), made in each forward: one cast per
 * tensor. */
plan_op compute_layer_cast_op(const layer_dims *d);

#endif
