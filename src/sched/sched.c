/* sched: registry of schedulers and shared checks. */
#include "sched.h"

#include <string.h>

static const sched_ops *const all[] = {&sched_ring, &sched_zigzag, &sched_tasp, &sched_tasp_mkm, NULL};

const sched_ops *const *sched_all(void) { return all; }

const sched_ops *sched_find(const char *name) {
  for (const sched_ops *const *s = all; *s; s++)
    if (strcmp((*s)->name, name) == 0) return *s;
  return NULL;
}

char *sched_names(void) {
  GString *s = g_string_new(NULL);
  for (const sched_ops *const *o = all; *o; o++)
    g_string_append_printf(s, "%s%s", o == all ? "" : ", ", (*o)->name);
  return g_string_free(s, FALSE);
}

bool sched_check_divisible(const workload *w, uint64_t parts, const char *why, GError **err) {
  uint64_t pieces = parts * w->gpus;
  if (w->seq_len % pieces != 0 || w->seq_len < pieces) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SEQ,
                "sequence length %" G_GUINT64_FORMAT " is not divisible into %" G_GUINT64_FORMAT
                " equal chunks (%s)", w->seq_len, pieces, why);
    return false;
  }
  return true;
}
