/* jsonio: typed reads of JSON fields that fail with one clear message.
 *
 * Every error names the file, the field (as a dotted path such as
 * "generator.port_gbps") and what was expected.  Errors use the
 * TASP_ERROR domain; main turns them into exit status 2. */
#ifndef TASP_JSONIO_H
#define TASP_JSONIO_H

#include <glib.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#define TASP_ERROR (tasp_error_quark())
GQuark tasp_error_quark(void);
enum {
  TASP_ERROR_INPUT = 1,
  TASP_ERROR_IO = 2,
  /* A scheduler's check says which input is at fault, so the message
   * names the right field or option (all are bad input, exit status 2). */
  TASP_ERROR_SEQ = 3,      /* the sequence length (with the SP degree) */
  TASP_ERROR_SP = 4,       /* the SP degree */
  TASP_ERROR_TOPOLOGY = 5, /* the topology's links */
  TASP_ERROR_DOCS = 7,     /* the packed documents (--docs) */
  TASP_ERROR_OPTION = 6,   /* a scheduler's own option, whose key starts the message */
};

/* What the reader of a document knows beyond its text: the fields the
 * command line set (so that an error about one names the option, not the
 * file) and the memory the tables built from it may take. */
typedef struct {
  GHashTable *set;    /* dotted path -> "path=VALUE" as given; NULL: none */
  const char *option; /* the option that set them: "--set" */
  uint64_t max_bytes; /* 0: the reader's own cap (TOPO_MAX_BYTES) */
} json_doc;

/* Where a field is read from, for messages. */
typedef struct {
  const char *file;
  const char *path;     /* dotted path of the object being read, "" at the top */
  const json_doc *doc;  /* NULL: the file alone */
} json_where;

/* The one error about field `key` of w (NULL: the object at w.path
 * itself): "FILE: field 'PATH': WHAT", or, where the field or an object
 * holding it came from the command line, "command line: option '--set':
 * KEY=VALUE: WHAT"; an error about an object some of whose fields were set
 * there says which.  Always FALSE. */
bool json_fail(GError **err, json_where w, const char *key, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

/* The largest input file read (64 MiB: a bundled file is a few KiB; an
 * explicit 1000-GPU topology about 50 MiB). */
#define JSON_MAX_FILE_BYTES (64u << 20)

/* Parse a whole file of at most JSON_MAX_FILE_BYTES; NULL with an error
 * naming the file (and the line of a syntax error, or the key given twice
 * in one object). */
json_object *json_read_file(const char *file, GError **err);
/* The same for text in memory; `name` is used in messages. */
json_object *json_parse_text(const char *text, size_t len, const char *name, GError **err);

/* Lower bounds for json_get_double. */
#define JSON_POSITIVE 0.0  /* > 0 */
#define JSON_NONNEG (-1.0) /* >= 0 (any negative `min` means this) */

/* Field readers.  `required` false: absent gives the default and TRUE.
 * Numbers must be finite, above `min` (JSON_POSITIVE or JSON_NONNEG), and
 * inside the plausible range of the unit the key's name ends in
 * (json_unit_range). */
bool json_get_double(json_object *obj, json_where w, const char *key, bool required,
                     double def, double min, double *out, GError **err);
/* Plausible range of a field by the unit its name ends in: "gbps"/"GBps"
 * (GB/s) 0.001 to 100000, "_us" and "_ms" 0 to 1e7, "tflops" 0.001 to
 * 1e7, "_kelem" 0 to 1e6, "ratio" 0 to 1000, "efficiency" 0.001 to 1, "_gib" 0.001
 * to 1e6 (a string "80GiB" or "80GB" too), anything else 0 to 1e9.  A zero is allowed where
 * `min` allows it (a cap of 0 means none); the low end applies to others.
 * Values outside give inf/nan or meaningless times downstream. */
void json_unit_range(const char *key, double *lo, double *hi, const char **unit);
bool json_get_u32(json_object *obj, json_where w, const char *key, bool required,
                  uint32_t def, uint32_t min, uint32_t *out, GError **err);
bool json_get_string(json_object *obj, json_where w, const char *key, bool required,
                     const char *def, const char **out, GError **err);
/* true or false; absent: *out left as it is. */
bool json_get_bool(json_object *obj, json_where w, const char *key, bool *out, GError **err);
/* An object or array field; NULL in *out when absent and not required. */
bool json_get_typed(json_object *obj, json_where w, const char *key, bool required,
                    json_type type, json_object **out, GError **err);
/* Reject keys not in the NULL-terminated list (catches misspelt fields). */
bool json_check_keys(json_object *obj, json_where w, const char *const *allowed,
                     GError **err);

/* g_autoptr(json_object) releases with json_object_put. */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(json_object, json_object_put)

/* The one reading of a value given as text on the command line, so that
 * it means what the same value means in a file: the whole text as one
 * strict JSON value (25, 2.5e3, true, [4,4], {"a":1}, "text"; nothing may
 * follow it), or else the text as a plain string (400Gb/s, nvswitch),
 * which the field's typed reader then judges as it would the same string
 * in a file: "25x" or "25.0.0" is a string, and a number field refuses
 * it.  Text starting with [, { or " must be whole JSON.  Empty text is
 * refused.  `what` names the value in messages. */
json_object *json_parse_value(const char *text, const char *what, GError **err);

/* Apply "a.b.c=VALUE" to root: the objects a and a.b must exist; field c
 * is set (added or replaced) to VALUE as json_parse_value reads it.  The
 * path is recorded in doc->set, and messages name doc->option. */
bool json_apply_set(json_object *root, const char *assign, json_doc *doc, GError **err);
/* A new json_doc for assignments made by `option`. */
json_doc *json_doc_new(const char *option);
void json_doc_free(json_doc *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(json_doc, json_doc_free)

/* A set value as the field `key` (its last path part decides the unit)
 * will understand it, for labels: "12.5 GB/s" for nic_gbps=100Gb/s, "25
 * GB/s" for nic_gbps=25; NULL where the key has no unit or the value is
 * not a number of it. */
char *json_value_understood(const char *key, const char *value);

/* The JSON files of `dir`, sorted by name, each "NAME\tDESCRIPTION" (the
 * file's name less ".json", its "description" field or ""); empty where
 * the folder cannot be read.  Bundled topologies and models are listed so. */
GPtrArray *json_dir_list(const char *dir);

/* "a.b" joined path; result owned by the caller. */
char *json_path_join(const char *path, const char *key);

#endif
