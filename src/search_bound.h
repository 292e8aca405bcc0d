/* search_bound: the lower bounds on a configuration's step and on its
 * peak memory that a search forms before simulating it (search.h).  Each
 * is a true lower bound of what the simulation gives (tests/test_search.sh
 * compares them with every simulated configuration of small spaces,
 * tests/test_search_bound.c the step's where the TP waits are a large
 * share of it and the memory's for seven schedulers, both recomputations
 * and every ZeRO stage), so a configuration pruned or excluded on one
 * could never have ranked. */
#ifndef TASP_SEARCH_BOUND_H
#define TASP_SEARCH_BOUND_H

#include <stdint.h>

#include "scenario.h"

/* One GPU's layer ops of one micro-batch, every layer: forward, backward
 * and, under full recomputation, the forward again (compute alone). */
double search_layer_ops_s(const workload *w, const topology *t);

/* What the attention of one micro-batch adds to the bounds, from the
 * scheduler's own plan of one layer of each kind (one TP rank's heads, on
 * the view layer_build gives it).  Depends on the method, TP, SP, the
 * head-parallel degree, the split and the placement only. */
typedef struct {
  /* every layer's compute tasks as compute prices them, on the busiest
   * GPU: s[0] as it runs, s[1] with its forward (the tasks before the
   * pass barrier) run again, as full recomputation does */
  double s[2];
  /* every layer's bytes kept from its forward for its backward
   * (search_plan_kept_bytes, with the plan's attn_out held: the layer's
   * out projection saves the attention's output for its weight gradient,
   * layer_block.c SV_AO, whether or not the attention's own backward
   * reads it) on the GPU that keeps the most: all held at once where the
   * forward is not recomputed */
  double kept_bytes;
  /* one layer's, on the GPU that keeps the most; of a model of several
   * kinds the least kind's (the last layer's, whatever its kind, under
   * full recomputation) */
  double kept_layer_bytes;
} search_attention;

void search_attention_of(const sched_ops *s, const workload *w, const topology *t,
                         search_attention *out);
/* The same with the view the scheduler plans on given (layer_view_init of
 * w and t; it depends on TP, SP, DP and the placement only, so a caller
 * going through many configurations of those makes it once for them). */
void search_attention_on(const sched_ops *s, const workload *w, const topology *t,
                         const topology *view, search_attention *out);

/* Per GPU of finished plan p (per_gpu: p->n_gpus entries), the bytes of
 * the buffers its forward leaves for its backward: those a compute task on
 * that GPU touches before the pass barrier and another after it, and
 * buffer `held` (UINT32_MAX: none) on every GPU it lies on, one the
 * caller knows its own tasks read on both sides; returns the most.  Inside a layer (layer_block.c lb_open_ranks) the forward's
 * tasks are appended with the layer's forward and the backward's with its
 * backward, the plan's inputs made where first used and its outputs freed
 * after their last use (PLAN_APPEND_OWN_*), so such a buffer is made no
 * later than that forward task ends and freed no earlier than that
 * backward task starts: one GPU's compute stream runs its tasks in plan
 * order, so it is live whenever that GPU's compute is between the two.
 * A buffer only a communication group touches on one side is left out (a
 * group's time on a GPU is not ordered with that GPU's stream). */
double search_plan_kept_bytes(const plan *p, uint32_t held, double *per_gpu);

/* The most bytes per second a GPU of the job (w's TP x SP x DP GPUs,
 * placed as w says) can receive from the other GPUs of its TP group: the
 * capacities of the distinct channels that end their routes to it,
 * summed (its ingress port where they share its node, its NIC where they
 * do not), the largest over the job's GPUs.  A TP collective's ring runs
 * among the group's GPUs only (layer_block.c lb_coll), so whatever a GPU
 * receives in it comes over those channels.  0: TP 1. */
double search_tp_ingress_Bps(const workload *w, const topology *t);

/* The time a step's forward waits on its TP collectives (scope model, one
 * micro-batch; 0 otherwise), at least: each layer's forward all-gathers
 * its norm's output before the QKV and the MLP's first GEMM and
 * reduce-scatters the attention's and the MLP's output projections before
 * their residuals (layer_block.c lb_forward_layer), each between two ops
 * of the one chain every GPU's forward is, nothing else to compute
 * meanwhile.  A ring (plan_coll) of TP GPUs hands each GPU TP - 1 shards
 * of the SP rank's tokens x hidden, which take at least their bytes over
 * ingress_Bps (search_tp_ingress_Bps).  The backward's collectives are left out: its weight
 * gradients and the re-gathers of saved inputs may run beside them; so
 * are several micro-batches' (one's forward may fill another's waits). */
double search_tp_wait_s(const workload *w, double ingress_Bps);

/* The step's lower bound from those parts: micro-batches x (layer ops +
 * the attention's busiest GPU, attn->s[1] under full recomputation) + the
 * TP waits. */
double search_step_bound_s(const workload *w, const topology *t, const search_attention *attn,
                           double ingress_Bps);

/* The step's peak memory, at least: layer_resident_bytes (what every GPU
 * holds at the end of a forward, the attention's tensors left out) and
 * what the attention keeps there.  Without full recomputation every
 * layer's forward has run and no backward yet at the first task of the
 * loss's backward, so each layer's kept buffers (its attention's output
 * among them, which its out projection's backward reads) are live on
 * that GPU then, beside all layer_resident_bytes counts:
 * attn->kept_bytes is added.  Under full recomputation a layer keeps its
 * attention's tensors only from its recomputed forward to its backward:
 * when the last layer's out projection begins its backward (after the
 * loss's and the MLP's, before the attention's: lb_backward_layer), the
 * loss's softmax is gone (layer_resident_gone_bytes), the rest is live
 * and so is everything the attention keeps and the attention's output,
 * so the bound is the larger of layer_resident_bytes and that less the
 * gone bytes plus attn->kept_layer_bytes. */
double search_memory_bound_bytes(const workload *w, const search_attention *attn);

#endif
