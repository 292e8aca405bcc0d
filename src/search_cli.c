/* search_cli: `tasp-sim search`, its options and its outputs (search.h).
 *
 *   tasp-sim search --model llama3-70b --topology h100x8x4 --seq 256K
 *       [--gpus 32] [--global-batch-tokens 4M] [--gpu-memory 80GiB]
 *       [--sched LIST] [--top K] [--objective tokens|step] [--mask causal|full]
 *       [--precision megatron|amp|bf16|fp8]
 *       [--set KEY=VALUE] [--csv FILE] [--shard I/N] [--jobs N] [SCENARIO.json]
 *   tasp-sim search --merge A.csv B.csv ... [--csv FILE]
 *
 * The model, topology, length and mask are read as the main command reads
 * them (scenario_load: a scenario file's keys, options over them; the
 * precision is the main command's --precision or job.precision); the
 * GPU memory is the topology's field (--gpu-memory V is --set
 * gpu_memory_gib=V). */
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "jsonio.h"
#include "outputs.h"
#include "search.h"
#include "sweep.h"
#include "sim.h"
#include "sizes.h"

typedef struct {
  char *topology, *model, *seq, *gpus, *global_batch, *gpu_memory, *sched, *top, *objective,
      *mask, *csv, *shard, *precision;
  char **set;
  /* where gpus, global_batch, top and objective came from: an option, or
   * the scenario's "search" object ("FILE: field 'search.gpus'") */
  char *where[4];
  char *where_text;     /* where[1] as an error message starts */
  int jobs;
  gboolean merge, exhaustive, whole_steps, count, quiet, help;
  char **args;
} search_cli;

