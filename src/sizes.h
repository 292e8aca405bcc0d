/* sizes: token counts and lists written as 32K, 1M, 131072 (K = 1024). */
#ifndef TASP_SIZES_H
#define TASP_SIZES_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* Parse "128K", "1M", "1G", "4096".  FALSE on anything else or zero. */
bool size_parse(const char *text, uint64_t *out);
/* Format 131072 as "128K", 1048576 as "1M", 2^30 as "1G", 1000 as "1000". */
char *size_format(uint64_t v);

#endif
