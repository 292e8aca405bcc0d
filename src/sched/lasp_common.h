/* lasp_common: what LASP and LASP-2 share.
 *
 * Both hold contiguous chunks (GPU r: tokens [r·c, (r+1)·c)) and move
 * linear-attention states, never keys or values: a D x D float32 state per
 * head (workload_state_bytes).  A task applying a state summarises every
 * key of its source segment, so the source is written down as one token
 * range (all chunks before r; all chunks after r; the whole sequence). */
#ifndef TASP_SCHED_LASP_COMMON_H
#define TASP_SCHED_LASP_COMMON_H

#include "sched.h"


/* GPU r's chunk; the tokens before it; after it; all of them. */
plan_seg lasp_chunk(const workload *w, uint32_t r);
plan_seg lasp_before(const workload *w, uint32_t r);
plan_seg lasp_after(const workload *w, uint32_t r);
plan_seg lasp_all(const workload *w);

/* A linear task of `kind` on GPU r over all heads; q or k may be NULL
 * (no segment).  Waits for `after` (-1 none) besides its stream. */
uint32_t lasp_task(const sched_ctx *c, uint32_t r, uint32_t step, op_kind kind, bool backward,
                   const plan_seg *q, const plan_seg *k, int64_t after);
/* Summing `states` states into one on GPU r (memory-bound: reads each,
 * writes one; priced as a copy of (states + 1)/2 states' bytes, the mean
 * of what it reads and writes); after `after` (-1 none). */
uint32_t lasp_sum(const sched_ctx *c, uint32_t r, uint32_t step, uint32_t states, int64_t after);

/* Adding `tensors` bf16 gradients of GPU r's chunk (B x c x H x D each)
 * into others in place, as the measured programs do (dQ += dQ from the
 * prefix; dK += , dV += from the suffix): an elementwise add reads two
 * elements and writes one, 3 x elem_bytes each, priced as a copy of those
 * bytes (calibration/h200x2-linfid lingpu-n1.jsonl: add_dq).  After
 * `after` (-1 none). */
uint32_t lasp_grad_add(const sched_ctx *c, uint32_t r, uint32_t step, uint32_t tensors,
                       int64_t after);

/* Memory: every linear task uses the GPU's cached states (plan_buf.h: a
 * float32 D x D state per head, written in forward, read in backward);
 * lasp_recv declares what group `group` receives on GPU gpu (PLAN_ALL:
 * on each of its GPUs), `bytes` per GPU. */
uint32_t lasp_recv(const sched_ctx *c, uint32_t group, uint32_t gpu, double bytes,
                   const char *name);

/* Contiguous chunks, one per GPU. */
bool lasp_check(const workload *w, const char *who, GError **err);
#endif
