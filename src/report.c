/* report: table, CSV, link report and atomic file writing. */
#include "report.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "layers.h"
#include "sizes.h"

static const char *mask_name(bool causal) { return causal ? "causal" : "full"; }

static bool same_group(const sim_result *a, const sim_result *b) {
  return a->pt.w.seq_len == b->pt.w.seq_len && a->pt.w.gpus == b->pt.w.gpus &&
         a->pt.w.causal == b->pt.w.causal && a->pt.w.pass == b->pt.w.pass;
}

/* Per channel kind, over the channels on routes among the point's GPUs. */
typedef struct {
  const char *kind;
  unsigned channels, idle;
  double max_util, sum_util;
} kind_stat;

static GArray *kind_stats(const topology *t, const sim_result *r) {
  GArray *ks = g_array_new(FALSE, TRUE, sizeof(kind_stat));
  g_autofree uint8_t *avail = sim_channels_available(t, r->pt.w.gpus);
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
    double u = r->r->step_s > 0 ? r->r->chan_bytes[c] / (ch->cap_Bps * r->r->step_s) : 0;
    k->channels++;
    k->idle += r->r->chan_bytes[c] <= 0;
    k->sum_util += u;
    if (u > k->max_util) k->max_util = u;
  }
  return ks;
}

static void links_line(FILE *f, const topology *t, const sim_result *r) {
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
  fprintf(f, "            links %-10s busiest %s (max %.1f%%), idlest %s (mean %.1f%%), "
          "%u of %u channels idle\n", r->pt.sched->name, busy ? busy->kind : "-",
          busy ? 100 * busy->max_util : 0.0, idle ? idle->kind : "-",
          idle && idle->channels ? 100 * idle->sum_util / idle->channels : 0.0, idle_n, chans);
}

void report_table(FILE *f, const report_ctx *c) {
  const scenario *s = c->s;
  const topology *t = s->topo;
  const workload *m = &s->model;
  fprintf(f, "tasp-sim %s | scenario %s | topology %s: %u GPUs", TASP_VERSION, s->name, t->name,
          t->n_gpus);
  if (t->description && *t->description) fprintf(f, " (%s)", t->description);
  fprintf(f, "\nattention: batch %u, %u heads, %u KV heads, head dim %u, %s\n", m->batch,
          m->heads, m->kv_heads, m->head_dim, m->dtype);
  if (layers_total(m) > 1 || layers_count(m, ATTN_LINEAR)) {
    g_autofree char *mix = layers_text(m);
    fprintf(f, "layers: %s%s%s\n", mix, m->decay ? " (linear with decay)" : "",
            layers_total(m) > 1 ? "; times are the sum over the layers, each kind simulated once"
                                : "");
  }
  GHashTable *notes = g_hash_table_new(g_str_hash, g_str_equal);
  const sim_result *prev = NULL;
  for (guint i = 0; i < c->results->len; i++) {
    const sim_result *r = c->results->pdata[i];
    if (!prev || r->pt.w.causal != prev->pt.w.causal || r->pt.w.pass != prev->pt.w.pass) {
      fprintf(f, "\nmask %s, pass %s\n", mask_name(r->pt.w.causal), pass_name(r->pt.w.pass));
      fprintf(f, "%8s %4s  %-10s %11s %11s %11s %11s %8s %8s %8s\n", "seq", "sp", "sched",
              "step_ms", "compute_ms", "comm_ms", "exposed_ms", "vs_ring", "max_util",
              "mean_util");
    }
    g_autofree char *seq = size_format(r->pt.w.seq_len);
    bool first = !prev || !same_group(prev, r);
    fprintf(f, "%8s %4u  %-10s %11.3f %11.3f %11.3f %11.3f %7.2fx %7.1f%% %7.1f%%\n",
            first ? seq : "", r->pt.w.gpus, r->pt.sched->name, r->r->step_s * 1e3,
            r->r->compute_s * 1e3, r->r->comm_s * 1e3, r->r->exposed_s * 1e3,
            r->speedup_vs_ring, 100 * r->max_util, 100 * r->mean_util);
    if (r->note) g_hash_table_add(notes, r->note);
    prev = r;
    bool last = i + 1 == c->results->len || !same_group(r, c->results->pdata[i + 1]);
    if (last) {
      guint j0 = i;
      while (j0 > 0 && same_group(c->results->pdata[j0 - 1], r)) j0--;
      for (guint j = j0; j <= i; j++) links_line(f, t, c->results->pdata[j]);
    }
  }
  /* notes in a stable order */
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array(notes, NULL);
  guint nk = g_hash_table_size(notes);
  qsort(keys, nk, sizeof(gpointer), (int (*)(const void *, const void *))g_strcmp0);
  for (guint i = 0; i < nk; i++) fprintf(f, "note: %s\n", (char *)keys[i]);
  g_hash_table_destroy(notes);
}

