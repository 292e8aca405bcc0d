/* net: bundles of flows over channels, max-min rates per changed component. */
#include "net.h"

#include <glib.h>
#include <math.h>
#include <string.h>

#include "groups.h"
#include "maxmin.h"

/* Where a bundle crosses a channel: at hop `hop` of its routes, `mult` of
 * its flows. */
typedef struct {
  uint32_t chan, hop, mult;
  uint32_t pos;  /* index of this use in the channel's list */
} use;

typedef struct {
  use *uses;
  uint32_t n_uses;
  const net_member *members;
  uint32_t count, n_hops;
  bool own_members;
  double left;        /* bytes each flow has not yet sent as of updated_s */
  double rate, cap, updated_s, latency_s, bytes, end_s;
  uint32_t heap_pos;  /* in the completion heap, or UINT32_MAX */
  uint32_t mark;      /* component search epoch */
  uint32_t stamp;     /* listing scratch */
  uint64_t color;     /* mix(id): its own colour in channel signatures */
  uint32_t local;     /* index inside the component being solved */
  uint8_t active;
  uint8_t blocked;    /* its uses are blocks, one per hop (see blocks below) */
  uint8_t unproven;   /* crosses unlike channels at some hop: its one rate is
                       * checked after every solve of its component
                       * (split_unbottlenecked) */
  const net_shape *shape;  /* what it was started from, or NULL */
  net_done_fn done;
  void *ctx;
  uint64_t tag;
} bundle;

/* A growable list of ids: pushed in the solver's innermost loops, where a
 * GArray's call per element showed as a third of a 1,024-GPU ring's time. */
typedef struct {
  uint32_t *v;
  uint32_t n, cap;
} idbuf;

static inline void idbuf_push(idbuf *b, uint32_t x) {
  if (b->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 64;
    b->v = g_renew(uint32_t, b->v, b->cap);
  }
  b->v[b->n++] = x;
}

/* A channel's list entry: a bundle and which of its uses this is. */
typedef struct { uint32_t b, u; } entry;

typedef struct {
  double cap;
  entry *items;
  uint32_t n, alloc;
  double rate, bytes, busy_s, busy_since;
  uint64_t sig;  /* capacity and bundles crossing it (sign_channels) */
  uint32_t mark, local;
  uint32_t signed_at;  /* sign_channels round that last computed sig */
  uint8_t dirty;
  uint8_t sig_ok;      /* sig is current: no bundle came or went since */
  uint8_t live_block;  /* a block (below) standing for its members now */
  uint32_t block;      /* a physical channel: the block it is in, or NO_BLOCK */
  uint32_t *members;   /* a block: the channels it stands for */
  uint32_t n_members;
} chan;

#define NO_BLOCK UINT32_MAX

/* Where a (channel, hop) key already has its use in the bundle being
 * listed: pos[key] where stamp[key] == now.  A net's, for every bundle it
 * starts: each bundle_add of a 1,024-GPU step's groups (about 1,000
 * flows, 3 hops) looked its keys up in a hash table made for it. */
typedef struct {
  uint32_t *pos, *stamp, now;
  size_t n;
} use_index;

struct net {
  engine *eng;
  chan *chans;        /* the physical channels, then the blocks */
  size_t n_chan, n_all, chans_alloc;
  gboolean blocks_on;
  uint64_t serial;    /* which net a shape's cached blocks belong to */
  uint64_t blocks_made, blocks_dissolved;
  uint64_t split_apart;  /* components whose bundles went apart (split_unbottlenecked) */
  bundle *bundles;
  size_t n_bundles, bundles_alloc;
  GArray *free_ids;   /* uint32 */
  idbuf dirty;        /* channel ids */
  gboolean resolve_pending, per_flow;
  uint32_t epoch, stamp, sign_round;
  uint64_t started, bundles_started, solves;
  net_rate_fn rate_fn;
  void *rate_ctx;
  /* completion times: an indexed min-heap of active bundles by (end, id),
   * and one engine event at its top, so a rate change moves a bundle in
   * the heap instead of leaving a superseded event behind */
  GArray *heap;       /* uint32 bundle ids */
  double wake_s;      /* time of the earliest wake-up event pending */
  /* component scratch */
  idbuf comp_bundles, comp_chans, local_route, local_mult;
  GArray *mm_flows, *caps, *rates;
  GArray *chan_total, *chan_max;  /* per component channel: split_unbottlenecked */
  maxmin_work *mm;
  use_index use_ix;   /* bundle_add's uses_of */
};

net *net_new(engine *eng, size_t n_chan, const double *cap_Bps) {
  net *n = g_new0(net, 1);
  n->eng = eng;
  n->n_chan = n->n_all = n->chans_alloc = n_chan;
  n->chans = g_new0(chan, n_chan);
  for (size_t c = 0; c < n_chan; c++) {
    n->chans[c].cap = cap_Bps[c];
    n->chans[c].block = NO_BLOCK;
  }
  n->blocks_on = TRUE;
  static gsize serials;  /* nets made in this process, on any thread */
  n->serial = (uint64_t)g_atomic_pointer_add(&serials, 1) + 1;
  n->free_ids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  n->heap = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  n->wake_s = INFINITY;
  n->mm_flows = g_array_new(FALSE, FALSE, sizeof(maxmin_flow));
  n->caps = g_array_new(FALSE, FALSE, sizeof(double));
  n->rates = g_array_new(FALSE, FALSE, sizeof(double));
  n->chan_total = g_array_new(FALSE, FALSE, sizeof(double));
  n->chan_max = g_array_new(FALSE, FALSE, sizeof(double));
  n->mm = maxmin_work_new();
  return n;
}

static void bundle_release(bundle *b) {
  g_free(b->uses);
  b->uses = NULL;
  if (b->own_members) g_free((net_member *)b->members);
  b->members = NULL;
  b->own_members = false;
}

