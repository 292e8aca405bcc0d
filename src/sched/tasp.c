/* tasp: TASP / Hamilton Attention (Wang et al. 2025, arXiv 2509.26541).
 *
 * The GPUs' complete directed graph K_n* is split into edge-disjoint
 * directed Hamiltonian cycles (hamilton.h); each GPU's KV is cut into one
 * sub-chunk per cycle and sub-chunk m travels around cycle m.  Every step
 * is therefore one all-to-all: each GPU sends one sub-chunk to each of its
 * successors, the same bytes as one ring step spread over every peer at
 * once.  n-1 steps bring every sub-chunk to every GPU once.
 *
 * Kernels: step 0 attends the local chunk; later steps attend the
 * concatenated received sub-chunks in one kernel (full mask) or two
 * (causal).  Causal layout: the zigzag layout of Zigzag-Ring with each of
 * a GPU's two chunks cut into k pieces, sub-chunk m = piece m of both
 * chunks (2·n·k pieces in all, 2·n·(n-1) for a full decomposition).  A
 * sub-chunk from a lower-ranked origin is attended by all local queries
 * against its first half; from a higher-ranked origin by the second half
 * of the queries against all of it: both blocks are wholly unmasked.
 *
 * On a topology whose GPUs are not all directly linked (a torus), the
 * cycles are searched over direct links only.
 *
 * tasp-mkm: on u nodes of m GPUs, the paper's (m-K_m-m)^u decomposition
 * instead of K_{m x u}* (ham_node_chain): m cycles, each crossing every
 * node along a Hamiltonian path and leaving it over one NIC, so a step
 * puts 1/m of a chunk on each NIC where K_{m x u}* puts about a whole one. */
#include <string.h>

#include "hamilton.h"
#include "rotate.h"

typedef struct {
  const workload *w;
  ham_decomp d;
  uint32_t *pos;    /* pos[m*n+v]: position of v on cycle m, from vertex 0 */
  uint32_t *order;  /* order[m*n+i]: vertex at position i of cycle m */
  uint64_t span;    /* tokens per chunk: S/2N causal (two chunks), S/N full */
  plan_seg *low, *high; /* tasp_kernels' scratch, 2k each */
  /* key lengths of every GPU's two kernels at step `at` (step_lengths),
   * and how many cycles bring the first kernel's pieces */
  struct tasp_lengths { uint32_t at; uint64_t *low, *high; uint32_t *low_pieces; } *len;
} tasp_self;

static uint32_t origin(const tasp_self *s, uint32_t m, uint32_t gpu, uint32_t step) {
  uint32_t n = s->w->gpus;
  uint32_t p = s->pos[(size_t)m * n + gpu];
  return s->order[(size_t)m * n + (p + n - step % n) % n];
}

/* Piece m of k of the chunk starting at `start`. */
static plan_seg piece(const tasp_self *s, uint64_t start, uint32_t m) {
  uint64_t k = s->d.n_cycles;
  uint64_t a = s->span * m / k, b = s->span * (m + 1) / k;
  return (plan_seg){start + a, b - a};
}

/* Key tokens of every GPU's kernels at `step` under a causal mask
 * (origins below the GPU give the first piece to all its queries, others
 * both pieces to its second chunk's): walking each cycle in its
 * order keeps the n·k lookups of a step sequential in memory. */
static void step_lengths(const tasp_self *s, uint32_t step) {
  uint32_t n = s->w->gpus, k = s->d.n_cycles;
  struct tasp_lengths *l = s->len;
  if (l->at == step) return;
  l->at = step;
  memset(l->low, 0, n * sizeof(uint64_t));
  memset(l->low_pieces, 0, n * sizeof(uint32_t));
  /* GPU order[i]'s origin is order[i - step], wrapping: two runs, so
   * that no position is reduced mod n (a division per GPU and cycle, n^3
   * a pass, was a tenth of a 512-GPU causal TASP forward).  Only the
   * first kernel's keys are summed; the second's follow from them. */
  uint32_t back = step % n;
  for (uint32_t m = 0; m < k; m++) {
    uint64_t len = piece(s, 0, m).len;
    const uint32_t *order = &s->order[(size_t)m * n];
    for (uint32_t i = 0; i < n; i++) {
      uint32_t g = order[i], o = order[i >= back ? i - back : i + n - back];
      if (o < g) l->low[g] += len, l->low_pieces[g]++;
    }
  }
  /* every cycle brings a GPU one sub-chunk: its first piece to the first
   * kernel, or both to the second; the k pieces of a chunk add up to its
   * span (piece) */
  for (uint32_t g = 0; g < n; g++) l->high[g] = 2 * (s->span - l->low[g]);
}

