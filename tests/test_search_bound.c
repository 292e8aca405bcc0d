/* search_bound: the bandwidth a GPU can receive its TP group's data at, the forward's
 * TP waits as search_bound.h gives them, and the step bound (with those
 * waits a large share of it) below the step the simulation gives; the
 * bytes an attention plan keeps from its forward for its backward, and
 * the memory bound with them below the simulated peak. */
#include <math.h>
#include <stdlib.h>

#include "layer.h"
#include "layers.h"
#include "plan_buf.h"
#include "search.h"
#include "search_bound.h"
#include "sim.h"
#include "testutil.h"

static scenario *load_sched(const char *sched, const char *tp, const char *sp, const char *dp,
                            const char *placement, const char *mbs) {
  char *set[] = {"generator.gpus_per_node=4", NULL};
  /* a method of linear attention alone (LASP-2): every layer made linear */
  unsigned runs = sched_find(sched)->attention;
  bool linear = runs && !(runs & SCHED_RUNS(ATTN_SOFTMAX));
  scenario_overrides ov = {.topology = "h100x8x2", .sched = sched, .sp = sp, .seq = "8K",
                           .pass = "fwdbwd", .model = "tests/data/search-model.json",
                           .scope = "model", .tp = tp, .dp = dp, .placement = placement,
                           .micro_batches = mbs, .set = set,
                           .attention = linear ? "linear" : NULL};
  g_autoptr(GError) err = NULL;
  scenario *sc = scenario_load(NULL, &ov, &err);
  if (!sc) fprintf(stderr, "%s\n", err->message);
  return sc;
}

