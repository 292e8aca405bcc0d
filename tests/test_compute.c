/* compute: the measured table is reproduced and interpolated sanely. */
#include "compute.h"
#include "topology.h"
#include "testutil.h"

static topology *h200(void) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load("topologies/h200x4.json", &err);
  if (!t) fprintf(stderr, "%s\n", err->message);
  return t;
}

static void t_roofline(void) {
  compute_model m;
  compute_model_init(&m);
  m.peak_flops = 1000e12;
  m.efficiency = 0.5;
  m.launch_s = 10e-6;
  double f = compute_attn_flops(1, 32, 128, 8192, 8192, false);
  CU_ASSERT_CLOSE(f, 4.0 * 32 * 8192 * 8192 * 128, 1e-15);
  CU_ASSERT_CLOSE(compute_attn_flops(1, 32, 128, 8192, 8192, true), f / 2, 1e-15);
  CU_ASSERT_CLOSE(compute_attn_s(&m, f, 128, 8192, 8192, false, false), 10e-6 + f / 500e12, 1e-12);
  CU_ASSERT_CLOSE(compute_attn_s(&m, f, 128, 8192, 8192, false, true), 10e-6 + 2.8 * f / 500e12, 1e-12);
  compute_model_clear(&m);
}

/* Every kernel measured on H200 (calibration/h200x4/compute-n4.jsonl) is
 * predicted within 5%, forward and backward. */
