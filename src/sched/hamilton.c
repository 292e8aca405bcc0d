/* hamilton: Walecki cycles, rainbow-path splicing and verification. */
#include "hamilton.h"

#include <string.h>

#include "jsonio.h"

void ham_clear(ham_decomp *d) {
  g_free(d->succ);
  memset(d, 0, sizeof *d);
}

/* Walecki: n = 2m+1 vertices; vertex 2m is the hub; the zigzag path
 * 0, 1, 2m-1, 2, 2m-2, ..., m over Z_2m and its m rotations give m
 * undirected Hamiltonian cycles; both directions give 2m directed ones. */
static void walecki(uint32_t n, uint32_t *succ) {
  uint32_t m = (n - 1) / 2, z = 2 * m, hub = z;
  g_autofree uint32_t *path = g_new(uint32_t, z);
  path[0] = 0;
  for (uint32_t j = 1; j <= m; j++) {
    path[2 * j - 1] = j % z;
    if (2 * j < z) path[2 * j] = (z - j) % z;
  }
  for (uint32_t i = 0; i < m; i++) {
    uint32_t *fw = succ + (size_t)(2 * i) * n, *bw = succ + (size_t)(2 * i + 1) * n;
    uint32_t prev = hub;
    for (uint32_t p = 0; p < z; p++) {
      uint32_t v = (path[p] + i) % z;
      fw[prev] = v;
      bw[v] = prev;
      prev = v;
    }
    fw[prev] = hub;
    bw[hub] = prev;
  }
}

/* Depth-first search for a Hamiltonian path of the n-vertex digraph whose
 * edges are coloured by cycle (colour k: v -> succ[k*n+v]) that uses every
 * colour once.  Deterministic: candidates are tried fewest-onward-options
 * first, ties by colour. */
typedef struct {
  uint32_t n, colours;
  const uint32_t *succ;
  uint8_t *visited, *used;
  uint32_t *path_v, *path_c;
  uint32_t *cand, *score; /* colours x colours: one row of candidates per depth */
  uint32_t *perm;         /* colour order of this attempt */
  uint64_t budget;
} rainbow;

static uint32_t onward(const rainbow *r, uint32_t v) {
  uint32_t c = 0;
  for (uint32_t k = 0; k < r->colours; k++)
    if (!r->used[k] && !r->visited[r->succ[(size_t)k * r->n + v]]) c++;
  return c;
}

static bool rainbow_dfs(rainbow *r, uint32_t v, uint32_t depth) {
  if (depth == r->colours) return true;
  if (r->budget == 0) return false;
  r->budget--;
  uint32_t *cand = r->cand + (size_t)depth * r->colours;
  uint32_t *score = r->score + (size_t)depth * r->colours, nc = 0;
  for (uint32_t kk = 0; kk < r->colours; kk++) {
    uint32_t k = r->perm[kk];
    uint32_t w = r->succ[(size_t)k * r->n + v];
    if (r->used[k] || r->visited[w]) continue;
    r->used[k] = 1;
    r->visited[w] = 1;
    score[nc] = onward(r, w);
    r->visited[w] = 0;
    r->used[k] = 0;
    if (score[nc] == 0 && depth + 1 < r->colours) continue;  /* dead end */
    cand[nc++] = k;
  }
  /* insertion sort by score: fewest onward options first */
  for (uint32_t i = 1; i < nc; i++)
    for (uint32_t j = i; j > 0 && score[j] < score[j - 1]; j--) {
      uint32_t s = score[j]; score[j] = score[j - 1]; score[j - 1] = s;
      uint32_t c = cand[j]; cand[j] = cand[j - 1]; cand[j - 1] = c;
    }
  for (uint32_t i = 0; i < nc; i++) {
    uint32_t k = cand[i], w = r->succ[(size_t)k * r->n + v];
    r->used[k] = 1;
    r->visited[w] = 1;
    r->path_v[depth + 1] = w;
    r->path_c[depth] = k;
    if (rainbow_dfs(r, w, depth + 1)) return true;
    r->used[k] = 0;
    r->visited[w] = 0;
  }
  return false;
}