/* Segments of sub-chunk m of GPU g: one piece (full) or two (causal). */
static uint32_t subchunk(const tasp_self *s, uint32_t g, uint32_t m, plan_seg out[2]) {
  uint32_t n = s->w->gpus;
  out[0] = piece(s, g * s->span, m);
  if (!s->w->causal) return 1;
  out[1] = piece(s, (2 * n - 1 - g) * s->span, m);
  return 2;
}

/* Every step each GPU sends one sub-chunk to its successor on each cycle:
 * the same pairs every step.  A sub-chunk is priced at the mean size
 * (span·parts/k tokens): where k does not divide a chunk, pieces are
 * floor or ceil of that and differ by one token, so a transfer's bytes are
 * off by under one token's KV and every GPU sends and receives exactly its
 * chunk's bytes per step — while alike transfers keep a step one bundle
 * instead of a per-flow solve once the shorter pieces land (32 GPUs over
 * four nodes, causal backward at 1M: 0.82 s -> 0.01 s).  One message per
 * contiguous piece
 * (scripts/calibrate's TASP pass). */
static void tasp_xfers(const void *self, rotate_emit *e, uint32_t step) {
  const tasp_self *s = self;
  (void)step;
  uint32_t parts = s->w->causal ? 2 : 1;
  double tokens = (double)s->span * parts / s->d.n_cycles;
  rotate_xfer_all(e, workload_kv_bytes(s->w, tokens), parts);
}

/* Under a full mask every GPU attends its chunk, then k sub-chunks of
 * the same total length, every step. */
static bool tasp_alike(const void *self, uint32_t step) {
  const tasp_self *s = self;
  (void)step;
  return !s->w->causal;
}

static double seg_len(const plan_seg *s, uint32_t n) {
  double t = 0;
  for (uint32_t i = 0; i < n; i++) t += s[i].len;
  return t;
}

static void tasp_kernels(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step) {
  const tasp_self *s = self;
  uint32_t n = s->w->gpus, k = s->d.n_cycles;
  plan_seg local[2];
  uint32_t nl = s->w->causal ? 2 : 1;
  local[0] = (plan_seg){gpu * s->span, s->span};
  if (s->w->causal) local[1] = (plan_seg){(2 * n - 1 - gpu) * s->span, s->span};
  if (step == 0) {
    rotate_kernel(e, s->w->causal, local, nl, local, nl);
    return;
  }
  /* The kernels are unmasked: their cost needs only the key lengths, one
   * segment of that length stands for the pieces.  Segments are listed
   * only where the plan records them (tests). */
  plan_seg *low = s->low, *high = s->high;
  uint32_t nlow = 0, nhigh = 0;
  if (!rotate_records_segs(e) && !s->w->causal) {
    low[nlow++] = (plan_seg){0, s->span};  /* every piece: a whole chunk */
  } else if (!rotate_records_segs(e)) {
    step_lengths(s, step);
    if (s->len->low[gpu]) low[nlow++] = (plan_seg){0, s->len->low[gpu]};
    if (s->len->high[gpu]) high[nhigh++] = (plan_seg){0, s->len->high[gpu]};
  } else {
    for (uint32_t m = 0; m < k; m++) {
      uint32_t o = origin(s, m, gpu, step);
      plan_seg seg[2];
      subchunk(s, o, m, seg);
      if (!s->w->causal) { low[nlow++] = seg[0]; continue; }
      if (o < gpu) low[nlow++] = seg[0];   /* first half only */
      else { high[nhigh++] = seg[0]; high[nhigh++] = seg[1]; }
    }
  }
  /* Memory (calibrate.py Pass.keys, the program TASP's timings were
   * measured with; no public TASP code): a causal kernel whose keys are
   * several pieces reads them from a torch.cat gather: the second half's
   * always (both pieces of each later sub-chunk), the first half's where
   * more than one cycle brings an earlier sub-chunk. */
  /* (counted per step for all GPUs at once: a walk of the k cycles per
   * GPU was n k lookups per GPU and step, a fifth of a causal 512-GPU run) */
  uint32_t low_pieces = s->w->causal && !rotate_records_segs(e) ? s->len->low_pieces[gpu] : nlow;
  if (nlow) {
    rotate_kernel(e, false, local, nl, low, nlow);
    if (s->w->causal && low_pieces > 1) rotate_kernel_gathers(e, seg_len(low, nlow));
  }
  if (nhigh) {
    rotate_kernel(e, false, &local[1], 1, high, nhigh);
    rotate_kernel_gathers(e, seg_len(high, nhigh));
  }
}

