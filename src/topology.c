/* topology: loading, checking and querying topology files. */
#include "topology.h"

#include <string.h>

topology *topo_new(const char *name, uint32_t n_gpus) {
  topology *t = g_new0(topology, 1);
  t->name = g_strdup(name);
  t->n_gpus = n_gpus;
  t->gpus_per_node = n_gpus;
  t->nodes_how = TOPO_NODES_ONE;
  t->defaults = g_ptr_array_new();
  t->channels = g_array_new(FALSE, FALSE, sizeof(topo_channel));
  t->route_chan = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  compute_model_init(&t->compute);
  t->p2p_host_s = -1;  /* as a collective, comm_host_s */
  /* PyTorch's NCCL process group records what a send/receive uses on its
   * stream (topology.h) */
  t->record_stream = true;
  return t;
}

void topo_free(topology *t) {
  if (!t) return;
  for (guint i = 0; i < t->channels->len; i++) {
    topo_channel *c = &g_array_index(t->channels, topo_channel, i);
    g_free(c->name);
    g_free(c->kind);
  }
  g_array_free(t->channels, TRUE);
  g_array_free(t->route_chan, TRUE);
  g_free(t->route_off);
  g_free(t->route_latency_s);
  g_free(t->route_cap_Bps);
  size_rate_clear(&t->flow_rate);
  g_free(t->direct);
  compute_model_clear(&t->compute);
  g_ptr_array_unref(t->defaults);
  g_free(t->name);
  g_free(t->file);
  g_free(t->description);
  g_free(t->overrides);
  g_free(t);
}

uint32_t topo_add_channel(topology *t, const char *name, const char *kind, double cap_Bps,
                          double latency_s) {
  topo_channel c = {g_strdup(name), g_strdup(kind), cap_Bps, latency_s};
  g_array_append_val(t->channels, c);
  return t->channels->len - 1;
}

void topo_routes_begin(topology *t) {
  size_t pairs = (size_t)t->n_gpus * t->n_gpus;
  t->route_off = g_new0(uint32_t, pairs + 1);
  t->route_latency_s = g_new0(double, pairs);
  t->route_cap_Bps = g_new0(double, pairs);
  t->direct = g_new0(uint8_t, pairs);
  g_array_set_size(t->route_chan, 0);
}

void topo_route(topology *t, uint32_t src, uint32_t dst, const uint32_t *chans, uint32_t n,
                double cap_Bps) {
  size_t p = (size_t)src * t->n_gpus + dst;
  g_array_append_vals(t->route_chan, chans, n);
  t->route_off[p + 1] = t->route_chan->len;
  double lat = 0;
  for (uint32_t h = 0; h < n; h++) lat += topo_chan(t, chans[h])->latency_s;
  t->route_latency_s[p] = lat;
  t->route_cap_Bps[p] = cap_Bps;
}

void topo_routes_done(topology *t) {
  /* pairs never given a route (i == i) keep an empty route */
  size_t pairs = (size_t)t->n_gpus * t->n_gpus;
  for (size_t p = 1; p <= pairs; p++)
    if (t->route_off[p] < t->route_off[p - 1]) t->route_off[p] = t->route_off[p - 1];
}

void topo_routes_switched(topology *t) {
  size_t n = t->n_gpus;
  t->switched.on = true;
  t->direct = g_malloc((size_t)n * n);
  memset(t->direct, 1, n * n);
  for (size_t g = 0; g < n; g++) t->direct[g * n + g] = 0;
}

/* A switched topology's route: inside a node, the sender's NVSwitch
 * egress port (channel 2 src) and the receiver's ingress (2 dst + 1);
 * across nodes, the NIC each GPU uses (topo_nic_for_gpu), egress then ingress. */
static uint32_t switched_route(const topology *t, uint32_t src, uint32_t dst, uint32_t *out) {
  if (src == dst) return 0;
  uint32_t per = t->gpus_per_node, nics = t->switched.nics;
  if (nics == 0 || src / per == dst / per) {
    out[0] = 2 * src;
    out[1] = 2 * dst + 1;
  } else {
    out[0] = t->switched.nic0 + 2 * ((src / per) * nics + topo_nic_for_gpu(src % per, per, nics));
    out[1] = t->switched.nic0 + 2 * ((dst / per) * nics + topo_nic_for_gpu(dst % per, per, nics)) + 1;
  }
  return 2;
}

