/* search_bound: the lower bound on a configuration's step that a search
 * forms before simulating it (search.h; its memory bound is
 * layer_resident_bytes).  It is a true lower bound of the step the
 * simulation gives (tests/test_search.sh compares it with every simulated
 * configuration of small spaces, tests/test_search_bound.c where the TP
 * waits are a large share of it), so a configuration pruned on it could
 * never have ranked. */
#ifndef TASP_SEARCH_BOUND_H
#define TASP_SEARCH_BOUND_H

#include <stdint.h>

#include "scenario.h"

/* One GPU's layer ops of one micro-batch, every layer: forward, backward
 * and, under full recomputation, the forward again (compute alone). */
double search_layer_ops_s(const workload *w, const topology *t);

/* The attention of every layer of one micro-batch on its busiest GPU:
 * the scheduler's own plan of one layer of each kind (one TP rank's
 * heads, on the view layer_build gives it), its compute tasks as compute
 * prices them, times the layers of that kind; out[0] as it runs, out[1]
 * with its forward (the tasks before the pass barrier) run again, as full
 * recomputation does.  Depends on the method, TP, SP, the head-parallel
 * degree, the split and the placement only. */
void search_attention_s(const sched_ops *s, const workload *w, const topology *t,
                        double out[2]);

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
 * the attention's busiest GPU, attn[1] under full recomputation) + the
 * TP waits. */
double search_step_bound_s(const workload *w, const topology *t, const double attn[2],
                           double ingress_Bps);

#endif
