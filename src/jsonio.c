/* jsonio: JSON reading with messages that name file, field and expectation. */
#include "jsonio.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

G_DEFINE_QUARK(tasp-error-quark, tasp_error)

char *json_path_join(const char *path, const char *key) {
  if (!path || !*path) return g_strdup(key);
  if (key[0] == '[') return g_strconcat(path, key, NULL);
  return g_strconcat(path, ".", key, NULL);
}

/* The --set assignment that gave path p or an object holding it, or NULL. */
static const char *set_source(const json_doc *doc, const char *p) {
  if (!doc || !doc->set) return NULL;
  g_autofree char *q = g_strdup(p);
  for (;;) {
    const char *a = g_hash_table_lookup(doc->set, q);
    if (a) return a;
    char *cut = NULL;
    for (char *c = q; *c; c++)
      if (*c == '.' || *c == '[') cut = c;
    if (!cut) return NULL;
    *cut = '\0';
  }
}

/* g_ptr_array_sort passes pointers to the elements */
static gint cmp_strp(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The assignments that set fields inside object p, in key order. */
static char *sets_inside(const json_doc *doc, const char *p) {
  if (!doc || !doc->set) return NULL;
  g_autoptr(GPtrArray) in = g_ptr_array_new();
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, doc->set);
  while (g_hash_table_iter_next(&it, &k, &v))
    if (!*p || (g_str_has_prefix(k, p) && ((char *)k)[strlen(p)] == '.'))
      g_ptr_array_add(in, v);
  if (!in->len) return NULL;
  g_ptr_array_sort(in, cmp_strp);
  g_ptr_array_add(in, NULL);
  return g_strjoinv(" ", (char **)in->pdata);
}

bool json_fail(GError **err, json_where w, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_autofree char *p = key ? json_path_join(w.path, key) : g_strdup(w.path ? w.path : "");
  const char *opt = w.doc && w.doc->option ? w.doc->option : "--set";
  const char *a = set_source(w.doc, p);
  if (a) {
    /* the value is the command line's: naming the file would send the user
     * to a file that holds something else */
    size_t klen = strcspn(a, "=");
    bool whole = strlen(p) == klen;
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '%s': %s: %s%s%s%s",
                opt, a, whole ? "" : "field '", whole ? "" : p, whole ? "" : "': ", what);
    return false;
  }
  g_autofree char *inside = sets_inside(w.doc, p);
  if (inside)
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field '%s': %s (with option '%s' %s)",
                w.file, p, what, opt, inside);
  else
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field '%s': %s", w.file, p, what);
  return false;
}

static bool fail(GError **err, json_where w, const char *key, const char *what) {
  return json_fail(err, w, key, "%s", what);
}

/* Reads at most JSON_MAX_FILE_BYTES + 1 bytes: a device such as /dev/zero
 * or a FIFO has no size to check beforehand. */
static char *read_capped(const char *file, gsize *len, GError **err) {
  FILE *f = g_fopen(file, "rb");
  if (!f) {
    int e = errno;
    g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot read: %s", file, g_strerror(e));
    return NULL;
  }
  GString *buf = g_string_sized_new(4096);
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
    g_string_append_len(buf, chunk, (gssize)got);
    if (buf->len > JSON_MAX_FILE_BYTES) break;
  }
  int e = ferror(f) ? errno : 0;
  fclose(f);
  if (e || buf->len > JSON_MAX_FILE_BYTES) {
    if (e)
      g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot read: %s", file, g_strerror(e));
    else
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "%s: larger than %u MiB, the most an input file may be", file,
                  JSON_MAX_FILE_BYTES >> 20);
    g_string_free(buf, TRUE);
    return NULL;
  }
  *len = buf->len;
  return g_string_free(buf, FALSE);
}

/* One open object or array while looking for repeated keys. */
typedef struct {
  bool is_obj;
  bool expect_key;     /* object: the next string is a key */
  size_t index;        /* array: index of the current element */
  char *path;          /* dotted path of this container */
  char *key;           /* object: the last key read */
  GHashTable *keys;    /* object: keys seen */
} dup_frame;

static void dup_frame_clear(gpointer p) {
  dup_frame *f = p;
  g_free(f->path);
  g_free(f->key);
  if (f->keys) g_hash_table_destroy(f->keys);
}

static char *child_path(const dup_frame *top) {
  if (!top) return g_strdup("");
  if (top->is_obj) return json_path_join(top->path, top->key ? top->key : "");
  g_autofree char *idx = g_strdup_printf("[%zu]", top->index);
  return json_path_join(top->path, idx);
}

