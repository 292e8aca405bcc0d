/* scenario: scenario files, overrides, checks and sweep expansion. */
#include "scenario.h"

#include <math.h>
#include <string.h>

#include "docs.h"
#include "names.h"
#include "sim.h"
#include "layer.h"
#include "layers.h"
#include "model.h"
#include "sizes.h"

const char *pass_name(pass_kind p) {
  return p == PASS_FWD ? "fwd" : p == PASS_BWD ? "bwd" : "fwdbwd";
}

const char *scope_name(scope_kind k) {
  return k == SCOPE_LAYER ? "layer" : k == SCOPE_MODEL ? "model" : "attention";
}

char *scenario_find_topology(const char *name) {
  if (g_file_test(name, G_FILE_TEST_EXISTS) || strchr(name, '/')) return g_strdup(name);
  const char *dir = g_getenv("TASP_TOPOLOGY_DIR");
  g_autofree char *base = g_str_has_suffix(name, ".json") ? g_strdup(name)
                                                          : g_strconcat(name, ".json", NULL);
  g_autofree char *p = g_build_filename(dir ? dir : TASP_DATA_DIR "/topologies", base, NULL);
  if (g_file_test(p, G_FILE_TEST_EXISTS)) return g_steal_pointer(&p);
  return g_strdup(name);
}

/* Where a value came from, for messages. */
typedef struct {
  const char *file;  /* scenario file or "command line" */
  const char *field; /* field path or option */
} origin;

static bool bad(GError **err, origin o, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static bool bad(GError **err, origin o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  bool cli = strcmp(o.file, "command line") == 0;
  g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: %s '%s': %s", o.file,
              cli ? "option" : "field", o.field, what);
  return false;
}

/* Where a value came from: the option when given, else the file's field
 * (or the option, without a file). */
static origin from(const scenario *s, const char *given, const char *option, const char *key) {
  if (given || !s->file) return (origin){"command line", option};
  return (origin){s->file, key};
}

/* A list given as one value or an array in the file, or as a comma list on
 * the command line (which wins).  Items come back as strings. */
static bool get_list(json_object *root, const char *file, const char *key, const char *cli,
                     const char *option, const char *def, GPtrArray *out, origin *o,
                     GError **err) {
  if (cli) {
    *o = (origin){"command line", option};
    /* --seq "" would sweep nothing and print an empty table */
    if (!*cli) return bad(err, *o, "expected at least one value, got an empty list");
    g_auto(GStrv) parts = g_strsplit(cli, ",", -1);
    for (char **p = parts; *p; p++) g_ptr_array_add(out, g_strdup(g_strstrip(*p)));
    return true;
  }
  *o = (origin){file ? file : "command line", file ? key : option};
  json_object *v = NULL;
  if (!root || !json_object_object_get_ex(root, key, &v)) {
    if (!def) return bad(err, *o, "missing");
    g_auto(GStrv) parts = g_strsplit(def, ",", -1);
    for (char **p = parts; *p; p++) g_ptr_array_add(out, g_strdup(*p));
    return true;
  }
  size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 1;
  if (n == 0) return bad(err, *o, "expected at least one value");
  for (size_t i = 0; i < n; i++) {
    json_object *it = json_object_is_type(v, json_type_array) ? json_object_array_get_idx(v, i) : v;
    if (json_object_is_type(it, json_type_string))
      g_ptr_array_add(out, g_strdup(json_object_get_string(it)));
    else if (json_object_is_type(it, json_type_int))
      g_ptr_array_add(out, g_strdup_printf("%" G_GINT64_FORMAT, json_object_get_int64(it)));
    else
      return bad(err, *o, "expected a string or a whole number, or an array of them");
  }
  return true;
}

/* A whole number from min to max (max: one of the SCENARIO_MAX_ bounds). */
static bool parse_u32(const char *text, origin o, uint32_t min, uint32_t max, uint32_t *out,
                      GError **err) {
  uint64_t v;
  if (!size_parse(text, &v) || v < min || v > max)
    return bad(err, o, "expected a whole number from %u to %u, got \"%s\"", min, max, text);
  *out = (uint32_t)v;
  return true;
}

/* One shape field: command line, else the file's model object, else default. */
static bool shape_field(json_object *model, const char *file, const char *key,
                        const char *cli, const char *option, uint32_t def, uint32_t max,
                        uint32_t *out, GError **err) {
  if (cli) return parse_u32(cli, (origin){"command line", option}, 1, max, out, err);
  if (!model) { *out = def; return true; }
  g_autofree char *path = g_strconcat("model.", key, NULL);
  json_object *v;
  if (!json_object_object_get_ex(model, key, &v)) { *out = def; return true; }
  if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1 ||
      json_object_get_int64(v) > max)
    return bad(err, (origin){file, path}, "expected a whole number from 1 to %u", max);
  *out = (uint32_t)json_object_get_int64(v);
  return true;
}

/* A string of the model (key, named path in messages), from the command
 * line, the file or a default; *o says where it came from. */
static bool model_string(json_object *model, const char *file, const char *key,
                         const char *path, const char *given, const char *option,
                         const char *def, const char **out, origin *o, GError **err) {
  *out = def;
  *o = (origin){"command line", option};
  if (given) {
    *out = given;
    return true;
  }
  json_object *v;
  if (model && json_object_object_get_ex(model, key, &v)) {
    *o = (origin){file, path};
    if (!json_object_is_type(v, json_type_string)) return bad(err, *o, "expected a string");
    *out = json_object_get_string(v);
  }
  return true;
}

/* The allowed keys of an object: `fields`, and the keys of the
 * schedulers' options that sit in it (in the model object, or at the
 * top).  The array is owned; the strings are not. */
static const char **keys_with_options(const char *const *fields, bool in_model) {
  GPtrArray *k = g_ptr_array_new();
  for (const char *const *f = fields; *f; f++) g_ptr_array_add(k, (gpointer)*f);
  for (const sched_opt *const *o = sched_options(); *o; o++)
    if ((*o)->in_model == in_model) g_ptr_array_add(k, (gpointer)(*o)->key);
  g_ptr_array_add(k, NULL);
  return (const char **)g_ptr_array_free(k, FALSE);
}

/* The value the command line gives option o ("key=value" in
 * ov->sched_opts), NULL: none. */
static const char *given_opt(const scenario_overrides *ov, const sched_opt *o) {
  size_t n = strlen(o->key);
  for (char *const *a = ov->sched_opts; a && *a; a++)
    if (!strncmp(*a, o->key, n) && (*a)[n] == '=') return *a + n + 1;
  return NULL;
}

/* Packed documents: --docs or model.docs (an array of lengths, or the
 * text --docs takes), read by docs.h; each sequence's are made by expand. */