/* Decompositions depend only on (kind, n, GPUs per node, adjacency), the
 * same for every point of a sweep: made once per process and copied out
 * under a lock (sweeps run threads; a torus search can take a second). */
static GMutex cache_lock;
static GHashTable *cache; /* GBytes key -> ham_decomp* */

typedef enum { DECOMP_COMPLETE, DECOMP_SPARSE, DECOMP_NODES } decomp_kind;

static uint32_t decompose_cached(decomp_kind kind, uint32_t n, uint32_t per_node,
                                 uint32_t out_min, const uint8_t *adj, ham_decomp *d) {
  uint32_t head[4] = {kind, n, per_node, out_min};
  GByteArray *k = g_byte_array_new();
  g_byte_array_append(k, (const guint8 *)head, sizeof head);
  if (kind == DECOMP_SPARSE) g_byte_array_append(k, adj, n * n);
  GBytes *key = g_byte_array_free_to_bytes(k);
  g_mutex_lock(&cache_lock);
  if (!cache)
    cache = g_hash_table_new_full(g_bytes_hash, g_bytes_equal, (GDestroyNotify)g_bytes_unref,
                                  NULL);
  ham_decomp *c = g_hash_table_lookup(cache, key);
  if (!c) {
    c = g_new(ham_decomp, 1);
    if (kind == DECOMP_COMPLETE) ham_complete(n, c);
    else if (kind == DECOMP_NODES) ham_node_chain(per_node, n / per_node, c);
    else ham_sparse(n, adj, out_min, c);
    g_hash_table_insert(cache, g_bytes_ref(key), c);
  }
  *d = *c;
  d->succ = g_memdup2(c->succ, (size_t)c->n_cycles * n * sizeof(uint32_t));
  g_mutex_unlock(&cache_lock);
  g_bytes_unref(key);
  return d->n_cycles;
}

/* The user's cycles ("0-1-2-3,0-3-2-1": each a vertex order over the n
 * GPUs), checked to be edge-disjoint Hamiltonian cycles over direct links. */
/* --tasp-cycles (scenario key tasp_cycles): the cycles as the user gives
 * them ("0-1-2-3,0-3-2-1"), to reproduce a particular implementation's
 * labelling; unset: found by tasp-sim.  Only tasp reads them (tasp-mkm
 * makes its own from the nodes). */
static const sched_opt tasp_opt_cycles = {
    .key = "tasp_cycles",
    .type = SCHED_OPT_TEXT,
    .metavar = "0-1-2-3,0-3-2-1",
    .help = "TASP's cycles as vertex orders, instead of the ones tasp-sim finds",
    .ignored_noun = "cycles"};

static const sched_opt *const tasp_opts[] = {&tasp_opt_cycles, NULL};

static bool given_cycles(const char *spec, uint32_t n, const uint8_t *adj, ham_decomp *d,
                         GError **err) {
  g_auto(GStrv) cycles = g_strsplit(spec, ",", -1);
  uint32_t k = g_strv_length(cycles);
  *d = (ham_decomp){n, k, g_new(uint32_t, (size_t)(k ? k : 1) * n)};
  for (uint32_t j = 0; j < k; j++) {
    g_auto(GStrv) verts = g_strsplit(cycles[j], "-", -1);
    g_autofree uint8_t *seen = g_new0(uint8_t, n);
    uint32_t len = g_strv_length(verts), first = 0, prev = 0;
    bool ok = len == n;
    for (uint32_t i = 0; ok && i < len; i++) {
      guint64 v;
      ok = g_ascii_string_to_unsigned(g_strstrip(verts[i]), 10, 0, n - 1, &v, NULL) && !seen[v];
      if (!ok) break;
      seen[v] = 1;
      if (i) d->succ[(size_t)j * n + prev] = (uint32_t)v;
      else first = (uint32_t)v;
      prev = (uint32_t)v;
    }
    if (!ok) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "tasp_cycles: cycle %u (\"%s\") is not "
                  "an order of the %u GPUs 0..%u, each once, joined by '-'", j + 1, cycles[j], n,
                  n - 1);
      ham_clear(d);
      return false;
    }
    d->succ[(size_t)j * n + prev] = first;
  }
  g_autoptr(GError) e = NULL;
  if (k == 0 || !ham_verify(d, adj, &e)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "tasp_cycles: expected edge-disjoint Hamiltonian cycles over direct links: %s",
                e ? e->message : "no cycle given");
    ham_clear(d);
    return false;
  }
  return true;
}