/* Splice vertex `hub` into cycle k at its edge a -> succ(a). */
static void splice(uint32_t *cyc_new, const uint32_t *cyc_old, uint32_t n_old, uint32_t hub,
                   uint32_t a) {
  for (uint32_t v = 0; v < n_old; v++) cyc_new[v] = cyc_old[v];
  cyc_new[hub] = cyc_old[a];
  cyc_new[a] = hub;
}

/* Fallback: one edge per Walecki cycle, tails all distinct and heads all
 * distinct, so splicing the new vertex in at them keeps every cycle
 * Hamiltonian and the cycles edge-disjoint.  Forward cycle i holds
 * i -> i+1 (its first two path vertices); backward cycle i holds
 * q+i -> q+i+1 (its last two, reversed); tails and heads cover Z_2q once
 * each.  (m = 2q+1 vertices, hub 2q.) */
static void walecki_transversal(uint32_t m, uint32_t *pick) {
  uint32_t q = (m - 1) / 2, z = 2 * q;
  for (uint32_t i = 0; i < q; i++) {
    pick[2 * i] = i;
    pick[2 * i + 1] = (q + i) % z;
  }
}

uint32_t ham_complete(uint32_t n, ham_decomp *out) {
  memset(out, 0, sizeof *out);
  out->n = n;
  if (n < 2) return 0;
  if (n == 2) {
    out->n_cycles = 1;
    out->succ = g_new(uint32_t, 2);
    out->succ[0] = 1;
    out->succ[1] = 0;
    return 1;
  }
  if (n % 2 == 1) {
    out->n_cycles = n - 1;
    out->succ = g_new(uint32_t, (size_t)n * (n - 1));
    walecki(n, out->succ);
    return out->n_cycles;
  }
  /* n even: from K_{n-1}* (n-2 cycles) */
  uint32_t m = n - 1, colours = n - 2, hub = n - 1;
  g_autofree uint32_t *base = g_new(uint32_t, (size_t)m * colours);
  walecki(m, base);
  rainbow r = {m, colours, base, g_new0(uint8_t, m), g_new0(uint8_t, colours),
               g_new(uint32_t, m), g_new(uint32_t, colours),
               g_new(uint32_t, (size_t)colours * colours),
               g_new(uint32_t, (size_t)colours * colours), g_new(uint32_t, colours), 0};
  /* Depth-first from each start in turn, within a total budget, then from
   * seeded restarts: found up to n = 76 and for most even n to 100; past
   * the budget the n-2 cycle fallback below is used and the caller says so. */
  bool found = false;
  /* a search node costs about colours^2 steps: budgets shrink past n = 102
   * so that a failing search costs about a second, not half a minute */
  double scale = colours <= 100 ? 1.0 : (100.0 * 100.0) / ((double)colours * colours);
  uint64_t total = (uint64_t)(400000 * scale);
  for (uint32_t k = 0; k < colours; k++) r.perm[k] = k;
  for (uint32_t start = 0; start < m && !found && total > 0; start++) {
    memset(r.visited, 0, m);
    memset(r.used, 0, colours);
    r.visited[start] = 1;
    r.path_v[0] = start;
    uint64_t per_start = (uint64_t)(100000 * scale);
    r.budget = total < per_start ? total : per_start;
    uint64_t before = r.budget;
    found = rainbow_dfs(&r, start, 0);
    total -= before - r.budget;
  }
  /* Then restarts from seeded random starts and colour orders (ties go by
   * colour order): a search that goes wrong early rarely recovers within a
   * budget, a fresh order often finds a path at once (K_66*, K_96*, K_128*) */
  for (uint32_t attempt = 1; attempt <= 64 && !found; attempt++) {
    GRand *rng = g_rand_new_with_seed(attempt);
    for (uint32_t k = colours; k > 1; k--) {
      uint32_t j = (uint32_t)g_rand_int_range(rng, 0, (gint32)k), t = r.perm[k - 1];
      r.perm[k - 1] = r.perm[j];
      r.perm[j] = t;
    }
    uint32_t start = (uint32_t)g_rand_int_range(rng, 0, (gint32)m);
    g_rand_free(rng);
    memset(r.visited, 0, m);
    memset(r.used, 0, colours);
    r.visited[start] = 1;
    r.path_v[0] = start;
    r.budget = (uint64_t)(20000 * scale) + 1;
    found = rainbow_dfs(&r, start, 0);
  }
  if (found) {
    out->n_cycles = n - 1;
    out->succ = g_new(uint32_t, (size_t)n * (n - 1));
    for (uint32_t d = 0; d < colours; d++) {
      uint32_t k = r.path_c[d];
      splice(out->succ + (size_t)k * n, base + (size_t)k * m, m, hub, r.path_v[d]);
    }
    uint32_t *last = out->succ + (size_t)colours * n;
    for (uint32_t d = 0; d < colours; d++) last[r.path_v[d]] = r.path_v[d + 1];
    last[r.path_v[colours]] = hub;
    last[hub] = r.path_v[0];
  } else {
    g_autofree uint32_t *pick = g_new(uint32_t, colours);
    walecki_transversal(m, pick);
    out->n_cycles = colours;
    out->succ = g_new(uint32_t, (size_t)n * colours);
    for (uint32_t k = 0; k < colours; k++)
      splice(out->succ + (size_t)k * n, base + (size_t)k * m, m, hub, pick[k]);
  }
  g_free(r.visited); g_free(r.used); g_free(r.path_v); g_free(r.path_c);
  g_free(r.cand); g_free(r.score); g_free(r.perm);
  return out->n_cycles;
}

