/* search_bound: lower bounds formed before simulating (search_bound.h). */
#include "search_bound.h"

#include "compute.h"
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

void search_attention_s(const sched_ops *s, const workload *w, const topology *t,
                        double out[2]) {
  layer_view view;
  layer_view_init(&view, w, t);
  out[0] = out[1] = 0;
  for (int k = 0; k < ATTN_KINDS; k++) {
    uint32_t count = layers_count(w, (attn_kind)k);
    if (!count) continue;
    workload a = layers_one(w, (attn_kind)k);
    a = layer_attention_workload(&a);
    plan *p = s->build(&a, &view.t, false);
    g_autofree double *all = g_new0(double, p->n_gpus);
    g_autofree double *fwd = g_new0(double, p->n_gpus);
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind != TASK_COMPUTE) continue;
      double d = compute_op_s(&t->compute, &x->op);
      bool forward = i < p->pass_barrier;
      for (uint32_t g = 0; g < p->n_gpus; g++)
        if (x->gpu == PLAN_ALL || x->gpu == g) {
          all[g] += d;
          if (forward) fwd[g] += d;
        }
    }
    double most = 0, again = 0;
    for (uint32_t g = 0; g < p->n_gpus; g++) {
      most = MAX(most, all[g]);
      again = MAX(again, all[g] + fwd[g]);
    }
    out[0] += count * most;
    out[1] += count * again;
    plan_free(p);
  }
  layer_view_clear(&view);
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

double search_step_bound_s(const workload *w, const topology *t, const double attn[2],
                           double ingress_Bps) {
  double mbs = w->micro_batches > 1 ? w->micro_batches : 1;
  return mbs * (search_layer_ops_s(w, t) + attn[w->recompute == RECOMPUTE_FULL]) +
         search_tp_wait_s(w, ingress_Bps);
}
