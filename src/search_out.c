/* search_out: a search's answer as a table and as CSV, and the merge of
 * shards' CSVs (search.h).  The table is made from the rows alone, with
 * figures the CSV holds exactly (%.17g), so a merge prints what the whole
 * search prints. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "jsonio.h"
#include "layer.h"
#include "report.h"
#include "search.h"
#include "sizes.h"

static const char *recompute_name(recompute_kind k) {
  return k == RECOMPUTE_FULL ? "full" : k == RECOMPUTE_SELECTIVE ? "selective" : "none";
}

/* Whether scheduler `name`'s split gives head groups (USP's Ulysses
 * degree), not an inner ring (double ring's). */
static bool splits_heads(const char *name) {
  const sched_ops *s = sched_find(name);
  const sched_opt *o = s ? search_split_opt(s) : NULL;
  return o && o->splits_heads;
}

/* "TP 8 x SP 4 (Ulysses 2 x ring 2) x DP 1, ZeRO 3, recompute full, 2 micro-batches";
 * a head-parallel degree: "SP 8 (Ulysses 2 x inner ring 2 x outer 2)" */
static char *config_text(const search_row *r) {
  GString *s = g_string_new(NULL);
  g_string_printf(s, "TP %u x SP %u", r->tp, r->sp);
  if (r->head_parallel > 1 && r->split)
    g_string_append_printf(s, " (Ulysses %u x inner ring %u x outer %u)", r->head_parallel,
                           r->split, r->sp / r->head_parallel / r->split);
  else if (r->head_parallel > 1)
    g_string_append_printf(s, " (Ulysses %u x ring %u)", r->head_parallel,
                           r->sp / r->head_parallel);
  else if (r->split && splits_heads(r->sched))
    g_string_append_printf(s, " (Ulysses %u x ring %u)", r->split, r->sp / r->split);
  else if (r->split)
    g_string_append_printf(s, " (inner ring %u x outer %u)", r->split, r->sp / r->split);
  g_string_append_printf(s, " x DP %u, ZeRO %u, recompute %s", r->dp, r->zero,
                         recompute_name(r->recompute));
  if (r->placement != PLACE_TP_SP_DP)
    g_string_append_printf(s, ", placed %s", layer_placement_name(r->placement));
  if (r->micro_batches > 1) g_string_append_printf(s, ", %u micro-batches", r->micro_batches);
  return g_string_free(s, FALSE);
}

/* The distinct values of one field over the rows, ascending: "1,2,4,8". */
static void values(GString *out, const search_result *r, size_t offset, bool skip_zero) {
  g_autoptr(GArray) v = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  for (guint i = 0; i < r->rows->len; i++) {
    uint32_t x = *(const uint32_t *)((const char *)r->rows->pdata[i] + offset);
    if (skip_zero && !x) continue;
    guint k = 0;
    while (k < v->len && g_array_index(v, uint32_t, k) < x) k++;
    if (k == v->len || g_array_index(v, uint32_t, k) != x) g_array_insert_val(v, k, x);
  }
  if (!v->len) g_string_append(out, "-");
  for (guint k = 0; k < v->len; k++)
    g_string_append_printf(out, "%s%u", k ? "," : "", g_array_index(v, uint32_t, k));
}

/* The methods in the order of their first row. */
static GPtrArray *methods(const search_result *r) {
  GPtrArray *m = g_ptr_array_new();
  for (guint i = 0; i < r->rows->len; i++) {
    const char *s = ((const search_row *)r->rows->pdata[i])->sched;
    bool seen = false;
    for (guint k = 0; k < m->len && !seen; k++) seen = !strcmp(m->pdata[k], s);
    if (!seen) g_ptr_array_add(m, (gpointer)s);
  }
  return m;
}

