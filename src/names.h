/* names: what a user can name — schedulers, bundled topologies and models — for
 * --list, --help and "did you mean" suggestions. */
#ifndef TASP_NAMES_H
#define TASP_NAMES_H

#include <glib.h>
#include <stdio.h>

/* Bundled topologies as "name\tdescription" lines, sorted by name. */
GPtrArray *names_topologies(void);
/* Schedulers, bundled topologies and bundled models, one line each. */
void names_list(FILE *f);
/* The candidate nearest to `word` by edit distance, if it is within a third
 * of the word's length (at least 2 edits); NULL otherwise. */
const char *names_nearest(const char *word, const char *const *cands, guint n);

#endif
