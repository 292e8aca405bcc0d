/* exec_host: PyTorch's host-issue clock.  Each GPU's host thread issues
 * its tasks in plan order and never waits for its GPU, so when every task
 * may start as far as its host is concerned is known before the run
 * (exec_issue_times); the replay (exec.c) and the idle split (exec_idle.c)
 * read it.  It keeps no state of the run: exec_host holds what it returns. */
#include "exec_internal.h"

/* The host thread of each GPU issues its tasks in plan order (a group
 * with host_at, at that task's place instead) and never waits for the GPU
 * (PyTorch's stream semantics: a NCCL wait() makes the stream wait, not
 * the host), so issue times are known before the run.
 * A collective costs each GPU in it comm_host_s; a grouped send/receive
 * p2p_host_s plus p2p_op_host_s per isend or irecv that GPU puts in it (one
 * per message it sends or receives): calibration/h200x2-host, where
 * batch_isend_irecv's host time grows with its ops.  A group starts once
 * every GPU in it has issued it.  A compute task starts once its host has
 * issued it, except a call whose time alone is known
 * (compute_op_alone_s): its kernels start while its host still issues the
 * later ones (calibration/h200x2-linfid: a causal intra call at 2K tokens
 * is 154 us of host work and 195 us of GPU work, 280 us alone), so it may
 * start when its host begins it and ends no earlier than that plus its
 * time alone. */
typedef struct {
  const plan *p;
  const topology *t;
  const exec_opts *o;
  double *issue, *done_by; /* the results (done_by NULL until needed) */
  double *host;            /* per GPU: its host's clock */
  guint *in;               /* per GPU: i+1 once it took part in group i */
  uint32_t *ops;           /* per GPU: scratch, isends and irecvs */
  bool kernels_only;       /* hosts that issue no groups (split_idle) */
} host_clock;

static void issue_comm(host_clock *h, guint i, const plan_task *k) {
  const topology *t = h->t;
  double *host = h->host, *issue = h->issue;
  bool p2p = k->api == COMM_P2P;
  double base = p2p && t->p2p_host_s >= 0 ? t->p2p_host_s : t->comm_host_s;
  double per_op = p2p ? t->p2p_op_host_s : 0;
  const plan_pattern_info *pi = plan_task_pattern(h->p, k);
  if (pi) {
    uint32_t msgs = g_array_index(h->p->xfers, plan_xfer, k->xfer_off).msgs;
    for (uint32_t j = 0; j < pi->n_gpus; j++) {
      uint32_t g = g_array_index(h->p->pattern_gpus, uint32_t, pi->gpu_off + j);
      uint32_t deg = g_array_index(h->p->pattern_degree, uint32_t, pi->degree_off + g);
      host[g] += base + per_op * deg * msgs;
      if (host[g] > issue[i]) issue[i] = host[g];
    }
    return;
  }
  for (uint32_t x = 0; x < k->n_xfer; x++) {
    const plan_xfer *tx = &g_array_index(h->p->xfers, plan_xfer, k->xfer_off + x);
    h->ops[tx->src] += tx->msgs;
    h->ops[tx->dst] += tx->msgs;
  }
  for (uint32_t x = 0; x < k->n_xfer; x++) {
    const plan_xfer *tx = &g_array_index(h->p->xfers, plan_xfer, k->xfer_off + x);
    uint32_t g2[2] = {tx->src, tx->dst};
    for (int e = 0; e < 2; e++) {
      uint32_t g = g2[e];
      if (h->in[g] == i + 1) continue;
      h->in[g] = i + 1;
      host[g] += base + per_op * h->ops[g];
      h->ops[g] = 0;
      if (host[g] > issue[i]) issue[i] = host[g];
    }
  }
}

/* False where a lockstep task's GPUs would issue it at different times. */
static bool issue_compute(host_clock *h, guint i, const plan_task *k) {
  const compute_model *m = &h->t->compute;
  bool skip = exec_skipped(h->o, k);
  double c = skip ? 0 : compute_op_host_s(m, &k->op);
  double alone = skip ? 0 : compute_op_alone_s(m, &k->op);
  uint32_t g0 = k->gpu == PLAN_ALL ? 0 : k->gpu;
  /* a lockstep task's copies are issued at once only if every host got
   * there at the same time: else the plan must be expanded */
  if (k->gpu == PLAN_ALL)
    for (uint32_t g = 1; g < h->p->n_gpus; g++)
      if (h->host[g] != h->host[0]) return false;
  double begun = h->host[g0];
  if (k->gpu == PLAN_ALL)
    for (uint32_t g = 0; g < h->p->n_gpus; g++) h->host[g] += c;
  else
    h->host[g0] += c;
  h->issue[i] = alone > 0 ? begun : h->host[g0];
  if (alone > 0) {
    if (!h->done_by) h->done_by = g_new0(double, h->p->tasks->len);
    h->done_by[i] = begun + alone;
  }
  return true;
}

static bool issue_task(host_clock *h, guint i) {
  const plan_task *k = plan_task_at(h->p, i);
  if (k->kind == TASK_COMM) {
    if (!h->o->no_comm && !h->kernels_only) issue_comm(h, i, k);
    return true;
  }
  return h->o->no_compute || issue_compute(h, i, k);
}

static gint by_host_at(gconstpointer a, gconstpointer b) {
  const uint32_t *x = a, *y = b; /* (host_at, task) */
  return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* exec_internal.h */
double *exec_issue_times(const plan *p, const topology *t, const exec_opts *o,
                         bool kernels_only, double **done_by) {
  guint nt = p->tasks->len;
  g_autofree double *host = g_new0(double, p->n_gpus);
  g_autofree guint *in = g_new0(guint, p->n_gpus);
  g_autofree uint32_t *ops = g_new0(uint32_t, p->n_gpus);
  host_clock h = {p, t, o, g_new0(double, nt), NULL, host, in, ops, kernels_only};
  /* groups issued ahead of their place, by the place */
  g_autoptr(GArray) early = g_array_new(FALSE, FALSE, 2 * sizeof(uint32_t));
  for (guint i = 0; i < nt; i++) {
    uint32_t at = plan_task_at(p, i)->host_at;
    if (at != PLAN_IN_PLACE) g_array_append_vals(early, (uint32_t[2]){at, i}, 1);
  }
  g_array_sort(early, by_host_at);
  bool ok = true;
  guint e = 0;
  for (guint i = 0; ok && i < nt; i++) {
    for (; ok && e < early->len && g_array_index(early, uint32_t, 2 * e) == i; e++)
      ok = issue_task(&h, g_array_index(early, uint32_t, 2 * e + 1));
    if (ok && plan_task_at(p, i)->host_at == PLAN_IN_PLACE) ok = issue_task(&h, i);
  }
  if (!ok) {
    g_free(h.issue);
    g_free(h.done_by);
    h.issue = h.done_by = NULL;
  }
  *done_by = h.done_by;
  return h.issue;
}