static void print_head(FILE *f, const search_result *r) {
  const search_question *q = &r->q;
  g_autofree char *seq = size_format(q->seq_len);
  g_autofree char *gbt = size_format(q->global_batch_tokens);
  g_autofree char *batch = q->global_batch_tokens
                               ? g_strdup_printf("global batch %s tokens", gbt)
                               : g_strdup("one sequence per DP replica");
  /* the default recipe unsaid, as the main command leaves it */
  g_autofree char *prec = q->precision == PRECISION_MEGATRON
                              ? g_strdup("")
                              : g_strdup_printf(", precision %s",
                                                search_precision_name(q->precision));
  fprintf(f, "search: %s on %s, %u GPUs, %s tokens %s, %s%s; ranked by %s\n", q->model,
          q->topology, q->gpus, seq, q->causal ? "causal" : "full mask", batch, prec,
          q->objective == SEARCH_STEP ? "step time" : "tokens/s per GPU");
  guint n[SEARCH_STATUSES] = {0};
  static const char *const classes[] = {"memory", "method", "tp", "batch", "plan"};
  guint by_class[G_N_ELEMENTS(classes)] = {0};
  for (guint i = 0; i < r->rows->len; i++) {
    const search_row *x = r->rows->pdata[i];
    n[x->status]++;
    if (x->status != SEARCH_EXCLUDED) continue;
    for (size_t k = 0; k < G_N_ELEMENTS(classes); k++)
      if (!strcmp(x->klass, classes[k])) by_class[k]++;
  }
  fprintf(f, "configurations: %u enumerated, %u excluded before simulating (", r->rows->len,
          n[SEARCH_EXCLUDED]);
  for (size_t k = 0; k < G_N_ELEMENTS(classes); k++)
    fprintf(f, "%s%s %u", k ? ", " : "", classes[k], by_class[k]);
  fprintf(f, "), %u simulated or pruned by the compute bound", r->rows->len - n[SEARCH_EXCLUDED]);
  fputs("\n", f);
  g_autoptr(GPtrArray) ms = methods(r);
  g_autoptr(GString) d = g_string_new(NULL);
  g_string_printf(d, "dimensions: %u methods; TP ", ms->len);
  values(d, r, G_STRUCT_OFFSET(search_row, tp), false);
  g_string_append(d, "; SP ");
  values(d, r, G_STRUCT_OFFSET(search_row, sp), false);
  g_string_append(d, "; head-parallel (double ring's Ulysses) ");
  values(d, r, G_STRUCT_OFFSET(search_row, head_parallel), true);
  g_string_append(d, "; SP splits (Ulysses or inner ring) ");
  values(d, r, G_STRUCT_OFFSET(search_row, split), true);
  g_string_append(d, "; DP ");
  values(d, r, G_STRUCT_OFFSET(search_row, dp), false);
  g_string_append(d, "; ZeRO ");
  values(d, r, G_STRUCT_OFFSET(search_row, zero), false);
  g_string_append(d, "; recompute none,full (selective keeps what none keeps: flash attention "
                     "saves no score matrix); placements ");
  bool placed[PLACE_KINDS] = {false};
  for (guint i = 0; i < r->rows->len; i++)
    placed[((const search_row *)r->rows->pdata[i])->placement] = true;
  for (int k = 0, n = 0; k < PLACE_KINDS; k++)
    if (placed[k]) g_string_append_printf(d, "%s%s", n++ ? "; " : "", layer_placement_name(k));
  g_string_append(d, " (innermost first)");
  fprintf(f, "%s\n", d->str);
}