static bool load_docs(scenario *s, json_object *model, const scenario_overrides *ov,
                      GError **err) {
  origin o = {"command line", "--docs"};
  g_autofree char *text = NULL;
  json_object *v = NULL;
  if (ov->docs) {
    text = g_strdup(ov->docs);
  } else if (model && json_object_object_get_ex(model, "docs", &v)) {
    o = (origin){s->file, "model.docs"};
    if (json_object_is_type(v, json_type_string)) {
      text = g_strdup(json_object_get_string(v));
      /* a file of lengths named in a scenario is found beside it */
      const char *path = g_str_has_prefix(text, "file:") ? text + strlen("file:") : NULL;
      if (path && !g_path_is_absolute(path) && s->file) {
        g_autofree char *dir = g_path_get_dirname(s->file);
        g_autofree char *full = g_build_filename(dir, path, NULL);
        g_free(text);
        text = g_strconcat("file:", full, NULL);
      }
    } else if (json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0) {
      GString *t = g_string_new(NULL);
      for (size_t i = 0; i < json_object_array_length(v); i++) {
        json_object *it = json_object_array_get_idx(v, i);
        if (!json_object_is_type(it, json_type_int) && !json_object_is_type(it, json_type_string)) {
          g_string_free(t, TRUE);
          return bad(err, o, "item %zu: expected a length (4096 or \"4K\")", i + 1);
        }
        g_string_append_printf(t, "%s%s", i ? "," : "", json_object_get_string(it));
      }
      text = g_string_free(t, FALSE);
    } else {
      return bad(err, o, "expected the documents' lengths (an array, or \"2K,59K\") or a "
                 "distribution (\"lognormal:mean=8K,sigma=1.0,seed=1\")");
    }
  } else {
    return true;
  }
  g_autofree char *why = NULL;
  s->docs_spec = docs_parse(text, &why);
  if (!s->docs_spec) return bad(err, o, "%s", why);
  return true;
}

/* The schedulers' own options (sched.h): each from the command line,
 * else from the file (model.KEY or KEY at the top), else unset. */
static bool load_sched_opts(scenario *s, json_object *root, json_object *model,
                            const scenario_overrides *ov, GError **err) {
  const sched_opt *const *opts = sched_options();
  for (int i = 0; opts[i]; i++) {
    const sched_opt *o = opts[i];
    const char *given = given_opt(ov, o);
    json_object *src = o->in_model ? model : root, *v = NULL;
    if (!given && !(src && json_object_object_get_ex(src, o->key, &v))) continue;
    origin where = given ? (origin){"command line", sched_option_flag(o)}
                         : (origin){s->file, sched_option_field(o)};
    workload_opt val = {0, NULL};
    g_autofree char *why = NULL;
    if (!sched_opt_value(o, given, v, &val, &why)) return bad(err, where, "%s", why);
    if (val.text) val.text = s->opt_text[i] = g_strdup(val.text);
    s->model.opts[i] = val;
  }
  return true;
}

static bool parse_dtype(const char *d, origin o, workload *m, GError **err) {
  if (!strcmp(d, "bf16") || !strcmp(d, "fp16")) m->elem_bytes = 2;
  else if (!strcmp(d, "fp32")) m->elem_bytes = 4;
  else if (!strcmp(d, "fp8")) m->elem_bytes = 1;
  else return bad(err, o, "expected bf16, fp16, fp32 or fp8, got \"%s\"", d);
  m->dtype = !strcmp(d, "bf16") ? "bf16" : !strcmp(d, "fp16") ? "fp16"
             : !strcmp(d, "fp32") ? "fp32" : "fp8";
  return true;
}

/* One layer's attention ("softmax" or "linear"). */
static bool parse_attention(const char *name, origin o, attn_kind *out, GError **err) {
  if (attn_parse(name, out)) return true;
  return bad(err, o, "expected softmax or linear, got \"%s\"", name);
}

/* model.layers: [{"attention": "linear", "count": 3}, ...] into counts
 * per kind. */
static bool parse_layers(json_object *list, const char *file, workload *m, GError **err) {
  origin o = {file, "model.layers"};
  size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
  if (n == 0)
    return bad(err, o, "expected a list of {\"attention\": \"linear\"|\"softmax\", "
                       "\"count\": N}, with at least one entry");
  for (size_t i = 0; i < n; i++) {
    json_object *it = json_object_array_get_idx(list, i);
    g_autofree char *path = g_strdup_printf("model.layers[%zu]", i);
    json_where w = {file, path, NULL};
    static const char *const keys[] = {"attention", "count", NULL};
    if (!json_object_is_type(it, json_type_object))
      return bad(err, (origin){file, path}, "expected an object {\"attention\", \"count\"}");
    const char *name;
    uint32_t count;
    attn_kind k;
    g_autofree char *apath = g_strconcat(path, ".attention", NULL);
    if (!json_check_keys(it, w, keys, err) ||
        !json_get_string(it, w, "attention", true, NULL, &name, err) ||
        !parse_attention(name, (origin){file, apath}, &k, err) ||
        !json_get_u32(it, w, "count", false, 1, 1, &count, err))
      return false;
    /* counts add up (a uint32 could wrap): the total is bounded */
    if (count > SCENARIO_MAX_LAYERS - m->layers[ATTN_SOFTMAX] - m->layers[ATTN_LINEAR]) {
      g_autofree char *cpath = g_strconcat(path, ".count", NULL);
      return bad(err, (origin){file, cpath}, "the model's layers add up to more than %u",
                 SCENARIO_MAX_LAYERS);
    }
    m->layers[k] += count;
  }
  return true;
}

/* The model's layers: model.attention (one layer, softmax by default) or
 * model.layers, or a preset's (`preset`, NULL: none), whose layers
 * model.layers replaces; --attention (or model.attention over a preset's
 * layers) makes every layer of that kind; the linear layers' decay and
 * kernel block length.  `arch` is the model object the architecture comes
 * from (NULL where --model replaces the file's). */
static bool load_layers(json_object *model, json_object *arch, const char *file,
                        const scenario_overrides *ov, const model_spec *preset, workload *m,
                        GError **err) {
  json_object *list = NULL;
  const char *name;
  origin o;
  if (arch && json_object_object_get_ex(arch, "layers", &list) &&
      json_object_object_get_ex(arch, "attention", NULL))
    return bad(err, (origin){file, "model.layers"},
               "give model.attention (one layer) or model.layers, not both");
  if (list && !parse_layers(list, file, m, err)) return false;
  bool from_preset = !list && preset;
  if (from_preset) memcpy(m->layers, preset->layers, sizeof m->layers);
  if (!model_string(arch, file, "attention", "model.attention", ov->attention, "--attention",
                    "softmax", &name, &o, err) ||
      !parse_attention(name, o, &m->attention, err))
    return false;
  bool every = ov->attention || (from_preset && arch &&
                                 json_object_object_get_ex(arch, "attention", NULL));
  bool mix = list || from_preset;
  if (every && mix) { /* every layer of the given kind */
    uint32_t total = 0;
    for (int k = 0; k < ATTN_KINDS; k++) total += m->layers[k], m->layers[k] = 0;
    m->layers[m->attention] = total;
  }
  if (mix) /* the layer build() gets first; sim.c builds each kind */
    m->attention = m->layers[ATTN_LINEAR] ? ATTN_LINEAR : ATTN_SOFTMAX;
  json_object *decay;
  if (model && json_object_object_get_ex(model, "decay", &decay)) {
    if (!json_object_is_type(decay, json_type_boolean))
      return bad(err, (origin){file, "model.decay"}, "expected true or false");
    m->decay = json_object_get_boolean(decay);
  }
  /* 64: flash-linear-attention's and LASP's chunk kernels (compute.c) */
  return shape_field(model, file, "linear_block", NULL, NULL, 64, SCENARIO_MAX_BLOCK,
                     &m->linear_block, err);
}

