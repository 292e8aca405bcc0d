/* exec_result: the result of a replay (exec.h): made empty, summed over
 * layers, freed.  What fills it is the replay (exec.c) and its parts. */
#include <math.h>

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

static double ext(double a, double b, double more) { return b + more * (b - a); }

static double *ext_each(const double *a, const double *b, uint32_t n, double more) {
  if (!a || !b) return NULL;
  double *x = g_new(double, n);
  for (uint32_t i = 0; i < n; i++) x[i] = ext(a[i], b[i], more);
  return x;
}

void exec_result_extend_peaks(exec_result *r, const exec_result *a, const exec_result *b,
                              double more, bool by_phase) {
  g_assert(a->n_gpus == b->n_gpus && r->n_gpus == b->n_gpus);
  uint32_t n = b->n_gpus;
  g_free(r->gpu_peak_bytes);
  g_free(r->gpu_peak_phase_bytes);
  r->gpu_peak_phase_bytes = NULL;
  r->peak_bytes = 0;
  r->peak_gpu = 0;
  r->gpu_peak_bytes = ext_each(a->gpu_peak_bytes, b->gpu_peak_bytes, n, more);
  /* each phase's peak grows with the layers at its own rate (the loss's
   * at the forward's end, the gradients' at the backward's): extended
   * apart, the largest is the step's */
  if (by_phase && a->gpu_peak_phase_bytes && b->gpu_peak_phase_bytes && r->gpu_peak_bytes) {
    r->gpu_peak_phase_bytes = ext_each(a->gpu_peak_phase_bytes, b->gpu_peak_phase_bytes,
                                       (uint32_t)PLAN_PHASES * n, more);
    for (uint32_t g = 0; g < n; g++) {
      r->gpu_peak_bytes[g] = 0;
      for (int ph = 0; ph < PLAN_PHASES; ph++)
        r->gpu_peak_bytes[g] = MAX(r->gpu_peak_bytes[g], r->gpu_peak_phase_bytes[(size_t)ph * n + g]);
    }
  }
  for (uint32_t g = 0; g < n && r->gpu_peak_bytes; g++)
    if (r->gpu_peak_bytes[g] > r->peak_bytes) {
      r->peak_bytes = r->gpu_peak_bytes[g];
      r->peak_gpu = g;
    }
}

exec_result *exec_result_extend(const exec_result *a, const exec_result *b, double more,
                                bool by_phase) {
  g_assert(a->n_gpus == b->n_gpus && a->n_chan == b->n_chan);
  exec_result *r = g_new0(exec_result, 1);
  uint32_t n = r->n_gpus = b->n_gpus, c = r->n_chan = b->n_chan;
  r->step_s = ext(a->step_s, b->step_s, more);
  r->compute_s = ext(a->compute_s, b->compute_s, more);
  r->comm_s = ext(a->comm_s, b->comm_s, more);
  r->exposed_s = ext(a->exposed_s, b->exposed_s, more);
  r->imbalance_s = ext(a->imbalance_s, b->imbalance_s, more);
  r->exposed_fixed_s = ext(a->exposed_fixed_s, b->exposed_fixed_s, more);
  r->exposed_host_s = ext(a->exposed_host_s, b->exposed_host_s, more);
  r->flops = ext(a->flops, b->flops, more);
  r->last_gpu = b->last_gpu;
  r->gpu_compute_s = ext_each(a->gpu_compute_s, b->gpu_compute_s, n, more);
  r->gpu_comm_s = ext_each(a->gpu_comm_s, b->gpu_comm_s, n, more);
  r->gpu_finish_s = ext_each(a->gpu_finish_s, b->gpu_finish_s, n, more);
  r->gpu_imbalance_s = ext_each(a->gpu_imbalance_s, b->gpu_imbalance_s, n, more);
  r->chan_bytes = ext_each(a->chan_bytes, b->chan_bytes, c, more);
  r->chan_busy_s = ext_each(a->chan_busy_s, b->chan_busy_s, c, more);
  r->conf = a->conf;
  compute_lookup_merge(&r->conf, &b->conf);
  r->events = a->events + b->events;
  r->flows = a->flows + b->flows;
  r->bundles = a->bundles + b->bundles;
  r->solves = a->solves + b->solves;
  r->tasks = a->tasks + b->tasks;
  exec_result_extend_peaks(r, a, b, more, by_phase);
  /* the caching allocator's segments do not repeat layer by layer (a
   * layer's requests reuse what earlier ones left cached, or do not) */
  r->peak_reserved_bytes = NAN;
  r->mem_errors = a->mem_errors + b->mem_errors;
  return r;
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
