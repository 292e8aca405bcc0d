/* net: flows over channels, max-min rates per changed component. */
#include "net.h"

#include <glib.h>
#include <math.h>

#include "maxmin.h"

typedef struct {
  const uint32_t *route;
  uint32_t n_hops;
  uint32_t pos[NET_MAX_HOPS]; /* index of this flow in each hop's flow list */
  double left;                /* bytes not yet sent as of updated_s */
  double rate, cap, updated_s, latency_s;
  uint32_t version;           /* bumped on every reschedule; stale events skip */
  uint32_t mark;              /* component search epoch */
  uint32_t local;             /* index inside the component being solved */
  uint8_t active;
  net_done_fn done;
  void *ctx;
  uint64_t tag;
  double bytes;
} flow;

typedef struct {
  double cap;
  uint32_t *flows;
  uint32_t n, alloc;
  double rate, bytes, busy_s, busy_since;
  uint32_t mark, local;
  uint8_t dirty;
} chan;

struct net {
  engine *eng;
  chan *chans;
  size_t n_chan;
  flow *flows;
  size_t n_flows, flows_alloc;
  GArray *free_ids;   /* uint32 */
  GArray *dirty;      /* uint32 channel ids */
  gboolean resolve_pending;
  uint32_t epoch;
  uint64_t started, solves;
  net_rate_fn rate_fn;
  void *rate_ctx;
  /* component scratch */
  GArray *comp_flows, *comp_chans, *local_route, *mm_flows, *caps, *rates;
  maxmin_work *mm;
};

net *net_new(engine *eng, size_t n_chan, const double *cap_Bps) {
  net *n = g_new0(net, 1);
  n->eng = eng;
  n->n_chan = n_chan;
  n->chans = g_new0(chan, n_chan);
  for (size_t c = 0; c < n_chan; c++) n->chans[c].cap = cap_Bps[c];
  n->free_ids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  n->dirty = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  n->comp_flows = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  n->comp_chans = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  n->local_route = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  n->mm_flows = g_array_new(FALSE, FALSE, sizeof(maxmin_flow));
  n->caps = g_array_new(FALSE, FALSE, sizeof(double));
  n->rates = g_array_new(FALSE, FALSE, sizeof(double));
  n->mm = maxmin_work_new();
  return n;
}

void net_free(net *n) {
  if (!n) return;
  for (size_t c = 0; c < n->n_chan; c++) g_free(n->chans[c].flows);
  g_free(n->chans);
  g_free(n->flows);
  g_array_free(n->free_ids, TRUE);
  g_array_free(n->dirty, TRUE);
  g_array_free(n->comp_flows, TRUE);
  g_array_free(n->comp_chans, TRUE);
  g_array_free(n->local_route, TRUE);
  g_array_free(n->mm_flows, TRUE);
  g_array_free(n->caps, TRUE);
  g_array_free(n->rates, TRUE);
  maxmin_work_free(n->mm);
  g_free(n);
}

void net_set_rate_observer(net *n, net_rate_fn fn, void *ctx) {
  n->rate_fn = fn;
  n->rate_ctx = ctx;
}

static void mark_dirty(net *n, uint32_t c) {
  if (n->chans[c].dirty) return;
  n->chans[c].dirty = 1;
  g_array_append_val(n->dirty, c);
}

static void resolve(void *ctx, uint64_t arg);

static void want_resolve(net *n) {
  if (n->resolve_pending) return;
  n->resolve_pending = TRUE;
  /* scheduled after every event already queued for this instant, so all
   * flows that start or end together are solved once */
  engine_at(n->eng, engine_now(n->eng), resolve, n, 0);
}

static uint32_t flow_alloc(net *n) {
  if (n->free_ids->len > 0) {
    uint32_t id = g_array_index(n->free_ids, uint32_t, n->free_ids->len - 1);
    g_array_set_size(n->free_ids, n->free_ids->len - 1);
    return id;
  }
  if (n->n_flows == n->flows_alloc) {
    n->flows_alloc = n->flows_alloc ? n->flows_alloc * 2 : 1024;
    n->flows = g_renew(flow, n->flows, n->flows_alloc);
  }
  memset(&n->flows[n->n_flows], 0, sizeof(flow));
  return (uint32_t)n->n_flows++;
}

