/* usp_mem: USP's memory around a ring (usp_mem.h). */
#include "usp_mem.h"

/* yunchang's attention function saves its head-scattered Q, K, V (and
 * the ring's output and log-sum-exp) for the backward, as DeepSpeed's
 * does (ulysses.c): the forward keeps the scattered tensors; the backward
 * holds them (a backward alone: as one input) until the ring's backward
 * has returned, and frees them then (read by the gathers, which follow).
 * With u = 1 there is no scatter, but ring_flash_attn's autograd function
 * makes K and V contiguous (`k.contiguous()` of the packed KV's views,
 * two tensors) and saves those: declared by the epilogue on the pass's
 * first and last kernels. */
int64_t usp_mem_prologue(const void *self, plan *p, bool backward, int64_t after,
                         const sched_io *io) {
  const ring_geom *g = self;
  const workload *w = g->w;
  struct usp_mem *m = g->mem;
  g->held->n = 0;
  m->first_task = p->tasks->len;
  int64_t r = ulysses_scatter_heads(p, w, g->u, backward, 0, after, io, g->held);
  if (!backward && g->u >= 2) {
    m->saved = *g->held;
    for (uint32_t i = 0; i < m->saved.n; i++) sched_io_save(p, w, m->saved.id[i]);
    return r;
  }
  if (!backward) return r;
  if (m->saved.n == 0 && g->u < 2) {
    /* the contiguous K and V, two tensors (below) */
    m->saved.id[m->saved.n++] =
        plan_buf_saved_input(p, PLAN_ALL, g->kv_bytes / 2, "k made contiguous (saved by forward)");
    m->saved.id[m->saved.n++] =
        plan_buf_saved_input(p, PLAN_ALL, g->kv_bytes / 2, "v made contiguous (saved by forward)");
  } else if (m->saved.n == 0) {
    double rows = (double)w->batch * w->seq_len * w->heads / w->gpus;
    double bytes = 2 * rows * w->head_dim * w->elem_bytes + rows * 4.0 + g->kv_bytes;
    m->saved.id[m->saved.n++] =
        plan_buf_saved_input(p, PLAN_ALL, bytes, "saved by forward: q, k, v, out, lse on H/u heads");
  }
  for (uint32_t i = 0; g->u >= 2 && i < m->saved.n && g->held->n < G_N_ELEMENTS(g->held->id); i++)
    g->held->id[g->held->n++] = m->saved.id[i];
  return r;
}

/* The gather sends the ring's result (rotate_buf's accumulators, converted
 * into the pass's output) and keeps the scattered tensors until then. */
int64_t usp_mem_epilogue(const void *self, plan *p, bool backward, int64_t last) {
  const ring_geom *g = self;
  struct usp_mem *m = g->mem;
  const workload *w = g->w;
  ulysses_bufs src = {{0}, 0};
  if (!backward && g->u >= 2) {
    /* the ring's bf16 output and log-sum-exp on H/u heads, made as its
     * last kernel ends, two tensors (ring_flash_attn_forward's
     * `out = out.to(q.dtype)` and `lse = lse.squeeze(dim=-1).transpose(1,
     * 2)`, calibrate.py USP.attend lines 1300-1302: the log-sum-exp a view
     * of the last float32 running one, which the ring's accumulators give
     * up then), so two blocks of the caching allocator (the log-sum-exp
     * often in its small pool); only the output is gathered back
     * (calibrate.py Ulysses.run line 1155, `self.to_seq(o)`; yunchang's
     * LongContextAttention returns the output alone), and both are saved
     * for the backward (line 1156, `self.saved = (qg, kg, vg, o, lse)`;
     * ring_flash_attn's `ctx.save_for_backward(q, k, v, out, softmax_lse)`) */
    double rows = (double)w->batch * w->seq_len * w->heads / w->gpus;
    uint32_t ro = plan_buf_new(p, PLAN_ALL, rows * w->head_dim * w->elem_bytes,
                               "ring out on H/u heads");
    uint32_t rl = plan_buf_new(p, PLAN_ALL, rows * 4.0, "ring lse on H/u heads (float32)");
    int64_t done = -1;
    for (uint32_t gpu = 0; gpu < p->n_gpus; gpu++) {
      int64_t t = p->last_compute[gpu];
      if (t < 0 || t == done) continue;
      done = t;
      plan_buf_writes_late(p, (uint32_t)t, ro);
      plan_buf_writes_late(p, (uint32_t)t, rl);
    }
    sched_io_save(p, w, ro);
    sched_io_save(p, w, rl);
    src.id[src.n++] = ro;
    for (uint32_t i = 0; i < 2; i++)
      if (m->saved.n < G_N_ELEMENTS(m->saved.id)) m->saved.id[m->saved.n++] = i ? rl : ro;
  }
  int64_t out = ulysses_gather_heads(p, w, g->u, backward, g->ranks, &src, g->held);
  if (g->u >= 2) return out >= 0 ? out : last;
  int64_t done = -1;
  if (!backward) {
    /* u = 1: the contiguous K, V, made before the first kernel, two
     * tensors (ring_flash_attn's `k = k.contiguous()`, `v =
     * v.contiguous()`; calibrate.py Ulysses.run's to_heads of each) */
    uint32_t kv[2] = {plan_buf_new(p, PLAN_ALL, g->kv_bytes / 2, "k made contiguous (ring_flash_attn)"),
                      plan_buf_new(p, PLAN_ALL, g->kv_bytes / 2, "v made contiguous (ring_flash_attn)")};
    g_autofree bool *seen = g_new0(bool, p->n_gpus);
    for (uint32_t t = m->first_task; t < p->tasks->len; t++) {
      const plan_task *k = plan_task_at(p, t);
      if (k->kind != TASK_COMPUTE) continue;
      if (k->gpu == PLAN_ALL ? seen[0] : seen[k->gpu]) continue;
      for (int i = 0; i < 2; i++) plan_buf_writes(p, t, kv[i]);
      if (k->gpu == PLAN_ALL) break;
      seen[k->gpu] = true;
    }
    m->saved.n = 0;
    for (int i = 0; i < 2; i++) {
      sched_io_save(p, g->w, kv[i]);
      m->saved.id[m->saved.n++] = kv[i];
    }
  }
  /* ... and referenced to the end of every GPU's last compute of the pass
   * (forward: kept for the backward; backward: freed as it returns, after
   * the last add) */
  for (uint32_t gpu = 0; gpu < p->n_gpus; gpu++) {
    int64_t t = p->last_compute[gpu];
    if (t < 0 || t == done) continue;
    done = t;
    for (uint32_t i = 0; i < m->saved.n; i++) plan_buf_reads_late(p, (uint32_t)t, m->saved.id[i]);
  }
  return last;
}

