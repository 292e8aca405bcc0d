/* te_cp: Megatron-Core / TransformerEngine context parallelism under the
 * names users give it (TransformerConfig.cp_comm_type), each but
 * all_gather exactly an existing scheduler run under its own name
 * (sched_ops.alias_of: --sched all runs the scheduler, not the alias).
 * What each does is read from TransformerEngine's transformer_engine/
 * pytorch/attention/dot_product_attention/context_parallel.py
 * (attn_forward_func_with_cp, at commit d0067d0):
 *
 * - p2p: AttnFuncWithCPAndKVP2P.  The sequence in 2N chunks, GPU i holding
 *   chunks i and 2N-1-i (Megatron's get_batch_on_this_cp_rank reorders
 *   the batch so), KV passed around one ring by send/recv overlapped with
 *   the step's attention, the causal blocks as Zigzag-Ring's: zigzag.
 * - all_gather: AttnFuncWithCPAndKVAllGather (Llama 3's CP) is a
 *   scheduler of its own (te_allgather.c): it differs from allgather in
 *   gathering K and V again in backward, among others.
 * - a2a: AttnFuncWithCPAndQKVOA2A (DeepSpeed-Ulysses): Q, K, V all-to-all
 *   to heads x whole sequence, attention, the output back: ulysses.
 * - a2a+p2p: hierarchical CP (hierarchical_context_parallel_sizes
 *   [a2a, p2p]): the a2a groups of consecutive ranks inside, the p2p ring
 *   across them with the 2N-chunk layout: usp-zigzag, whose Ulysses degree
 *   (--usp-ulysses) is the a2a size. */
#include "ulysses.h"

static bool p2p_check(const workload *w, const topology *t, GError **err) {
  return sched_zigzag.check(w, t, err);
}
static plan *p2p_build(const workload *w, const topology *t, bool record_segs) {
  return sched_zigzag.build(w, t, record_segs);
}
static bool a2a_check(const workload *w, const topology *t, GError **err) {
  return sched_ulysses.check(w, t, err);
}
static plan *a2a_build(const workload *w, const topology *t, bool record_segs) {
  return sched_ulysses.build(w, t, record_segs);
}
static bool hcp_check(const workload *w, const topology *t, GError **err) {
  return sched_usp_zigzag.check(w, t, err);
}
static plan *hcp_build(const workload *w, const topology *t, bool record_segs) {
  return sched_usp_zigzag.build(w, t, record_segs);
}

static const sched_opt *const a2a_opts[] = {&ulysses_opt_fused, NULL};
static const sched_opt *const hcp_opts[] = {&usp_opt_ulysses, &ulysses_opt_fused, NULL};

const sched_ops sched_te_p2p = {
    .name = "p2p",
    .summary = "TransformerEngine cp_comm_type p2p: zigzag",
    .check = p2p_check,
    .build = p2p_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .docs = true,
    .alias_of = &sched_zigzag};
const sched_ops sched_te_a2a = {
    .name = "a2a",
    .summary = "TransformerEngine cp_comm_type a2a: ulysses",
    .check = a2a_check,
    .build = a2a_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = a2a_opts,
    .docs = true,
    .alias_of = &sched_ulysses};
const sched_ops sched_te_a2a_p2p = {
    .name = "a2a+p2p",
    .summary = "TransformerEngine cp_comm_type a2a+p2p: usp-zigzag (a2a size: --usp-ulysses)",
    .check = hcp_check,
    .build = hcp_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = hcp_opts,
    .alias_of = &sched_usp_zigzag};