static void print_top(FILE *f, const search_result *r, GPtrArray *ranked) {
  guint k = MIN(ranked->len, r->q.top);
  if (!k) {
    fputs("\nno configuration runs and fits\n", f);
    return;
  }
  fprintf(f, "\n%4s  %-11s %3s %4s %3s %4s %-8s %4s %-9s %3s %11s %10s %6s %8s  %s\n", "rank",
          "method", "tp", "sp", "spl", "dp", "placed", "zero", "recompute", "mb", "step_s",
          "tok/s/GPU", "mfu", "mem", "why");
  for (guint i = 0; i < k; i++) {
    const search_row *x = ranked->pdata[i];
    /* the split; after a head-parallel degree U, "UxW" */
    char u[32] = "-";
    if (x->head_parallel > 1 && x->split)
      g_snprintf(u, sizeof u, "%ux%u", x->head_parallel, x->split);
    else if (x->head_parallel > 1)
      g_snprintf(u, sizeof u, "%ux-", x->head_parallel);
    else if (x->split)
      g_snprintf(u, sizeof u, "%u", x->split);
    char mfu[16] = "-";
    if (!isnan(x->mfu)) g_snprintf(mfu, sizeof mfu, "%.1f%%", 100 * x->mfu);
    fprintf(f, "%4u  %-11s %3u %4u %3s %4u %-8s %4u %-9s %3u %11.4f %10.1f %6s %7.1fG  %s\n",
            i + 1, x->sched, x->tp, x->sp, u, x->dp, layer_placement_name(x->placement), x->zero,
            recompute_name(x->recompute),
            x->micro_batches, x->step_s, x->tokens_per_s_per_gpu, mfu, x->peak_mem_gib,
            x->reason);
  }
}

/* The winner against each other method's best. */
static void print_margins(FILE *f, const search_result *r, GPtrArray *ranked) {
  if (!ranked->len) return;
  const search_row *w = ranked->pdata[0];
  g_autofree char *wt = config_text(w);
  fprintf(f, "\nwinner: %s, %s: %.1f tokens/s per GPU, %.4f s per step\n", w->sched, wt,
          w->tokens_per_s_per_gpu, w->step_s);
  g_autoptr(GPtrArray) ms = methods(r);
  for (guint k = 0; k < ms->len; k++) {
    const char *m = ms->pdata[k];
    if (!strcmp(m, w->sched)) continue;
    const search_row *b = NULL;
    for (guint i = 0; i < ranked->len && !b; i++)
      if (!strcmp(((const search_row *)ranked->pdata[i])->sched, m)) b = ranked->pdata[i];
    if (b) {
      double margin = r->q.objective == SEARCH_STEP ? b->step_s / w->step_s - 1
                                                    : w->tokens_per_s_per_gpu /
                                                          b->tokens_per_s_per_gpu - 1;
      g_autofree char *bt = config_text(b);
      fprintf(f, "  ahead of %-11s by %5.1f%% (its best: %s, %.1f tokens/s per GPU)\n", m,
              100 * margin, bt, b->tokens_per_s_per_gpu);
      continue;
    }
    guint nofit = 0, excl = 0;
    for (guint i = 0; i < r->rows->len; i++) {
      const search_row *x = r->rows->pdata[i];
      if (strcmp(x->sched, m)) continue;
      nofit += x->status == SEARCH_NO_FIT;
      excl += x->status == SEARCH_EXCLUDED;
    }
    /* a method none of whose configurations fits is never pruned: all
     * that can run were simulated, in any shard */
    fprintf(f, "  %-20s none runs and fits (%u simulated do not fit, %u excluded)\n", m, nofit,
            excl);
  }
}

/* A line per method and class of the configurations excluded before
 * simulating: how many, at which SP degrees, and the first one's reason
 * (memory: the one closest to fitting).
 * (Those simulated and over the memory are not: which of them a search
 * simulates depends on its pruning, and so on sharding.) */
