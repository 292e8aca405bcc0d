/* verdict: winner, margins and reasons of a point group. */
#include "verdict.h"

#include <string.h>

const char *verdict_busiest_kind(const topology *t, const sim_result *r) {
  const char *kind = "-";
  double best = 0;
  for (uint32_t c = 0; c < r->r->n_chan; c++) {
    double u = sim_util(t, r->r, c);
    if (u > best) {
      best = u;
      kind = topo_chan(t, c)->kind;
    }
  }
  return kind;
}

char *verdict_reason(const topology *t, const sim_result *r, const sim_result *best) {
  const exec_result *x = r->r;
  double step = x->step_s, mean = 0;
  /* a zero step has no shares to compare: none of the causes applies */
  if (!(step > 0)) return g_strdup("no time: nothing to do");
  for (uint32_t g = 0; g < x->n_gpus; g++) mean += x->gpu_compute_s[g] / x->n_gpus;
  /* imbalance: the last GPU waiting on others' compute (through the
   * transfers between, exec.h), or the busiest GPU computing more than the
   * mean (what a balanced layout would save) */
  double spread = x->compute_s - mean;
  double e = x->exposed_s / step;
  double i = (x->imbalance_s > spread ? x->imbalance_s : spread) / step;
  /* no group ever had a transfer in flight (--no-comm, or one GPU) */
  bool no_comm = !(x->comm_s > 0);
  if (e < VERDICT_MINOR && i < VERDICT_MINOR) {
    if (best && best != r && best->r->compute_s > 0 &&
        x->compute_s > (1 + VERDICT_MINOR / 2) * best->r->compute_s)
      return g_strdup_printf("compute-bound: %.2fx the compute of %s",
                             x->compute_s / best->r->compute_s, best->pt.sched->name);
    return g_strdup(no_comm ? "compute-bound: no communication"
                            : "compute-bound: communication hidden");
  }
  double ratio = mean > 0 ? x->compute_s / mean : 0;
  /* waits on others' compute where every GPU has about as much to do: a
   * dependency chain (LASP's state hand-off), not uneven work */
  if (i >= e && x->imbalance_s > spread && ratio < 1 + VERDICT_MINOR / 2)
    return g_strdup_printf("serialized: %.0f%% of the step waiting on other GPUs' compute in "
                           "turn (busiest GPU computes %.2fx the mean)", 100 * i, ratio);
  if (i >= e) return g_strdup_printf("load imbalance: busiest GPU computes %.2fx the mean", ratio);
  /* exposed time is flights, launch and group issue costs, and kernel
   * issue (exec.h): the largest names the cause; with no transfer ever in
   * flight it is all kernel issue */
  double host = x->exposed_host_s, fixed = x->exposed_fixed_s;
  double flight = x->exposed_s - host - fixed;
  if (no_comm || (host >= fixed && host >= flight))
    return g_strdup_printf("host-bound: %.0f%% of the step waiting on kernel issue",
                           100 * (no_comm ? x->exposed_s : host) / step);
  /* transfers that moved no bytes over any channel cost their launch only */
  const char *kind = verdict_busiest_kind(t, r);
  if (fixed >= flight || !strcmp(kind, "-")) kind = "launch and issue costs";
  return g_strdup_printf("communication-bound on %s: %.0f%% of the step exposed", kind, 100 * e);
}

/* Step times within 0.05% are a tie: the table shows 3 digits of margin. */
static bool tie(const sim_result *a, const sim_result *b) {
  return a->r->step_s <= b->r->step_s * (1 + 5e-4);
}

/* The n/a rows' schedulers, "; n/a: ulysses, tasp" (empty: none). */
static void append_na(GString *s, sim_result *const *rows, guint n) {
  guint k = 0;
  for (guint i = 0; i < n; i++)
    if (!rows[i]->r)
      g_string_append_printf(s, "%s%s", k++ ? ", " : s->len ? "; n/a: " : "n/a: ",
                             rows[i]->pt.sched->name);
}

/* The rows that ran and do not fit in memory: "; does not fit: allgather
 * (96.2 GiB > 78.0 GiB usable)" (empty: none). */
static void append_unfit(GString *s, sim_result *const *rows, guint n) {
  guint k = 0;
  for (guint i = 0; i < n; i++)
    if (rows[i]->r && !sim_fits(rows[i])) {
      g_autofree char *why = sim_unfit_text(rows[i]);
      g_string_append_printf(s, "%s%s (does not fit: %s)", k++ ? ", " : s->len ? "; " : "",
                             rows[i]->pt.sched->name, why);
    }
}

char *verdict_line(const topology *t, sim_result *const *all, guint n_all) {
  if (n_all == 0) return g_strdup("");
  /* the rows that ran and fit in memory, sorted by step time, row order on
   * ties (insertion sort: stable); n/a rows and rows that do not fit are
   * named at the end, never ranked */
  g_autofree const sim_result **o = g_new(const sim_result *, n_all);
  guint n = 0;
  for (guint i = 0; i < n_all; i++) {
    if (!all[i]->r || !sim_fits(all[i])) continue;
    guint j = n++;
    while (j > 0 && o[j - 1]->r->step_s > all[i]->r->step_s) {
      o[j] = o[j - 1];
      j--;
    }
    o[j] = all[i];
  }
  GString *s = g_string_new(NULL);
  if (n == 0) {
    bool ran = false;
    for (guint i = 0; i < n_all; i++) ran |= all[i]->r != NULL;
    g_string_append(s, ran ? "no scheduler fits in memory" : "no scheduler can run this point");
    append_unfit(s, all, n_all);
    append_na(s, all, n_all);
    return g_string_free(s, FALSE);
  }
  guint ties = 1;
  while (ties < n && tie(o[ties], o[0])) ties++;
  for (guint k = 0; k < ties; k++)
    g_string_append_printf(s, "%s%s", k == 0 ? "" : k + 1 == ties ? " and " : ", ",
                           o[k]->pt.sched->name);
  g_autofree char *why = verdict_reason(t, o[0], NULL);
  g_string_append_printf(s, " %s (%s)", n == 1 ? "only" : ties > 1 ? "tie" : "fastest", why);
  for (guint k = ties; k < n; k++) {
    g_autofree char *w = verdict_reason(t, o[k], o[0]);
    double margin = sim_speedup(o[k]->r->step_s, o[0]->r->step_s) - 1;
    g_string_append_printf(s, "%s %s +%.1f%% (%s)", k > ties ? "," : ";", o[k]->pt.sched->name,
                           100 * margin, w);
  }
  append_unfit(s, all, n_all);
  append_na(s, all, n_all);
  return g_string_free(s, FALSE);
}