void net_free(net *n) {
  if (!n) return;
  for (size_t c = 0; c < n->n_all; c++) {
    g_free(n->chans[c].items);
    g_free(n->chans[c].members);
  }
  for (size_t i = 0; i < n->n_bundles; i++) bundle_release(&n->bundles[i]);
  g_free(n->chans);
  g_free(n->bundles);
  g_array_free(n->free_ids, TRUE);
  g_free(n->dirty.v);
  g_array_free(n->heap, TRUE);
  g_free(n->comp_bundles.v);
  g_free(n->comp_chans.v);
  g_free(n->local_route.v);
  g_free(n->local_mult.v);
  g_array_free(n->mm_flows, TRUE);
  g_array_free(n->caps, TRUE);
  g_array_free(n->rates, TRUE);
  g_array_free(n->chan_total, TRUE);
  g_array_free(n->chan_max, TRUE);
  maxmin_work_free(n->mm);
  g_free(n->use_ix.pos);
  g_free(n->use_ix.stamp);
  g_free(n);
}

void net_set_rate_observer(net *n, net_rate_fn fn, void *ctx) {
  n->rate_fn = fn;
  n->rate_ctx = ctx;
}

void net_set_per_flow(net *n, bool per_flow) { n->per_flow = per_flow; }

void net_set_blocks(net *n, bool on) { n->blocks_on = on; }

/* ---- completion heap ---- */

static bool heap_before(const net *n, uint32_t a, uint32_t b) {
  double x = n->bundles[a].end_s, y = n->bundles[b].end_s;
  return x != y ? x < y : a < b;
}

static void heap_set(net *n, uint32_t i, uint32_t id) {
  g_array_index(n->heap, uint32_t, i) = id;
  n->bundles[id].heap_pos = i;
}

