/* exec_mem_class: GPUs of one memory replay (exec_mem_class.h).
 *
 * The hash of a GPU's sequence is a sum of per-task parts, so that parts
 * every GPU shares need not be added at all: a task's part on a GPU it
 * touches with no use of its own ("plain") is the same on all of them; a
 * GPU with uses of its own in the task (a buffer of that GPU only, a use
 * naming that GPU's copy) gets instead the hash of those uses, in order,
 * each with how many of the uses every GPU of the task has come before it
 * (writes first, then reads: the order exec_mem applies them in), which
 * fixes the GPU's sequence; a group with a use per GPU, each of its own
 * copy, has its GPUs alike.  A task touching every GPU adds its plain
 * part to none (a constant); a pattern group over some GPUs adds it to
 * its pattern, and each pattern's sum goes to its GPUs once at the end. */
#include "exec_mem_class.h"

#include <string.h>

typedef struct {
  uint64_t a, b;
} h128;

/* splitmix64's finaliser: a bijection that spreads every input bit */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

/* h followed by v (two hashes of unlike construction, for 128 bits) */
static h128 step(h128 h, uint64_t v) {
  return (h128){mix(h.a ^ mix(v)), mix((h.b + v) * 0xff51afd7ed558ccdu ^ 0xc4ceb9fe1a85ec53u)};
}

static void add(h128 *to, h128 x) { to->a += x.a, to->b += x.b; }
static void sub(h128 *to, h128 x) { to->a -= x.a, to->b -= x.b; }

/* Tags of the parts, so that unlike parts of equal numbers differ. */
enum { TAG_PLAIN = 1, TAG_IN, TAG_OUT, TAG_INPUT, TAG_FIRST_KERNEL };

static const h128 SEED = {0x243f6a8885a308d3u, 0x13198a2e03707344u};

/* The GPUs a task touches, as exec_mem's replay counts them: a lockstep
 * task all; a compute task its GPU; a pattern group its pattern's; a
 * group of listed transfers their ends (in `list`). */
typedef struct {
  const plan *p;
  uint32_t n;
  h128 *sig;       /* per GPU: the sum of its parts */
  h128 *own;       /* per GPU: its own uses in the current task */
  uint32_t *mark;  /* per GPU: == now when it has own uses in the current task */
  uint32_t *in;    /* per GPU: == now when the current task's listed transfers touch it */
  uint32_t now;
  uint32_t *list, n_list;  /* the current task's GPUs, when listed */
  uint32_t *owners, n_owners; /* GPUs with own uses in the current task */
  h128 *pat;       /* per pattern: the plain parts of its groups */
  bool *pat_used;
} builder;

/* How task t's GPUs are given: ALL, ONE (t->gpu), a PATTERN, or a LIST. */
typedef enum { S_ALL, S_ONE, S_PATTERN, S_LIST } set_kind;

static set_kind task_set(builder *b, const plan_task *t, const plan_pattern_info **pi) {
  *pi = NULL;
  if (t->kind == TASK_COMPUTE) return t->gpu == PLAN_ALL ? S_ALL : S_ONE;
  *pi = plan_task_pattern(b->p, t);
  if (*pi) return (*pi)->n_gpus == b->n ? S_ALL : S_PATTERN;
  b->n_list = 0;
  for (uint32_t i = 0; i < t->n_xfer; i++) {
    const plan_xfer *x = &g_array_index(b->p->xfers, plan_xfer, t->xfer_off + i);
    uint32_t ends[2] = {x->src, x->dst};
    for (int j = 0; j < 2; j++)
      if (b->in[ends[j]] != b->now) {
        b->in[ends[j]] = b->now;
        b->list[b->n_list++] = ends[j];
      }
  }
  return S_LIST;
}

