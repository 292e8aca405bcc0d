/* rotate_buf: the buffers of a rotate plan (rotate.h), as ring_flash_attn
 * allocates them (zhuzilin/ring-flash-attention, ring_flash_attn.py):
 *
 * forward: each step's send_recv allocates the next KV chunk (`next_k`,
 * `next_v`) while the held one is attended and sent on (double
 * buffering: two chunks in flight besides the local K and V, which the
 * caller holds); each flash kernel returns `block_out` (the inputs' dtype)
 * and `block_lse` (float32), which update_out_and_lse folds into the
 * float32 accumulators `out` and `lse`; the pass ends converting `out` to
 * the inputs' dtype (the output, sched_io).
 * backward: `block_dq_buffer`, `block_dk_buffer`, `block_dv_buffer` (the
 * inputs' dtype) live through the pass; float32 accumulators `dq`, and per
 * step `dk`, `dv` (the step's gradient plus the arrived `next_dk`,
 * `next_dv`), which d_kv_comm sends on while the next arrives; flash
 * backward keeps a float32 dQ accumulator of its queries (`dq_accum`,
 * kernel workspace: flash-attention's mha_bwd allocates it for every call).
 * A GPU the causal mask skips at a step passes the arrived `next_dk` on
 * as its `dk` (no new tensor).  Linear layers: the forward state
 * K^T V of a step (`kv_state`, float32) lives until the product that
 * applies it. */
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
/* A pass begins: its tensors (sched_io) are declared. */
void rotate_buf_pass(rotate_buf *b, bool backward);
/* The pass's tensors (declared by rotate_buf_pass). */
const sched_io *rotate_buf_io(const rotate_buf *b);
/* Group `comm` moves the held KV (grads: the dK/dV accumulators) on. */
void rotate_buf_group(rotate_buf *b, uint32_t comm, bool grads);
/* Compute task `id` of a step (on its GPU, or every GPU: lockstep). */
void rotate_buf_kernel(rotate_buf *b, uint32_t id);
/* Merge `id` folds the last kernel's block into the accumulators. */
void rotate_buf_merge(rotate_buf *b, uint32_t id);
/* The step is over: what the KV group brought is held now. */
void rotate_buf_step_end(rotate_buf *b);
/* The pass is over: its outputs are written by each GPU's last compute. */
void rotate_buf_pass_end(rotate_buf *b);

#endif
