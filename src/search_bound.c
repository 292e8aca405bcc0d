/* search_bound: lower bounds formed before simulating (search_bound.h). */
#include "search_bound.h"

#include <math.h>

#include "compute.h"
#include "plan_buf.h"
#include "layer.h"
#include "layers.h"

double search_layer_ops_s(const workload *w, const topology *t) {
  const compute_model *m = &t->compute;
  layer_dims d = layer_dims_of(w);
  double fwd = 0, bwd = 0;
  for (int k = 0; k < LAYER_OPS; k++) {
    plan_op f = compute_layer_op(&d, (layer_op)k, false), b = compute_layer_op(&d, (layer_op)k, true);
    fwd += compute_op_s(m, &f);
    bwd += compute_op_s(m, &b);
  }
  return layers_total(w) * (fwd + bwd + (w->recompute == RECOMPUTE_FULL ? fwd : 0));
}

double search_plan_kept_bytes(const plan *p, uint32_t held, double *per_gpu) {
  uint32_t n = p->n_gpus, nb = plan_buf_count(p);
  for (uint32_t g = 0; g < n; g++) per_gpu[g] = 0;
  if (p->pass_barrier == UINT32_MAX) return 0;
  /* the sides a compute task touches a copy on, bit 1 the forward's, 2
   * the backward's: side[b] for a buffer of one GPU, and for one on every
   * GPU what tasks of every GPU touch; on[b][g] what a task of GPU g
   * alone touches of a buffer on every GPU (made when first needed) */
  g_autofree uint8_t *side = g_new0(uint8_t, nb);
  g_autofree uint8_t **on = g_new0(uint8_t *, nb);
  for (uint32_t u = 0; u < plan_buf_use_count(p); u++) {
    const plan_buf_use *use = plan_buf_use_at(p, u);
    const plan_task *x = plan_task_at(p, use->task);
    if (x->kind != TASK_COMPUTE) continue;
    uint8_t bit = use->task < p->pass_barrier ? 1 : 2;
    const plan_buf *b = plan_buf_at(p, use->buf);
    /* the one GPU a use is on, where one of buffer, task and use names it */
    uint32_t g = b->gpu != PLAN_ALL ? b->gpu : x->gpu != PLAN_ALL ? x->gpu : use->gpu;
    if ((x->gpu != PLAN_ALL && x->gpu != g) || (use->gpu != PLAN_ALL && use->gpu != g))
      continue; /* a copy of another GPU than the task's: not ordered by its stream */
    if (b->gpu != PLAN_ALL || g == PLAN_ALL) {
      side[use->buf] |= bit;
      continue;
    }
    if (!on[use->buf]) on[use->buf] = g_new0(uint8_t, n);
    on[use->buf][g] |= bit;
  }
  if (held != UINT32_MAX) side[held] = 3;
  for (uint32_t i = 0; i < nb; i++) {
    const plan_buf *b = plan_buf_at(p, i);
    if (b->gpu != PLAN_ALL) {
      if (side[i] == 3) per_gpu[b->gpu] += b->bytes;
      continue;
    }
    for (uint32_t k = 0; k < n; k++)
      if ((side[i] | (on[i] ? on[i][k] : 0)) == 3) per_gpu[k] += b->bytes;
    g_free(on[i]);
  }
  double most = 0;
  for (uint32_t g = 0; g < n; g++) most = MAX(most, per_gpu[g]);
  return most;
}

void search_attention_of(const sched_ops *s, const workload *w, const topology *t,
                         search_attention *out) {
  layer_view view;
  layer_view_init(&view, w, t);
  search_attention_on(s, w, t, &view.t, out);
  layer_view_clear(&view);
}

