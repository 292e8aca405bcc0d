/* orbits: identical replicas and TP ranks simulated once (orbits.h,
 * layer.h layer_orbits), against the replay of every GPU: every figure of
 * the result (times, the idle split, per-GPU busy and finish times, per
 * channel bytes and busy times, FLOPs, peak allocated and reserved memory
 * and the buffers at each GPU's peak) within 1e-9, for every scheduler
 * that runs softmax layers, on one NVSwitch node, on two and four nodes
 * with a NIC per GPU and with NICs shared by two GPUs, under every
 * placement; the symmetry refused where it would not be exact. */
#include "exec.h"
#include "layer.h"
#include "orbits.h"
#include "plan_buf.h"
#include "scenario.h"
#include "sim.h"
#include "testutil.h"

static topology *load(const char *file, const char *set) {
  char *sets[] = {(char *)set, NULL};
  g_autoptr(GError) e = NULL;
  topology *t = topo_load_set(file, set ? sets : NULL, 0, &e);
  if (!t) fprintf(stderr, "%s: %s\n", file, e->message);
  CU_ASSERT_FATAL(t != NULL);
  return t;
}

/* Llama-3-8B's shape (models/llama3-8b.json), `layers` layers, one step. */
static workload step(uint32_t sp, uint32_t tp, uint32_t dp, uint64_t seq) {
  workload w = {.gpus = sp, .seq_len = seq, .batch = 1, .heads = 32, .kv_heads = 8,
                .head_dim = 128, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                .causal = true, .pass = PASS_FWDBWD, .attention = ATTN_SOFTMAX, .hidden = 4096,
                .ffn = 14336, .vocab = 128256, .scope = SCOPE_MODEL, .tp = tp, .dp = dp,
                .linear_block = 64};
  w.layers[ATTN_SOFTMAX] = 2;
  return w;
}

static uint32_t compute_tasks(const plan *p) {
  uint32_t k = 0;
  for (guint i = 0; i < p->tasks->len; i++) k += plan_task_at(p, i)->kind == TASK_COMPUTE;
  return k;
}

/* The job replayed on every GPU and on its representatives: the same;
 * returns whether it had representatives. */
static bool check(const sched_ops *s, const workload *w, const topology *t) {
  orbits *o = layer_orbits_sched(s, w, t);
  if (!o) return false;
  /* the shifts' classes, times the turn's inside each SP group */
  CU_ASSERT_EQUAL(layer_tp(w) * layer_dp(w) % (o->mult / o->turn), 0);
  CU_ASSERT_EQUAL(w->gpus % o->turn, 0);
  plan *full = layer_build(s, w, t, true, false);
  plan *q = layer_build_orbits(s, w, t, true, false, o);
  /* each representative's tasks, and only theirs */
  CU_ASSERT_EQUAL(compute_tasks(q) * o->mult, compute_tasks(full));
  for (guint i = 0; i < q->tasks->len; i++) {
    const plan_task *k = plan_task_at(q, i);
    if (k->kind == TASK_COMPUTE) CU_ASSERT(orbits_is_rep(o, k->gpu));
    for (uint32_t x = 0; k->kind == TASK_COMM && x < k->n_xfer; x++) {
      plan_xfer e = plan_xfer_at(q, k, x);
      CU_ASSERT(orbits_is_rep(o, e.src) && orbits_is_rep(o, e.dst));
      CU_ASSERT(o->rep[plan_xfer_to(q, k, x)] == e.dst);
    }
  }
  CU_ASSERT(layer_tasks_estimate(w, t) >= q->tasks->len);
  CU_ASSERT(layer_tasks_estimate_mult(w, o->mult) >= q->tasks->len);
  CU_ASSERT_CLOSE(layer_model_flops(q) * o->mult, layer_model_flops(full), 1e-12);
  check_same_replay(full, q, t, o);
  plan_free(full);
  plan_free(q);
  orbits_free(o);
  return true;
}

/* Every scheduler that runs softmax layers, TP x DP around SP, where its
 * own check lets it run. */
static void test_every_scheduler(void) {
  topology *t = load("topologies/h100x8x2.json", NULL);
  uint32_t ran = 0;
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    workload w = step(4, 2, 2, 32768);
    if ((*s)->attention && !((*s)->attention & (1u << ATTN_SOFTMAX))) continue;
    g_autoptr(GError) e = NULL;
    workload a = layer_attention_workload(&w);
    layer_view v;
    layer_view_init(&v, &w, t);
    bool can = sched_check(*s, &a, &v.t, &e);
    layer_view_clear(&v);
    if (can) ran += check(*s, &w, t);
  }
  CU_ASSERT(ran >= 10);
  topo_free(t);
}