static void chan_add_flow(net *n, uint32_t c, uint32_t id, uint32_t hop) {
  chan *ch = &n->chans[c];
  if (ch->n == ch->alloc) {
    ch->alloc = ch->alloc ? ch->alloc * 2 : 8;
    ch->flows = g_renew(uint32_t, ch->flows, ch->alloc);
  }
  n->flows[id].pos[hop] = ch->n;
  ch->flows[ch->n++] = id;
  if (ch->n == 1) ch->busy_since = engine_now(n->eng);
  mark_dirty(n, c);
}

static void chan_remove_flow(net *n, uint32_t c, uint32_t id, uint32_t hop) {
  chan *ch = &n->chans[c];
  uint32_t p = n->flows[id].pos[hop];
  uint32_t moved = ch->flows[--ch->n];
  ch->flows[p] = moved;
  if (moved != id) {
    flow *m = &n->flows[moved];
    for (uint32_t h = 0; h < m->n_hops; h++)
      if (m->route[h] == c) { m->pos[h] = p; break; }
  }
  if (ch->n == 0) ch->busy_s += engine_now(n->eng) - ch->busy_since;
  mark_dirty(n, c);
}

static uint64_t pack(uint32_t id, uint32_t version) {
  return ((uint64_t)version << 32) | id;
}

static void flow_sent(void *ctx, uint64_t arg) {
  net *n = ctx;
  uint32_t id = (uint32_t)arg, version = (uint32_t)(arg >> 32);
  flow *f = &n->flows[id];
  if (!f->active || f->version != version) return;  /* rescheduled since */
  f->active = 0;
  f->version++;
  for (uint32_t h = 0; h < f->n_hops; h++) {
    n->chans[f->route[h]].bytes += f->bytes;
    chan_remove_flow(n, f->route[h], id, h);
  }
  engine_at(n->eng, engine_now(n->eng) + f->latency_s, f->done, f->ctx, f->tag);
  g_array_append_val(n->free_ids, id);
  want_resolve(n);
}

void net_flow_start(net *n, const uint32_t *route, uint32_t n_hops, double latency_s,
                    double bytes, double cap_Bps, net_done_fn done, void *ctx,
                    uint64_t tag) {
  g_assert(n_hops <= NET_MAX_HOPS);
  n->started++;
  double now = engine_now(n->eng);
  gboolean capped = cap_Bps > 0 && isfinite(cap_Bps);
  if (bytes <= 0 || (n_hops == 0 && !capped)) {
    engine_at(n->eng, now + latency_s, done, ctx, tag);
    return;
  }
  if (n_hops == 0) {
    engine_at(n->eng, now + bytes / cap_Bps + latency_s, done, ctx, tag);
    return;
  }
  uint32_t id = flow_alloc(n);
  flow *f = &n->flows[id];
  f->route = route;
  f->n_hops = n_hops;
  f->left = f->bytes = bytes;
  f->rate = 0;
  f->cap = capped ? cap_Bps : INFINITY;
  f->updated_s = now;
  f->latency_s = latency_s;
  f->version++;
  f->active = 1;
  f->done = done;
  f->ctx = ctx;
  f->tag = tag;
  for (uint32_t h = 0; h < n_hops; h++) chan_add_flow(n, route[h], id, h);
  want_resolve(n);
}

/* Collect the component reachable from channel c0 into comp_chans/comp_flows. */
static void collect_component(net *n, uint32_t c0) {
  g_array_set_size(n->comp_chans, 0);
  g_array_set_size(n->comp_flows, 0);
  n->chans[c0].mark = n->epoch;
  g_array_append_val(n->comp_chans, c0);
  for (guint i = 0; i < n->comp_chans->len; i++) {
    chan *ch = &n->chans[g_array_index(n->comp_chans, uint32_t, i)];
    for (uint32_t k = 0; k < ch->n; k++) {
      uint32_t id = ch->flows[k];
      flow *f = &n->flows[id];
      if (f->mark == n->epoch) continue;
      f->mark = n->epoch;
      g_array_append_val(n->comp_flows, id);
      for (uint32_t h = 0; h < f->n_hops; h++) {
        chan *hc = &n->chans[f->route[h]];
        if (hc->mark == n->epoch) continue;
        hc->mark = n->epoch;
        g_array_append_val(n->comp_chans, f->route[h]);
      }
    }
  }
}