static void print_excluded(FILE *f, const search_result *r) {
  typedef struct {
    const char *sched, *klass, *reason;
    guint n;
    uint32_t sp_lo, sp_hi;
    double closest;
  } group;
  g_autoptr(GArray) gs = g_array_new(FALSE, FALSE, sizeof(group));
  for (guint i = 0; i < r->rows->len; i++) {
    const search_row *x = r->rows->pdata[i];
    if (x->status != SEARCH_EXCLUDED) continue;
    group *g = NULL;
    for (guint k = 0; k < gs->len && !g; k++) {
      group *h = &g_array_index(gs, group, k);
      if (!strcmp(h->sched, x->sched) && !strcmp(h->klass, x->klass)) g = h;
    }
    if (!g) {
      group n = {x->sched, x->klass, x->reason, 0, x->sp, x->sp, INFINITY};
      g_array_append_val(gs, n);
      g = &g_array_index(gs, group, gs->len - 1);
    }
    g->n++;
    /* memory: the one closest to fitting says how far the class is off */
    if (!strcmp(x->klass, "memory") && x->mem_bound_gib < g->closest) {
      g->closest = x->mem_bound_gib;
      g->reason = x->reason;
    }
    g->sp_lo = MIN(g->sp_lo, x->sp);
    g->sp_hi = MAX(g->sp_hi, x->sp);
  }
  if (!gs->len) return;
  fputs("\ncannot run:\n", f);
  for (guint k = 0; k < gs->len; k++) {
    const group *g = &g_array_index(gs, group, k);
    char sps[32];
    if (g->sp_lo == g->sp_hi) g_snprintf(sps, sizeof sps, "SP %u", g->sp_lo);
    else g_snprintf(sps, sizeof sps, "SP %u-%u", g->sp_lo, g->sp_hi);
    fprintf(f, "  %s (%s): %u configuration%s at %s; %s %s\n", g->sched, g->klass, g->n,
            g->n == 1 ? "" : "s", sps, isinf(g->closest) ? "the first:" : "the closest:",
            g->reason);
  }
}

void search_print_counts(FILE *f, const search_result *r) { print_head(f, r); }

void search_print(FILE *f, const search_result *r) {
  print_head(f, r);
  g_autoptr(GPtrArray) ranked = search_ranked(r);
  print_top(f, r, ranked);
  print_margins(f, r, ranked);
  print_excluded(f, r);
}

/* ---- CSV ---- */

static const char *const columns[] = {
    "model", "topology", "seq_len", "gpus", "global_batch_tokens", "mask", "objective", "top",
    "configs", "usable_gib", "index", "scheduler", "tp", "sp", "split", "dp", "zero",
    "recompute", "micro_batches", "status", "class", "reason", "bound_s", "mem_bound_gib",
    "step_s", "tokens_per_s_per_gpu", "mfu", "peak_mem_gib", "placement", "head_parallel",
    "precision"};
/* The question's columns: the first ten and the precision.  A CSV of
 * N_BEFORE_HEADS columns (made before head_parallel and precision were
 * appended) reads as head_parallel 0 (none taken) and precision megatron
 * (the one recipe those searches ranked in). */
static const guint question_columns[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 30};
enum { N_QUESTION = G_N_ELEMENTS(question_columns), N_COLUMNS = G_N_ELEMENTS(columns),
       N_BEFORE_HEADS = 29 };

static void num(FILE *f, double v) {
  if (!isnan(v)) fprintf(f, "%.17g", v);
  fputc(',', f);
}