/* ZeRO stages, recomputation, micro-batches and a pass of each kind. */
static void test_step_options(void) {
  topology *t = load("topologies/h100x8x4.json", NULL);
  for (uint32_t zero = 0; zero <= 3; zero++)
    for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc += RECOMPUTE_FULL - RECOMPUTE_NONE) {
      workload w = step(8, 1, 4, 65536);
      w.zero = zero;
      w.recompute = (recompute_kind)rc;
      w.micro_batches = zero == 1 ? 2 : 1;
      CU_ASSERT(check(zero % 2 ? &sched_usp : &sched_zigzag, &w, t));
    }
  for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++) {
    workload w = step(4, 2, 2, 32768);
    w.pass = (pass_kind)pass;
    CU_ASSERT(check(&sched_ring, &w, t));
    w.scope = SCOPE_LAYER;
    w.dp = 0;
    CU_ASSERT(check(&sched_ulysses, &w, t));
  }
  topo_free(t);
}

/* One NVSwitch node (every permutation keeps it), and NICs shared by two
 * GPUs: TP ranks 0 and 1 send through one NIC, which the quotient
 * network's NIC carries twice over (|Stab| 2, half its capacity). */
static void test_topologies(void) {
  topology *one = load("topologies/h100x8.json", NULL);
  workload w = step(2, 2, 2, 32768);
  CU_ASSERT(check(&sched_zigzag, &w, one));
  topo_free(one);
  topology *t = load("topologies/h100x8x2.json", "generator.nics_per_node=4");
  w = step(4, 2, 2, 65536);
  orbits *o = layer_orbits(&w, t);
  CU_ASSERT_FATAL(o != NULL);
  uint32_t nic = t->switched.nic0;  /* node 0's first NIC, GPUs 0-1's: TP ranks 0, 1 */
  CU_ASSERT_EQUAL(o->chan_stab[nic], 2);
  CU_ASSERT_EQUAL(o->chan_stab[0], 1);  /* a GPU's own NVSwitch port */
  orbits_free(o);
  CU_ASSERT(check(&sched_zigzag, &w, t));
  CU_ASSERT(check(&sched_ulysses, &w, t));
  topo_free(t);
}

/* Every placement, and replicas that share nodes or span two: the
 * symmetry's shifts by as many replicas (TP ranks) as keep the topology
 * and the rings; refused on an explicit topology (its routes are a table). */
