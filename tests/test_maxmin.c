/* maxmin: progressive filling against hand-computed allocations. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "maxmin.h"
#include "testutil.h"

static void solve(size_t nc, const double *cap, size_t nf, const maxmin_flow *f, double *rate) {
  maxmin_work *w = maxmin_work_new();
  maxmin_solve(w, nc, cap, nf, f, rate);
  maxmin_work_free(w);
}

static void t_equal_split(void) {
  double cap[] = {90};
  uint32_t c0[] = {0};
  maxmin_flow f[] = {{c0, 1, 0, NULL}, {c0, 1, 0, NULL}, {c0, 1, 0, NULL}};
  double r[3];
  solve(1, cap, 3, f, r);
  for (int i = 0; i < 3; i++) CU_ASSERT_DOUBLE_EQUAL(r[i], 30, 1e-9);
}

/* Flow A crosses channels 0 (cap 10) and 1 (cap 100); flows B, C cross
 * only channel 1.  A is held to 10 by channel 0, so B and C share the rest
 * of channel 1: 45 each. */
static void t_limited_elsewhere_leaves_share(void) {
  double cap[] = {10, 100};
  uint32_t a[] = {0, 1}, bc[] = {1};
  maxmin_flow f[] = {{a, 2, 0, NULL}, {bc, 1, 0, NULL}, {bc, 1, 0, NULL}};
  double r[3];
  solve(2, cap, 3, f, r);
  CU_ASSERT_DOUBLE_EQUAL(r[0], 10, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r[1], 45, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r[2], 45, 1e-9);
}

/* Per-flow caps: on a 100 channel, a flow capped at 20 takes 20 and the
 * other two share 80; a cap above the fair share changes nothing. */
static void t_per_flow_caps(void) {
  double cap[] = {100};
  uint32_t c0[] = {0};
  maxmin_flow f[] = {{c0, 1, 20, NULL}, {c0, 1, 0, NULL}, {c0, 1, 1000, NULL}};
  double r[3];
  solve(1, cap, 3, f, r);
  CU_ASSERT_DOUBLE_EQUAL(r[0], 20, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r[1], 40, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r[2], 40, 1e-9);
  /* a lone flow below its channel is held by its cap */
  maxmin_flow one[] = {{c0, 1, 70, NULL}};
  solve(1, cap, 1, one, r);
  CU_ASSERT_DOUBLE_EQUAL(r[0], 70, 1e-9);
}

/* The classic parking-lot: a long flow over channels 0,1,2 (cap 12 each)
 * and one short flow per channel.  Every channel splits 6/6. Then with
 * channel 1 at cap 6: the long flow gets 3, short flow on 1 gets 3, short
 * flows on 0 and 2 get 9. */
static void t_parking_lot(void) {
  double cap[] = {12, 12, 12};
  uint32_t lng[] = {0, 1, 2}, s0[] = {0}, s1[] = {1}, s2[] = {2};
  maxmin_flow f[] = {{lng, 3, 0, NULL}, {s0, 1, 0, NULL}, {s1, 1, 0, NULL}, {s2, 1, 0, NULL}};
  double r[4];
  solve(3, cap, 4, f, r);
  for (int i = 0; i < 4; i++) CU_ASSERT_DOUBLE_EQUAL(r[i], 6, 1e-9);
  cap[1] = 6;
  solve(3, cap, 4, f, r);
  CU_ASSERT_DOUBLE_EQUAL(r[0], 3, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r[1], 9, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r[2], 3, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r[3], 9, 1e-9);
}

/* Properties on random instances: no channel over capacity, no flow over
 * its cap, and every flow is bottlenecked (max-min optimality): it is at
 * its cap or crosses a saturated channel on which no flow is faster. */