void search_attention_on(const sched_ops *s, const workload *w, const topology *t,
                         const topology *view, search_attention *out) {
  *out = (search_attention){.kept_layer_bytes = INFINITY};
  g_autofree double *kept_all = NULL;
  for (int k = 0; k < ATTN_KINDS; k++) {
    uint32_t count = layers_count(w, (attn_kind)k);
    if (!count) continue;
    workload a = layers_one(w, (attn_kind)k);
    a = layer_attention_workload(&a);
    plan *p = s->build(&a, view, false);
    g_autofree double *all = g_new0(double, p->n_gpus);
    g_autofree double *fwd = g_new0(double, p->n_gpus);
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind != TASK_COMPUTE) continue;
      double d = compute_op_s(&t->compute, &x->op);
      bool forward = i < p->pass_barrier;
      /* a per-GPU task adds to its GPU alone (not a loop over every GPU
       * per task: a causal plan has a task per GPU and step) */
      uint32_t g0 = x->gpu == PLAN_ALL ? 0 : x->gpu;
      uint32_t g1 = x->gpu == PLAN_ALL ? p->n_gpus : x->gpu + 1;
      for (uint32_t g = g0; g < g1; g++) {
        all[g] += d;
        if (forward) fwd[g] += d;
      }
    }
    double most = 0, again = 0;
    for (uint32_t g = 0; g < p->n_gpus; g++) {
      most = MAX(most, all[g]);
      again = MAX(again, all[g] + fwd[g]);
    }
    out->s[0] += count * most;
    out->s[1] += count * again;
    /* the kinds' plans are of the same SP GPUs (lb_open_ranks appends
     * each onto them): their kept bytes add up per GPU */
    g_assert(p->n_gpus == w->gpus);
    g_autofree double *kept = g_new(double, p->n_gpus);
    out->kept_layer_bytes = MIN(out->kept_layer_bytes, search_plan_kept_bytes(p, p->attn_out, kept));
    if (!kept_all) kept_all = g_new0(double, p->n_gpus);
    for (uint32_t g = 0; g < p->n_gpus; g++) kept_all[g] += count * kept[g];
    for (uint32_t g = 0; g < p->n_gpus; g++) out->kept_bytes = MAX(out->kept_bytes, kept_all[g]);
    plan_free(p);
  }
  if (isinf(out->kept_layer_bytes)) out->kept_layer_bytes = 0;
}

double search_tp_ingress_Bps(const workload *w, const topology *t) {
  uint32_t tp = layer_tp(w), sp = w->gpus, dp = layer_dp(w);
  if (tp < 2) return 0;
  double most = 0;
  uint32_t r[TOPO_MAX_HOPS];
  /* seen[c] == stamp: channel c already counted for the GPU at hand */
  g_autofree uint32_t *seen = g_new0(uint32_t, t->channels->len);
  uint32_t stamp = 0;
  for (uint32_t d = 0; d < dp; d++)
    for (uint32_t s = 0; s < sp; s++)
      for (uint32_t k = 0; k < tp; k++) {
        uint32_t g = layer_gpu(w, k, s, d);
        double in = 0;
        stamp++;
        for (uint32_t j = 0; j < tp; j++) {
          if (j == k) continue;
          uint32_t n = topo_route_fill(t, layer_gpu(w, j, s, d), g, r);
          if (!n || seen[r[n - 1]] == stamp) continue;
          seen[r[n - 1]] = stamp;
          in += topo_chan(t, r[n - 1])->cap_Bps;
        }
        most = MAX(most, in);
      }
  return most;
}

double search_tp_wait_s(const workload *w, double ingress_Bps) {
  uint32_t tp = layer_tp(w);
  if (w->scope != SCOPE_MODEL || tp < 2 || layer_micro_batches(w) > 1 || !(ingress_Bps > 0))
    return 0;
  layer_dims d = layer_dims_of(w);
  /* lb_act_bytes of a TP rank's share of the SP rank's tokens */
  double shard = d.tokens / tp * d.hidden * d.elem_bytes;
  return layers_total(w) * 4.0 * (tp - 1) * shard / ingress_Bps;
}

double search_step_bound_s(const workload *w, const topology *t, const search_attention *attn,
                           double ingress_Bps) {
  double mbs = w->micro_batches > 1 ? w->micro_batches : 1;
  return mbs * (search_layer_ops_s(w, t) + attn->s[w->recompute == RECOMPUTE_FULL]) +
         search_tp_wait_s(w, ingress_Bps);
}

double search_memory_bound_bytes(const workload *w, const search_attention *attn) {
  double resident = layer_resident_bytes(w);
  if (w->recompute != RECOMPUTE_FULL) return resident + attn->kept_bytes;
  return MAX(resident, resident - layer_resident_gone_bytes(w) + attn->kept_layer_bytes);
}