static void test_placements(void) {
  topology *t = load("topologies/h100x8x2.json", NULL);
  for (int k = 0; k < PLACE_KINDS; k++) {
    workload w = step(4, 2, 2, 32768);
    w.placement = (placement_kind)k;
    CU_ASSERT(check(&sched_zigzag, &w, t));
  }
  /* replicas of 4 GPUs, two to a node: a shift by one would move the
   * DP ring's hand-over between nodes inside one; by a node's worth (two
   * replicas) it is exact: 2 x 2 classes */
  workload w = step(2, 2, 4, 32768);
  orbits *o = layer_orbits(&w, t);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(o->mult, 4);
  orbits_free(o);
  CU_ASSERT(check(&sched_ulysses, &w, t));
  /* TP 2 x SP 4 x DP 4 on nodes of 8, ZeRO 3: the gradient group of a TP
   * rank holds 4 GPUs of each node and runs 4 rings over them
   * (lb_ring_per_node), which a shift by one replica (one node) keeps */
  topology *t4 = load("topologies/h100x8x4.json", NULL);
  w = step(4, 2, 4, 32768);
  w.zero = 3;
  o = layer_orbits(&w, t4);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(o->mult, 2 * 4);
  orbits_free(o);
  CU_ASSERT(check(&sched_zigzag, &w, t4));
  /* DP innermost (dp,sp,tp: GPU = dp + 4 sp + 16 tp): a TP rank's gradient
   * group is the SP x DP GPUs of one node pair, its rings in the GPUs'
   * order; a shift of the replicas moves GPUs within their nodes (an
   * automorphism) but carries the hand-over edge 3 -> 4 to 0 -> 5, no
   * ring edge: only the TP shift is exact (16 classes of 2) */
  w.placement = PLACE_DP_SP_TP;
  o = layer_orbits(&w, t4);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(o->mult, 2);
  orbits_free(o);
  CU_ASSERT(check(&sched_zigzag, &w, t4));
  /* DP innermost over several nodes (dp,tp,sp: GPU = dp + 16 sp, 16
   * replicas on two nodes per SP rank): a shift of the replicas by fewer
   * than 8 splits a node, by 8 swaps the two nodes and carries the
   * gradient ring's node order 0, 1, 2, 3 to 1, 0, 3, 2 (no ring edge);
   * turning the replicas by one inside each node's 8 keeps the topology
   * and every ring (each local GPU starts one): 4 classes of 8 */
  w = step(2, 1, 16, 32768);
  w.placement = PLACE_DP_TP_SP;
  w.zero = 1;
  o = layer_orbits(&w, t4);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(o->mult, 8);
  for (uint32_t g = 0; g < 32; g++) CU_ASSERT_EQUAL(o->rep[g], g - g % 8);
  orbits_free(o);
  CU_ASSERT(check(&sched_zigzag, &w, t4));
  CU_ASSERT(check(&sched_ulysses, &w, t4));
  /* and with TP 2 inside them (dp,tp,sp: GPU = dp + 8 tp + 16 sp): the
   * replicas fill a node, a shift by one of them is exact as it is; the
   * TP ranks lie a node apart, shifted by one: 2 x 8 */
  w = step(2, 2, 8, 32768);
  w.placement = PLACE_DP_TP_SP;
  o = layer_orbits(&w, t4);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(o->mult, 16);
  orbits_free(o);
  CU_ASSERT(check(&sched_zigzag, &w, t4));
  topo_free(t4);
  topology *table = test_switch(8, 400e9, 1e-6);
  w = step(2, 2, 2, 32768);
  CU_ASSERT(layer_orbits(&w, table) == NULL);
  topo_free(table);
  topo_free(t);
}

/* w with scheduler s's Ulysses degree u (usp_ulysses, double_ring_ulysses). */
static workload ulysses(workload w, const char *key, uint32_t u) {
  sched_opt_set_num(&w, sched_option_find(key), u);
  return w;
}

/* The orbits of s's job, with the turn's order and the multiplicity
 * expected, replayed against every GPU. */
static void turned(const sched_ops *s, const workload *w, const topology *t, uint32_t turn,
                   uint32_t mult) {
  orbits *o = layer_orbits_sched(s, w, t);
  CU_ASSERT_FATAL(o != NULL);
  if (o->turn != turn || o->mult != mult)
    fprintf(stderr, "\n  %s tp %u sp %u dp %u placement %s: turn %u mult %u, expected %u %u\n",
            s->name, layer_tp(w), w->gpus, layer_dp(w), layer_placement_name(w->placement),
            o->turn, o->mult, turn, mult);
  CU_ASSERT_EQUAL(o->turn, turn);
  CU_ASSERT_EQUAL(o->mult, mult);
  orbits_free(o);
  CU_ASSERT(check(s, w, t));
}

/* USP's and USP-zigzag's turn (every Ulysses group's GPUs by one, sched.h
 * turn) carried into every SP group of every TP rank and replica
 * (layer_orbits_sched), at the model and layer scopes, on nodes over NIC
 * rails and on one NVSwitch: the replay of the representatives equals
 * the full one (check).  Refused where it would move a gradient ring's
 * edges (Ulysses groups of 2 in a node's 4 SP GPUs: the swap reverses
 * the node's part of each ring) and turned inside each node's part of a
 * group that spans two nodes (a whole turn carries a node onto two). */
