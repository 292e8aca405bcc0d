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
