/* fuzz_options: libFuzzer harness for the command line.  The input is the
 * arguments, separated by NUL bytes.  Parsing must give options or a
 * GError; the --set options are expanded into their sweep (sweep.c, as
 * main does) and the first combinations applied as overrides to a bundled
 * topology (no file of the input's choosing is read). */
#include <string.h>

#include "cli.h"
#include "fuzz_util.h"
#include "sweep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)fuzz_file;
  char *argv[66] = {"tasp-sim"};
  int argc = 1;
  g_autofree char *buf = g_malloc(size + 1);
  memcpy(buf, data, size);
  buf[size] = 0;
  for (size_t i = 0; i < size && argc < 65; i += strlen(buf + i) + 1) argv[argc++] = buf + i;
  argv[argc] = NULL;
  cli_opts o;
  GError *err = NULL;
  bool ok = cli_parse(argc, argv, &o, &err);
  if (ok == !!err) abort();
  /* overrides on a bundled topology; a name with '/' or '.' could be any file */
  if (ok && !o.help && !o.version && !o.list &&
      (!o.topology || !strpbrk(o.topology, "/."))) {
    set_sweep *sw = sweep_parse(o.set, true, &err);
    if (!sw == !err) abort();
    if (sw && (sw->n < 1 || sw->n > SWEEP_MAX_COMBINATIONS)) abort();
    g_clear_error(&err);
    /* the first and the last combination: enough to reach every value's
     * reading without running thousands of loads per input */
    for (guint k = 0; sw && k < sw->n && k < 2; k++) {
      g_auto(GStrv) assign = sweep_assignments(sw, k ? sw->n - 1 : 0);
      if ((assign ? g_strv_length(assign) : 0) != sw->axes->len) abort();
      scenario_overrides ov = cli_overrides(&o);
      ov.set = assign;
      if (!ov.topology) ov.topology = "h100x8";
      scenario *s = scenario_load(NULL, &ov, &err);
      if (!s == !err) abort();
      scenario_free(s);
      g_clear_error(&err);
    }
    sweep_free(sw);
  }
  g_clear_error(&err);
  cli_opts_clear(&o);
  return 0;
}
