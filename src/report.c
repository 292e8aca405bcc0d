/* report: table, CSV and link report. */
#include "report.h"

#include <math.h>
#include <string.h>

#include "layer.h"
#include "layers.h"
#include "sizes.h"
#include "verdict.h"

static const char *mask_name(bool causal) { return causal ? "causal" : "full"; }

static bool same_group(const sim_result *a, const sim_result *b) {
  return a->pt.w.seq_len == b->pt.w.seq_len && a->pt.w.gpus == b->pt.w.gpus &&
         a->pt.w.causal == b->pt.w.causal && a->pt.w.pass == b->pt.w.pass;
}

void report_csv_str(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* Per channel kind, over the channels on routes among the point's GPUs. */
typedef struct {
  const char *kind;
  unsigned channels, idle;
  double max_util, sum_util;
} kind_stat;

static GArray *kind_stats(const topology *t, const sim_result *r) {
  GArray *ks = g_array_new(FALSE, TRUE, sizeof(kind_stat));
  g_autofree uint8_t *avail = sim_channels_available(t, layer_job_gpus(&r->pt.w));
  for (uint32_t c = 0; c < t->channels->len; c++) {
    if (!avail[c]) continue;
    const topo_channel *ch = topo_chan(t, c);
    kind_stat *k = NULL;
    for (guint i = 0; i < ks->len; i++)
      if (!strcmp(g_array_index(ks, kind_stat, i).kind, ch->kind)) k = &g_array_index(ks, kind_stat, i);
    if (!k) {
      kind_stat z = {ch->kind, 0, 0, 0, 0};
      g_array_append_val(ks, z);
      k = &g_array_index(ks, kind_stat, ks->len - 1);
    }
    double u = sim_util(t, r->r, c);
    k->channels++;
    k->idle += r->r->chan_bytes[c] <= 0;
    k->sum_util += u;
    if (u > k->max_util) k->max_util = u;
  }
  return ks;
}

/* The links line of one row; `always` FALSE prints it only when it says
 * something: channels left idle, or a busiest channel kind well above the
 * mean (twice it). */
static void links_line(FILE *f, const topology *t, const sim_result *r, bool always) {
  if (!r->r) return; /* n/a: nothing ran */
  g_autoptr(GArray) ks = kind_stats(t, r);
  const kind_stat *busy = NULL, *idle = NULL;
  unsigned chans = 0, idle_n = 0;
  for (guint i = 0; i < ks->len; i++) {
    const kind_stat *k = &g_array_index(ks, kind_stat, i);
    chans += k->channels;
    idle_n += k->idle;
    if (!busy || k->max_util > busy->max_util) busy = k;
    if (!idle || k->sum_util / k->channels < idle->sum_util / idle->channels) idle = k;
  }
  if (!always && idle_n == 0 && (!busy || busy->max_util <= 2 * r->mean_util)) return;
  fprintf(f, "            links %-10s busiest %s (max %.1f%%), idlest %s (mean %.1f%%), "
          "%u of %u channels idle\n", r->pt.sched->name, busy ? busy->kind : "-",
          busy ? 100 * busy->max_util : 0.0, idle ? idle->kind : "-",
          idle && idle->channels ? 100 * idle->sum_util / idle->channels : 0.0, idle_n, chans);
}

/* A speedup as the table shows it: "1.52x", "-" where there is none. */
static const char *speedup_text(char buf[16], double v) {
  if (isnan(v)) return "-";
  g_snprintf(buf, 16, "%.2fx", v);
  return buf;
}

/* Under a group's verdict: the baseline a speedup column lacks, and why. */
static void baseline_na(FILE *f, const report_ctx *c, const sim_result *r) {
  if (r->ring_na)
    fprintf(f, "            vs_ring: ring cannot run this point: %s\n", r->ring_na);
  if (r->base_na && c->s->baseline && c->s->baseline != &sched_ring)
    fprintf(f, "            vs_best: %s (--baseline) cannot run this point: %s\n",
            c->s->baseline->name, r->base_na);
}

/* A number of the CSV, empty where there is none (NAN). */
static void csv_num(FILE *f, const char *fmt, double v) {
  if (!isnan(v)) fprintf(f, fmt, v);
}

/* A note is printed once, after the first group whose rows carry it. */
static void group_notes(FILE *f, const report_ctx *c, guint j0, guint j1, GHashTable *seen,
                        const char *prefix) {
  for (guint j = j0; j < j1; j++) {
    const sim_result *r = c->results->pdata[j];
    if (!r->note || g_hash_table_contains(seen, r->note)) continue;
    g_hash_table_add(seen, r->note);
    fprintf(f, "%snote: %s\n", prefix, r->note);
  }
}

/* One confidence note of row r, unless `seen` (which owns its keys) has
 * it: an extrapolation once per scheduler, topology, kind of kernel and
 * dimensions left, naming the first such kernel; a scaled table or a
 * roofline once per topology (and kind), as they hold for every scheduler. */
static void conf_note(FILE *f, GHashTable *seen, const char *prefix, const sim_result *r,
                      const compute_lookup *x) {
  bool per_sched = x->conf == COMPUTE_CONF_EXTRAPOLATED;
  char *key = g_strdup_printf("%d|%s|%s|%u|%d", x->conf, r->topo->name,
                              per_sched ? r->pt.sched->name : "", per_sched ? x->beyond : 0,
                              x->conf == COMPUTE_CONF_SCALED ? 0 : x->kind == OP_ATTN);
  if (!g_hash_table_add(seen, key)) return;
  const compute_model *m = &r->topo->compute;
  g_autofree char *label = compute_conf_label(m, x), *why = compute_lookup_reason(m, x);
  fprintf(f, "%snote: %s: %s%s%s\n", prefix, label, per_sched ? r->pt.sched->name : "",
          per_sched ? " " : "", why);
}

/* Rows whose compute prices come from outside measured data (compute.h,
 * "Confidence"): each reason once, after the first group with it. */
static void conf_notes(FILE *f, const report_ctx *c, guint j0, guint j1, GHashTable *seen,
                       const char *prefix) {
  for (guint j = j0; j < j1; j++) {
    const sim_result *r = c->results->pdata[j];
    if (!r->r) continue;
    compute_lookup l = r->r->conf;
    if (l.scaled) {  /* said even where an extrapolation is the row's worst */
      compute_lookup s = l;
      s.conf = COMPUTE_CONF_SCALED;
      conf_note(f, seen, prefix, r, &s);
    }
    if (l.conf >= COMPUTE_CONF_EXTRAPOLATED) conf_note(f, seen, prefix, r, &l);
  }
}

void report_notes(FILE *f, const report_ctx *c) {
  g_autofree char *dflt = topo_defaults_note(c->s->topo);
  if (dflt) fprintf(f, "tasp-sim: note: %s\n", dflt);
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  group_notes(f, c, 0, c->results->len, seen, "tasp-sim: ");
  g_autoptr(GHashTable) conf_seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  conf_notes(f, c, 0, c->results->len, conf_seen, "tasp-sim: ");
}

/* One line over the whole run: per scheduler, its mean link utilisation
 * and in how many points it left channels idle. */
static void links_summary(FILE *f, const report_ctx *c) {
  GString *s = g_string_new("links: mean utilisation");
  bool first = true; /* a scheduler that ran no point (all n/a) has no entry */
  for (guint k = 0; k < c->s->scheds->len; k++) {
    const sched_ops *so = c->s->scheds->pdata[k];
    double sum = 0;
    unsigned n = 0, with_idle = 0;
    for (guint i = 0; i < c->results->len; i++) {
      const sim_result *r = c->results->pdata[i];
      if (r->pt.sched != so || !r->r) continue;
      sum += r->mean_util;
      n++;
      g_autoptr(GArray) ks = kind_stats(r->topo, r);
      unsigned idle = 0;
      for (guint j = 0; j < ks->len; j++) idle += g_array_index(ks, kind_stat, j).idle;
      with_idle += idle > 0;
    }
    if (n)
      g_string_append_printf(s, "%s %s %.1f%% (idle channels in %u of %u points)",
                             first ? "" : ",", so->name, 100 * sum / n, with_idle, n);
    first &= !n;
  }
  fprintf(f, "%s\n", s->str);
  g_string_free(s, TRUE);
}

/* The table's mem column: peak GiB per GPU, "!" where it does not fit. */
static const char *mem_text(char buf[24], const sim_result *r) {
  g_snprintf(buf, 24, "%.1fG%s", sim_peak_gib(r), sim_fits(r) ? "" : "!");
  return buf;
}

/* What the memory figures count, and what a GPU of t has for them. */
static void memory_scope(FILE *f, const topology *t, scope_kind scope) {
  if (scope == SCOPE_ATTENTION)
    fputs("memory: peak allocated per GPU of the attention layer alone (its inputs and what the "
          "method allocates, as torch.cuda.max_memory_allocated counts)", f);
  else
    fprintf(f, "memory: peak allocated per GPU of the %s (as torch.cuda.max_memory_allocated "
            "counts)", scope == SCOPE_LAYER ? "decoder layer: its weights, activations, weight "
            "gradients and the method's buffers" : "training step: weights, gradients, optimizer "
            "states, every layer's saved activations, the logits and the method's buffers");
  if (topo_usable_gib(t) > 0)
    fprintf(f, "; usable %.1f GiB of %.1f GiB per GPU (headroom %.2f GiB); a mem marked ! "
            "does not fit", topo_usable_gib(t), t->memory_gib, t->memory_headroom_gib);
  else
    fputs("; the topology gives no GPU memory (gpu_memory_gib): fit not judged", f);
  fputc('\n', f);
}

void report_memory(FILE *f, const report_ctx *c) {
  memory_scope(f, c->s->topo, c->s->model.scope);
  for (guint i = 0; i < c->results->len; i++) {
    const sim_result *r = c->results->pdata[i];
    g_autofree char *seq = size_format(r->pt.w.seq_len);
    fprintf(f, "\n%s seq %s sp %u %s %s", r->pt.sched->name, seq, r->pt.w.gpus,
            mask_name(r->pt.w.causal), pass_name(r->pt.w.pass));
    if (!r->r) {
      fprintf(f, ": n/a: %s\n", r->pt.na);
      continue;
    }
    double usable = topo_usable_gib(r->topo);
    fprintf(f, ": peak %.2f GiB on GPU %u", sim_peak_gib(r), r->r->peak_gpu);
    if (usable > 0)
      fprintf(f, sim_fits(r) ? " (fits: %.1f GiB usable)" : " (does not fit: %.1f GiB usable)",
              usable);
    fputc('\n', f);
    const GArray *live = r->r->peak_live;
    for (uint32_t g = 0; g < r->r->n_gpus; g++) {
      fprintf(f, "  GPU %u: %.3f GiB (reserved %.3f GiB):", g,
              r->r->gpu_peak_bytes[g] / 1073741824.0,
              r->r->gpu_peak_reserved_bytes[g] / 1073741824.0);
      guint k = 0;
      for (guint j = 0; live && j < live->len; j++) {
        const exec_mem_live *l = &g_array_index(live, exec_mem_live, j);
        if (l->gpu != g) continue;
        fprintf(f, "%s %s", k++ ? "," : "", l->name);
        if (l->count > 1) fprintf(f, " (x%u)", l->count);
        fprintf(f, " %.*f GiB", l->bytes >= 1073741824.0 / 10 ? 1 : 3, l->bytes / 1073741824.0);
      }
      fputc('\n', f);
    }
  }
}

void report_table(FILE *f, const report_ctx *c) {
  const scenario *s = c->s;
  const topology *t = s->topo;
  const workload *m = &s->model;
  fprintf(f, "tasp-sim %s | scenario %s | topology %s", TASP_VERSION, s->name, t->name);
  if (t->overrides) fprintf(f, " with --set %s", t->overrides);
  fprintf(f, ": %u GPUs", t->n_gpus);
  /* the file's words may name what --set changed ("400 Gb/s NIC") */
  if (t->description && *t->description)
    fprintf(f, t->overrides ? " (the file's description, before --set: %s)" : " (%s)",
            t->description);
  fprintf(f, "\nattention: batch %u, %u heads, %u KV heads, head dim %u, %s\n", m->batch,
          m->heads, m->kv_heads, m->head_dim, m->dtype);
  g_autofree char *dflt = topo_defaults_note(t);
  if (dflt) fprintf(f, "note: %s\n", dflt);
  memory_scope(f, t, m->scope);
  if (m->scope != SCOPE_ATTENTION) {
    fprintf(f, "scope: %s, TP %u", scope_name(m->scope), layer_tp(m));
    if (m->scope == SCOPE_MODEL) {
      fprintf(f, ", DP %u, ZeRO %u, recompute %s, ", layer_dp(m), m->zero,
              m->recompute == RECOMPUTE_FULL ? "full"
              : m->recompute == RECOMPUTE_SELECTIVE ? "selective" : "none");
      g_autofree char *gbt = size_format(m->global_batch_tokens);
      if (m->global_batch_tokens) fprintf(f, "global batch %s tokens", gbt);
      else fprintf(f, "%u micro-batch%s", m->micro_batches > 1 ? m->micro_batches : 1,
                   m->micro_batches > 1 ? "es" : "");
    }
    fputs("; step_ms is the scope's, mem its peak per GPU\n", f);
  } else if (layers_total(m) > 1 || layers_count(m, ATTN_LINEAR)) {
    g_autofree char *mix = layers_text(m);
    fprintf(f, "layers: %s%s%s\n", mix, m->decay ? " (linear with decay)" : "",
            layers_total(m) > 1 ? "; times are the sum over the layers, each kind simulated once"
                                : "");
  }
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GHashTable) conf_seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  const sim_result *prev = NULL;
  for (guint i = 0; i < c->results->len; i++) {
    const sim_result *r = c->results->pdata[i];
    if (!prev || r->pt.w.causal != prev->pt.w.causal || r->pt.w.pass != prev->pt.w.pass) {
      fprintf(f, "\nmask %s, pass %s\n", mask_name(r->pt.w.causal), pass_name(r->pt.w.pass));
      fprintf(f, "%8s %4s  %-10s %10s %10s %10s %10s %10s %8s %8s %8s %8s %8s\n", "seq", "sp",
              "sched", "step_ms", "compute_ms", "comm_ms", "exposed_ms", "imbal_ms", "vs_best",
              "vs_ring", "max_util", "mean_util", "mem");
    }
    g_autofree char *seq = size_format(r->pt.w.seq_len);
    bool first = !prev || !same_group(prev, r);
    if (!r->r)
      fprintf(f, "%8s %4u  %-10s n/a: %s\n", first ? seq : "", r->pt.w.gpus, r->pt.sched->name,
              r->pt.na);
    else
      fprintf(f, "%8s %4u  %-10s %10.3f %10.3f %10.3f %10.3f %10.3f %8s %8s %7.1f%% %7.1f%% %8s\n",
              first ? seq : "", r->pt.w.gpus, r->pt.sched->name, r->r->step_s * 1e3,
              r->r->compute_s * 1e3, r->r->comm_s * 1e3, r->r->exposed_s * 1e3,
              r->r->imbalance_s * 1e3, speedup_text((char[16]){0}, r->speedup_vs_best),
              speedup_text((char[16]){0}, r->speedup_vs_ring), 100 * r->max_util,
              100 * r->mean_util, mem_text((char[24]){0}, r));
    prev = r;
    bool last = i + 1 == c->results->len || !same_group(r, c->results->pdata[i + 1]);
    if (last) {
      guint j0 = i;
      while (j0 > 0 && same_group(c->results->pdata[j0 - 1], r)) j0--;
      g_autofree char *v = verdict_line(t, (sim_result *const *)c->results->pdata + j0, i + 1 - j0);
      fprintf(f, "            => %s\n", v);
      baseline_na(f, c, r);
      for (guint j = j0; j <= i; j++) links_line(f, ((const sim_result *)c->results->pdata[j])->topo, c->results->pdata[j],
                                                   c->links_summary);
      group_notes(f, c, j0, i + 1, seen, "            ");
      conf_notes(f, c, j0, i + 1, conf_seen, "            ");
    }
  }
  if (c->results->len) {
    fputc('\n', f);
    links_summary(f, c);
  }
}

