/* hamilton: Walecki cycles, an explicit rainbow-path splice for even n,
 * verification, and the search over direct links of other topologies. */
#include "hamilton.h"

#include <string.h>

#include "jsonio.h"

void ham_clear(ham_decomp *d) {
  g_free(d->succ);
  memset(d, 0, sizeof *d);
}

/* Walecki's decomposition of K_n, n = 2q+1 odd (Lucas, "Récréations
 * mathématiques" II, 1892): vertex 2q is the hub h; the zigzag path
 * 0, 1, 2q-1, 2, 2q-2, ..., q over Z_2q and its q rotations give q undirected
 * Hamiltonian cycles.  Cycle 2i runs h, i, i+1, i-1, i+2, ..., i+q, h and
 * cycle 2i+1 is its reverse, which is the rotation by i+q; so, with
 * F_c = h, c, c+1, c-1, ..., c+q, h for c in Z_2q, cycle 2i is F_i and cycle
 * 2i+1 is F_{i+q}.  Cycle k's successors go to succ[k*stride ...]. */
static void walecki(uint32_t n, uint32_t *succ, size_t stride) {
  uint32_t m = (n - 1) / 2, z = 2 * m, hub = z;
  g_autofree uint32_t *path = g_new(uint32_t, z);
  path[0] = 0;
  for (uint32_t j = 1; j <= m; j++) {
    path[2 * j - 1] = j % z;
    if (2 * j < z) path[2 * j] = (z - j) % z;
  }
  for (uint32_t i = 0; i < m; i++) {
    uint32_t *fw = succ + 2 * i * stride, *bw = fw + stride;
    uint32_t prev = hub;
    for (uint32_t p = 0; p < z; p++) {
      uint32_t v = path[p] + i;
      if (v >= z) v -= z;
      fw[prev] = v;
      bw[v] = prev;
      prev = v;
    }
    fw[prev] = hub;
    bw[hub] = prev;
  }
}

/* Index (in walecki()'s order) of the cycle of K_{2q+1}* that holds the arc
 * a -> b.  F_c, walked from c, takes steps +1, -2, +3, -4, ..., +(2q-1):
 * the step +(2j-1) leaves c-j+1 and the step -2j leaves c+j.  So an arc
 * a -> b of Z_2q with d = b - a (mod 2q) lies on F_c for
 *   c = a + (d-1)/2       (d odd),
 *   c = a + d/2 + q       (d even),
 * and h -> b lies on F_b, a -> h on F_{a+q}. */
static uint32_t walecki_cycle_of(uint32_t q, uint32_t a, uint32_t b) {
  uint32_t z = 2 * q, h = z, c;
  if (a == h) c = b;
  else if (b == h) c = (a + q) % z;
  else {
    uint32_t d = (b + z - a) % z;
    c = (a + d / 2 + (d % 2 ? 0 : q)) % z;
  }
  return c < q ? 2 * c : 2 * (c - q) + 1;
}

/* Vertex i (0 <= i < 2q) of the "ladder", a Hamiltonian cycle of Z_2q
 * (vertex h left out) whose 2q arcs lie on 2q different Walecki cycles:
 *  - q odd:  0, 5, 4, 9, 8, ..., i.e. 4k, 4k+5: steps +5 (on F_{v+2}) and
 *    -1 (on F_{v+q-1}).  4k+2 runs over all even c and 4k+4+q over all odd
 *    ones as k runs over 0..q-1 (4 generates the even residues, q odd).
 *  - q even: 0, 3, 2, 5, 4, ..., i.e. 2k, 2k+3: steps +3 (F_{v+1}, the odd
 *    c) and -1 (F_{2k+2+q}, the even c).
 * (Found by this project's own search for rainbow paths; the proof is the
 * arithmetic above.) */
static uint32_t ladder(uint32_t q, uint32_t i) {
  uint64_t k = i / 2, z = 2 * (uint64_t)q;
  if (q % 2) return (uint32_t)((4 * k + (i % 2 ? 5 : 0)) % z);
  return (uint32_t)((2 * k + (i % 2 ? 3 : 0)) % z);
}

