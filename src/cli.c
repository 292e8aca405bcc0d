/* cli: option table, parsing and the checks that need no input file. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonio.h"
#include "names.h"
#include "sim.h"

static bool opt_error(GError **err, const char *option, const char *what) {
  g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '%s': %s", option, what);
  return false;
}

/* The options, their fields in o; owned by the caller. */
static GOptionEntry *option_table(cli_opts *o) {
  GOptionEntry entries[] = {
      {"topology", 't', 0, G_OPTION_ARG_STRING, &o->topology,
       "Topology file, or the name of a bundled one (see below)", "FILE"},
      {"sched", 0, 0, G_OPTION_ARG_STRING, &o->sched,
       "Schedulers, comma separated (see below), or all: every one that runs the model's "
       "layers (default " SCENARIO_DEFAULT_SCHEDS ")", "LIST"},
      {"seq", 0, 0, G_OPTION_ARG_STRING, &o->seq,
       "Sequence lengths (32K,128K,1M; default " SCENARIO_DEFAULT_SEQ ")", "LIST"},
      {"sp", 0, 0, G_OPTION_ARG_STRING, &o->sp,
       "SP degrees: GPUs sharing one sequence (2,4,8; default all GPUs)", "LIST"},
      {"model", 0, 0, G_OPTION_ARG_STRING, &o->model,
       "The model: a bundled preset (see below) or a model file; --heads and the other "
       "shape options override its fields", "NAME|FILE"},
      {"heads", 0, 0, G_OPTION_ARG_STRING, &o->heads, "Query heads", "N"},
      {"kv-heads", 0, 0, G_OPTION_ARG_STRING, &o->kv_heads, "Key/value heads", "N"},
      {"head-dim", 0, 0, G_OPTION_ARG_STRING, &o->head_dim, "Head dimension", "N"},
      {"batch", 0, 0, G_OPTION_ARG_STRING, &o->batch, "Batch size", "N"},
      {"dtype", 0, 0, G_OPTION_ARG_STRING, &o->dtype, "bf16, fp16, fp32 or fp8", "TYPE"},
      {"grad-dtype", 0, 0, G_OPTION_ARG_STRING, &o->grad_dtype,
       "dK/dV accumulators moved in backward: fp32 (default, as ring_flash_attn), bf16 or fp16",
       "TYPE"},
      {"mask", 0, 0, G_OPTION_ARG_STRING, &o->mask,
       "full, causal, or both (full,causal; default " SCENARIO_DEFAULT_MASK ")", "MASK"},
      {"docs", 0, 0, G_OPTION_ARG_STRING, &o->docs,
       "Packed documents: their lengths in the sequence (2K,59K,4K,63K; K = 1024), adding up "
       "to it, or drawn to fill it (lognormal:mean=8K,sigma=1.0,seed=1 or "
       "uniform:min=1K,max=16K,seed=1; pad=P rounds each up to a multiple of P); the mask "
       "holds within each document (ring, zigzag, ulysses and their "
       "TransformerEngine names; the others refuse)",
       "LIST"},
      {"pass", 0, 0, G_OPTION_ARG_STRING, &o->pass,
       "fwd, bwd or fwdbwd, or a list (default " SCENARIO_DEFAULT_PASS "); --scope model "
       "takes fwdbwd alone, its default", "PASS"},
      {"attention", 0, 0, G_OPTION_ARG_STRING, &o->attention,
       "softmax or linear: the attention of every layer of the model", "KIND"},
      {"scope", 0, 0, G_OPTION_ARG_STRING, &o->scope,
       "What step_ms covers: attention (default: the attention of the model's layers), "
       "layer (one decoder layer around it) or model (the training step); layer and model "
       "need a --model", "SCOPE"},
      {"tp", 0, 0, G_OPTION_ARG_STRING, &o->tp,
       "Tensor-parallel degree around SP (Megatron with sequence parallelism; layer scope; "
       "TP x SP GPUs, TP innermost; default 1)", "N"},
      {"dp", 0, 0, G_OPTION_ARG_STRING, &o->dp,
       "Data-parallel replicas (scope model; TP x SP x DP GPUs, DP outermost; default 1)", "N"},
      {"zero", 0, 0, G_OPTION_ARG_STRING, &o->zero,
       "ZeRO stage 0-3 over the SP x DP ranks (scope model; default 0)", "N"},
      {"recompute", 0, 0, G_OPTION_ARG_STRING, &o->recompute,
       "Activation recomputation: none (default), selective or full (scope model)", "MODE"},
      {"micro-batches", 0, 0, G_OPTION_ARG_STRING, &o->micro_batches,
       "Micro-batches per step (scope model): gradients accumulated, reduced after the last; "
       "default 1", "N"},
      {"placement", 0, 0, G_OPTION_ARG_STRING, &o->placement,
       "Where TP, SP and DP lie, innermost (inside a node) first (layer and model scopes; "
       "default tp,sp,dp)", "ORDER"},
      {"global-batch-tokens", 0, 0, G_OPTION_ARG_STRING, &o->global_batch_tokens,
       "Tokens per optimizer step (scope model; 4M): micro-batches = tokens / (batch x seq x "
       "DP), which must be whole", "TOKENS"},
      {"precision", 0, 0, G_OPTION_ARG_STRING, &o->precision,
       "Precision recipe (layer and model scopes): megatron (default: bf16 weights and "
       "gradients, float32 main weights), amp (PyTorch AMP: float32 weights and gradients, "
       "bf16 copies made by autocast in each forward), bf16 (bf16 weights, gradients and "
       "optimizer states) or fp8 (megatron with TransformerEngine's FP8 linear layers, priced "
       "from the topology's compute.fp8_gemm_table)", "RECIPE"},
      {"whole-steps", 0, 0, G_OPTION_ARG_NONE, &o->whole_steps, SIM_WHOLE_STEPS_HELP, NULL},
      {"elementwise", 0, 0, G_OPTION_ARG_STRING, &o->elementwise,
       "Element-wise ops of the layer: fused (default, as Megatron/TransformerEngine) or "
       "unfused (as plain PyTorch)", "MODE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  /* then the schedulers' own options, as they declare them */
  GOptionEntry tail[] = {
      {"set", 0, 0, G_OPTION_ARG_STRING_ARRAY, &o->set,
       "Override a topology field, read as in the file (generator.nic_gbps=100Gb/s); a comma "
       "list sweeps it (generator.nic_gbps=100Gb/s,400Gb/s)", "KEY=VALUE"},
      {"baseline", 0, 0, G_OPTION_ARG_STRING, &o->baseline,
       "What speedup_vs_best compares with: best (default), ring or zigzag", "NAME"},
      {"csv", 0, 0, G_OPTION_ARG_FILENAME, &o->csv, "Write the results as CSV (- for stdout)",
       "FILE"},
      {"links", 0, 0, G_OPTION_ARG_FILENAME, &o->links,
       "Write per-channel bytes, busy time and utilisation as CSV (- for stdout)", "FILE"},
      {"memory", 0, 0, G_OPTION_ARG_FILENAME, &o->memory,
       "Write per point and GPU the peak memory and the buffers live at it, largest first "
       "(- for stdout); memory counts the scope (--scope: the attention layer alone by "
       "default)", "FILE"},
      {"links-summary", 0, 0, G_OPTION_ARG_NONE, &o->links_summary,
       "Table: a links line for every scheduler of every group", NULL},
      {"trace", 0, 0, G_OPTION_ARG_FILENAME, &o->trace,
       "Write a Chrome/Perfetto trace of the timeline", "FILE"},
      {"dump-topology", 0, 0, G_OPTION_ARG_NONE, &o->dump_topology,
       "Print the resolved topology (channels, capacities, costs, compute model) and exit",
       NULL},
      {"no-compute", 0, 0, G_OPTION_ARG_NONE, &o->no_compute, "What-if: compute takes no time",
       NULL},
      {"no-comm", 0, 0, G_OPTION_ARG_NONE, &o->no_comm,
       "What-if: no communication: transfers take no time, and nothing they would bring is added in", NULL},
      {"alone", 0, 0, G_OPTION_ARG_NONE, &o->alone,
       "What-if: every GPU alone, as its program with the communication calls taken out "
       "runs: no transfers, no GPU waits on another, nothing a transfer would bring is added in",
       NULL},
      {"per-flow", 0, 0, G_OPTION_ARG_NONE, &o->per_flow,
       "Solve every flow on its own instead of bundles of alike flows (the reference model; "
       "slower, same answers)",
       NULL},
      {"strict", 0, 0, G_OPTION_ARG_NONE, &o->strict,
       "A point a scheduler cannot run is an error (exit 2), not a row that says why", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_INT, &o->jobs,
       "Threads for a sweep (default: one per CPU, at most 256)", "N"},
      {"shard", 0, 0, G_OPTION_ARG_STRING, &o->shard,
       "Run shard I of N (0-based): every N-th point group, for spreading a sweep", "I/N"},
      {"list", 0, 0, G_OPTION_ARG_NONE, &o->list, "List schedulers and bundled topologies",
       NULL},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "Print no table", NULL},
      {"version", 0, 0, G_OPTION_ARG_NONE, &o->version, "Print the version", NULL},
      {"help", 'h', 0, G_OPTION_ARG_NONE, &o->help, "Show this help", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  GArray *all = g_array_new(TRUE, TRUE, sizeof(GOptionEntry));
  g_array_append_vals(all, entries, G_N_ELEMENTS(entries) - 1);
  const sched_opt *const *opts = sched_options();
  for (int i = 0; opts[i]; i++) {
    g_autofree char *users = sched_option_users(opts[i]);
    g_autofree char *help = g_strdup_printf("%s (%s; scenario key %s)", opts[i]->help, users,
                                            sched_option_field(opts[i]));
    bool flag = opts[i]->type == SCHED_OPT_FLAG;
    /* the text lives as long as the program, as GLib's option table needs */
    GOptionEntry e = {sched_option_flag(opts[i]) + 2, 0, 0,
                      flag ? G_OPTION_ARG_NONE : G_OPTION_ARG_STRING,
                      flag ? (gpointer)&o->opt_flag[i] : (gpointer)&o->opt_text[i],
                      g_intern_string(help), opts[i]->metavar};
    g_array_append_val(all, e);
  }
  g_array_append_vals(all, tail, G_N_ELEMENTS(tail));
  return (GOptionEntry *)g_array_free(all, FALSE);
}

/* The schedulers' options given, as "key=value" for the scenario. */
static char **given_sched_opts(const cli_opts *o) {
  GPtrArray *a = g_ptr_array_new();
  const sched_opt *const *opts = sched_options();
  for (int i = 0; opts[i]; i++) {
    if (opts[i]->type == SCHED_OPT_FLAG && o->opt_flag[i])
      g_ptr_array_add(a, g_strconcat(opts[i]->key, "=true", NULL));
    else if (opts[i]->type != SCHED_OPT_FLAG && o->opt_text[i])
      g_ptr_array_add(a, g_strconcat(opts[i]->key, "=", o->opt_text[i], NULL));
  }
  g_ptr_array_add(a, NULL);
  return (char **)g_ptr_array_free(a, FALSE);
}

static GOptionContext *context(cli_opts *o) {
  g_autofree GOptionEntry *entries = option_table(o);
  /* Text is taken as the bytes given (FILENAME) and checked to be UTF-8 by
   * check_utf8, which names the option: GLib would convert STRING values
   * from the locale's charset, refusing "\xff" (and "é" under LANG=C) with
   * a message that names no option. */
  for (GOptionEntry *e = entries; e->long_name; e++) {
    if (e->arg == G_OPTION_ARG_STRING) e->arg = G_OPTION_ARG_FILENAME;
    else if (e->arg == G_OPTION_ARG_STRING_ARRAY) e->arg = G_OPTION_ARG_FILENAME_ARRAY;
  }
  GOptionContext *ctx = g_option_context_new("[SCENARIO.json]");
  g_option_context_set_summary(ctx,
      /* names no scheduler: the list below (names_list) is the registry's own */
      "Predicts the time of attention layers under sequence-parallel schedulers\n"
      "(listed below) on a GPU interconnect. Options override the scenario file.");
  /* --help is an ordinary option here: GLib's would print and exit */
  g_option_context_set_help_enabled(ctx, FALSE);
  g_option_context_add_main_entries(ctx, entries, NULL);
  return ctx;
}

/* The values of the text options (STRING in the table: all but file
 * names) are UTF-8; a value that is not is refused naming its option. */
static bool check_utf8(cli_opts *o, GError **err) {
  g_autofree GOptionEntry *es = option_table(o);
  for (const GOptionEntry *e = es; e->long_name; e++) {
    char *one[2] = {NULL, NULL};
    char **vals = e->arg == G_OPTION_ARG_STRING ? (one[0] = *(char **)e->arg_data, one)
                  : e->arg == G_OPTION_ARG_STRING_ARRAY ? *(char ***)e->arg_data : NULL;
    for (char **v = vals; v && *v; v++) {
      if (g_utf8_validate(*v, -1, NULL)) continue;
      g_autoptr(GString) shown = g_string_new(NULL);
      for (const unsigned char *c = (const unsigned char *)*v; *c; c++)
        if (*c >= 0x80 || *c < 0x20) g_string_append_printf(shown, "\\x%02x", *c);
        else g_string_append_c(shown, (char)*c);
      g_autofree char *option = g_strconcat("--", e->long_name, NULL);
      g_autofree char *m = g_strdup_printf("expected UTF-8 text, got \"%s\"", shown->str);
      return opt_error(err, option, m);
    }
  }
  return true;
}

bool cli_parse(int argc, char **argv, cli_opts *o, GError **err) {
  memset(o, 0, sizeof *o);
  g_autoptr(GOptionContext) ctx = context(o);
  /* a copy: GLib removes what it parses */
  g_auto(GStrv) args = g_new0(char *, (size_t)argc + 1);
  for (int i = 0; i < argc; i++) args[i] = g_strdup(argv[i]);
  g_autoptr(GError) e = NULL;
  if (!g_option_context_parse_strv(ctx, &args, &e)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: %s", e->message);
    return false;
  }
  if (!check_utf8(o, err)) return false;
  o->sched_opts = given_sched_opts(o);
  guint rest = g_strv_length(args);
  if (rest > 2) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: expected at most one scenario file, got \"%s\" and \"%s\"",
                args[1], args[2]);
    return false;
  }
  if (rest == 2) o->scenario = g_strdup(args[1]);
  if (o->help || o->version || o->list) return true;
  if (o->no_compute && (o->no_comm || o->alone))
    return opt_error(err, o->alone ? "--alone" : "--no-comm",
                     "--no-compute and no communication together leave nothing");
  if (o->jobs < 0 || o->jobs > CLI_MAX_JOBS) {
    g_autofree char *m = g_strdup_printf("expected a whole number from 0 (one per CPU) to %d, "
                                         "got %d", CLI_MAX_JOBS, o->jobs);
    return opt_error(err, "--jobs", m);
  }
  if (o->shard) {
    unsigned i, n;
    char tail;
    if (sscanf(o->shard, "%u/%u%c", &i, &n, &tail) != 2 || n == 0 || i >= n)
      return opt_error(err, "--shard", "expected I/N with 0 <= I < N, such as 0/4");
    o->shard_i = i;
    o->shard_n = n;
  }
  for (char **a = o->set; a && *a; a++)
    if (!strchr(*a, '=') || **a == '=') {
      g_autofree char *m = g_strdup_printf("expected KEY=VALUE, got \"%s\"", *a);
      return opt_error(err, "--set", m);
    }
  if (o->baseline && strcmp(o->baseline, "best") && strcmp(o->baseline, "ring") &&
      strcmp(o->baseline, "zigzag")) {
    g_autofree char *m = g_strdup_printf("expected best, ring or zigzag, got \"%s\"",
                                         o->baseline);
    return opt_error(err, "--baseline", m);
  }
  return true;
}

void cli_opts_clear(cli_opts *o) {
  char **strs[] = {&o->topology, &o->sched, &o->seq, &o->sp, &o->heads, &o->kv_heads,
                   &o->head_dim, &o->batch, &o->dtype, &o->mask, &o->pass,
                   &o->grad_dtype, &o->attention, &o->model, &o->csv, &o->trace,
                   &o->links, &o->memory, &o->shard, &o->baseline,
                   &o->scenario, &o->scope, &o->tp, &o->elementwise, &o->dp, &o->zero,
                   &o->recompute, &o->micro_batches, &o->placement,
                   &o->precision, &o->global_batch_tokens, &o->docs};
  for (size_t i = 0; i < G_N_ELEMENTS(strs); i++) g_clear_pointer(strs[i], g_free);
  g_clear_pointer(&o->set, g_strfreev);
  for (size_t i = 0; i < G_N_ELEMENTS(o->opt_text); i++) g_clear_pointer(&o->opt_text[i], g_free);
  g_clear_pointer(&o->sched_opts, g_strfreev);
}

scenario_overrides cli_overrides(const cli_opts *o) {
  return (scenario_overrides){.topology = o->topology, .sched = o->sched, .seq = o->seq,
                              .sp = o->sp, .mask = o->mask, .pass = o->pass,
                              .dtype = o->dtype, .grad_dtype = o->grad_dtype,
                              .heads = o->heads, .kv_heads = o->kv_heads,
                              .head_dim = o->head_dim, .batch = o->batch, .model = o->model,
                              .sched_opts = o->sched_opts, .baseline = o->baseline,
                              .set = o->set, .attention = o->attention, .strict = o->strict,
                              .topology_only = o->dump_topology,
                              .scope = o->scope, .tp = o->tp, .elementwise = o->elementwise,
                              .dp = o->dp, .zero = o->zero, .recompute = o->recompute,
                              .micro_batches = o->micro_batches, .placement = o->placement,
                              .precision = o->precision,
                              .global_batch_tokens = o->global_batch_tokens, .docs = o->docs,
                              /* --memory lists the buffers live at the peak: an
                               * extended step has none (sim.h) */
                              .whole_steps = o->whole_steps || o->memory};
}

char *cli_help(void) {
  cli_opts o = {0};
  g_autoptr(GOptionContext) ctx = context(&o);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  names_list(f);
  fputs("\nExamples:\n"
        "  tasp-sim scenarios/h100x8.json                     the table, a verdict per group\n"
        "  tasp-sim --topology mi300x8 --seq 32K,1M --sp 8 --sched ring,tasp\n"
        "  tasp-sim --model llama3-70b --topology h100x8 --seq 128K   every layer's attention\n"
        "  tasp-sim scenarios/h100x8.json --csv out.csv --links links.csv --trace t.json\n"
        "  tasp-sim --topology h100x8x2 --set comm.flow_cap_gbps=200 --dump-topology\n"
        "  tasp-sim --topology h100x8x2 --seq 128K --set generator.nic_gbps=100Gb/s,400Gb/s\n"
        "  tasp-sim search --model llama3-70b --topology h100x8x4 --seq 256K   which "
        "configuration to run (tasp-sim search --help)\n",
        f);
  fclose(f);
  g_option_context_set_description(ctx, buf);
  free(buf);
  return g_option_context_get_help(ctx, TRUE, NULL);
}
