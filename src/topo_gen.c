/* topo_gen: topologies made from a few parameters.
 *
 * nvswitch   - one node, every GPU has an egress and an ingress port into a
 *              non-blocking switch (HGX H100/H200): a flow crosses the
 *              sender's egress and the receiver's ingress.
 * full_mesh  - one directed link per ordered GPU pair (AMD MI300X Infinity
 *              Fabric: 7 links per GPU).
 * multi_node - nodes of nvswitch GPUs; across nodes a GPU sends through
 *              its node's NIC for it into a non-blocking switch fabric and
 *              arrives through the peer's NIC.  By default every GPU has a
 *              NIC of its own ("rails"); with nics_per_node below
 *              gpus_per_node, consecutive GPUs share one (topo_nic_for_gpu).
 * torus      - GPUs on a k-ary n-dimensional torus (TPU-like slices), one
 *              link per neighbour and direction, dimension-order routing. */
#include "topology.h"

#include <string.h>

static bool gen_error(GError **err, json_where w, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static bool gen_error(GError **err, json_where w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  return json_fail(err, w, NULL, "%s", what);
}

/* Egress and ingress NVSwitch port channels for GPUs [first, first+n). */
static uint32_t add_ports(topology *t, uint32_t first, uint32_t n, double cap_Bps,
                          double lat_s) {
  uint32_t base = t->channels->len;
  for (uint32_t g = first; g < first + n; g++) {
    g_autofree char *tx = g_strdup_printf("gpu%u.nvl.tx", g);
    g_autofree char *rx = g_strdup_printf("gpu%u.nvl.rx", g);
    topo_add_channel(t, tx, "nvswitch_port", cap_Bps, lat_s / 2);
    topo_add_channel(t, rx, "nvswitch_port", cap_Bps, lat_s / 2);
  }
  return base;
}

static bool gen_nvswitch(topology *t, json_object *g, json_where w, double cap, GError **err) {
  static const char *const keys[] = {"kind", "gpus", "port_gbps", "latency_us", NULL};
  double gbps, lat_us;
  if (!json_check_keys(g, w, keys, err) ||
      !json_get_u32(g, w, "gpus", true, 0, 1, &t->n_gpus, err) ||
      !json_get_double(g, w, "port_gbps", true, 0, 0, &gbps, err) ||
      !json_get_double(g, w, "latency_us", false, 0, -1, &lat_us, err) ||
      !topo_check_size(t->n_gpus, 2ull * t->n_gpus, 0, w, "gpus", err))
    return false;
  uint32_t n = t->n_gpus;
  t->gpus_per_node = n;
  add_ports(t, 0, n, gbps * 1e9, lat_us * 1e-6);
  /* GPU s to d: s's egress port (2 s), d's ingress (2 d + 1), computed
   * (topology.c switched_route) */
  t->switched.cap_Bps = t->switched.inter_cap_Bps = cap;
  topo_routes_switched(t);
  return true;
}

static bool gen_full_mesh(topology *t, json_object *g, json_where w, double cap, GError **err) {
  static const char *const keys[] = {"kind", "gpus", "link_gbps", "latency_us", "link_kind",
                                     NULL};
  double gbps, lat_us;
  const char *kind;
  if (!json_check_keys(g, w, keys, err) ||
      !json_get_u32(g, w, "gpus", true, 0, 1, &t->n_gpus, err) ||
      !json_get_double(g, w, "link_gbps", true, 0, 0, &gbps, err) ||
      !json_get_double(g, w, "latency_us", false, 0, -1, &lat_us, err) ||
      !json_get_string(g, w, "link_kind", false, "mesh_link", &kind, err) ||
      !topo_check_size(t->n_gpus, (uint64_t)t->n_gpus * t->n_gpus, 1, w, "gpus", err))
    return false;
  uint32_t n = t->n_gpus;
  t->gpus_per_node = n;
  g_autofree uint32_t *id = g_new0(uint32_t, (size_t)n * n);
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      if (s == d) continue;
      g_autofree char *name = g_strdup_printf("gpu%u->gpu%u", s, d);
      id[(size_t)s * n + d] = topo_add_channel(t, name, kind, gbps * 1e9, lat_us * 1e-6);
    }
  topo_routes_begin(t);
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      topo_route(t, s, d, &id[(size_t)s * n + d], s == d ? 0 : 1, cap);
      t->direct[(size_t)s * n + d] = s != d;
    }
  topo_routes_done(t);
  return true;
}

