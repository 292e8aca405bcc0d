/* tasp-bench: how fast the simulator is.  Times, per point, the sweep of a
 * scenario and single TASP points at growing GPU counts, and prints events
 * and flows per second; then the construction of TASP's Hamiltonian
 * decompositions of K_n*.  Figures, not assertions: tests stay timing-free. */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sched/hamilton.h"
#include "scenario.h"
#include "sim.h"
#include "sizes.h"

static void bench_scenario(const char *file) {
  scenario_overrides ov = {0};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(file, &ov, &err);
  if (!s) { fprintf(stderr, "tasp-bench: %s\n", err->message); exit(2); }
  sim_opts so = {.jobs = 1};
  gint64 t0 = g_get_monotonic_time();
  GPtrArray *res = sim_run_all(s, &so);
  double wall = (double)(g_get_monotonic_time() - t0) * 1e-6;
  uint64_t events = 0, flows = 0;
  double slowest = 0;
  for (guint i = 0; i < res->len; i++) {
    sim_result *r = res->pdata[i];
    if (!r->r) continue; /* n/a: not run */
    events += r->r->events;
    flows += r->r->flows;
    if (r->wall_s > slowest) slowest = r->wall_s;
  }
  printf("sweep %-28s points %4u  wall %8.3f s (one thread)  per point %8.3f ms  "
         "slowest %8.3f ms  events/s %.3g  flows %" G_GUINT64_FORMAT "\n",
         file, res->len, wall, 1e3 * wall / res->len, 1e3 * slowest, events / wall, flows);
  g_ptr_array_free(res, TRUE);
  scenario_free(s);
}

/* The first point of the scenario the overrides make, run once. */
static sim_result *run_one(const scenario_overrides *ov) {
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, ov, &err);
  if (!s) { fprintf(stderr, "tasp-bench: %s\n", err->message); exit(2); }
  const scenario_point *pt = &g_array_index(s->points, scenario_point, 0);
  exec_opts eo = {0};
  sim_result *r = sim_run_point(s->topo, pt, &eo);
  scenario_free(s);
  return r;
}

static void bench_point(const char *topo, uint32_t gpus, const char *seq, const char *mask) {
  g_autofree char *sp = g_strdup_printf("%u", gpus);
  scenario_overrides ov = {.topology = topo, .sched = "tasp", .seq = seq, .sp = sp, .mask = mask};
  sim_result *r = run_one(&ov);
  printf("point tasp %-10s gpus %4u seq %-5s %-6s wall %8.3f s  events %10" G_GUINT64_FORMAT
         "  events/s %.3g  flows %" G_GUINT64_FORMAT "  bundles %" G_GUINT64_FORMAT
         "  max-min solves %" G_GUINT64_FORMAT "  step %.3f ms\n", topo, gpus, seq, mask,
         r->wall_s, r->r->events, r->r->events / r->wall_s, r->r->flows, r->r->bundles,
         r->r->solves, r->r->step_s * 1e3);
  sim_result_free(r);
}

/* One point in a process of its own, as a row of the scaling table:
 * wall seconds, CPU seconds (user and system), events, flows, bundles, max-min solves, the process's peak
 * resident memory (plan, network and all), and the predicted step.
 * extra: KEY=VALUE words; pass, attention and heads set the workload,
 * anything else is a topology field (--set). */
static void bench_row(const char *sched, const char *topo, const char *gpus, const char *seq,
                      const char *mask, char **extra, int n_extra) {
  g_autofree char **sets = g_new0(char *, n_extra + 1);
  int n_sets = 0;
  scenario_overrides ov = {.topology = topo, .sched = sched, .seq = seq, .sp = gpus,
                           .mask = mask, .strict = true};
  for (int i = 0; i < n_extra; i++) {
    const char *eq = strchr(extra[i], '=');
    if (eq && g_str_has_prefix(extra[i], "pass=")) ov.pass = eq + 1;
    else if (eq && g_str_has_prefix(extra[i], "attention=")) ov.attention = eq + 1;
    else if (eq && g_str_has_prefix(extra[i], "heads=")) ov.heads = eq + 1;
    else sets[n_sets++] = extra[i];
  }
  ov.set = n_sets ? sets : NULL;
  struct rusage ru0, ru;
  getrusage(RUSAGE_SELF, &ru0);
  sim_result *r = run_one(&ov);
  getrusage(RUSAGE_SELF, &ru);
  /* CPU seconds of the process while the point ran: on a shared machine
   * the wall time also counts the time other processes had the core */
  double cpu = (double)(ru.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru.ru_stime.tv_sec -
                        ru0.ru_stime.tv_sec) +
               1e-6 * (double)(ru.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru.ru_stime.tv_usec -
                               ru0.ru_stime.tv_usec);
  printf("| %-10s | %-9s | %-6s | %-6s | %5s | %9.3f | %8.3f | %10" G_GUINT64_FORMAT " | %11" G_GUINT64_FORMAT
         " | %8" G_GUINT64_FORMAT " | %7" G_GUINT64_FORMAT " | %7.0f | %9.3f |\n",
         sched, topo, mask, ov.pass ? ov.pass : "fwd", gpus, r->wall_s, cpu, r->r->events,
         r->r->flows, r->r->bundles, r->r->solves, ru.ru_maxrss / 1024.0, r->r->step_s * 1e3);
  sim_result_free(r);
}

/* The n-1 Hamiltonian cycles of K_n* (construction, then the check tasp
 * runs before use): the best of a few runs, as one run is a millisecond. */
static void bench_hamilton(uint32_t n) {
  double build = 1e9, check = 1e9;
  uint32_t k = 0;
  for (int rep = 0; rep < 5; rep++) {
    ham_decomp d;
    gint64 t0 = g_get_monotonic_time();
    k = ham_complete(n, &d);
    gint64 t1 = g_get_monotonic_time();
    gboolean ok = ham_verify(&d, NULL, NULL);
    gint64 t2 = g_get_monotonic_time();
    ham_clear(&d);
    if (!ok) { fprintf(stderr, "tasp-bench: K_%u* decomposition failed its check\n", n); exit(2); }
    build = MIN(build, (double)(t1 - t0) * 1e-3);
    check = MIN(check, (double)(t2 - t1) * 1e-3);
  }
  printf("hamilton K_%u*: %u cycles, construction %.3f ms, check %.3f ms\n", n, k, build, check);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--row") == 0) {
    if (argc < 7) {
      fprintf(stderr, "usage: tasp-bench --row SCHED TOPOLOGY GPUS SEQ MASK [KEY=VALUE...]\n"
                      "  (pass=, attention=, heads=: the workload; other keys: topology fields)\n");
      return 2;
    }
    bench_row(argv[2], argv[3], argv[4], argv[5], argv[6], argv + 7, argc - 7);
    return 0;
  }
  const char *scen = argc > 1 ? argv[1] : "scenarios/h100x8.json";
  bench_scenario(scen);
  bench_point("h100x8", 8, "128K", "causal");
  bench_point("h100x8x8", 64, "1M", "causal");
  bench_point("h100x8x32", 256, "1M", "causal");
  for (uint32_t n = 256; n <= 1024; n *= 2) bench_hamilton(n);
  return 0;
}
