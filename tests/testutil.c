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
