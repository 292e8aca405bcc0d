/* scenario: files, overrides, sweep expansion and the errors users see. */
#include "scenario.h"
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
}

int main(void) {
  static const test_case cases[] = {TEST(t_h100x8_points), TEST(t_overrides),
                                    TEST(t_topology_only), TEST(t_errors), {NULL, NULL}};
  return test_run("scenario", cases);
}