bool ham_verify(const ham_decomp *d, const uint8_t *adj, GError **err) {
  uint32_t n = d->n;
  g_autofree uint8_t *edge = g_new0(uint8_t, (size_t)n * n);
  g_autofree uint8_t *seen = g_new(uint8_t, n);
  for (uint32_t k = 0; k < d->n_cycles; k++) {
    const uint32_t *s = d->succ + (size_t)k * n;
    memset(seen, 0, n);
    uint32_t v = 0;
    for (uint32_t i = 0; i < n; i++) {
      if (s[v] >= n || seen[v]) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                    "cycle %u is not Hamiltonian: vertex %u reached twice or leaves the graph", k, v);
        return false;
      }
      seen[v] = 1;
      uint32_t w = s[v];
      if (w == v || edge[(size_t)v * n + w]) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                    "edge %u -> %u is used twice (cycle %u)", v, w, k);
        return false;
      }
      if (adj && !adj[(size_t)v * n + w]) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                    "edge %u -> %u of cycle %u is not a direct link", v, w, k);
        return false;
      }
      edge[(size_t)v * n + w] = 1;
      v = w;
    }
    if (v != 0) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "cycle %u does not close after %u steps",
                  k, n);
      return false;
    }
  }
  return true;
}

/* Hamiltonian cycles through the edges left in adj, by depth-first search
 * from vertex 0, fewest-onward-options first, within a budget shared by
 * nested searches.  Each cycle found is offered to accept (NULL: take the
 * first); the search goes on while accept refuses. */
typedef struct cycle_search {
  uint32_t n;
  uint8_t *adj, *visited;
  uint32_t *order;
  uint64_t *budget;
  bool (*accept)(struct cycle_search *c);
  void *ctx;
  GRand *rng;  /* breaks ties between equally good next vertices; NULL: in order */
} cycle_search;

