/* usp: the Ulysses all-to-alls of every group as one pattern group and
 * the copies around them as lockstep tasks (ulysses.c), so that a
 * full-mask USP or USP-Zigzag plan is lockstep from the head scatter to
 * the head gather; against the per-GPU plan it stands for (the plan that
 * records segments, built GPU by GPU and flow by flow: the reference).
 * For usp, usp-zigzag and ulysses, full and causal masks (causal: the
 * ring's kernels stay per GPU, the all-to-alls are still patterns), every
 * pass, Ulysses degrees 2 to 8 with ring degrees 2 to 12 (non powers of
 * two included) on NVSwitch, on nodes over NIC rails (the ring crossing
 * them), a full mesh and a torus: the expansion is the reference task by
 * task and transfer by transfer (each GPU's stream, the groups, their
 * predecessors: plan_same.h same_streams), and every figure of the two runs agrees
 * to 1e-9.  The expanded plan's all-to-alls, read on their own: every
 * ordered pair of every Ulysses group once per call, none across groups,
 * the bytes of one GPU's share of the tensor, sent = received. */
#include <math.h>
#include <string.h>

#include "attn_orbits.h"
#include "exec.h"
#include "plan_quotient.h"
#include "plan_same.h"
#include "scenario.h"
#include "sched/sched.h"
#include "sched/ulysses.h"
#include "testutil.h"

/* The point of `sched` on a topology (with a --set, NULL: none), SP sp,
 * 4,096 tokens per GPU, Ulysses degree u (0: the default), fused or not. */
static scenario *load(const char *sched, const char *topo, const char *set, uint32_t sp,
                      uint32_t u, bool fused, const char *mask, const char *pass) {
  g_autofree char *sps = g_strdup_printf("%u", sp);
  g_autofree char *seq = g_strdup_printf("%u", sp * 4096);
  g_autofree char *deg = g_strdup_printf("usp_ulysses=%u", u);
  char *sets[] = {(char *)set, NULL};
  char *opts[3] = {NULL, NULL, NULL};
  int k = 0;
  if (u) opts[k++] = deg;
  if (fused) opts[k++] = "ulysses_fused=true";
  /* ulysses: as many heads as GPUs (its heads must divide among them) */
  g_autofree char *heads = g_strdup_printf("%u", sp < 32 ? 32 : sp);
  scenario_overrides ov = {.topology = topo, .sched = sched, .sp = sps, .seq = seq,
                           .mask = mask, .pass = pass, .set = set ? sets : NULL,
                           .sched_opts = k ? opts : NULL, .heads = heads, .strict = true};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, &ov, &err);
  if (!s) fprintf(stderr, "\n  %s %s sp %u u %u: %s\n", sched, topo, sp, u, err->message);
  return s;
}

static const scenario_point *point_of(const scenario *s, const sched_ops *ops) {
  for (guint i = 0; i < s->points->len; i++) {
    const scenario_point *pt = &g_array_index(s->points, scenario_point, i);
    if (!pt->hidden && pt->sched == ops) return pt;
  }
  return NULL;
}

static const sched_ops *sched_named(const char *name) {
  if (!strcmp(name, "usp")) return &sched_usp;
  if (!strcmp(name, "usp-zigzag")) return &sched_usp_zigzag;
  return &sched_ulysses;
}

