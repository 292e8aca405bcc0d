/* Bundles of alike flows (net.h) and lockstep plans (plan.h) against the
 * reference, every GPU's tasks and every flow on its own: the same step
 * times, busy times and channel bytes, to 1e-9 relative, for every
 * scheduler on the bundled topologies at 8 to 64 GPUs, and for random flow
 * sets with asymmetric sizes, caps, routes and start times.  The reference
 * plan records segments, so it never takes the lockstep path: a scheduler
 * that called unlike steps alike would differ here. */
#include <math.h>

#include "net.h"
#include "scenario.h"
#include "sched/sched.h"
#include "sim.h"
#include "testutil.h"

static bool close_rel(double a, double b) {
  return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) + 1e-15;
}

static exec_result *run(const scenario *s, bool reference) {
  const scenario_point *pt = &g_array_index(s->points, scenario_point, 0);
  exec_opts eo = {.per_flow = reference};
  plan *p = pt->sched->build(&pt->w, s->topo, reference);
  exec_result *r = exec_run(p, s->topo, &eo);
  plan_free(p);
  return r;
}

/* Every figure of one point, bundled and per flow; returns whether the
 * bundled run used fewer bundles than flows. */
static bool compare_point(const char *topo, const char *sched, const char *sp, const char *seq,
                          const char *mask, const char *attention, uint32_t *ran) {
  scenario_overrides ov = {.topology = topo, .sched = sched, .seq = seq, .sp = sp,
                           .mask = mask, .pass = "fwdbwd", .attention = attention};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, &ov, &err);
  if (!s) return false;  /* a scheduler that cannot run this shape here */
  exec_result *x = run(s, false), *y = run(s, true);
  bool ok = close_rel(x->step_s, y->step_s) && close_rel(x->exposed_s, y->exposed_s) &&
            close_rel(x->comm_s, y->comm_s) && close_rel(x->imbalance_s, y->imbalance_s);
  for (uint32_t g = 0; g < x->n_gpus; g++)
    ok = ok && close_rel(x->gpu_finish_s[g], y->gpu_finish_s[g]) &&
         close_rel(x->gpu_comm_s[g], y->gpu_comm_s[g]);
  for (uint32_t c = 0; c < x->n_chan; c++)
    ok = ok && close_rel(x->chan_bytes[c], y->chan_bytes[c]) &&
         close_rel(x->chan_busy_s[c], y->chan_busy_s[c]);
  if (!ok)
    fprintf(stderr, "\n  %s %s sp %s %s %s: bundled %.12g s, per flow %.12g s\n", topo, sched,
            sp, mask, attention, x->step_s, y->step_s);
  CU_ASSERT(ok);
  CU_ASSERT_EQUAL(x->flows, y->flows);
  CU_ASSERT_EQUAL(y->bundles, y->flows);
  bool fewer = x->bundles < x->flows;
  (*ran)++;
  exec_result_free(x);
  exec_result_free(y);
  scenario_free(s);
  return fewer;
}

static void t_schedulers_bundled_equal_per_flow(void) {
  /* 192K: TASP's pieces uneven (sizes differ inside one all-to-all, so
   * bundles split); 189K = 64 x 63 x 48 tokens: even pieces at 64 GPUs,
   * whose uneven per-flow reference would take minutes */
  static const struct { const char *topo, *sp, *seq; } topos[] = {
      {"h100x8", "8", "192K"},      {"h100x8x2", "16", "192K"},  {"h100x8x4", "32", "192K"},
      {"h100x8x8", "64", "189K"},   {"mi300x8", "8", "192K"},    {"torus4x4", "16", "192K"},
      {"torus4x4x4", "64", "189K"}, {"h100x8x4", "24", "192K"}};
  uint32_t ran = 0, bundled = 0;
  for (size_t t = 0; t < G_N_ELEMENTS(topos); t++)
    for (const sched_ops *const *s = sched_all(); *s; s++)
      for (int causal = 0; causal < 2; causal++) {
        const char *mask = causal ? "causal" : "full";
        const char *att = (*s)->attention & SCHED_RUNS(ATTN_SOFTMAX) || !(*s)->attention
                              ? "softmax" : "linear";
        bundled += compare_point(topos[t].topo, (*s)->name, topos[t].sp, topos[t].seq, mask,
                                 att, &ran);
      }
  /* most points ran (a few schedulers refuse a shape), and bundling did
   * bundle somewhere */
  CU_ASSERT(ran >= 150);
  CU_ASSERT(bundled >= ran / 2);
}

