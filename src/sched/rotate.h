/* rotate: the plan shape shared by ring-like schedulers.
 *
 * Ring, Zigzag-Ring and TASP all work in steps: at step t every GPU
 * attends its queries to the keys and values it holds, while the KV it
 * holds moves one hop along one ring (or along several rings at once) for
 * step t+1.  Double buffering: the transfer of step t overlaps the compute
 * of step t; compute of step t+1 waits for it (ring_flash_attn's
 * send_recv_kv / wait pattern).  Forward: after every kernel but a GPU's
 * first, its block output is merged into the running output (log-sum-exp).
 * Backward: KV moves as in forward, and the dK/dV accumulator of the KV
 * just used follows it one hop after the step's kernels (so it moves
 * n_steps times, the last one home).  A scheduler supplies only the
 * transfers of a step and the kernels of a GPU at a step; optionally a
 * transfer that a later step waits for (ahead: double-ring's hop across,
 * beside a whole round) and a dK/dV hop after a step's (grads_then_ahead). */
#ifndef TASP_ROTATE_H
#define TASP_ROTATE_H

#include "sched.h"

typedef struct rotate_emit rotate_emit;

typedef struct {
  uint32_t n_steps;
  /* Optional, NULL: tasks before a pass's first step (issued after
   * `after`); returns what the pass's first kernels wait for (-1 none).
   * io: the pass's tensors (sched_io), which it reads. */
  int64_t (*prologue)(const void *self, plan *p, bool backward, int64_t after,
                      const sched_io *io);
  /* Optional: tasks after a pass's last step; returns the pass's last task. */
  int64_t (*epilogue)(const void *self, plan *p, bool backward, int64_t last);
  /* Transfers that move what each GPU holds at `step` one hop on. */
  void (*xfers)(const void *self, rotate_emit *e, uint32_t step);
  /* Optional, NULL: a transfer issued at `step` beside its kernels, on a
   * communicator of its own, that carries the KV held at `step` to the
   * GPU that attends it `lead` steps later (returned, 0: none at this
   * step): the kernels of step + lead wait for it, not for the step
   * chain, which moves no KV after step + lead - 1 (double-ring:
   * InternEvo's hop across, issued at a round's start).  ahead_xfers
   * emits its transfers as xfers does.  At most one is in flight. */
  uint32_t (*ahead)(const void *self, uint32_t step);
  void (*ahead_xfers)(const void *self, rotate_emit *e, uint32_t step);
  /* Optional, backward: whether, once `step`'s dK/dV hop (xfers) is done,
   * the dK/dV that it brought makes one more along ahead_xfers' pairs, on
   * that communicator (double-ring: w hops around the window, then one
   * across); the next step's dK/dV hop follows that one, and the next
   * step's kernels wait for the first (the program waits for it on the
   * compute stream before the next round). */
  bool (*grads_then_ahead)(const void *self, uint32_t step);
  /* Backward: the dK/dV sums (and the hops that carry them) are in the
   * inputs' dtype, not the gradient dtype, from this step's hops after
   * its grads_then_ahead hop on (0: never; InternEvo casts the first
   * window's sums to bf16). */
  uint32_t grads_cast_step;
  /* Kernels of GPU `gpu` at `step`, by rotate_kernel(). */
  void (*kernels)(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step);
  /* Optional: the GPU pairs every step's transfers go along, the same
   * bytes on each (then xfers calls rotate_xfer_all once a step). */
  const plan_pair *pairs;
  uint32_t n_pairs;
  /* Optional: whether every GPU runs kernels of the same shapes at `step`
   * (a full mask); they are then emitted once, for GPU 0, as lockstep
   * tasks of all GPUs (plan.h), unless the plan records segments. */
  bool (*alike)(const void *self, uint32_t step);
  /* Memory (rotate_buf.h): bytes of the KV chunk a GPU holds (0: its S/N
   * tokens' K and V) and the name of a received one (NULL: ring_flash_attn's). */
  double kv_bytes;
  const char *kv_name;
  /* Backward adds into the dK/dV that arrived and receives into the one
   * it sent (zigzag_ring_flash_attn), not a new sum each step (ring). */
  bool grads_in_place;
  /* Backward receives into the dK/dV it sent and adds in place only at a
   * step whose KV belongs to a later GPU (step > GPU), making a new sum at
   * the others (ring_flash_attn's stripe_flash_attn_backward: `dk[:, :-1]
   * += ...` on its shifted steps, `dk = block_dk_buffer + dk` else). */
  bool grads_stripe;
  /* The program holds K and V, and their dK/dV, as two tensors each, not
   * one packed tensor (rotate_buf_kv_split). */
  bool kv_split;
  /* Backward: the dK/dV hops go through a communicator of their own, not
   * the KV hops' (InternEvo's double ring: dg_in beside g_in).  Where not,
   * the two share one (ring_flash_attn; calibrate.py Pass.run_backward's
   * self.move(cur, recv) and self.move(dkv, nxt), lines 767 and 799, both
   * Pass.exchange's dist.batch_isend_irecv on the default group), whose NCCL stream runs them in issue order: a step's
   * dK/dV hop after its KV hop, the next step's KV hop after it. */
  bool grads_own_comm;
} rotate_ops;

