/* exec_queue: how far a host may run ahead of its GPU (exec_queue.h). */
#include "exec_queue.h"

#include <math.h>

typedef struct {
  uint64_t key; /* its place in the host's order */
  uint32_t task;
} entry;

struct exec_queue {
  const plan *p;
  uint64_t (*key)(const plan *, uint32_t);
  uint32_t *off;  /* per list: its first entry (CSR) */
  bool shared;    /* every compute task runs on every GPU (a lockstep plan):
                     one list for all */
  entry *e;       /* compute tasks, each GPU's in the host's order */
  double *end_s;  /* per task of the plan: when it ended, NAN: not yet */
  uint32_t *made; /* per GPU: entries keyed at or before the last task asked
                     about (requests come nearly in the host's order: a walk
                     from there instead of a search) */
  uint64_t *binds; /* per list: the key of its entry EXEC_LAUNCH_QUEUE (0-based),
                      the first launch that can wait; UINT64_MAX: none.  A
                      request keyed before it is answered from this small
                      array, not from the entries (one cache miss or two
                      each, and a causal plan's memory replay asks at most
                      of its allocations) */
};

static gint by_key(gconstpointer a, gconstpointer b, gpointer unused) {
  (void)unused;
  uint64_t u = ((const entry *)a)->key, v = ((const entry *)b)->key;
  return (u > v) - (u < v);
}

exec_queue *exec_queue_new(const plan *p, uint64_t (*key)(const plan *, uint32_t)) {
  uint32_t n = p->n_gpus, all = 0; /* lockstep tasks: on every GPU */
  g_autofree uint32_t *count = g_new0(uint32_t, n + 1);
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE) continue;
    if (t->gpu == PLAN_ALL) all++;
    else count[t->gpu + 1]++;
  }
  bool binds = false, shared = true;
  for (uint32_t g = 0; g < n; g++) {
    shared &= count[g + 1] == 0;
    count[g + 1] += all;
    binds |= count[g + 1] > EXEC_LAUNCH_QUEUE;
  }
  if (!binds) return NULL;
  exec_queue *q = g_new0(exec_queue, 1);
  q->p = p;
  q->key = key;
  q->shared = shared;
  n = shared ? 1 : n; /* lists */
  q->off = g_new0(uint32_t, n + 1);
  for (uint32_t g = 0; g < n; g++) q->off[g + 1] = q->off[g] + count[g + 1];
  q->e = g_new(entry, q->off[n]);
  g_autofree uint32_t *fill = g_memdup2(q->off, (n + 1) * sizeof(uint32_t));
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE) continue;
    entry x = {key(p, i), i};
    for (uint32_t g = t->gpu == PLAN_ALL || shared ? 0 : t->gpu; g < n; g++) {
      q->e[fill[g]++] = x;
      if (t->gpu != PLAN_ALL) break;
    }
  }
  /* compute tasks are issued in their place (plan order) as a rule: a
   * GPU's entries are sorted already unless some came early */
  for (uint32_t g = 0; g < n; g++) {
    entry *v = q->e + q->off[g];
    uint32_t len = q->off[g + 1] - q->off[g], i = 1;
    while (i < len && v[i - 1].key <= v[i].key) i++;
    if (i < len) g_qsort_with_data(v, (gint)len, sizeof *v, by_key, NULL);
  }
  q->made = g_new0(uint32_t, p->n_gpus);
  q->binds = g_new(uint64_t, n);
  for (uint32_t g = 0; g < n; g++)
    q->binds[g] = q->off[g + 1] - q->off[g] > EXEC_LAUNCH_QUEUE
                      ? q->e[q->off[g] + EXEC_LAUNCH_QUEUE].key : UINT64_MAX;
  q->end_s = g_new(double, p->tasks->len);
  for (guint i = 0; i < p->tasks->len; i++) q->end_s[i] = NAN;
  return q;
}

void exec_queue_free(exec_queue *q) {
  if (!q) return;
  g_free(q->off);
  g_free(q->e);
  g_free(q->made);
  g_free(q->binds);
  g_free(q->end_s);
  g_free(q);
}

void exec_queue_ended(exec_queue *q, uint32_t task, double now_s) {
  if (q && plan_task_at(q->p, task)->kind == TASK_COMPUTE) q->end_s[task] = now_s;
}

double exec_queue_host_floor(exec_queue *q, uint32_t g, uint32_t task, double now_s) {
  if (!q) return 0;
  /* launches of g the host has made by `task`: its entries keyed at or
   * before it (the task itself, if a compute task) */
  uint64_t k = q->key(q->p, task);
  uint32_t l = q->shared ? 0 : g;
  /* at most EXEC_LAUNCH_QUEUE entries keyed at or before k: none waited
   * (made is left as it was: a later walk starts there all the same) */
  if (k < q->binds[l]) return 0;
  const entry *v = q->e + q->off[l];
  uint32_t len = q->off[l + 1] - q->off[l], made = q->made[g];
  while (made < len && v[made].key <= k) made++;
  while (made > 0 && v[made - 1].key > k) made--;
  q->made[g] = made;
  if (made <= EXEC_LAUNCH_QUEUE) return 0;
  /* the last of them waited for the one EXEC_LAUNCH_QUEUE before it */
  double end = q->end_s[v[made - 1 - EXEC_LAUNCH_QUEUE].task];
  return isnan(end) || end > now_s ? now_s : end;
}