static void t_table_matches_measurements(void) {
  topology *t = h200();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  g_autofree char *text = NULL;
  CU_ASSERT_TRUE_FATAL(g_file_get_contents("calibration/h200x4/compute-n4.jsonl", &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  unsigned n = 0;
  double worst = 0;
  for (char **l = lines; *l; l++) {
    json_object *o = json_tokener_parse(*l), *v;
    if (!o) continue;
    if (json_object_object_get_ex(o, "op", &v) && !strcmp(json_object_get_string(v), "attn_fwd")) {
      json_object *sq, *sk, *c, *ms, *bwd, *h, *d, *b;
      json_object_object_get_ex(o, "sq", &sq);
      json_object_object_get_ex(o, "sk", &sk);
      json_object_object_get_ex(o, "causal", &c);
      json_object_object_get_ex(o, "ms", &ms);
      json_object_object_get_ex(o, "bwd_ms_est", &bwd);
      json_object_object_get_ex(o, "H", &h);
      json_object_object_get_ex(o, "D", &d);
      json_object_object_get_ex(o, "B", &b);
      bool causal = json_object_get_boolean(c);
      double f = compute_attn_flops(json_object_get_double(b), json_object_get_double(h),
                                    json_object_get_double(d), json_object_get_double(sq),
                                    json_object_get_double(sk), causal);
      double q = json_object_get_double(sq), k = json_object_get_double(sk);
      double ef = compute_attn_s(&t->compute, f, json_object_get_double(d), q, k, causal, false) / (json_object_get_double(ms) * 1e-3) - 1;
      double eb = compute_attn_s(&t->compute, f, json_object_get_double(d), q, k, causal, true) / (json_object_get_double(bwd) * 1e-3) - 1;
      if (fmax(fabs(ef), fabs(eb)) > 0.05) fprintf(stderr, "sq %d sk %d causal %d: fwd %+.1f%% bwd %+.1f%%\n", json_object_get_int(sq), json_object_get_int(sk), causal, 100 * ef, 100 * eb);
      worst = fmax(worst, fmax(fabs(ef), fabs(eb)));
      n++;
    }
    json_object_put(o);
  }
  CU_ASSERT(n >= 24);
  if (worst > 0.05) fprintf(stderr, "worst kernel error %.1f%%\n", 100 * worst);
  CU_ASSERT(worst <= 0.05);
  topo_free(t);
}

/* Positive and non-decreasing in FLOPs, within and beyond the table. */
static void t_table_monotone(void) {
  topology *t = h200();
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  for (int c = 0; c < 2; c++)
    for (int bwd = 0; bwd < 2; bwd++)
      for (double asp = 0; asp < 4; asp += 0.7) {
      double prev = 0;
      for (double f = 1e6; f < 1e16; f *= 1.1) {
        double s = compute_attn_s(&t->compute, f, 128, 1000, 1000 * (1 + asp), c, bwd);
        CU_ASSERT(s > 0);
        CU_ASSERT(s >= prev * (1 - 1e-12));
        prev = s;
      }
    }
  /* backward from measured backward times: 2.5x-3.2x forward */
  double f = compute_attn_flops(1, 32, 128, 12288, 12288, false);
  double r = compute_attn_s(&t->compute, f, 128, 12288, 12288, false, true) /
             compute_attn_s(&t->compute, f, 128, 12288, 12288, false, false);
  CU_ASSERT(r > 2.5 && r < 3.2);
  topo_free(t);
}

static void t_merge(void) {
  compute_model m;
  compute_model_init(&m);
  m.merge_fixed_s = 10e-6;
  m.merge_s_per_elem = 14e-12;
  CU_ASSERT_CLOSE(compute_merge_s(&m, 1e6), 10e-6 + 14e-6, 1e-12);
  compute_model_clear(&m);
}

/* Linear attention, per head and batch over n tokens, D = 128, blocks of
 * b = 64: causal intra-chunk 4nD² + 4nbD FLOPs forward, 2.5x backward;
 * state and apply 2nD², 2x backward; a decay adds 2nD + nb (intra) and
 * nD + D² (state).  Roofline: launch + the larger of compute at peak x
 * linear_efficiency and bytes at the copy rate. */
static void t_linear_roofline(void) {
  compute_model m;
  compute_model_init(&m);
  m.peak_flops = 100e12;
  m.linear_efficiency = 0.5;
  m.copy_Bps = 1e12;
  m.launch_s = 10e-6;
  double n = 4096, D = 128, b = 64;
  plan_op op = {.kind = OP_LIN_INTRA, .causal = true, .batch = 1, .heads = 2, .head_dim = 128,
                .elem_bytes = 2, .block = 64, .sq = n, .sk = n};
  double f = 2 * (4 * n * D * D + 4 * n * b * D);
  CU_ASSERT_CLOSE(compute_op_flops(&op), f, 1e-15);
  CU_ASSERT_CLOSE(compute_op_bytes(&op), 2 * 4 * n * D * 2, 1e-15);
  CU_ASSERT_CLOSE(compute_op_s(&m, &op), 10e-6 + f / 50e12, 1e-12); /* compute-bound */
  op.backward = true;
  CU_ASSERT_CLOSE(compute_op_flops(&op), 2.5 * f, 1e-15);
  CU_ASSERT_CLOSE(compute_op_bytes(&op), 2 * 7 * n * D * 2, 1e-15);
  op.backward = false;
  op.decay = true;
  CU_ASSERT_CLOSE(compute_op_flops(&op), f + 2 * (2 * n * D + n * b), 1e-15);
  op.decay = false;
  op.causal = false; /* a full-mask chunk: its state and that state applied */
  CU_ASSERT_CLOSE(compute_op_flops(&op), 2 * 4 * n * D * D, 1e-15);
  op.kind = OP_LIN_STATE; /* keys in sk */
  op.sq = 0;
  CU_ASSERT_CLOSE(compute_op_flops(&op), 2 * 2 * n * D * D, 1e-15);
  op.decay = true;
  CU_ASSERT_CLOSE(compute_op_flops(&op), 2 * (2 * n * D * D + n * D + D * D), 1e-15);
  op.decay = false;
  op.backward = true;
  CU_ASSERT_CLOSE(compute_op_flops(&op), 2 * 2 * 2 * n * D * D, 1e-15);
  CU_ASSERT_CLOSE(compute_op_bytes(&op), 2 * (4 * n * D * 2 + 4 * D * D), 1e-15);
  /* an apply with a small head dim is memory-bound: Q, O read and O
   * written, the float32 state read */
  plan_op ap = {.kind = OP_LIN_APPLY, .batch = 1, .heads = 2, .head_dim = 16, .elem_bytes = 2,
                .sq = n, .sk = 8 * n};
  double bytes = 2 * (3 * n * 16 * 2 + 4 * 16 * 16);
  CU_ASSERT_CLOSE(compute_op_flops(&ap), 2 * 2 * n * 16 * 16, 1e-15);
  CU_ASSERT_CLOSE(compute_op_s(&m, &ap), 10e-6 + bytes / 1e12, 1e-12);
  compute_model_clear(&m);
}

/* A measured linear table (compute.linear_table) is used for its kind and
 * mask, reproduces its points, takes the backward ratio where bwd_ms is
 * missing; other kinds keep the roofline; a bad kind is one clear error. */
static void t_linear_table(void) {
  const char *good =
      "{\"model\": \"roofline\", \"peak_tflops\": 100, \"linear_table\": ["
      "{\"kind\": \"intra\", \"heads\": 2, \"head_dim\": 128, \"tokens\": 4096, "
      "\"causal\": true, \"fwd_ms\": 1.0, \"bwd_ms\": 3.0},"
      "{\"kind\": \"intra\", \"heads\": 2, \"head_dim\": 128, \"tokens\": 8192, "
      "\"causal\": true, \"fwd_ms\": 2.2}]}";
  g_autoptr(json_object) o = json_tokener_parse(good);
  compute_model m;
  compute_model_init(&m);
  g_autoptr(GError) err = NULL;
  CU_ASSERT_TRUE_FATAL(compute_model_parse(o, (json_where){"t.json", "compute"}, &m, &err));
  plan_op op = {.kind = OP_LIN_INTRA, .causal = true, .batch = 1, .heads = 2, .head_dim = 128,
                .elem_bytes = 2, .block = 64, .sq = 4096, .sk = 4096};
  CU_ASSERT_CLOSE(compute_op_s(&m, &op), 1.0e-3, 1e-12);
  op.backward = true;
  CU_ASSERT_CLOSE(compute_op_s(&m, &op), 3.0e-3, 1e-12);
  op.sq = op.sk = 8192;
  CU_ASSERT_CLOSE(compute_op_s(&m, &op), 2.5 * 2.2e-3, 1e-12);
  op.backward = false;
  op.sq = op.sk = 6144; /* between the two, log-log */
  double mid = compute_op_s(&m, &op);
  CU_ASSERT(mid > 1.0e-3 && mid < 2.2e-3);
  op.kind = OP_LIN_STATE; /* not measured: roofline */
  CU_ASSERT_CLOSE(compute_op_s(&m, &op),
                  fmax(compute_op_flops(&op) / 100e12, compute_op_bytes(&op) / m.copy_Bps), 1e-12);
  compute_model_clear(&m);
  g_autoptr(json_object) b = json_tokener_parse(
      "{\"model\": \"roofline\", \"peak_tflops\": 100, \"linear_table\": ["
      "{\"kind\": \"diag\", \"heads\": 2, \"head_dim\": 128, \"tokens\": 4096, "
      "\"fwd_ms\": 1.0}]}");
  g_autoptr(GError) e2 = NULL;
  compute_model_init(&m);
  CU_ASSERT_FALSE(compute_model_parse(b, (json_where){"t.json", "compute"}, &m, &e2));
  CU_ASSERT_PTR_NOT_NULL(e2 ? strstr(e2->message, "t.json: field 'compute.linear_table[0].kind': "
                                                   "expected \"intra\", \"state\" or \"apply\"")
                            : NULL);
  compute_model_clear(&m);
}

int main(void) {
  static const test_case cases[] = {TEST(t_roofline), TEST(t_table_matches_measurements),
                                    TEST(t_table_monotone), TEST(t_merge),
                                    TEST(t_linear_roofline), TEST(t_linear_table), {NULL, NULL}};
  return test_run("compute", cases);
}
