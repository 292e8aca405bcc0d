/* size_rate: a connection's rate by message size (size_rate.h). */
#include "size_rate.h"

#include <math.h>

void size_rate_clear(size_rate *r) {
  g_free(r->bytes);
  g_free(r->rate_Bps);
  *r = (size_rate){0};
}

bool size_rate_parse(json_object *obj, json_where w, const char *key, size_rate *r,
                     GError **err) {
  *r = (size_rate){0};
  json_object *arr = NULL;
  if (!json_get_typed(obj, w, key, false, json_type_array, &arr, err)) return false;
  if (!arr) return true;
  size_t n = json_object_array_length(arr);
  if (n == 0)
    return json_fail(err, w, key, "expected at least one {\"mib\": M, \"gbps\": R} point");
  if (n > 1024) return json_fail(err, w, key, "expected at most 1024 points, got %zu", n);
  size_rate t = {(uint32_t)n, g_new(double, n), g_new(double, n)};
  g_autofree char *base = json_path_join(w.path, key);
  static const char *const keys[] = {"mib", "gbps", NULL};
  for (size_t i = 0; i < n; i++) {
    g_autofree char *path = g_strdup_printf("%s[%zu]", base, i);
    json_where pw = {w.file, path, w.doc};
    json_object *p = json_object_array_get_idx(arr, i);
    double mib, gbps;
    if (!json_object_is_type(p, json_type_object)) {
      json_fail(err, pw, NULL, "expected an object {\"mib\": M, \"gbps\": R}");
      goto bad;
    }
    if (!json_check_keys(p, pw, keys, err) ||
        !json_get_double(p, pw, "mib", true, 0, JSON_POSITIVE, &mib, err) ||
        !json_get_double(p, pw, "gbps", true, 0, JSON_POSITIVE, &gbps, err))
      goto bad;
    t.bytes[i] = mib * 1048576.0;
    if (i > 0 && t.bytes[i] <= t.bytes[i - 1]) {
      json_fail(err, pw, "mib", "expected more than the previous point's %g (points in "
                "increasing size)", t.bytes[i - 1] / 1048576.0);
      goto bad;
    }
    t.rate_Bps[i] = gbps * 1e9;
  }
  *r = t;
  return true;
bad:
  size_rate_clear(&t);
  return false;
}

double size_rate_at(const size_rate *r, double bytes) {
  if (r->n == 0) return 0;
  if (bytes <= r->bytes[0]) return r->rate_Bps[0];
  uint32_t hi = 1;
  while (hi < r->n && r->bytes[hi] < bytes) hi++;
  if (hi == r->n) return r->rate_Bps[r->n - 1];
  /* between two measured sizes: linear in log2(size), as the sizes were
   * measured in powers of two */
  double f = log2(bytes / r->bytes[hi - 1]) / log2(r->bytes[hi] / r->bytes[hi - 1]);
  return r->rate_Bps[hi - 1] + f * (r->rate_Bps[hi] - r->rate_Bps[hi - 1]);
}

double size_rate_cap(const size_rate *r, double route_cap_Bps, double bytes) {
  double rate = size_rate_at(r, bytes);
  if (rate <= 0) return route_cap_Bps;
  return route_cap_Bps > 0 ? MIN(route_cap_Bps, rate) : rate;
}