static void test_turn(void) {
  topology *t4 = load("topologies/h100x8x4.json", NULL);
  topology *one = load("topologies/h100x8.json", NULL);
  const sched_ops *ss[] = {&sched_usp, &sched_usp_zigzag};
  for (size_t i = 0; i < G_N_ELEMENTS(ss); i++) {
    /* TP 2 x SP 8 x DP 2: a Ulysses group of 4 fills a node (x TP 2 x DP 2) */
    workload w = ulysses(step(8, 2, 2, 65536), "usp_ulysses", 4);
    turned(ss[i], &w, t4, 4, 16);
    /* groups of 2: the turn swaps a node's SP GPUs two by two, which no
     * gradient ring of the node's 4 keeps: the shifts alone */
    w = ulysses(step(8, 2, 2, 65536), "usp_ulysses", 2);
    turned(ss[i], &w, t4, 1, 4);
    /* groups of 8 over two nodes: turned inside each node's 4 */
    w = ulysses(step(8, 2, 2, 65536), "usp_ulysses", 8);
    turned(ss[i], &w, t4, 4, 16);
    /* ZeRO 3 (gathers and reduce-scatters on the gradient ring), full
     * recomputation */
    w.zero = 3;
    w.recompute = RECOMPUTE_FULL;
    turned(ss[i], &w, t4, 4, 16);
    /* scope layer, TP 1: the turn alone, a group a node; forward only */
    w = ulysses(step(16, 1, 1, 65536), "usp_ulysses", 8);
    w.scope = SCOPE_LAYER;
    w.dp = 0;
    turned(ss[i], &w, t4, 8, 8);
    w.pass = PASS_FWD;
    turned(ss[i], &w, t4, 8, 8);
    /* and a group of 16 over two nodes: inside each node's 8 */
    w = ulysses(step(16, 1, 1, 65536), "usp_ulysses", 16);
    w.scope = SCOPE_LAYER;
    w.dp = 0;
    w.heads = w.kv_heads = 16;
    turned(ss[i], &w, t4, 8, 8);
    /* one NVSwitch: TP 2 x SP 4 (one group of 4): one GPU replayed */
    w = ulysses(step(4, 2, 1, 32768), "usp_ulysses", 4);
    turned(ss[i], &w, one, 4, 8);
  }
  /* every placement of TP 2 x SP 4 x DP 2 with groups of 4 on two nodes */
  topology *t2 = load("topologies/h100x8x2.json", NULL);
  uint32_t with_turn = 0;
  for (int k = 0; k < PLACE_KINDS; k++) {
    workload w = ulysses(step(4, 2, 2, 32768), "usp_ulysses", 4);
    w.placement = (placement_kind)k;
    orbits *o = layer_orbits_sched(&sched_usp_zigzag, &w, t2);
    with_turn += o && o->turn > 1;
    orbits_free(o);
    CU_ASSERT(check(&sched_usp_zigzag, &w, t2));
  }
  CU_ASSERT(with_turn >= 4);
  /* a full mask: no turn (its plan is lockstep already) */
  workload w = ulysses(step(8, 2, 2, 65536), "usp_ulysses", 4);
  w.causal = false;
  orbits *o = layer_orbits_sched(&sched_usp, &w, t4);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(o->turn, 1);
  orbits_free(o);
  topo_free(t2);
  topo_free(one);
  topo_free(t4);
}

/* Double ring with a head-parallel degree: USP's Ulysses groups around a
 * double ring, the same turn (doublering.c dring_turn), head-first (a
 * group of 4 x TP 2 a node) and context-first (each group across the 4
 * nodes: the turn moves every node to the next, which keeps the rings
 * as a shift of the replicas would). */
static void test_double_ring_turn(void) {
  topology *t4 = load("topologies/h100x8x4.json", NULL);
  workload w = ulysses(step(16, 2, 1, 65536), "double_ring_ulysses", 4);
  turned(&sched_double_ring, &w, t4, 4, 8);
  w.zero = 3;
  turned(&sched_double_ring, &w, t4, 4, 8);
  w = ulysses(step(16, 2, 1, 65536), "double_ring_ulysses", 4);
  sched_opt_set_num(&w, sched_option_find("double_ring_context_first"), 1);
  CU_ASSERT(check(&sched_double_ring, &w, t4));
  /* TP 1 x SP 8 x DP 4, groups of 8 (a node), an inner ring of one */
  w = ulysses(step(8, 1, 4, 65536), "double_ring_ulysses", 8);
  turned(&sched_double_ring, &w, t4, 8, 32);
  topo_free(t4);
}

/* plan_append into a plan built for representatives (plan_quotient: GPU
 * 0 stands for GPUs 0 and 1): GPU 0's kernels, the exchange's transfer
 * leaving it (received by GPU 1's representative, reaching GPU 1), none
 * of GPU 1's; a kernel of GPU 0 waiting on one of GPU 1 is no quotient
 * (plan_append_unfit), a group waiting on one is. */