static void heap_sift(net *n, uint32_t i) {
  uint32_t *h = (uint32_t *)n->heap->data, len = n->heap->len, id = h[i];
  while (i > 0 && heap_before(n, id, h[(i - 1) / 2])) {
    heap_set(n, i, h[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    uint32_t best = id;
    if (l < len && heap_before(n, h[l], best)) { m = l; best = h[l]; }
    if (r < len && heap_before(n, h[r], best)) m = r;
    if (m == i) break;
    heap_set(n, i, h[m]);
    i = m;
  }
  heap_set(n, i, id);
}

static void heap_remove(net *n, uint32_t id) {
  uint32_t i = n->bundles[id].heap_pos;
  if (i == UINT32_MAX) return;
  n->bundles[id].heap_pos = UINT32_MAX;
  uint32_t last = g_array_index(n->heap, uint32_t, n->heap->len - 1);
  g_array_set_size(n->heap, n->heap->len - 1);
  if (last == id) return;
  heap_set(n, i, last);
  heap_sift(n, i);
}

static void wake(void *ctx, uint64_t arg);

/* One engine event at the earliest completion; a later one left pending
 * finds nothing due and does nothing. */
static void arm_wake(net *n) {
  if (n->heap->len == 0) return;
  double t = n->bundles[g_array_index(n->heap, uint32_t, 0)].end_s;
  if (t >= n->wake_s) return;
  n->wake_s = t;
  engine_at(n->eng, t, wake, n, 0);
}

static void heap_update(net *n, uint32_t id) {
  bundle *b = &n->bundles[id];
  if (!isfinite(b->end_s)) { heap_remove(n, id); return; }
  if (b->heap_pos == UINT32_MAX) {
    g_array_set_size(n->heap, n->heap->len + 1);
    heap_set(n, n->heap->len - 1, id);
  }
  heap_sift(n, b->heap_pos);
}

/* ---- channels ---- */

static void mark_dirty(net *n, uint32_t c) {
  if (n->chans[c].dirty) return;
  n->chans[c].dirty = 1;
  idbuf_push(&n->dirty, c);
}

static void resolve(void *ctx, uint64_t arg);

static void want_resolve(net *n) {
  if (n->resolve_pending) return;
  n->resolve_pending = TRUE;
  /* scheduled after every event already queued for this instant, so all
   * flows that start or end together are solved once */
  engine_at(n->eng, engine_now(n->eng), resolve, n, 0);
}

static void chan_add(net *n, uint32_t id, uint32_t u) {
  use *us = &n->bundles[id].uses[u];
  chan *ch = &n->chans[us->chan];
  if (ch->n == ch->alloc) {
    ch->alloc = ch->alloc ? ch->alloc * 2 : 8;
    ch->items = g_renew(entry, ch->items, ch->alloc);
  }
  us->pos = ch->n;
  ch->items[ch->n++] = (entry){id, u};
  ch->sig_ok = 0;
  if (ch->n == 1) ch->busy_since = engine_now(n->eng);
  mark_dirty(n, us->chan);
}

static void chan_remove(net *n, uint32_t id, uint32_t u) {
  const use *us = &n->bundles[id].uses[u];
  chan *ch = &n->chans[us->chan];
  entry moved = ch->items[--ch->n];
  ch->items[us->pos] = moved;
  n->bundles[moved.b].uses[moved.u].pos = us->pos;
  ch->sig_ok = 0;
  if (ch->n == 0) ch->busy_s += engine_now(n->eng) - ch->busy_since;
  mark_dirty(n, us->chan);
}

/* ---- bundles ---- */

static uint64_t mix(uint64_t x) {  /* splitmix64's finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint32_t bundle_alloc(net *n) {
  uint32_t id;
  if (n->free_ids->len > 0) {
    id = g_array_index(n->free_ids, uint32_t, n->free_ids->len - 1);
    g_array_set_size(n->free_ids, n->free_ids->len - 1);
  } else {
    if (n->n_bundles == n->bundles_alloc) {
      n->bundles_alloc = n->bundles_alloc ? n->bundles_alloc * 2 : 1024;
      n->bundles = g_renew(bundle, n->bundles, n->bundles_alloc);
    }
    id = (uint32_t)n->n_bundles++;
  }
  memset(&n->bundles[id], 0, sizeof(bundle));
  n->bundles[id].heap_pos = UINT32_MAX;
  n->bundles[id].color = mix(id);
  n->bundles_started++;
  return id;
}

/* A table of 64-bit keys to positions, by open addressing: what a shape
 * is made with, once per pattern (TokenRing's N-1 shifts: N^2 keys in all;
 * GHashTable's call per key was over a third of a 4,096-GPU full-mask
 * forward). */
typedef struct {
  uint64_t *key;  /* key + 1; 0: empty */
  uint32_t *val;
  size_t mask;
} key_table;

static void key_table_init(key_table *t, size_t n) {
  size_t size = 16;
  while (size < 2 * n) size *= 2;
  t->key = g_new0(uint64_t, size);
  t->val = g_new(uint32_t, size);
  t->mask = size - 1;
}

static void key_table_clear(key_table *t) {
  g_free(t->key);
  g_free(t->val);
}

/* The position stored for key k, or, where k is new, v stored for it. */
static uint32_t *key_table_slot(key_table *t, uint64_t k, uint32_t v) {
  for (size_t i = mix(k) & t->mask;; i = (i + 1) & t->mask) {
    if (t->key[i] == k + 1) return &t->val[i];
    if (t->key[i] == 0) {
      t->key[i] = k + 1;
      t->val[i] = v;
      return &t->val[i];
    }
  }
}

/* The uses of members[0..count): one per (channel, hop), in first-seen
 * order, counting the flows on each; with ix, found through it, else
 * through a key_table of their own. */
static use *uses_of(const net_member *members, uint32_t count, uint32_t n_hops,
                    uint32_t *n_uses, use_index *ix) {
  if (count == 1) {
    use *u = g_new(use, n_hops);
    for (uint32_t h = 0; h < n_hops; h++) u[h] = (use){members[0].route[h], h, 1, 0};
    *n_uses = n_hops;
    return u;
  }
  if (ix) {
    if (++ix->now == 0) {  /* stamps wrapped: none is current */
      memset(ix->stamp, 0, ix->n * sizeof *ix->stamp);
      ix->now = 1;
    }
    GArray *out = g_array_new(FALSE, FALSE, sizeof(use));
    for (uint32_t i = 0; i < count; i++)
      for (uint32_t h = 0; h < n_hops; h++) {
        size_t k = (size_t)members[i].route[h] * NET_MAX_HOPS + h;
        if (k >= ix->n) {
          size_t n = MAX(k + 1, 2 * ix->n);
          ix->pos = g_renew(uint32_t, ix->pos, n);
          ix->stamp = g_renew(uint32_t, ix->stamp, n);
          memset(ix->stamp + ix->n, 0, (n - ix->n) * sizeof *ix->stamp);
          ix->n = n;
        }
        if (ix->stamp[k] == ix->now) {
          g_array_index(out, use, ix->pos[k]).mult++;
          continue;
        }
        ix->stamp[k] = ix->now;
        ix->pos[k] = out->len;
        use u = {members[i].route[h], h, 1, 0};
        g_array_append_val(out, u);
      }
    *n_uses = out->len;
    return (use *)g_array_free(out, FALSE);
  }
  GArray *out = g_array_new(FALSE, FALSE, sizeof(use));
  key_table at;
  key_table_init(&at, (size_t)count * n_hops);
  for (uint32_t i = 0; i < count; i++)
    for (uint32_t h = 0; h < n_hops; h++) {
      uint32_t *pos = key_table_slot(&at, (uint64_t)members[i].route[h] * NET_MAX_HOPS + h, out->len);
      if (*pos != out->len) {
        g_array_index(out, use, *pos).mult++;
        continue;
      }
      use u = {members[i].route[h], h, 1, 0};
      g_array_append_val(out, u);
    }
  key_table_clear(&at);
  *n_uses = out->len;
  return (use *)g_array_free(out, FALSE);
}

/* A bundle of members[0..count), otherwise as `like`, not yet on channels. */
static uint32_t bundle_new(net *n, const net_member *members, uint32_t count, bool own,
                           const bundle *like) {
  uint32_t id = bundle_alloc(n);
  bundle *b = &n->bundles[id];
  *b = *like;
  b->heap_pos = UINT32_MAX;
  b->members = members;
  b->own_members = own;
  b->count = count;
  b->color = mix(id);
  return id;
}

struct net_shape {
  const net_member *members;
  uint32_t count, n_hops, n_uses;
  use *uses;
  /* Whether its bundles may cross blocks: each channel at one hop only,
   * every channel of a hop crossed by as many of its flows (hop_mult). */
  bool blockable;
  uint32_t hop_at[NET_MAX_HOPS + 1];  /* hop h's channels: hop_chans[hop_at[h], hop_at[h+1]) */
  uint32_t *hop_chans;                /* in the order the uses first name them */
  uint32_t hop_mult[NET_MAX_HOPS];
  /* the blocks its hops were last found as, in the net of that serial
   * (a cache: valid while those blocks live) */
  uint64_t cache_serial;
  uint32_t cache_block[NET_MAX_HOPS];
};

/* Lists s's channels hop by hop and says whether it is blockable. */
static bool shape_hops(net_shape *s) {
  if (s->count < 2) return false;
  bool mult_set[NET_MAX_HOPS] = {false};
  memset(s->hop_at, 0, sizeof s->hop_at);
  for (uint32_t u = 0; u < s->n_uses; u++) {
    const use *us = &s->uses[u];
    if (mult_set[us->hop] && s->hop_mult[us->hop] != us->mult) return false;
    mult_set[us->hop] = true;
    s->hop_mult[us->hop] = us->mult;
    s->hop_at[us->hop + 1]++;
  }
  /* a channel named at two hops would be two uses of one channel */
  key_table seen;
  key_table_init(&seen, s->n_uses);
  bool twice = false;
  for (uint32_t u = 0; u < s->n_uses && !twice; u++)
    twice = *key_table_slot(&seen, s->uses[u].chan, u) != u;
  key_table_clear(&seen);
  if (twice) return false;
  for (uint32_t h = 0; h < s->n_hops; h++) s->hop_at[h + 1] += s->hop_at[h];
  s->hop_chans = g_new(uint32_t, s->n_uses);
  uint32_t fill[NET_MAX_HOPS];
  memcpy(fill, s->hop_at, sizeof fill);
  for (uint32_t u = 0; u < s->n_uses; u++) s->hop_chans[fill[s->uses[u].hop]++] = s->uses[u].chan;
  return true;
}

net_shape *net_shape_new(const net_member *members, uint32_t count, uint32_t n_hops) {
  net_shape *s = g_new0(net_shape, 1);
  s->members = members;
  s->count = count;
  s->n_hops = n_hops;
  s->uses = uses_of(members, count, n_hops, &s->n_uses, NULL);
  s->blockable = shape_hops(s);
  return s;
}

void net_shape_free(net_shape *s) {
  if (!s) return;
  g_free(s->uses);
  g_free(s->hop_chans);
  g_free(s);
}

/* ---- blocks ----
 *
 * A lockstep step's bundle crosses a channel per GPU at each hop (a ring's
 * every egress and ingress port), so listing it on each of them costs n
 * per start, solve and end: n^2 per pass.  A block stands for channels
 * that are interchangeable: the same capacity, bytes and busy time, and
 * every bundle on one of them is on all of them with the same number of
 * flows.  Their max-min constraints are then one constraint, so the block
 * is one channel (an entry of `chans` after the physical ones) that the
 * solver sees in their stead, and a bundle of a blockable shape crosses
 * one block per hop: a start, solve and end cost its hops, not its flows.
 *
 * Exactly the per-channel results: every member would have the same item
 * list in the same order (all empty when the block is made, then the same
 * adds and removes), so the same left capacity and count at every step of
 * progressive filling; a block's bundles use blocks only and a block holds
 * blocked bundles only, so a component is all blocks or all channels; a
 * bundle's block uses are in the order of the first member use at each hop,
 * so a component's blocks are listed, dirtied and tied in the order their
 * first members would be; the block's bytes and busy time take the same
 * additions as each member's.  A block is made only of idle, clean
 * (not awaiting a solve) channels with equal capacity, bytes and busy time,
 * and dissolved (its members given their lists, bytes and times back) when
 * a bundle that is not on all of it comes: a per-GPU flow or a shape over
 * part of it.  Not with a rate observer (each channel's rate is reported)
 * or per-flow bundles (the reference). */

/* Room for one more channel at the end of n->chans (pointers into it move). */
static uint32_t chan_append(net *n) {
  if (n->n_all == n->chans_alloc) {
    n->chans_alloc = n->chans_alloc ? 2 * n->chans_alloc : 8;
    n->chans = g_renew(chan, n->chans, n->chans_alloc);
  }
  uint32_t id = (uint32_t)n->n_all++;
  memset(&n->chans[id], 0, sizeof(chan));
  n->chans[id].block = NO_BLOCK;
  return id;
}

/* Whether channels cs[0..k) may become one block now. */
static bool block_can_make(const net *n, const uint32_t *cs, uint32_t k) {
  const chan *c0 = &n->chans[cs[0]];
  for (uint32_t i = 0; i < k; i++) {
    const chan *ch = &n->chans[cs[i]];
    if (ch->block != NO_BLOCK || ch->n != 0 || ch->dirty || ch->cap != c0->cap ||
        ch->bytes != c0->bytes || ch->busy_s != c0->busy_s)
      return false;
  }
  return true;
}

static uint32_t block_make(net *n, const uint32_t *cs, uint32_t k) {
  uint32_t id = chan_append(n);
  chan *v = &n->chans[id];
  const chan *c0 = &n->chans[cs[0]];
  v->cap = c0->cap;
  v->bytes = c0->bytes;
  v->busy_s = c0->busy_s;
  v->members = g_memdup2(cs, sizeof(uint32_t) * k);
  v->n_members = k;
  v->live_block = 1;
  for (uint32_t i = 0; i < k; i++) n->chans[cs[i]].block = id;
  n->blocks_made++;
  return id;
}

/* Whether channels cs[0..k) are exactly live block v. */
static bool block_is(const net *n, uint32_t v, const uint32_t *cs, uint32_t k) {
  if (v == NO_BLOCK || n->chans[v].n_members != k) return false;
  for (uint32_t i = 0; i < k; i++)
    if (n->chans[cs[i]].block != v) return false;
  return true;
}

/* The block of each hop of s (made where its channels may become one), or
 * false where some hop cannot be one block now. */
static bool shape_blocks(net *n, net_shape *s, uint32_t *v) {
  if (s->cache_serial == n->serial) {
    bool live = true;
    for (uint32_t h = 0; h < s->n_hops && live; h++) live = n->chans[s->cache_block[h]].live_block;
    if (live) {
      memcpy(v, s->cache_block, sizeof(uint32_t) * s->n_hops);
      return true;
    }
  }
  for (uint32_t h = 0; h < s->n_hops; h++) {
    const uint32_t *cs = &s->hop_chans[s->hop_at[h]];
    uint32_t k = s->hop_at[h + 1] - s->hop_at[h];
    if (block_is(n, n->chans[cs[0]].block, cs, k)) v[h] = n->chans[cs[0]].block;
    else if (block_can_make(n, cs, k)) v[h] = NO_BLOCK;
    else return false;
  }
  for (uint32_t h = 0; h < s->n_hops; h++)
    if (v[h] == NO_BLOCK) v[h] = block_make(n, &s->hop_chans[s->hop_at[h]], s->hop_at[h + 1] - s->hop_at[h]);
  memcpy(s->cache_block, v, sizeof(uint32_t) * s->n_hops);
  s->cache_serial = n->serial;
  return true;
}

/* Block v and every block its bundles cross, transitively, back into
 * channels: each bundle gets its shape's uses, each member the block's
 * list (in its order), bytes, busy time and place in the dirty list. */
static void block_dissolve(net *n, uint32_t v) {
  if (!n->chans[v].live_block) return;
  n->epoch++;
  g_autofree uint32_t *ws = NULL, *bs = NULL;
  idbuf wl = {0}, bl = {0};
  n->chans[v].mark = n->epoch;
  idbuf_push(&wl, v);
  bool dirty = false;
  for (uint32_t i = 0; i < wl.n; i++) {
    const chan *w = &n->chans[wl.v[i]];
    dirty = dirty || w->dirty;
    for (uint32_t k = 0; k < w->n; k++) {
      bundle *b = &n->bundles[w->items[k].b];
      if (b->mark == n->epoch) continue;
      b->mark = n->epoch;
      b->local = bl.n;
      idbuf_push(&bl, w->items[k].b);
      for (uint32_t u = 0; u < b->n_uses; u++) {
        chan *x = &n->chans[b->uses[u].chan];
        if (x->mark == n->epoch) continue;
        x->mark = n->epoch;
        idbuf_push(&wl, b->uses[u].chan);
      }
    }
  }
  ws = wl.v;
  bs = bl.v;
  g_autofree use **full = g_new(use *, bl.n);
  for (uint32_t i = 0; i < bl.n; i++) {
    const net_shape *sh = n->bundles[bs[i]].shape;
    full[i] = g_memdup2(sh->uses, sizeof(use) * sh->n_uses);
  }
  for (uint32_t i = 0; i < wl.n; i++) {
    chan *w = &n->chans[ws[i]];
    for (uint32_t k = 0; k < w->n; k++) {
      uint32_t id = w->items[k].b;
      bundle *b = &n->bundles[id];
      uint32_t hop = b->uses[w->items[k].u].hop;
      use *f = full[b->local];
      for (uint32_t u = 0; u < b->shape->n_uses; u++) {
        if (f[u].hop != hop) continue;
        chan *ch = &n->chans[f[u].chan];
        g_assert(ch->block == ws[i]);
        if (ch->n == ch->alloc) {
          ch->alloc = ch->alloc ? ch->alloc * 2 : 8;
          ch->items = g_renew(entry, ch->items, ch->alloc);
        }
        f[u].pos = ch->n;
        ch->items[ch->n++] = (entry){id, u};
      }
    }
    for (uint32_t j = 0; j < w->n_members; j++) {
      chan *ch = &n->chans[w->members[j]];
      ch->bytes = w->bytes;
      ch->busy_s = w->busy_s;
      ch->busy_since = w->busy_since;
      ch->rate = w->rate;
      ch->sig_ok = 0;
      ch->block = NO_BLOCK;
    }
    w->n = 0;
    w->live_block = 0;
  }
  if (dirty) {  /* each dirty block's place goes to its members, in order */
    idbuf d = {0};
    for (uint32_t i = 0; i < n->dirty.n; i++) {
      chan *ch = &n->chans[n->dirty.v[i]];
      if (ch->mark != n->epoch || ch->n_members == 0) { idbuf_push(&d, n->dirty.v[i]); continue; }
      ch->dirty = 0;
      for (uint32_t j = 0; j < ch->n_members; j++) {
        n->chans[ch->members[j]].dirty = 1;
        idbuf_push(&d, ch->members[j]);
      }
    }
    g_free(n->dirty.v);
    n->dirty = d;
  }
  for (uint32_t i = 0; i < wl.n; i++) {
    chan *w = &n->chans[ws[i]];
    g_free(w->members);
    w->members = NULL;
    w->n_members = 0;
  }
  for (uint32_t i = 0; i < bl.n; i++) {
    bundle *b = &n->bundles[bs[i]];
    g_free(b->uses);
    b->uses = full[i];
    b->n_uses = b->shape->n_uses;
    b->blocked = 0;
  }
  n->blocks_dissolved += wl.n;
}

/* A bundle of shape s's members, crossing blocks v[0..n_hops). */
static uint32_t bundle_add_blocked(net *n, const net_shape *s, const uint32_t *v,
                                   const bundle *like) {
  uint32_t id = bundle_new(n, s->members, s->count, false, like);
  bundle *b = &n->bundles[id];
  b->active = 1;
  b->blocked = 1;
  b->shape = s;
  b->uses = g_new(use, s->n_hops);
  b->n_uses = s->n_hops;
  for (uint32_t h = 0; h < s->n_hops; h++) b->uses[h] = (use){v[h], h, s->hop_mult[h], 0};
  for (uint32_t u = 0; u < b->n_uses; u++) chan_add(n, id, u);
  return id;
}

/* ... and on its channels (the uses of `shape` when given: its members'),
 * the blocks they are in dissolved first. */
static uint32_t bundle_add(net *n, const net_member *members, uint32_t count, bool own,
                           const net_shape *shape, const bundle *like) {
  uint32_t id = bundle_new(n, members, count, own, like);
  bundle *b = &n->bundles[id];
  b->active = 1;
  b->shape = shape;
  if (shape) {
    b->uses = g_memdup2(shape->uses, sizeof(use) * shape->n_uses);
    b->n_uses = shape->n_uses;
  } else {
    b->uses = uses_of(members, count, b->n_hops, &b->n_uses, &n->use_ix);
  }
  for (uint32_t u = 0; u < b->n_uses; u++) {
    uint32_t v = n->chans[n->bundles[id].uses[u].chan].block;
    if (v != NO_BLOCK) block_dissolve(n, v);
  }
  for (uint32_t u = 0; u < n->bundles[id].n_uses; u++) chan_add(n, id, u);
  return id;
}

static void bundle_drop(net *n, uint32_t id) {
  bundle *b = &n->bundles[id];
  for (uint32_t u = 0; u < b->n_uses; u++) chan_remove(n, id, u);
  heap_remove(n, id);
  bundle_release(b);
  b->active = 0;
  g_array_append_val(n->free_ids, id);
}

static void deliver(void *ctx, uint64_t arg) {
  net *n = ctx;
  uint32_t id = (uint32_t)arg;
  bundle *b = &n->bundles[id];
  b->done(b->ctx, b->tag, b->members, b->count);
  b = &n->bundles[id];  /* the callback may have started flows */
  bundle_release(b);
  g_array_append_val(n->free_ids, id);
}

/* Bundles whose last byte has left by now are removed; each is delivered
 * after its latency. */
static void wake(void *ctx, uint64_t arg) {
  (void)arg;
  net *n = ctx;
  double now = engine_now(n->eng);
  if (now == n->wake_s) n->wake_s = INFINITY;
  while (n->heap->len > 0) {
    uint32_t id = g_array_index(n->heap, uint32_t, 0);
    bundle *b = &n->bundles[id];
    if (b->end_s > now) break;
    heap_remove(n, id);
    for (uint32_t u = 0; u < b->n_uses; u++) {
      n->chans[b->uses[u].chan].bytes += b->bytes * b->uses[u].mult;
      chan_remove(n, id, u);
    }
    b->active = 0;
    engine_at(n->eng, now + b->latency_s, deliver, n, id);
    want_resolve(n);
  }
  arm_wake(n);
}

/* Start members[0..count); `own`: the bundle frees `members` when done;
 * `shape`: their uses, made before (NULL: count them now). */
static void start(net *n, const net_member *members, uint32_t count, bool own, uint32_t n_hops,
                  net_shape *shape, double latency_s, double bytes, double cap_Bps,
                  net_done_fn done, void *ctx, uint64_t tag) {
  g_assert(n_hops <= NET_MAX_HOPS);
  if (count == 0) return;
  n->started += count;
  double now = engine_now(n->eng);
  gboolean capped = cap_Bps > 0 && isfinite(cap_Bps);
  bundle like = {.n_hops = n_hops, .left = bytes, .bytes = bytes, .rate = 0,
                 .cap = capped ? cap_Bps : INFINITY, .updated_s = now, .latency_s = latency_s,
                 .end_s = INFINITY, .done = done, .ctx = ctx, .tag = tag};
  if (bytes <= 0 || n_hops == 0) {
    /* nothing to share: no bytes, or no channel (its cap alone sets the pace) */
    uint32_t id = bundle_new(n, members, count, own, &like);
    double d = bytes > 0 && capped ? bytes / cap_Bps : 0;
    engine_at(n->eng, now + d + latency_s, deliver, n, id);
    return;
  }
  uint32_t blocks[NET_MAX_HOPS];
  if (n->per_flow && count > 1)
    for (uint32_t i = 0; i < count; i++) bundle_add(n, &members[i], 1, false, NULL, &like);
  else if (shape && shape->blockable && n->blocks_on && !n->rate_fn && !n->per_flow &&
           shape_blocks(n, shape, blocks))
    bundle_add_blocked(n, shape, blocks, &like);
  else
    bundle_add(n, members, count, own, shape, &like);
  want_resolve(n);
}

void net_bundle_start(net *n, const net_member *members, uint32_t count, uint32_t n_hops,
                      double latency_s, double bytes, double cap_Bps, net_done_fn done,
                      void *ctx, uint64_t tag) {
  start(n, members, count, false, n_hops, NULL, latency_s, bytes, cap_Bps, done, ctx, tag);
}

void net_shape_start(net *n, net_shape *s, double latency_s, double bytes,
                     double cap_Bps, net_done_fn done, void *ctx, uint64_t tag) {
  start(n, s->members, s->count, false, s->n_hops, s, latency_s, bytes, cap_Bps, done, ctx,
        tag);
}

void net_flow_start(net *n, const uint32_t *route, uint32_t n_hops, double latency_s,
                    double bytes, double cap_Bps, net_done_fn done, void *ctx, uint64_t tag) {
  net_member *m = g_new(net_member, 1);
  *m = (net_member){route, 0};
  start(n, m, 1, true, n_hops, NULL, latency_s, bytes, cap_Bps, done, ctx, tag);
}

/* ---- solving ---- */

/* Collect the component reachable from channel c0 into comp_chans and
 * comp_bundles. */
static void collect_component(net *n, uint32_t c0) {
  n->comp_chans.n = 0;
  n->comp_bundles.n = 0;
  n->chans[c0].mark = n->epoch;
  idbuf_push(&n->comp_chans, c0);
  for (guint i = 0; i < n->comp_chans.n; i++) {
    chan *ch = &n->chans[n->comp_chans.v[i]];
    for (uint32_t k = 0; k < ch->n; k++) {
      uint32_t id = ch->items[k].b;
      bundle *b = &n->bundles[id];
      if (b->mark == n->epoch) continue;
      b->mark = n->epoch;
      idbuf_push(&n->comp_bundles, id);
      for (uint32_t u = 0; u < b->n_uses; u++) {
        chan *hc = &n->chans[b->uses[u].chan];
        if (hc->mark == n->epoch) continue;
        hc->mark = n->epoch;
        idbuf_push(&n->comp_chans, b->uses[u].chan);
      }
    }
  }
}

/* Each channel's signature: its capacity and how many flows of each
 * bundle (by colour) cross it, order-free (a sum of mixed words; two
 * different loads colliding is a 2^-64 chance).  Only channels whose
 * bundles changed since their signature was made are signed again; they
 * are marked with this round (signed_at). */
static void sign_channels(net *n) {
  n->sign_round++;
  for (guint i = 0; i < n->comp_chans.n; i++) {
    chan *ch = &n->chans[n->comp_chans.v[i]];
    if (ch->sig_ok) continue;
    uint64_t capbits;
    memcpy(&capbits, &ch->cap, sizeof capbits);
    uint64_t s = mix(capbits);
    for (uint32_t k = 0; k < ch->n; k++) {
      entry e = ch->items[k];
      s += mix(n->bundles[e.b].color ^ mix(n->bundles[e.b].uses[e.u].mult));
    }
    ch->sig = s;
    ch->sig_ok = 1;
    ch->signed_at = n->sign_round;
  }
}

/* Whether bundle id crosses a channel signed this round: only then may it
 * have stopped being uniform. */
static bool bundle_resigned(const net *n, uint32_t id) {
  const bundle *b = &n->bundles[id];
  for (uint32_t u = 0; u < b->n_uses; u++)
    if (n->chans[b->uses[u].chan].signed_at == n->sign_round) return true;
  return false;
}

/* Whether, at every hop, the channels bundle id crosses are alike. */
static bool bundle_uniform(const net *n, uint32_t id) {
  const bundle *b = &n->bundles[id];
  uint64_t first[NET_MAX_HOPS];
  bool seen[NET_MAX_HOPS] = {false};
  for (uint32_t u = 0; u < b->n_uses; u++) {
    const use *us = &b->uses[u];
    uint64_t sig = n->chans[us->chan].sig;
    if (!seen[us->hop]) { seen[us->hop] = true; first[us->hop] = sig; }
    else if (sig != first[us->hop]) return false;
  }
  return true;
}

/* Split bundle id into parts, the flows of one key a part (keys[i] the
 * i-th member's), in first-seen order, or with keys NULL into its flows
 * one by one, in member order.  The parts are as unproven as it was; the
 * component's bundles are listed afresh after. */
static void bundle_split(net *n, uint32_t id, const gint64 *keys) {
  bundle like = n->bundles[id];
  const net_member *m = like.members;
  bool own = like.own_members;
  n->bundles[id].own_members = false;  /* the members outlive the drop */
  if (!keys) {
    bundle_drop(n, id);
    n->bundles_started--;
    for (uint32_t i = 0; i < like.count; i++) {
      uint32_t b = bundle_add(n, g_memdup2(&m[i], sizeof *m), 1, true, NULL, &like);
      n->bundles[b].mark = n->epoch;
    }
    if (own) g_free((net_member *)m);
    return;
  }
  groups g;
  groups_make(&g, keys, sizeof *keys, like.count, g_int64_hash, g_int64_equal);
  bundle_drop(n, id);
  n->bundles_started--;  /* the parts are counted instead */
  /* members regrouped into fresh arrays, in their first-seen order */
  for (uint32_t k = 0; k < g.n; k++) {
    uint32_t size = g.at[k + 1] - g.at[k];
    net_member *part = g_new(net_member, size);
    for (uint32_t j = 0; j < size; j++) part[j] = m[g.order[g.at[k] + j]];
    uint32_t b = bundle_add(n, part, size, true, NULL, &like);
    n->bundles[b].mark = n->epoch;
  }
  if (own) g_free((net_member *)m);
  groups_clear(&g);
}

static void list_bundles(net *n) {
  n->stamp++;
  n->comp_bundles.n = 0;
  for (guint i = 0; i < n->comp_chans.n; i++) {
    const chan *ch = &n->chans[n->comp_chans.v[i]];
    for (uint32_t k = 0; k < ch->n; k++) {
      bundle *b = &n->bundles[ch->items[k].b];
      if (b->stamp == n->stamp) continue;
      b->stamp = n->stamp;
      idbuf_push(&n->comp_bundles, ch->items[k].b);
    }
  }
}

/* Whether the component's bundles need their rates checked after the
 * solve (split_unbottlenecked): some bundle of several flows crosses
 * unlike channels at one hop.  A bundle that crosses alike channels at
 * every hop is exact as one variable when every bundle of the component
 * does: with each bundle its own colour, that is an equitable partition
 * (every channel of a class carries as many flows of each bundle, every
 * flow of a bundle crosses channels of the same classes), so progressive
 * filling gives all flows of a bundle one rate.  One bundle that does
 * not breaks that argument for the others, so then every rate is
 * checked.  A component of single flows needs no check.
 * Incremental: a bundle found alike stays so until a channel it crosses
 * gains or loses a bundle (chan.sig_ok), so only those channels are
 * signed again and only bundles crossing one are looked at; one found
 * unlike stays unproven (its flows' rates may part when others change). */
static bool needs_check(net *n) {
  bool bundled = false;
  for (guint i = 0; i < n->comp_bundles.n && !bundled; i++)
    bundled = n->bundles[n->comp_bundles.v[i]].count > 1;
  if (!bundled) return false;
  sign_channels(n);
  bool check = false;
  for (guint i = 0; i < n->comp_bundles.n; i++) {
    bundle *b = &n->bundles[n->comp_bundles.v[i]];
    if (b->count == 1) continue;
    if (!b->unproven && bundle_resigned(n, n->comp_bundles.v[i]) &&
        !bundle_uniform(n, n->comp_bundles.v[i]))
      b->unproven = 1;
    check = check || b->unproven;
  }
  return check;
}

/* Solves after which a component's bundles that still split go apart into
 * their flows (the per-flow model, exact): each solve splits off the
 * flows whose rate could rise, and a component whose rates part one
 * group at a time would cost a solve per group. */
#define SPLIT_ROUNDS 8

/* Relative slack of the bottleneck test: far below the 1e-9 the bundled
 * model is held to against per flow, far above the rounding of a
 * channel's sum of a few rates. */
#define BOTTLENECK_TOL 1e-12

/* Whether channel (component index) c is a bottleneck of a flow at rate
 * r: full, and no flow on it faster (Bertsekas and Gallager, Data
 * Networks, 6.5.2). */
static bool bottleneck(const net *n, uint32_t c, double r) {
  double cap = n->chans[n->comp_chans.v[c]].cap;
  return g_array_index(n->chan_total, double, c) >= cap * (1 - BOTTLENECK_TOL) &&
         r >= g_array_index(n->chan_max, double, c) * (1 - BOTTLENECK_TOL);
}

/* The solved rates (per component bundle) are the per-flow max-min rates
 * exactly when every flow has a bottleneck: it is at its cap, or it
 * crosses a full channel on which no flow is faster (feasible rates are
 * max-min fair if and only if that holds).  Progressive filling gives a
 * bundle one; it is every flow's where the bundle's flows cross alike
 * channels or, as a causal TokenRing step's hand-on and hand-backs at
 * every port in pairs, unlike channels that fill at one level.  Each
 * bundle with flows that have none is split into those with and those
 * without (`apart`: into its flows); returns whether any split, and the
 * caller solves again. */
static bool split_unbottlenecked(net *n, const double *rate, bool apart) {
  guint nc = n->comp_chans.n, nb = n->comp_bundles.n;
  g_array_set_size(n->chan_total, nc);
  g_array_set_size(n->chan_max, nc);
  for (guint i = 0; i < nb; i++) n->bundles[n->comp_bundles.v[i]].local = i;
  for (guint i = 0; i < nc; i++) {
    const chan *ch = &n->chans[n->comp_chans.v[i]];
    double total = 0, fastest = 0;
    for (uint32_t k = 0; k < ch->n; k++) {
      entry e = ch->items[k];
      double r = rate[n->bundles[e.b].local];
      total += r * n->bundles[e.b].uses[e.u].mult;
      fastest = MAX(fastest, r);
    }
    g_array_index(n->chan_total, double, i) = total;
    g_array_index(n->chan_max, double, i) = fastest;
  }
  bool split = false;
  for (guint i = 0; i < nb; i++) {
    uint32_t id = n->comp_bundles.v[i];
    const bundle *b = &n->bundles[id];
    double r = rate[i];
    /* one flow, or held at its cap; a blocked bundle crosses alike
     * channels and its component holds blocked bundles only, so it is
     * never unproven */
    if (b->count == 1 || r >= b->cap || b->blocked) continue;
    /* a hop whose every channel is a bottleneck: one for every flow */
    bool hop_full[NET_MAX_HOPS];
    for (uint32_t h = 0; h < b->n_hops; h++) hop_full[h] = true;
    for (uint32_t u = 0; u < b->n_uses; u++)
      if (!bottleneck(n, n->chans[b->uses[u].chan].local, r)) hop_full[b->uses[u].hop] = false;
    bool all = false;
    for (uint32_t h = 0; h < b->n_hops; h++) all = all || hop_full[h];
    if (all) continue;
    g_autofree gint64 *keys = g_new(gint64, b->count);
    uint32_t with = 0;
    for (uint32_t m = 0; m < b->count; m++) {
      const uint32_t *route = b->members[m].route;
      bool has = false;
      for (uint32_t h = 0; h < b->n_hops && !has; h++)
        has = bottleneck(n, n->chans[route[h]].local, r);
      keys[m] = has;
      with += has;
    }
    if (with == b->count) continue;
    /* none: the solve gave the bundle a level no channel of it holds,
     * which only rounding could do; its flows one by one are exact */
    bundle_split(n, id, apart || with == 0 ? NULL : keys);
    split = true;
  }
  n->split_apart += apart && split;
  return split;
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

/* Max-min rates of the component's bundles into n->rates (component
 * order). */
static void solve_rates(net *n) {
  guint nc = n->comp_chans.n, nb = n->comp_bundles.n;
  g_array_set_size(n->caps, nc);
  for (guint i = 0; i < nc; i++) {
    chan *ch = &n->chans[n->comp_chans.v[i]];
    ch->local = i;
    g_array_index(n->caps, double, i) = ch->cap;
  }
  n->local_route.n = 0;
  n->local_mult.n = 0;
  for (guint i = 0; i < nb; i++) {
    bundle *b = &n->bundles[n->comp_bundles.v[i]];
    for (uint32_t u = 0; u < b->n_uses; u++) {
      idbuf_push(&n->local_route, n->chans[b->uses[u].chan].local);
      idbuf_push(&n->local_mult, b->uses[u].mult);
    }
  }
  g_array_set_size(n->mm_flows, nb);
  g_array_set_size(n->rates, nb);
  guint off = 0;
  for (guint i = 0; i < nb; i++) {
    bundle *b = &n->bundles[n->comp_bundles.v[i]];
    maxmin_flow *m = &g_array_index(n->mm_flows, maxmin_flow, i);
    m->chan = &n->local_route.v[off];
    m->mult = &n->local_mult.v[off];
    m->n_chan = b->n_uses;
    m->cap = b->cap;
    off += b->n_uses;
  }
  if (nb > 0)
    maxmin_solve(n->mm, nc, (const double *)n->caps->data, nb,
                 (const maxmin_flow *)n->mm_flows->data, (double *)n->rates->data);
  n->solves++;
}

static void solve_component(net *n) {
  double now = engine_now(n->eng);
  bool check = needs_check(n);
  for (uint32_t round = 1;; round++) {
    solve_rates(n);
    if (!check || !split_unbottlenecked(n, (const double *)n->rates->data, round > SPLIT_ROUNDS))
      break;
    list_bundles(n);
  }
  guint nc = n->comp_chans.n, nb = n->comp_bundles.n;
  for (guint i = 0; i < nb; i++) {
    uint32_t id = n->comp_bundles.v[i];
    bundle *b = &n->bundles[id];
    double r = g_array_index(n->rates, double, i);
    b->left -= b->rate * (now - b->updated_s);
    if (b->left < 0) b->left = 0;
    b->updated_s = now;
    if (r == b->rate && b->heap_pos != UINT32_MAX) continue;  /* its end still holds */
    b->rate = r;
    b->end_s = r > 0 ? end_time(now + b->left / r) : INFINITY;
    heap_update(n, id);
  }
  arm_wake(n);
  for (guint i = 0; i < nc; i++) {
    uint32_t c = n->comp_chans.v[i];
    chan *ch = &n->chans[c];
    double total = 0;
    for (uint32_t k = 0; k < ch->n; k++) {
      entry e = ch->items[k];
      total += n->bundles[e.b].rate * n->bundles[e.b].uses[e.u].mult;
    }
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
  for (guint i = 0; i < n->dirty.n; i++) {
    uint32_t c = n->dirty.v[i];
    n->chans[c].dirty = 0;
    if (n->chans[c].mark == n->epoch) continue;
    if (n->chans[c].n == 0) {  /* emptied: nothing to share */
      if (n->chans[c].rate != 0) {
        n->chans[c].rate = 0;
        if (n->rate_fn) n->rate_fn(n->rate_ctx, c, engine_now(n->eng), 0);
      }
      continue;
    }
    collect_component(n, c);
    solve_component(n);
  }
  n->dirty.n = 0;
}

/* A channel in a block: the block's bytes and busy time are its own. */
static const chan *chan_or_block(const net *n, uint32_t c) {
  const chan *ch = &n->chans[c];
  return ch->block == NO_BLOCK ? ch : &n->chans[ch->block];
}

double net_chan_bytes(const net *n, uint32_t c) { return chan_or_block(n, c)->bytes; }

double net_chan_busy_s(const net *n, uint32_t c) {
  const chan *ch = chan_or_block(n, c);
  double busy = ch->busy_s;
  if (ch->n > 0) busy += engine_now(n->eng) - ch->busy_since;
  return busy;
}

uint64_t net_flows_started(const net *n) { return n->started; }
uint64_t net_bundles_started(const net *n) { return n->bundles_started; }
uint64_t net_solves(const net *n) { return n->solves; }
uint64_t net_blocks_made(const net *n) { return n->blocks_made; }
uint64_t net_blocks_dissolved(const net *n) { return n->blocks_dissolved; }
uint64_t net_split_apart(const net *n) { return n->split_apart; }
