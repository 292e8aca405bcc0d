/* tasp-sim: command line.  Parses options (cli.c) and calls the library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "cli.h"
#include "names.h"
#include "outputs.h"
#include "report.h"
#include "scenario.h"
#include "search.h"
#include "sim.h"
#include "sweep.h"
#include "trace.h"

/* Bad input (options, files read) is status 2; failing to write, 1. */
int main(int argc, char **argv) {
  g_auto(cli_opts) o = {0};
  g_autoptr(GError) err = NULL;
  atexit(outputs_close_stdout); /* output lost on stdout: status 1 */
  if (argc > 1 && !strcmp(argv[1], "search")) return search_main(argc - 1, argv + 1);
  if (!cli_parse(argc, argv, &o, &err)) return outputs_fail(err, 2);
  if (o.help) {
    g_autofree char *h = cli_help();
    fputs(h, stdout);
    return 0;
  }
  if (o.list) {
    names_list(stdout);
    return 0;
  }
  if (o.version) {
    printf("tasp-sim %s\n", TASP_VERSION);
    return 0;
  }
  /* every scenario of a --set sweep is loaded (and so checked) before
   * anything runs; the topologies held together stay within
   * TOPO_MAX_BYTES, each load checked against what the others left */
  g_autoptr(set_sweep) sweep = sweep_parse(o.set, true, &err);
  if (!sweep) return outputs_fail(err, 2);
  g_autoptr(GPtrArray) scens = g_ptr_array_new_with_free_func((GDestroyNotify)scenario_free);
  uint64_t held = 0;
  for (guint k = 0; k < sweep->n; k++) {
    g_auto(GStrv) assign = sweep_assignments(sweep, k);
    scenario_overrides ov = cli_overrides(&o);
    ov.set = assign;
    ov.topo_max_bytes = held < TOPO_MAX_BYTES ? TOPO_MAX_BYTES - held : 1;
    scenario *s = scenario_load(o.scenario, &ov, &err);
    if (!s) return outputs_fail(err, 2);
    held += topo_bytes(s->topo);
    g_ptr_array_add(scens, s);
  }
  const scenario *s0 = scens->pdata[0];
  if (o.dump_topology) {
    for (guint k = 0; k < scens->len; k++)
      topo_dump(stdout, ((const scenario *)scens->pdata[k])->topo);
    return 0;
  }
  g_autoptr(outputs) outs = outputs_new();
  if ((o.csv && !outputs_add(outs, "--csv", o.csv, report_csv, &err)) ||
      (o.links && !outputs_add(outs, "--links", o.links, report_links, &err)) ||
      (o.memory && !outputs_add(outs, "--memory", o.memory, report_memory, &err)) ||
      (o.trace && !outputs_add(outs, "--trace", o.trace, NULL, &err)) ||
      !outputs_check_input(outs, s0->file, "scenario file", &err) ||
      !outputs_check_input(outs, s0->topo->file, "topology file", &err))
    return outputs_fail(err, 2);
  /* the memory every point will take, checked before any is built */
  unsigned jobs = (unsigned)o.jobs;
  g_autofree char *sp_from = o.sp || !s0->file ? g_strdup("command line: option '--sp'")
                                                : g_strdup_printf("%s: field 'sp'", s0->file);
  if (!budget_check(scens, o.trace != NULL, sp_from, &jobs, &err))
    return outputs_fail(err, 2);
  sim_opts so = {.exec = {.no_compute = o.no_compute, .no_comm = o.no_comm || o.alone,
                          .alone = o.alone, .per_flow = o.per_flow,
                          .keep_trace = o.trace != NULL},
                 .jobs = jobs, .shard = o.shard_i, .shards = o.shard_n};
  /* the trace is written as points finish, not held for the whole sweep */
  trace_writer *tw = NULL;
  if (o.trace) {
    FILE *tf = outputs_stream(outs, "--trace", &err);
    if (!tf) return outputs_fail(err, 1);
    so.on_point = trace_writer_point;
    so.user = tw = trace_writer_new(tf);
  }
  /* on a terminal only; the line appears once a run has taken a second */
  so.progress = isatty(STDERR_FILENO) && !o.quiet;
  /* one table per topology of the sweep; the files get every row */
  g_autoptr(GPtrArray) runs = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
  g_autoptr(GPtrArray) all = g_ptr_array_new();
  for (guint k = 0; k < scens->len; k++) {
    GPtrArray *results = sim_run_all(scens->pdata[k], &so);
    g_ptr_array_add(runs, results);
    report_ctx rc = {scens->pdata[k], results, o.links_summary};
    if (!o.quiet && !outputs_to_stdout(outs)) report_table(stdout, &rc);
    else if (!o.quiet) report_notes(stderr, &rc);
    for (guint i = 0; i < results->len; i++) g_ptr_array_add(all, results->pdata[i]);
  }
  /* an empty shard is not an error (a launcher may start more shards than
   * a sweep has groups), but it is said: its outputs hold headers only */
  guint groups = 0;
  for (guint k = 0; k < scens->len; k++) groups = MAX(groups, scenario_groups(scens->pdata[k]));
  if (o.shard_n && all->len == 0)
    fprintf(stderr, "tasp-sim: note: shard %u/%u is empty: the sweep has %u point group%s "
            "(seq x SP x mask x pass), so only shards below %u/%u hold points\n", o.shard_i,
            o.shard_n, groups, groups == 1 ? "" : "s", groups, o.shard_n);
  if (tw) trace_writer_end(tw);
  report_ctx rc = {s0, all, o.links_summary};
  if (!outputs_write(outs, &rc, &err)) return outputs_fail(err, 1);
  return 0;
}
