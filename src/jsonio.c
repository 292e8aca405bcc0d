/* jsonio: JSON reading with messages that name file, field and expectation. */
#include "jsonio.h"

#include <errno.h>
#include <math.h>
#include <string.h>

G_DEFINE_QUARK(tasp-error-quark, tasp_error)

char *json_path_join(const char *path, const char *key) {
  if (!path || !*path) return g_strdup(key);
  if (key[0] == '[') return g_strconcat(path, key, NULL);
  return g_strconcat(path, ".", key, NULL);
}

static bool fail(GError **err, json_where w, const char *key, const char *what) {
  g_autofree char *p = json_path_join(w.path, key);
  g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field '%s': %s", w.file, p, what);
  return false;
}

json_object *json_read_file(const char *file, GError **err) {
  g_autofree char *text = NULL;
  gsize len = 0;
  g_autoptr(GError) io = NULL;
  if (!g_file_get_contents(file, &text, &len, &io)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot read: %s", file, io->message);
    return NULL;
  }
  json_tokener *tok = json_tokener_new();
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);  /* no trailing commas, no comments */
  json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  if (jerr == json_tokener_success && tok->char_offset < (int)len) {
    /* trailing text after the value: only whitespace is allowed */
    for (size_t i = (size_t)tok->char_offset; i < len; i++)
      if (!g_ascii_isspace(text[i])) { jerr = json_tokener_error_parse_unexpected; break; }
  }
  if (jerr != json_tokener_success || !obj) {
    size_t off = (size_t)json_tokener_get_parse_end(tok), line = 1;
    for (size_t i = 0; i < off && i < len; i++) line += text[i] == '\n';
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line %zu: malformed JSON: %s",
                file, line,
                jerr == json_tokener_continue ? "unexpected end of file"
                                              : json_tokener_error_desc(jerr));
    json_object_put(obj);
    json_tokener_free(tok);
    return NULL;
  }
  json_tokener_free(tok);
  if (!json_object_is_type(obj, json_type_object)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: expected a JSON object at the top",
                file);
    json_object_put(obj);
    return NULL;
  }
  return obj;
}

static bool lookup(json_object *obj, const char *key, json_object **v) {
  return json_object_object_get_ex(obj, key, v) && *v != NULL;
}

bool json_get_double(json_object *obj, json_where w, const char *key, bool required,
                     double def, double min_exclusive, double *out, GError **err) {
  json_object *v;
  if (!lookup(obj, key, &v)) {
    if (required) return fail(err, w, key, "missing; expected a number");
    *out = def;
    return true;
  }
  if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
    return fail(err, w, key, "expected a number");
  double d = json_object_get_double(v);
  if (!isfinite(d) || d <= min_exclusive) {
    g_autofree char *what = g_strdup_printf("expected a number greater than %g, got %g",
                                            min_exclusive, d);
    return fail(err, w, key, what);
  }
  *out = d;
  return true;
}

bool json_get_u32(json_object *obj, json_where w, const char *key, bool required,
                  uint32_t def, uint32_t min, uint32_t *out, GError **err) {
  json_object *v;
  if (!lookup(obj, key, &v)) {
    if (required) return fail(err, w, key, "missing; expected a whole number");
    *out = def;
    return true;
  }
  if (!json_object_is_type(v, json_type_int))
    return fail(err, w, key, "expected a whole number");
  int64_t x = json_object_get_int64(v);
  if (x < (int64_t)min || x > (int64_t)UINT32_MAX) {
    g_autofree char *what =
        g_strdup_printf("expected a whole number >= %u, got %lld", min, (long long)x);
    return fail(err, w, key, what);
  }
  *out = (uint32_t)x;
  return true;
}

bool json_get_string(json_object *obj, json_where w, const char *key, bool required,
                     const char *def, const char **out, GError **err) {
  json_object *v;
  if (!lookup(obj, key, &v)) {
    if (required) return fail(err, w, key, "missing; expected a string");
    *out = def;
    return true;
  }
  if (!json_object_is_type(v, json_type_string)) return fail(err, w, key, "expected a string");
  *out = json_object_get_string(v);
  return true;
}

bool json_get_typed(json_object *obj, json_where w, const char *key, bool required,
                    json_type type, json_object **out, GError **err) {
  json_object *v;
  const char *what = type == json_type_array ? "an array" : "an object";
  if (!lookup(obj, key, &v)) {
    *out = NULL;
    if (!required) return true;
    g_autofree char *m = g_strdup_printf("missing; expected %s", what);
    return fail(err, w, key, m);
  }
  if (!json_object_is_type(v, type)) {
    g_autofree char *m = g_strdup_printf("expected %s", what);
    return fail(err, w, key, m);
  }
  *out = v;
  return true;
}

bool json_check_keys(json_object *obj, json_where w, const char *const *allowed,
                     GError **err) {
  json_object_object_foreach(obj, key, val) {
    (void)val;
    bool ok = false;
    for (const char *const *a = allowed; *a; a++)
      if (strcmp(*a, key) == 0) { ok = true; break; }
    if (!ok) {
      g_autofree char *list = g_strjoinv(", ", (char **)allowed);
      g_autofree char *m = g_strdup_printf("unknown field; expected one of: %s", list);
      return fail(err, w, key, m);
    }
  }
  return true;
}
