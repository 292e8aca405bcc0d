/* rotate_buf: the buffers of a rotate plan (rotate.h), as ring_flash_attn
 * allocates them (zhuzilin/ring-flash-attention, ring_flash_attn.py,
 * zigzag_ring_flash_attn.py), and as calibrate.py's programs do where no
 * public code exists (TASP, Ring on linear layers):
 *
 * forward: each step's send_recv allocates the next KV chunk (`next_k`,
 * `next_v`) when it is issued, before the step's kernels (even where the
 * transfer waits for them), while the held one is attended and sent on;
 * the held one is referenced to the step's end (`k, v = next_k,
 * next_v`); each flash kernel returns `block_out` (the inputs' dtype) and
 * `block_lse` (float32), which update_out_and_lse folds into the float32
 * accumulators `out` and `lse` (the block's float32 copy and two float32
 * temporaries beside them); the pass's output is made after the loop,
 * the temporaries gone (plan_buf_writes_late).
 * backward: `block_dq_buffer`, `block_dk_buffer`, `block_dv_buffer` (the
 * inputs' dtype) live to the function's return; float32 `dq` from the
 * first block; after a step's last kernel a new float32 `dk, dv`
 * (`block_dk_buffer + next_dk`) beside the one sent last step and the
 * arriving `next_dk, next_dv`, which is dropped when the next send_recv
 * returns; a GPU the causal mask skips
 * sends the arrived one on.  Zigzag (in_place) adds into the arrived one
 * and receives into the one it sent; stripe receives so too and adds in
 * place only at its shifted steps (rotate_buf_grads_stripe).  Flash
 * backward keeps a float32 dQ
 * accumulator of its queries (`dq_accum`, kernel workspace).  On one ring
 * rank the float32 sums are still made.  Linear layers: the forward state
 * K^T V of a step (`kv_state`, float32) lives until the product that
 * applies it; calibrate.py LinRing's pair of receive buffers and three
 * float32 dK/dV accumulators live through the pass, a step's dq, dk, dv
 * through the next step's kernels; the causal intra-chunk kernel's
 * workspace is sched_lin_intra_workspace's. */
#ifndef TASP_ROTATE_BUF_H
#define TASP_ROTATE_BUF_H

#include "sched.h"

typedef struct rotate_buf rotate_buf;

/* kv_bytes: the KV chunk a GPU holds and passes on; grad_scale: bytes of
 * the dK/dV accumulators per KV byte; kv_name: what the received chunk is
 * called in the cited code (NULL: "next_k, next_v"); in_place: backward
 * adds into the received dK/dV and receives into the one it sent
 * (zigzag_ring_flash_attn), else makes a new sum each step (ring). */
rotate_buf *rotate_buf_new(plan *p, const workload *w, double kv_bytes, double grad_scale,
                           const char *kv_name, bool in_place);
void rotate_buf_free(rotate_buf *b);
/* Backward as stripe_flash_attn_backward (rotate_ops.grads_stripe): the
 * dK/dV received into the one sent last step; added into in place at a
 * step greater than the GPU's index, else a new sum. */
void rotate_buf_grads_stripe(rotate_buf *b);
/* The program holds K and V as two tensors, and so their receive buffers
 * (`next_k`, `next_v`), float32 dK/dV sums (`dk`, `dv`) and their receive
 * buffers (`next_dk`, `next_dv`): ring_flash_attn, and calibrate.py's USP
 * (USP.attend, attend_bwd), not one packed (B, c, 2, H, D) tensor each
 * (calibrate.py's Pass: ring, zigzag, TASP, stripe, double ring).  Each
 * tensor is a block of the caching allocator of its own (exec_alloc.h).
 * The block buffers `block_dk_buffer`, `block_dv_buffer` are two in every
 * program. */
void rotate_buf_kv_split(rotate_buf *b);
/* A pass begins: its tensors (sched_io) are declared. */
void rotate_buf_pass(rotate_buf *b, bool backward);
/* The pass's tensors (declared by rotate_buf_pass). */
const sched_io *rotate_buf_io(const rotate_buf *b);
/* Group `comm` moves the held KV (grads: the dK/dV accumulators) on. */
void rotate_buf_group(rotate_buf *b, uint32_t comm, bool grads);
/* Group `comm`, issued beside a step's kernels, moves the held KV to
 * where it is attended some steps later (rotate_ops.ahead) into a new
 * buffer, returned; rotate_buf_hold makes it the held one then. */
uint32_t rotate_buf_ahead(rotate_buf *b, uint32_t comm);
void rotate_buf_hold(rotate_buf *b, uint32_t buf);
/* Backward: group `comm` moves on the dK/dV sums that the last group
 * brought, into a new buffer (rotate_ops.grads_then_ahead); from then on
 * the next group receives into a new buffer. */
void rotate_buf_grads_ahead(rotate_buf *b, uint32_t comm);
/* Backward: the dK/dV sums made from now on are in the inputs' dtype. */
void rotate_buf_grads_cast(rotate_buf *b);
/* Compute task `id` of a step (on its GPU, or every GPU: lockstep). */
void rotate_buf_kernel(rotate_buf *b, uint32_t id);
/* Merge `id` folds the last kernel's block into the accumulators. */
void rotate_buf_merge(rotate_buf *b, uint32_t id);
/* The step is over: what the KV group brought is held now. */
void rotate_buf_step_end(rotate_buf *b);
/* The pass is over: its outputs are written by each GPU's last compute. */
void rotate_buf_pass_end(rotate_buf *b);

#endif
