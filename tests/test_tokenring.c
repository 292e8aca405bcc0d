/* tokenring: the full-mask lockstep plan (GPU 0's tasks for all, each
 * step's transfers along shift patterns) against the per-GPU plan it
 * stands for (the plan that records segments, built GPU by GPU: the
 * reference), on NVSwitch domains of 6, 12 and 24 GPUs, on nodes over NIC
 * rails where the hand-backs of a step cross nodes on some GPUs and not
 * others (h100x8x4 at 12, 24 and 32; h100x8x32 of 3 and 5 nodes), on a
 * full mesh and on a torus: its expansion is the per-GPU plan task by
 * task and transfer by transfer, and every figure of the two runs (step,
 * busy and finish per GPU, the idle split, bytes and busy time per
 * channel, memory peaks and what is live at them) agrees to 1e-9.  The
 * expanded lockstep plan's own schedule, read without segments: every GPU
 * attends every owner's queries once a pass, every group a permutation
 * (bytes sent = received), hand-backs to the owner.  The causal plan
 * (zigzag layout) stays per GPU. */
#include <math.h>
#include <string.h>

#include "exec.h"
#include "scenario.h"
#include "sched/sched.h"
#include "plan_same.h"
#include "testutil.h"

/* The tokenring point of a topology (with a --set, NULL: none), SP sp,
 * 4,096 tokens per GPU. */
static scenario *load(const char *topo, const char *set, uint32_t sp, const char *mask,
                      const char *pass) {
  g_autofree char *sps = g_strdup_printf("%u", sp);
  g_autofree char *seq = g_strdup_printf("%u", sp * 4096);
  char *sets[] = {(char *)set, NULL};
  scenario_overrides ov = {.topology = topo, .sched = "tokenring", .sp = sps, .seq = seq,
                           .mask = mask, .pass = pass, .set = set ? sets : NULL,
                           .strict = true};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, &ov, &err);
  if (!s) fprintf(stderr, "\n  %s sp %u: %s\n", topo, sp, err->message);
  return s;
}

static const scenario_point *point_of(const scenario *s) {
  for (guint i = 0; i < s->points->len; i++) {
    const scenario_point *pt = &g_array_index(s->points, scenario_point, i);
    if (!pt->hidden && pt->sched == &sched_tokenring) return pt;
  }
  return NULL;
}

/* One full-mask point, both ways. */
static void compare(const char *topo, const char *set, uint32_t sp, const char *pass) {
  scenario *s = load(topo, set, sp, "full", pass);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const scenario_point *pt = point_of(s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(pt);
  uint32_t n = pt->w.gpus;
  plan *l = sched_tokenring.build(&pt->w, s->topo, false);
  plan *r = sched_tokenring.build(&pt->w, s->topo, true);
  /* the lockstep plan: every compute task is for all GPUs, a few per
   * step, and its transfers go along the N-1 shifts, stored once */
  CU_ASSERT_TRUE(l->has_lockstep);
  CU_ASSERT_FALSE(r->has_lockstep);
  uint32_t compute = 0, per_gpu = 0;
  for (guint i = 0; i < l->tasks->len; i++) {
    const plan_task *t = plan_task_at(l, i);
    if (t->kind != TASK_COMPUTE) {
      if (t->n_xfer) CU_ASSERT_PTR_NOT_NULL(plan_task_pattern(l, t));
      continue;
    }
    compute++;
    per_gpu += t->gpu != PLAN_ALL;
  }
  CU_ASSERT_EQUAL(per_gpu, 0);
  CU_ASSERT_TRUE(compute <= 2 * 2 * n + 2);
  CU_ASSERT_EQUAL(l->patterns->len, n - 1);
  CU_ASSERT_EQUAL(l->pairs->len, n * (n - 1));
  plan *e = plan_expand(l);
  bool same = same_structure(e, r);
  if (!same) fprintf(stderr, "\n  %s sp %u %s: expansion differs from the per-GPU plan\n", topo, sp, pass);
  CU_ASSERT_TRUE(same);
  exec_opts o = {0};
  exec_result *x = exec_run(l, s->topo, &o), *y = exec_run(r, s->topo, &o);
  bool ok = same_figures(x, y);
  if (!ok)
    fprintf(stderr, "\n  %s sp %u %s: lockstep %.12g s %.12g B, per GPU %.12g s %.12g B\n", topo,
            sp, pass, x->step_s, x->peak_bytes, y->step_s, y->peak_bytes);
  CU_ASSERT_TRUE(ok);
  CU_ASSERT_TRUE(x->tasks < y->tasks); /* the lockstep plan was replayed, not its expansion */
  exec_result_free(x);
  exec_result_free(y);
  plan_free(e);
  plan_free(l);
  plan_free(r);
  scenario_free(s);
}

static void t_full_lockstep_equals_per_gpu(void) {
  /* NVSwitch domains of 6, 12, 24 (generator.gpus) and 8; nodes of 8
   * over NIC rails, runs not whole nodes (12, 24 of 32) and whole
   * (32; 3 and 5 nodes of h100x8x32's generator); a full mesh (mi300x8)
   * and a torus (multi-hop routes) */
  static const struct {
    const char *topo, *set;
    uint32_t sp;
  } pts[] = {{"h100x8", "generator.gpus=6", 6},    {"h100x8", "generator.gpus=12", 12},
             {"h100x8", "generator.gpus=24", 24},  {"h100x8", NULL, 8},
             {"h100x8x4", NULL, 12},               {"h100x8x4", NULL, 24},
             {"h100x8x4", NULL, 32},               {"h100x8x32", "generator.nodes=3", 24},
             {"h100x8x32", "generator.nodes=5", 40}, {"mi300x8", NULL, 8},
             {"torus4x4", NULL, 16}};
  static const char *const passes[] = {"fwd", "bwd", "fwdbwd"};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++)
    for (size_t p = 0; p < G_N_ELEMENTS(passes); p++)
      compare(pts[i].topo, pts[i].set, pts[i].sp, passes[p]);
}

