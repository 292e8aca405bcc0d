/* plan_buf: buffer declarations of a plan (plan_buf.h). */
#include "plan_buf.h"

#include <string.h>

static GArray *bufs(plan *p) {
  if (!p->bufs) p->bufs = g_array_new(FALSE, FALSE, sizeof(plan_buf));
  return p->bufs;
}

static GArray *uses(plan *p) {
  if (!p->buf_uses) p->buf_uses = g_array_new(FALSE, FALSE, sizeof(plan_buf_use));
  return p->buf_uses;
}

/* g_intern_string(name), through a few names this thread interned last:
 * a scheduler names its buffers with a handful of literals, a million
 * times over in a causal plan, and the intern table's hash and lock were
 * a twentieth of a 1,024-GPU causal ring's plan.  An entry is used only
 * where the text is still the same (a name built in a reused buffer). */
static const char *intern(const char *name) {
  enum { WAYS = 8 };
  static __thread struct { const char *at, *interned; } seen[WAYS];
  static __thread unsigned next;
  for (unsigned i = 0; i < WAYS; i++)
    if (seen[i].at == name && (name == seen[i].interned || !strcmp(name, seen[i].interned)))
      return seen[i].interned;
  const char *s = g_intern_string(name);
  seen[next].at = name;
  seen[next].interned = s;
  next = (next + 1) % WAYS;
  return s;
}

/* The index of interned name s among p's buffer names, added if new:
 * the last few first (a scheduler alternates among a handful). */
static uint32_t name_id(plan *p, const char *s) {
  plan_buf_names *n = p->buf_names;
  if (!n) {
    n = p->buf_names = g_new0(plan_buf_names, 1);
    n->names = g_ptr_array_new();
    n->index = g_hash_table_new(g_direct_hash, g_direct_equal);
  }
  for (unsigned i = 0; i < PLAN_BUF_NAME_WAYS; i++)
    if (n->seen[i] == s) return n->seen_id[i];
  uint32_t id = GPOINTER_TO_UINT(g_hash_table_lookup(n->index, s));
  if (id) id--;
  else {
    id = n->names->len;
    g_assert(id < (1u << 30)); /* plan_buf.name_id's bits */
    g_ptr_array_add(n->names, (gpointer)s);
    g_hash_table_insert(n->index, (gpointer)s, GUINT_TO_POINTER(id + 1));
  }
  n->seen[n->next] = s;
  n->seen_id[n->next] = id;
  n->next = (n->next + 1) % PLAN_BUF_NAME_WAYS;
  return id;
}

uint32_t plan_buf_new(plan *p, uint32_t gpu, double bytes, const char *name) {
  g_assert(gpu == PLAN_ALL || gpu < p->n_gpus);
  g_assert(bytes >= 0 && name);
  g_assert(plan_buf_count(p) < PLAN_BUF_MAX - 1); /* plan_buf_use.buf's bits */
  plan_buf b = {.bytes = bytes, .gpu = gpu, .name_id = name_id(p, intern(name))};
  g_array_append_val(bufs(p), b);
  return p->bufs->len - 1;
}

uint32_t plan_buf_input(plan *p, uint32_t gpu, double bytes, const char *name) {
  uint32_t id = plan_buf_new(p, gpu, bytes, name);
  g_array_index(p->bufs, plan_buf, id).input = true;
  g_array_index(p->bufs, plan_buf, id).keep = true;
  return id;
}

uint32_t plan_buf_saved_input(plan *p, uint32_t gpu, double bytes, const char *name) {
  uint32_t id = plan_buf_new(p, gpu, bytes, name);
  g_array_index(p->bufs, plan_buf, id).input = true;
  return id;
}

void plan_buf_use_on(plan *p, uint32_t task, uint32_t buf, uint32_t gpu, bool write,
                     plan_buf_when when) {
  g_assert(buf < plan_buf_count(p) && task < p->tasks->len);
  const plan_buf *b = plan_buf_at(p, buf);
  const plan_task *t = plan_task_at(p, task);
  /* a compute task touches its own GPU's copy only */
  g_assert(t->kind != TASK_COMPUTE || b->gpu == PLAN_ALL || t->gpu == b->gpu);
  g_assert(t->kind != TASK_COMPUTE || t->gpu != PLAN_ALL || b->gpu == PLAN_ALL);
  g_assert(gpu == PLAN_ALL || gpu < p->n_gpus);
  g_assert(gpu == PLAN_ALL || b->gpu == PLAN_ALL || b->gpu == gpu);
  plan_buf_use u = {.buf = buf, .write = write, .when = when, .task = task, .gpu = gpu};
  g_array_append_val(uses(p), u);
}

static void use(plan *p, uint32_t task, uint32_t buf, bool write, plan_buf_when when) {
  plan_buf_use_on(p, task, buf, PLAN_ALL, write, when);
}

void plan_buf_writes(plan *p, uint32_t task, uint32_t buf) {
  use(p, task, buf, true, PLAN_BUF_DURING);
}
void plan_buf_reads(plan *p, uint32_t task, uint32_t buf) {
  use(p, task, buf, false, PLAN_BUF_DURING);
}
void plan_buf_reads_early(plan *p, uint32_t task, uint32_t buf) {
  use(p, task, buf, false, PLAN_BUF_EARLY);
}
void plan_buf_writes_late(plan *p, uint32_t task, uint32_t buf) {
  use(p, task, buf, true, PLAN_BUF_LATE);
}
void plan_buf_reads_late(plan *p, uint32_t task, uint32_t buf) {
  use(p, task, buf, false, PLAN_BUF_LATE);
}

void plan_buf_keep(plan *p, uint32_t buf) {
  g_assert(buf < plan_buf_count(p));
  g_array_index(p->bufs, plan_buf, buf).keep = true;
}

uint32_t plan_buf_out(plan *p, uint32_t task, double bytes, const char *name) {
  const plan_task *t = plan_task_at(p, task);
  uint32_t gpu = t->kind == TASK_COMPUTE ? t->gpu : PLAN_ALL;
  uint32_t id = plan_buf_new(p, gpu, bytes, name);
  plan_buf_writes(p, task, id);
  return id;
}

void plan_buf_free_all(plan *p) {
  if (p->bufs) g_array_free(p->bufs, TRUE);
  if (p->buf_uses) g_array_free(p->buf_uses, TRUE);
  p->bufs = p->buf_uses = NULL;
  if (p->buf_names) {
    g_ptr_array_free(p->buf_names->names, TRUE);
    g_hash_table_destroy(p->buf_names->index);
    g_free(p->buf_names);
    p->buf_names = NULL;
  }
}

void plan_buf_expand(plan *q, const plan *p, const uint32_t *first) {
  for (uint32_t i = 0; i < plan_buf_count(p); i++) {
    plan_buf b = *plan_buf_at(p, i);
    b.name_id = name_id(q, plan_buf_name(p, plan_buf_at(p, i)));
    g_array_append_val(bufs(q), b);
  }
  for (uint32_t i = 0; i < plan_buf_use_count(p); i++) {
    plan_buf_use u = *plan_buf_use_at(p, i);
    const plan_task *t = plan_task_at(p, u.task);
    uint32_t copies = t->kind == TASK_COMPUTE && t->gpu == PLAN_ALL ? p->n_gpus : 1;
    uint32_t at = first[u.task];
    for (uint32_t g = 0; g < copies; g++) {
      if (copies > 1 && u.gpu != PLAN_ALL && u.gpu != g) continue; /* another GPU's copy */
      u.task = at + g;
      g_array_append_val(uses(q), u);
    }
  }
}