static scenario *load(const char *tp, const char *sp, const char *dp, const char *placement,
                      const char *mbs) {
  return load_sched("zigzag", tp, sp, dp, placement, mbs);
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

/* A plan of two GPUs whose buffers lie every way about the pass barrier:
 * only those a compute task of a GPU touches on both sides count, on that
 * GPU: one made and freed in the forward does not, nor one the backward
 * alone uses, nor one only a group touches after the barrier. */
static void test_kept_bytes(void) {
  plan *p = plan_new(2, false);
  plan_op op = {.kind = OP_COPY, .bytes = 1e6};
  uint32_t all = plan_compute(p, PLAN_ALL, 0, &op); /* lockstep: first on both */
  uint32_t f0 = plan_compute(p, 0, 0, &op), f1 = plan_compute(p, 1, 0, &op);
  uint32_t kept0 = plan_buf_new(p, 0, 1, "out"); /* forward to backward: counts */
  uint32_t fwd0 = plan_buf_new(p, 0, 10, "tmp"); /* freed before the barrier */
  uint32_t bwd1 = plan_buf_new(p, 1, 100, "dout"); /* the backward's alone */
  uint32_t sent1 = plan_buf_new(p, 1, 1000, "next_k"); /* a group's after it */
  uint32_t q = plan_buf_input(p, PLAN_ALL, 10000, "q"); /* GPU 1's read after it */
  uint32_t late = plan_buf_new(p, 0, 100000, "lse"); /* written as f0 ends */
  plan_buf_writes(p, f0, kept0);
  plan_buf_writes(p, f0, fwd0);
  plan_buf_writes_late(p, f0, late);
  plan_buf_writes(p, f1, sent1);
  uint32_t g0 = plan_compute(p, 0, 1, &op);
  plan_buf_reads(p, g0, fwd0);
  plan_buf_reads(p, all, q);
  plan_barrier(p, 2, -1);
  uint32_t b0 = plan_compute(p, 0, 3, &op), b1 = plan_compute(p, 1, 3, &op);
  plan_buf_reads(p, b0, kept0);
  plan_buf_reads_early(p, b0, late);
  plan_buf_writes(p, b1, bwd1);
  plan_buf_reads(p, b1, q);
  uint32_t c = plan_comm(p, 4, COMM_P2P);
  plan_xfer_add(p, c, 1, 0, 1000);
  plan_issue(p, c, NULL, -1, false);
  plan_buf_reads(p, c, sent1);
  plan_finish(p);
  double per[2];
  double most = search_plan_kept_bytes(p, UINT32_MAX, per);
  CU_ASSERT_EQUAL(per[0], 100001);
  CU_ASSERT_EQUAL(per[1], 10000);
  CU_ASSERT_EQUAL(most, 100001);
  plan_free(p);
}

/* Ring's plan (ring_flash_attn) has the kernels of both passes read the
 * GPU's own q and `k, v`, and its backward the forward's out and
 * softmax_lse (what ctx.save_for_backward keeps): that is what a layer
 * keeps; a model of 12 layers keeps 12 of them without recomputation,
 * beside layer_resident_bytes. */
static void test_ring_keeps(void) {
  scenario *sc = load_sched("ring", "2", "4", "1", NULL, NULL);
  CU_ASSERT_FATAL(sc != NULL);
  workload w = shown(sc)->w;
  w.layers[ATTN_SOFTMAX] = 12;
  workload aw = layer_attention_workload(&w);
  double rows = (double)aw.batch * aw.seq_len / aw.gpus;
  double want = workload_kv_bytes(&aw, rows / aw.batch) + 2 * sched_rows_bytes(&aw, aw.heads) +
                4.0 * rows * aw.heads;
  search_attention a;
  search_attention_of(&sched_ring, &w, sc->topo, &a);
  if (getenv("TEST_VERBOSE") || fabs(a.kept_layer_bytes - want) > 1e-9 * want)
    fprintf(stderr, "ring kept %g a layer (expected %g), %g in all\n", a.kept_layer_bytes, want,
            a.kept_bytes);
  CU_ASSERT_DOUBLE_EQUAL(a.kept_layer_bytes, want, 1e-9 * want);
  CU_ASSERT_DOUBLE_EQUAL(a.kept_bytes, 12 * want, 1e-9 * want);
  w.recompute = RECOMPUTE_NONE;
  CU_ASSERT_DOUBLE_EQUAL(search_memory_bound_bytes(&w, &a) - layer_resident_bytes(&w), 12 * want,
                         1e-6 * want);
  scenario_free(sc);
}

/* Ulysses' kernels run on the head-sharded copies its all-to-alls make,
 * whose q, `k, v`, out and softmax_lse its backward reads (as ring's: the
 * same bytes at SP 4 with 12 query and 4 KV heads); the out projection
 * saves the attention's output as the all-to-all hands it back, a tensor
 * of its own (layer_block.c SV_AO), which the attention's backward never
 * reads: a layer keeps both. */
static void test_ulysses_keeps_output(void) {
  scenario *sc = load_sched("ulysses", "1", "4", "1", NULL, NULL);
  CU_ASSERT_FATAL(sc != NULL);
  workload w = shown(sc)->w;
  workload aw = layer_attention_workload(&w);
  double rows = (double)aw.batch * aw.seq_len / aw.gpus, q = sched_rows_bytes(&aw, aw.heads);
  double kernels = workload_kv_bytes(&aw, rows / aw.batch) + 2 * q + 4.0 * rows * aw.heads;
  search_attention a;
  search_attention_of(&sched_ulysses, &w, sc->topo, &a);
  if (getenv("TEST_VERBOSE") || fabs(a.kept_layer_bytes - (kernels + q)) > 1e-9 * q)
    fprintf(stderr, "ulysses kept %g a layer (expected %g + the output %g)\n", a.kept_layer_bytes,
            kernels, q);
  CU_ASSERT_DOUBLE_EQUAL(a.kept_layer_bytes, kernels + q, 1e-9 * q);
  scenario_free(sc);
}

/* Every method the registry holds (aliases aside), at the step's two
 * extremes for the bound (no recomputation at ZeRO 0: every layer's kept
 * bytes added; full recomputation at ZeRO 3 with a vocabulary of 512: the
 * last layer's): the memory bound, the attention's output counted, below
 * the simulated peak; those whose check refuses SP 4 x DP 2 of this model
 * skipped, at most a few. */
static void test_every_method_below_peak(void) {
  int ran = 0, skipped = 0;
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    if ((*s)->alias_of) continue;
    scenario *sc = load_sched((*s)->name, "1", "4", "2", NULL, NULL);
    if (!sc) {
      skipped++;
      continue;
    }
    const scenario_point *pt = shown(sc);
    for (int full = 0; full <= 1; full++) {
      scenario_point at = *pt;
      workload *w = &at.w;
      w->layers[w->attention] = 12;
      w->recompute = full ? RECOMPUTE_FULL : RECOMPUTE_NONE;
      w->zero = full ? 3 : 0;
      if (full) w->vocab = 512;
      search_attention a;
      search_attention_of(pt->sched, w, sc->topo, &a);
      double bound = search_memory_bound_bytes(w, &a);
      exec_opts eo = {0};
      sim_result *r = sim_run_step_repeating(sc->topo, &at, &eo);
      if (getenv("TEST_VERBOSE") || !(bound <= r->r->peak_bytes))
        fprintf(stderr, "%s recompute %s: bound %.6g (kept %.4g a layer) peak %.6g\n",
                (*s)->name, full ? "full" : "none", bound, a.kept_layer_bytes, r->r->peak_bytes);
      CU_ASSERT(bound <= r->r->peak_bytes);
      sim_result_free(r);
    }
    ran++;
    scenario_free(sc);
  }
  if (getenv("TEST_VERBOSE")) fprintf(stderr, "%d methods checked, %d refused\n", ran, skipped);
  CU_ASSERT(ran >= 15);
  CU_ASSERT(skipped <= 3);
}