/* The schedule of the expanded lockstep plan (no segments: the step
 * says whose queries a kernel holds, owner (r - t) mod N): each pass, every
 * GPU runs one c x c kernel a step, so it attends every owner's queries
 * to its KV exactly once; every group is a permutation (each GPU sends
 * once and receives once: bytes sent = received), the query hand-on a
 * shift by +1 at steps 0..N-2 carrying the queries (and backward dO, O,
 * lse), step t's hand-back (t > 0) a shift by -t, to the owner, carrying
 * c rows of block output and lse (backward: float32 dQ); forward, every
 * GPU merges N-1 blocks, each after the hand-back that brought it. */
static void t_lockstep_schedule(void) {
  static const uint32_t sizes[] = {2, 5, 6, 12};
  for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
    uint32_t n = sizes[i];
    g_autofree char *set = g_strdup_printf("generator.gpus=%u", n);
    scenario *s = load("h100x8", set, n, "full", "fwdbwd");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const workload *w = &point_of(s)->w;
    plan *l = sched_tokenring.build(w, s->topo, false);
    CU_ASSERT_TRUE_FATAL(l->has_lockstep);
    plan *p = plan_expand(l);
    guint barrier = p->pass_barrier; /* between the passes */
    CU_ASSERT_TRUE_FATAL(barrier < p->tasks->len);
    CU_ASSERT_EQUAL_FATAL(plan_task_at(p, barrier)->api, COMM_BARRIER);
    double c = (double)w->seq_len / n, row = (double)w->batch * w->heads * w->head_dim;
    double lse = 4.0 * w->batch * w->heads, e = w->elem_bytes;
    for (int bwd = 0; bwd < 2; bwd++) {
      guint from = bwd ? barrier + 1 : 0, to = bwd ? p->tasks->len : barrier;
      double travel = bwd ? c * (3 * row * e + lse) : c * row * e;
      double back = bwd ? c * row * w->grad_bytes : c * (row * e + lse);
      g_autofree uint32_t *kernels = g_new0(uint32_t, (size_t)n * n);
      g_autofree uint32_t *merges = g_new0(uint32_t, n);
      g_autofree uint32_t *hand_on = g_new0(uint32_t, n), *hand_back = g_new0(uint32_t, n);
      g_autofree double *sent = g_new0(double, n), *recv = g_new0(double, n);
      for (guint k = from; k < to; k++) {
        const plan_task *t = plan_task_at(p, k);
        if (t->kind == TASK_COMPUTE && t->op.kind == OP_ATTN) {
          CU_ASSERT_TRUE(t->op.sq == c && t->op.sk == c && t->op.pairs == c * c && !t->op.causal);
          kernels[(size_t)t->gpu * n + t->step]++;
        } else if (t->kind == TASK_COMPUTE && t->op.kind == OP_MERGE) {
          merges[t->gpu]++;
          /* after the group of the step before, which brought its block */
          bool after = false;
          for (uint32_t d = 0; d < t->n_dep; d++) {
            const plan_task *g = plan_task_at(p, p->deps[t->dep_off + d]);
            after |= g->kind == TASK_COMM && g->step + 1 == t->step;
          }
          CU_ASSERT_TRUE(after);
        } else if (t->kind == TASK_COMM && t->n_xfer) {
          g_autofree uint8_t *out = g_new0(uint8_t, n), *in = g_new0(uint8_t, n);
          plan_xfer x0 = plan_xfer_at(p, t, 0);
          uint32_t shift = (x0.dst + n - x0.src) % n;
          bool is_back = x0.bytes == back; /* else a hand-on, checked as one */
          for (uint32_t x = 0; x < t->n_xfer; x++) {
            plan_xfer y = plan_xfer_at(p, t, x);
            out[y.src]++;
            in[y.dst]++;
            sent[y.src] += y.bytes;
            recv[y.dst] += y.bytes;
            CU_ASSERT_TRUE((y.dst + n - y.src) % n == shift && y.bytes == x0.bytes);
          }
          for (uint32_t g = 0; g < n; g++) CU_ASSERT_TRUE(out[g] == 1 && in[g] == 1);
          if (is_back) {
            hand_back[t->step]++;
            CU_ASSERT_EQUAL(shift, n - t->step); /* to the owner, r - t */
          } else {
            hand_on[t->step]++;
            CU_ASSERT_EQUAL(x0.bytes, travel);
            CU_ASSERT_EQUAL(shift, 1);
          }
        }
      }
      for (uint32_t g = 0; g < n; g++) {
        for (uint32_t t = 0; t < n; t++) CU_ASSERT_EQUAL(kernels[(size_t)g * n + t], 1);
        CU_ASSERT_EQUAL(hand_on[g], g + 1 < n);
        CU_ASSERT_EQUAL(hand_back[g], g > 0);
        CU_ASSERT_EQUAL(merges[g], bwd ? 0 : n - 1);
        CU_ASSERT_CLOSE(sent[g], (n - 1) * (travel + back), 1e-12);
        CU_ASSERT_CLOSE(recv[g], sent[g], 1e-12);
      }
    }
    plan_free(p);
    plan_free(l);
    scenario_free(s);
  }
}