/* json-c keeps the last of repeated keys silently, so a second "gpus"
 * would override the first unseen.  The text is valid JSON here: walk its
 * structure (strings, brackets, commas) and decode each key with json-c. */
static bool check_duplicate_keys(const char *text, size_t len, const char *name,
                                 GError **err) {
  g_autoptr(GArray) st = g_array_new(FALSE, TRUE, sizeof(dup_frame));
  g_array_set_clear_func(st, dup_frame_clear);
  size_t line = 1;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    dup_frame *top = st->len ? &g_array_index(st, dup_frame, st->len - 1) : NULL;
    if (c == '\n') line++;
    else if (c == '"') {
      size_t j = i + 1;
      while (j < len && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      if (top && top->is_obj && top->expect_key) {
        g_autofree char *raw = g_strndup(text + i, j + 1 - i);
        g_autoptr(json_object) k = json_tokener_parse(raw);
        const char *key = k ? json_object_get_string(k) : raw;
        if (g_hash_table_contains(top->keys, key)) {
          g_autofree char *p = json_path_join(top->path, key);
          g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                      "%s: line %zu: field '%s' is given twice; expected each key once", name,
                      line, p);
          return false;
        }
        g_hash_table_add(top->keys, g_strdup(key));
        g_free(top->key);
        top->key = g_strdup(key);
        top->expect_key = false;
      }
      i = j;
    } else if (c == '{' || c == '[') {
      dup_frame f = {.is_obj = c == '{', .expect_key = c == '{', .path = child_path(top)};
      if (f.is_obj) f.keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
      g_array_append_val(st, f);
    } else if ((c == '}' || c == ']') && top) {
      g_array_set_size(st, st->len - 1);
    } else if (c == ',' && top) {
      if (top->is_obj) top->expect_key = true;
      else top->index++;
    }
  }
  return true;
}

json_object *json_read_file(const char *file, GError **err) {
  gsize len = 0;
  g_autofree char *text = read_capped(file, &len, err);
  if (!text) return NULL;
  return json_parse_text(text, len, file, err);
}

/* The whole of text as one strict JSON value (no comments, no trailing
 * commas, nothing but whitespace after it); NULL with *why and *line of
 * the first error.  Files and command-line values both come through here. */
static json_object *parse_whole(const char *text, size_t len, const char **why,
                                size_t *line) {
  json_tokener *tok = json_tokener_new();
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);  /* no trailing commas, no comments */
  json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t end = json_tokener_get_parse_end(tok);
  if (jerr == json_tokener_continue && obj == NULL) {
    /* a bare number is complete only when the tokener sees its end */
    obj = json_tokener_parse_ex(tok, "", 1);
    jerr = json_tokener_get_error(tok);
    end = len;
  }
  if (jerr == json_tokener_success && end < len) {
    /* trailing text after the value: only whitespace is allowed */
    for (size_t i = end; i < len; i++)
      if (!g_ascii_isspace(text[i])) { jerr = json_tokener_error_parse_unexpected; break; }
  }
  json_tokener_free(tok);
  if (jerr == json_tokener_success && obj) return obj;
  *line = 1;
  for (size_t i = 0; i < end && i < len; i++) *line += text[i] == '\n';
  *why = jerr == json_tokener_continue || jerr == json_tokener_error_parse_eof
             ? "unexpected end of text"
             : json_tokener_error_desc(jerr);
  json_object_put(obj);
  return NULL;
}

json_object *json_parse_text(const char *text, size_t len, const char *file, GError **err) {
  if (len > JSON_MAX_FILE_BYTES) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "%s: larger than %u MiB, the most an input file may be", file,
                JSON_MAX_FILE_BYTES >> 20);
    return NULL;
  }
  const char *why = NULL;
  size_t line = 1;
  json_object *obj = parse_whole(text, len, &why, &line);
  if (!obj) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: line %zu: malformed JSON: %s", file,
                line, g_str_equal(why, "unexpected end of text") ? "unexpected end of file" : why);
    return NULL;
  }
  if (!json_object_is_type(obj, json_type_object)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: expected a JSON object at the top",
                file);
    json_object_put(obj);
    return NULL;
  }
  if (!check_duplicate_keys(text, len, file, err)) {
    json_object_put(obj);
    return NULL;
  }
  return obj;
}

