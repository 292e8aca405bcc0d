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
enum { TASP_ERROR_INPUT = 1, TASP_ERROR_IO = 2 };

/* Where a field is read from, for messages. */
typedef struct {
  const char *file;
  const char *path; /* dotted path of the object being read, "" at the top */
} json_where;

/* Parse a whole file; NULL with an error naming the file (and the line of a
 * syntax error). */
json_object *json_read_file(const char *file, GError **err);

/* Field readers.  `required` false: absent gives the default and TRUE. */
bool json_get_double(json_object *obj, json_where w, const char *key, bool required,
                     double def, double min_exclusive, double *out, GError **err);
bool json_get_u32(json_object *obj, json_where w, const char *key, bool required,
                  uint32_t def, uint32_t min, uint32_t *out, GError **err);
bool json_get_string(json_object *obj, json_where w, const char *key, bool required,
                     const char *def, const char **out, GError **err);
/* An object or array field; NULL in *out when absent and not required. */
bool json_get_typed(json_object *obj, json_where w, const char *key, bool required,
                    json_type type, json_object **out, GError **err);
/* Reject keys not in the NULL-terminated list (catches misspelt fields). */
bool json_check_keys(json_object *obj, json_where w, const char *const *allowed,
                     GError **err);

/* g_autoptr(json_object) releases with json_object_put. */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(json_object, json_object_put)

/* "a.b" joined path; result owned by the caller. */
char *json_path_join(const char *path, const char *key);

#endif
