/* fuzz_util: shared by the libFuzzer harnesses: the input as a file the
 * loaders can read (they take paths), rewritten for every input. */
#ifndef TASP_FUZZ_UTIL_H
#define TASP_FUZZ_UTIL_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Writes data to a per-process file and returns its path. */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
  static char *path;
  if (!path) {
    path = g_strdup_printf("%s/tasp-fuzz-%d.json", g_get_tmp_dir(), (int)getpid());
    /* quiet GLib's warnings: a harness reports crashes, not messages */
    g_log_set_always_fatal(G_LOG_FATAL_MASK);
  }
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  return path;
}

#endif