/* One point, both ways. */
static void compare(const char *sched, const char *topo, const char *set, uint32_t sp, uint32_t u,
                    bool fused, const char *mask, const char *pass) {
  scenario *s = load(sched, topo, set, sp, u, fused, mask, pass);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const sched_ops *ops = sched_named(sched);
  const scenario_point *pt = point_of(s, ops);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pt);
  bool full = !pt->w.causal, is_usp = ops != &sched_ulysses;
  plan *l = ops->build(&pt->w, s->topo, false);
  plan *r = ops->build(&pt->w, s->topo, true);
  CU_ASSERT_TRUE(l->has_lockstep);
  /* the reference: every compute task of one GPU, the all-to-alls listed
   * flow by flow (its ring's hops are a pattern, as ring's are) */
  for (guint i = 0; i < r->tasks->len; i++) {
    const plan_task *t = plan_task_at(r, i);
    if (t->kind == TASK_COMPUTE) CU_ASSERT_NOT_EQUAL(t->gpu, PLAN_ALL);
    if (t->kind == TASK_COMM && t->api == COMM_ALL_TO_ALL) CU_ASSERT_PTR_NULL(plan_task_pattern(r, t));
  }
  /* every all-to-all is a pattern group (one pattern of every group's
   * pairs, registered once); a full-mask usp plan has no task of one GPU */
  uint32_t per_gpu = 0, a2a = 0;
  for (guint i = 0; i < l->tasks->len; i++) {
    const plan_task *t = plan_task_at(l, i);
    if (t->kind == TASK_COMPUTE) per_gpu += t->gpu != PLAN_ALL;
    else if (t->api == COMM_ALL_TO_ALL) {
      a2a++;
      CU_ASSERT_PTR_NOT_NULL(plan_task_pattern(l, t));
    }
  }
  CU_ASSERT_TRUE(a2a > 0);
  if (full && is_usp) CU_ASSERT_EQUAL(per_gpu, 0);
  if (!full || !is_usp) CU_ASSERT_TRUE(per_gpu > 0);
  CU_ASSERT_TRUE(l->patterns->len <= 2); /* the ring's, the all-to-alls' */
  plan *e = plan_expand(l);
  bool same = same_streams(e, r);
  if (!same)
    fprintf(stderr, "\n  %s %s sp %u u %u %s %s: expansion differs from the per-GPU plan\n",
            sched, topo, sp, u, mask, pass);
  CU_ASSERT_TRUE(same);
  exec_opts o = {0};
  exec_result *x = exec_run(l, s->topo, &o), *y = exec_run(r, s->topo, &o);
  bool ok = same_figures(x, y);
  if (!ok)
    fprintf(stderr, "\n  %s %s sp %u u %u %s %s: lockstep %.12g s %.12g B, per GPU %.12g s %.12g B\n",
            sched, topo, sp, u, mask, pass, x->step_s, x->peak_bytes, y->step_s, y->peak_bytes);
  CU_ASSERT_TRUE(ok);
  if (full && is_usp) CU_ASSERT_TRUE(x->tasks < y->tasks); /* not replayed expanded */
  exec_result_free(x);
  exec_result_free(y);
  plan_free(e);
  plan_free(l);
  plan_free(r);
  scenario_free(s);
}

static const char *const passes[] = {"fwd", "bwd", "fwdbwd"};

static void t_usp_lockstep_equals_per_gpu(void) {
  /* NVSwitch domains of 8, 12 and 24 (generator.gpus); nodes of 8 over
   * NIC rails (the ring across them: h100x8x4 at 32 GPUs, u 8 and 4;
   * h100x8x32 of 3 and 5 nodes), a full mesh, a torus (multi-hop routes) */
  static const struct {
    const char *topo, *set;
    uint32_t sp, u;
  } pts[] = {{"h100x8", NULL, 8, 2},
             {"h100x8", "generator.gpus=12", 12, 4},
             {"h100x8", "generator.gpus=24", 24, 8},
             {"h100x8", "generator.gpus=24", 24, 2},
             {"h100x8x4", NULL, 32, 0},
             {"h100x8x4", NULL, 24, 4},
             {"h100x8x32", "generator.nodes=3", 24, 0},
             {"h100x8x32", "generator.nodes=5", 40, 0},
             {"mi300x8", NULL, 8, 4},
             {"torus4x4", NULL, 16, 4}};
  static const char *const scheds[] = {"usp", "usp-zigzag"};
  static const char *const masks[] = {"full", "causal"};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++)
    for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++)
      for (size_t m = 0; m < G_N_ELEMENTS(masks); m++)
        for (size_t p = 0; p < G_N_ELEMENTS(passes); p++)
          compare(scheds[k], pts[i].topo, pts[i].set, pts[i].sp, pts[i].u, false, masks[m],
                  passes[p]);
  /* one all-to-all of Q, K and V together */
  for (size_t p = 0; p < G_N_ELEMENTS(passes); p++)
    compare("usp", "h100x8x4", NULL, 16, 4, true, "full", passes[p]);
}

/* Ulysses alone: the copies before the scatter are lockstep (the start of
 * a pass), its kernels and what follows them per GPU. */
