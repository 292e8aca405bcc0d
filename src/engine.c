/* engine: a min-heap of events keyed by (time, sequence), four children
 * a node.  The key is a total order (sequences are unique), so any heap
 * pops the same events in the same order; a 4-ary one is half as deep as
 * a binary one and its children of a node lie in three cache lines, where
 * a binary heap's sift down took a line per level (a causal 1,024-GPU
 * replay keeps thousands of events pending through a million tasks). */
#include "engine.h"

#include <glib.h>

#define ARITY 4

typedef struct {
  double t_s;
  uint64_t seq;
  engine_fn fn;
  void *ctx;
  uint64_t arg;
} event;

struct engine {
  event *heap;
  size_t len, cap;
  uint64_t next_seq;
  uint64_t executed;
  double now_s;
};

engine *engine_new(void) { return g_new0(engine, 1); }

void engine_free(engine *e) {
  if (!e) return;
  g_free(e->heap);
  g_free(e);
}

static gboolean event_before(const event *a, const event *b) {
  if (a->t_s != b->t_s) return a->t_s < b->t_s;
  return a->seq < b->seq;
}

void engine_at(engine *e, double t_s, engine_fn fn, void *ctx, uint64_t arg) {
  if (t_s < e->now_s) t_s = e->now_s;
  if (e->len == e->cap) {
    e->cap = e->cap ? e->cap * 2 : 256;
    e->heap = g_renew(event, e->heap, e->cap);
  }
  size_t i = e->len++;
  event ev = {t_s, e->next_seq++, fn, ctx, arg};
  while (i > 0) {
    size_t parent = (i - 1) / ARITY;
    if (!event_before(&ev, &e->heap[parent])) break;
    e->heap[i] = e->heap[parent];
    i = parent;
  }
  e->heap[i] = ev;
}

static event pop_min(engine *e) {
  event top = e->heap[0];
  event last = e->heap[--e->len];
  size_t i = 0;
  for (;;) {
    size_t first = ARITY * i + 1, end = first + ARITY, m = i;
    if (end > e->len) end = e->len;
    const event *best = &last;
    for (size_t c = first; c < end; c++)
      if (event_before(&e->heap[c], best)) { m = c; best = &e->heap[c]; }
    if (m == i) break;
    e->heap[i] = e->heap[m];
    i = m;
  }
  if (e->len > 0) e->heap[i] = last;
  return top;
}

void engine_run(engine *e) {
  while (e->len > 0) {
    event ev = pop_min(e);
    e->now_s = ev.t_s;
    e->executed++;
    ev.fn(ev.ctx, ev.arg);
  }
}

double engine_now(const engine *e) { return e->now_s; }
uint64_t engine_events(const engine *e) { return e->executed; }
uint64_t engine_pending(const engine *e) { return e->len; }