static void test_append_representatives(void) {
  plan_op op = {.kind = OP_COPY, .bytes = 1e6};
  static const uint8_t sim[] = {1, 0};
  static const uint32_t rep[] = {0, 0}, gpus[] = {0, 1};
  for (int unfit = 0; unfit < 2; unfit++) {
    plan *src = plan_new(2, false);
    uint32_t k0 = plan_compute(src, 0, 0, &op), k1 = plan_compute(src, 1, 0, &op);
    uint32_t c = plan_comm(src, 1, COMM_P2P);
    plan_xfer_add(src, c, 0, 1, 1e6);
    plan_xfer_add(src, c, 1, 0, 1e6);
    plan_dep(src, k0, c);
    plan_dep(src, k1, c);
    uint32_t after = plan_compute(src, 0, 2, &op);
    plan_dep(src, unfit ? k1 : c, after);
    plan_dep(src, c, plan_compute(src, 1, 2, &op));
    plan_finish(src);
    plan *dst = plan_new(2, false);
    plan_quotient(dst, sim, rep);
    plan_append *a = plan_append_new(dst, src, gpus, 0);
    plan_append_range(a, 0, src->tasks->len);
    CU_ASSERT_EQUAL(plan_append_unfit(a), unfit);
    plan_append_free(a);
    plan_quotient_end(dst);
    plan_finish(dst);
    CU_ASSERT_EQUAL(compute_tasks(dst), 2);
    CU_ASSERT_EQUAL(dst->tasks->len, 3);
    for (guint i = 0; i < dst->tasks->len; i++) {
      const plan_task *t = plan_task_at(dst, i);
      if (t->kind == TASK_COMPUTE) CU_ASSERT_EQUAL(t->gpu, 0);
      if (t->kind != TASK_COMM) continue;
      CU_ASSERT_EQUAL_FATAL(t->n_xfer, 1);
      plan_xfer e = plan_xfer_at(dst, t, 0);
      CU_ASSERT(e.src == 0 && e.dst == 0 && plan_xfer_to(dst, t, 0) == 1);
    }
    plan_free(dst);
    plan_free(src);
  }
}

/* A scheduler of two GPUs each of whose second kernels waits on the
 * other GPU's first: the swap of its GPUs maps the plan onto itself, but
 * no plan of one GPU stands for it (a kernel would wait on a GPU left
 * out).  Its layer is replayed on every GPU, the same as the full one. */
static plan *crossing_build(const workload *w, const topology *t, bool record_segs) {
  (void)t;
  plan *p = plan_new(w->gpus, record_segs);
  plan_op op = {.kind = OP_COPY, .bytes = 1e8};
  uint32_t first[2];
  for (uint32_t g = 0; g < 2; g++) first[g] = plan_compute(p, g, 0, &op);
  for (uint32_t g = 0; g < 2; g++) plan_dep(p, first[1 - g], plan_compute(p, g, 1, &op));
  plan_finish(p);
  return p;
}

static bool crossing_turn(const workload *w, const topology *t, uint32_t block, uint32_t *pi) {
  (void)t;
  if (w->gpus != 2 || (block && block != 2)) return false;
  pi[0] = 1;
  pi[1] = 0;
  return true;
}

static void test_turn_no_quotient(void) {
  static const sched_ops crossing = {.name = "crossing", .build = crossing_build,
                                     .turn = crossing_turn};
  topology *t = load("topologies/h100x8.json", NULL);
  workload w = step(2, 1, 1, 32768);
  w.scope = SCOPE_LAYER;
  w.pass = PASS_FWD;
  orbits *o = layer_orbits_sched(&crossing, &w, t);
  CU_ASSERT_FATAL(o != NULL);
  CU_ASSERT_EQUAL(o->turn, 2);
  CU_ASSERT_PTR_NULL(layer_build_orbits(&crossing, &w, t, true, false, o));
  orbits_free(o);
  scenario_point pt = {w, &crossing, false, NULL};
  exec_opts plain = {0};
  sim_result *r = sim_run_point(t, &pt, &plain);
  plan *full = layer_build(&crossing, &w, t, true, false);
  exec_result *a = exec_run(full, t, &plain);
  check_same_result(a, r->r);
  exec_result_free(a);
  plan_free(full);
  sim_result_free(r);
  topo_free(t);
}

int main(void) {
  static const test_case cases[] = {TEST(test_every_scheduler), TEST(test_step_options),
                                    TEST(test_topologies), TEST(test_placements), TEST(test_turn),
                                    TEST(test_double_ring_turn), TEST(test_append_representatives),
                                    TEST(test_turn_no_quotient), {NULL, NULL}};
  return test_run("orbits", cases);
}