static void t_ulysses_lockstep_equals_per_gpu(void) {
  for (size_t p = 0; p < G_N_ELEMENTS(passes); p++) {
    compare("ulysses", "h100x8", NULL, 8, 0, false, "full", passes[p]);
    compare("ulysses", "h100x8x4", NULL, 16, 0, false, "causal", passes[p]);
    compare("ulysses", "h100x8x4", NULL, 32, 0, true, "full", passes[p]);
  }
}

/* The expanded plan's all-to-alls (fwdbwd: forward Q, K, V and the
 * output; backward dO, then dQ, dK, dV): in each, every ordered pair of
 * GPUs of one Ulysses group (u consecutive GPUs) exactly once and no pair
 * across groups, each carrying its GPU's c tokens of the tensor's heads
 * over u; every GPU sends what it receives. */
static void t_a2a_schedule(void) {
  static const struct {
    uint32_t sp, u;
  } pts[] = {{12, 4}, {24, 8}, {24, 2}, {16, 16}};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++) {
    uint32_t n = pts[i].sp, u = pts[i].u;
    g_autofree char *set = g_strdup_printf("generator.gpus=%u", n);
    scenario *s = load("usp", "h100x8", set, n, u, false, "full", "fwdbwd");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const workload *w = &point_of(s, &sched_usp)->w;
    plan *l = sched_usp.build(w, s->topo, false);
    plan *p = plan_expand(l);
    double c = (double)w->seq_len / n, kv = ulysses_kv_heads(w, u);
    double row = (double)w->batch * c * w->head_dim * w->elem_bytes;
    /* the calls' heads in order: forward q k v out, backward dout dq dk dv */
    double heads[8] = {w->heads, kv, kv, w->heads, w->heads, w->heads, kv, kv};
    uint32_t call = 0;
    g_autofree uint32_t *seen = g_new0(uint32_t, (size_t)n * n);
    g_autofree double *sent = g_new0(double, n), *recv = g_new0(double, n);
    for (guint k = 0; k < p->tasks->len; k++) {
      const plan_task *t = plan_task_at(p, k);
      if (t->kind != TASK_COMM || t->api != COMM_ALL_TO_ALL) continue;
      CU_ASSERT_TRUE_FATAL(call < 8);
      memset(seen, 0, (size_t)n * n * sizeof *seen);
      double b = row * heads[call] / u;
      for (uint32_t x = 0; x < plan_xfer_count(p, t); x++) {
        plan_xfer y = plan_xfer_at(p, t, x);
        CU_ASSERT_EQUAL(y.src / u, y.dst / u);
        CU_ASSERT_EQUAL(y.bytes, b);
        seen[(size_t)y.src * n + y.dst]++;
        sent[y.src] += y.bytes;
        recv[y.dst] += y.bytes;
      }
      for (uint32_t a = 0; a < n; a++)
        for (uint32_t d = 0; d < n; d++)
          CU_ASSERT_EQUAL(seen[(size_t)a * n + d], a != d && a / u == d / u);
      call++;
    }
    CU_ASSERT_EQUAL(call, 8);
    double total = 0;
    for (uint32_t j = 0; j < 8; j++) total += row * heads[j] * (u - 1) / u;
    for (uint32_t g = 0; g < n; g++) {
      CU_ASSERT_CLOSE(sent[g], total, 1e-12);
      CU_ASSERT_CLOSE(recv[g], sent[g], 1e-12);
    }
    plan_free(p);
    plan_free(l);
    scenario_free(s);
  }
}

/* Under a causal mask the ring's kernels are a task per GPU, but the u
 * GPUs of a Ulysses group (one ring rank) run the same kernels on other
 * heads, and the shift of every group's GPUs by one (i -> i+1 mod u) maps
 * the plan onto itself (the all-to-alls inside each group, the ring hops
 * g -> g+u) and, on one NVSwitch or on nodes whose local GPU i has NIC
 * rail i, the topology onto itself: the group's GPUs share one timeline.
 * Held here on the per-GPU plan: every figure of every GPU equal to its
 * group's first GPU's, to 1e-9 (what a plan of one GPU per group with
 * multiplicity u, orbits.h, would rest on). */