json_object *json_parse_value(const char *text, const char *what, GError **err) {
  size_t len = strlen(text);
  if (len == 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: expected a value, got nothing", what);
    return NULL;
  }
  const char *why = NULL;
  size_t line = 1;
  json_object *v = parse_whole(text, len, &why, &line);
  const char *start = text + strspn(text, " \t");
  bool json_like = *start == '[' || *start == '{' || *start == '"';
  if (!v && json_like) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "%s: malformed JSON: %s; expected a whole JSON value (nothing after it), "
                "or plain text that does not start with [, { or \"", what, why);
    return NULL;
  }
  if (v && !check_duplicate_keys(text, len, what, err)) {
    json_object_put(v);
    return NULL;
  }
  return v ? v : json_object_new_string(text);
}

void json_unit_range(const char *key, double *lo, double *hi, const char **unit) {
  static const struct { const char *suffix; double lo, hi; const char *unit; } units[] = {
      {"gbps", 1e-3, 1e5, "GB/s"}, {"_us", 0, 1e7, "us"}, {"_ms", 0, 1e7, "ms"},
      {"tflops", 1e-3, 1e7, "TFLOP/s"}, {"_kelem", 0, 1e6, "ns"}, {"ratio", 0, 1e3, NULL},
      {"efficiency", 1e-3, 1, NULL}, {"_gib", 1e-3, 1e6, "GiB"}};
  g_autofree char *k = g_ascii_strdown(key, -1);
  for (size_t i = 0; i < G_N_ELEMENTS(units); i++)
    if (g_str_has_suffix(k, units[i].suffix)) {
      *lo = units[i].lo;
      *hi = units[i].hi;
      *unit = units[i].unit;
      return;
    }
  *lo = 0;
  *hi = 1e9;
  *unit = NULL;
}

/* "400Gb/s", "50 GB/s", "1.6Tb/s": the number in GB/s (bytes).  The unit's
 * case carries the meaning (b bits, B bytes), as vendors write it: a NIC
 * is sold in Gb/s, NVLink in GB/s, and a bare number in the other unit is
 * the trap these strings avoid. */
typedef struct { const char *unit; double factor; } json_unit;

/* "NUMBER UNIT" (a space between allowed) with UNIT one of units[0..n):
 * the number times its unit's factor. */
static bool parse_with_unit(const char *text, const json_unit *units, size_t n, double *out) {
  char *end;
  double v = g_ascii_strtod(text, &end);
  if (end == text || !isfinite(v)) return false;
  while (*end == ' ') end++;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(end, units[i].unit)) {
      *out = v * units[i].factor;
      return true;
    }
  return false;
}

static bool parse_rate(const char *text, double *gbps) {
  static const json_unit units[] = {{"GB/s", 1},      {"Gb/s", 1.0 / 8}, {"TB/s", 1e3},
                                    {"Tb/s", 1e3 / 8}, {"MB/s", 1e-3},    {"Mb/s", 1e-3 / 8}};
  return parse_with_unit(text, units, G_N_ELEMENTS(units), gbps);
}

/* "80GiB", "80 GB", "0.5TB": the number in GiB.  GB and TB are decimal,
 * as memory is sold ("80 GB" = 74.5 GiB); GiB and TiB binary, as PyTorch
 * reports it. */
static bool parse_size(const char *text, double *gib) {
  static const json_unit units[] = {{"GiB", 1},
                                    {"TiB", 1024},
                                    {"MiB", 1.0 / 1024},
                                    {"GB", 1e9 / 1073741824.0},
                                    {"TB", 1e12 / 1073741824.0},
                                    {"MB", 1e6 / 1073741824.0}};
  return parse_with_unit(text, units, G_N_ELEMENTS(units), gib);
}

static bool lookup(json_object *obj, const char *key, json_object **v) {
  return json_object_object_get_ex(obj, key, v) && *v != NULL;
}

/* A value read as a number of field `key`'s unit: a JSON number, or for a
 * rate a string with its unit.  FALSE with *what saying what was expected. */
static bool value_number(json_object *v, const char *key, double *d, const char **what) {
  double lo, hi;
  const char *unit;
  json_unit_range(key, &lo, &hi, &unit);
  bool rate = unit && !strcmp(unit, "GB/s");
  if (unit && !strcmp(unit, "GiB") && json_object_is_type(v, json_type_string)) {
    *what = "expected a size: a number in GiB, or a string with its unit such as \"80GiB\" "
            "or \"80GB\"";
    return parse_size(json_object_get_string(v), d);
  }
  if (rate && json_object_is_type(v, json_type_string)) {
    *what = "expected a rate: a number in GB/s (bytes), or a string with its unit such as "
            "\"400Gb/s\" or \"50GB/s\"";
    return parse_rate(json_object_get_string(v), d);
  }
  if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
    *what = rate ? "expected a number in GB/s, or a string with its unit such as \"400Gb/s\" "
                   "or \"50GB/s\""
                 : "expected a number";
    return false;
  }
  *d = json_object_get_double(v);
  return true;
}

