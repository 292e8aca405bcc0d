/* model: dense decoder architectures, by preset or by file.
 *
 * A model is the shape of a decoder-only transformer: hidden size, FFN
 * size, query heads, KV heads, head dim, vocabulary and its layers by
 * attention kind.  Presets are files bundled under models/ (NAME.json),
 * found by name as topologies are; any other model file has the same
 * fields:
 *   {"name": "Llama-3-8B", "description": "...", "hidden": 4096,
 *    "ffn": 14336, "heads": 32, "kv_heads": 8, "head_dim": 128,
 *    "vocab": 128256, "layers": [{"attention": "softmax", "count": 32}],
 *    "sources": {"hidden": "where this figure comes from", ...}}
 * kv_heads defaults to heads; `sources` cites each figure (a bundled preset
 * cites every one; test_scenario checks).  Bounds are the shape bounds of
 * scenario.h.  The scenario's `model` (scenario.c) names a preset or gives
 * these fields, and options override both. */
#ifndef TASP_MODEL_H
#define TASP_MODEL_H

#include <glib.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "jsonio.h"
#include "workload.h"

typedef struct {
  char *file;     /* the file read */
  char *name;     /* its "name" ("Llama-3-8B"), or NULL */
  uint32_t hidden, ffn, heads, kv_heads, head_dim, vocab;
  uint32_t layers[ATTN_KINDS];
} model_spec;

/* The architecture fields a model file and a scenario's model object share
 * (NULL-terminated). */
extern const char *const model_fields[];

/* The file a name stands for: an existing path as given, else the bundled
 * preset models/NAME.json (TASP_MODEL_DIR overrides the directory), else
 * the name unchanged. */
char *model_find(const char *name_or_file);
/* Reads a model file.  Errors name the file and field. */
bool model_load_file(const char *file, model_spec *out, GError **err);
/* The fields of model_fields present in obj (at w) over *m: what a model
 * file and a scenario's model object both do.  "layers" replaces every
 * layer count. */
bool model_parse_fields(json_object *obj, json_where w, model_spec *m, GError **err);
void model_spec_clear(model_spec *m);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(model_spec, model_spec_clear)

/* Bundled presets as "name\tdescription" lines, sorted by name. */
GPtrArray *model_presets(void);

#endif
