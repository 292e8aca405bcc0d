/* sizes: K/M suffixed sizes, binary multiples as sequence lengths are. */
#include "sizes.h"

#include <errno.h>
#include <stdlib.h>

bool size_parse(const char *text, uint64_t *out) {
  if (!text || !g_ascii_isdigit(text[0])) return false;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || end == text) return false;
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') { mult = 1024; end++; }
  else if (*end == 'M' || *end == 'm') { mult = 1024 * 1024; end++; }
  else if (*end == 'G' || *end == 'g') { mult = 1024ULL * 1024 * 1024; end++; }
  if (*end != '\0' || v == 0 || v > UINT64_MAX / mult) return false;
  *out = v * mult;
  return true;
}

char *size_format(uint64_t v) {
  if (v >= 1ull << 30 && v % (1ull << 30) == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT "G", v >> 30);
  if (v >= 1024 * 1024 && v % (1024 * 1024) == 0)
    return g_strdup_printf("%" G_GUINT64_FORMAT "M", v / (1024 * 1024));
  if (v >= 1024 && v % 1024 == 0) return g_strdup_printf("%" G_GUINT64_FORMAT "K", v / 1024);
  return g_strdup_printf("%" G_GUINT64_FORMAT, v);
}
