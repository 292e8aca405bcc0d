/* scenario: files, overrides, sweep expansion and the errors users see. */
#include "layers.h"
#include "scenario.h"
#include "sim.h"
#include "testutil.h"

static void t_h100x8_points(void) {
  scenario_overrides ov = {0};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load("scenarios/h100x8.json", &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 6 * 3 * 7);
  const scenario_point *p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(p->w.seq_len, 32 * 1024);
  CU_ASSERT_EQUAL(p->w.gpus, 2);
  CU_ASSERT_EQUAL(p->w.kv_heads, 8);
  CU_ASSERT_TRUE(p->w.causal);
  CU_ASSERT_STRING_EQUAL(p->sched->name, "ring");
  scenario_free(s);
}

/* Options override the file; a missing ring is added as a hidden baseline. */
static void t_overrides(void) {
  scenario_overrides ov = {.sched = "tasp", .seq = "1M", .sp = "8", .mask = "full",
                           .heads = "16", .kv_heads = "16", .head_dim = "64", .batch = "2"};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load("scenarios/h100x8.json", &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 2);
  const scenario_point *p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(p->w.seq_len, 1024 * 1024);
  CU_ASSERT_EQUAL(p->w.batch, 2);
  CU_ASSERT_EQUAL(p->w.head_dim, 64);
  CU_ASSERT_FALSE(p->w.causal);
  CU_ASSERT_FALSE(p->hidden);
  CU_ASSERT_TRUE(g_array_index(s->points, scenario_point, 1).hidden);
  scenario_free(s);
}

static void t_topology_only(void) {
  scenario_overrides ov = {.topology = "mi300x8", .seq = "32K"};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 3);  /* ring, zigzag, tasp at SP 8 */
  CU_ASSERT_EQUAL(g_array_index(s->points, scenario_point, 0).w.gpus, 8);
  scenario_free(s);
}

static void expect_error(const char *file, scenario_overrides ov, const char *needle) {
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(file, &ov, &err);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  bool ok = strstr(err->message, needle) != NULL;
  if (!ok) fprintf(stderr, "expected \"%s\" in \"%s\"\n", needle, err->message);
  CU_ASSERT_TRUE(ok);
  scenario_free(s);
}

static void t_errors(void) {
  scenario_overrides none = {0};
  expect_error("tests/bad/scen_sp.json", none,
               "tests/bad/scen_sp.json: field 'sp': SP degree 16 exceeds the 8 GPUs");
  expect_error("tests/bad/scen_sched.json", none,
               "field 'schedulers': unknown scheduler \"ulysses2\" (did you mean ulysses?); expected one of: ring, zigzag, tasp");
  expect_error("tests/bad/scen_seq.json", none,
               "field 'seq_len': expected a positive token count");
  expect_error("tests/bad/scen_indivisible.json", none,
               "field 'seq_len': zigzag at seq_len 1000, SP 8: sequence length 1000 is not divisible");
  expect_error("tests/bad/scen_heads.json", none, "field 'model.heads': expected a whole number >= 1");
  expect_error("tests/bad/scen_kv.json", none, "field 'model.kv_heads': expected a divisor");
  expect_error("tests/bad/scen_topology.json", none, "field 'topology': topology file");
  expect_error("tests/bad/scen_typo.json", none, "field 'seqlen': unknown field");
  expect_error("tests/bad/scen_mask.json", none, "field 'mask': expected full or causal");
  scenario_overrides sp = {.sp = "0"};
  expect_error("scenarios/h100x8.json", sp, "command line: option '--sp': expected a whole number >= 1");
  scenario_overrides seq = {.seq = "-4K"};
  expect_error("scenarios/h100x8.json", seq, "option '--seq'");
  scenario_overrides nothing = {0};
  expect_error(NULL, nothing, "no scenario file and no --topology");
  expect_error("tests/bad/scen_attention.json", none,
               "field 'model.attention': expected softmax or linear, got \"quadratic\"");
  expect_error("tests/bad/scen_layers.json", none, "field 'model.layers[0].count'");
  expect_error("tests/bad/scen_linear_sched.json", none,
               "field 'schedulers': zigzag does not run linear-attention layers (the model has 1 "
               "linear); schedulers that do: ring, ulysses, lasp, lasp2, lasp2h");
  expect_error("tests/bad/scen_hybrid_sched.json", none,
               "field 'schedulers': lasp2 does not run softmax-attention layers (the model has 3 "
               "linear + 1 softmax)");
  scenario_overrides lin = {.attention = "linear", .sched = "tasp"};
  expect_error("scenarios/h100x8.json", lin, "option '--sched': tasp does not run linear");
  scenario_overrides bad_attn = {.attention = "cosine"};
  expect_error("scenarios/h100x8.json", bad_attn,
               "command line: option '--attention': expected softmax or linear");
}

/* model.layers adds up per kind (3 + 3 linear, 1 + 1 softmax: count
 * defaults to 1); --attention makes every layer that kind; a point's
 * figures are the sum over its layers, each kind simulated once. */
static void t_layers(void) {
  scenario_overrides none = {0};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load("tests/data/scen_hybrid.json", &none, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const scenario_point *p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_LINEAR), 6);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_SOFTMAX), 2);
  g_autofree char *mix = layers_text(&p->w);
  CU_ASSERT_STRING_EQUAL(mix, "6 linear + 2 softmax");
  exec_opts o = {0};
  sim_result *all = sim_run_point(s->topo, p, &o);
  double step = 0, flops = 0, bytes0 = 0, compute = 0;
  for (int k = 0; k < ATTN_KINDS; k++) {
    scenario_point one = *p;
    one.w = layers_one(&p->w, (attn_kind)k);
    sim_result *r = sim_run_point(s->topo, &one, &o);
    uint32_t count = layers_count(&p->w, (attn_kind)k);
    step += count * r->r->step_s;
    flops += count * r->r->flops;
    bytes0 += count * r->r->chan_bytes[0];
    compute += count * r->r->gpu_compute_s[3];
    sim_result_free(r);
  }
  CU_ASSERT_CLOSE(all->r->step_s, step, 1e-12);
  CU_ASSERT_CLOSE(all->r->flops, flops, 1e-12);
  CU_ASSERT_CLOSE(all->r->chan_bytes[0], bytes0, 1e-12);
  CU_ASSERT_CLOSE(all->r->gpu_compute_s[3], compute, 1e-12);
  CU_ASSERT(all->r->gpu_finish_s[all->r->last_gpu] <= all->r->step_s * (1 + 1e-12));
  sim_result_free(all);
  scenario_free(s);
  scenario_overrides soft = {.attention = "softmax", .sched = "ring"};
  s = scenario_load("tests/data/scen_hybrid.json", &soft, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_SOFTMAX), 8);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_LINEAR), 0);
  scenario_free(s);
}

int main(void) {
  static const test_case cases[] = {TEST(t_h100x8_points), TEST(t_overrides),
                                    TEST(t_topology_only), TEST(t_errors), TEST(t_layers),
                                    {NULL, NULL}};
  return test_run("scenario", cases);
}
