/* docs: document lists and length distributions. */
#include "docs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sizes.h"

typedef enum { DOCS_LIST, DOCS_LOGNORMAL, DOCS_UNIFORM } docs_kind;

struct docs_spec {
  docs_kind kind;
  GArray *list;          /* DOCS_LIST: uint64 */
  double mean, sigma;    /* lognormal */
  uint64_t min, max;     /* uniform */
  uint64_t pad;          /* 1: none */
  guint32 seed;
};

void docs_spec_free(docs_spec *d) {
  if (!d) return;
  if (d->list) g_array_free(d->list, TRUE);
  g_free(d);
}

static docs_spec *fail(docs_spec *d, char **why, char *msg) {
  *why = msg;
  docs_spec_free(d);
  return NULL;
}

/* "mean=8K,sigma=1.0,seed=1" into d; each key once, all that the kind needs. */
static docs_spec *parse_params(docs_spec *d, const char *name, const char *params, char **why) {
  const char *need = d->kind == DOCS_LOGNORMAL ? "mean=, sigma= and seed=" : "min=, max= and seed=";
  g_auto(GStrv) kv = g_strsplit(params, ",", -1);
  unsigned seen = 0; /* bits: mean/min, sigma/max, seed, pad */
  for (char **p = kv; *p; p++) {
    char *eq = strchr(*p, '=');
    if (!eq) return fail(d, why, g_strdup_printf("%s: expected key=value, got \"%s\"", name, *p));
    *eq = '\0';
    const char *key = g_strstrip(*p), *val = eq + 1;
    char *end = NULL;
    unsigned bit;
    bool ok;
    if (!strcmp(key, d->kind == DOCS_LOGNORMAL ? "mean" : "min")) {
      uint64_t v;
      ok = size_parse(val, &v);
      if (d->kind == DOCS_LOGNORMAL) d->mean = (double)v;
      else d->min = v;
      bit = 1;
    } else if (d->kind == DOCS_LOGNORMAL && !strcmp(key, "sigma")) {
      d->sigma = g_ascii_strtod(val, &end);
      ok = end != val && !*end && isfinite(d->sigma) && d->sigma >= 0 && d->sigma <= 10;
      bit = 2;
    } else if (d->kind == DOCS_UNIFORM && !strcmp(key, "max")) {
      ok = size_parse(val, &d->max);
      bit = 2;
    } else if (!strcmp(key, "seed")) {
      unsigned long long v = strtoull(val, &end, 10);
      ok = g_ascii_isdigit(*val) && !*end && v <= G_MAXUINT32;
      d->seed = (guint32)v;
      bit = 4;
    } else if (!strcmp(key, "pad")) {
      ok = size_parse(val, &d->pad);
      bit = 8;
    } else {
      return fail(d, why, g_strdup_printf("%s: unknown key \"%s\"; expected %s (and pad=)", name,
                                          key, need));
    }
    if (!ok)
      return fail(d, why, g_strdup_printf("%s: %s: expected %s, got \"%s\"", name, key,
                                          bit == 2 && d->kind == DOCS_LOGNORMAL
                                              ? "a number from 0 to 10"
                                              : bit == 4 ? "a whole number below 2^32"
                                                         : "a length (4096, 4K)", val));
    if (seen & bit)
      return fail(d, why, g_strdup_printf("%s: %s is given twice", name, key));
    seen |= bit;
  }
  if ((seen & 7) != 7) return fail(d, why, g_strdup_printf("%s: expected %s", name, need));
  if (d->kind == DOCS_UNIFORM && d->min > d->max)
    return fail(d, why, g_strdup_printf("uniform: min is above max"));
  return d;
}

/* A file of lengths: separated by commas, blanks or new lines; '#' starts
 * a comment to the end of its line. */