void report_csv(FILE *f, const report_ctx *c) {
  fputs("scheduler,topology,gpus,seq_len,batch,heads,kv_heads,head_dim,dtype,mask,pass,"
        "step_ms,compute_ms,comm_ms,exposed_comm_ms,speedup_vs_ring,max_link_util,"
        "mean_link_util\n", f);
  for (guint i = 0; i < c->results->len; i++) {
    const sim_result *r = c->results->pdata[i];
    const workload *w = &r->pt.w;
    fprintf(f, "%s,%s,%u,%" G_GUINT64_FORMAT ",%u,%u,%u,%u,%s,%s,%s,%.6f,%.6f,%.6f,%.6f,%.4f,"
            "%.4f,%.4f\n", r->pt.sched->name, c->s->topo->name, w->gpus, w->seq_len, w->batch,
            w->heads, w->kv_heads, w->head_dim, w->dtype, mask_name(w->causal),
            pass_name(w->pass), r->r->step_s * 1e3, r->r->compute_s * 1e3, r->r->comm_s * 1e3,
            r->r->exposed_s * 1e3, r->speedup_vs_ring, r->max_util, r->mean_util);
  }
}

void report_links(FILE *f, const report_ctx *c) {
  const topology *t = c->s->topo;
  fputs("scheduler,topology,gpus,seq_len,mask,pass,channel,kind,capacity_gbps,bytes,busy_ms,"
        "utilization\n", f);
  for (guint i = 0; i < c->results->len; i++) {
    const sim_result *r = c->results->pdata[i];
    g_autofree uint8_t *avail = sim_channels_available(t, r->pt.w.gpus);
    for (uint32_t ch = 0; ch < t->channels->len; ch++) {
      if (!avail[ch]) continue;
      const topo_channel *tc = topo_chan(t, ch);
      double u = r->r->step_s > 0 ? r->r->chan_bytes[ch] / (tc->cap_Bps * r->r->step_s) : 0;
      fprintf(f, "%s,%s,%u,%" G_GUINT64_FORMAT ",%s,%s,%s,%s,%.3f,%.0f,%.6f,%.4f\n",
              r->pt.sched->name, t->name, r->pt.w.gpus, r->pt.w.seq_len,
              mask_name(r->pt.w.causal), pass_name(r->pt.w.pass), tc->name, tc->kind,
              tc->cap_Bps * 1e-9, r->r->chan_bytes[ch], r->r->chan_busy_s[ch] * 1e3, u);
    }
  }
}

bool report_write(const char *path, void (*fn)(FILE *, const report_ctx *),
                  const report_ctx *c, GError **err) {
  if (!strcmp(path, "-")) {
    fn(stdout, c);
    fflush(stdout);
    return true;
  }
  /* a regular file appears only when complete (temporary name, renamed);
   * a device such as /dev/null is written in place */
  bool atomic = !g_file_test(path, G_FILE_TEST_EXISTS) || g_file_test(path, G_FILE_TEST_IS_REGULAR);
  g_autofree char *tmp = atomic ? g_strdup_printf("%s.tmp.%d", path, (int)getpid()) : g_strdup(path);
  FILE *f = fopen(tmp, "w");
  bool ok = f != NULL;
  if (ok) {
    fn(f, c);
    ok = !ferror(f);
    ok = fclose(f) == 0 && ok;
  }
  if (ok && atomic) ok = g_rename(tmp, path) == 0;
  if (!ok) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot write: %s", path, g_strerror(errno));
    if (atomic) g_unlink(tmp);
  }
  return ok;
}