char *json_value_understood(const char *key, const char *value) {
  const char *leaf = strrchr(key, '.');
  leaf = leaf ? leaf + 1 : key;
  double lo, hi, d;
  const char *unit, *what;
  json_unit_range(leaf, &lo, &hi, &unit);
  if (!unit) return NULL;
  g_autoptr(json_object) v = json_parse_value(value, "value", NULL);
  if (!v || !value_number(v, leaf, &d, &what)) return NULL;
  return g_strdup_printf("%g %s", d, unit);
}

bool json_get_double(json_object *obj, json_where w, const char *key, bool required,
                     double def, double min, double *out, GError **err) {
  json_object *v;
  if (!lookup(obj, key, &v)) {
    if (required) return fail(err, w, key, "missing; expected a number");
    *out = def;
    return true;
  }
  double lo, hi, d;
  const char *unit, *expected;
  json_unit_range(key, &lo, &hi, &unit);
  if (!value_number(v, key, &d, &expected)) return fail(err, w, key, expected);
  bool nonneg = min < 0;
  if (!isfinite(d) || (nonneg ? d < 0 : d <= min)) {
    g_autofree char *what = nonneg ? g_strdup_printf("expected a number >= 0, got %g", d)
                                   : g_strdup_printf("expected a number greater than %g, got %g",
                                                     min, d);
    return fail(err, w, key, what);
  }
  if (d > hi || (d != 0 && d < lo)) {
    g_autofree char *what = g_strdup_printf("expected %s%g to %g%s%s, got %g",
                                            nonneg && lo > 0 ? "0 or " : "", lo, hi,
                                            unit ? " " : "", unit ? unit : "", d);
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

bool json_get_bool(json_object *obj, json_where w, const char *key, bool *out, GError **err) {
  json_object *v;
  if (!lookup(obj, key, &v)) return true;
  if (!json_object_is_type(v, json_type_boolean)) return fail(err, w, key, "expected true or false");
  *out = json_object_get_boolean(v);
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

json_doc *json_doc_new(const char *option) {
  json_doc *d = g_new0(json_doc, 1);
  d->set = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  d->option = option;
  return d;
}

void json_doc_free(json_doc *d) {
  if (!d) return;
  g_hash_table_destroy(d->set);
  g_free(d);
}

bool json_apply_set(json_object *root, const char *assign, json_doc *doc, GError **err) {
  const char *origin = doc && doc->option ? doc->option : "--set";
  const char *eq = strchr(assign, '=');
  if (!eq || eq == assign) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: option '%s': expected KEY=VALUE such as comm.launch_us=20, "
                "got \"%s\"", origin, assign);
    return false;
  }
  g_autofree char *key = g_strndup(assign, (gsize)(eq - assign));
  g_auto(GStrv) parts = g_strsplit(key, ".", -1);
  json_object *obj = root;
  guint n = g_strv_length(parts);
  for (guint i = 0; i + 1 < n; i++) {
    json_object *next;
    if (!json_object_object_get_ex(obj, parts[i], &next) ||
        !json_object_is_type(next, json_type_object)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "command line: option '%s': \"%s\": the topology has no object '%s' to set "
                  "'%s' in", origin, assign, parts[i], key);
      return false;
    }
    obj = next;
  }
  if (!*parts[n - 1]) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: option '%s': \"%s\": expected a field name after the last '.'",
                origin, assign);
    return false;
  }
  g_autofree char *what = g_strdup_printf("command line: option '%s': %s", origin, assign);
  json_object *v = json_parse_value(eq + 1, what, err);
  if (!v) return false;
  json_object_object_add(obj, parts[n - 1], v);
  if (doc) g_hash_table_replace(doc->set, g_steal_pointer(&key), g_strdup(assign));
  return true;
}

GPtrArray *json_dir_list(const char *dir) {
  GPtrArray *out = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  const char *e;
  while (d && (e = g_dir_read_name(d))) {
    if (!g_str_has_suffix(e, ".json")) continue;
    g_autofree char *path = g_build_filename(dir, e, NULL);
    g_autoptr(json_object) root = json_read_file(path, NULL);
    json_object *desc = NULL;
    if (root) json_object_object_get_ex(root, "description", &desc);
    g_autofree char *name = g_strndup(e, strlen(e) - 5);
    g_ptr_array_add(out, g_strdup_printf("%s\t%s", name, desc ? json_object_get_string(desc) : ""));
  }
  g_ptr_array_sort(out, cmp_strp);
  return out;
}
