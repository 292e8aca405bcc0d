/* replay: link patterns as plans of one communication group. */
#include "replay.h"

#include <string.h>

#include "exec.h"
#include "jsonio.h"
#include "plan.h"

bool replay_read(const char *file, GArray *cases, GError **err) {
  g_autofree char *text = NULL;
  if (!g_file_get_contents(file, &text, NULL, NULL)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot read", file);
    return false;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  unsigned lineno = 0;
  for (char **l = lines; *l; l++) {
    lineno++;
    if (!**l) continue;
    g_autoptr(json_object) o = json_tokener_parse(*l);
    json_object *p, *a, *n, *b, *ms;
    if (!o || !json_object_object_get_ex(o, "pattern", &p) ||
        !json_object_object_get_ex(o, "api", &a) || !json_object_object_get_ex(o, "n", &n) ||
        !json_object_object_get_ex(o, "msg_bytes", &b) || !json_object_object_get_ex(o, "ms", &ms)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "%s: line %u: expected a JSON object with pattern, api, n, msg_bytes, ms", file,
                  lineno);
      return false;
    }
    replay_case c = {.n = (uint32_t)json_object_get_int(n),
                     .msg_bytes = json_object_get_double(b),
                     .measured_s = json_object_get_double(ms) * 1e-3};
    g_strlcpy(c.pattern, json_object_get_string(p), sizeof c.pattern);
    g_strlcpy(c.api, json_object_get_string(a), sizeof c.api);
    g_array_append_val(cases, c);
  }
  return true;
}

/* The transfers each pattern makes (calibration/h200x4/README.md). */
static bool add_pattern(plan *p, uint32_t comm, const replay_case *c) {
  uint32_t n = c->n;
  double b = c->msg_bytes;
  if (!strcmp(c->pattern, "pair_uni")) {
    plan_xfer_add(p, comm, 0, 1, b);
  } else if (!strcmp(c->pattern, "pair_bi")) {
    plan_xfer_add(p, comm, 0, 1, b);
    plan_xfer_add(p, comm, 1, 0, b);
  } else if (!strcmp(c->pattern, "two_pairs_uni")) {
    plan_xfer_add(p, comm, 0, 1, b);
    plan_xfer_add(p, comm, 2, 3, b);
  } else if (!strcmp(c->pattern, "ring_uni")) {
    for (uint32_t i = 0; i < n; i++) plan_xfer_add(p, comm, i, (i + 1) % n, b);
  } else if (!strcmp(c->pattern, "ring_bi")) {
    for (uint32_t i = 0; i < n; i++) {
      plan_xfer_add(p, comm, i, (i + 1) % n, b);
      plan_xfer_add(p, comm, i, (i + n - 1) % n, b);
    }
  } else if (!strcmp(c->pattern, "all_peers") || !strcmp(c->pattern, "alltoall") ||
             !strcmp(c->pattern, "allgather")) {
    /* all-gather moves the same bytes per GPU as an all-to-all: (n-1) x msg
     * out and in; NCCL's ring algorithm pipelines them over the ring */
    for (uint32_t i = 0; i < n; i++)
      for (uint32_t j = 0; j < n; j++)
        if (i != j) plan_xfer_add(p, comm, i, j, b);
  } else {
    return false;
  }
  return true;
}

double replay_predict(const topology *t, const replay_case *c) {
  if (c->n < 2 || c->n > t->n_gpus) return -1;
  plan *p = plan_new(c->n, false);
  /* batch_isend_irecv is grouped send/receive; every other API one call,
   * replayed with direct flows as measured and fitted (scripts/fit_links.py) */
  uint32_t comm = plan_comm(p, 0, strcmp(c->api, "batch_p2p") ? COMM_ALL_TO_ALL : COMM_P2P);
  if (!add_pattern(p, comm, c)) {
    plan_free(p);
    return -1;
  }
  plan_finish(p);
  exec_opts o = {.no_compute = true};
  exec_result *r = exec_run(p, t, &o);
  double s = r->step_s;
  exec_result_free(r);
  plan_free(p);
  return s;
}