static docs_spec *parse_file(docs_spec *d, const char *path, char **why) {
  g_autofree char *text = NULL;
  g_autoptr(GError) e = NULL;
  if (!g_file_get_contents(path, &text, NULL, &e))
    return fail(d, why, g_strdup_printf("file:%s: cannot read it: %s", path, e->message));
  d->kind = DOCS_LIST;
  d->list = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  for (char **l = lines; *l; l++) {
    char *hash = strchr(*l, '#');
    if (hash) *hash = '\0';
    g_auto(GStrv) items = g_strsplit_set(*l, ", \t\r", -1);
    for (char **p = items; *p; p++) {
      uint64_t len;
      if (!**p) continue;
      if (!size_parse(*p, &len) || len > (1ull << 30))
        return fail(d, why, g_strdup_printf("file:%s: line %u: expected a length from 1 to 1G "
                                            "tokens (4096, 4K), got \"%s\"", path,
                                            (unsigned)(l - lines) + 1, *p));
      g_array_append_val(d->list, len);
    }
  }
  if (d->list->len == 0)
    return fail(d, why, g_strdup_printf("file:%s: expected document lengths, found none", path));
  return d;
}

docs_spec *docs_parse(const char *text, char **why) {
  docs_spec *d = g_new0(docs_spec, 1);
  d->pad = 1;
  if (g_str_has_prefix(text, "file:")) return parse_file(d, text + strlen("file:"), why);
  if (g_str_has_prefix(text, "lognormal:")) {
    d->kind = DOCS_LOGNORMAL;
    return parse_params(d, "lognormal", text + strlen("lognormal:"), why);
  }
  if (g_str_has_prefix(text, "uniform:")) {
    d->kind = DOCS_UNIFORM;
    return parse_params(d, "uniform", text + strlen("uniform:"), why);
  }
  d->kind = DOCS_LIST;
  d->list = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  g_auto(GStrv) parts = g_strsplit(text, ",", -1);
  for (char **p = parts; *p; p++) {
    uint64_t len;
    const char *item = g_strstrip(*p);
    if (!size_parse(item, &len) || len > (1ull << 30))
      return fail(d, why, g_strdup_printf("document %u: expected a length from 1 to 1G tokens "
                                          "(4096, 4K), or lognormal:... or uniform:..., got "
                                          "\"%s\"", d->list->len + 1, item));
    g_array_append_val(d->list, len);
  }
  return d;
}

/* One drawn length, at least 1 token, padded. */
static uint64_t draw(const docs_spec *d, GRand *r) {
  double len;
  if (d->kind == DOCS_UNIFORM) {
    len = (double)d->min + floor(g_rand_double(r) * (double)(d->max - d->min + 1));
  } else {
    /* Box-Muller: one standard normal from two uniforms in (0, 1] */
    double u1 = 1.0 - g_rand_double(r), u2 = g_rand_double(r);
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * G_PI * u2);
    double mu = log(d->mean) - d->sigma * d->sigma / 2;
    len = round(exp(mu + d->sigma * z));
  }
  uint64_t n = len < 1 ? 1 : len > 1e15 ? (uint64_t)1e15 : (uint64_t)len;
  return (n + d->pad - 1) / d->pad * d->pad;
}

GArray *docs_for(const docs_spec *d, uint64_t seq, char **why) {
  if (d->kind == DOCS_LIST) {
    uint64_t sum = 0;
    for (guint i = 0; i < d->list->len; i++) sum += g_array_index(d->list, uint64_t, i);
    if (sum != seq) {
      g_autofree char *a = size_format(sum), *b = size_format(seq);
      *why = g_strdup_printf("the documents add up to %s tokens, expected the sequence length "
                             "%s (a packed sequence is its documents)", a, b);
      return NULL;
    }
    GArray *out = g_array_sized_new(FALSE, FALSE, sizeof(uint64_t), d->list->len);
    g_array_append_vals(out, d->list->data, d->list->len);
    return out;
  }
  if (seq % d->pad) {
    g_autofree char *a = size_format(seq);
    *why = g_strdup_printf("pad=%" G_GUINT64_FORMAT " does not divide the sequence length %s",
                           d->pad, a);
    return NULL;
  }
  GArray *out = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  GRand *r = g_rand_new_with_seed(d->seed);
  for (uint64_t left = seq; left > 0;) {
    if (out->len == DOCS_MAX) {
      g_autofree char *a = size_format(seq);
      *why = g_strdup_printf("more than %u documents in a sequence of %s tokens; expected "
                             "longer ones", DOCS_MAX, a);
      g_array_free(out, TRUE);
      g_rand_free(r);
      return NULL;
    }
    uint64_t len = draw(d, r);
    if (len > left) len = left;
    g_array_append_val(out, len);
    left -= len;
  }
  g_rand_free(r);
  return out;
}