static uint32_t free_out(const cycle_search *c, uint32_t v) {
  uint32_t k = 0;
  for (uint32_t w = 0; w < c->n; w++) k += c->adj[(size_t)v * c->n + w] && !c->visited[w];
  return k;
}

static bool cycle_dfs(cycle_search *c, uint32_t v, uint32_t depth) {
  if (depth == c->n)
    return c->adj[(size_t)v * c->n + c->order[0]] && (!c->accept || c->accept(c));
  if (*c->budget == 0) return false;
  (*c->budget)--;
  g_autofree uint32_t *cand = g_new(uint32_t, c->n);
  g_autofree uint32_t *score = g_new(uint32_t, c->n);
  uint32_t nc = 0;
  for (uint32_t w = 0; w < c->n; w++) {
    if (!c->adj[(size_t)v * c->n + w] || c->visited[w]) continue;
    cand[nc] = w;
    score[nc++] = free_out(c, w);
  }
  if (c->rng) /* shuffle, then the stable sort below keeps ties shuffled */
    for (uint32_t i = nc; i > 1; i--) {
      uint32_t j = (uint32_t)g_rand_int_range(c->rng, 0, (gint32)i);
      uint32_t s = score[i - 1]; score[i - 1] = score[j]; score[j] = s;
      uint32_t x = cand[i - 1]; cand[i - 1] = cand[j]; cand[j] = x;
    }
  for (uint32_t i = 1; i < nc; i++)
    for (uint32_t j = i; j > 0 && score[j] < score[j - 1]; j--) {
      uint32_t s = score[j]; score[j] = score[j - 1]; score[j - 1] = s;
      uint32_t x = cand[j]; cand[j] = cand[j - 1]; cand[j - 1] = x;
    }
  for (uint32_t i = 0; i < nc; i++) {
    c->visited[cand[i]] = 1;
    c->order[depth] = cand[i];
    if (cycle_dfs(c, cand[i], depth + 1)) return true;
    c->visited[cand[i]] = 0;
  }
  return false;
}

/* Undirected decomposition: `want` edge-disjoint Hamiltonian cycles of a
 * symmetric adjacency, each cycle chosen so that the rest can still be
 * completed (backtracking over the first cycles). */
typedef struct {
  uint32_t n, want, found;
  uint8_t *adj;     /* symmetric; cycles found are removed */
  uint32_t *cycles; /* want * n vertex orders */
  uint64_t budget;
  GRand *rng;
} undirected_search;

static void set_cycle_edges(uint8_t *adj, uint32_t n, const uint32_t *order, uint8_t val) {
  for (uint32_t i = 0; i < n; i++) {
    uint32_t v = order[i], w = order[(i + 1) % n];
    adj[(size_t)v * n + w] = adj[(size_t)w * n + v] = val;
  }
}

static bool undirected_level(undirected_search *u);

static bool undirected_accept(cycle_search *c) {
  undirected_search *u = c->ctx;
  uint32_t n = u->n;
  if (n > 2 && c->order[1] > c->order[n - 1]) return false; /* the same cycle reversed */
  memcpy(u->cycles + (size_t)u->found * n, c->order, n * sizeof(uint32_t));
  set_cycle_edges(u->adj, n, c->order, 0);
  u->found++;
  if (u->found == u->want || undirected_level(u)) return true;
  u->found--;
  set_cycle_edges(u->adj, n, u->cycles + (size_t)u->found * n, 1);
  return false;
}

static bool undirected_level(undirected_search *u) {
  cycle_search c = {u->n, u->adj, g_new0(uint8_t, u->n), g_new(uint32_t, u->n), &u->budget,
                    undirected_accept, u, u->rng};
  c.visited[0] = 1;
  c.order[0] = 0;
  bool ok = cycle_dfs(&c, 0, 1);
  g_free(c.visited);
  g_free(c.order);
  return ok;
}