void search_csv(FILE *f, const search_result *r) {
  for (guint k = 0; k < N_COLUMNS; k++) fprintf(f, "%s%s", k ? "," : "", columns[k]);
  fputc('\n', f);
  const search_question *q = &r->q;
  for (guint i = 0; i < r->rows->len; i++) {
    const search_row *x = r->rows->pdata[i];
    report_csv_str(f, q->model);
    fputc(',', f);
    report_csv_str(f, q->topology);
    fprintf(f, ",%llu,%u,%llu,%s,%s,%u,%u,", (unsigned long long)q->seq_len, q->gpus,
            (unsigned long long)q->global_batch_tokens, q->causal ? "causal" : "full",
            search_objective_name(q->objective), q->top, q->configs);
    num(f, q->usable_gib);
    fprintf(f, "%u,", x->index);
    report_csv_str(f, x->sched);
    fprintf(f, ",%u,%u,%u,%u,%u,%s,%u,%s,", x->tp, x->sp, x->split, x->dp, x->zero,
            recompute_name(x->recompute), x->micro_batches, search_status_name(x->status));
    report_csv_str(f, x->klass ? x->klass : "");
    fputc(',', f);
    report_csv_str(f, x->reason ? x->reason : "");
    fputc(',', f);
    num(f, x->bound_s);
    num(f, x->mem_bound_gib);
    num(f, x->step_s);
    num(f, x->tokens_per_s_per_gpu);
    num(f, x->mfu);
    num(f, x->peak_mem_gib);
    report_csv_str(f, layer_placement_name(x->placement));
    fprintf(f, ",%u,%s\n", x->head_parallel, search_precision_name(q->precision));
  }
}

/* ---- merge ---- */

/* One record of RFC 4180 CSV from *p (fields into out, owned), *p moved
 * past it; FALSE at the end of the text. */
static bool csv_record(const char **p, GPtrArray *out) {
  g_ptr_array_set_size(out, 0);
  const char *s = *p;
  if (!*s) return false;
  for (;;) {
    GString *v = g_string_new(NULL);
    if (*s == '"') {
      for (s++; *s; s++) {
        if (*s == '"' && s[1] == '"') g_string_append_c(v, *s++);
        else if (*s == '"') break;
        else g_string_append_c(v, *s);
      }
      if (*s == '"') s++;
    }
    while (*s && *s != ',' && *s != '\n' && *s != '\r') g_string_append_c(v, *s++);
    g_ptr_array_add(out, g_string_free(v, FALSE));
    if (*s == ',') {
      s++;
      continue;
    }
    if (*s == '\r') s++;
    if (*s == '\n') s++;
    break;
  }
  *p = s;
  return true;
}

static bool bad_field(GError **err, const char *file, guint line, const char *field,
                      const char *what, const char *got) {
  g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line %u: field '%s': expected %s, got "
              "\"%s\"", file, line, field, what, got);
  return false;
}

static bool get_u64(const char *s, uint64_t max, uint64_t *out) {
  return g_ascii_string_to_unsigned(s, 10, 0, max, out, NULL);
}

static bool get_num(const char *s, double *out) {
  if (!*s) {
    *out = NAN;
    return true;
  }
  char *end;
  errno = 0;
  *out = g_ascii_strtod(s, &end);
  return !*end && errno == 0 && isfinite(*out);
}