uint32_t topo_route_fill(const topology *t, uint32_t src, uint32_t dst, uint32_t *out) {
  if (t->switched.on) return switched_route(t, src, dst, out);
  uint32_t n;
  const uint32_t *r = topo_route_chans(t, src, dst, &n);
  if (n) memcpy(out, r, n * sizeof *r);
  return n;
}

double topo_route_latency(const topology *t, uint32_t src, uint32_t dst) {
  if (!t->switched.on) return t->route_latency_s[(size_t)src * t->n_gpus + dst];
  uint32_t r[TOPO_MAX_HOPS], n = switched_route(t, src, dst, r);
  double lat = 0; /* summed in hop order, as topo_route does */
  for (uint32_t h = 0; h < n; h++) lat += topo_chan(t, r[h])->latency_s;
  return lat;
}

double topo_route_cap(const topology *t, uint32_t src, uint32_t dst) {
  if (!t->switched.on) return t->route_cap_Bps[(size_t)src * t->n_gpus + dst];
  uint32_t per = t->gpus_per_node;
  return t->switched.nics == 0 || src / per == dst / per ? t->switched.cap_Bps
                                                         : t->switched.inter_cap_Bps;
}

void topo_set_route_caps(topology *t, double cap_Bps) {
  if (t->switched.on) {
    t->switched.cap_Bps = t->switched.inter_cap_Bps = cap_Bps;
    return;
  }
  for (size_t p = 0; p < (size_t)t->n_gpus * t->n_gpus; p++) t->route_cap_Bps[p] = cap_Bps;
}

const uint32_t *topo_route_chans(const topology *t, uint32_t src, uint32_t dst, uint32_t *n) {
  if (t->switched.on) {
    static _Thread_local uint32_t buf[TOPO_MAX_HOPS];
    *n = switched_route(t, src, dst, buf);
    return *n ? buf : NULL;
  }
  size_t p = (size_t)src * t->n_gpus + dst;
  *n = t->route_off[p + 1] - t->route_off[p];
  /* an empty route (src == dst; every route of a 1-GPU topology, whose
   * channel list has no storage at all) has no channels to point at */
  if (*n == 0) return NULL;
  return &g_array_index(t->route_chan, uint32_t, t->route_off[p]);
}

static double size_estimate(uint64_t n_gpus, uint64_t chans, double route_chans, bool stored) {
  /* per ordered pair: offset, latency, cap, direct flag, an explicit file's
   * route index and a scheduler's adjacency, plus the route's channels
   * (computed routes: the direct flag and the adjacency only); per
   * channel: its record and names here, its counters in every run */
  double pairs = (double)n_gpus * (double)n_gpus;
  return pairs * (stored ? 26.0 : 2.0) + 4.0 * route_chans + (double)chans * 200.0;
}

uint64_t topo_bytes(const topology *t) {
  return (uint64_t)size_estimate(t->n_gpus, t->channels->len,
                                 t->route_chan ? (double)t->route_chan->len : 0,
                                 !t->switched.on);
}

bool topo_check_size(uint64_t n_gpus, uint64_t chans, uint32_t hops, json_where w,
                     const char *field, GError **err) {
  double bytes = size_estimate(n_gpus, chans, (double)n_gpus * (double)n_gpus * hops, hops > 0);
  uint64_t cap = w.doc && w.doc->max_bytes ? MIN(w.doc->max_bytes, TOPO_MAX_BYTES)
                                           : TOPO_MAX_BYTES;
  if (bytes <= (double)cap) return true;
  double gib = 1u << 30;
  g_autofree char *held =
      cap < TOPO_MAX_BYTES
          ? g_strdup_printf(", less the %.2f GiB the --set sweep's topologies loaded before it "
                            "hold", (double)(TOPO_MAX_BYTES - cap) / gib)
          : g_strdup("");
  return json_fail(err, w, field,
                   "%" G_GUINT64_FORMAT " GPUs with %" G_GUINT64_FORMAT " channels need about "
                   "%.1f GiB for their %s (one per ordered GPU pair) and channels; expected "
                   "a topology within %llu GiB%s", n_gpus, chans, bytes / gib,
                   hops ? "routes" : "direct-link flags", TOPO_MAX_BYTES >> 30, held);
}

const topo_channel *topo_chan(const topology *t, uint32_t c) {
  return &g_array_index(t->channels, topo_channel, c);
}

