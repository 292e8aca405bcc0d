/* maxmin: progressive filling over channels and per-flow caps. */
#include "maxmin.h"

#include <glib.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

struct maxmin_work {
  double *left;       /* capacity not yet given to fixed flows, per channel */
  uint64_t *count;    /* unfixed flows per channel */
  uint32_t *adj_off;  /* channel -> flows, CSR */
  uint32_t *adj;
  uint32_t *by_cap;   /* capped flows, ascending cap */
  uint8_t *fixed;
  /* channels with unfixed flows by (share, index), where a solve has at
   * least heap_from channels: each step's bottleneck is then a heap top,
   * not a scan of every channel (a component of n channels whose flows
   * saturate them one by one cost n^2: a 1,024-GPU TokenRing causal
   * step's 2,048 ports, a third of its forward) */
  uint32_t *heap, *heap_pos;
  double *share;
  size_t heap_len, heap_from;
  size_t chan_cap, flow_cap, adj_cap;
};

/* Below this many channels a scan is cheaper than keeping the heap. */
#define MAXMIN_HEAP_FROM 64

maxmin_work *maxmin_work_new(void) {
  maxmin_work *w = g_new0(maxmin_work, 1);
  w->heap_from = MAXMIN_HEAP_FROM;
  return w;
}

void maxmin_work_heap_from(maxmin_work *w, size_t n_chan) { w->heap_from = n_chan; }

void maxmin_work_free(maxmin_work *w) {
  if (!w) return;
  g_free(w->left); g_free(w->count); g_free(w->adj_off); g_free(w->adj);
  g_free(w->by_cap); g_free(w->fixed);
  g_free(w->heap); g_free(w->heap_pos); g_free(w->share);
  g_free(w);
}

static void reserve(maxmin_work *w, size_t n_chan, size_t n_flows, size_t n_adj) {
  if (n_chan + 1 > w->chan_cap) {
    w->chan_cap = (n_chan + 1) * 2;
    w->left = g_renew(double, w->left, w->chan_cap);
    w->count = g_renew(uint64_t, w->count, w->chan_cap);
    w->adj_off = g_renew(uint32_t, w->adj_off, w->chan_cap);
    w->heap = g_renew(uint32_t, w->heap, w->chan_cap);
    w->heap_pos = g_renew(uint32_t, w->heap_pos, w->chan_cap);
    w->share = g_renew(double, w->share, w->chan_cap);
  }
  if (n_flows + 1 > w->flow_cap) {
    w->flow_cap = (n_flows + 1) * 2;
    w->by_cap = g_renew(uint32_t, w->by_cap, w->flow_cap);
    w->fixed = g_renew(uint8_t, w->fixed, w->flow_cap);
  }
  if (n_adj + 1 > w->adj_cap) {
    w->adj_cap = (n_adj + 1) * 2;
    w->adj = g_renew(uint32_t, w->adj, w->adj_cap);
  }
}

/* qsort has no context argument; thread-local keeps parallel sweeps safe */
static _Thread_local const maxmin_flow *sort_flows;
static int cmp_cap(const void *a, const void *b) {
  double x = sort_flows[*(const uint32_t *)a].cap;
  double y = sort_flows[*(const uint32_t *)b].cap;
  if (x != y) return x < y ? -1 : 1;
  /* equal caps: keep index order so the result never depends on qsort */
  return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static gboolean has_cap(const maxmin_flow *f) { return f->cap > 0 && isfinite(f->cap); }

/* ---- the channels' heap: the same order as a scan that keeps the first
 * channel of least share (shares computed alike, ties by index) ---- */

#define NOT_IN_HEAP UINT32_MAX

static bool heap_less(const maxmin_work *w, uint32_t a, uint32_t b) {
  return w->share[a] != w->share[b] ? w->share[a] < w->share[b] : a < b;
}

static void heap_put(maxmin_work *w, size_t i, uint32_t c) {
  w->heap[i] = c;
  w->heap_pos[c] = (uint32_t)i;
}

static void heap_down(maxmin_work *w, size_t i) {
  uint32_t c = w->heap[i];
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    uint32_t best = c;
    if (l < w->heap_len && heap_less(w, w->heap[l], best)) { m = l; best = w->heap[l]; }
    if (r < w->heap_len && heap_less(w, w->heap[r], best)) m = r;
    if (m == i) break;
    heap_put(w, i, w->heap[m]);
    i = m;
  }
  heap_put(w, i, c);
}