/* A row's own fields (the columns after the question's first ten) into x. */
static bool parse_row(GPtrArray *fs, const char *file, guint line, search_row *x, GError **err) {
  char **f = (char **)fs->pdata;
  uint64_t v[9];
  static const guint ints[] = {10, 12, 13, 14, 15, 16, 18, 29};
  for (size_t k = 0; k < G_N_ELEMENTS(ints); k++)
    if (!get_u64(f[ints[k]], UINT32_MAX, &v[k]))
      return bad_field(err, file, line, columns[ints[k]], "a whole number", f[ints[k]]);
  x->index = (uint32_t)v[0];
  x->tp = (uint32_t)v[1];
  x->sp = (uint32_t)v[2];
  x->split = (uint32_t)v[3];
  x->dp = (uint32_t)v[4];
  x->zero = (uint32_t)v[5];
  x->micro_batches = (uint32_t)v[6];
  x->head_parallel = (uint32_t)v[7];
  x->sched = g_strdup(f[11]);
  if (!strcmp(f[17], "none")) x->recompute = RECOMPUTE_NONE;
  else if (!strcmp(f[17], "selective")) x->recompute = RECOMPUTE_SELECTIVE;
  else if (!strcmp(f[17], "full")) x->recompute = RECOMPUTE_FULL;
  else return bad_field(err, file, line, "recompute", "none, selective or full", f[17]);
  int st = -1;
  for (int k = 0; k < SEARCH_STATUSES; k++)
    if (!strcmp(f[19], search_status_name((search_status)k))) st = k;
  if (st < 0) return bad_field(err, file, line, "status", "simulated, does not fit, pruned or "
                               "excluded", f[19]);
  x->status = (search_status)st;
  x->klass = *f[20] ? g_strdup(f[20]) : NULL;
  x->reason = *f[21] ? g_strdup(f[21]) : NULL;
  if ((x->status == SEARCH_EXCLUDED || x->status == SEARCH_NO_FIT) && !x->klass)
    return bad_field(err, file, line, "class", "the class of what cannot run", f[20]);
  double *nums[] = {&x->bound_s, &x->mem_bound_gib, &x->step_s, &x->tokens_per_s_per_gpu,
                    &x->mfu, &x->peak_mem_gib};
  for (guint k = 0; k < G_N_ELEMENTS(nums); k++)
    if (!get_num(f[22 + k], nums[k]))
      return bad_field(err, file, line, columns[22 + k], "a number or nothing", f[22 + k]);
  placement_kind pl;
  if (!layer_placement_parse(f[28], &pl))
    return bad_field(err, file, line, "placement", "an order of tp, sp and dp", f[28]);
  x->placement = pl;
  if ((x->status == SEARCH_SIMULATED || x->status == SEARCH_NO_FIT) &&
      (isnan(x->step_s) || isnan(x->tokens_per_s_per_gpu) || isnan(x->peak_mem_gib)))
    return bad_field(err, file, line, "step_s", "the figures of a simulated configuration",
                     f[24]);
  return true;
}

static bool parse_question(GPtrArray *fs, const char *file, guint line, search_question *q,
                           GError **err) {
  char **f = (char **)fs->pdata;
  uint64_t seq, gpus, gbt, top, configs;
  if (!get_u64(f[2], UINT64_MAX, &seq) || !seq)
    return bad_field(err, file, line, "seq_len", "a number of tokens", f[2]);
  if (!get_u64(f[3], UINT32_MAX, &gpus) || !gpus)
    return bad_field(err, file, line, "gpus", "a number of GPUs", f[3]);
  if (!get_u64(f[4], UINT64_MAX, &gbt))
    return bad_field(err, file, line, "global_batch_tokens", "a number of tokens", f[4]);
  if (strcmp(f[5], "causal") && strcmp(f[5], "full"))
    return bad_field(err, file, line, "mask", "causal or full", f[5]);
  if (strcmp(f[6], "tokens") && strcmp(f[6], "step"))
    return bad_field(err, file, line, "objective", "tokens or step", f[6]);
  if (!get_u64(f[7], UINT32_MAX, &top) || !top)
    return bad_field(err, file, line, "top", "a positive whole number", f[7]);
  if (!get_u64(f[8], SEARCH_MAX_CONFIGS, &configs))
    return bad_field(err, file, line, "configs", "a number of configurations", f[8]);
  double usable;
  if (!get_num(f[9], &usable)) return bad_field(err, file, line, "usable_gib", "GiB", f[9]);
  precision_kind prec;
  if (!search_precision_parse(f[30], &prec))
    return bad_field(err, file, line, "precision", "megatron, amp, bf16 or fp8", f[30]);
  *q = (search_question){.model = g_strdup(f[0]), .topology = g_strdup(f[1]), .seq_len = seq,
                         .gpus = (uint32_t)gpus, .global_batch_tokens = gbt,
                         .causal = !strcmp(f[5], "causal"),
                         .objective = strcmp(f[6], "step") ? SEARCH_TOKENS : SEARCH_STEP,
                         .top = (uint32_t)top, .configs = (uint32_t)configs,
                         .usable_gib = isnan(usable) ? 0 : usable, .precision = prec};
  return true;
}

