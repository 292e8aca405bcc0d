/* hamilton: decompositions of K_n* are complete and verified. */
#include "sched/hamilton.h"
#include "testutil.h"

static void t_full_decompositions(void) {
  static const uint32_t ns[] = {2, 3, 5, 7, 8, 9, 10, 12, 16, 32, 64, 66, 72};
  for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) {
    ham_decomp d;
    uint32_t k = ham_complete(ns[i], &d);
    CU_ASSERT_EQUAL(k, ns[i] - 1);
    g_autoptr(GError) err = NULL;
    CU_ASSERT_TRUE(ham_verify(&d, NULL, &err));
    if (err) fprintf(stderr, "n=%u: %s\n", ns[i], err->message);
    ham_clear(&d);
  }
}

/* Tillson: none for 4 and 6; the largest edge-disjoint sets are 2 and 4. */
static void t_four_and_six(void) {
  ham_decomp d;
  CU_ASSERT_EQUAL(ham_complete(4, &d), 2);
  CU_ASSERT_TRUE(ham_verify(&d, NULL, NULL));
  ham_clear(&d);
  CU_ASSERT_EQUAL(ham_complete(6, &d), 4);
  CU_ASSERT_TRUE(ham_verify(&d, NULL, NULL));
  ham_clear(&d);
}

/* Every ordered pair is used exactly once by a full decomposition. */
static void t_every_edge_once(void) {
  ham_decomp d;
  uint32_t n = 8;
  ham_complete(n, &d);
  uint32_t count[64] = {0};
  for (uint32_t k = 0; k < d.n_cycles; k++)
    for (uint32_t v = 0; v < n; v++) count[v * n + d.succ[k * n + v]]++;
  for (uint32_t u = 0; u < n; u++)
    for (uint32_t v = 0; v < n; v++) CU_ASSERT_EQUAL(count[u * n + v], u == v ? 0 : 1);
  ham_clear(&d);
}

/* The verifier catches what is wrong. */
static void t_verify_rejects(void) {
  ham_decomp d;
  ham_complete(5, &d);
  /* a short cycle: 0 -> 1 -> 0 */
  uint32_t saved = d.succ[1];
  d.succ[0 * 5 + 0] = 1;
  d.succ[0 * 5 + 1] = 0;
  g_autoptr(GError) e1 = NULL;
  CU_ASSERT_FALSE(ham_verify(&d, NULL, &e1));
  CU_ASSERT_PTR_NOT_NULL(e1);
  ham_clear(&d);
  (void)saved;
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
  static const test_case cases[] = {TEST(t_full_decompositions), TEST(t_four_and_six),
                                    TEST(t_every_edge_once), TEST(t_verify_rejects),
                                    TEST(t_sparse_torus), {NULL, NULL}};
  return test_run("hamilton", cases);
}