void report_csv(FILE *f, const report_ctx *c) {
  fputs("scheduler,topology,gpus,seq_len,batch,heads,kv_heads,head_dim,dtype,mask,pass,"
        "step_ms,compute_ms,comm_ms,exposed_comm_ms,speedup_vs_ring,max_link_util,"
        "mean_link_util,imbalance_ms,speedup_vs_best,baseline,status,confidence,overrides,"
        "peak_mem_gib,fits,peak_reserved_gib,scope,attention_ms,job_gpus,tokens_per_s_per_gpu,mfu,"
        "extended\n", f);
  for (guint i = 0; i < c->results->len; i++) {
    const sim_result *r = c->results->pdata[i];
    const workload *w = &r->pt.w;
    report_csv_str(f, r->pt.sched->name);
    fputc(',', f);
    report_csv_str(f, r->topo->name);
    fprintf(f, ",%u,%" G_GUINT64_FORMAT ",%u,%u,%u,%u,", w->gpus, w->seq_len, w->batch,
            w->heads, w->kv_heads, w->head_dim);
    report_csv_str(f, w->dtype);
    fprintf(f, ",%s,%s,", mask_name(w->causal), pass_name(w->pass));
    if (!r->r) { /* n/a: no figures */
      fputs(",,,,,,,,,", f);
    } else {
      fprintf(f, "%.6f,%.6f,%.6f,%.6f,", r->r->step_s * 1e3, r->r->compute_s * 1e3,
              r->r->comm_s * 1e3, r->r->exposed_s * 1e3);
      csv_num(f, "%.4f", r->speedup_vs_ring);
      fprintf(f, ",%.4f,%.4f,%.6f,", r->max_util, r->mean_util, r->r->imbalance_s * 1e3);
      csv_num(f, "%.4f", r->speedup_vs_best);
      fputc(',', f);
    }
    report_csv_str(f, r->baseline);
    fputc(',', f);
    if (r->pt.na) {
      g_autofree char *status = g_strconcat("n/a: ", r->pt.na, NULL);
      report_csv_str(f, status);
    } else {
      fputs("ok", f);
    }
    g_autofree char *conf = r->r ? compute_conf_label(&r->topo->compute, &r->r->conf) : NULL;
    fputc(',', f);
    report_csv_str(f, conf ? conf : "");
    fputc(',', f);
    report_csv_str(f, r->topo->overrides ? r->topo->overrides : "");
    /* memory: empty for n/a; fits empty where the topology gives no capacity */
    if (r->r) {
      fprintf(f, ",%.4f,%s,", sim_peak_gib(r),
              topo_usable_gib(r->topo) > 0 ? (sim_fits(r) ? "yes" : "no") : "");
      csv_num(f, "%.4f", sim_peak_reserved_gib(r)); /* none for an extended step (sim.h) */
    } else {
      fputs(",,,", f);
    }
    /* the scope's figures (sim.h), empty for n/a but the scope and GPUs */
    fprintf(f, ",%s,", scope_name(w->scope));
    if (r->r) fprintf(f, "%.6f", r->attention_s * 1e3);
    fprintf(f, ",%u,", r->job_gpus ? r->job_gpus : layer_job_gpus(w));
    if (r->r) csv_num(f, "%.1f", sim_tokens_per_s_per_gpu(r));
    fputc(',', f);
    if (r->r) csv_num(f, "%.4f", sim_mfu(r));
    /* whether the figures are extended from a few replayed layers and
     * micro-batches (sim.h) or the whole step's: --memory, --trace and
     * --whole-steps replay every layer, and the two differ a little */
    fputc(',', f);
    if (r->r) fputs(r->extended ? "yes" : "no", f);
    fputc('\n', f);
  }
}

