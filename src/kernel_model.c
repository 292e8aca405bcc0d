/* kernel_model: flash-attention kernels as CTAs in waves over the SMs (the
 * model and its sources: kernel_model.h; scripts/kernel_model.py is the
 * same model, which fits its constants). */
#include "kernel_model.h"

#include <math.h>
#include <string.h>


/* FlashAttention-2's tiles on sm80/sm90 without dropout, by head dim
 * rounded up to 32 (index D / 32 - 1): query rows bm, keys bn, CTAs an SM
 * holds (4-warp kernels two, the 8-warp ones of head dim > 128 one).
 * flash_fwd_launch_template.h: run_mha_fwd_hdim{32..256};
 * flash_bwd_launch_template.h: run_mha_bwd_hdim{32..256} (8 warps, one
 * CTA an SM). */
typedef struct {
  double bm, bn, occ;
} tile;
static const tile fwd_tiles[8] = {{128, 128, 2}, {128, 128, 2}, {128, 64, 2}, {128, 64, 2},
                                  {128, 64, 1},  {128, 64, 1},  {128, 64, 1}, {128, 64, 1}};
static const tile bwd_tiles[8] = {{128, 128, 1}, {128, 128, 1}, {64, 128, 1}, {64, 128, 1},
                                  {64, 64, 1},   {64, 64, 1},   {64, 64, 1},  {64, 64, 1}};
/* tiles of work a CTA spends outside its key loop (load Q, write O) */
#define PROLOGUE_TILES 2.0
/* CTAs simulated one by one; before them, whole heads run as a fluid at
 * every SM's full rate (they keep all SMs busy) */
#define MAX_SIM_CTAS 2048

static int dim_index(double head_dim) {
  int i = (int)ceil(head_dim / 32) - 1;
  return i < 0 ? 0 : i > 7 ? 7 : i;
}

/* The split-KV kernel's key block (flash_api.cpp set_params_splitkv). */
static double split_bn(double head_dim) {
  return head_dim <= 64 ? 256 : head_dim <= 128 ? 128 : 64;
}

/* FlashAttention-2's split count (flash_api.cpp, num_splits_heuristic):
 * none when the 64-row blocks nearly fill two slots an SM; else the
 * fewest splits whose wave efficiency (CTAs over slots, over its ceiling)
 * is within 85% of the best, a count that shortens no split not taken. */
static unsigned splits_of(double sms, double ctas64, double n_blocks) {
  double slots = 2 * sms;
  if (ctas64 >= 0.8 * slots) return 1;
  unsigned most = (unsigned)fmin(128, fmin(slots, n_blocks));
  double eff[129] = {0}, best = 0;
  for (unsigned s = 1; s <= most; s++) {
    if (s > 1 && ceil(n_blocks / s) == ceil(n_blocks / (s - 1))) continue;
    double waves = ctas64 * s / slots;
    eff[s] = waves / ceil(waves);
    best = fmax(best, eff[s]);
  }
  for (unsigned s = 1; s <= most; s++)
    if (eff[s] > 0 && eff[s] >= 0.85 * best) return s;
  return 1;
}

unsigned kernel_model_splits(const kernel_model *k, double bh, double head_dim, double sq,
                             double sk) {
  return splits_of(k->sms, bh * ceil(sq / 64), ceil(sk / split_bn(head_dim)));
}

/* One head's CTAs in launch order, as pairs of work each; *occ the CTAs
 * an SM holds.  Forward: query block fastest, then split; backward: key
 * blocks. */
