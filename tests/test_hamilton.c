/* hamilton: decompositions of K_n* and node chains are complete and verified. */
#include "sched/hamilton.h"
#include "testutil.h"

/* An independent check of a decomposition (not ham_verify, which the
 * tests below also run): each cycle is a closed walk through all n
 * vertices, and no arc is used twice.  Returns the number of arcs used, or
 * 0 on a failure.  used: n*n scratch, seen: n scratch. */
static uint64_t count_arcs(const ham_decomp *d, uint8_t *used, uint32_t *seen) {
  uint32_t n = d->n;
  memset(used, 0, (size_t)n * n);
  memset(seen, 0, n * sizeof *seen);
  uint64_t arcs = 0;
  for (uint32_t k = 0; k < d->n_cycles; k++) {
    const uint32_t *s = d->succ + (size_t)k * n;
    uint32_t v = 0;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t w = s[v];
      if (w >= n || w == v || seen[v] == k + 1 || used[(size_t)v * n + w]) return 0;
      seen[v] = k + 1;
      used[(size_t)v * n + w] = 1;
      arcs++;
      v = w;
    }
    if (v != 0) return 0; /* n steps without closing: not one cycle */
  }
  return arcs;
}

/* Every n from 2 to 1,024: n-1 edge-disjoint Hamiltonian cycles, so every
 * arc of K_n* exactly once (n(n-1) distinct arcs, no loops); K_4* and K_6*
 * have no decomposition (Tillson 1980) and get 2 and 4 cycles, the most
 * there can be (one more would be a decomposition). */
static uint32_t check_n(uint32_t n, uint8_t *used, uint32_t *seen, uint32_t bad) {
  ham_decomp d;
  uint32_t k = ham_complete(n, &d);
  uint32_t want = n == 4 ? 2 : n == 6 ? 4 : n - 1;
  g_autoptr(GError) err = NULL;
  bool ok = k == want && d.n_cycles == k && count_arcs(&d, used, seen) == (uint64_t)k * n &&
            ham_verify(&d, NULL, &err);
  if (!ok && bad++ < 5)
    fprintf(stderr, "n=%u: %u cycles (want %u)%s%s\n", n, k, want, err ? ": " : "",
            err ? err->message : "");
  ham_clear(&d);
  return bad;
}

/* Beyond 1,024 to HAM_MAX_N, a sample: odd and even n, a prime, powers of
 * two and their neighbours, the largest (every n would be O(n^3) in all;
 * n = 8,192 alone is two walks of 67M arcs). */
static void t_sample_beyond_1024(void) {
  static const uint32_t ns[] = {1025, 1031, 1536, 2047, 2048, 4097, HAM_MAX_N};
  g_autofree uint8_t *used = g_new(uint8_t, (size_t)HAM_MAX_N * HAM_MAX_N);
  g_autofree uint32_t *seen = g_new(uint32_t, HAM_MAX_N);
  uint32_t bad = 0;
  for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) bad = check_n(ns[i], used, seen, bad);
  CU_ASSERT_EQUAL(bad, 0);
}

static void t_every_n_to_1024(void) {
  enum { N_MAX = 1024 };
  g_autofree uint8_t *used = g_new(uint8_t, (size_t)N_MAX * N_MAX);
  g_autofree uint32_t *seen = g_new(uint32_t, N_MAX);
  uint32_t bad = 0;
  for (uint32_t n = 2; n <= N_MAX; n++) bad = check_n(n, used, seen, bad);
  CU_ASSERT_EQUAL(bad, 0);
}

static void t_four_and_six(void) {
  ham_decomp d;
  CU_ASSERT_EQUAL(ham_complete(4, &d), 2);
  CU_ASSERT_TRUE(ham_verify(&d, NULL, NULL));
  ham_clear(&d);
  CU_ASSERT_EQUAL(ham_complete(6, &d), 4);
  CU_ASSERT_TRUE(ham_verify(&d, NULL, NULL));
  ham_clear(&d);
}

/* Node chains (m-K_m-m)^u: m cycles (m-1 where K_{m+1}* has no
 * decomposition: m = 3, 5), edge-disjoint and Hamiltonian; inside a node
 * every ordered GPU pair is used once (at most once for m = 3, 5); every
 * arc between nodes goes to the next node, leaves each node once per cycle,
 * and every GPU sends over its NIC on exactly one cycle (at most one). */
static void chain_ok(uint32_t m, uint32_t u) {
  ham_decomp d;
  uint32_t k = ham_node_chain(m, u, &d), n = m * u;
  bool full = m != 3 && m != 5;
  CU_ASSERT_EQUAL(k, full ? m : m - 1);
  g_autoptr(GError) err = NULL;
  CU_ASSERT_TRUE(ham_verify(&d, NULL, &err));
  if (err) fprintf(stderr, "m=%u u=%u: %s\n", m, u, err->message);
  g_autofree uint32_t *nic = g_new0(uint32_t, n);
  g_autofree uint32_t *inner = g_new0(uint32_t, (size_t)m * m * u);
  g_autofree uint32_t *leaves = g_new(uint32_t, u);
  uint32_t bad = 0;
  for (uint32_t j = 0; j < k; j++) {
    memset(leaves, 0, u * sizeof *leaves);
    for (uint32_t v = 0; v < n; v++) {
      uint32_t w = d.succ[(size_t)j * n + v], a = v / m, b = w / m;
      if (a == b) {
        inner[((size_t)a * m + v % m) * m + w % m]++;
      } else {
        bad += b != (a + 1) % u;
        nic[v]++;
        leaves[a]++;
      }
    }
    for (uint32_t a = 0; a < u; a++) bad += leaves[a] != 1;
  }
  for (uint32_t v = 0; v < n; v++) bad += full ? nic[v] != 1 : nic[v] > 1;
  for (uint32_t a = 0; a < u; a++)
    for (uint32_t i = 0; i < m; i++)
      for (uint32_t j = 0; j < m; j++) {
        uint32_t c = inner[((size_t)a * m + i) * m + j];
        bad += i == j ? c != 0 : full ? c != 1 : c > 1;
      }
  CU_ASSERT_EQUAL(bad, 0);
  if (bad) fprintf(stderr, "m=%u u=%u: %u chain properties broken\n", m, u, bad);
  ham_clear(&d);
}