/* The preset a model names (model.preset, "model": "NAME" or --model),
 * loaded into *out; o: where it was named. */
static bool load_preset(const char *name, origin o, model_spec *out, GError **err) {
  g_autofree char *path = model_find(name);
  if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
    g_autoptr(GPtrArray) all = model_presets();
    g_autofree const char **cands = g_new(const char *, all->len + 1);
    for (guint i = 0; i < all->len; i++) {
      char *tab = strchr(all->pdata[i], '\t');
      if (tab) *tab = 0;
      cands[i] = all->pdata[i];
    }
    const char *near = names_nearest(name, cands, all->len);
    return bad(err, o, "\"%s\" is neither a model file nor a bundled model%s%s%s (--list shows "
               "them)", name, near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
  }
  return model_load_file(path, out, err);
}

/* The model: "model": "NAME" (a preset), or an object of shape fields
 * with an optional "preset" under them; --model replaces the file's
 * architecture (preset and its fields: model_fields, attention); options
 * override single fields.  *arch: the object the architecture is read
 * from (NULL: none). */
static bool model_source(scenario *s, json_object *root, const scenario_overrides *ov,
                         json_object **model, json_object **arch, model_spec *preset,
                         GError **err) {
  const char *file = s->file, *name = NULL;
  origin po = {"command line", "--model"};
  *model = *arch = NULL;
  json_object *v;
  if (root && json_object_object_get_ex(root, "model", &v)) {
    if (json_object_is_type(v, json_type_string)) {
      name = json_object_get_string(v);
      po = (origin){file, "model"};
    } else if (json_object_is_type(v, json_type_object)) {
      *model = *arch = v;
    } else {
      return bad(err, (origin){file, "model"},
                 "expected a preset name (\"llama3-8b\") or an object of model fields");
    }
  }
  if (*model) {
    static const char *const fields[] = {"batch", "heads", "kv_heads", "head_dim", "dtype",
                                         "grad_dtype", "name", "attention", "layers", "decay",
                                         "linear_block", "preset", "hidden", "ffn", "vocab",
                                         "docs", NULL};
    g_autofree const char **keys = keys_with_options(fields, true);
    json_where mw = {file, "model", NULL};
    if (!json_check_keys(*model, mw, keys, err) ||
        !json_get_string(*model, mw, "preset", false, NULL, &name, err))
      return false;
    if (name) po = (origin){file, "model.preset"};
  }
  if (ov->model) {
    name = ov->model;
    po = (origin){"command line", "--model"};
    *arch = NULL;
  }
  if (!name) return true;
  /* a model file named in a scenario is relative to it, as its topology */
  g_autofree char *rel = NULL;
  if (strcmp(po.file, "command line") && !g_path_is_absolute(name) && strchr(name, '/')) {
    g_autofree char *dir = g_path_get_dirname(file);
    rel = g_build_filename(dir, name, NULL);
    if (g_file_test(rel, G_FILE_TEST_EXISTS)) name = rel;
  }
  if (!load_preset(name, po, preset, err)) return false;
  s->model_file = g_strdup(preset->file);
  s->model_name = g_strdup(preset->name ? preset->name : name);
  return true;
}

static bool load_model(scenario *s, json_object *root, const scenario_overrides *ov,
                       GError **err) {
  const char *file = s->file;
  json_object *model, *arch;
  model_spec pre = {0};
  bool ok = model_source(s, root, ov, &model, &arch, &pre, err);
  g_auto(model_spec) preset = pre;
  if (!ok) return false;
  bool has_preset = preset.heads > 0;
  workload *m = &s->model;
  /* defaults: a preset's, else attention of Llama-3-8B (32 heads, 8 KV
   * heads, head dim 128) */
  if (!shape_field(model, file, "batch", ov->batch, "--batch", 1, SCENARIO_MAX_BATCH, &m->batch,
                   err) ||
      !shape_field(arch, file, "heads", ov->heads, "--heads", has_preset ? preset.heads : 32,
                   SCENARIO_MAX_HEADS, &m->heads, err) ||
      !shape_field(arch, file, "kv_heads", ov->kv_heads, "--kv-heads",
                   has_preset ? preset.kv_heads : m->heads, SCENARIO_MAX_HEADS, &m->kv_heads,
                   err) ||
      !shape_field(arch, file, "head_dim", ov->head_dim, "--head-dim",
                   has_preset ? preset.head_dim : 128, SCENARIO_MAX_HEAD_DIM, &m->head_dim,
                   err) ||
      !shape_field(arch, file, "hidden", NULL, NULL, preset.hidden, SCENARIO_MAX_HIDDEN,
                   &m->hidden, err) ||
      !shape_field(arch, file, "ffn", NULL, NULL, preset.ffn, SCENARIO_MAX_FFN, &m->ffn, err) ||
      !shape_field(arch, file, "vocab", NULL, NULL, preset.vocab, SCENARIO_MAX_VOCAB, &m->vocab,
                   err))
    return false;
  if (!s->model_name && model) {
    const char *n = NULL;
    json_where mw = {file, "model", NULL};
    if (!json_get_string(model, mw, "name", false, NULL, &n, err)) return false;
    s->model_name = g_strdup(n);
  }
  if (!load_sched_opts(s, root, model, ov, err) || !load_docs(s, model, ov, err)) return false;
  bool kv_given = ov->kv_heads || (arch && json_object_object_get_ex(arch, "kv_heads", NULL));
  bool heads_given = ov->heads || (arch && json_object_object_get_ex(arch, "heads", NULL));
  /* KV heads default to the heads given (a model file's rule, MHA), but
   * with no heads anywhere the shape is the default's whole, Llama-3-8B's
   * 8 KV heads: a model object of run fields alone ({"batch": 2}) is the
   * command line's --batch 2, not a switch to 32 KV heads */
  if (!kv_given && !heads_given && !has_preset)
    m->kv_heads = 8;
  const char *dtype, *grad;
  origin od, og;
  if (!model_string(model, file, "dtype", "model.dtype", ov->dtype, "--dtype", "bf16", &dtype,
                    &od, err) ||
      !parse_dtype(dtype, od, m, err))
    return false;
  /* dK/dV accumulators: float32 by default, as ring_flash_attn keeps them */
  if (!model_string(model, file, "grad_dtype", "model.grad_dtype", ov->grad_dtype,
                    "--grad-dtype", "fp32", &grad, &og, err))
    return false;
  if (!strcmp(grad, "fp32")) m->grad_bytes = 4;
  else if (!strcmp(grad, "bf16") || !strcmp(grad, "fp16")) m->grad_bytes = 2;
  else return bad(err, og, "expected fp32, bf16 or fp16, got \"%s\"", grad);
  if (!load_layers(model, arch, file, ov, has_preset ? &preset : NULL, m, err)) return false;
  if (has_preset && !kv_given && heads_given &&
      (m->kv_heads > m->heads || m->heads % m->kv_heads != 0)) {
    /* the preset's KV heads under heads the user gave: blame the heads */
    origin o = from(s, ov->heads, "--heads", "model.heads");
    return bad(err, o, "expected a multiple of the %u KV heads of model %s (or give the KV "
               "heads too), got %u", m->kv_heads, s->model_name, m->heads);
  }
  if (m->kv_heads > m->heads || m->heads % m->kv_heads != 0) {
    origin o = ov->kv_heads ? (origin){"command line", "--kv-heads"}
                            : (origin){file ? file : "command line", file ? "model.kv_heads" : "--kv-heads"};
    return bad(err, o, "expected a divisor of the %u query heads, got %u", m->heads, m->kv_heads);
  }
  /* a linear layer's state, bounded as a tensor is (SCENARIO_MAX_TENSOR_BYTES) */
  if (layers_count(m, ATTN_LINEAR) &&
      workload_state_bytes(m) > (double)SCENARIO_MAX_TENSOR_BYTES)
    return bad(err, from(s, ov->head_dim, "--head-dim", "model.head_dim"),
               "a linear layer's state, batch %u x %u heads x head dim %u^2 x 4 bytes, is "
               "%.4g TiB; expected at most %llu TiB", m->batch, m->heads, m->head_dim,
               workload_state_bytes(m) / (double)(1ull << 40), SCENARIO_MAX_TENSOR_BYTES >> 40);
  return true;
}

