/* topology: bundled files load, generators build the right channels and
 * routes, explicit files are checked. */
#include "topology.h"
#include "testutil.h"

static topology *load(const char *f) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load(f, &err);
  if (!t) fprintf(stderr, "%s\n", err->message);
  return t;
}

static void t_bundled_load(void) {
  static const char *files[] = {"topologies/h100x8.json", "topologies/mi300x8.json",
                                "topologies/h100x8x2.json", "topologies/h100x8x4.json",
                                "topologies/h200x4.json", "topologies/gb200nvl72.json",
                                "topologies/torus4x4.json"};
  for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
    topology *t = load(files[i]);
    CU_ASSERT_PTR_NOT_NULL(t);
    topo_free(t);
  }
}

static void t_nvswitch_routes(void) {
  topology *t = load("topologies/h100x8.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 8);
  CU_ASSERT_EQUAL(t->channels->len, 16);
  uint32_t n;
  const uint32_t *r = topo_route_chans(t, 2, 5, &n);
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->name, "gpu2.nvl.tx");
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[1])->name, "gpu5.nvl.rx");
  topo_route_chans(t, 3, 3, &n);
  CU_ASSERT_EQUAL(n, 0);
  topo_free(t);
}

static void t_mesh_and_multinode(void) {
  topology *t = load("topologies/mi300x8.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->channels->len, 56);
  uint32_t n;
  const uint32_t *r = topo_route_chans(t, 6, 1, &n);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->name, "gpu6->gpu1");
  topo_free(t);
  t = load("topologies/h100x8x2.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 16);
  r = topo_route_chans(t, 1, 9, &n);  /* across nodes: NIC to NIC */
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->kind, "nic");
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[1])->name, "gpu9.nic.rx");
  r = topo_route_chans(t, 1, 6, &n);  /* inside a node: NVSwitch */
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->kind, "nvswitch_port");
  topo_free(t);
}

/* Torus: dimension-order shortest routes; only neighbours are direct. */
static void t_torus(void) {
  topology *t = load("topologies/torus4x4.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 16);
  CU_ASSERT_EQUAL(t->channels->len, 64);
  uint32_t n;
  topo_route_chans(t, 0, 1, &n);
  CU_ASSERT_EQUAL(n, 1);
  topo_route_chans(t, 0, 3, &n);   /* wraps around: one hop back */
  CU_ASSERT_EQUAL(n, 1);
  topo_route_chans(t, 0, 10, &n);  /* (2,2): two hops each way */
  CU_ASSERT_EQUAL(n, 4);
  CU_ASSERT_TRUE(t->direct[0 * 16 + 4]);
  CU_ASSERT_FALSE(t->direct[0 * 16 + 5]);
  topo_free(t);
}

/* Each malformed file fails with the file, the field and the expectation. */
static void t_bad_files(void) {
  static const struct { const char *file, *needle; } cases[] = {
      {"tests/bad/topo_syntax.json", "malformed JSON"},
      {"tests/bad/topo_no_comm.json", "field 'comm': missing"},
      {"tests/bad/topo_neg_port.json", "field 'generator.port_gbps': expected a number greater than 0"},
      {"tests/bad/topo_kind.json", "field 'generator.kind': expected one of"},
      {"tests/bad/topo_missing_route.json", "no route from GPU 1 to GPU 0"},
      {"tests/bad/topo_unknown_channel.json", "expected the name of a channel"},
      {"tests/bad/topo_typo.json", "field 'comm.lanch_us': unknown field"},
      {"tests/bad/does_not_exist.json", "cannot read"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) err = NULL;
    topology *t = topo_load(cases[i].file, &err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    bool ok = strstr(err->message, cases[i].needle) && strstr(err->message, cases[i].file);
    if (!ok) fprintf(stderr, "%s: got \"%s\"\n", cases[i].file, err->message);
    CU_ASSERT_TRUE(ok);
    topo_free(t);
  }
}

static void t_explicit_file(void) {
  topology *t = load("tests/data/topo_explicit.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 2);
  uint32_t n;
  const uint32_t *r = topo_route_chans(t, 1, 0, &n);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->name, "b->a");
  CU_ASSERT_DOUBLE_EQUAL(t->route_cap_Bps[1 * 2 + 0], 10e9, 1);
  CU_ASSERT_DOUBLE_EQUAL(t->route_latency_s[0 * 2 + 1], 2e-6, 1e-12);
  topo_free(t);
}

/* A 1-GPU topology has no route storage at all: its only route is empty
 * and must not be formed by offsetting a NULL array (clang UBSan). */
static void t_one_gpu(void) {
  topology *t = load("tests/data/topo_one_gpu.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  uint32_t n = 99;
  CU_ASSERT_PTR_NULL(topo_route_chans(t, 0, 0, &n));
  CU_ASSERT_EQUAL(n, 0);
  topo_free(t);
}

/* Sizes: the estimate grows as n^2 and the cap sits between what bundled
 * topologies need and what the fuzzed files asked for. */
static void t_size_cap(void) {
  json_where w = {"f.json", "generator", NULL};
  g_autoptr(GError) err = NULL;
  CU_ASSERT_TRUE(topo_check_size(4096, 8192, 2, w, "gpus", &err));    /* 4096^2 * 34 B < 1 GiB */
  CU_ASSERT_FALSE(topo_check_size(6000, 12000, 2, w, "gpus", &err));  /* 6000^2 * 34 B > 1 GiB */
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "f.json: field 'generator.gpus': 6000 GPUs"));
  g_clear_error(&err);
  /* channels count too: 2500 GPUs fit on NVSwitch, not as a full mesh of
   * 6.25M channels */
  CU_ASSERT_TRUE(topo_check_size(2500, 5000, 2, w, "gpus", &err));
  CU_ASSERT_FALSE(topo_check_size(2500, 6250000, 1, w, "gpus", &err));
}

int main(void) {
  static const test_case cases[] = {TEST(t_bundled_load), TEST(t_nvswitch_routes),
                                    TEST(t_mesh_and_multinode), TEST(t_torus),
                                    TEST(t_bad_files), TEST(t_explicit_file), TEST(t_one_gpu),
                                    TEST(t_size_cap), {NULL, NULL}};
  return test_run("topology", cases);
}
