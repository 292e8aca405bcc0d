/* model: presets, model files and their fields (the format: model.h). */
#include "model.h"

#include <string.h>

#include "layers.h"
#include "scenario.h"

const char *const model_fields[] = {"hidden", "ffn", "heads", "kv_heads", "head_dim", "vocab",
                                    "layers", NULL};

static const char *model_dir(void) {
  const char *dir = g_getenv("TASP_MODEL_DIR");
  return dir ? dir : TASP_DATA_DIR "/models";
}

char *model_find(const char *name) {
  if (g_file_test(name, G_FILE_TEST_EXISTS) || strchr(name, '/')) return g_strdup(name);
  g_autofree char *base = g_str_has_suffix(name, ".json") ? g_strdup(name)
                                                          : g_strconcat(name, ".json", NULL);
  g_autofree char *p = g_build_filename(model_dir(), base, NULL);
  if (g_file_test(p, G_FILE_TEST_EXISTS)) return g_steal_pointer(&p);
  return g_strdup(name);
}

/* One whole-number field from 1 to max, where present. */
static bool field_u32(json_object *obj, json_where w, const char *key, uint32_t max,
                      uint32_t *out, GError **err) {
  json_object *v;
  if (!json_object_object_get_ex(obj, key, &v)) return true;
  if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
      json_object_get_int64(v) > max)
    return json_fail(err, w, key, "expected a whole number from 1 to %u", max);
  *out = (uint32_t)json_object_get_int64(v);
  return true;
}

/* "layers": [{"attention": "linear", "count": 12}, ...] into counts per
 * kind (as a scenario's model.layers). */
static bool parse_layers(json_object *list, json_where w, uint32_t layers[ATTN_KINDS],
                         GError **err) {
  size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
  if (n == 0)
    return json_fail(err, w, "layers", "expected a list of {\"attention\": \"linear\"|"
                     "\"softmax\", \"count\": N}, with at least one entry");
  uint32_t counts[ATTN_KINDS] = {0}, total = 0;
  g_autofree char *lpath = json_path_join(w.path, "layers");
  for (size_t i = 0; i < n; i++) {
    g_autofree char *idx = g_strdup_printf("[%zu]", i);
    g_autofree char *path = g_strconcat(lpath, idx, NULL);
    json_where iw = {w.file, path, w.doc};
    json_object *it = json_object_array_get_idx(list, i);
    static const char *const keys[] = {"attention", "count", NULL};
    if (!json_object_is_type(it, json_type_object))
      return json_fail(err, iw, NULL, "expected an object {\"attention\", \"count\"}");
    const char *name;
    uint32_t count;
    attn_kind k;
    if (!json_check_keys(it, iw, keys, err) ||
        !json_get_string(it, iw, "attention", true, NULL, &name, err) ||
        !json_get_u32(it, iw, "count", false, 1, 1, &count, err))
      return false;
    if (!attn_parse(name, &k))
      return json_fail(err, iw, "attention", "expected softmax or linear, got \"%s\"", name);
    if (count > SCENARIO_MAX_LAYERS - total)
      return json_fail(err, iw, "count", "the model's layers add up to more than %u",
                       SCENARIO_MAX_LAYERS);
    counts[k] += count;
    total += count;
  }
  memcpy(layers, counts, sizeof counts);
  return true;
}

bool model_parse_fields(json_object *obj, json_where w, model_spec *m, GError **err) {
  json_object *list;
  if (!field_u32(obj, w, "hidden", SCENARIO_MAX_HIDDEN, &m->hidden, err) ||
      !field_u32(obj, w, "ffn", SCENARIO_MAX_FFN, &m->ffn, err) ||
      !field_u32(obj, w, "heads", SCENARIO_MAX_HEADS, &m->heads, err) ||
      !field_u32(obj, w, "kv_heads", SCENARIO_MAX_HEADS, &m->kv_heads, err) ||
      !field_u32(obj, w, "head_dim", SCENARIO_MAX_HEAD_DIM, &m->head_dim, err) ||
      !field_u32(obj, w, "vocab", SCENARIO_MAX_VOCAB, &m->vocab, err))
    return false;
  if (json_object_object_get_ex(obj, "layers", &list) && !parse_layers(list, w, m->layers, err))
    return false;
  return true;
}

/* sources: {"field": "citation", ...}, each key a field of the model. */
static bool parse_sources(json_object *obj, json_where w, GError **err) {
  json_object *src = NULL;
  if (!json_get_typed(obj, w, "sources", false, json_type_object, &src, err)) return false;
  if (!src) return true;
  g_autofree char *path = json_path_join(w.path, "sources");
  json_where sw = {w.file, path, w.doc};
  if (!json_check_keys(src, sw, model_fields, err)) return false;
  json_object_object_foreach(src, key, val) {
    if (!json_object_is_type(val, json_type_string) || !*json_object_get_string(val))
      return json_fail(err, sw, key, "expected the source of the figure (non-empty text)");
  }
  return true;
}

bool model_load_file(const char *file, model_spec *out, GError **err) {
  g_autoptr(json_object) root = json_read_file(file, err);
  if (!root) return false;
  json_where w = {file, "", NULL}; /* json_read_file holds it to an object */
  static const char *const keys[] = {"name",     "description", "hidden", "ffn",   "heads",
                                     "kv_heads", "head_dim",    "vocab",  "layers", "sources",
                                     NULL};
  const char *name, *desc;
  if (!json_check_keys(root, w, keys, err) ||
      !json_get_string(root, w, "name", false, NULL, &name, err) ||
      !json_get_string(root, w, "description", false, NULL, &desc, err) ||
      !parse_sources(root, w, err))
    return false;
  /* a model file describes a whole architecture: every figure but
   * kv_heads (heads where not given) is required */
  static const char *const required[] = {"hidden", "ffn", "heads", "head_dim", "vocab", "layers"};
  for (size_t i = 0; i < G_N_ELEMENTS(required); i++)
    if (!json_object_object_get_ex(root, required[i], NULL))
      return json_fail(err, w, required[i], "missing (a model file gives hidden, ffn, heads, "
                       "head_dim, vocab and layers)");
  model_spec m = {0};
  if (!model_parse_fields(root, w, &m, err)) return false;
  if (!m.kv_heads) m.kv_heads = m.heads;
  if (m.kv_heads > m.heads || m.heads % m.kv_heads)
    return json_fail(err, w, "kv_heads", "expected a divisor of the %u query heads, got %u",
                     m.heads, m.kv_heads);
  model_spec_clear(out);
  *out = m;
  out->file = g_strdup(file);
  out->name = g_strdup(name);
  return true;
}

void model_spec_clear(model_spec *m) {
  g_free(m->file);
  g_free(m->name);
  memset(m, 0, sizeof *m);
}

GPtrArray *model_presets(void) { return json_dir_list(model_dir()); }