/* The job's settings: an option, else the scenario's "job" object's
 * field (a string or a whole number), with where it came from. */
typedef struct {
  const char *v;
  origin o;
} job_value;

enum { J_SCOPE, J_TP, J_DP, J_ZERO, J_RECOMPUTE, J_MICRO, J_GBT, J_PLACEMENT, J_PRECISION,
       J_ELEMENTWISE, J_COUNT };
static const char *const job_keys[J_COUNT + 1] = {
    "scope", "tp", "dp", "zero", "recompute", "micro_batches", "global_batch_tokens",
    "placement", "precision", "elementwise", NULL};
static const char *const job_fields[J_COUNT] = {
    "job.scope", "job.tp", "job.dp", "job.zero", "job.recompute", "job.micro_batches",
    "job.global_batch_tokens", "job.placement", "job.precision", "job.elementwise"};
static const char *const job_options[J_COUNT] = {
    "--scope", "--tp", "--dp", "--zero", "--recompute", "--micro-batches",
    "--global-batch-tokens", "--placement", "--precision", "--elementwise"};

static bool job_values(const scenario *s, json_object *root, const scenario_overrides *ov,
                       job_value *out, GError **err) {
  const char *given[J_COUNT] = {ov->scope, ov->tp, ov->dp, ov->zero, ov->recompute,
                                ov->micro_batches, ov->global_batch_tokens, ov->placement,
                                ov->precision, ov->elementwise};
  json_object *job = NULL;
  if (root && json_object_object_get_ex(root, "job", &job)) {
    if (!json_object_is_type(job, json_type_object))
      return bad(err, (origin){s->file, "job"}, "expected an object with %s", "scope, tp, dp, "
                 "zero, recompute, micro_batches, global_batch_tokens, placement, precision, "
                 "elementwise");
    if (!json_check_keys(job, (json_where){s->file, "job", NULL}, job_keys, err)) return false;
  }
  for (int k = 0; k < J_COUNT; k++) {
    out[k] = (job_value){given[k], {"command line", job_options[k]}};
    json_object *v;
    if (given[k] || !job || !json_object_object_get_ex(job, job_keys[k], &v)) continue;
    out[k].o = (origin){s->file, job_fields[k]};
    if (!json_object_is_type(v, json_type_string) && !json_object_is_type(v, json_type_int))
      return bad(err, out[k].o, "expected a string or a whole number");
    out[k].v = json_object_get_string(v);
  }
  return true;
}

/* The job around the attention (layer.h): scope, TP, and at scope model
 * DP, ZeRO, recomputation, micro-batches or a global batch, placement,
 * precision, element-wise ops.  The layer needs the model's hidden and FFN
 * sizes, and TP must divide its heads, KV heads and FFN. */
