/* tasp-replay: measured vs predicted time of every link pattern in
 * calibration files, with the relative error; optional overrides of the
 * topology's link constants, for fitting (scripts/fit_links.py). */
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "replay.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(GArray *a) {
  if (a->len == 0) return NAN;
  g_array_sort(a, (GCompareFunc)cmp_double);
  guint m = a->len / 2;
  return a->len % 2 ? g_array_index(a, double, m)
                    : (g_array_index(a, double, m - 1) + g_array_index(a, double, m)) / 2;
}

int main(int argc, char **argv) {
  double port = 0, cap = -1, host = -1, launch = -1, p2p_launch = -1, p2p_msg = -1;
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
      {"port-gbps", 0, 0, G_OPTION_ARG_DOUBLE, &port, "Override every NVSwitch port capacity", "GB/s"},
      {"flow-cap-gbps", 0, 0, G_OPTION_ARG_DOUBLE, &cap, "Override the per-flow cap (0: none)", "GB/s"},
      {"host-us", 0, 0, G_OPTION_ARG_DOUBLE, &host, "Override the host cost of a group", "us"},
      {"launch-us", 0, 0, G_OPTION_ARG_DOUBLE, &launch, "Override the device launch cost of a collective", "us"},
      {"p2p-launch-us", 0, 0, G_OPTION_ARG_DOUBLE, &p2p_launch, "Override the device launch cost of grouped send/receive", "us"},
      {"p2p-msg-us", 0, 0, G_OPTION_ARG_DOUBLE, &p2p_msg, "Override its cost per message of the busiest GPU", "us"},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "Summary line only", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) ctx = g_option_context_new("TOPOLOGY.json LINKS.jsonl...");
  g_option_context_add_main_entries(ctx, entries, NULL);
  g_autoptr(GError) err = NULL;
  if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc < 3) {
    fprintf(stderr, "tasp-replay: error: %s\n", err ? err->message : "expected a topology and link files");
    return 2;
  }
  topology *t = topo_load(argv[1], &err);
  if (!t) { fprintf(stderr, "tasp-replay: error: %s\n", err->message); return 2; }
  for (guint c = 0; port > 0 && c < t->channels->len; c++) {
    topo_channel *ch = &g_array_index(t->channels, topo_channel, c);
    if (!g_strcmp0(ch->kind, "nvswitch_port")) ch->cap_Bps = port * 1e9;
  }
  if (cap >= 0) topo_set_route_caps(t, cap * 1e9);
  if (host >= 0) t->comm_host_s = host * 1e-6;
  if (launch >= 0) t->launch_s = launch * 1e-6;
  if (p2p_launch >= 0) t->p2p_launch_s = p2p_launch * 1e-6;
  if (p2p_msg >= 0) t->p2p_msg_s = p2p_msg * 1e-6;

  g_autoptr(GArray) cases = g_array_new(FALSE, FALSE, sizeof(replay_case));
  for (int i = 2; i < argc; i++)
    if (!replay_read(argv[i], cases, &err)) {
      fprintf(stderr, "tasp-replay: error: %s\n", err->message);
      topo_free(t);
      return 2;
    }
  g_autoptr(GArray) big = g_array_new(FALSE, FALSE, sizeof(double));
  g_autoptr(GArray) all = g_array_new(FALSE, FALSE, sizeof(double));
  if (!quiet) printf("%-14s %-16s %2s %10s %10s %10s %8s\n", "pattern", "api", "n", "msg_KiB",
                     "measured_ms", "predicted_ms", "error");
  for (guint i = 0; i < cases->len; i++) {
    const replay_case *c = &g_array_index(cases, replay_case, i);
    double s = replay_predict(t, c);
    if (s < 0) continue;
    double e = s / c->measured_s - 1, ae = fabs(e);
    g_array_append_val(all, ae);
    if (c->msg_bytes >= 4 * 1024 * 1024) g_array_append_val(big, ae);
    if (!quiet)
      printf("%-14s %-16s %2u %10.0f %10.4f %10.4f %+7.1f%%\n", c->pattern, c->api, c->n,
             c->msg_bytes / 1024, c->measured_s * 1e3, s * 1e3, 100 * e);
  }
  printf("median |error|: %.2f%% for messages >= 4 MiB (%u), %.2f%% over all sizes (%u)\n",
         100 * median(big), big->len, 100 * median(all), all->len);
  topo_free(t);
  return 0;
}