/* ---- random flow sets straight on the network ---- */

static double ends[2][64];
static engine *g_eng;
static int g_mode;

static void on_done(void *ctx, uint64_t tag, const net_member *m, uint32_t count) {
  (void)ctx;
  (void)tag;
  for (uint32_t i = 0; i < count; i++) ends[g_mode][m[i].id] = engine_now(g_eng);
}

typedef struct {
  net *n;
  const net_member *m;
  uint32_t count, hops;
  double bytes, cap, lat;
} later;

static void start_later(void *ctx, uint64_t arg) {
  (void)arg;
  later *l = ctx;
  net_bundle_start(l->n, l->m, l->count, l->hops, l->lat, l->bytes, l->cap, on_done, NULL, 0);
}

/* Groups of flows over a small switch (tx/rx per node, a few shared
 * trunks), each group started as one bundle at its own time: sizes, caps
 * and routes differ between groups and the routes inside a group are not
 * symmetric, so bundles must split where their flows' rates differ. */
static void t_random_sets_bundled_equal_per_flow(void) {
  GRand *rng = g_rand_new_with_seed(11);
  uint32_t splits = 0;
  for (int iter = 0; iter < 200; iter++) {
    enum { NODES = 6, CH = 2 * NODES + 2, MAXF = 64 };
    double cap[CH];
    for (int c = 0; c < CH; c++) cap[c] = g_rand_double_range(rng, 10, 100);
    if (g_rand_boolean(rng)) for (int c = 0; c < 2 * NODES; c++) cap[c] = 50;  /* symmetric */
    static uint32_t routes[MAXF][3];
    static net_member members[MAXF];
    later groups[8];
    uint32_t ng = (uint32_t)g_rand_int_range(rng, 1, 9), nf = 0;
    for (uint32_t gi = 0; gi < ng; gi++) {
      uint32_t count = (uint32_t)g_rand_int_range(rng, 1, 9), hops = 2 + g_rand_boolean(rng);
      later *l = &groups[gi];
      *l = (later){NULL, &members[nf], 0, hops, g_rand_double_range(rng, 1e3, 1e6),
                   g_rand_boolean(rng) ? g_rand_double_range(rng, 5, 60) : 0,
                   g_rand_double_range(rng, 0, 1e-6)};
      for (uint32_t i = 0; i < count && nf < MAXF; i++, nf++, l->count++) {
        uint32_t s = (uint32_t)g_rand_int_range(rng, 0, NODES);
        uint32_t d = (s + (uint32_t)g_rand_int_range(rng, 1, NODES)) % NODES;
        routes[nf][0] = 2 * s;
        routes[nf][1] = 2 * d + 1;
        routes[nf][2] = 2 * NODES + (uint32_t)g_rand_int_range(rng, 0, 2);
        members[nf] = (net_member){routes[nf], nf};
      }
    }
    double when[8];
    for (uint32_t gi = 0; gi < ng; gi++) when[gi] = g_rand_boolean(rng) ? 0 : 1e-5 * gi;
    uint64_t bundles[2];
    for (g_mode = 0; g_mode < 2; g_mode++) {
      engine *e = g_eng = engine_new();
      net *n = net_new(e, CH, cap);
      net_set_per_flow(n, g_mode == 1);
      for (uint32_t gi = 0; gi < ng; gi++) {
        groups[gi].n = n;
        engine_at(e, when[gi], start_later, &groups[gi], 0);
      }
      engine_run(e);
      bundles[g_mode] = net_bundles_started(n);
      net_free(n);
      engine_free(e);
    }
    for (uint32_t f = 0; f < nf; f++) CU_ASSERT(close_rel(ends[0][f], ends[1][f]));
    CU_ASSERT_EQUAL(bundles[1], nf);
    splits += bundles[0] > ng;
  }
  CU_ASSERT(splits > 20);  /* asymmetric sets did split */
  g_rand_free(rng);
}

int main(void) {
  static const test_case cases[] = {TEST(t_random_sets_bundled_equal_per_flow),
                                    TEST(t_schedulers_bundled_equal_per_flow), {NULL, NULL}};
  return test_run("bundles", cases);
}