static bool load_job(scenario *s, json_object *root, const scenario_overrides *ov,
                     GError **err) {
  workload *m = &s->model;
  job_value j[J_COUNT];
  if (!job_values(s, root, ov, j, err)) return false;
  origin os = j[J_SCOPE].o, ot = j[J_TP].o;
  const char *scope = j[J_SCOPE].v;
  if (!scope || !strcmp(scope, "attention")) m->scope = SCOPE_ATTENTION;
  else if (!strcmp(scope, "layer")) m->scope = SCOPE_LAYER;
  else if (!strcmp(scope, "model")) m->scope = SCOPE_MODEL;
  else return bad(err, os, "expected attention, layer or model, got \"%s\"", scope);
  m->tp = m->dp = 1;
  if (j[J_TP].v && !parse_u32(j[J_TP].v, ot, 1, SCENARIO_MAX_SP, &m->tp, err)) return false;
  const char *ew = j[J_ELEMENTWISE].v;
  if (ew && strcmp(ew, "fused") && strcmp(ew, "unfused"))
    return bad(err, j[J_ELEMENTWISE].o, "expected fused or unfused, got \"%s\"", ew);
  m->unfused = ew && !strcmp(ew, "unfused");
  /* the whole step's settings, refused at the other scopes (they would be
   * silently ignored) */
  static const int model_only[] = {J_DP, J_ZERO, J_RECOMPUTE, J_MICRO, J_GBT};
  for (size_t i = 0; i < G_N_ELEMENTS(model_only); i++)
    if (j[model_only[i]].v && m->scope != SCOPE_MODEL)
      return bad(err, j[model_only[i]].o, "needs --scope model (the whole training step)");
  if (j[J_DP].v && !parse_u32(j[J_DP].v, j[J_DP].o, 1, SCENARIO_MAX_SP, &m->dp, err))
    return false;
  /* micro-batches: bounded as a batch is (each one is a batch's worth) */
  m->micro_batches = 1;
  if (j[J_MICRO].v &&
      !parse_u32(j[J_MICRO].v, j[J_MICRO].o, 1, SCENARIO_MAX_BATCH, &m->micro_batches, err))
    return false;
  m->global_batch_tokens = 0;
  if (j[J_GBT].v) {
    if (j[J_MICRO].v)
      return bad(err, j[J_GBT].o, "gives the micro-batches already given by %s; give one",
                 j[J_MICRO].o.field);
    if (!size_parse(j[J_GBT].v, &m->global_batch_tokens) || !m->global_batch_tokens ||
        m->global_batch_tokens > SCENARIO_MAX_TOKENS * (uint64_t)SCENARIO_MAX_BATCH)
      return bad(err, j[J_GBT].o, "expected a number of tokens (4M), got \"%s\"", j[J_GBT].v);
  }
  const char *zero = j[J_ZERO].v;
  if (zero) {
    if (strlen(zero) != 1 || zero[0] < '0' || zero[0] > '3')
      return bad(err, j[J_ZERO].o, "expected a ZeRO stage 0, 1, 2 or 3, got \"%s\"", zero);
    m->zero = (uint32_t)(zero[0] - '0');
  }
  const char *rc = j[J_RECOMPUTE].v;
  if (!rc || !strcmp(rc, "none")) m->recompute = RECOMPUTE_NONE;
  else if (!strcmp(rc, "selective")) m->recompute = RECOMPUTE_SELECTIVE;
  else if (!strcmp(rc, "full")) m->recompute = RECOMPUTE_FULL;
  else return bad(err, j[J_RECOMPUTE].o, "expected none, selective or full, got \"%s\"", rc);
  m->placement = PLACE_TP_SP_DP;
  if (j[J_PLACEMENT].v && !layer_placement_parse(j[J_PLACEMENT].v, &m->placement))
    return bad(err, j[J_PLACEMENT].o, "expected an order of tp, sp and dp, innermost first "
               "(tp,sp,dp; sp,tp,dp; ...), got \"%s\"", j[J_PLACEMENT].v);
  const char *pr = j[J_PRECISION].v;
  m->precision = PRECISION_MEGATRON;
  if (pr && !strcmp(pr, "amp")) m->precision = PRECISION_AMP;
  else if (pr && !strcmp(pr, "bf16")) m->precision = PRECISION_BF16;
  else if (pr && !strcmp(pr, "fp8")) m->precision = PRECISION_FP8;
  else if (pr && strcmp(pr, "megatron"))
    return bad(err, j[J_PRECISION].o, "expected megatron, amp, bf16 or fp8, got \"%s\"", pr);
  if (m->scope == SCOPE_ATTENTION) {
    if (m->tp > 1) return bad(err, ot, "tensor parallelism needs --scope layer (the attention "
                              "scope has no projections to split)");
    if (pr)
      return bad(err, j[J_PRECISION].o, "needs --scope layer or model (the attention scope "
                 "has no weights)");
    if (j[J_PLACEMENT].v)
      return bad(err, j[J_PLACEMENT].o, "needs --scope layer or model (the attention scope "
                 "has SP alone)");
    return true;
  }
  if (!m->hidden || !m->ffn || (m->scope == SCOPE_MODEL && !m->vocab))
    return bad(err, os, "scope %s needs the model's %s sizes: give --model (a preset such as "
               "llama3-8b, or a file) or %s", scope_name(m->scope),
               m->scope == SCOPE_MODEL ? "hidden, FFN and vocabulary" : "hidden and FFN",
               m->scope == SCOPE_MODEL ? "model.hidden, model.ffn and model.vocab"
                                       : "model.hidden and model.ffn");
  layer_dims d = {.tokens = m->tp, .hidden = m->hidden, .ffn = m->ffn, .heads = m->heads,
                  .kv_heads = m->kv_heads, .head_dim = m->head_dim, .tp = m->tp};
  g_autoptr(GError) e = NULL;
  if (!compute_layer_check(&d, &e)) return bad(err, ot, "%s", e->message);
  return true;
}

static bool load_topology(scenario *s, json_object *root, const scenario_overrides *ov,
                          GError **err) {
  g_autofree char *path = NULL;
  if (ov->topology) {
    path = scenario_find_topology(ov->topology);
    if (!g_file_test(path, G_FILE_TEST_EXISTS) && !strchr(ov->topology, '/')) {
      g_autoptr(GPtrArray) all = names_topologies();
      g_autofree const char **cands = g_new(const char *, all->len + 1);
      for (guint i = 0; i < all->len; i++) {
        char *tab = strchr(all->pdata[i], '\t');
        if (tab) *tab = 0;
        cands[i] = all->pdata[i];
      }
      const char *near = names_nearest(ov->topology, cands, all->len);
      return bad(err, (origin){"command line", "--topology"},
                 "\"%s\" is neither a file nor a bundled topology%s%s%s (--list shows them)",
                 ov->topology, near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
    }
  } else {
    const char *rel;
    json_where w = {s->file, "", NULL};
    if (!root) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "no scenario file and no --topology: give one or both (see --help)");
      return false;
    }
    if (!json_get_string(root, w, "topology", true, NULL, &rel, err)) return false;
    if (g_path_is_absolute(rel)) path = g_strdup(rel);
    else {
      g_autofree char *dir = g_path_get_dirname(s->file);
      path = g_build_filename(dir, rel, NULL);
    }
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
      g_autofree char *alt = scenario_find_topology(rel);
      if (g_file_test(alt, G_FILE_TEST_EXISTS)) { g_free(path); path = g_steal_pointer(&alt); }
      else return bad(err, (origin){s->file, "topology"},
                      "topology file \"%s\" not found (looked for %s)", rel, path);
    }
  }
  s->topo = topo_load_set(path, ov->set, ov->topo_max_bytes, err);
  return s->topo != NULL;
}

/* A sweep list is a set: each value once.  A repeat ("32K,32K", or 32K and
 * 32768) would run the same points twice, so it is refused rather than
 * folded: it is most likely a typo for another value.  `canon` (owned by
 * `seen` from here on) is the value as tasp-sim understands it, `given` as
 * written. */
static bool once(GHashTable *seen, char *canon, const char *given, origin o, GError **err) {
  const char *first = g_hash_table_lookup(seen, canon);
  if (first) {
    if (!strcmp(first, given))
      bad(err, o, "\"%s\" is given twice; a sweep list names each value once", given);
    else
      bad(err, o, "\"%s\" and \"%s\" are the same value (%s); a sweep list names each value "
          "once", first, given, canon);
    g_free(canon);
    return false;
  }
  g_hash_table_insert(seen, canon, (gpointer)given);
  return true;
}