/* Under a causal mask the zigzag layout gives a step's GPUs blocks of
 * different shapes: the plan stays per GPU, with or without segments. */
static void t_causal_stays_per_gpu(void) {
  scenario *s = load("h100x8x4", NULL, 12, "causal", "fwdbwd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const scenario_point *pt = point_of(s);
  plan *p = sched_tokenring.build(&pt->w, s->topo, false);
  CU_ASSERT_FALSE(p->has_lockstep);
  CU_ASSERT_EQUAL(p->patterns->len, 0);
  plan_free(p);
  scenario_free(s);
}

/* A causal step starts its hand-on and both sizes of hand-back at once;
 * at each port they meet in pairs of unlike bundles, and the rates part
 * only where the short hand-backs end.  The bundled run keeps about four
 * bundles a step (net.h: a bundle is split only where a flow of it has no
 * bottleneck), and every figure equals the per-flow reference's: on one
 * NVSwitch domain and over NIC rails.  Coloured bundle by bundle, the
 * hand-on split one hop per round around the ring and went apart: every
 * flow a bundle. */
static void t_causal_bundles_equal_per_flow(void) {
  static const struct {
    const char *topo, *set;
    uint32_t sp;
    bool rails;
  } pts[] = {{"h100x8", "generator.gpus=48", 48, false}, {"h100x8x4", NULL, 32, true}};
  for (size_t i = 0; i < G_N_ELEMENTS(pts); i++) {
    scenario *s = load(pts[i].topo, pts[i].set, pts[i].sp, "causal", "fwdbwd");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const scenario_point *pt = point_of(s);
    uint32_t n = pt->w.gpus;
    plan *p = sched_tokenring.build(&pt->w, s->topo, false);
    exec_opts bundled = {0}, per_flow = {.per_flow = true};
    exec_result *x = exec_run(p, s->topo, &bundled), *y = exec_run(p, s->topo, &per_flow);
    bool ok = same_figures(x, y);
    if (!ok)
      fprintf(stderr, "\n  %s sp %u causal: bundled %.12g s, per flow %.12g s\n", pts[i].topo,
              n, x->step_s, y->step_s);
    CU_ASSERT_TRUE(ok);
    CU_ASSERT_EQUAL(y->bundles, y->flows);
    CU_ASSERT_EQUAL(x->flows, 2 * 2 * (uint64_t)n * (n - 1)); /* hand-on, hand-back, 2 passes */
    /* one domain: at most four a step and pass; over rails a group's flows
     * are of two kinds (NVLink in a node, NIC across), and bundled by the
     * structure alone these split to 712 of 3,968 */
    if (pts[i].rails) {
      CU_ASSERT_TRUE(x->bundles * 8 < x->flows);
    } else {
      CU_ASSERT_TRUE(x->bundles <= 2 * 4 * (uint64_t)n);
    }
    exec_result_free(x);
    exec_result_free(y);
    plan_free(p);
    scenario_free(s);
  }
}

int main(void) {
  static const test_case cases[] = {TEST(t_full_lockstep_equals_per_gpu),
                                    TEST(t_lockstep_schedule), TEST(t_causal_stays_per_gpu),
                                    TEST(t_causal_bundles_equal_per_flow),
                                    {NULL, NULL}};
  return test_run("tokenring", cases);
}