/* The NIC (0 .. nics-1 of its node) that GPU `local` (0 .. per-1 of its
 * node) sends and receives through: equal blocks of consecutive GPUs.
 * That is what NCCL does with PXN off (NCCL_P2P_PXN_LEVEL=0): a GPU's
 * inter-node traffic leaves through the NICs nearest it on the PCI tree
 * (ncclTopoGetLocalNet, src/graph/topo.cc), not through a NIC near another
 * GPU reached over NVLink; HGX-class boards hang consecutive GPUs and one
 * NIC under one PCIe switch, so GPUs 0-1 share NIC 0, 2-3 NIC 1, and so on.
 * A count that does not divide the GPUs is refused (gen_multi_node): which
 * GPUs share a NIC then depends on the board's PCI tree, which only the
 * user knows (explicit channels and routes say it). */
uint32_t topo_nic_for_gpu(uint32_t local, uint32_t per, uint32_t nics) {
  return local / (per / nics);
}

static bool gen_multi_node(topology *t, json_object *g, json_where w, double cap,
                           double inter_cap, GError **err) {
  static const char *const keys[] = {"kind", "nodes", "gpus_per_node", "port_gbps",
                                     "latency_us", "nic_gbps", "nic_latency_us",
                                     "nics_per_node", NULL};
  uint32_t nodes, per, nics;
  double gbps, lat_us, nic_gbps, nic_lat_us;
  if (!json_check_keys(g, w, keys, err) ||
      !json_get_u32(g, w, "nodes", true, 0, 1, &nodes, err) ||
      !json_get_u32(g, w, "gpus_per_node", true, 0, 1, &per, err) ||
      !json_get_double(g, w, "port_gbps", true, 0, 0, &gbps, err) ||
      !json_get_double(g, w, "latency_us", false, 0, -1, &lat_us, err) ||
      !json_get_double(g, w, "nic_gbps", true, 0, 0, &nic_gbps, err) ||
      !json_get_double(g, w, "nic_latency_us", false, 0, -1, &nic_lat_us, err) ||
      !json_get_u32(g, w, "nics_per_node", false, per, 1, &nics, err))
    return false;
  if ((uint64_t)nodes * per > 65536) return gen_error(err, w, "at most 65536 GPUs");
  if (nics > per || per % nics != 0)
    return json_fail(err, w, "nics_per_node", "expected a divisor of gpus_per_node (%u), so "
                     "that every NIC serves the same number of consecutive GPUs; got %u (for "
                     "another sharing, list the channels and routes explicitly)", per, nics);
  if (!topo_check_size((uint64_t)nodes * per, 2ull * nodes * (per + nics), 0, w, "nodes", err))
    return false;
  uint32_t n = t->n_gpus = nodes * per;
  t->gpus_per_node = per;
  t->nics_per_node = nics;
  t->nodes_how = TOPO_NODES_GENERATOR;
  add_ports(t, 0, n, gbps * 1e9, lat_us * 1e-6);
  /* NIC j of node k: channels nic0 + 2 (k nics + j) (tx) and the one after
   * it (rx); with a NIC per GPU they keep the GPU's name, as they always had */
  uint32_t nic0 = t->channels->len;
  for (uint32_t k = 0; k < nodes; k++)
    for (uint32_t j = 0; j < nics; j++) {
      g_autofree char *tx = nics == per ? g_strdup_printf("gpu%u.nic.tx", k * per + j)
                                        : g_strdup_printf("node%u.nic%u.tx", k, j);
      g_autofree char *rx = nics == per ? g_strdup_printf("gpu%u.nic.rx", k * per + j)
                                        : g_strdup_printf("node%u.nic%u.rx", k, j);
      topo_add_channel(t, tx, "nic", nic_gbps * 1e9, nic_lat_us * 1e-6 / 2);
      topo_add_channel(t, rx, "nic", nic_gbps * 1e9, nic_lat_us * 1e-6 / 2);
    }
  /* inside a node, s's egress port and d's ingress; across, the NIC of
   * each (topo_nic_for_gpu), egress then ingress: computed (topology.c
   * switched_route) */
  t->switched.nic0 = nic0;
  t->switched.nics = nics;
  t->switched.cap_Bps = cap;
  t->switched.inter_cap_Bps = inter_cap;
  topo_routes_switched(t);
  return true;
}