static GHashTable *seen_new(void) {
  return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

/* Sizes a sequence length makes with the model: tokens (batch x seq_len)
 * and one tensor's bytes, within SCENARIO_MAX_TOKENS and
 * SCENARIO_MAX_TENSOR_BYTES (computed in doubles: the factors are bounded,
 * the product needs no more than 2^80). */
static bool check_seq_size(const workload *m, uint64_t seq, origin o, GError **err) {
  g_autofree char *text = size_format(seq);
  if (seq > SCENARIO_MAX_SEQ)
    return bad(err, o, "expected a token count from 1 to 1G (%llu), got %s",
               SCENARIO_MAX_SEQ, text);
  double tokens = (double)m->batch * (double)seq;
  if (tokens > (double)SCENARIO_MAX_TOKENS)
    return bad(err, o, "batch %u x %s tokens is %.4g tokens in a step; expected at most 1G "
               "(%llu)", m->batch, text, tokens, SCENARIO_MAX_TOKENS);
  uint32_t e = m->grad_bytes > m->elem_bytes ? m->grad_bytes : m->elem_bytes;
  double bytes = tokens * m->heads * m->head_dim * e;
  if (bytes > (double)SCENARIO_MAX_TENSOR_BYTES)
    return bad(err, o, "batch %u x %s tokens x %u heads x head dim %u x %u bytes is %.4g TiB "
               "in one tensor of the layer; expected at most %llu TiB (so that every byte "
               "count stays exact)", m->batch, text, m->heads, m->head_dim, e,
               bytes / (double)(1ull << 40), SCENARIO_MAX_TENSOR_BYTES >> 40);
  return true;
}

/* Sequence lengths, masks, passes and schedulers: all the sweep but the
 * SP degrees, checked before the topology's tables are built. */
static bool load_sweep(scenario *s, json_object *root, const scenario_overrides *ov,
                       GError **err) {
  origin o;
  g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GHashTable) seen = seen_new();

  if (!get_list(root, s->file, "seq_len", ov->seq, "--seq", SCENARIO_DEFAULT_SEQ, items, &o,
                err))
    return false;
  for (guint i = 0; i < items->len; i++) {
    uint64_t v;
    if (!size_parse(items->pdata[i], &v))
      return bad(err, o, "expected a positive token count such as 32768, 32K or 1M, got \"%s\"",
                 (char *)items->pdata[i]);
    if (!check_seq_size(&s->model, v, o, err) ||
        !once(seen, g_strdup_printf("%" G_GUINT64_FORMAT, v), items->pdata[i], o, err))
      return false;
    g_array_append_val(s->seqs, v);
  }
  g_ptr_array_set_size(items, 0);
  g_hash_table_remove_all(seen);
  if (!get_list(root, s->file, "mask", ov->mask, "--mask", SCENARIO_DEFAULT_MASK, items, &o,
                err))
    return false;
  for (guint i = 0; i < items->len; i++) {
    const char *m = items->pdata[i];
    if (strcmp(m, "full") && strcmp(m, "causal"))
      return bad(err, o, "expected full or causal, got \"%s\"", m);
    if (!once(seen, g_strdup(m), m, o, err)) return false;
    gboolean c = strcmp(m, "causal") == 0;
    g_array_append_val(s->masks, c);
  }
  g_ptr_array_set_size(items, 0);
  g_hash_table_remove_all(seen);
  /* scope model is the training step, forward and backward: a forward
   * alone would keep every activation whatever --recompute says and hold
   * no gradients or optimizer states, while the header and the row say
   * they are the step's (so fwdbwd is its default, and the others are
   * refused) */
  bool step = s->model.scope == SCOPE_MODEL;
  if (!get_list(root, s->file, "pass", ov->pass, "--pass",
                step ? "fwdbwd" : SCENARIO_DEFAULT_PASS, items, &o, err))
    return false;
  for (guint i = 0; i < items->len; i++) {
    const char *m = items->pdata[i];
    pass_kind p;
    if (!strcmp(m, "fwd")) p = PASS_FWD;
    else if (!strcmp(m, "bwd")) p = PASS_BWD;
    else if (!strcmp(m, "fwdbwd")) p = PASS_FWDBWD;
    else return bad(err, o, "expected fwd, bwd or fwdbwd, got \"%s\"", m);
    if (step && p != PASS_FWDBWD)
      return bad(err, o, "scope model is the training step, forward and backward: expected "
                 "fwdbwd, got \"%s\" (a layer's forward or backward alone: --scope layer)", m);
    if (!once(seen, g_strdup(m), m, o, err)) return false;
    g_array_append_val(s->passes, p);
  }
  g_ptr_array_set_size(items, 0);
  g_hash_table_remove_all(seen);
  if (!get_list(root, s->file, "schedulers", ov->sched, "--sched", SCENARIO_DEFAULT_SCHEDS,
                items, &o, err))
    return false;
  for (guint i = 0; i < items->len; i++) {
    if (!strcmp(items->pdata[i], "all")) {
      /* every scheduler that runs the model's layers (softmax, linear or
       * both: sched_check_attention, as for a named one) */
      if (items->len > 1)
        return bad(err, o, "\"all\" names every scheduler that runs the model's layers; give "
                   "it alone");
      for (const sched_ops *const *a = sched_all(); *a; a++)
        if (!(*a)->alias_of && sched_check_attention(*a, &s->model, NULL))
          g_ptr_array_add(s->scheds, (gpointer)*a); /* an alias runs as what it names */
      continue;
    }
    const sched_ops *so = sched_find(items->pdata[i]);
    if (!so) {
      g_autofree char *names = sched_names();
      const char *cands[64];
      guint n = 0;
      for (const sched_ops *const *a = sched_all(); *a && n < 64; a++) cands[n++] = (*a)->name;
      const char *near = names_nearest(items->pdata[i], cands, n);
      return bad(err, o, "unknown scheduler \"%s\"%s%s%s; expected one of: %s, or all",
                 (char *)items->pdata[i], near ? " (did you mean " : "", near ? near : "",
                 near ? "?)" : "", names);
    }
    if (!once(seen, g_strdup(so->name), items->pdata[i], o, err)) return false;
    g_ptr_array_add(s->scheds, (gpointer)so);
  }
  /* an option some schedulers read (TASP's cycles), given where none of
   * the run's schedulers does, would be ignored: refused */
  const sched_opt *const *opts = sched_options();
  for (int i = 0; opts[i]; i++) {
    const sched_opt *op = opts[i];
    if (!op->ignored_noun || !s->model.opts[i].text) continue;
    bool used = false;
    for (guint k = 0; k < s->scheds->len; k++) used |= sched_uses_option(s->scheds->pdata[k], op);
    if (used) continue;
    g_autoptr(GString) names = g_string_new(NULL);
    for (guint k = 0; k < s->scheds->len; k++)
      g_string_append_printf(names, "%s%s", k ? ", " : "",
                             ((const sched_ops *)s->scheds->pdata[k])->name);
    g_autofree char *users = sched_option_users(op);
    bool one = !strchr(users, ',');
    origin oc = given_opt(ov, op) ? (origin){"command line", sched_option_flag(op)}
                                  : (origin){s->file, sched_option_field(op)};
    return bad(err, oc, "only scheduler%s %s use%s given %s, and the schedulers here (%s) "
               "would ignore them; add %s or leave the %s out", one ? "" : "s", users,
               one ? "s" : "", op->ignored_noun, names->str, users, op->ignored_noun);
  }
  return true;
}