static bool in_set(const builder *b, set_kind k, const plan_task *t, const plan_pattern_info *pi,
                   uint32_t g) {
  switch (k) {
  case S_ALL: return true;
  case S_ONE: return g == t->gpu;
  case S_LIST: return b->in[g] == b->now;
  case S_PATTERN: break;
  }
  /* a pattern's GPUs are ascending */
  const uint32_t *v = &g_array_index(b->p->pattern_gpus, uint32_t, pi->gpu_off);
  uint32_t lo = 0, hi = pi->n_gpus;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (v[mid] < g) lo = mid + 1;
    else hi = mid;
  }
  return lo < pi->n_gpus && v[lo] == g;
}

static void own_use(builder *b, uint32_t g, uint64_t key) {
  if (b->mark[g] != b->now) {
    b->mark[g] = b->now;
    b->own[g] = SEED;
    b->owners[b->n_owners++] = g;
  }
  b->own[g] = step(b->own[g], key);
}

/* Task `task`'s parts into b->sig (or its pattern's sum). */
static void task_parts(builder *b, uint32_t task, const uint32_t *use_off, const uint32_t *use_of,
                       exec_use_fn use, const void *ctx) {
  const plan_task *t = plan_task_at(b->p, task);
  b->now++;
  b->n_owners = 0;
  const plan_pattern_info *pi;
  set_kind k = task_set(b, t, &pi);
  /* an own use's place: after how many uses every GPU of the task has
   * (its order among the GPU's own uses is the hash's order) */
  uint64_t common = 0;
  for (int writes = 1; writes >= 0; writes--)
    for (uint32_t i = use_off[task]; i < use_off[task + 1]; i++) {
      const plan_buf_use *u = use(ctx, use_of ? use_of[i] : i);
      if (u->write != (bool)writes) continue;
      uint64_t key = mix(common << 40 ^ (uint64_t)u->buf << 3 ^ (uint64_t)u->write << 2 ^ u->when);
      const plan_buf *pb = plan_buf_at(b->p, u->buf);
      if (pb->gpu != PLAN_ALL) own_use(b, pb->gpu, key);
      else if (u->gpu == PLAN_ALL) common++;
      else if (in_set(b, k, t, pi, u->gpu)) own_use(b, u->gpu, key);
    }
  h128 plain = step(step(SEED, task), TAG_PLAIN);
  if (k == S_ONE) add(&b->sig[t->gpu], plain);
  else if (k == S_LIST)
    for (uint32_t i = 0; i < b->n_list; i++) add(&b->sig[b->list[i]], plain);
  else if (k == S_PATTERN) {
    uint32_t id = (uint32_t)(pi - &g_array_index(b->p->patterns, plan_pattern_info, 0));
    add(&b->pat[id], plain);
    b->pat_used[id] = true;
  }
  /* S_ALL: the plain part is every GPU's, left out */
  for (uint32_t i = 0; i < b->n_owners; i++) {
    uint32_t g = b->owners[i];
    bool in = in_set(b, k, t, pi, g);
    add(&b->sig[g], step(step(b->own[g], task), in ? TAG_IN : TAG_OUT));
    if (in) sub(&b->sig[g], plain); /* in place of its plain part */
  }
}

static gint by_sig(gconstpointer x, gconstpointer y, gpointer ctx) {
  const h128 *sig = ctx;
  uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
  if (sig[i].a != sig[j].a) return sig[i].a < sig[j].a ? -1 : 1;
  if (sig[i].b != sig[j].b) return sig[i].b < sig[j].b ? -1 : 1;
  return (i > j) - (i < j);
}

/* c's classes from the GPUs' hashes: equal hashes, one class, numbered in
 * the order of their first GPUs. */
static void group(exec_mem_classes *c, const h128 *sig, uint32_t n) {
  g_autofree uint32_t *idx = g_new(uint32_t, n), *first = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) idx[g] = g;
  g_qsort_with_data(idx, (gint)n, sizeof(uint32_t), by_sig, (gpointer)sig);
  /* first[g]: the least GPU of g's hash */
  for (uint32_t i = 0, lead = 0; i < n; i++) {
    if (i == 0 || sig[idx[i]].a != sig[idx[i - 1]].a || sig[idx[i]].b != sig[idx[i - 1]].b)
      lead = idx[i];
    first[idx[i]] = lead;
  }
  c->n = 0;
  for (uint32_t g = 0; g < n; g++) {
    if (first[g] == g) {
      c->rep[c->n] = g;
      c->size[c->n] = 0;
      c->of[g] = c->n++;
    } else {
      c->of[g] = c->of[first[g]];
    }
    c->size[c->of[g]]++;
  }
}

