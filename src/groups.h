/* groups: items sorted into groups of equal keys, the groups in the order
 * their first item comes, the items of a group in their own order (a
 * stable counting sort).  What net splits a bundle by (the channels its
 * flows cross) and what exec starts as one bundle (flows alike in bytes,
 * cap, latency and hops) both group this way. */
#ifndef TASP_GROUPS_H
#define TASP_GROUPS_H

#include <glib.h>
#include <stdint.h>

typedef struct {
  uint32_t n;        /* groups */
  uint32_t *at;      /* n + 1 offsets into order: group g is order[at[g], at[g+1]) */
  uint32_t *order;   /* the item indices, group by group */
} groups;

/* Groups items 0..count) by their keys: keys[i] at keys + i * key_size,
 * compared with hash and equal (over a pointer to a key). */
void groups_make(groups *g, const void *keys, size_t key_size, uint32_t count, GHashFunc hash,
                 GEqualFunc equal);
void groups_clear(groups *g);

#endif
