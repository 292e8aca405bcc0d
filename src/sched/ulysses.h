/* ulysses: DeepSpeed-Ulysses's all-to-alls, for ulysses and usp.
 *
 * Inside each group of u consecutive GPUs (Ulysses groups sit inside a
 * node), an all-to-all scatters heads and gathers the sequence before
 * attention, and the reverse after it (Jacobs et al. 2023, arXiv
 * 2309.14509, sec. 3; DeepSpeed's DistributedAttention issues one
 * all-to-all per tensor: Q, K, V, then the output).  Each all-to-all needs
 * its tensor rearranged so that what goes to one peer is contiguous: one
 * copy per GPU per call, before a head scatter, after a head gather.
 * Every group's call moves the same bytes, so a call is one group of the
 * plan along one pattern of every group's ordered pairs, and its copies
 * one lockstep task where every GPU's compute stream ends in the same
 * task (plan.h): a full-mask USP plan is then lockstep end to end.  The
 * plan that records segments (the reference) lists them one by one. */
#ifndef TASP_SCHED_ULYSSES_H
#define TASP_SCHED_ULYSSES_H

#include "sched.h"

/* --ulysses-fused (model.ulysses_fused): Ulysses moves Q, K and V in one
 * all-to-all instead of three calls; ulysses's and usp's option.  And
 * --usp-ulysses (model.usp_ulysses): USP's Ulysses degree (0: the
 * default, ulysses_default_degree), declared by usp.c. */
extern const sched_opt ulysses_opt_fused;
extern const sched_opt usp_opt_ulysses;

/* KV heads each Ulysses group spreads over its u GPUs: kv_heads, or u when
 * kv_heads < u (each KV head then replicated to u / kv_heads GPUs: a KV
 * head cannot be split, and every query head needs its KV head beside it). */
uint32_t ulysses_kv_heads(const workload *w, uint32_t u);
/* Heads divisible by u, KV heads divisible by u or dividing it. */
bool ulysses_check_heads(const workload *w, uint32_t u, const char *who, GError **err);
/* The largest Ulysses degree that divides the SP degree, fits in a node
 * and passes ulysses_check_heads (1 if none larger does). */
uint32_t ulysses_default_degree(const workload *w, const topology *t);

/* Memory (plan_buf.h), as yunchang's all_to_all_4D and DeepSpeed's
 * single_all_to_all allocate: each call lays its tensor out contiguously
 * for the call (`input_t`), receives into a new tensor of the same size
 * (`output`, torch.empty_like).  The scatter's outputs (the whole
 * sequence on the GPU's heads) are what attention reads; they are held
 * until the gather has sent the result back (DistributedAttention keeps
 * them until it returns).  `held` lists them; `src` the tensors the
 * gather sends (the attention kernels' results). */
typedef struct {
  uint32_t id[8], n;
} ulysses_bufs;

/* Before attention: forward Q, K, V (three calls, or one fused call),
 * backward the output gradient, from the pass's tensors io.  After `after`
 * (-1 none); returns the last all-to-all, which attention must wait for.
 * The received tensors are added to *held. */
int64_t ulysses_scatter_heads(plan *p, const workload *w, uint32_t u, bool backward,
                              uint32_t step, int64_t after, const sched_io *io,
                              ulysses_bufs *held);
/* After attention: forward the output, backward dQ, dK, dV (three calls
 * or one fused), sending src's tensors in that order (UINT32_MAX: none);
 * the calls read `held` too.  Issued after each GPU's last compute;
 * returns the last. */
int64_t ulysses_gather_heads(plan *p, const workload *w, uint32_t u, bool backward,
                             uint32_t step, const ulysses_bufs *src, const ulysses_bufs *held);
/* The attention kernels' results on each GPU's heads (its tasks ks, one
 * per GPU): forward `out` and float32 `softmax_lse`, backward `dq`, `dk`,
 * `dv` and flash backward's float32 dQ accumulator (workspace); they also
 * read `held`.  The results are added to *out. */
void ulysses_kernel_bufs(plan *p, const workload *w, uint32_t u, bool backward,
                         const uint32_t *ks, uint32_t nk, ulysses_bufs *out,
                         const ulysses_bufs *held);

#endif
