/* fuzz_scenario: libFuzzer harness for the scenario loader (JSON reading,
 * checks, overrides, sweep expansion and the schedulers' checks).  Any
 * input must give a scenario or a GError, never a crash or a sanitizer
 * report.  A scenario names its topology relative to itself; from the
 * temporary directory only bundled names (h100x8, ...) resolve. */
#include "fuzz_util.h"
#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *file = fuzz_file(data, size);
  scenario_overrides ov = {0};
  GError *err = NULL;
  scenario *s = scenario_load(file, &ov, &err);
  if (!s == !err) abort();  /* exactly one of the two */
  scenario_free(s);
  g_clear_error(&err);
  return 0;
}
