/* layer: one decoder layer around the attention a scheduler plans
 * (--scope layer).
 *
 * The layer is the scheduler's own plan with the rest of a Llama decoder
 * layer on every GPU of the SP group around it (compute.h, layer_op):
 * RMSNorm, QKV projection and RoPE before the attention; output
 * projection, residual add, RMSNorm, SwiGLU MLP (FC1, SwiGLU, FC2) and
 * residual add after it; backward in reverse, the attention's backward
 * between the MLP's and the projections' (plan_splice puts the layer's
 * ops between the attention's forward and backward passes).  Every GPU
 * runs them on its own tokens (the sequence / SP degree): with no tensor
 * parallelism, the rest of the layer moves no data between GPUs.  The
 * attention's tasks carry plan_task.region (1 forward, 2 backward), so the
 * replay reports the attention part's time (exec_result.region_s). */
#ifndef TASP_LAYER_H
#define TASP_LAYER_H

#include "plan.h"
#include "sched/sched.h"

/* Regions of a layer plan's attention tasks. */
enum { LAYER_REGION_ATTN_FWD = 1, LAYER_REGION_ATTN_BWD = 2 };

/* The plan of one decoder layer of w (w->hidden, w->ffn set: the model's)
 * on t, its attention as `sched` builds it for w. */
plan *layer_build(const sched_ops *sched, const workload *w, const topology *t, bool record_segs);

#endif