/* Whether the plan records kernels' token segments (tests); where not,
 * a scheduler may pass any segments of the right lengths to a kernel
 * whose mask is full. */
bool rotate_records_segs(const rotate_emit *e);
/* A transfer of `bytes` in `msgs` messages along every one of ops.pairs. */
void rotate_xfer_all(rotate_emit *e, double bytes, uint32_t msgs);
/* The same along the pairs of another pattern of the plan, for hops that
 * differ from step to step (double-ring: inner hops, then one across);
 * registered once by the first call with `slot` < 0 (kept in *slot). */
void rotate_xfer_pairs(rotate_emit *e, const plan_pair *pairs, uint32_t n, int64_t *slot,
                       double bytes, uint32_t msgs);
void rotate_kernel(rotate_emit *e, bool causal, const plan_seg *q, uint32_t nq,
                   const plan_seg *k, uint32_t nk);
/* The same on the query heads [head_off, head_off + heads) only. */
void rotate_kernel_heads(rotate_emit *e, uint32_t head_off, uint32_t heads, bool causal,
                         const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk);

/* The last kernel's pairs of a token with itself (plan_op.diag_pairs)
 * are diag_pairs, not what its segments say: for a stand-in block of the
 * right lengths and pairs (stripe's, off the sequence's diagonal). */
void rotate_kernel_diag_pairs(rotate_emit *e, double diag_pairs);

/* Packed documents: the kernels (and their merges) emitted for this GPU's
 * step since `mark` (rotate_mark, taken before them) are one
 * variable-length call over cu_seqlens (sched_varlen_call).  The call has
 * one output for all its documents, as ring_flash_attn's varlen forward
 * has (a block_out per step): its kernels merge into what the GPU's
 * earlier calls gave, not into each other, so the GPU's first call merges
 * nothing. */
uint32_t rotate_mark(rotate_emit *e);
void rotate_varlen_call(rotate_emit *e, uint32_t mark);

/* Memory: the last kernel's keys are a torch.cat gather of `tokens`
 * tokens' K and V made for it (key ranges not contiguous in the buffer
 * held), freed after it. */
void rotate_kernel_gathers(rotate_emit *e, double tokens);

/* Linear attention on the query heads [head_off, head_off + heads) with
 * the KV of k: own (k is the GPU's own chunk): one intra-chunk task under
 * the workload's mask; else the right product, a state K^T V of k and its
 * product with q (forward), or their gradients (backward).  Outputs add,
 * so nothing is merged.  needed: false where the mask skips k (called all
 * the same: backward, the step still zeroes and forwards the dK/dV
 * accumulator it holds).  Backward also emits the step's memory-bound
 * accumulator work (zero_, adds; rotate.c linear_grad_steps). */
void rotate_linear(rotate_emit *e, uint32_t head_off, uint32_t heads, bool needed, bool own,
                   const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk);

/* Build the whole plan for w->pass (fwd, bwd, or fwd then bwd): each
 * step's transfer runs beside the step's kernels (plan_overlap); what the
 * hardware lets overlap is exec's to apply, so the plan is the same on
 * every topology. */
plan *rotate_build(const rotate_ops *ops, const void *self, const workload *w,
                   bool record_segs);

#endif
