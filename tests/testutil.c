/* testutil: the CUnit basic runner, verbose, failing the process on any
 * failed assertion. */
#include "testutil.h"

int test_run(const char *suite, const test_case *cases) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite(suite, NULL, NULL);
  for (const test_case *c = cases; c->name; c++) CU_add_test(s, c->name, c->fn);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

topology *test_switch(uint32_t n, double bw_Bps, double chan_lat_s) {
  topology *t = topo_new("switch", n);
  for (uint32_t g = 0; g < n; g++) {
    topo_add_channel(t, "tx", "port", bw_Bps, chan_lat_s);
    topo_add_channel(t, "rx", "port", bw_Bps, chan_lat_s);
  }
  topo_routes_begin(t);
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      uint32_t r[2] = {2 * s, 2 * d + 1};
      topo_route(t, s, d, r, s == d ? 0 : 2, 0);
      t->direct[s * n + d] = s != d;
    }
  topo_routes_done(t);
  return t;
}

/* ---- two runs of one configuration ---- */

static void same_array(const double *a, const double *b, uint32_t n) {
  CU_ASSERT_FATAL((a == NULL) == (b == NULL));
  for (uint32_t i = 0; a && i < n; i++) CU_ASSERT_CLOSE(a[i], b[i], 1e-9);
}

void check_same_result(const exec_result *full, const exec_result *q) {
  CU_ASSERT_EQUAL_FATAL(full->n_gpus, q->n_gpus);
  CU_ASSERT_EQUAL_FATAL(full->n_chan, q->n_chan);
  double scalars[][2] = {{full->step_s, q->step_s},
                         {full->compute_s, q->compute_s},
                         {full->comm_s, q->comm_s},
                         {full->exposed_s, q->exposed_s},
                         {full->imbalance_s, q->imbalance_s},
                         {full->exposed_fixed_s, q->exposed_fixed_s},
                         {full->exposed_host_s, q->exposed_host_s},
                         {full->flops, q->flops},
                         {full->peak_bytes, q->peak_bytes},
                         {full->peak_reserved_bytes, q->peak_reserved_bytes},
                         {full->gpu_finish_s[full->last_gpu], q->gpu_finish_s[q->last_gpu]}};
  for (size_t i = 0; i < G_N_ELEMENTS(scalars); i++)
    CU_ASSERT_CLOSE(scalars[i][0], scalars[i][1], 1e-9);
  uint32_t n = full->n_gpus;
  same_array(full->gpu_compute_s, q->gpu_compute_s, n);
  same_array(full->gpu_comm_s, q->gpu_comm_s, n);
  same_array(full->gpu_finish_s, q->gpu_finish_s, n);
  same_array(full->gpu_imbalance_s, q->gpu_imbalance_s, n);
  same_array(full->gpu_peak_bytes, q->gpu_peak_bytes, n);
  same_array(full->gpu_peak_reserved_bytes, q->gpu_peak_reserved_bytes, n);
  same_array(full->chan_bytes, q->chan_bytes, full->n_chan);
  same_array(full->chan_busy_s, q->chan_busy_s, full->n_chan);
  CU_ASSERT_EQUAL(full->mem_errors, q->mem_errors);
  CU_ASSERT_EQUAL_FATAL(full->peak_live->len, q->peak_live->len);
  for (guint i = 0; i < full->peak_live->len; i++) {
    exec_mem_live a = g_array_index(full->peak_live, exec_mem_live, i);
    exec_mem_live b = g_array_index(q->peak_live, exec_mem_live, i);
    CU_ASSERT(a.gpu == b.gpu && a.count == b.count && !strcmp(a.name, b.name));
    CU_ASSERT_CLOSE(a.bytes, b.bytes, 1e-12);
  }
}

void check_same_replay(const plan *full, const plan *q, const topology *t, const orbits *o) {
  exec_opts plain = {0}, quotient = {.orbits = o};
  exec_result *a = exec_run(full, t, &plain), *b = exec_run(q, t, &quotient);
  check_same_result(a, b);
  exec_result_free(a);
  exec_result_free(b);
}