static void t_node_chains(void) {
  for (uint32_t m = 2; m <= 40; m++)
    for (uint32_t u = 2; u <= 6; u++) chain_ok(m, u);
  static const uint32_t big[][2] = {{64, 2}, {72, 4}, {127, 3}, {128, 8}, {256, 4}};
  for (size_t i = 0; i < G_N_ELEMENTS(big); i++) chain_ok(big[i][0], big[i][1]);
}

/* The verifier catches what is wrong. */
static void t_verify_rejects(void) {
  ham_decomp d;
  ham_complete(5, &d);
  /* a short cycle: 0 -> 1 -> 0 */
  d.succ[0 * 5 + 0] = 1;
  d.succ[0 * 5 + 1] = 0;
  g_autoptr(GError) e1 = NULL;
  CU_ASSERT_FALSE(ham_verify(&d, NULL, &e1));
  CU_ASSERT_PTR_NOT_NULL(e1);
  ham_clear(&d);
  /* an edge used twice: copy cycle 0 into cycle 1 */
  ham_complete(5, &d);
  memcpy(d.succ + 5, d.succ, 5 * sizeof(uint32_t));
  g_autoptr(GError) e2 = NULL;
  CU_ASSERT_FALSE(ham_verify(&d, NULL, &e2));
  CU_ASSERT_PTR_NOT_NULL(e2 ? strstr(e2->message, "used twice") : NULL);
  ham_clear(&d);
  /* an edge that is not a link */
  ham_complete(3, &d);
  uint8_t adj[9] = {0, 1, 0, 0, 0, 1, 1, 0, 0}; /* only 0->1->2->0 */
  g_autoptr(GError) e3 = NULL;
  CU_ASSERT_FALSE(ham_verify(&d, adj, &e3));
  ham_clear(&d);
}

/* The independent check above catches what is wrong too: two cycles that
 * swap successors at one vertex are no longer cycles, and a cycle closed
 * early (0 -> s(0) -> 0) misses vertices. */
static void t_count_arcs_rejects(void) {
  uint8_t used[64];
  uint32_t seen[8];
  ham_decomp d;
  ham_complete(8, &d);
  CU_ASSERT_EQUAL(count_arcs(&d, used, seen), 56);
  uint32_t t = d.succ[3];
  d.succ[3] = d.succ[8 + 3];
  d.succ[8 + 3] = t;
  CU_ASSERT_EQUAL(count_arcs(&d, used, seen), 0);
  ham_clear(&d);
  ham_complete(8, &d);
  d.succ[d.succ[0]] = 0;
  CU_ASSERT_EQUAL(count_arcs(&d, used, seen), 0);
  ham_clear(&d);
}

/* Tori (links to both neighbours in every dimension): cycles use links
 * only, and as many are found as a GPU has out-links (2 per dimension), the
 * most there can be; 2-D sizes 4x4, 3x5, 8x8 and the 3-D 3x3x3 and 4x4x4
 * (a TPU v4 cube). */
static void t_sparse_torus(void) {
  static const uint32_t dims[][3] = {{4, 4, 1}, {3, 5, 1}, {8, 8, 1}, {3, 3, 3}, {4, 4, 4}};
  for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++) {
    const uint32_t *s = dims[c];
    uint32_t n = s[0] * s[1] * s[2], links = s[2] > 1 ? 6 : 4;
    uint8_t *adj = g_new0(uint8_t, (size_t)n * n);
    for (uint32_t v = 0; v < n; v++) {
      uint32_t p[3] = {v % s[0], v / s[0] % s[1], v / (s[0] * s[1])};
      for (int dim = 0; dim < 3; dim++)
        for (uint32_t step = 1; s[dim] > 1 && step < s[dim]; step += s[dim] - 2) {
          uint32_t q[3] = {p[0], p[1], p[2]};
          q[dim] = (q[dim] + step) % s[dim];
          adj[(size_t)v * n + q[0] + q[1] * s[0] + q[2] * s[0] * s[1]] = 1;
        }
    }
    ham_decomp d;
    uint32_t k = ham_sparse(n, adj, links, &d);
    CU_ASSERT_EQUAL(k, links);
    CU_ASSERT_TRUE(ham_verify(&d, adj, NULL));
    ham_clear(&d);
    g_free(adj);
  }
}

int main(void) {
  static const test_case cases[] = {TEST(t_every_n_to_1024), TEST(t_sample_beyond_1024), TEST(t_four_and_six),
                                    TEST(t_node_chains), TEST(t_verify_rejects),
                                    TEST(t_count_arcs_rejects), TEST(t_sparse_torus),
                                    {NULL, NULL}};
  return test_run("hamilton", cases);
}
