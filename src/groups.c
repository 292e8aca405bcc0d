/* groups: first-seen grouping by key. */
#include "groups.h"

void groups_make(groups *g, const void *keys, size_t key_size, uint32_t count, GHashFunc hash,
                 GEqualFunc equal) {
  g_autoptr(GHashTable) seen = g_hash_table_new(hash, equal);
  g_autofree uint32_t *group_of = g_new(uint32_t, count);
  g_autoptr(GArray) sizes = g_array_new(FALSE, TRUE, sizeof(uint32_t));
  for (uint32_t i = 0; i < count; i++) {
    gconstpointer k = (const char *)keys + i * key_size;
    gpointer v;
    if (g_hash_table_lookup_extended(seen, k, NULL, &v)) {
      group_of[i] = GPOINTER_TO_UINT(v);
    } else {
      group_of[i] = sizes->len;
      g_hash_table_insert(seen, (gpointer)k, GUINT_TO_POINTER(sizes->len));
      g_array_set_size(sizes, sizes->len + 1);
    }
    g_array_index(sizes, uint32_t, group_of[i])++;
  }
  g->n = sizes->len;
  g->at = g_new0(uint32_t, g->n + 1);
  for (uint32_t k = 0; k < g->n; k++) g->at[k + 1] = g->at[k] + g_array_index(sizes, uint32_t, k);
  g_autofree uint32_t *fill = g_memdup2(g->at, sizeof(uint32_t) * (g->n + 1));
  g->order = g_new(uint32_t, count ? count : 1);
  for (uint32_t i = 0; i < count; i++) g->order[fill[group_of[i]]++] = i;
}

void groups_clear(groups *g) {
  g_free(g->at);
  g_free(g->order);
  *g = (groups){0};
}