/* Whether tasp-mkm chains nodes here: at least two whole nodes. */
static bool chains_nodes(const workload *w, const topology *t) {
  uint32_t m = t->gpus_per_node;
  return m >= 2 && w->gpus > m && w->gpus % m == 0;
}

/* Decomposition for the first w->gpus GPUs of the topology; *out_links:
 * the fewest direct out-links of a GPU (an upper bound on the cycles). */
static uint32_t tasp_decompose(const workload *w, const topology *t, bool nodes,
                               ham_decomp *d, uint32_t *out_links, GError **err) {
  uint32_t n = w->gpus, N = t->n_gpus;
  g_autofree uint8_t *adj = g_new0(uint8_t, (size_t)n * n);
  uint32_t out_min = n;
  for (uint32_t u = 0; u < n; u++) {
    uint32_t deg = 0;
    for (uint32_t v = 0; v < n; v++) {
      adj[(size_t)u * n + v] = u != v && t->direct[(size_t)u * N + v];
      deg += adj[(size_t)u * n + v];
    }
    if (deg < out_min) out_min = deg;
  }
  if (out_links) *out_links = out_min;
  if (sched_opt_text(w, &tasp_opt_cycles) && !nodes)
    return given_cycles(sched_opt_text(w, &tasp_opt_cycles), n, adj, d, err) ? d->n_cycles : 0;
  if (nodes && chains_nodes(w, t))
    return decompose_cached(DECOMP_NODES, n, t->gpus_per_node, 0, NULL, d);
  if (out_min == n - 1) return decompose_cached(DECOMP_COMPLETE, n, 0, 0, NULL, d);
  return decompose_cached(DECOMP_SPARSE, n, 0, out_min, adj, d);
}

static bool check_any(const workload *w, const topology *t, bool nodes, GError **err) {
  if (w->gpus < 2) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP, "tasp needs an SP degree of at least 2");
    return false;
  }
  if (w->gpus > HAM_MAX_N) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP, "tasp supports at most %u GPUs, got %u",
                HAM_MAX_N, w->gpus);
    return false;
  }
  /* per step: lockstep (a full mask) a kernel, a merge and two groups;
   * else per GPU up to two kernels and two merges */
  double per_step = w->causal ? 4.0 * w->gpus + 2 : 4, passes = w->pass == PASS_FWDBWD ? 2 : 1;
  if (!sched_check_tasks(w, per_step * w->gpus * passes, "tasp", err)) return false;
  ham_decomp d;
  g_autoptr(GError) e = NULL;
  uint32_t k = tasp_decompose(w, t, nodes, &d, NULL, &e);
  ham_clear(&d);
  if (e) {  /* only given cycles fail here */
    e->code = TASP_ERROR_OPTION;
    g_propagate_error(err, g_steal_pointer(&e));
    return false;
  }
  if (k == 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_TOPOLOGY,
                "tasp: no Hamiltonian cycle over the direct links of the first %u GPUs of "
                "topology %s was found", w->gpus, t->name);
    return false;
  }
  uint64_t parts = w->causal ? 2 : 1;
  if (!sched_check_divisible(w, parts, "tasp cuts the sequence into equal chunks per GPU", err))
    return false;
  if (w->seq_len / (parts * w->gpus) < k) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SEQ,
                "tasp: sequence length %" G_GUINT64_FORMAT " is too short for %u GPUs: each "
                "chunk of %" G_GUINT64_FORMAT " tokens must split into %u sub-chunks",
                w->seq_len, w->gpus, w->seq_len / (parts * w->gpus), k);
    return false;
  }
  return true;
}