static void t_causal_groups_coincide(void) {
  static const struct {
    const char *sched, *topo, *set;
    uint32_t sp, u;
  } pts[] = {{"usp", "h100x8", "generator.gpus=24", 24, 4},
             {"usp-zigzag", "h100x8", "generator.gpus=24", 24, 8},
             {"usp", "h100x8x4", NULL, 32, 0},
             {"usp-zigzag", "h100x8x32", "generator.nodes=3", 24, 0}};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++) {
    scenario *s = load(pts[i].sched, pts[i].topo, pts[i].set, pts[i].sp, pts[i].u, false,
                       "causal", "fwdbwd");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const scenario_point *pt = point_of(s, sched_named(pts[i].sched));
    uint32_t u = pts[i].u ? pts[i].u : 8, n = pt->w.gpus;
    plan *p = pt->sched->build(&pt->w, s->topo, true);
    exec_opts o = {0};
    exec_result *r = exec_run(p, s->topo, &o);
    bool ok = true, apart = false;
    for (uint32_t g = 0; g < n; g++) {
      uint32_t f = g - g % u;
      ok = ok && close_rel(r->gpu_compute_s[g], r->gpu_compute_s[f]) &&
           close_rel(r->gpu_comm_s[g], r->gpu_comm_s[f]) &&
           close_rel(r->gpu_finish_s[g], r->gpu_finish_s[f]) &&
           close_rel(r->gpu_imbalance_s[g], r->gpu_imbalance_s[f]) &&
           close_rel(r->gpu_peak_bytes[g], r->gpu_peak_bytes[f]);
      /* and the groups themselves differ (the test would hold trivially
       * if every GPU were alike) */
      apart = apart || !close_rel(r->gpu_compute_s[g], r->gpu_compute_s[0]) ||
              !close_rel(r->gpu_finish_s[g], r->gpu_finish_s[0]);
    }
    if (!ok) fprintf(stderr, "\n  %s %s sp %u: a Ulysses group's GPUs differ\n", pts[i].sched,
                     pts[i].topo, n);
    CU_ASSERT_TRUE(ok);
    CU_ASSERT_TRUE(apart);
    exec_result_free(r);
    plan_free(p);
    scenario_free(s);
  }
}

static uint32_t compute_tasks(const plan *p) {
  uint32_t k = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind == TASK_COMPUTE) k += t->gpu == PLAN_ALL ? p->n_gpus : 1;
  }
  return k;
}

/* Under a causal mask one GPU of each Ulysses group replayed with the
 * multiplicity u (attn_orbits.h, plan_quotient.h): its orbits are the
 * groups, its plan the representatives' tasks and transfers only, and
 * every figure of the run equals the replay of every GPU within 1e-9, on
 * NVSwitch (ring degrees 2 to 12; kernels that hold back transfers
 * too) and on nodes over NIC rails (a group a node, and two a node);
 * refused where the turn is not exact. */
static void t_orbits_equal_full(void) {
  static const struct {
    const char *sched, *topo, *set, *pass;
    uint32_t sp, u;
  } pts[] = {{"usp", "h100x8", "generator.gpus=24", "fwdbwd", 24, 2},
             {"usp-zigzag", "h100x8", "generator.gpus=24", "fwdbwd", 24, 8},
             {"usp", "h100x8", "generator.gpus=12", "fwd", 12, 4},
             {"usp-zigzag", "h100x8", "generator.gpus=12", "bwd", 12, 4},
             {"usp", "h100x8x4", NULL, "fwdbwd", 32, 0},
             {"usp-zigzag", "h100x8x4", NULL, "fwdbwd", 32, 4},
             {"usp-zigzag", "h100x8x32", "generator.nodes=3", "fwdbwd", 24, 0},
             {"usp", "h100x8x32", "generator.nodes=5", "fwd", 40, 8},
             /* a running attention kernel holds back transfers (the
              * overlap edges a group keeps only to representatives) */
             {"usp-zigzag", "h200x4", NULL, "fwdbwd", 4, 2}};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++) {
    scenario *s = load(pts[i].sched, pts[i].topo, pts[i].set, pts[i].sp, pts[i].u, false,
                       "causal", pts[i].pass);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const scenario_point *pt = point_of(s, sched_named(pts[i].sched));
    uint32_t u = pts[i].u ? pts[i].u : 8, n = pt->w.gpus;
    orbits *o = attn_orbits(pt->sched, &pt->w, s->topo);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(o->mult, u);
    for (uint32_t g = 0; g < n; g++) CU_ASSERT_EQUAL(o->rep[g], g - g % u);
    plan *full = pt->sched->build(&pt->w, s->topo, false);
    plan *q = plan_quotient_of(full, o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    /* the representatives' tasks and the transfers leaving them, only */
    CU_ASSERT_EQUAL(compute_tasks(q) * u, compute_tasks(full));
    CU_ASSERT_FALSE(q->has_lockstep);
    for (guint k = 0; k < q->tasks->len; k++) {
      const plan_task *t = plan_task_at(q, k);
      if (t->kind == TASK_COMPUTE) CU_ASSERT(orbits_is_rep(o, t->gpu));
      for (uint32_t x = 0; t->kind == TASK_COMM && x < t->n_xfer; x++) {
        plan_xfer e = plan_xfer_at(q, t, x);
        CU_ASSERT(orbits_is_rep(o, e.src) && orbits_is_rep(o, e.dst));
        CU_ASSERT_EQUAL(o->rep[plan_xfer_to(q, t, x)], e.dst);
      }
    }
    check_same_replay(full, q, s->topo, o);
    plan_free(q);
    plan_free(full);
    orbits_free(o);
    scenario_free(s);
  }
}

