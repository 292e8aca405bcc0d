/* sweep: the --set options expanded into the topologies a run compares.
 *
 * `--set KEY=V1,V2,...` sweeps KEY over the values; several swept keys
 * give every combination, in the order given (the last option varies
 * fastest).  A value is read as jsonio's json_parse_value reads it, so a
 * list item is a whole JSON value ("100Gb/s", [4,4], 25) or plain text up
 * to the next comma (100Gb/s, 25).  A value that is one whole JSON value
 * ([4,4], "a,b") is one value, not a list.  Combinations are made one at a
 * time (sweep_assignments), so their number is checked, not allocated. */
#ifndef TASP_SWEEP_H
#define TASP_SWEEP_H

#include <glib.h>
#include <stdbool.h>

/* The most combinations one run may sweep.  Every combination loads its
 * own topology, is checked before anything runs and prints its own table;
 * 4096 is far past any comparison read as a table, and a run of more is
 * split with scripts (each run takes a subset of the values). */
#define SWEEP_MAX_COMBINATIONS 4096u

typedef struct {
  char *key;          /* "generator.nic_gbps" */
  GPtrArray *values;  /* char *: each value's text as given */
} sweep_axis;

typedef struct {
  GPtrArray *axes;    /* sweep_axis *, in the order of the options */
  guint n;            /* combinations: the product of the axes' lengths, >= 1 */
} set_sweep;

/* Parse the --set assignments (NULL-terminated; NULL: none, one
 * combination with no assignments).  NULL with an error naming --set and
 * the assignment: no '=', an empty key or value, an empty list item,
 * malformed JSON in an item that starts with [, { or ", a value or key
 * given twice; or more than SWEEP_MAX_COMBINATIONS combinations (the
 * product is computed from the list lengths before anything is made).
 * `sweeps`: whether the caller sweeps a list (the main command), so that
 * a key given twice is pointed to the comma list only where one works. */
set_sweep *sweep_parse(char *const *set, bool sweeps, GError **err);
void sweep_free(set_sweep *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(set_sweep, sweep_free)

/* Combination k (< s->n) as "key=value" assignments for topo_load_set,
 * NULL-terminated; NULL when there is no --set. */
char **sweep_assignments(const set_sweep *s, guint k);

#endif
