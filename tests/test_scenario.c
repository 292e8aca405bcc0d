/* scenario: files, overrides, sweep expansion and the errors users see. */
#include <math.h>

#include "layers.h"
#include "scenario.h"
#include "sim.h"
#include "testutil.h"
#include "verdict.h"

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
  expect_error("tests/bad/scen_heads.json", none, "field 'model.heads': expected a whole number from 1 to 1024");
  expect_error("tests/bad/scen_kv.json", none, "field 'model.kv_heads': expected a divisor");
  expect_error("tests/bad/scen_topology.json", none, "field 'topology': topology file");
  expect_error("tests/bad/scen_typo.json", none, "field 'seqlen': unknown field");
  expect_error("tests/bad/scen_mask.json", none, "field 'mask': expected full or causal");
  scenario_overrides sp = {.sp = "0"};
  expect_error("scenarios/h100x8.json", sp, "command line: option '--sp': expected a whole number from 1 to 16384, got \"0\"");
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

/* Sweep lists are sets, never empty; "all" is every scheduler that runs
 * the model's layers. */
static void t_sweep_lists(void) {
  scenario_overrides dup_seq = {.topology = "h100x8", .seq = "32K,64K,32768"};
  expect_error(NULL, dup_seq, "option '--seq': \"32K\" and \"32768\" are the same value (32768)");
  scenario_overrides dup_sp = {.topology = "h100x8", .seq = "32K", .sp = "2,4,2"};
  expect_error(NULL, dup_sp, "option '--sp': \"2\" is given twice");
  scenario_overrides dup_sched = {.topology = "h100x8", .seq = "32K", .sched = "tasp,ring,tasp"};
  expect_error(NULL, dup_sched, "option '--sched': \"tasp\" is given twice");
  scenario_overrides empty = {.topology = "h100x8", .mask = ""};
  expect_error(NULL, empty, "option '--mask': expected at least one value, got an empty list");
  scenario_overrides all_and = {.topology = "h100x8", .seq = "32K", .sched = "ring,all"};
  expect_error(NULL, all_and, "\"all\" names every scheduler");
  g_autoptr(GError) err = NULL;
  scenario_overrides all = {.topology = "h100x8", .seq = "32K", .sp = "8", .sched = "all",
                            .attention = "linear"};
  scenario *s = scenario_load(NULL, &all, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  guint want = 0;
  for (const sched_ops *const *a = sched_all(); *a; a++)
    want += ((*a)->attention & SCHED_RUNS(ATTN_LINEAR)) != 0;
  CU_ASSERT_EQUAL(s->scheds->len, want);
  CU_ASSERT_EQUAL(s->scheds->len, 5); /* ring, ulysses, lasp, lasp2, lasp2h */
  for (guint k = 0; k < s->scheds->len; k++)
    CU_ASSERT_TRUE(sched_check_attention(s->scheds->pdata[k], &s->model, NULL));
  scenario_free(s);
}

/* Bounds: at the bound is accepted, one past it refused. */
static void t_bounds(void) {
  g_autoptr(GError) err = NULL;
  /* 1G tokens x 128 heads x 128 x 4 bytes (fp32 gradients) = 2^46 */
  scenario_overrides at = {.topology = "h100x8", .seq = "1G", .sp = "8", .sched = "ring",
                           .heads = "128", .kv_heads = "8"};
  scenario *s = scenario_load(NULL, &at, &err);
  CU_ASSERT_PTR_NOT_NULL(s);
  scenario_free(s);
  scenario_overrides past = at;
  past.heads = "136";
  expect_error(NULL, past, "option '--seq': batch 1 x 1G tokens x 136 heads x head dim 128 x 4 "
               "bytes is 68 TiB in one tensor of the layer; expected at most 64 TiB");
  scenario_overrides seq = {.topology = "h100x8", .seq = "1G,1025M", .sched = "ring"};
  expect_error(NULL, seq, "option '--seq': expected a token count from 1 to 1G (1073741824), "
               "got 1025M");
  scenario_overrides heads = {.topology = "h100x8", .seq = "32K", .heads = "1025"};
  expect_error(NULL, heads, "option '--heads': expected a whole number from 1 to 1024");
  scenario_overrides heads_ok = {.topology = "h100x8", .seq = "32K", .sp = "8",
                                 .sched = "ring", .heads = "1024", .kv_heads = "1024",
                                 .head_dim = "1024"};
  s = scenario_load(NULL, &heads_ok, &err);
  CU_ASSERT_PTR_NOT_NULL(s);
  scenario_free(s);
  scenario_overrides batch = {.topology = "h100x8", .seq = "16K", .batch = "65536", .sp = "8",
                              .sched = "ring"};
  s = scenario_load(NULL, &batch, &err);  /* 2^30 tokens: at the bound */
  CU_ASSERT_PTR_NOT_NULL(s);
  scenario_free(s);
  batch.seq = "16K,32K";
  expect_error(NULL, batch, "option '--seq': batch 65536 x 32K tokens is");
  scenario_overrides usp = {.topology = "h100x8", .seq = "32K", .usp_ulysses = "16385"};
  expect_error(NULL, usp, "option '--usp-ulysses': expected a whole number from 1 to 16384");
}

/* A point a scheduler cannot run is an n/a point with the reason; the
 * rest run; --strict, or no shown point that can run, is an error. */
static void t_na_points(void) {
  g_autoptr(GError) err = NULL;
  scenario_overrides ov = {.topology = "h100x8", .seq = "32K", .sp = "1,8",
                           .sched = "tasp,ring"};
  scenario *s = scenario_load(NULL, &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 4);
  const scenario_point *p0 = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_PTR_EQUAL(p0->sched, &sched_tasp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p0->na);
  CU_ASSERT_STRING_EQUAL(p0->na, "tasp needs an SP degree of at least 2");
  for (guint i = 1; i < 4; i++) CU_ASSERT_PTR_NULL(g_array_index(s->points, scenario_point, i).na);

  /* sim: the n/a row is not run, has no speedups; the others rank alone */
  sim_opts so = {.jobs = 1};
  GPtrArray *res = sim_run_all(s, &so);
  CU_ASSERT_EQUAL_FATAL(res->len, 4);
  sim_result *na = res->pdata[0], *ring1 = res->pdata[1], *tasp8 = res->pdata[2];
  CU_ASSERT_PTR_NULL(na->r);
  CU_ASSERT_TRUE(isnan(na->speedup_vs_ring) && isnan(na->speedup_vs_best));
  CU_ASSERT_STRING_EQUAL(na->baseline, "");
  CU_ASSERT_DOUBLE_EQUAL(ring1->speedup_vs_best, 1.0, 1e-12); /* the only one that ran */
  CU_ASSERT_STRING_EQUAL(ring1->baseline, "ring");
  CU_ASSERT_PTR_NULL(ring1->ring_na);
  CU_ASSERT_PTR_NOT_NULL(tasp8->r);
  g_autofree char *v = verdict_line(s->topo, (sim_result *const *)res->pdata, 2);
  CU_ASSERT_TRUE(g_str_has_prefix(v, "ring only ("));
  CU_ASSERT_TRUE(g_str_has_suffix(v, "); n/a: tasp"));
  g_autofree char *none = verdict_line(s->topo, (sim_result *const *)res->pdata, 1);
  CU_ASSERT_STRING_EQUAL(none, "no scheduler can run this point; n/a: tasp");
  g_ptr_array_free(res, TRUE);
  scenario_free(s);

  ov.strict = true;
  expect_error(NULL, ov, "option '--sp': tasp at seq_len 32K, SP 1: tasp needs an SP degree");
  /* no shown point can run: the first objection is the error */
  scenario_overrides none_ran = {.topology = "h100x8", .seq = "32K", .sp = "1", .sched = "tasp"};
  expect_error(NULL, none_ran, "option '--sp': tasp at seq_len 32K, SP 1");
  /* bad input stays an error even beside points that run: malformed
   * given cycles, a scheduler that does not run the layers */
  scenario_overrides cyc = {.topology = "h200x4", .seq = "6K", .sp = "4", .sched = "ring,tasp",
                            .tasp_cycles = "0-1-2,0-3-2-1"};
  expect_error(NULL, cyc, "option '--tasp-cycles': tasp at seq_len 6K, SP 4: ");
  scenario_overrides lin = {.topology = "h100x8", .seq = "32K", .sched = "ring,tasp",
                            .attention = "linear"};
  expect_error(NULL, lin, "option '--sched': tasp does not run linear-attention layers");
  /* the hidden ring cannot run: its reason reaches every row */
  scenario_overrides hid = {.topology = "h100x8", .seq = "1001,32K", .sp = "8",
                            .sched = "zigzag"};
  s = scenario_load(NULL, &hid, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  res = sim_run_all(s, &so);
  CU_ASSERT_EQUAL_FATAL(res->len, 2);
  sim_result *z = res->pdata[0];
  CU_ASSERT_PTR_NULL(z->r);
  CU_ASSERT_PTR_NOT_NULL(z->ring_na);
  CU_ASSERT_PTR_NULL(((sim_result *)res->pdata[1])->ring_na);
  CU_ASSERT_FALSE(isnan(((sim_result *)res->pdata[1])->speedup_vs_ring));
  g_ptr_array_free(res, TRUE);
  scenario_free(s);
}

int main(void) {
  static const test_case cases[] = {TEST(t_h100x8_points), TEST(t_overrides),
                                    TEST(t_topology_only), TEST(t_errors), TEST(t_layers),
                                    TEST(t_sweep_lists), TEST(t_bounds), TEST(t_na_points),
                                    {NULL, NULL}};
  return test_run("scenario", cases);
}
