/* exec_result: the result of a replay (exec.h): made empty, summed over
 * layers, freed.  What fills it is the replay (exec.c) and its parts. */
#include "exec.h"
#include "exec_mem.h"

exec_result *exec_result_new(uint32_t n_gpus, uint32_t n_chan, bool keep_trace) {
  exec_result *r = g_new0(exec_result, 1);
  r->n_gpus = n_gpus;
  r->n_chan = n_chan;
  r->gpu_compute_s = g_new0(double, n_gpus);
  r->gpu_comm_s = g_new0(double, n_gpus);
  r->gpu_finish_s = g_new0(double, n_gpus);
  r->gpu_imbalance_s = g_new0(double, n_gpus);
  r->chan_bytes = g_new0(double, n_chan);
  r->chan_busy_s = g_new0(double, n_chan);
  if (keep_trace) {
    r->spans = g_array_new(FALSE, FALSE, sizeof(exec_span));
    r->rates = g_array_new(FALSE, FALSE, sizeof(exec_rate));
    r->xfers = g_array_new(FALSE, FALSE, sizeof(exec_xfer));
  }
  return r;
}

void exec_result_add_layers(exec_result *acc, const exec_result *r, uint32_t count,
                            double shown_s) {
  g_assert(acc->n_gpus == r->n_gpus && acc->n_chan == r->n_chan);
  double k = count, before = acc->step_s;
  /* the count-th layer of this kind ends the chain so far */
  for (uint32_t g = 0; g < r->n_gpus; g++) {
    acc->gpu_compute_s[g] += k * r->gpu_compute_s[g];
    acc->gpu_comm_s[g] += k * r->gpu_comm_s[g];
    acc->gpu_imbalance_s[g] += k * r->gpu_imbalance_s[g];
    acc->gpu_finish_s[g] = before + (k - 1) * r->step_s + r->gpu_finish_s[g];
  }
  for (uint32_t c = 0; c < r->n_chan; c++) {
    acc->chan_bytes[c] += k * r->chan_bytes[c];
    acc->chan_busy_s[c] += k * r->chan_busy_s[c];
  }
  acc->step_s += k * r->step_s;
  acc->compute_s += k * r->compute_s;
  acc->comm_s += k * r->comm_s;
  acc->exposed_s += k * r->exposed_s;
  acc->imbalance_s += k * r->imbalance_s;
  acc->exposed_fixed_s += k * r->exposed_fixed_s;
  acc->exposed_host_s += k * r->exposed_host_s;
  acc->last_gpu = r->last_gpu;
  acc->flops += k * r->flops;
  compute_lookup_merge(&acc->conf, &r->conf);
  acc->events += r->events;
  acc->flows += r->flows;
  acc->bundles += r->bundles;
  acc->solves += r->solves;
  acc->tasks += r->tasks;
  if (acc->spans && r->spans)
    for (guint i = 0; i < r->spans->len; i++) {
      exec_span sp = g_array_index(r->spans, exec_span, i);
      sp.t0_s += shown_s;
      sp.t1_s += shown_s;
      g_array_append_val(acc->spans, sp);
    }
  if (acc->rates && r->rates)
    for (guint i = 0; i < r->rates->len; i++) {
      exec_rate x = g_array_index(r->rates, exec_rate, i);
      x.t_s += shown_s;
      g_array_append_val(acc->rates, x);
    }
  if (acc->xfers && r->xfers)
    for (guint i = 0; i < r->xfers->len; i++) {
      exec_xfer x = g_array_index(r->xfers, exec_xfer, i);
      x.t0_s += shown_s;
      x.t1_s += shown_s;
      g_array_append_val(acc->xfers, x);
    }
  exec_mem_add_layers(acc, r, shown_s);
}

void exec_result_free(exec_result *r) {
  if (!r) return;
  g_free(r->gpu_compute_s); g_free(r->gpu_comm_s); g_free(r->gpu_finish_s);
  g_free(r->gpu_imbalance_s);
  g_free(r->chan_bytes); g_free(r->chan_busy_s);
  if (r->spans) g_array_free(r->spans, TRUE);
  if (r->rates) g_array_free(r->rates, TRUE);
  if (r->xfers) g_array_free(r->xfers, TRUE);
  exec_mem_result_free(r);
  g_free(r);
}