static GArray *one_head(const kernel_model *k, double bh, double head_dim, double sq, double sk,
                        bool causal, bool backward, double *occ, guint *alike) {
  *alike = 0; /* the first CTAs known to share the first's work */
  GArray *w;
  if (backward) {
    tile t = bwd_tiles[dim_index(head_dim)];
    guint nk = (guint)ceil(sk / t.bn);
    w = g_array_sized_new(FALSE, FALSE, sizeof(double), nk);
    g_array_set_size(w, nk);
    double *out = (double *)w->data;
    *occ = t.occ;
    double nq = ceil(sq / t.bm);
    /* written in place, min and max as comparisons (the same doubles as
     * fmin and fmax of these finite, non-negative operands): a causal
     * kernel over a gathered sequence is up to 128K key blocks a head */
    double whole = (nq - 0 + PROLOGUE_TILES) * t.bm * t.bn;
    guint i = 0;
    /* the key blocks every query block sees (all of them under a full
     * mask): one work */
    while (i < nk && (!causal || (double)i * t.bn - (sk - sq) <= 0)) out[i++] = whole;
    *alike = i;
    for (; i < nk; i++) {
      double ahead = (double)i * t.bn - (sk - sq), rows = floor(ahead / t.bm);
      double start = rows < nq ? rows : nq;
      out[i] = (nq - start + PROLOGUE_TILES) * t.bm * t.bn;
    }
    return w;
  }
  tile t = fwd_tiles[dim_index(head_dim)];
  unsigned ns = kernel_model_splits(k, bh, head_dim, sq, sk);
  if (ns > 1) t = (tile){64, split_bn(head_dim), 2};
  *occ = t.occ;
  w = g_array_sized_new(FALSE, FALSE, sizeof(double), ns * (guint)ceil(sq / t.bm));
  double nk = ceil(sk / t.bn), per = ceil(nk / ns);
  for (unsigned s = 0; s < ns; s++) {
    double lo = s * per, hi = fmin(nk, (s + 1) * per);
    for (double m = 0; m < ceil(sq / t.bm); m++) {
      double n_hi = hi;
      if (causal) {
        double last = (m + 1) * t.bm - 1 + sk - sq; /* the block's last row's last key */
        n_hi = last >= 0 ? fmin(hi, floor(last / t.bn) + 1) : 0;
      }
      double work = (fmax(0, n_hi - lo) + PROLOGUE_TILES) * t.bm * t.bn;
      g_array_append_val(w, work);
    }
  }
  return w;
}

/* SMs by the time their next CTA ends (then by index: deterministic). */
typedef struct {
  double t;
  guint sm;
} sm_event;

static bool before(sm_event a, sm_event b) { return a.t < b.t || (a.t == b.t && a.sm < b.sm); }

/* A binary heap sifted with a hole (one move a level, not a swap): a
 * kernel of 2M keys simulates its 32K CTAs of one head through it. */