/* No orbits where replaying one GPU a group would not be exact or not
 * worth it: a full mask (the plan is lockstep already), a torus (routes
 * the check cannot map), groups across nodes (u 16 on nodes of 8: the
 * turn carries a node onto GPUs of two). */
static void t_orbits_refused(void) {
  static const struct {
    const char *topo, *mask;
    uint32_t sp, u;
  } pts[] = {{"h100x8x4", "full", 32, 0}, {"torus4x4", "causal", 16, 4},
             {"h100x8x4", "causal", 32, 16}};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++) {
    scenario *s = load("usp", pts[i].topo, NULL, pts[i].sp, pts[i].u, false, pts[i].mask, "fwd");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const scenario_point *pt = point_of(s, &sched_usp);
    orbits *o = attn_orbits(pt->sched, &pt->w, s->topo);
    if (o) fprintf(stderr, "\n  usp %s %s u %u: orbits where none are exact\n", pts[i].topo,
                   pts[i].mask, pts[i].u);
    CU_ASSERT_PTR_NULL(o);
    orbits_free(o);
    scenario_free(s);
  }
}

/* A causal point of `sched` with its Ulysses option `opt` (and another
 * option, NULL: none), 4,096 tokens per GPU. */
static scenario *load_opts(const char *sched, const char *topo, const char *set, uint32_t sp,
                           const char *opt, const char *opt2, const char *pass) {
  g_autofree char *sps = g_strdup_printf("%u", sp);
  g_autofree char *seq = g_strdup_printf("%u", sp * 4096);
  char *sets[] = {(char *)set, NULL};
  char *opts[] = {(char *)opt, (char *)opt2, NULL};
  scenario_overrides ov = {.topology = topo, .sched = sched, .sp = sps, .seq = seq,
                           .mask = "causal", .pass = pass, .set = set ? sets : NULL,
                           .sched_opts = opts, .strict = true};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, &ov, &err);
  if (!s) fprintf(stderr, "\n  %s %s sp %u %s: %s\n", sched, topo, sp, opt, err->message);
  return s;
}

/* The plan of one representative per orbit of `turn` (block: the
 * scheduler's turn inside blocks of its groups, 0: whole) replayed
 * against every GPU: every figure within 1e-9; its representatives'
 * tasks only.  false where the turn is refused (none, or no automorphism
 * of the topology). */