static void search_cli_clear(search_cli *o) {
  char **strs[] = {&o->topology, &o->model, &o->seq, &o->gpus, &o->global_batch,
                   &o->gpu_memory, &o->sched, &o->top, &o->objective, &o->mask, &o->csv,
                   &o->shard, &o->precision};
  for (size_t i = 0; i < G_N_ELEMENTS(strs); i++) g_clear_pointer(strs[i], g_free);
  g_clear_pointer(&o->set, g_strfreev);
  g_clear_pointer(&o->args, g_strfreev);
  for (int k = 0; k < 4; k++) g_clear_pointer(&o->where[k], g_free);
  g_clear_pointer(&o->where_text, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(search_cli, search_cli_clear)

static GOptionContext *context(search_cli *o) {
  GOptionEntry entries[] = {
      {"topology", 't', 0, G_OPTION_ARG_FILENAME, &o->topology,
       "Topology file, or the name of a bundled one", "FILE"},
      {"model", 0, 0, G_OPTION_ARG_FILENAME, &o->model, "The model: a bundled preset or a model "
       "file (tasp-sim --list)", "NAME|FILE"},
      {"seq", 0, 0, G_OPTION_ARG_FILENAME, &o->seq, "Sequence length (one: 256K)", "LEN"},
      {"gpus", 0, 0, G_OPTION_ARG_FILENAME, &o->gpus,
       "GPUs of the job, TP x SP x DP (default: every GPU of the topology)", "N"},
      {"global-batch-tokens", 0, 0, G_OPTION_ARG_FILENAME, &o->global_batch,
       "Tokens per optimizer step, whole sequences (4M); micro-batches = sequences / DP. "
       "Default: one sequence per DP replica", "TOKENS"},
      {"gpu-memory", 0, 0, G_OPTION_ARG_FILENAME, &o->gpu_memory,
       "GPU memory: the topology's gpu_memory_gib (as --set gpu_memory_gib=V)", "GIB"},
      {"sched", 0, 0, G_OPTION_ARG_FILENAME, &o->sched,
       "Methods to consider, comma separated (default: every one that runs the model's layers)",
       "LIST"},
      {"mask", 0, 0, G_OPTION_ARG_FILENAME, &o->mask, "causal (default) or full", "MASK"},
      {"precision", 0, 0, G_OPTION_ARG_FILENAME, &o->precision,
       "The recipe of every configuration, as the main command's --precision: megatron "
       "(default), amp, bf16 or fp8 (fp8: the topology's compute.fp8_gemm_table)", "RECIPE"},
      {"top", 0, 0, G_OPTION_ARG_FILENAME, &o->top, "How many configurations to rank (default 10)",
       "K"},
      {"objective", 0, 0, G_OPTION_ARG_FILENAME, &o->objective,
       "tokens (default: tokens/s per GPU) or step (step time)", "OBJ"},
      {"set", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &o->set,
       "Override a topology field (generator.nic_gbps=100Gb/s)", "KEY=VALUE"},
      {"csv", 0, 0, G_OPTION_ARG_FILENAME, &o->csv,
       "Write every configuration with its status as CSV (- for stdout)", "FILE"},
      {"shard", 0, 0, G_OPTION_ARG_FILENAME, &o->shard,
       "Search shard I of N (0-based): configurations whose index is I mod N; merge the "
       "shards' CSVs with --merge", "I/N"},
      {"merge", 0, 0, G_OPTION_ARG_NONE, &o->merge,
       "Rank the union of the shards' CSVs given as arguments", NULL},
      {"exhaustive", 0, 0, G_OPTION_ARG_NONE, &o->exhaustive,
       "Simulate every configuration that can run (no pruning; the same ranked answer)", NULL},
      {"whole-steps", 0, 0, G_OPTION_ARG_NONE, &o->whole_steps, SIM_WHOLE_STEPS_HELP, NULL},
      {"count", 0, 0, G_OPTION_ARG_NONE, &o->count,
       "Enumerate and exclude only: how many configurations the search would simulate at "
       "most, per class, without simulating any", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_INT, &o->jobs, "Threads (default: one per CPU)", "N"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &o->quiet, "Print no table", NULL},
      {"help", 'h', 0, G_OPTION_ARG_NONE, &o->help, "Show this help", NULL},
      {G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &o->args, NULL, NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  GOptionContext *ctx = g_option_context_new("[SCENARIO.json | --merge FILE.csv...]");
  g_option_context_set_summary(ctx,
      "Which configuration to run: every SP method, SP degree, head-parallel degree (double\n"
      "ring), SP split (Ulysses, double ring), TP, DP, ZeRO stage, recomputation and\n"
      "placement of a model's training step on the GPUs, in one precision recipe, what\n"
      "cannot run excluded with its reason, the rest ranked.");
  g_option_context_set_help_enabled(ctx, FALSE);
  g_option_context_add_main_entries(ctx, entries, NULL);
  return ctx;
}

/* option: "--gpus", or where a scenario's field is ("FILE: field 'search.gpus'") */
static bool opt_error(GError **err, const char *option, const char *what, const char *got) {
  if (option[0] == '-')
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '%s': expected %s, "
                "got \"%s\"", option, what, got);
  else
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: expected %s, got \"%s\"", option, what,
                got);
  return false;
}

/* The scenario file's "search" object fills what the options left out. */
static const char *const search_keys[] = {"gpus", "global_batch_tokens", "top", "objective",
                                          NULL};
static const char *const search_options_names[] = {"--gpus", "--global-batch-tokens", "--top",
                                                   "--objective"};

static bool file_defaults(search_cli *o, const char *file, GError **err) {
  char **slot[] = {&o->gpus, &o->global_batch, &o->top, &o->objective};
  for (int k = 0; k < 4; k++) o->where[k] = g_strdup(search_options_names[k]);
  if (!file) return true;
  g_autoptr(json_object) root = json_read_file(file, err);
  if (!root) return false;
  /* the methods: the file's "schedulers" (a name, a list, or "all") */
  json_object *ss;
  if (!o->sched && json_object_object_get_ex(root, "schedulers", &ss)) {
    g_autoptr(GString) list = g_string_new(NULL);
    bool is_list = json_object_is_type(ss, json_type_array);
    size_t n = is_list ? json_object_array_length(ss) : 1;
    for (size_t i = 0; i < n; i++) {
      json_object *x = is_list ? json_object_array_get_idx(ss, i) : ss;
      if (!json_object_is_type(x, json_type_string)) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field 'schedulers': expected "
                    "scheduler names", file);
        return false;
      }
      g_string_append_printf(list, "%s%s", i ? "," : "", json_object_get_string(x));
    }
    if (strcmp(list->str, "all")) o->sched = g_strdup(list->str);
  }
  json_object *sr;
  if (!json_object_object_get_ex(root, "search", &sr)) return true;
  if (!json_object_is_type(sr, json_type_object)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field 'search': expected an object "
                "with gpus, global_batch_tokens, top, objective", file);
    return false;
  }
  if (!json_check_keys(sr, (json_where){file, "search", NULL}, search_keys, err)) return false;
  for (int k = 0; k < 4; k++) {
    json_object *v;
    if (*slot[k] || !json_object_object_get_ex(sr, search_keys[k], &v)) continue;
    g_free(o->where[k]);
    o->where[k] = g_strdup_printf("%s: field 'search.%s'", file, search_keys[k]);
    if (!json_object_is_type(v, json_type_string) && !json_object_is_type(v, json_type_int))
      return opt_error(err, o->where[k], "a string or a whole number",
                       json_object_to_json_string(v));
    *slot[k] = g_strdup(json_object_get_string(v));
  }
  return true;
}

