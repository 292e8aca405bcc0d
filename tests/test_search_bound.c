/* search_bound: the bandwidth a GPU can receive its TP group's data at, the forward's
 * TP waits as search_bound.h gives them, and the step bound (with those
 * waits a large share of it) below the step the simulation gives. */
#include <math.h>
#include <stdlib.h>

#include "layer.h"
#include "layers.h"
#include "search.h"
#include "search_bound.h"
#include "sim.h"
#include "testutil.h"

static scenario *load(const char *tp, const char *sp, const char *dp, const char *placement,
                      const char *mbs) {
  char *set[] = {"generator.gpus_per_node=4", NULL};
  scenario_overrides ov = {.topology = "h100x8x2", .sched = "zigzag", .sp = sp, .seq = "8K",
                           .pass = "fwdbwd", .model = "tests/data/search-model.json",
                           .scope = "model", .tp = tp, .dp = dp, .placement = placement,
                           .micro_batches = mbs, .set = set};
  g_autoptr(GError) err = NULL;
  scenario *sc = scenario_load(NULL, &ov, &err);
  if (!sc) fprintf(stderr, "%s\n", err->message);
  return sc;
}

static const scenario_point *shown(const scenario *sc) {
  for (guint i = 0; i < sc->points->len; i++)
    if (!g_array_index(sc->points, scenario_point, i).hidden)
      return &g_array_index(sc->points, scenario_point, i);
  return NULL;
}

/* the capacity of the last channel of the route src -> dst */
static double last_cap(const topology *t, uint32_t src, uint32_t dst) {
  uint32_t r[TOPO_MAX_HOPS], n = topo_route_fill(t, src, dst, r);
  return topo_chan(t, r[n - 1])->cap_Bps;
}

/* A TP group inside a node: its GPUs receive over their ingress ports;
 * TP across the two nodes (SP innermost, a node's 4 GPUs: TP 4's group
 * holds two GPUs of each node, TP 2's one): over port and NIC, or over the
 * NIC alone; TP 1: nothing. */
static void test_tp_ingress(void) {
  static const struct {
    const char *tp, *sp, *placement;
    int port, nic;
  } cases[] = {{"4", "2", "tp,sp,dp", 1, 0}, {"4", "2", "sp,tp,dp", 1, 1},
               {"2", "4", "sp,tp,dp", 0, 1}, {"1", "8", "tp,sp,dp", 0, 0}};
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    scenario *sc = load(cases[k].tp, cases[k].sp, "1", cases[k].placement, NULL);
    CU_ASSERT_FATAL(sc != NULL);
    const topology *t = sc->topo;
    double port = last_cap(t, 1, 0), nic = last_cap(t, 4, 0);
    CU_ASSERT(port > nic && nic > 0);
    double want = cases[k].port * port + cases[k].nic * nic;
    double got = search_tp_ingress_Bps(&shown(sc)->w, t);
    if (fabs(got - want) > 1e-6 * port)
      fprintf(stderr, "TP %s SP %s %s: ingress %g, expected %g\n", cases[k].tp, cases[k].sp,
              cases[k].placement, got, want);
    CU_ASSERT_DOUBLE_EQUAL(got, want, 1e-6 * port);
    scenario_free(sc);
  }
}

/* Four collectives a layer, each TP - 1 shards of the SP rank's tokens x
 * hidden over the ingress; none at TP 1, none with several micro-batches. */
static void test_tp_wait(void) {
  scenario *sc = load("4", "2", "1", NULL, NULL);
  CU_ASSERT_FATAL(sc != NULL);
  const workload *w = &shown(sc)->w;
  layer_dims d = layer_dims_of(w);
  double shard = d.tokens / 4 * d.hidden * d.elem_bytes;
  double want = layers_total(w) * 4 * 3 * shard / 1e11;
  CU_ASSERT(want > 0);
  CU_ASSERT_DOUBLE_EQUAL(search_tp_wait_s(w, 1e11), want, 1e-9 * want);
  workload one = *w;
  one.tp = 1;
  CU_ASSERT_EQUAL(search_tp_wait_s(&one, 1e11), 0);
  workload mbs = *w;
  mbs.micro_batches = 2;
  CU_ASSERT_EQUAL(search_tp_wait_s(&mbs, 1e11), 0);
  CU_ASSERT_EQUAL(search_tp_wait_s(w, 0), 0);
  scenario_free(sc);
}

/* The step bound below the simulated step where the TP waits are a large
 * share of it: TP 4 inside a node, TP 4 across the two nodes (SP
 * innermost: port and NIC), TP 2 across them (the NIC alone). */
static void test_bound_below_step(void) {
  static const struct {
    const char *tp, *sp, *placement;
  } cases[] = {{"4", "2", "tp,sp,dp"}, {"4", "2", "sp,tp,dp"}, {"2", "4", "sp,tp,dp"}};
  for (size_t k = 0; k < G_N_ELEMENTS(cases); k++) {
    scenario *sc = load(cases[k].tp, cases[k].sp, "1", cases[k].placement, NULL);
    CU_ASSERT_FATAL(sc != NULL);
    const scenario_point *pt = shown(sc);
    double bound = search_bound_s(pt->sched, &pt->w, sc->topo);
    double waits = search_tp_wait_s(&pt->w, search_tp_ingress_Bps(&pt->w, sc->topo));
    exec_opts eo = {0};
    sim_result *r = sim_run_step_repeating(sc->topo, pt, &eo);
    if (getenv("TEST_VERBOSE") || !(bound <= r->r->step_s) || !(waits > 0.03 * bound))
      fprintf(stderr, "TP %s SP %s %s: bound %g (TP waits %g) step %g\n", cases[k].tp,
              cases[k].sp, cases[k].placement, bound, waits, r->r->step_s);
    CU_ASSERT(bound <= r->r->step_s);
    CU_ASSERT(waits > 0.03 * bound);
    sim_result_free(r);
    scenario_free(sc);
  }
}

int main(void) {
  static const test_case cases[] = {TEST(test_tp_ingress), TEST(test_tp_wait),
                                    TEST(test_bound_below_step), {NULL, NULL}};
  return test_run("search_bound", cases);
}