static bool turn_equals_full(const scenario_point *pt, const topology *t, uint32_t block,
                             uint32_t mult) {
  g_autofree uint32_t *pi = g_new(uint32_t, t->n_gpus);
  for (uint32_t g = 0; g < t->n_gpus; g++) pi[g] = g;
  if (!pt->sched->turn(&pt->w, t, block, pi)) return false;
  const uint32_t *gens[] = {pi};
  orbits *o = orbits_new(t, gens, 1);
  if (!o) return false;
  CU_ASSERT_EQUAL(o->mult, mult);
  plan *full = pt->sched->build(&pt->w, t, false);
  plan *q = plan_quotient_of(full, o);
  if (!q) fprintf(stderr, "\n  %s: no quotient\n", pt->sched->name);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  CU_ASSERT_EQUAL(compute_tasks(q) * mult, compute_tasks(full));
  for (guint k = 0; k < q->tasks->len; k++) {
    const plan_task *x = plan_task_at(q, k);
    if (x->kind == TASK_COMPUTE) CU_ASSERT(orbits_is_rep(o, x->gpu));
  }
  check_same_replay(full, q, t, o);
  plan_free(q);
  plan_free(full);
  orbits_free(o);
  return true;
}

/* Double ring with a head-parallel degree is USP's Ulysses groups around
 * a double ring (doublering.c): the same turn maps its causal plan onto
 * itself (head-first: a group is consecutive GPUs; context-first: GPUs r
 * apart, the turn moving each node of h100x8x4 to the next), and so does
 * the turn inside blocks of a group, for it and for USP (what
 * layer_orbits_sched takes where a group spans nodes); attn_orbits
 * replays one GPU a group, refused under a full mask. */
static void t_double_ring_turn(void) {
  static const struct {
    const char *sched, *topo, *set, *opt, *opt2, *pass;
    uint32_t sp, u, block;
  } pts[] = {
      {"double-ring", "h100x8", NULL, "double_ring_ulysses=4", NULL, "fwdbwd", 8, 4, 0},
      {"double-ring", "h100x8", "generator.gpus=16", "double_ring_ulysses=2",
       "double_ring_inner=4", "fwdbwd", 16, 2, 0},
      {"double-ring", "h100x8x4", NULL, "double_ring_ulysses=8", NULL, "fwdbwd", 32, 8, 0},
      {"double-ring", "h100x8x4", NULL, "double_ring_ulysses=4", "double_ring_context_first=true",
       "fwdbwd", 32, 4, 0},
      {"double-ring", "h100x8x4", NULL, "double_ring_ulysses=8", NULL, "fwd", 32, 8, 4},
      {"double-ring", "h100x8", "generator.gpus=16", "double_ring_ulysses=8", NULL, "bwd", 16, 8, 2},
      {"usp", "h100x8x4", NULL, "usp_ulysses=8", NULL, "fwdbwd", 32, 8, 4},
      {"usp-zigzag", "h100x8x4", NULL, "usp_ulysses=16", NULL, "fwdbwd", 32, 16, 8}};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++) {
    scenario *s = load_opts(pts[i].sched, pts[i].topo, pts[i].set, pts[i].sp, pts[i].opt,
                            pts[i].opt2, pts[i].pass);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const scenario_point *pt = &g_array_index(s->points, scenario_point, 0);
    uint32_t k = pts[i].block ? pts[i].block : pts[i].u;
    bool ran = turn_equals_full(pt, s->topo, pts[i].block, k);
    if (!ran) fprintf(stderr, "\n  %s %s %s: turn refused\n", pts[i].sched, pts[i].topo, pts[i].opt);
    CU_ASSERT_TRUE(ran);
    if (!pts[i].block) {
      orbits *o = attn_orbits(pt->sched, &pt->w, s->topo);
      CU_ASSERT_PTR_NOT_NULL(o);
      if (o) CU_ASSERT_EQUAL(o->mult, pts[i].u);
      orbits_free(o);
    }
    scenario_free(s);
  }
  /* a full mask: lockstep, no turn */
  scenario *s = load_opts("double-ring", "h100x8", NULL, 8, "double_ring_ulysses=4", NULL, "fwd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  scenario_point *pt = &g_array_index(s->points, scenario_point, 0);
  pt->w.causal = false;
  CU_ASSERT_PTR_NULL(attn_orbits(pt->sched, &pt->w, s->topo));
  scenario_free(s);
}

int main(void) {
  static const test_case cases[] = {TEST(t_usp_lockstep_equals_per_gpu),
                                    TEST(t_ulysses_lockstep_equals_per_gpu),
                                    TEST(t_a2a_schedule), TEST(t_causal_groups_coincide),
                                    TEST(t_orbits_equal_full), TEST(t_orbits_refused),
                                    TEST(t_double_ring_turn),
                                    {NULL, NULL}};
  return test_run("usp", cases);
}