static void t_random_instances_are_max_min_fair(void) {
  GRand *g = g_rand_new_with_seed(7);
  maxmin_work *w = maxmin_work_new();
  for (int iter = 0; iter < 300; iter++) {
    size_t nc = (size_t)g_rand_int_range(g, 1, 8), nf = (size_t)g_rand_int_range(g, 1, 20);
    double cap[8];
    for (size_t c = 0; c < nc; c++) cap[c] = g_rand_double_range(g, 1, 100);
    uint32_t route[20][3];
    maxmin_flow f[20];
    for (size_t i = 0; i < nf; i++) {
      uint32_t h = (uint32_t)g_rand_int_range(g, 1, (gint32)(nc < 3 ? nc : 3) + 1);
      for (uint32_t k = 0; k < h; k++) route[i][k] = (uint32_t)((i + k * 3) % nc);
      if (h > 1 && route[i][0] == route[i][1]) h = 1;
      if (h > 2 && (route[i][2] == route[i][0] || route[i][2] == route[i][1])) h = 2;
      f[i] = (maxmin_flow){route[i], h, g_rand_boolean(g) ? g_rand_double_range(g, 1, 50) : 0, NULL};
    }
    double r[20], load[8] = {0};
    maxmin_solve(w, nc, cap, nf, f, r);
    for (size_t i = 0; i < nf; i++)
      for (uint32_t k = 0; k < f[i].n_chan; k++) load[f[i].chan[k]] += r[i];
    for (size_t c = 0; c < nc; c++) CU_ASSERT(load[c] <= cap[c] * (1 + 1e-9));
    for (size_t i = 0; i < nf; i++) {
      CU_ASSERT(r[i] > 0);
      if (f[i].cap > 0) CU_ASSERT(r[i] <= f[i].cap * (1 + 1e-9));
      bool bottleneck = f[i].cap > 0 && fabs(r[i] - f[i].cap) < 1e-9 * f[i].cap;
      for (uint32_t k = 0; k < f[i].n_chan && !bottleneck; k++) {
        uint32_t c = f[i].chan[k];
        if (load[c] < cap[c] * (1 - 1e-9)) continue;
        bool fastest = true;
        for (size_t j = 0; j < nf; j++)
          for (uint32_t q = 0; q < f[j].n_chan; q++)
            if (f[j].chan[q] == c && r[j] > r[i] * (1 + 1e-9)) fastest = false;
        bottleneck = fastest;
      }
      CU_ASSERT(bottleneck);
    }
  }
  maxmin_work_free(w);
  g_rand_free(g);
}

/* The heap finds the same bottlenecks as the scan, in the same order:
 * random instances with many equal capacities (ties between channels),
 * bundles of several flows per channel and caps, solved both ways, give
 * the same rates bit for bit. */
static void t_heap_equals_scan(void) {
  GRand *rng = g_rand_new_with_seed(5);
  maxmin_work *heap = maxmin_work_new(), *scan = maxmin_work_new();
  maxmin_work_heap_from(heap, 0);
  maxmin_work_heap_from(scan, SIZE_MAX);
  int differ = 0;
  for (int iter = 0; iter < 500; iter++) {
    enum { MAXC = 40, MAXF = 60, HOPS = 4 };
    size_t nc = (size_t)g_rand_int_range(rng, 1, MAXC), nf = (size_t)g_rand_int_range(rng, 1, MAXF);
    double cap[MAXC];
    bool ties = g_rand_boolean(rng);
    for (size_t c = 0; c < nc; c++)
      cap[c] = ties ? 10 * g_rand_int_range(rng, 1, 4) : g_rand_double_range(rng, 1, 100);
    static uint32_t chans[MAXF][HOPS], mult[MAXF][HOPS];
    maxmin_flow f[MAXF];
    for (size_t i = 0; i < nf; i++) {
      uint32_t h = (uint32_t)g_rand_int_range(rng, 0, HOPS + 1);
      for (uint32_t k = 0; k < h; k++) {
        chans[i][k] = (uint32_t)g_rand_int_range(rng, 0, (gint32)nc);
        for (uint32_t j = 0; j < k; j++)
          if (chans[i][j] == chans[i][k]) chans[i][k] = (chans[i][k] + 1) % (uint32_t)nc;
        mult[i][k] = (uint32_t)g_rand_int_range(rng, 1, 4);
      }
      double c = g_rand_int_range(rng, 0, 3) == 0 ? 5 * g_rand_int_range(rng, 1, 6) : 0;
      f[i] = (maxmin_flow){chans[i], h, c, g_rand_boolean(rng) ? mult[i] : NULL};
      if (h == 0 && c == 0) f[i].cap = 7;
    }
    double a[MAXF], b[MAXF];
    maxmin_solve(heap, nc, cap, nf, f, a);
    maxmin_solve(scan, nc, cap, nf, f, b);
    differ += memcmp(a, b, sizeof(double) * nf) != 0;
  }
  CU_ASSERT_EQUAL(differ, 0);
  maxmin_work_free(heap);
  maxmin_work_free(scan);
  g_rand_free(rng);
}

int main(void) {
  static const test_case cases[] = {TEST(t_equal_split), TEST(t_limited_elsewhere_leaves_share),
                                    TEST(t_per_flow_caps), TEST(t_parking_lot),
                                    TEST(t_random_instances_are_max_min_fair),
                                    TEST(t_heap_equals_scan), {NULL, NULL}};
  return test_run("maxmin", cases);
}
