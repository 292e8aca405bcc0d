/* lasp_common: chunks, linear tasks and state sums for LASP and LASP-2. */
#include "lasp_common.h"

plan_seg lasp_chunk(const workload *w, uint32_t r) {
  plan_seg s[2];
  sched_layout(w->seq_len, r, w->gpus, false, s);
  return s[0];
}

plan_seg lasp_before(const workload *w, uint32_t r) {
  return (plan_seg){0, lasp_chunk(w, r).start};
}

plan_seg lasp_after(const workload *w, uint32_t r) {
  plan_seg c = lasp_chunk(w, r);
  return (plan_seg){c.start + c.len, w->seq_len - c.start - c.len};
}

plan_seg lasp_all(const workload *w) { return (plan_seg){0, w->seq_len}; }

/* The states a GPU keeps (its running state M, the prefix or total it
 * applies), one float32 D x D state per head: written in forward, cached
 * for backward (LASP's lasp_naive.py saves KV for backward), read there. */
static void state_use(const sched_ctx *c, uint32_t id, bool backward) {
  plan *p = c->p;
  if (c->io->saved == UINT32_MAX)
    c->io->saved = backward ? plan_buf_input(p, PLAN_ALL, workload_state_bytes(c->w),
                                             "kv state (float32, from forward)")
                            : plan_buf_new(p, PLAN_ALL, workload_state_bytes(c->w),
                                           "kv state (float32)");
  if (backward) plan_buf_reads(p, id, c->io->saved);
  else plan_buf_writes(p, id, c->io->saved);
}

uint32_t lasp_recv(const sched_ctx *c, uint32_t group, uint32_t gpu, double bytes,
                   const char *name) {
  uint32_t id = plan_buf_new(c->p, gpu, bytes, name);
  plan_buf_writes(c->p, group, id);
  return id;
}

uint32_t lasp_task(const sched_ctx *c, uint32_t r, uint32_t step, op_kind kind, bool backward,
                   const plan_seg *q, const plan_seg *k, int64_t after) {
  /* only the intra-chunk task is masked: a state's keys all precede (or,
   * bidirectional, need no mask for) the queries it is applied to */
  plan_op shape = sched_shape(c->w, kind == OP_LIN_INTRA && c->w->causal, backward);
  uint32_t id = plan_linear(c->p, r, step, &shape, kind, q, q ? 1 : 0, k, k ? 1 : 0);
  if (after >= 0) plan_dep(c->p, (uint32_t)after, id);
  state_use(c, id, backward);
  if (kind == OP_LIN_INTRA) sched_lin_intra_workspace(c->p, id);
  /* the chunk's own gradients are born in its intra-chunk kernel (`dq,
   * dk, dv = lin_intra_bwd(...)`), live beside its workspace; the
   * states' parts are added into them */
  if (kind == OP_LIN_INTRA && !backward) plan_buf_writes(c->p, id, c->io->o); /* `self.acc = ...` */
  if (kind == OP_LIN_INTRA && backward && c->io->dq != UINT32_MAX) {
    plan_buf_writes(c->p, id, c->io->dq);
    plan_buf_writes(c->p, id, c->io->dkv);
  }
  return id;
}

uint32_t lasp_sum(const sched_ctx *c, uint32_t r, uint32_t step, uint32_t states, int64_t after) {
  uint32_t id = plan_copy(c->p, r, step, (states + 1) / 2.0 * workload_state_bytes(c->w));
  if (after >= 0) plan_dep(c->p, (uint32_t)after, id);
  return id;
}

uint32_t lasp_grad_add(const sched_ctx *c, uint32_t r, uint32_t step, uint32_t tensors,
                       int64_t after) {
  const workload *w = c->w;
  double elems = (double)w->batch * lasp_chunk(w, r).len * w->heads * w->head_dim;
  uint32_t id = plan_copy(c->p, r, step, tensors * 3.0 * w->elem_bytes * elems);
  if (after >= 0) plan_dep(c->p, (uint32_t)after, id);
  return id;
}

bool lasp_check(const workload *w, const char *who, GError **err) {
  g_autofree char *why = g_strdup_printf("%s gives every GPU an equal contiguous chunk", who);
  return sched_check_divisible(w, 1, why, err);
}


