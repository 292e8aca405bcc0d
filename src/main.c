/* tasp-sim: command line.  Parses options (cli.c) and calls the library. */
#include <stdio.h>
#include <unistd.h>

#include "cli.h"
#include "names.h"
#include "outputs.h"
#include "report.h"
#include "scenario.h"
#include "sim.h"

/* Bad input (options, files read) is status 2; failing to write, 1. */
static int fail(const GError *err, int status) {
  fprintf(stderr, "tasp-sim: error: %s\n", err->message);
  return status;
}

int main(int argc, char **argv) {
  g_auto(cli_opts) o = {0};
  g_autoptr(GError) err = NULL;
  if (!cli_parse(argc, argv, &o, &err)) return fail(err, 2);
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
  scenario_overrides ov = cli_overrides(&o);
  scenario *s = scenario_load(o.scenario, &ov, &err);
  if (!s) return fail(err, 2);
  if (o.dump_topology) {
    topo_dump(stdout, s->topo);
    scenario_free(s);
    return 0;
  }
  g_autoptr(outputs) outs = outputs_new();
  if ((o.csv && !outputs_add(outs, "--csv", o.csv, report_csv, &err)) ||
      (o.links && !outputs_add(outs, "--links", o.links, report_links, &err)) ||
      (o.trace && !outputs_add(outs, "--trace", o.trace, report_trace, &err)) ||
      !outputs_check_input(outs, s->file, "scenario file", &err) ||
      !outputs_check_input(outs, s->topo->file, "topology file", &err)) {
    scenario_free(s);
    return fail(err, 2);
  }
  sim_opts so = {.exec = {.no_compute = o.no_compute, .no_comm = o.no_comm,
                          .keep_trace = o.trace != NULL},
                 .jobs = (unsigned)o.jobs, .shard = o.shard_i, .shards = o.shard_n};
  so.progress = isatty(STDERR_FILENO) && s->points->len >= 50 && !o.quiet;
  GPtrArray *results = sim_run_all(s, &so);
  report_ctx rc = {s, results, o.links_summary};

  int status = 0;
  if (!o.quiet && !outputs_to_stdout(outs)) report_table(stdout, &rc);
  else if (!o.quiet) report_notes(stderr, &rc);
  if (!outputs_write(outs, &rc, &err)) status = fail(err, 1);
  g_ptr_array_free(results, TRUE);
  scenario_free(s);
  return status;
}