/* An error about field `path` of the explicit topology at w's top. */
static bool input_error(GError **err, json_where w, const char *path, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
static bool input_error(GError **err, json_where w, const char *path, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  return json_fail(err, (json_where){w.file, "", w.doc}, path, "%s", what);
}

/* An explicit file's "gpus_per_node" (*per = 0 where it has none). */
static bool declared_nodes(topology *t, json_object *root, json_where w, uint32_t *per,
                           GError **err) {
  *per = 0;
  if (!json_object_object_get_ex(root, "gpus_per_node", NULL)) return true;
  if (!json_get_u32(root, w, "gpus_per_node", true, 0, 1, per, err)) return false;
  if (*per > t->n_gpus || t->n_gpus % *per)
    return input_error(err, w, "gpus_per_node", "expected a divisor of the %u GPUs "
                       "(nodes are consecutive blocks of equal size), got %u", t->n_gpus, *per);
  return true;
}

/* Explicit channels and routes. */
static bool parse_explicit(topology *t, json_object *root, json_where w, double flow_cap_Bps,
                           GError **err) {
  json_object *chans, *routes;
  uint32_t per;
  if (!json_get_typed(root, w, "channels", true, json_type_array, &chans, err) ||
      !json_get_typed(root, w, "routes", true, json_type_array, &routes, err) ||
      !declared_nodes(t, root, w, &per, err))
    return false;
  g_autoptr(GHashTable) by_name = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = 0; i < json_object_array_length(chans); i++) {
    g_autofree char *path = g_strdup_printf("channels[%zu]", i);
    json_where cw = {w.file, path, w.doc};
    json_object *c = json_object_array_get_idx(chans, i);
    static const char *const keys[] = {"name", "kind", "gbps", "latency_us", NULL};
    const char *name, *kind;
    double gbps, lat_us;
    if (!json_object_is_type(c, json_type_object))
      return input_error(err, w, path, "expected an object");
    if (!json_check_keys(c, cw, keys, err) ||
        !json_get_string(c, cw, "name", true, NULL, &name, err) ||
        !json_get_string(c, cw, "kind", false, "link", &kind, err) ||
        !json_get_double(c, cw, "gbps", true, 0, 0, &gbps, err) ||
        !json_get_double(c, cw, "latency_us", false, 0, -1, &lat_us, err))
      return false;
    if (g_hash_table_contains(by_name, name))
      return input_error(err, w, path, "channel name \"%s\" is used twice", name);
    uint32_t id = topo_add_channel(t, name, kind, gbps * 1e9, lat_us * 1e-6);
    g_hash_table_insert(by_name, (gpointer)topo_chan(t, id)->name, GUINT_TO_POINTER(id + 1));
  }
  uint32_t n = t->n_gpus;
  json_where top = {w.file, "", w.doc};
  if (!topo_check_size(n, json_object_array_length(chans), 8, top, "gpus", err)) return false;
  g_autofree int32_t *route_of = g_new(int32_t, (size_t)n * n);
  for (size_t p = 0; p < (size_t)n * n; p++) route_of[p] = -1;
  for (size_t i = 0; i < json_object_array_length(routes); i++) {
    g_autofree char *path = g_strdup_printf("routes[%zu]", i);
    json_where rw = {w.file, path, w.doc};
    json_object *r = json_object_array_get_idx(routes, i), *via;
    static const char *const keys[] = {"src", "dst", "via", "flow_cap_gbps", NULL};
    uint32_t src, dst;
    double cap;
    if (!json_object_is_type(r, json_type_object))
      return input_error(err, w, path, "expected an object");
    if (!json_check_keys(r, rw, keys, err) ||
        !json_get_u32(r, rw, "src", true, 0, 0, &src, err) ||
        !json_get_u32(r, rw, "dst", true, 0, 0, &dst, err) ||
        !json_get_typed(r, rw, "via", true, json_type_array, &via, err) ||
        !json_get_double(r, rw, "flow_cap_gbps", false, 0, -1, &cap, err))
      return false;
    if (src >= n || dst >= n || src == dst)
      return input_error(err, w, path,
                         "expected two different GPUs below %u, got src %u dst %u", n, src, dst);
    if (route_of[(size_t)src * n + dst] >= 0)
      return input_error(err, w, path, "route %u -> %u is given twice", src, dst);
    route_of[(size_t)src * n + dst] = (int32_t)i;
    size_t hops = json_object_array_length(via);
    if (hops == 0 || hops > 8)
      return input_error(err, w, path, "'via' must list 1 to 8 channel names");
    for (size_t h = 0; h < hops; h++) {
      json_object *v = json_object_array_get_idx(via, h);
      if (!json_object_is_type(v, json_type_string) ||
          !g_hash_table_contains(by_name, json_object_get_string(v)))
        return input_error(err, w, path, "via[%zu]: expected the name of a channel", h);
    }
  }
  topo_routes_begin(t);
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      if (s == d) { topo_route(t, s, d, NULL, 0, 0); continue; }
      int32_t ri = route_of[(size_t)s * n + d];
      if (ri < 0)
        return input_error(err, w, "routes", "no route from GPU %u to GPU %u: every "
                           "ordered pair of GPUs needs one", s, d);
      json_object *r = json_object_array_get_idx(routes, (size_t)ri), *via, *capv;
      json_object_object_get_ex(r, "via", &via);
      uint32_t hop_ids[8];
      uint32_t hops = (uint32_t)json_object_array_length(via);
      for (uint32_t h = 0; h < hops; h++)
        hop_ids[h] = GPOINTER_TO_UINT(g_hash_table_lookup(
                         by_name, json_object_get_string(json_object_array_get_idx(via, h)))) - 1;
      double cap = flow_cap_Bps;
      if (json_object_object_get_ex(r, "flow_cap_gbps", &capv)) cap = json_object_get_double(capv) * 1e9;
      topo_route(t, s, d, hop_ids, hops, cap);
    }
  topo_routes_done(t);
  topo_find_direct(t);
  if (!per) return topo_infer_nodes(t, err);
  t->gpus_per_node = per;
  t->nodes_how = TOPO_NODES_DECLARED;
  return true;
}