/* The memory bound below the peak the search's simulation gives (a step
 * of 12 layers replayed with 6 and 7 and extended, sim_run_step_repeating)
 * for seven schedulers, without and with full recomputation, at every
 * ZeRO stage; without recomputation every layer's kept bytes add to it.
 * With a vocabulary of 512 the loss's softmax is smaller than what one
 * layer keeps for Ulysses and all-gather, so under full recomputation the
 * last layer's kept bytes add to it too. */
static void test_memory_bound_below_peak(void) {
  static const char *const scheds[] = {"ring", "zigzag", "ulysses", "usp", "allgather", "tasp",
                                       "lasp2"};
  for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++) {
    scenario *sc = load_sched(scheds[k], "1", "4", "2", NULL, NULL);
    CU_ASSERT_FATAL(sc != NULL);
    const scenario_point *pt = shown(sc);
    for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc += RECOMPUTE_FULL)
      for (uint32_t zero = 0; zero <= 3; zero++)
        for (int small = 0; small <= (rc == RECOMPUTE_FULL); small++) {
          scenario_point at = *pt;
          workload *w = &at.w;
          w->layers[w->attention] = 12;
          w->recompute = (recompute_kind)rc;
          w->zero = zero;
          if (small) w->vocab = 512;
          search_attention a;
          search_attention_of(pt->sched, w, sc->topo, &a);
          double bound = search_memory_bound_bytes(w, &a), resident = layer_resident_bytes(w);
          exec_opts eo = {0};
          sim_result *r = sim_run_step_repeating(sc->topo, &at, &eo);
          if (getenv("TEST_VERBOSE") || !(bound <= r->r->peak_bytes))
            fprintf(stderr, "%s recompute %s ZeRO %u vocab %u: bound %.4g (resident %.4g, "
                    "kept %.4g a layer) peak %.4g\n", scheds[k],
                    rc == RECOMPUTE_FULL ? "full" : "none", zero, w->vocab, bound, resident,
                    a.kept_layer_bytes, r->r->peak_bytes);
          CU_ASSERT(bound <= r->r->peak_bytes);
          CU_ASSERT(a.kept_layer_bytes > 0);
          if (rc == RECOMPUTE_NONE)
            CU_ASSERT_DOUBLE_EQUAL(bound, resident + 12 * a.kept_layer_bytes, 1e-9 * bound);
          double gone = layer_resident_gone_bytes(w);
          if (rc == RECOMPUTE_FULL && a.kept_layer_bytes > gone)
            CU_ASSERT_DOUBLE_EQUAL(bound, resident - gone + a.kept_layer_bytes, 1e-9 * bound);
          if (small && (!strcmp(scheds[k], "ulysses") || !strcmp(scheds[k], "allgather")))
            CU_ASSERT(bound > resident);
          sim_result_free(r);
        }
    scenario_free(sc);
  }
}

int main(void) {
  static const test_case cases[] = {TEST(test_tp_ingress), TEST(test_tp_wait),
                                    TEST(test_bound_below_step), TEST(test_kept_bytes),
                                    TEST(test_ring_keeps), TEST(test_ulysses_keeps_output),
                                    TEST(test_memory_bound_below_peak),
                                    TEST(test_every_method_below_peak),
                                    {NULL, NULL}};
  return test_run("search_bound", cases);
}