static bool parse_u32(const char *text, const char *option, uint32_t lo, uint32_t hi,
                      uint32_t *out, GError **err) {
  guint64 v;
  if (!g_ascii_string_to_unsigned(text, 10, lo, hi, &v, NULL)) {
    g_autofree char *what = g_strdup_printf("a whole number from %u to %u", lo, hi);
    return opt_error(err, option, what, text);
  }
  *out = (uint32_t)v;
  return true;
}

/* The methods: --sched's names, or every one that runs the model. */
static GPtrArray *methods(const char *list, const workload *model, GError **err) {
  g_autoptr(GPtrArray) out = g_ptr_array_new();
  if (!list) {
    /* as --sched all: aliases (TransformerEngine's names) run another's plan */
    for (const sched_ops *const *s = sched_all(); *s; s++)
      if (!(*s)->alias_of && sched_check_attention(*s, model, NULL))
        g_ptr_array_add(out, (gpointer)*s);
    return g_steal_pointer(&out);
  }
  g_auto(GStrv) names = g_strsplit(list, ",", -1);
  for (char **n = names; *n; n++) {
    const sched_ops *s = sched_find(*n);
    g_autofree char *all = sched_names();
    g_autofree char *what = g_strdup_printf("schedulers from %s", all);
    if (!s) {
      opt_error(err, "--sched", what, *n);
      return NULL;
    }
    for (guint k = 0; k < out->len; k++)
      if (out->pdata[k] == s) {
        opt_error(err, "--sched", "each scheduler once", *n);
        return NULL;
      }
    g_autoptr(GError) e = NULL;
    if (!sched_check_attention(s, model, &e)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--sched': %s",
                  e->message);
      return NULL;
    }
    g_ptr_array_add(out, (gpointer)s);
  }
  return g_steal_pointer(&out);
}

/* The search's options that are not the question's: checked, into so. */
static bool search_options(search_cli *o, const scenario *s, search_opts *so,
                           GError **err) {
  so->gpus = s->topo->n_gpus;
  if (o->gpus && !parse_u32(o->gpus, o->where[0], 1, s->topo->n_gpus, &so->gpus, err))
    return false;
  if (o->global_batch && (!size_parse(o->global_batch, &so->global_batch_tokens) ||
                          !so->global_batch_tokens))
    return opt_error(err, o->where[1], "a number of tokens (4M)", o->global_batch);
  g_free(o->where_text);
  o->where_text = o->where[1][0] == '-'
                      ? g_strdup_printf("command line: option '%s'", o->where[1])
                      : g_strdup(o->where[1]);
  so->global_batch_from = o->where_text;
  so->top = 10;
  if (o->top && !parse_u32(o->top, o->where[2], 1, 1000, &so->top, err)) return false;
  so->objective = SEARCH_TOKENS;
  if (o->objective && !strcmp(o->objective, "step")) so->objective = SEARCH_STEP;
  else if (o->objective && strcmp(o->objective, "tokens"))
    return opt_error(err, o->where[3], "tokens or step", o->objective);
  if (o->shard) {
    unsigned i, n;
    char tail;
    if (sscanf(o->shard, "%u/%u%c", &i, &n, &tail) != 2 || n == 0 || i >= n)
      return opt_error(err, "--shard", "I/N with 0 <= I < N, such as 0/4", o->shard);
    so->shard = i;
    so->shards = n;
  }
  so->jobs = (unsigned)o->jobs;
  so->exhaustive = o->exhaustive;
  so->whole_steps = o->whole_steps;
  so->count_only = o->count;
  so->scheds = methods(o->sched, &s->model, err);
  return so->scheds != NULL;
}