double topo_usable_gib(const topology *t) {
  return t->memory_gib > 0 ? t->memory_gib - t->memory_headroom_gib : 0;
}

topology *topo_load(const char *file, GError **err) {
  return topo_load_set(file, NULL, 0, err);
}

/* "key=given (understood)"; the understood value where the key has a unit. */
static char *overrides_text(char *const *sets) {
  if (!sets || !*sets) return NULL;
  GString *s = g_string_new(NULL);
  for (char *const *a = sets; *a; a++) {
    const char *eq = strchr(*a, '=');
    g_autofree char *key = g_strndup(*a, (gsize)(eq - *a));
    g_autofree char *u = json_value_understood(key, eq + 1);
    g_string_append_printf(s, "%s%s", s->len ? "; " : "", *a);
    if (u) g_string_append_printf(s, " (%s)", u);
  }
  return g_string_free(s, FALSE);
}

topology *topo_load_set(const char *file, char *const *sets, uint64_t max_bytes, GError **err) {
  g_autoptr(json_object) root = json_read_file(file, err);
  if (!root) return NULL;
  g_autoptr(json_doc) doc = json_doc_new("--set");
  doc->max_bytes = max_bytes;
  for (char *const *a = sets; a && *a; a++)
    if (!json_apply_set(root, *a, doc, err)) return NULL;
  json_where w = {file, "", doc};
  static const char *const keys[] = {"name", "description", "sources", "gpus", "generator",
                                     "channels", "routes", "gpus_per_node", "comm", "compute",
                                     "gpu_memory_gib", "gpu_memory_headroom_gib", NULL};
  if (!json_check_keys(root, w, keys, err)) return NULL;
  const char *name, *desc;
  json_object *gen, *comm, *comp;
  double mem_gib, headroom_gib;
  if (!json_get_double(root, w, "gpu_memory_gib", false, 0, JSON_NONNEG, &mem_gib, err) ||
      !json_get_double(root, w, "gpu_memory_headroom_gib", false, TOPO_MEM_HEADROOM_GIB,
                       JSON_NONNEG, &headroom_gib, err))
    return NULL;
  if (mem_gib > 0 && headroom_gib >= mem_gib) {
    /* the field the command line set is at fault where only it was set
     * (the headroom is then the file's or its default, 3.14 GiB, which the
     * file need not hold) */
    bool by_set = doc->set && g_hash_table_contains(doc->set, "gpu_memory_gib") &&
                  !g_hash_table_contains(doc->set, "gpu_memory_headroom_gib");
    if (by_set)
      json_fail(err, w, "gpu_memory_gib", "expected more than gpu_memory_headroom_gib (%g GiB)",
                headroom_gib);
    else
      json_fail(err, w, "gpu_memory_headroom_gib", "expected less than gpu_memory_gib (%g GiB)",
                mem_gib);
    return NULL;
  }
  if (!json_get_string(root, w, "name", true, NULL, &name, err) ||
      !json_get_string(root, w, "description", false, "", &desc, err) ||
      !json_get_typed(root, w, "generator", false, json_type_object, &gen, err) ||
      !json_get_typed(root, w, "comm", true, json_type_object, &comm, err) ||
      !json_get_typed(root, w, "compute", true, json_type_object, &comp, err))
    return NULL;
  g_autoptr(GPtrArray) defaulted = g_ptr_array_new();
  topo_fill_defaults(comm, comp, defaulted);

  json_where cw = {file, "comm", doc};
  static const char *const comm_keys[] = {"launch_us", "p2p_launch_us", "p2p_msg_us",
                                          "flow_cap_gbps", "inter_node_flow_cap_gbps",
                                          "host_us", "p2p_host_us", "p2p_op_host_us", "kernel_blocks_comm",
                                          "record_stream", "empty_cache_first", "flow_rate_by_size",
                                          "source", NULL};
  double launch_us, p2p_launch_us, p2p_msg_us, cap_gbps, inter_gbps, host_us, p2p_host_us,
      op_host_us;
  if (!json_check_keys(comm, cw, comm_keys, err) ||
      !json_get_double(comm, cw, "launch_us", true, 0, -1, &launch_us, err) ||
      !json_get_double(comm, cw, "p2p_launch_us", false, -1, -1, &p2p_launch_us, err) ||
      !json_get_double(comm, cw, "p2p_msg_us", false, 0, -1, &p2p_msg_us, err) ||
      !json_get_double(comm, cw, "flow_cap_gbps", false, 0, -1, &cap_gbps, err) ||
      !json_get_double(comm, cw, "inter_node_flow_cap_gbps", false, 0, -1, &inter_gbps, err) ||
      !json_get_double(comm, cw, "host_us", false, 0, -1, &host_us, err) ||
      !json_get_double(comm, cw, "p2p_host_us", false, -1, -1, &p2p_host_us, err) ||
      !json_get_double(comm, cw, "p2p_op_host_us", false, 0, -1, &op_host_us, err))
    return NULL;

  uint32_t n_gpus = 0;
  json_object *gv;
  if (gen) {
    if (json_object_object_get_ex(root, "channels", &gv) ||
        json_object_object_get_ex(root, "routes", &gv) ||
        json_object_object_get_ex(root, "gpus_per_node", &gv)) {
      json_fail(err, w, "generator", "give either a generator or channels and routes "
                  "(with gpus_per_node), not both");
      return NULL;
    }
  } else if (!json_get_u32(root, w, "gpus", true, 0, 1, &n_gpus, err)) {
    return NULL;
  }
  topology *t = topo_new(name, n_gpus);
  t->file = g_strdup(file);
  t->description = g_strdup(desc);
  g_ptr_array_unref(t->defaults);
  t->defaults = g_steal_pointer(&defaulted);
  t->overrides = overrides_text(sets);
  t->memory_gib = mem_gib;
  t->memory_headroom_gib = headroom_gib;
  t->launch_s = launch_us * 1e-6;
  /* without p2p constants, grouped send/receive costs what a collective does */
  t->p2p_launch_s = (p2p_launch_us < 0 ? launch_us : p2p_launch_us) * 1e-6;
  t->p2p_msg_s = p2p_msg_us * 1e-6;
  if (!json_get_bool(comm, cw, "kernel_blocks_comm", &t->kernel_blocks_comm, err) ||
      !json_get_bool(comm, cw, "record_stream", &t->record_stream, err) ||
      !json_get_bool(comm, cw, "empty_cache_first", &t->empty_cache_first, err)) {
    topo_free(t);
    return NULL;
  }
  t->comm_host_s = host_us * 1e-6;
  t->p2p_host_s = p2p_host_us < 0 ? host_us * 1e-6 : p2p_host_us * 1e-6;
  t->p2p_op_host_s = op_host_us * 1e-6;
  if (!size_rate_parse(comm, cw, "flow_rate_by_size", &t->flow_rate, err)) {
    topo_free(t);
    return NULL;
  }
  json_where gw = {file, "generator", doc}, pw = {file, "compute", doc};
  /* the compute model first: every field is checked before tables are built */
  bool ok = compute_model_parse(comp, pw, &t->compute, err);
  if (ok) ok = gen ? topo_generate(t, gen, gw, cap_gbps * 1e9, inter_gbps * 1e9, err)
                   : parse_explicit(t, root, w, cap_gbps * 1e9, err);
  if (!ok) {
    topo_free(t);
    return NULL;
  }
  return t;
}