static void heap_push(sm_event *h, guint *n, sm_event e) {
  guint i = (*n)++;
  for (; i > 0 && before(e, h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
  h[i] = e;
}

static sm_event heap_pop(sm_event *h, guint *n) {
  sm_event top = h[0], last = h[--*n];
  guint i = 0;
  for (;;) {
    guint l = 2 * i + 1, r = l + 1, m = l;
    if (l >= *n) break;
    if (r < *n && before(h[r], h[l])) m = r;
    if (!before(h[m], last)) break;
    h[i] = h[m];
    i = m;
  }
  if (*n) h[i] = last;
  return top;
}

/* Per-CTA rate on an SM holding n CTAs (its full rate 1). */
static double cta_rate(double share, guint n) { return fmin(1.0, n * share) / n; }

/* One CTA an SM (slots 1), every SM holding one, and the CTAs launched
 * next alike: the SMs end theirs at one instant and take the next CTAs
 * in SM order (the heap's ties), round after round, all SMs alike.  The
 * rounds in which every CTA is alike are counted here, not simulated one
 * CTA at a time through the heap (a causal backward kernel of 2M keys is
 * 32K CTAs of one head, all but its last query blocks' whole: 1,024 such
 * shapes were 85% of a 1,024-GPU all-gather CP forward and backward);
 * each SM's time is added up as the simulation adds it (t + work / rate,
 * CTA after CTA), so it is the same double.  Returns when the SMs' CTAs
 * after those rounds end, *next past the rounds' CTAs; 0 (nothing
 * counted) where the SMs do not start alike. */
static double rounds_alike(const double *w, guint per, guint alike, guint n, guint sms,
                           guint slots, double rate, guint *next) {
  if (slots != 1 || *next != sms) return 0;
  double work = w[0];
  /* CTA j is w[j % per]; the first of a head's CTAs unlike its first
   * (the first `alike` are known alike) */
  guint unlike = alike;
  while (unlike < per && w[unlike] == work) unlike++;
  /* the first sms CTAs (j < sms) alike: a whole head where per <= sms */
  if (unlike < per && unlike < sms) return 0;
  /* so, where a head has an unlike CTA, the head is longer than sms
   * and that CTA is the first unlike one from j = sms on (a round
   * holding it ends the counting, alike past it or not) */
  guint end = unlike == per ? n : unlike;
  double step = work / rate, ends = step;
  while (*next + sms <= n && ends + step > ends) {
    if (*next + sms > end) return ends;
    ends = ends + step;
    *next += sms;
  }
  return ends;
}

/* The pairs-time of `heads` copies of one head's CTAs in order over the
 * SMs, processor sharing within an SM (at most 2 CTAs an SM). */
/* The works of one head's CTAs added up.  Every work is a whole number
 * of pair-tiles times the tile's pairs (one_head), so while the total
 * stays below 2^53 every partial sum is exact and any order gives the
 * same double: the first `alike` (equal) works are one product then.
 * Otherwise (a fractional work, or a total that large) they are added
 * one by one, in order. */
static double works_total(const double *w, guint per, guint alike) {
  const double exact = 9007199254740992.0; /* 2^53 */
  double total = (double)alike * w[0];
  bool whole = alike == 0 || (w[0] == floor(w[0]) && total < exact);
  for (guint i = alike; whole && i < per; i++) {
    whole = w[i] == floor(w[i]);
    total += w[i];
  }
  if (whole && total < exact) return total;
  total = 0;
  for (guint i = 0; i < per; i++) total += w[i];
  return total;
}

static double makespan(const kernel_model *k, const GArray *one, double heads, double occ,
                       guint alike) {
  const double *w = (const double *)one->data;
  guint per = one->len, sms = (guint)k->sms;
  if (per == 0 || heads <= 0 || sms == 0) return 0;
  double share = occ > 1 ? k->lone_share : 1.0;
  /* per-CTA rate by CTAs held (cta_rate), computed once */
  const double rate[3] = {0, cta_rate(share, 1), cta_rate(share, 2)};
  double one_total = works_total(w, per, alike);
  double keep = fmin(heads, ceil((double)MAX_SIM_CTAS / per));
  double prefix = one_total * (heads - keep) / sms;
  guint n = per * (guint)keep, next = 0, slots = occ > 1 ? 2 : 1;
  double *rem = g_new0(double, (gsize)sms * 2), *last = g_new0(double, sms);
  guint *held = g_new0(guint, sms), hn = 0;
  sm_event *heap = g_new(sm_event, sms);
  for (guint slot = 0; slot < slots; slot++)
    for (guint s = 0; s < sms && next < n; s++) rem[2 * s + held[s]++] = w[next++ % per];
  double ends = rounds_alike(w, per, alike, n, sms, slots, rate[1], &next);
  for (guint s = 0; s < sms; s++) {
    if (!held[s]) continue;
    double least = held[s] == 2 ? fmin(rem[2 * s], rem[2 * s + 1]) : rem[2 * s];
    heap_push(heap, &hn, (sm_event){ends > 0 ? ends : least / rate[held[s]], s});
  }
  double t = 0;
  while (hn) {
    sm_event e = heap_pop(heap, &hn);
    guint s = e.sm;
    t = e.t;
    double done = (t - last[s]) * rate[held[s]];
    last[s] = t;
    for (guint j = 0; j < held[s]; j++) rem[2 * s + j] -= done;
    /* the CTA that ended leaves; the next in launch order takes its slot */
    guint end = held[s] == 2 && rem[2 * s + 1] < rem[2 * s] ? 1 : 0;
    if (next < n) {
      rem[2 * s + end] = w[next++ % per];
    } else {
      rem[2 * s + end] = rem[2 * s + held[s] - 1];
      held[s]--;
    }
    if (!held[s]) continue;
    double least = held[s] == 2 ? fmin(rem[2 * s], rem[2 * s + 1]) : rem[2 * s];
    heap_push(heap, &hn, (sm_event){t + least / rate[held[s]], s});
  }
  g_free(rem);
  g_free(last);
  g_free(held);
  g_free(heap);
  return prefix + t;
}

double kernel_model_makespan(const kernel_model *k, double bh, double head_dim, double sq,
                             double sk, bool causal, bool backward) {
  if (bh <= 0 || sq <= 0 || sk <= 0) return 0;
  double occ;
  guint alike;
  GArray *one = one_head(k, bh, head_dim, sq, sk, causal, backward, &occ, &alike);
  double m = makespan(k, one, bh, occ, alike);
  g_array_free(one, TRUE);
  return m;
}

/* FlashAttention-2's kernel configuration by head dim (the tiles above,
 * forward and backward alike): up to 64, 65-128, and the 8-warp kernels
 * above 128. */
static int tile_group(double d) { return d <= 64 ? 0 : d <= 128 ? 1 : 2; }

/* Seconds per pair on one SM at head dim D, from the measured head dims'
 * FLOP rates (D / time): those of D's own tile group where measured (the
 * rate linear in D between them, the nearest one's beyond), else all. */
static double pair_s(const kernel_model *k, double d, bool backward) {
  double x[KERNEL_MODEL_MAX_DIMS], r[KERNEL_MODEL_MAX_DIMS];
  guint n = 0;
  for (int pass = 0; pass < 2 && n == 0; pass++)
    for (guint i = 0; i < k->n_dims; i++)
      if (pass == 1 || tile_group(k->dims[i]) == tile_group(d)) {
        x[n] = k->dims[i];
        r[n++] = k->dims[i] / k->pair_s[backward][i];
      }
  double rate;
  if (d <= x[0]) {
    rate = r[0];
  } else if (d >= x[n - 1]) {
    rate = r[n - 1];
  } else {
    guint i = 1;
    while (x[i] < d) i++;
    rate = r[i - 1] + (r[i] - r[i - 1]) * (d - x[i - 1]) / (x[i] - x[i - 1]);
  }
  return d / rate;
}

static double priced_s(const kernel_model *k, double bh, double head_dim, double sq, double sk,
                       bool causal, bool backward) {
  double busy = pair_s(k, head_dim, backward) *
                kernel_model_makespan(k, bh, head_dim, sq, sk, causal, backward);
  if (busy <= 0) return 0;
  double sustained = 1 + k->slowdown * (1 - exp(-busy / k->after_s));
  return k->fixed_s[backward] + busy * sustained;
}

struct kernel_model_memo {
  GMutex lock;
  GHashTable *prices; /* memo_key -> double seconds, both owned */
};

typedef struct {
  double bh, head_dim, sq, sk;
  int flags; /* causal | backward << 1 */
} memo_key;

static guint memo_hash(gconstpointer p) {
  const memo_key *m = p;
  return g_double_hash(&m->bh) ^ (g_double_hash(&m->head_dim) * 31u) ^
         (g_double_hash(&m->sq) * 131u) ^ (g_double_hash(&m->sk) * 1031u) ^ (guint)m->flags;
}

static gboolean memo_equal(gconstpointer a, gconstpointer b) {
  const memo_key *x = a, *y = b;
  return x->bh == y->bh && x->head_dim == y->head_dim && x->sq == y->sq && x->sk == y->sk &&
         x->flags == y->flags;
}

double kernel_model_s(const kernel_model *k, double bh, double head_dim, double sq, double sk,
                      bool causal, bool backward) {
  if (!k->memo) return priced_s(k, bh, head_dim, sq, sk, causal, backward);
  memo_key key = {bh, head_dim, sq, sk, causal | backward << 1};
  g_mutex_lock(&k->memo->lock);
  const double *got = g_hash_table_lookup(k->memo->prices, &key);
  double t = got ? *got : NAN;
  g_mutex_unlock(&k->memo->lock);
  if (got) return t;
  t = priced_s(k, bh, head_dim, sq, sk, causal, backward);
  g_mutex_lock(&k->memo->lock);
  g_hash_table_replace(k->memo->prices, g_memdup2(&key, sizeof key), g_memdup2(&t, sizeof t));
  g_mutex_unlock(&k->memo->lock);
  return t;
}

void kernel_model_clear(kernel_model *k) {
  if (k->memo) {
    g_hash_table_destroy(k->memo->prices);
    g_mutex_clear(&k->memo->lock);
    g_free(k->memo);
  }
  memset(k, 0, sizeof *k);
}

/* ---- reading it ---- */

static bool parse_dim(json_object *p, json_where w, kernel_model *k, GError **err) {
  static const char *const keys[] = {"head_dim", "fwd_fs", "bwd_fs", NULL};
  if (!json_object_is_type(p, json_type_object))
    return json_fail(err, w, NULL, "expected an object {head_dim, fwd_fs, bwd_fs}");
  if (!json_check_keys(p, w, keys, err)) return false;
  uint32_t d;
  double f, b;
  if (!json_get_u32(p, w, "head_dim", true, 0, 1, &d, err) ||
      !json_get_double(p, w, "fwd_fs", true, 0, JSON_POSITIVE, &f, err) ||
      !json_get_double(p, w, "bwd_fs", true, 0, JSON_POSITIVE, &b, err))
    return false;
  if (k->n_dims && d <= k->dims[k->n_dims - 1])
    return json_fail(err, w, "head_dim", "expected head dims in ascending order, got %u after %g",
                     d, k->dims[k->n_dims - 1]);
  k->dims[k->n_dims] = d;
  k->pair_s[0][k->n_dims] = f * 1e-15;
  k->pair_s[1][k->n_dims] = b * 1e-15;
  k->n_dims++;
  return true;
}

bool kernel_model_parse(json_object *obj, json_where w, kernel_model *k, GError **err) {
  static const char *const keys[] = {"sms", "lone_cta_share", "sustained_slowdown",
                                     "sustained_after_us", "fwd_fixed_us", "bwd_fixed_us",
                                     "pair_time", "source", NULL};
  memset(k, 0, sizeof *k);
  if (!json_object_is_type(obj, json_type_object))
    return json_fail(err, w, NULL, "expected an object (the kernel model's constants)");
  if (!json_check_keys(obj, w, keys, err)) return false;
  uint32_t sms;
  double after_us, fwd_us, bwd_us;
  if (!json_get_u32(obj, w, "sms", true, 0, 1, &sms, err) ||
      !json_get_double(obj, w, "lone_cta_share", true, 0, JSON_POSITIVE, &k->lone_share, err) ||
      !json_get_double(obj, w, "sustained_slowdown", false, 0, JSON_NONNEG, &k->slowdown, err) ||
      !json_get_double(obj, w, "sustained_after_us", false, 1000, JSON_POSITIVE, &after_us, err) ||
      !json_get_double(obj, w, "fwd_fixed_us", true, 0, JSON_NONNEG, &fwd_us, err) ||
      !json_get_double(obj, w, "bwd_fixed_us", true, 0, JSON_NONNEG, &bwd_us, err))
    return false;
  if (sms > 100000) return json_fail(err, w, "sms", "expected at most 100000 SMs, got %u", sms);
  if (k->lone_share > 1)
    return json_fail(err, w, "lone_cta_share", "expected a fraction in (0, 1], got %g",
                     k->lone_share);
  if (k->slowdown >= 1)
    return json_fail(err, w, "sustained_slowdown", "expected a fraction in [0, 1), got %g",
                     k->slowdown);
  json_object *dims;
  if (!json_get_typed(obj, w, "pair_time", true, json_type_array, &dims, err)) return false;
  size_t n = json_object_array_length(dims);
  if (n < 1 || n > KERNEL_MODEL_MAX_DIMS)
    return json_fail(err, w, "pair_time", "expected 1 to %d head dims, got %zu",
                     KERNEL_MODEL_MAX_DIMS, n);
  g_autofree char *dpath = json_path_join(w.path, "pair_time");
  for (size_t i = 0; i < n; i++) {
    g_autofree char *ipath = g_strdup_printf("%s[%zu]", dpath, i);
    json_where wi = {w.file, ipath, w.doc};
    if (!parse_dim(json_object_array_get_idx(dims, i), wi, k, err)) return false;
  }
  k->sms = sms;
  k->after_s = after_us * 1e-6;
  k->fixed_s[0] = fwd_us * 1e-6;
  k->fixed_s[1] = bwd_us * 1e-6;
  k->memo = g_new0(kernel_model_memo, 1);
  g_mutex_init(&k->memo->lock);
  k->memo->prices = g_hash_table_new_full(memo_hash, memo_equal, g_free, g_free);
  k->set = true;
  return true;
}