/* The question's scenario: the main command's loader, with the step's
 * scope and one point (SP 1, ring) that it checks. */
static scenario *load(const search_cli *o, GError **err) {
  if (o->seq && strchr(o->seq, ','))
    return opt_error(err, "--seq", "one sequence length", o->seq), NULL;
  if (o->mask && strcmp(o->mask, "causal") && strcmp(o->mask, "full"))
    return opt_error(err, "--mask", "causal or full", o->mask), NULL;
  g_autoptr(GPtrArray) sets = g_ptr_array_new_with_free_func(g_free);
  /* each key once (sweep_parse below refuses a key given twice): the
   * topology loader applies them in turn, so gpu_memory_gib beside
   * --gpu-memory would have the last silently win */
  for (char **a = o->set; a && *a; a++) {
    if (o->gpu_memory && g_str_has_prefix(*a, "gpu_memory_gib=")) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--set': %s: key "
                  "'gpu_memory_gib' is --gpu-memory's too; expected each key once", *a);
      return NULL;
    }
    g_ptr_array_add(sets, g_strdup(*a));
  }
  if (o->gpu_memory) g_ptr_array_add(sets, g_strconcat("gpu_memory_gib=", o->gpu_memory, NULL));
  g_ptr_array_add(sets, NULL);
  /* malformed assignments and keys given twice refused as the main
   * command's (sweep.h); a list of values sweeps the main command's
   * points, while a search answers for one cluster */
  g_autoptr(set_sweep) sweep = sweep_parse((char *const *)sets->pdata, false, err);
  if (!sweep) return NULL;
  for (guint i = 0; i < sweep->axes->len; i++) {
    const sweep_axis *x = g_ptr_array_index(sweep->axes, i);
    if (x->values->len > 1) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--set': %s: %u "
                  "values; a search takes one value per key (a list sweeps the main command's "
                  "points: run one search per value)", x->key, x->values->len);
      return NULL;
    }
  }
  scenario_overrides ov = {.topology = o->topology, .model = o->model, .seq = o->seq,
                           .sp = "1", .sched = "ring", .scope = "model", .pass = "fwdbwd",
                           .mask = o->mask ? o->mask : "causal", .precision = o->precision,
                           .set = sets->len > 1 ? (char *const *)sets->pdata : NULL};
  const char *file = o->args && o->args[0] ? o->args[0] : NULL;
  if (o->args && o->args[0] && o->args[1])
    return opt_error(err, "search", "at most one scenario file", o->args[1]), NULL;
  scenario *s = scenario_load(file, &ov, err);
  /* --gpu-memory's value is read as --set gpu_memory_gib's: its refusal
   * names the option the user gave */
  g_autofree char *as_set = o->gpu_memory ? g_strdup_printf("command line: option '--set': "
                                                            "gpu_memory_gib=%s: ", o->gpu_memory)
                                          : NULL;
  if (!s && as_set && err && *err && g_str_has_prefix((*err)->message, as_set)) {
    g_autofree char *why = g_strdup((*err)->message + strlen(as_set));
    g_clear_error(err);
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--gpu-memory': "
                "%s: %s", o->gpu_memory, why);
  }
  if (s && s->seqs->len != 1) {
    scenario_free(s);
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field 'seq_len': a search takes one "
                "sequence length", file ? file : "command line");
    return NULL;
  }
  return s;
}

/* A search builds and frees thousands of plans of tens to hundreds of
 * MB; glibc hands such blocks back to the kernel as each is freed (mmap
 * above 32 MB at most, heap trimmed above 128 KB) and takes them again,
 * zeroed page by page, for the next.  Keeping freed memory for reuse
 * instead: Llama-3-70B at 1M on 256 GPUs, --count, 2.29 -> 0.16 s of
 * system time (user 8.8 s alike), peak RSS 178 -> 318 MB. */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