/* --precision fp8 prices the linear layers from the topology's FP8 GEMM
 * table: without one the FP8 step would be a guess, so it is refused. */
static bool check_fp8(const scenario *s, const scenario_overrides *ov, GError **err) {
  if (s->model.precision != PRECISION_FP8 || s->topo->compute.fp8_gemm_points->len) return true;
  return bad(err, from(s, ov->precision, "--precision", "job.precision"),
             "fp8 needs the FP8 GEMM times of the GPU: topology %s (%s) has no "
             "compute.fp8_gemm_table (scripts/calibrate/fp8_gemm.py measures one, "
             "scripts/calibrate/fit.py --fp8-gemm adds it)", s->topo->name, s->topo->file);
}

/* SP degrees: default all GPUs of the topology, none beyond them. */
static bool load_sp(scenario *s, json_object *root, const scenario_overrides *ov,
                    GError **err) {
  if (!check_fp8(s, ov, err)) return false;
  origin o;
  g_autoptr(GPtrArray) items = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GHashTable) seen = seen_new();
  uint32_t tp = s->model.tp ? s->model.tp : 1, dp = s->model.dp ? s->model.dp : 1;
  g_autofree char *x_dp = dp > 1 ? g_strdup_printf(" x DP %u", dp) : g_strdup("");
  if ((uint64_t)tp * dp > s->topo->n_gpus)
    return bad(err, (origin){"command line", dp > 1 ? "--dp" : "--tp"}, "TP %u%s exceeds the %u "
               "GPUs of topology %s (%s)", tp, x_dp, s->topo->n_gpus, s->topo->name,
               s->topo->file);
  /* by default SP takes every GPU TP and DP leave */
  tp *= dp;
  g_autofree char *all_gpus = g_strdup_printf("%u", s->topo->n_gpus / tp);
  if (!get_list(root, s->file, "sp", ov->sp, "--sp", all_gpus, items, &o, err)) return false;
  for (guint i = 0; i < items->len; i++) {
    uint32_t v;
    if (!parse_u32(items->pdata[i], o, 1, SCENARIO_MAX_SP, &v, err)) return false;
    if (v > s->topo->n_gpus)
      return bad(err, o, "SP degree %u exceeds the %u GPUs of topology %s (%s)", v,
                 s->topo->n_gpus, s->topo->name, s->topo->file);
    if ((uint64_t)v * tp > s->topo->n_gpus)
      return bad(err, (origin){"command line", dp > 1 ? "--dp" : "--tp"}, "TP %u x SP %u%s is "
                 "%llu GPUs, beyond the %u of topology %s (%s)", tp / dp, v, x_dp,
                 (unsigned long long)v * tp, s->topo->n_gpus, s->topo->name, s->topo->file);
    if (!once(seen, g_strdup_printf("%u", v), items->pdata[i], o, err)) return false;
    g_array_append_val(s->sps, v);
  }
  return true;
}

/* The scheduler's option a check refused (TASP_ERROR_OPTION: its key
 * starts the message), NULL: none. */
static const sched_opt *refused_option(const GError *e) {
  for (const sched_opt *const *o = sched_options(); *o; o++) {
    size_t n = strlen((*o)->key);
    if (!strncmp(e->message, (*o)->key, n) && e->message[n] == ':') return *o;
  }
  return NULL;
}

/* The input a scheduler's check failed on, by its error code. */
static origin blame(const scenario *s, const scenario_overrides *ov, const GError *e) {
  const sched_opt *o = e->code == TASP_ERROR_OPTION ? refused_option(e) : NULL;
  if (o) return from(s, given_opt(ov, o), sched_option_flag(o), sched_option_field(o));
  switch (e->code) {
    case TASP_ERROR_SP: return from(s, ov->sp, "--sp", "sp");
    case TASP_ERROR_TOPOLOGY: return from(s, ov->topology, "--topology", "topology");
    case TASP_ERROR_DOCS: return from(s, ov->docs, "--docs", "model.docs");
    default: return from(s, ov->seq, "--seq", "seq_len");
  }
}

/* Whether a check's objection is "this scheduler cannot run this point"
 * (the sequence does not divide, the heads do not divide among the GPUs,
 * no cycles over these links, a plan too large) rather than bad input
 * (malformed given cycles, layers the scheduler does not run). */
static bool cannot_run(const GError *e) {
  return e->code == TASP_ERROR_SEQ || e->code == TASP_ERROR_SP || e->code == TASP_ERROR_TOPOLOGY ||
         e->code == TASP_ERROR_DOCS;
}

