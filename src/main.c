/* tasp-sim: command line.  Parses options and calls the library. */
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "scenario.h"
#include "sim.h"

static int fail(const char *msg) {
  fprintf(stderr, "tasp-sim: error: %s\n", msg);
  return 2;
}

int main(int argc, char **argv) {
  /* option strings are owned here and freed on every return */
  g_autofree char *topology = NULL, *sched = NULL, *seq = NULL, *sp = NULL, *heads = NULL,
                  *kv_heads = NULL, *head_dim = NULL, *batch = NULL, *dtype = NULL,
                  *mask = NULL, *pass = NULL, *tasp_cycles = NULL, *grad_dtype = NULL,
                  *usp_ulysses = NULL, *attention = NULL;
  g_autofree char *csv = NULL, *trace = NULL, *links = NULL, *shard = NULL;
  gboolean ulysses_fused = FALSE;
  gboolean quiet = FALSE, version = FALSE, no_compute = FALSE, no_comm = FALSE;
  gint jobs = 0;
  GOptionEntry entries[] = {
      {"topology", 't', 0, G_OPTION_ARG_STRING, &topology,
       "Topology file, or the name of a bundled one (h100x8, mi300x8, ...)", "FILE"},
      {"sched", 0, 0, G_OPTION_ARG_STRING, &sched, "Schedulers, comma separated", "LIST"},
      {"seq", 0, 0, G_OPTION_ARG_STRING, &seq, "Sequence lengths (32K,128K,1M)", "LIST"},
      {"sp", 0, 0, G_OPTION_ARG_STRING, &sp, "SP degrees (2,4,8)", "LIST"},
      {"heads", 0, 0, G_OPTION_ARG_STRING, &heads, "Query heads", "N"},
      {"kv-heads", 0, 0, G_OPTION_ARG_STRING, &kv_heads, "Key/value heads", "N"},
      {"head-dim", 0, 0, G_OPTION_ARG_STRING, &head_dim, "Head dimension", "N"},
      {"batch", 0, 0, G_OPTION_ARG_STRING, &batch, "Batch size", "N"},
      {"dtype", 0, 0, G_OPTION_ARG_STRING, &dtype, "bf16, fp16, fp32 or fp8", "TYPE"},
      {"grad-dtype", 0, 0, G_OPTION_ARG_STRING, &grad_dtype,
       "dK/dV accumulators moved in backward: fp32 (default, as ring_flash_attn), bf16 or fp16",
       "TYPE"},
      {"mask", 0, 0, G_OPTION_ARG_STRING, &mask, "full, causal, or both (full,causal)", "MASK"},
      {"pass", 0, 0, G_OPTION_ARG_STRING, &pass, "fwd, bwd or fwdbwd", "PASS"},
      {"tasp-cycles", 0, 0, G_OPTION_ARG_STRING, &tasp_cycles,
       "TASP's cycles as vertex orders, instead of the ones tasp-sim finds", "0-1-2-3,0-3-2-1"},
      {"usp-ulysses", 0, 0, G_OPTION_ARG_STRING, &usp_ulysses,
       "USP's Ulysses degree (all-to-all groups inside it, ring across); default: the largest "
       "that fits in a node and divides the heads", "N"},
      {"ulysses-fused", 0, 0, G_OPTION_ARG_NONE, &ulysses_fused,
       "Ulysses moves Q, K and V in one all-to-all instead of three calls", NULL},
      {"attention", 0, 0, G_OPTION_ARG_STRING, &attention,
       "softmax or linear: the attention of every layer of the model", "KIND"},
      {"csv", 0, 0, G_OPTION_ARG_FILENAME, &csv, "Write the results as CSV (- for stdout)", "FILE"},
      {"links", 0, 0, G_OPTION_ARG_FILENAME, &links,
       "Write per-channel bytes, busy time and utilisation as CSV (- for stdout)", "FILE"},
      {"trace", 0, 0, G_OPTION_ARG_FILENAME, &trace,
       "Write a Chrome/Perfetto trace of the timeline", "FILE"},
      {"no-compute", 0, 0, G_OPTION_ARG_NONE, &no_compute, "What-if: compute takes no time", NULL},
      {"no-comm", 0, 0, G_OPTION_ARG_NONE, &no_comm, "What-if: communication takes no time", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_INT, &jobs, "Threads for a sweep (default: one per CPU)", "N"},
      {"shard", 0, 0, G_OPTION_ARG_STRING, &shard,
       "Run shard I of N (0-based): every N-th point group, for spreading a sweep", "I/N"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "Print no table", NULL},
      {"version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) ctx = g_option_context_new("[SCENARIO.json]");
  g_option_context_set_summary(ctx,
      "Predicts the time of one attention layer under sequence-parallel schedulers\n"
      "(ring, zigzag, tasp, ulysses, usp, tokenring, allgather, ...) on a GPU\n"
      "interconnect. Options override the scenario file.");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_autoptr(GError) err = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &err)) return fail(err->message);
  scenario_overrides ov = {topology, sched, seq, sp, mask, pass, dtype, grad_dtype,
                           heads, kv_heads, head_dim, batch, tasp_cycles, usp_ulysses,
                           ulysses_fused, attention};
  if (version) {
    printf("tasp-sim %s\n", TASP_VERSION);
    return 0;
  }
  if (argc > 2) return fail("expected at most one scenario file");
  if (no_compute && no_comm) return fail("--no-compute and --no-comm together leave nothing");
  if (jobs < 0) return fail("option '--jobs': expected a whole number >= 0");
  sim_opts so = {.exec = {.no_compute = no_compute, .no_comm = no_comm, .keep_trace = trace != NULL},
                 .jobs = (unsigned)jobs};
  if (shard) {
    unsigned i, n;
    char tail;
    if (sscanf(shard, "%u/%u%c", &i, &n, &tail) != 2 || n == 0 || i >= n)
      return fail("option '--shard': expected I/N with 0 <= I < N, such as 0/4");
    so.shard = i;
    so.shards = n;
  }

  scenario *s = scenario_load(argc == 2 ? argv[1] : NULL, &ov, &err);
  if (!s) return fail(err->message);
  so.progress = isatty(STDERR_FILENO) && s->points->len >= 50 && !quiet;
  GPtrArray *results = sim_run_all(s, &so);
  report_ctx rc = {s, results};

  int status = 0;
  bool to_stdout = (csv && !strcmp(csv, "-")) || (links && !strcmp(links, "-"));
  if (!quiet && !to_stdout) report_table(stdout, &rc);
  if (csv && !report_write(csv, report_csv, &rc, &err)) status = 1;
  if (!status && links && !report_write(links, report_links, &rc, &err)) status = 1;
  if (!status && trace && !report_write(trace, report_trace, &rc, &err)) status = 1;
  if (status) fprintf(stderr, "tasp-sim: error: %s\n", err->message);
  g_ptr_array_free(results, TRUE);
  scenario_free(s);
  return status;
}