static int by_index(gconstpointer a, gconstpointer b) {
  const search_row *x = *(search_row *const *)a, *y = *(search_row *const *)b;
  return (x->index > y->index) - (x->index < y->index);
}

search_result *search_merge(char *const *files, guint n, GError **err) {
  g_autoptr(search_result) res = search_result_new();
  g_auto(GStrv) question = NULL; /* the first row's question fields, as text */
  const char *question_file = NULL;
  g_autoptr(GHashTable) where = g_hash_table_new(NULL, NULL); /* index -> file */
  g_autoptr(GPtrArray) fs = g_ptr_array_new_with_free_func(g_free);
  for (guint k = 0; k < n; k++) {
    g_autofree char *text = NULL;
    g_autoptr(GError) e = NULL;
    if (!g_file_get_contents(files[k], &text, NULL, &e)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--merge': %s",
                  e->message);
      return NULL;
    }
    const char *p = text;
    if (!csv_record(&p, fs) || (fs->len != N_COLUMNS && fs->len != N_BEFORE_HEADS)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line 1: expected the header of a "
                  "search CSV (tasp-sim search --csv)", files[k]);
      return NULL;
    }
    guint width = fs->len;
    for (guint c = 0; c < width; c++)
      if (strcmp(fs->pdata[c], columns[c])) {
        bad_field(err, files[k], 1, columns[c], "this column's name", fs->pdata[c]);
        return NULL;
      }
    for (guint line = 2; csv_record(&p, fs); line++) {
      if (fs->len == 1 && !*(char *)fs->pdata[0]) continue; /* an empty line */
      if (fs->len != width) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line %u: expected %u fields, got "
                    "%u", files[k], line, width, fs->len);
        return NULL;
      }
      if (width == N_BEFORE_HEADS) {
        g_ptr_array_add(fs, g_strdup("0"));
        g_ptr_array_add(fs, g_strdup(search_precision_name(PRECISION_MEGATRON)));
      }
      if (!question) {
        if (!parse_question(fs, files[k], line, &res->q, err)) return NULL;
        question = g_new0(char *, N_QUESTION + 1);
        for (guint c = 0; c < N_QUESTION; c++)
          question[c] = g_strdup(fs->pdata[question_columns[c]]);
        question_file = files[k];
      }
      for (guint c = 0; c < N_QUESTION; c++)
        if (strcmp(fs->pdata[question_columns[c]], question[c])) {
          g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line %u: field '%s': \"%s\", "
                      "but %s asked \"%s\": shards of different searches", files[k], line,
                      columns[question_columns[c]], (char *)fs->pdata[question_columns[c]],
                      question_file, question[c]);
          return NULL;
        }
      search_row *x = search_row_new();
      g_ptr_array_add(res->rows, x);
      if (!parse_row(fs, files[k], line, x, err)) return NULL;
      if (x->index >= res->q.configs) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line %u: field 'index': %u is not "
                    "below the %u configurations", files[k], line, x->index, res->q.configs);
        return NULL;
      }
      const char *was = g_hash_table_lookup(where, GUINT_TO_POINTER(x->index + 1));
      if (was) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line %u: configuration %u is in "
                    "%s too: the same shard twice?", files[k], line, x->index, was);
        return NULL;
      }
      g_hash_table_insert(where, GUINT_TO_POINTER(x->index + 1), files[k]);
    }
  }
  if (!question) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--merge': the files "
                "hold no configuration");
    return NULL;
  }
  if (res->rows->len != res->q.configs) {
    uint32_t first = 0;
    while (g_hash_table_contains(where, GUINT_TO_POINTER(first + 1))) first++;
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--merge': the files "
                "hold %u of the %u configurations (configuration %u is in none): a shard is "
                "missing", res->rows->len, res->q.configs, first);
    return NULL;
  }
  g_ptr_array_sort(res->rows, by_index);
  return g_steal_pointer(&res);
}