/* A "rainbow" Hamiltonian path of K_{2q+1}* (q >= 3, h = 2q): 2q+1 vertices
 * whose 2q arcs lie on the 2q Walecki cycles, one arc on each.  The ladder
 * is a rainbow cycle of Z_2q; h is let in by re-linking a few vertices of
 * it so that the Walecki cycles of the arcs taken out are exactly those of
 * the arcs put in (q+c below means the arc lies on F_{q+c}):
 *  - q odd >= 5 (ladder vertices v_q = 3, v_{q+1} = 2, v_{q+2} = 7,
 *    v_{q+3} = 6):  v_{q+3} ... v_{2q-1}, 0, 5, 7, 2, h, 4, v_3 ... v_{q-1}, 3.
 *    Out: 5->4 (q+4), 3->2 (q+2), 2->7 (4), 7->6 (q+6).
 *    In:  5->7 (q+6), 7->2 (q+4), 2->h (q+2), h->4 (4).
 *  - q even >= 6 (v_{2q-1} = 1):  6, 3, v_8 ... v_{2q-1}, 2, 5, 0, h, 7, 9, 4.
 *    Out: 1->0 (q), 0->3 (1), 3->2 (q+2), 5->4 (q+4), 4->7 (5), 7->6 (q+6),
 *         6->9 (7), 9->8 (q+8).
 *    In:  1->2 (1), 3->8 (5), 5->0 (q+2), 0->h (q), h->7 (7), 7->9 (q+8),
 *         9->4 (q+6), 6->3 (q+4).
 *  - q = 3 and q = 4 are too small for these (the vertices above coincide);
 *    their paths come from an exhaustive search.
 * For q = 1, 2 (K_4*, K_6*) no rainbow path exists: otherwise Tillson's
 * exceptions would have decompositions. */
static bool rainbow_path(uint32_t q, uint32_t *p) {
  uint32_t h = 2 * q, len = 0;
  if (q == 3) {
    static const uint32_t p3[] = {6, 5, 3, 4, 0, 1, 2};
    memcpy(p, p3, sizeof p3);
    return true;
  }
  if (q == 4) {
    static const uint32_t p4[] = {8, 0, 2, 3, 4, 6, 7, 1, 5};
    memcpy(p, p4, sizeof p4);
    return true;
  }
  if (q < 3) return false;
  if (q % 2) {
    for (uint32_t i = q + 3; i < 2 * q; i++) p[len++] = ladder(q, i);
    const uint32_t mid[] = {0, 5, 7, 2, h, 4};
    for (size_t i = 0; i < G_N_ELEMENTS(mid); i++) p[len++] = mid[i];
    for (uint32_t i = 3; i < q; i++) p[len++] = ladder(q, i);
    p[len++] = 3;
  } else {
    p[len++] = 6;
    p[len++] = 3;
    for (uint32_t i = 8; i < 2 * q; i++) p[len++] = ladder(q, i);
    const uint32_t tail[] = {2, 5, 0, h, 7, 9, 4};
    for (size_t i = 0; i < G_N_ELEMENTS(tail); i++) p[len++] = tail[i];
  }
  g_assert(len == 2 * q + 1);
  return true;
}

/* K_4*, K_6*: one edge per Walecki cycle, tails all distinct and heads all
 * distinct, so splicing the new vertex in at them keeps every cycle
 * Hamiltonian and the cycles edge-disjoint: n-2 cycles, the most there can
 * be, as n-1 would be a decomposition.  Forward cycle i holds i -> i+1 (its
 * first two path vertices); backward cycle i holds q+i -> q+i+1 (its last
 * two, reversed); tails and heads cover Z_2q once each.  (m = 2q+1
 * vertices, hub 2q.) */
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
    walecki(n, out->succ, n);
    return out->n_cycles;
  }
  /* n even: Walecki's K_{n-1}* (n-2 cycles, hub h = n-2) and the new vertex
   * z = n-1.  Each cycle gives up its arc a -> b on the rainbow path for
   * a -> z -> b, and the rainbow path closed through z is the last cycle:
   * every arc of K_{n-1}* stays on exactly one cycle (the path's arcs move
   * to the last one), and z -> a and a -> z are used once for every a. */
  uint32_t q = (n - 2) / 2, colours = n - 2, z = n - 1;
  g_autofree uint32_t *path = g_new(uint32_t, n - 1);
  g_autofree uint32_t *pick = g_new(uint32_t, colours);
  bool full = rainbow_path(q, path);
  out->n_cycles = full ? n - 1 : colours;
  out->succ = g_new(uint32_t, (size_t)n * out->n_cycles);
  /* K_{n-1}*'s cycles in rows of n, column z left for the splice */
  walecki(n - 1, out->succ, n);
  if (full) {
    g_autofree uint8_t *taken = g_new0(uint8_t, colours);
    for (uint32_t i = 0; i < colours; i++) {
      uint32_t k = walecki_cycle_of(q, path[i], path[i + 1]);
      /* both follow from the arithmetic above; a miss is a bug here */
      g_assert(!taken[k] && out->succ[(size_t)k * n + path[i]] == path[i + 1]);
      taken[k] = 1;
      pick[k] = path[i];
    }
    uint32_t *last = out->succ + (size_t)colours * n;
    for (uint32_t i = 0; i < colours; i++) last[path[i]] = path[i + 1];
    last[path[colours]] = z;
    last[z] = path[0];
  } else {
    walecki_transversal(n - 1, pick);
  }
  for (uint32_t k = 0; k < colours; k++) { /* splice z in after pick[k] */
    uint32_t *cyc = out->succ + (size_t)k * n;
    cyc[z] = cyc[pick[k]];
    cyc[pick[k]] = z;
  }
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
