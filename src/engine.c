/* engine: binary min-heap of events keyed by (time, sequence). */
#include "engine.h"

#include <glib.h>

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
    size_t parent = (i - 1) / 2;
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
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const event *best = &last;
    if (l < e->len && event_before(&e->heap[l], best)) { m = l; best = &e->heap[l]; }
    if (r < e->len && event_before(&e->heap[r], best)) { m = r; }
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
