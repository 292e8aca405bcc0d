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
  CU_ASSERT_CLOSE(compute_attn_s(&m, f, 8192, 8192, false, false), 10e-6 + f / 500e12, 1e-12);
  CU_ASSERT_CLOSE(compute_attn_s(&m, f, 8192, 8192, false, true), 10e-6 + 2.8 * f / 500e12, 1e-12);
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
      double ef = compute_attn_s(&t->compute, f, q, k, causal, false) / (json_object_get_double(ms) * 1e-3) - 1;
      double eb = compute_attn_s(&t->compute, f, q, k, causal, true) / (json_object_get_double(bwd) * 1e-3) - 1;
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
        double s = compute_attn_s(&t->compute, f, 1000, 1000 * (1 + asp), c, bwd);
        CU_ASSERT(s > 0);
        CU_ASSERT(s >= prev * (1 - 1e-12));
        prev = s;
      }
    }
  /* backward from measured backward times: 2.5x-3.2x forward */
  double f = compute_attn_flops(1, 32, 128, 12288, 12288, false);
  double r = compute_attn_s(&t->compute, f, 12288, 12288, false, true) /
             compute_attn_s(&t->compute, f, 12288, 12288, false, false);
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

int main(void) {
  static const test_case cases[] = {TEST(t_roofline), TEST(t_table_matches_measurements),
                                    TEST(t_table_monotone), TEST(t_merge), {NULL, NULL}};
  return test_run("compute", cases);
}