/* The entry at i to its place, up or down. */
static void heap_sift(maxmin_work *w, size_t i) {
  uint32_t c = w->heap[i];
  size_t at = i;
  while (i > 0 && heap_less(w, c, w->heap[(i - 1) / 2])) {
    heap_put(w, i, w->heap[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  if (i != at) heap_put(w, i, c);
  else heap_down(w, i);
}

/* Channel c's left capacity or count changed: its place in the heap. */
static void heap_update(maxmin_work *w, uint32_t c) {
  uint32_t i = w->heap_pos[c];
  if (i == NOT_IN_HEAP) return;
  if (w->count[c] == 0) {
    w->heap_pos[c] = NOT_IN_HEAP;
    uint32_t last = w->heap[--w->heap_len];
    if (last == c) return;
    heap_put(w, i, last);
    heap_sift(w, i);
    return;
  }
  w->share[c] = w->left[c] / (double)w->count[c];
  heap_sift(w, i);
}

static uint32_t mult_at(const maxmin_flow *f, uint32_t h) { return f->mult ? f->mult[h] : 1; }

/* Give flow f the rate r and take it off its channels. */
static void fix_flow(maxmin_work *w, const maxmin_flow *flows, uint32_t f, double r,
                     double *rate) {
  w->fixed[f] = 1;
  rate[f] = r;
  for (uint32_t h = 0; h < flows[f].n_chan; h++) {
    uint32_t c = flows[f].chan[h], k = mult_at(&flows[f], h);
    w->left[c] -= r * k;
    if (w->left[c] < 0) w->left[c] = 0;
    w->count[c] -= k;
    if (w->heap_len > 0) heap_update(w, c);
  }
}

void maxmin_solve(maxmin_work *w, size_t n_chan, const double *cap,
                  size_t n_flows, const maxmin_flow *flows, double *rate) {
  size_t n_adj = 0;
  for (size_t f = 0; f < n_flows; f++) n_adj += flows[f].n_chan;
  reserve(w, n_chan, n_flows, n_adj);

  for (size_t c = 0; c < n_chan; c++) { w->left[c] = cap[c]; w->count[c] = 0; }
  for (size_t f = 0; f < n_flows; f++)
    for (uint32_t h = 0; h < flows[f].n_chan; h++) w->count[flows[f].chan[h]]++;
  w->adj_off[0] = 0;
  for (size_t c = 0; c < n_chan; c++) w->adj_off[c + 1] = w->adj_off[c] + (uint32_t)w->count[c];
  for (size_t c = 0; c < n_chan; c++) w->count[c] = 0;
  for (size_t f = 0; f < n_flows; f++)
    for (uint32_t h = 0; h < flows[f].n_chan; h++) {
      uint32_t c = flows[f].chan[h];
      w->adj[w->adj_off[c] + w->count[c]++] = (uint32_t)f;
    }
  /* the adjacency is built; now count flows, bundles by their size */
  for (size_t c = 0; c < n_chan; c++) w->count[c] = 0;
  for (size_t f = 0; f < n_flows; f++)
    for (uint32_t h = 0; h < flows[f].n_chan; h++)
      w->count[flows[f].chan[h]] += mult_at(&flows[f], h);

  size_t n_capped = 0, unfixed = n_flows;
  for (size_t f = 0; f < n_flows; f++) {
    w->fixed[f] = 0;
    if (has_cap(&flows[f])) w->by_cap[n_capped++] = (uint32_t)f;
  }
  sort_flows = flows;
  qsort(w->by_cap, n_capped, sizeof(uint32_t), cmp_cap);
  size_t next_cap = 0;

  bool heaped = n_chan >= w->heap_from;
  w->heap_len = 0;
  if (heaped) {
    for (size_t c = 0; c < n_chan; c++) {
      w->heap_pos[c] = NOT_IN_HEAP;
      if (w->count[c] == 0) continue;
      w->share[c] = w->left[c] / (double)w->count[c];
      heap_put(w, w->heap_len++, (uint32_t)c);
    }
    for (size_t i = w->heap_len / 2; i-- > 0;) heap_down(w, i);
  }

  /* flows that cross no channel are limited by their cap alone */
  for (size_t f = 0; f < n_flows; f++)
    if (flows[f].n_chan == 0) {
      fix_flow(w, flows, (uint32_t)f, has_cap(&flows[f]) ? flows[f].cap : INFINITY, rate);
      unfixed--;
    }

  while (unfixed > 0) {
    double share = INFINITY;
    size_t bottleneck = n_chan;
    if (heaped) {
      /* the top: least share, first index among equals, as the scan */
      if (w->heap_len > 0 && w->share[w->heap[0]] < INFINITY) {
        bottleneck = w->heap[0];
        share = w->share[bottleneck];
      }
    } else {
      for (size_t c = 0; c < n_chan; c++) {
        if (w->count[c] == 0) continue;
        double s = w->left[c] / (double)w->count[c];
        if (s < share) { share = s; bottleneck = c; }
      }
    }
    /* Every capped flow whose cap is at most the current share stops at
     * its cap.  Fixing one such flow never lowers a channel's share (its
     * cap is at most every share on its route), so they are all fixed in
     * one pass, in ascending cap order as one at a time would: same rates,
     * one channel scan instead of one per flow. */
    bool capped_any = false;
    for (; next_cap < n_capped; next_cap++) {
      uint32_t f = w->by_cap[next_cap];
      if (w->fixed[f]) continue;
      if (flows[f].cap > share) break;
      fix_flow(w, flows, f, flows[f].cap, rate);
      unfixed--;
      capped_any = true;
    }
    if (capped_any) continue;
    g_assert(bottleneck < n_chan);
    for (uint32_t i = w->adj_off[bottleneck]; i < w->adj_off[bottleneck + 1]; i++) {
      uint32_t f = w->adj[i];
      if (w->fixed[f]) continue;
      fix_flow(w, flows, f, share, rate);
      unfixed--;
    }
  }
}