int search_main(int argc, char **argv) {
  g_set_prgname("tasp-sim search");
  keep_freed_memory();
  g_auto(search_cli) o = {0};
  g_autoptr(GError) err = NULL;
  g_autoptr(GOptionContext) ctx = context(&o);
  g_auto(GStrv) args = g_new0(char *, (size_t)argc + 1);
  for (int i = 0; i < argc; i++) args[i] = g_strdup(argv[i]);
  g_autoptr(GError) e = NULL;
  if (!g_option_context_parse_strv(ctx, &args, &e)) {
    g_set_error(&err, TASP_ERROR, TASP_ERROR_INPUT, "command line: %s", e->message);
    return outputs_fail(err, 2);
  }
  if (o.help) {
    g_autofree char *h = g_option_context_get_help(ctx, TRUE, NULL);
    fputs(h, stdout);
    return 0;
  }
  if (o.jobs < 0 || o.jobs > 256) {
    g_autofree char *got = g_strdup_printf("%d", o.jobs);
    return outputs_fail((opt_error(&err, "--jobs", "a whole number from 0 to 256", got), err), 2);
  }
  if (o.count && (o.csv || o.merge)) {
    g_set_error(&err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--count': simulates "
                "nothing, so takes no %s", o.csv ? "--csv" : "--merge");
    return outputs_fail(err, 2);
  }
  g_autoptr(outputs) outs = outputs_new();
  if (o.csv && !outputs_add(outs, "--csv", o.csv, NULL, &err)) return outputs_fail(err, 2);
  g_autoptr(search_result) res = NULL;
  if (o.merge) {
    const char *given[] = {o.topology, o.model, o.seq, o.gpus, o.global_batch, o.gpu_memory,
                           o.sched, o.top, o.objective, o.mask, o.shard, o.precision};
    for (size_t i = 0; i < G_N_ELEMENTS(given); i++)
      if (given[i]) {
        g_set_error(&err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--merge': the "
                    "question comes from the shards' files; leave out the options that ask it "
                    "(got \"%s\")", given[i]);
        return outputs_fail(err, 2);
      }
    guint n = o.args ? g_strv_length(o.args) : 0;
    if (!n) {
      g_set_error(&err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--merge': expected "
                  "the shards' CSV files");
      return outputs_fail(err, 2);
    }
    for (guint i = 0; i < n; i++)
      if (!outputs_check_input(outs, o.args[i], "shard file", &err)) return outputs_fail(err, 2);
    res = search_merge(o.args, n, &err);
    if (!res) return outputs_fail(err, 2);
  } else {
    if (!file_defaults(&o, o.args ? o.args[0] : NULL, &err)) return outputs_fail(err, 2);
    scenario *s = load(&o, &err);
    if (!s) return outputs_fail(err, 2);
    search_opts so = {.s = s};
    bool ok = search_options(&o, s, &so, &err) &&
              outputs_check_input(outs, s->file, "scenario file", &err) &&
              outputs_check_input(outs, s->topo->file, "topology file", &err);
    if (ok) res = search_run(&so, &err);
    if (so.scheds) g_ptr_array_unref(so.scheds);
    scenario_free(s);
    if (!res) return outputs_fail(err, 2);
    guint n[SEARCH_STATUSES] = {0};
    for (guint i = 0; i < res->rows->len; i++) n[((search_row *)res->rows->pdata[i])->status]++;
    if (!o.quiet && !o.count)
      fprintf(stderr, "tasp-sim: search: %u simulated (%u fit, %u do not), %u pruned by the "
              "compute bound, %u excluded\n", n[SEARCH_SIMULATED] + n[SEARCH_NO_FIT],
              n[SEARCH_SIMULATED], n[SEARCH_NO_FIT], n[SEARCH_PRUNED], n[SEARCH_EXCLUDED]);
    if (so.shards && !res->rows->len)
      fprintf(stderr, "tasp-sim: note: shard %u/%u is empty: the search has %u configurations\n",
              so.shard, so.shards, res->q.configs);
  }
  if (o.count) {
    search_print_counts(stdout, res);
    return 0;
  }
  if (!o.quiet && !outputs_to_stdout(outs)) search_print(stdout, res);
  if (o.csv) {
    FILE *f = outputs_stream(outs, "--csv", &err);
    if (!f) return outputs_fail(err, 1);
    search_csv(f, res);
  }
  report_ctx rc = {0};
  if (!outputs_write(outs, &rc, &err)) return outputs_fail(err, 1);
  return 0;
}