/* Whether every GPU has a compute task of its own (not lockstep) with a
 * use: its part names that task, which no other GPU's sum holds, so no
 * two GPUs are alike and the hashes need not be made (a causal plan's
 * n^2 per-GPU tasks: 3% of a 1,024-GPU causal ring forward). */
static bool all_unlike(const plan *p, const uint32_t *use_off) {
  uint32_t n = p->n_gpus, left = n;
  g_autofree bool *seen = g_new0(bool, n);
  for (guint t = 0; t < p->tasks->len && left; t++) {
    const plan_task *k = plan_task_at(p, t);
    if (k->kind != TASK_COMPUTE || k->gpu == PLAN_ALL || use_off[t] == use_off[t + 1] ||
        seen[k->gpu])
      continue;
    seen[k->gpu] = true;
    left--;
  }
  return left == 0;
}

exec_mem_classes *exec_mem_classes_new(const plan *p, const uint32_t *use_off,
                                       const uint32_t *use_of, exec_use_fn use,
                                       const void *ctx, const uint64_t *first_kernel,
                                       bool per_gpu) {
  uint32_t n = p->n_gpus;
  exec_mem_classes *c = g_new0(exec_mem_classes, 1);
  c->of = g_new(uint32_t, n);
  c->rep = g_new(uint32_t, n);
  c->size = g_new(uint32_t, n);
  if (per_gpu || all_unlike(p, use_off)) {
    c->n = n;
    for (uint32_t g = 0; g < n; g++) c->of[g] = c->rep[g] = g, c->size[g] = 1;
    return c;
  }
  uint32_t np = p->patterns ? p->patterns->len : 0;
  builder b = {.p = p, .n = n};
  b.sig = g_new0(h128, n);
  b.own = g_new(h128, n);
  b.mark = g_new0(uint32_t, n);
  b.in = g_new0(uint32_t, n);
  b.list = g_new(uint32_t, n);
  b.owners = g_new(uint32_t, n);
  b.pat = g_new0(h128, np ? np : 1);
  b.pat_used = g_new0(bool, np ? np : 1);
  for (guint t = 0; t < p->tasks->len; t++)
    if (use_off[t] < use_off[t + 1]) task_parts(&b, t, use_off, use_of, use, ctx);
  for (uint32_t id = 0; id < np; id++) {
    if (!b.pat_used[id]) continue;
    const plan_pattern_info *pi = &g_array_index(p->patterns, plan_pattern_info, id);
    for (uint32_t i = 0; i < pi->n_gpus; i++)
      add(&b.sig[g_array_index(p->pattern_gpus, uint32_t, pi->gpu_off + i)], b.pat[id]);
  }
  /* inputs on one GPU are that GPU's from time 0 (those on every GPU are
   * every GPU's) */
  for (uint32_t i = 0; i < plan_buf_count(p); i++) {
    const plan_buf *pb = plan_buf_at(p, i);
    if (pb->input && pb->gpu != PLAN_ALL) add(&b.sig[pb->gpu], step(step(SEED, i), TAG_INPUT));
  }
  for (uint32_t g = 0; first_kernel && g < n; g++)
    add(&b.sig[g], step(step(SEED, first_kernel[g]), TAG_FIRST_KERNEL));
  group(c, b.sig, n);
  g_free(b.sig); g_free(b.own); g_free(b.mark); g_free(b.in); g_free(b.list); g_free(b.owners);
  g_free(b.pat); g_free(b.pat_used);
  return c;
}

void exec_mem_classes_free(exec_mem_classes *c) {
  if (!c) return;
  g_free(c->of);
  g_free(c->rep);
  g_free(c->size);
  g_free(c);
}