/* Completion times on a grid of 2^-46 s (14 fs): flows that end together
 * in exact arithmetic but a few ulps apart in floating point then end in
 * one instant and cost one max-min solve, not one each (an all-to-all of
 * 256 GPUs has 65k of them per step).  The shift is far below any time a
 * model resolves. */
static double end_time(double t) {
  const double q = 0x1p-46;
  return t < 0x1p40 ? ceil(t / q) * q : t;
}

static void solve_component(net *n) {
  double now = engine_now(n->eng);
  guint nc = n->comp_chans->len, nf = n->comp_flows->len;
  g_array_set_size(n->caps, nc);
  for (guint i = 0; i < nc; i++) {
    chan *ch = &n->chans[g_array_index(n->comp_chans, uint32_t, i)];
    ch->local = i;
    g_array_index(n->caps, double, i) = ch->cap;
  }
  g_array_set_size(n->local_route, 0);
  for (guint i = 0; i < nf; i++) {
    flow *f = &n->flows[g_array_index(n->comp_flows, uint32_t, i)];
    for (uint32_t h = 0; h < f->n_hops; h++)
      g_array_append_val(n->local_route, n->chans[f->route[h]].local);
  }
  g_array_set_size(n->mm_flows, nf);
  g_array_set_size(n->rates, nf);
  guint off = 0;
  for (guint i = 0; i < nf; i++) {
    flow *f = &n->flows[g_array_index(n->comp_flows, uint32_t, i)];
    maxmin_flow *m = &g_array_index(n->mm_flows, maxmin_flow, i);
    m->chan = &g_array_index(n->local_route, uint32_t, off);
    m->n_chan = f->n_hops;
    m->cap = f->cap;
    off += f->n_hops;
  }
  if (nf > 0)
    maxmin_solve(n->mm, nc, (const double *)n->caps->data, nf,
                 (const maxmin_flow *)n->mm_flows->data, (double *)n->rates->data);
  n->solves++;

  for (guint i = 0; i < nf; i++) {
    uint32_t id = g_array_index(n->comp_flows, uint32_t, i);
    flow *f = &n->flows[id];
    double r = g_array_index(n->rates, double, i);
    f->left -= f->rate * (now - f->updated_s);
    if (f->left < 0) f->left = 0;
    f->updated_s = now;
    if (r == f->rate) continue;  /* its completion event still holds */
    f->rate = r;
    f->version++;
    double t_end = r > 0 ? end_time(now + f->left / r) : INFINITY;
    if (isfinite(t_end)) engine_at(n->eng, t_end, flow_sent, n, pack(id, f->version));
  }
  for (guint i = 0; i < nc; i++) {
    uint32_t c = g_array_index(n->comp_chans, uint32_t, i);
    chan *ch = &n->chans[c];
    double total = 0;
    for (uint32_t k = 0; k < ch->n; k++) total += n->flows[ch->flows[k]].rate;
    if (total != ch->rate) {
      ch->rate = total;
      if (n->rate_fn) n->rate_fn(n->rate_ctx, c, now, total);
    }
  }
}

static void resolve(void *ctx, uint64_t arg) {
  (void)arg;
  net *n = ctx;
  n->resolve_pending = FALSE;
  n->epoch++;
  for (guint i = 0; i < n->dirty->len; i++) {
    uint32_t c = g_array_index(n->dirty, uint32_t, i);
    n->chans[c].dirty = 0;
    if (n->chans[c].mark == n->epoch) continue;
    collect_component(n, c);
    solve_component(n);
  }
  g_array_set_size(n->dirty, 0);
}

double net_chan_bytes(const net *n, uint32_t c) { return n->chans[c].bytes; }

double net_chan_busy_s(const net *n, uint32_t c) {
  const chan *ch = &n->chans[c];
  double busy = ch->busy_s;
  if (ch->n > 0) busy += engine_now(n->eng) - ch->busy_since;
  return busy;
}

uint64_t net_flows_started(const net *n) { return n->started; }
uint64_t net_solves(const net *n) { return n->solves; }