static bool gen_torus(topology *t, json_object *g, json_where w, double cap, GError **err) {
  static const char *const keys[] = {"kind", "dims", "link_gbps", "latency_us", NULL};
  json_object *dims_j;
  double gbps, lat_us;
  if (!json_check_keys(g, w, keys, err) ||
      !json_get_typed(g, w, "dims", true, json_type_array, &dims_j, err) ||
      !json_get_double(g, w, "link_gbps", true, 0, 0, &gbps, err) ||
      !json_get_double(g, w, "latency_us", false, 0, -1, &lat_us, err))
    return false;
  size_t nd = json_object_array_length(dims_j);
  if (nd < 1 || nd > 3) return gen_error(err, w, "'dims' must list 1 to 3 sizes");
  uint32_t dims[3] = {1, 1, 1}, n = 1;
  for (size_t k = 0; k < nd; k++) {
    json_object *v = json_object_array_get_idx(dims_j, k);
    int64_t x = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
    if (x < 2 || x > 64) return gen_error(err, w, "dims[%zu]: expected a size from 2 to 64", k);
    dims[k] = (uint32_t)x;
    n *= dims[k];
  }
  if (!topo_check_size(n, 2ull * nd * n, 8, w, "dims", err)) return false;
  t->n_gpus = n;
  t->gpus_per_node = n;
  /* channel id of the link leaving GPU g in dimension k, direction dir (0 +, 1 -) */
  g_autofree uint32_t *link = g_new0(uint32_t, (size_t)n * 6);
  for (uint32_t q = 0; q < n; q++)
    for (size_t k = 0; k < nd; k++)
      for (int dir = 0; dir < 2; dir++) {
        /* a ring of 2 has one neighbour: both directions are the same link */
        if (dims[k] == 2 && dir == 1) { link[q * 6 + k * 2 + 1] = link[q * 6 + k * 2]; continue; }
        g_autofree char *name = g_strdup_printf("gpu%u.d%zu%c", q, k, dir ? '-' : '+');
        link[q * 6 + k * 2 + dir] = topo_add_channel(t, name, "torus_link", gbps * 1e9,
                                                     lat_us * 1e-6);
      }
  topo_routes_begin(t);
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      uint32_t hops[8], nh = 0, cur = s, stride = 1;
      bool ok = true;
      for (size_t k = 0; k < nd && ok; k++) {
        uint32_t a = (cur / stride) % dims[k], b = (d / stride) % dims[k];
        uint32_t fwd = (b + dims[k] - a) % dims[k];
        int dir = fwd <= dims[k] - fwd ? 0 : 1;
        uint32_t steps = dir ? dims[k] - fwd : fwd;
        for (uint32_t i = 0; i < steps; i++) {
          if (nh == 8) { ok = false; break; }
          hops[nh++] = link[cur * 6 + k * 2 + dir];
          uint32_t pos = (cur / stride) % dims[k];
          uint32_t np = dir ? (pos + dims[k] - 1) % dims[k] : (pos + 1) % dims[k];
          cur = cur - pos * stride + np * stride;
        }
        stride *= dims[k];
      }
      if (!ok) return gen_error(err, w, "a route needs more than 8 hops; use smaller dims");
      topo_route(t, s, d, hops, nh, cap);
      t->direct[(size_t)s * n + d] = nh == 1;
    }
  topo_routes_done(t);
  return true;
}

bool topo_generate(topology *t, json_object *gen, json_where w, double flow_cap_Bps,
                   double inter_cap_Bps, GError **err) {
  const char *kind;
  if (!json_get_string(gen, w, "kind", true, NULL, &kind, err)) return false;
  if (!strcmp(kind, "nvswitch")) return gen_nvswitch(t, gen, w, flow_cap_Bps, err);
  if (!strcmp(kind, "full_mesh")) return gen_full_mesh(t, gen, w, flow_cap_Bps, err);
  if (!strcmp(kind, "multi_node"))
    return gen_multi_node(t, gen, w, flow_cap_Bps, inter_cap_Bps, err);
  if (!strcmp(kind, "torus")) return gen_torus(t, gen, w, flow_cap_Bps, err);
  return json_fail(err, w, "kind",
                   "expected one of nvswitch, full_mesh, multi_node, torus; got \"%s\"", kind);
}
