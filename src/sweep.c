/* sweep: --set lists into combinations of topology assignments. */
#include "sweep.h"

#include <json-c/json.h>
#include <string.h>

#include "jsonio.h"

static bool set_error(GError **err, const char *assign, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static bool set_error(GError **err, const char *assign, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--set': %s: %s", assign,
              what);
  return false;
}

static bool json_start(char c) { return c == '[' || c == '{' || c == '"'; }

/* Length of the JSON value at the start of text (which starts with [, {
 * or "), or 0 where it is not one.  The strict tokener stops with an
 * error at the first character after a complete value; the value up to
 * there must then parse whole, as json_parse_value reads it. */
static size_t json_prefix(const char *text) {
  json_tokener *tok = json_tokener_new();
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  json_object *v = json_tokener_parse_ex(tok, text, (int)strlen(text));
  size_t end = json_tokener_get_parse_end(tok);
  json_object_put(v);
  json_tokener_free(tok);
  g_autofree char *head = g_strndup(text, end);
  g_autoptr(json_object) whole = end ? json_parse_value(head, "", NULL) : NULL;
  return whole ? end : 0;
}

/* The values of one assignment: one whole JSON value, or comma separated
 * items each of which is a JSON value or plain text. */
static bool split_values(const char *assign, const char *text, GPtrArray *out, GError **err) {
  if (!*text)
    return set_error(err, assign, "expected a value or a comma list of values, got nothing");
  const char *first = text + strspn(text, " \t");
  if (json_start(*first)) {
    size_t len = json_prefix(first);
    if (len && !first[len + strspn(first + len, " \t")]) {
      g_ptr_array_add(out, g_strdup(text)); /* one JSON value: [4,4], "a,b" */
      return true;
    }
  }
  /* a hash: a command line of 100000 values is checked in linear time */
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  const char *p = text;
  for (;;) {
    const char *start = p + strspn(p, " \t");
    size_t len;
    if (json_start(*start)) {
      len = json_prefix(start);
      if (!len)
        return set_error(err, assign, "item %u: malformed JSON; expected a whole JSON value "
                         "such as \"100Gb/s\" or [4,4], or plain text without [, { or \" "
                         "at its start", out->len + 1);
      len += (size_t)(start - p);
      len += strspn(p + len, " \t");
      if (p[len] && p[len] != ',')
        return set_error(err, assign, "item %u: expected ',' or the end after its JSON value, "
                         "got \"%s\"", out->len + 1, p + len);
    } else {
      len = strcspn(p, ",");
    }
    g_autofree char *item = g_strndup(p, len);
    if (strspn(item, " \t") == len)
      return set_error(err, assign, "item %u is empty; expected a value between the commas",
                       out->len + 1);
    if (g_hash_table_contains(seen, item))
      return set_error(err, assign, "value \"%s\" is given twice; expected each value once",
                       item);
    g_ptr_array_add(out, g_strdup(item));
    g_hash_table_add(seen, g_steal_pointer(&item));
    if (!p[len]) return true;
    p += len + 1;
  }
}

static void axis_free(gpointer p) {
  sweep_axis *a = p;
  g_free(a->key);
  g_ptr_array_unref(a->values);
  g_free(a);
}

set_sweep *sweep_parse(char *const *set, bool sweeps, GError **err) {
  g_autoptr(set_sweep) s = g_new0(set_sweep, 1);
  s->axes = g_ptr_array_new_with_free_func(axis_free);
  s->n = 1;
  guint64 n = 1;
  for (char *const *a = set; a && *a; a++) {
    const char *eq = strchr(*a, '=');
    if (!eq || eq == *a) {
      set_error(err, *a, "expected KEY=VALUE such as generator.nic_gbps=400Gb/s");
      return NULL;
    }
    sweep_axis *ax = g_new0(sweep_axis, 1);
    ax->key = g_strndup(*a, (gsize)(eq - *a));
    ax->values = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(s->axes, ax);
    for (guint i = 0; i + 1 < s->axes->len; i++)
      if (!strcmp(((sweep_axis *)s->axes->pdata[i])->key, ax->key)) {
        set_error(err, *a, "key '%s' is set twice; expected each key once%s", ax->key,
                  sweeps ? " (a comma list sweeps it)" : "");
        return NULL;
      }
    if (!split_values(*a, eq + 1, ax->values, err)) return NULL;
  }
  /* the product before anything is made of it: 100 values on each of 4
   * options would be 10^8 combinations (saturates, never wraps) */
  GString *prod = g_string_new(NULL);
  for (guint i = 0; i < s->axes->len; i++) {
    guint len = ((sweep_axis *)s->axes->pdata[i])->values->len;
    n = n > G_MAXUINT64 / len ? G_MAXUINT64 : n * len;
    g_string_append_printf(prod, "%s%u", i ? " x " : "", len);
  }
  if (n > SWEEP_MAX_COMBINATIONS) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: option '--set': the lists give %" G_GUINT64_FORMAT
                " combinations (%s values); expected at most %u, each a topology loaded and a "
                "table printed: split the values over several runs", n, prod->str,
                SWEEP_MAX_COMBINATIONS);
    g_string_free(prod, TRUE);
    return NULL;
  }
  g_string_free(prod, TRUE);
  s->n = (guint)n;
  return g_steal_pointer(&s);
}

void sweep_free(set_sweep *s) {
  if (!s) return;
  if (s->axes) g_ptr_array_unref(s->axes);
  g_free(s);
}

char **sweep_assignments(const set_sweep *s, guint k) {
  if (!s->axes->len) return NULL;
  guint na = s->axes->len;
  char **out = g_new0(char *, na + 1);
  /* mixed radix, the last axis fastest */
  for (guint i = na; i-- > 0;) {
    const sweep_axis *ax = s->axes->pdata[i];
    guint v = k % ax->values->len;
    k /= ax->values->len;
    out[i] = g_strdup_printf("%s=%s", ax->key, (const char *)ax->values->pdata[v]);
  }
  return out;
}
