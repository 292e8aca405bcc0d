/* topo_nodes: what an explicit topology (channels and routes listed by
 * hand) does not say outright: which GPUs share a node, and which routes
 * are direct links.
 *
 * Generators know both.  An explicit file lists routes only; read as one
 * node and no direct links, USP put its Ulysses groups across the network
 * and TASP found no cycle at all.  Here both are read off the routes. */
#include <string.h>

#include "topology.h"

/* Kinds that name the network between nodes, as NIC and fabric channels
 * are usually called (the multi_node generator's is "nic"); a kind matches
 * when it is one of these, or one followed by '_', '.' or '-' ("nic_tx",
 * "ib.leaf"), in any case.  Every other kind (nvswitch_port, nvlink,
 * xgmi, link, ...) is taken to join GPUs inside a node. */
static const char *const network_kinds[] = {"nic", "net", "network", "ib", "infiniband",
                                            "roce", "ethernet", "eth", "efa", "rdma", NULL};

bool topo_kind_is_network(const char *kind) {
  for (const char *const *k = network_kinds; *k; k++) {
    size_t n = strlen(*k);
    if (!g_ascii_strncasecmp(kind, *k, n) &&
        (kind[n] == 0 || kind[n] == '_' || kind[n] == '.' || kind[n] == '-'))
      return true;
  }
  return false;
}

static uint32_t find(uint32_t *parent, uint32_t g) {
  while (parent[g] != g) g = parent[g] = parent[parent[g]];
  return g;
}

bool topo_infer_nodes(topology *t, GError **err) {
  uint32_t n = t->n_gpus;
  g_autofree uint8_t *net = g_new0(uint8_t, t->channels->len ? t->channels->len : 1);
  for (guint c = 0; c < t->channels->len; c++) net[c] = topo_kind_is_network(topo_chan(t, c)->kind);
  g_autofree uint32_t *parent = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) parent[g] = g;
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      uint32_t hops;
      const uint32_t *r = topo_route_chans(t, s, d, &hops);
      bool local = true;
      for (uint32_t h = 0; h < hops && local; h++) local = !net[r[h]];
      if (!local || s == d) continue;
      uint32_t a = find(parent, s), b = find(parent, d);
      /* the smaller GPU number names the node: labels stay in GPU order */
      if (a != b) parent[a > b ? a : b] = a < b ? a : b;
    }
  /* the schedulers place ranks by GPU number with node g / m: the nodes
   * must be consecutive blocks of m */
  uint32_t m = 0;
  while (m < n && find(parent, m) == 0) m++;
  for (uint32_t g = 0; g < n; g++) {
    uint32_t want = g - g % m;
    if (n % m == 0 && find(parent, g) == want) continue;
    g_autofree char *why =
        n % m ? g_strdup_printf("GPU 0's node, GPUs 0-%u, does not divide the %u GPUs into "
                                "equal nodes", m - 1, n)
          : m == 1 ? g_strdup_printf("GPU %u is in one node with GPU %u, though GPU 0 is "
                                     "alone in its node", g, find(parent, g))
                   : g_strdup_printf("GPU %u is in one node with GPU %u, not with GPUs %u-%u",
                                     g, find(parent, g), want, want + m - 1);
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "%s: field 'routes': the nodes read from the routes (GPUs joined by routes "
                "that cross no network channel: kind nic, ib, roce, ...) are not consecutive "
                "blocks of equal size, which the schedulers need: %s; give \"gpus_per_node\" "
                "to say the nodes (%u: all GPUs in one)", t->file, why, n);
    return false;
  }
  t->gpus_per_node = m;
  t->nodes_how = TOPO_NODES_INFERRED;
  return true;
}

void topo_find_direct(topology *t) {
  uint32_t n = t->n_gpus;
  /* per source: its routes by their channel sequence */
  g_autoptr(GHashTable) to = g_hash_table_new_full(g_bytes_hash, g_bytes_equal,
                                                   (GDestroyNotify)g_bytes_unref, NULL);
  for (uint32_t s = 0; s < n; s++) {
    g_hash_table_remove_all(to);
    for (uint32_t x = 0; x < n; x++) {
      uint32_t hops;
      const uint32_t *r = topo_route_chans(t, s, x, &hops);
      if (hops)
        g_hash_table_insert(to, g_bytes_new_static(r, hops * sizeof *r), GUINT_TO_POINTER(x));
    }
    for (uint32_t d = 0; d < n; d++) {
      uint32_t hops;
      const uint32_t *r = topo_route_chans(t, s, d, &hops);
      bool direct = hops > 0;
      for (uint32_t k = 1; k < hops && direct; k++) {
        g_autoptr(GBytes) pre = g_bytes_new_static(r, k * sizeof *r);
        gpointer xv;
        if (!g_hash_table_lookup_extended(to, pre, NULL, &xv)) continue;
        uint32_t rest;
        const uint32_t *onward = topo_route_chans(t, GPOINTER_TO_UINT(xv), d, &rest);
        direct = !(rest == hops - k && !memcmp(onward, r + k, rest * sizeof *r));
      }
      t->direct[(size_t)s * n + d] = direct;
    }
  }
}