void report_links(FILE *f, const report_ctx *c) {
  fputs("scheduler,topology,gpus,seq_len,mask,pass,channel,kind,capacity_gbps,bytes,busy_ms,"
        "utilization,overrides\n", f);
  for (guint i = 0; i < c->results->len; i++) {
    const sim_result *r = c->results->pdata[i];
    const topology *t = r->topo;
    if (!r->r) continue; /* n/a: nothing ran */
    g_autofree uint8_t *avail = sim_channels_available(t, layer_job_gpus(&r->pt.w));
    for (uint32_t ch = 0; ch < t->channels->len; ch++) {
      if (!avail[ch]) continue;
      const topo_channel *tc = topo_chan(t, ch);
      report_csv_str(f, r->pt.sched->name);
      fputc(',', f);
      report_csv_str(f, t->name);
      fprintf(f, ",%u,%" G_GUINT64_FORMAT ",%s,%s,", r->pt.w.gpus, r->pt.w.seq_len,
              mask_name(r->pt.w.causal), pass_name(r->pt.w.pass));
      report_csv_str(f, tc->name);
      fputc(',', f);
      report_csv_str(f, tc->kind);
      fprintf(f, ",%.3f,%.0f,%.6f,%.4f,", tc->cap_Bps * 1e-9, r->r->chan_bytes[ch],
              r->r->chan_busy_s[ch] * 1e3, sim_util(t, r->r, ch));
      report_csv_str(f, t->overrides ? t->overrides : "");
      fputc('\n', f);
    }
  }
}