/* The check's words without the scheduler's name the row already shows. */
static char *na_reason(const sched_ops *so, const char *msg) {
  size_t n = strlen(so->name);
  if (!strncmp(msg, so->name, n) && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  return g_strdup(msg);
}

/* Expand and check every point; ring and the --baseline scheduler are
 * added (hidden) where not asked for, so every row has its speedups. */
static bool expand(scenario *s, const scenario_overrides *ov, GError **err) {
  for (guint k = 0; k < s->scheds->len; k++) {
    g_autoptr(GError) e = NULL;
    if (!sched_check_attention(s->scheds->pdata[k], &s->model, &e))
      return bad(err, ov->sched ? (origin){"command line", "--sched"}
                                : (origin){s->file ? s->file : "command line",
                                           s->file ? "schedulers" : "--sched"}, "%s", e->message);
  }
  if (ov->baseline && strcmp(ov->baseline, "best")) {
    s->baseline = sched_find(ov->baseline);
    if (!s->baseline)
      return bad(err, (origin){"command line", "--baseline"}, "expected best, ring or zigzag");
  }
  g_autoptr(GPtrArray) hidden = g_ptr_array_new();
  const sched_ops *wanted[] = {&sched_ring, s->baseline};
  for (size_t h = 0; h < G_N_ELEMENTS(wanted); h++) {
    bool asked = !wanted[h] || (h && wanted[h] == wanted[0]);
    for (guint k = 0; k < s->scheds->len; k++) asked |= s->scheds->pdata[k] == wanted[h];
    if (!asked) g_ptr_array_add(hidden, (gpointer)wanted[h]);
  }
  /* each sequence's packed documents (a list must fill it exactly) */
  for (guint i = 0; s->docs_spec && i < s->seqs->len; i++) {
    g_autofree char *why = NULL;
    GArray *d = docs_for(s->docs_spec, g_array_index(s->seqs, uint64_t, i), &why);
    if (!d) return bad(err, from(s, ov->docs, "--docs", "model.docs"), "%s", why);
    g_ptr_array_add(s->docs, d);
  }
  /* the first objection to a shown point, as the error it was before
   * n/a rows: returned when no shown point can run */
  g_autoptr(GError) first = NULL;
  bool any_ran = false;
  for (guint a = 0; a < s->masks->len; a++)
    for (guint b = 0; b < s->passes->len; b++)
      for (guint i = 0; i < s->seqs->len; i++)
        for (guint j = 0; j < s->sps->len; j++) {
          workload w = s->model;
          w.causal = g_array_index(s->masks, gboolean, a);
          w.pass = g_array_index(s->passes, pass_kind, b);
          w.seq_len = g_array_index(s->seqs, uint64_t, i);
          if (s->docs_spec) {
            const GArray *d = s->docs->pdata[i];
            w.docs = (const uint64_t *)(void *)d->data;
            w.n_docs = d->len;
          }
          w.gpus = g_array_index(s->sps, uint32_t, j);
          for (guint k = 0; k < s->scheds->len + hidden->len; k++) {
            scenario_point p = {w, NULL, false, NULL};
            if (k >= s->scheds->len) {
              p.sched = hidden->pdata[k - s->scheds->len];
              p.hidden = true;
            } else {
              p.sched = s->scheds->pdata[k];
            }
            g_autoptr(GError) e = NULL;
            /* at layer scope the scheduler plans one TP rank's heads */
            workload chk = w.scope != SCOPE_ATTENTION ? layer_attention_workload(&w) : w;
            if (w.scope != SCOPE_ATTENTION && fmod(layer_dims_of(&w).tokens, layer_tp(&w))) {
              g_autofree char *seq = size_format(w.seq_len);
              return bad(err, (origin){"command line", "--tp"}, "TP %u does not divide the "
                         "%.0f tokens of an SP rank at seq_len %s, SP %u (sequence parallelism "
                         "shards them among the TP ranks)", layer_tp(&w),
                         layer_dims_of(&w).tokens, seq, w.gpus);
            }
            if (w.scope == SCOPE_MODEL && w.global_batch_tokens) {
              uint64_t seqs = (uint64_t)w.batch * w.seq_len * layer_dp(&w);
              if (w.global_batch_tokens % seqs || w.global_batch_tokens < seqs) {
                g_autofree char *seq = size_format(w.seq_len);
                g_autofree char *gbt = size_format(w.global_batch_tokens);
                return bad(err, from(s, ov->global_batch_tokens, "--global-batch-tokens",
                                     "job.global_batch_tokens"),
                           "%s tokens are not whole micro-batches of batch %u x seq_len %s x "
                           "DP %u", gbt, w.batch, seq, layer_dp(&w));
              }
            }
            layer_view view;
            layer_view_init(&view, &w, s->topo);
            bool can = sched_check(p.sched, &chk, &view.t, &e);
            layer_view_clear(&view);
            /* the plan built: the step's, or the largest of the few it is
             * extended from */
            workload built = s->whole_steps ? w : sim_step_replayed(&w);
            if (!can ||
                (w.scope != SCOPE_ATTENTION &&
                 !sched_check_tasks(&built, layer_tasks_estimate(&built, s->topo), p.sched->name, &e))) {
              /* a hidden baseline's bad input (layers it does not run)
               * is --baseline's: ring, the other one hidden, runs all */
              origin o = p.hidden && !cannot_run(e) && ov->baseline
                             ? (origin){"command line", "--baseline"}
                             : blame(s, ov, e);
              g_autofree char *seq = size_format(w.seq_len);
              GError *why = NULL;
              bad(&why, o, "%s at seq_len %s, SP %u: %s", p.sched->name, seq, w.gpus,
                  e->message);
              /* --strict holds the points asked for: a hidden baseline
               * that cannot run is said under the verdict, as without it */
              if ((ov->strict && !p.hidden) || !cannot_run(e)) {
                g_propagate_error(err, why);
                return false;
              }
              if (!p.hidden && !first) first = why;
              else g_error_free(why);
              p.na = na_reason(p.sched, e->message);
            } else {
              any_ran |= !p.hidden;
            }
            g_array_append_val(s->points, p);
          }
        }
  if (!any_ran && first && !ov->topology_only) {
    g_propagate_error(err, g_steal_pointer(&first));
    return false;
  }
  return true;
}

guint scenario_groups(const scenario *s) {
  return s->masks->len * s->passes->len * s->seqs->len * s->sps->len;
}

scenario *scenario_load(const char *file, const scenario_overrides *ov, GError **err) {
  scenario *s = g_new0(scenario, 1);
  s->file = g_strdup(file);
  s->whole_steps = ov->whole_steps;
  s->seqs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  s->sps = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  s->masks = g_array_new(FALSE, FALSE, sizeof(gboolean));
  s->passes = g_array_new(FALSE, FALSE, sizeof(pass_kind));
  s->scheds = g_ptr_array_new();
  s->points = g_array_new(FALSE, FALSE, sizeof(scenario_point));
  s->docs = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
  g_autoptr(json_object) root = NULL;
  bool ok = true;
  if (file) {
    root = json_read_file(file, err);
    ok = root != NULL;
    if (ok) {
      static const char *const fields[] = {"name", "description", "topology", "model",
                                           "seq_len", "sp", "mask", "pass", "schedulers", "job", "search", NULL};
      g_autofree const char **keys = keys_with_options(fields, false);
      json_where w = {file, "", NULL};
      const char *name;
      ok = json_check_keys(root, w, keys, err) &&
           json_get_string(root, w, "name", false, NULL, &name, err);
      if (ok) s->name = g_strdup(name);
    }
  }
  ok = ok && load_model(s, root, ov, err) && load_job(s, root, ov, err) &&
       load_sweep(s, root, ov, err) &&
       load_topology(s, root, ov, err) && load_sp(s, root, ov, err) && expand(s, ov, err);
  if (!ok) {
    scenario_free(s);
    return NULL;
  }
  if (!s->name) s->name = g_strdup(s->topo->name);
  return s;
}

void scenario_free(scenario *s) {
  if (!s) return;
  g_free(s->file);
  g_free(s->name);
  for (size_t i = 0; i < G_N_ELEMENTS(s->opt_text); i++) g_free(s->opt_text[i]);
  g_ptr_array_free(s->docs, TRUE);
  docs_spec_free(s->docs_spec);
  g_free(s->model_name);
  g_free(s->model_file);
  topo_free(s->topo);
  g_array_free(s->seqs, TRUE);
  g_array_free(s->sps, TRUE);
  g_array_free(s->masks, TRUE);
  g_array_free(s->passes, TRUE);
  g_ptr_array_free(s->scheds, TRUE);
  for (guint i = 0; i < s->points->len; i++) g_free(g_array_index(s->points, scenario_point, i).na);
  g_array_free(s->points, TRUE);
  g_free(s);
}