uint32_t ham_sparse(uint32_t n, const uint8_t *adj, uint32_t max_cycles, ham_decomp *out) {
  memset(out, 0, sizeof *out);
  out->n = n;
  if (n < 2) return 0;
  uint64_t budget = 0;
  cycle_search c = {n, g_memdup2(adj, (size_t)n * n), g_new0(uint8_t, n), g_new(uint32_t, n),
                    &budget, NULL, NULL, NULL};
  out->succ = g_new(uint32_t, (size_t)n * (max_cycles ? max_cycles : 1));
  /* Links in both directions (a torus): an undirected decomposition taken
   * in both directions reaches the bound, one cycle per out-link of a GPU
   * (Kotzig: C_m x C_n has 2 Hamiltonian cycles; Foregger: 3 for 3-D). */
  bool symmetric = n > 2;
  for (size_t i = 0; i < (size_t)n * n && symmetric; i++)
    symmetric = adj[i] == adj[(i % n) * n + i / n];
  for (uint32_t want = symmetric ? max_cycles / 2 : 0; want > 0 && !out->n_cycles; want--) {
    /* restarts with seeded tie-breaking: one unlucky first cycle can leave
     * a remainder with no Hamiltonian cycle, and depth-first search alone
     * spends its whole budget under it */
    bool found = false;
    undirected_search u = {n, want, 0, c.adj, g_new(uint32_t, (size_t)want * n), 0, NULL};
    for (uint32_t attempt = 0; attempt < 64 && !found; attempt++) {
      u.budget = 100000;
      u.found = 0;
      u.rng = attempt ? g_rand_new_with_seed(attempt) : NULL;
      found = undirected_level(&u);
      if (u.rng) g_rand_free(u.rng);
    }
    if (found) {
      for (uint32_t k = 0; k < want; k++) {
        const uint32_t *ord = u.cycles + (size_t)k * n;
        uint32_t *fw = out->succ + (size_t)(2 * k) * n, *bw = fw + n;
        for (uint32_t i = 0; i < n; i++) {
          fw[ord[i]] = ord[(i + 1) % n];
          bw[ord[(i + 1) % n]] = ord[i];
        }
      }
      out->n_cycles = 2 * want;
    }
    g_free(u.cycles);
  }
  while (out->n_cycles < max_cycles) {
    memset(c.visited, 0, n);
    c.visited[0] = 1;
    c.order[0] = 0;
    budget = 100000;
    if (!cycle_dfs(&c, 0, 1)) break;
    uint32_t *s = out->succ + (size_t)out->n_cycles * n;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t v = c.order[i], w = c.order[(i + 1) % n];
      s[v] = w;
      c.adj[(size_t)v * n + w] = 0;
    }
    out->n_cycles++;
  }
  g_free(c.adj); g_free(c.visited); g_free(c.order);
  return out->n_cycles;
}

uint32_t ham_node_chain(uint32_t m, uint32_t u, ham_decomp *out) {
  memset(out, 0, sizeof *out);
  uint32_t n = m * u;
  out->n = n;
  if (m < 2 || u < 1) return 0;
  ham_decomp big;
  uint32_t k = ham_complete(m + 1, &big);
  out->n_cycles = k;
  out->succ = g_new(uint32_t, (size_t)k * n);
  const uint32_t hub = m;
  for (uint32_t j = 0; j < k; j++) {
    const uint32_t *nx = big.succ + (size_t)j * (m + 1);
    uint32_t s = nx[hub], e = s;
    while (nx[e] != hub) e = nx[e];
    uint32_t *sc = out->succ + (size_t)j * n;
    for (uint32_t a = 0; a < u; a++) {
      for (uint32_t v = s; v != e; v = nx[v]) sc[a * m + v] = a * m + nx[v];
      sc[a * m + e] = ((a + 1) % u) * m + s;  /* over the NIC to the next node */
    }
  }
  ham_clear(&big);
  return k;
}
