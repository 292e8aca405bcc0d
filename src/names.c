/* names: listings and nearest-name suggestions. */
#include "names.h"

#include <string.h>

#include "jsonio.h"
#include "model.h"
#include "sched/sched.h"

static const char *topology_dir(void) {
  const char *dir = g_getenv("TASP_TOPOLOGY_DIR");
  return dir ? dir : TASP_DATA_DIR "/topologies";
}

GPtrArray *names_topologies(void) { return json_dir_list(topology_dir()); }

void names_list(FILE *f) {
  fputs("Schedulers:\n", f);
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    /* its own options (--help says what they do) */
    g_autoptr(GString) opts = g_string_new(NULL);
    for (const sched_opt *const *o = (*s)->opts; o && *o; o++)
      g_string_append_printf(opts, "%s%s%s%s", opts->len ? ", " : " [", sched_option_flag(*o),
                             (*o)->metavar ? " " : "", (*o)->metavar ? (*o)->metavar : "");
    fprintf(f, "  %-12s %s%s%s\n", (*s)->name, (*s)->summary, opts->str, opts->len ? "]" : "");
  }
  fputs("Bundled topologies (--topology NAME):\n", f);
  g_autoptr(GPtrArray) t = names_topologies();
  for (guint i = 0; i < t->len; i++) {
    g_auto(GStrv) p = g_strsplit(t->pdata[i], "\t", 2);
    fprintf(f, "  %-12s %s\n", p[0], p[1] ? p[1] : "");
  }
  fputs("Bundled models (--model NAME):\n", f);
  g_autoptr(GPtrArray) m = model_presets();
  for (guint i = 0; i < m->len; i++) {
    g_auto(GStrv) p = g_strsplit(m->pdata[i], "\t", 2);
    fprintf(f, "  %-16s %s\n", p[0], p[1] ? p[1] : "");
  }
}

static guint edit_distance(const char *a, const char *b) {
  size_t n = strlen(b);
  g_autofree guint *row = g_new(guint, n + 1);
  for (size_t j = 0; j <= n; j++) row[j] = (guint)j;
  for (size_t i = 1; a[i - 1]; i++) {
    guint diag = row[0];
    row[0] = (guint)i;
    for (size_t j = 1; j <= n; j++) {
      guint up = row[j];
      guint best = MIN(row[j] + 1, row[j - 1] + 1);
      row[j] = MIN(best, diag + (g_ascii_tolower(a[i - 1]) != g_ascii_tolower(b[j - 1])));
      diag = up;
    }
  }
  return row[n];
}

const char *names_nearest(const char *word, const char *const *cands, guint n) {
  const char *best = NULL;
  guint bd = G_MAXUINT;
  for (guint i = 0; i < n; i++) {
    guint d = edit_distance(word, cands[i]);
    if (d < bd) {
      bd = d;
      best = cands[i];
    }
  }
  guint limit = MAX(2, (guint)strlen(word) / 3);
  return bd <= limit ? best : NULL;
}