static plan *build_any(const workload *w, const topology *t, bool nodes, bool record_segs) {
  tasp_self s = {.w = w};
  uint32_t n = w->gpus;
  uint32_t links;
  uint32_t k = tasp_decompose(w, t, nodes, &s.d, &links, NULL);
  g_autoptr(GError) err = NULL;
  gboolean ok = ham_verify(&s.d, NULL, &err);
  g_assert(ok && k > 0);  /* a decomposition we made and could not verify is our bug */
  s.span = w->seq_len / ((w->causal ? 2 : 1) * (uint64_t)n);
  struct tasp_lengths lengths = {UINT32_MAX, g_new(uint64_t, n), g_new(uint64_t, n),
                                 g_new(uint32_t, n)};
  s.len = &lengths;
  s.low = g_new(plan_seg, 2 * (size_t)k);
  s.high = g_new(plan_seg, 2 * (size_t)k);
  s.pos = g_new(uint32_t, (size_t)k * n);
  s.order = g_new(uint32_t, (size_t)k * n);
  for (uint32_t m = 0; m < k; m++) {
    uint32_t v = 0;
    for (uint32_t i = 0; i < n; i++) {
      s.order[(size_t)m * n + i] = v;
      s.pos[(size_t)m * n + v] = i;
      v = s.d.succ[(size_t)m * n + v];
    }
  }
  g_autofree plan_pair *pairs = g_new(plan_pair, (size_t)k * n);
  for (uint32_t m = 0; m < k; m++)
    for (uint32_t g = 0; g < n; g++) pairs[(size_t)m * n + g] = (plan_pair){g, s.d.succ[(size_t)m * n + g]};
  rotate_ops ops = {.n_steps = n, .xfers = tasp_xfers, .kernels = tasp_kernels, .pairs = pairs,
                    .n_pairs = k * n, .alike = tasp_alike,
                    /* the k sub-chunks of the next step, one per cycle, as
                     * ring_flash_attn's next_k, next_v: double-buffered */
                    .kv_name = "next sub-chunks (k, v)"};
  plan *p = rotate_build(&ops, &s, w, record_segs);
  bool complete_graph = links == n - 1;
  if (sched_opt_text(w, &tasp_opt_cycles) && !nodes)
    g_string_printf(p->note, "tasp: the %u cycles given by tasp_cycles", k);
  else if (nodes && chains_nodes(w, t))
    g_string_printf(p->note, "tasp-mkm: (%u-K_%u-%u)^%u: %u edge-disjoint Hamiltonian cycles, "
                    "each GPU sends over its NIC on one", t->gpus_per_node, t->gpus_per_node,
                    t->gpus_per_node, n / t->gpus_per_node, k);
  else if (complete_graph && k < n - 1 && (n == 4 || n == 6))
    g_string_printf(p->note, "tasp: K_%u* has no decomposition into %u Hamiltonian cycles "
                    "(Tillson 1980); using %u edge-disjoint cycles", n, n - 1, k);
  else if (!complete_graph && k == links)
    /* a cycle leaves every GPU by one of its out-links: no more can exist */
    g_string_printf(p->note, "tasp: %u edge-disjoint Hamiltonian cycles over direct links, "
                    "the most there can be (one per out-link of a GPU)", k);
  else if (!complete_graph)
    g_string_printf(p->note, "tasp: %u edge-disjoint Hamiltonian cycles over direct links; at "
                    "most %u could exist (out-links of a GPU), no more were found within the "
                    "search budget", k, links);
  g_free(s.pos);
  g_free(s.order);
  g_free(s.low);
  g_free(s.high);
  g_free(lengths.low);
  g_free(lengths.high);
  g_free(lengths.low_pieces);
  ham_clear(&s.d);
  return p;
}

static bool tasp_check(const workload *w, const topology *t, GError **err) {
  return check_any(w, t, false, err);
}
static plan *tasp_build(const workload *w, const topology *t, bool record_segs) {
  return build_any(w, t, false, record_segs);
}
static bool mkm_check(const workload *w, const topology *t, GError **err) {
  return check_any(w, t, true, err);
}
static plan *mkm_build(const workload *w, const topology *t, bool record_segs) {
  return build_any(w, t, true, record_segs);
}

const sched_ops sched_tasp = {
    .name = "tasp",
    .summary = "TASP: Hamiltonian decomposition into concurrent rings, one all-to-all per step",
    .check = tasp_check,
    .build = tasp_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = tasp_opts,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h): causal, up to
     * two kernels and two merges per GPU and step (check_any's bound;
     * 3.77 P^2 built at P = 1,024); every step's chunks move along one
     * pattern of the P (P - 1) pairs of the cycles */
    .size = {4, 0, 3, 3.5, 2, 0, 0, 5.6, 4, 8, 1, 0, 0}};
const sched_ops sched_tasp_mkm = {
    .name = "tasp-mkm",
    .summary = "TASP over (m-K_m-m)^u: Hamiltonian paths in each node chained through the NICs",
    .check = mkm_check,
    .build = mkm_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h): on one node
     * the plan is tasp's (3.77 P^2 causal tasks at P = 1,024), its
     * transfers one pattern of at most P (P - 1) pairs */
    .size = {4, 0, 3, 3.5, 0, 16, 0, 5, 4, 8, 1, 0, 0}};
