/* topology: bundled files load, generators build the right channels and
 * routes, explicit files are checked. */
#include "net.h"
#include "sim.h"
#include "sweep.h"
#include "topology.h"
#include "testutil.h"

static topology *load(const char *f) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load(f, &err);
  if (!t) fprintf(stderr, "%s\n", err->message);
  return t;
}

static topology *load_set(const char *f, const char *set) {
  char *sets[] = {(char *)set, NULL};
  g_autoptr(GError) err = NULL;
  topology *t = topo_load_set(f, set ? sets : NULL, 0, &err);
  if (!t) fprintf(stderr, "%s\n", err->message);
  return t;
}

static void t_bundled_load(void) {
  static const char *files[] = {"topologies/h100x8.json", "topologies/mi300x8.json",
                                "topologies/h100x8x2.json", "topologies/h100x8x4.json",
                                "topologies/h200x4.json", "topologies/gb200nvl72.json",
                                "topologies/torus4x4.json"};
  for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
    topology *t = load(files[i]);
    CU_ASSERT_PTR_NOT_NULL(t);
    topo_free(t);
  }
}

static void t_nvswitch_routes(void) {
  topology *t = load("topologies/h100x8.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 8);
  CU_ASSERT_EQUAL(t->channels->len, 16);
  uint32_t n;
  const uint32_t *r = topo_route_chans(t, 2, 5, &n);
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->name, "gpu2.nvl.tx");
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[1])->name, "gpu5.nvl.rx");
  topo_route_chans(t, 3, 3, &n);
  CU_ASSERT_EQUAL(n, 0);
  topo_free(t);
}

/* The switched generators compute their routes (topology.c) instead of
 * storing one per pair: every ordered pair of a two-NIC-sharing 4-node
 * topology and of a NIC-per-GPU one gets the channels the generator named
 * for it, the sum of their latencies and the flow cap of its kind. */
static void check_switched(topology *t, uint32_t per, uint32_t nics, double cap, double inter) {
  CU_ASSERT_TRUE(t->switched.on);
  CU_ASSERT_PTR_NULL(t->route_off);
  for (uint32_t s = 0; s < t->n_gpus; s++)
    for (uint32_t d = 0; d < t->n_gpus; d++) {
      uint32_t r[TOPO_MAX_HOPS], n = topo_route_fill(t, s, d, r), m;
      const uint32_t *p = topo_route_chans(t, s, d, &m);
      CU_ASSERT_EQUAL(t->direct[(size_t)s * t->n_gpus + d], s != d);
      if (s == d) {
        CU_ASSERT_EQUAL(n, 0);
        CU_ASSERT_PTR_NULL(p);
        continue;
      }
      CU_ASSERT_EQUAL_FATAL(n, 2);
      CU_ASSERT_EQUAL(m, 2);
      CU_ASSERT_TRUE(p[0] == r[0] && p[1] == r[1]);
      bool same = s / per == d / per;
      g_autofree char *tx = same ? g_strdup_printf("gpu%u.nvl.tx", s)
                            : nics == per ? g_strdup_printf("gpu%u.nic.tx", s)
                                          : g_strdup_printf("node%u.nic%u.tx", s / per, s % per / (per / nics));
      g_autofree char *rx = same ? g_strdup_printf("gpu%u.nvl.rx", d)
                            : nics == per ? g_strdup_printf("gpu%u.nic.rx", d)
                                          : g_strdup_printf("node%u.nic%u.rx", d / per, d % per / (per / nics));
      CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->name, tx);
      CU_ASSERT_STRING_EQUAL(topo_chan(t, r[1])->name, rx);
      CU_ASSERT_EQUAL(topo_route_latency(t, s, d),
                      0 + topo_chan(t, r[0])->latency_s + topo_chan(t, r[1])->latency_s);
      CU_ASSERT_EQUAL(topo_route_cap(t, s, d), same ? cap : inter);
    }
}

/* The channels on routes among the first g GPUs (--links' rows),
 * found from one peer per GPU on a switched topology: those of every
 * pair, for every g. */
static void check_available(const topology *t) {
  for (uint32_t g = 1; g <= t->n_gpus; g++) {
    g_autofree uint8_t *got = sim_channels_available(t, g);
    g_autofree uint8_t *want = g_new0(uint8_t, t->channels->len);
    for (uint32_t s = 0; s < g; s++)
      for (uint32_t d = 0; d < g; d++) {
        uint32_t r[TOPO_MAX_HOPS], n = topo_route_fill(t, s, d, r);
        for (uint32_t h = 0; h < n; h++) want[r[h]] = 1;
      }
    CU_ASSERT_EQUAL(memcmp(got, want, t->channels->len), 0);
  }
}

static void t_switched_routes(void) {
  topology *t = load_set("topologies/h100x8x4.json", "generator.nics_per_node=4");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 32);
  /* the file's flow_cap_gbps inside a node, no inter_node_flow_cap_gbps */
  check_switched(t, 8, 4, 256e9, 0);
  check_available(t);
  topo_set_route_caps(t, 7e9);
  CU_ASSERT_EQUAL(topo_route_cap(t, 3, 30), 7e9);
  CU_ASSERT_EQUAL(topo_route_cap(t, 3, 4), 7e9);
  topo_free(t);
  t = load("topologies/h100x8x4.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  check_switched(t, 8, 8, 256e9, 0);
  check_available(t);
  topo_free(t);
  t = load_set("topologies/h100x8.json", "generator.gpus=24");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  check_switched(t, 24, 0, 256e9, 0);
  check_available(t);
  topo_free(t);
}

static void t_mesh_and_multinode(void) {
  topology *t = load("topologies/mi300x8.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->channels->len, 56);
  uint32_t n;
  const uint32_t *r = topo_route_chans(t, 6, 1, &n);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->name, "gpu6->gpu1");
  topo_free(t);
  t = load("topologies/h100x8x2.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 16);
  r = topo_route_chans(t, 1, 9, &n);  /* across nodes: NIC to NIC */
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->kind, "nic");
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[1])->name, "gpu9.nic.rx");
  r = topo_route_chans(t, 1, 6, &n);  /* inside a node: NVSwitch */
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->kind, "nvswitch_port");
  topo_free(t);
}

/* Torus: dimension-order shortest routes; only neighbours are direct. */
static void t_torus(void) {
  topology *t = load("topologies/torus4x4.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 16);
  CU_ASSERT_EQUAL(t->channels->len, 64);
  uint32_t n;
  topo_route_chans(t, 0, 1, &n);
  CU_ASSERT_EQUAL(n, 1);
  topo_route_chans(t, 0, 3, &n);   /* wraps around: one hop back */
  CU_ASSERT_EQUAL(n, 1);
  topo_route_chans(t, 0, 10, &n);  /* (2,2): two hops each way */
  CU_ASSERT_EQUAL(n, 4);
  CU_ASSERT_TRUE(t->direct[0 * 16 + 4]);
  CU_ASSERT_FALSE(t->direct[0 * 16 + 5]);
  topo_free(t);
}

/* Each malformed file fails with the file, the field and the expectation. */
static void t_bad_files(void) {
  static const struct { const char *file, *needle; } cases[] = {
      {"tests/bad/topo_syntax.json", "malformed JSON"},
      {"tests/bad/topo_no_comm.json", "field 'comm': missing"},
      {"tests/bad/topo_neg_port.json", "field 'generator.port_gbps': expected a number greater than 0"},
      {"tests/bad/topo_kind.json", "field 'generator.kind': expected one of"},
      {"tests/bad/topo_missing_route.json", "no route from GPU 1 to GPU 0"},
      {"tests/bad/topo_unknown_channel.json", "expected the name of a channel"},
      {"tests/bad/topo_typo.json", "field 'comm.lanch_us': unknown field"},
      {"tests/bad/does_not_exist.json", "cannot read"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) err = NULL;
    topology *t = topo_load(cases[i].file, &err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    bool ok = strstr(err->message, cases[i].needle) && strstr(err->message, cases[i].file);
    if (!ok) fprintf(stderr, "%s: got \"%s\"\n", cases[i].file, err->message);
    CU_ASSERT_TRUE(ok);
    topo_free(t);
  }
}

static void t_explicit_file(void) {
  topology *t = load("tests/data/topo_explicit.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->n_gpus, 2);
  uint32_t n;
  const uint32_t *r = topo_route_chans(t, 1, 0, &n);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_STRING_EQUAL(topo_chan(t, r[0])->name, "b->a");
  CU_ASSERT_DOUBLE_EQUAL(t->route_cap_Bps[1 * 2 + 0], 10e9, 1);
  CU_ASSERT_DOUBLE_EQUAL(t->route_latency_s[0 * 2 + 1], 2e-6, 1e-12);
  topo_free(t);
}

/* A 1-GPU topology has no route storage at all: its only route is empty
 * and must not be formed by offsetting a NULL array (clang UBSan). */
static void t_one_gpu(void) {
  topology *t = load("tests/data/topo_one_gpu.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  uint32_t n = 99;
  CU_ASSERT_PTR_NULL(topo_route_chans(t, 0, 0, &n));
  CU_ASSERT_EQUAL(n, 0);
  topo_free(t);
}

/* Sizes: the estimate grows as n^2 and the cap sits between what bundled
 * topologies need and what the fuzzed files asked for. */
static void t_size_cap(void) {
  json_where w = {"f.json", "generator", NULL};
  g_autoptr(GError) err = NULL;
  CU_ASSERT_TRUE(topo_check_size(4096, 8192, 2, w, "gpus", &err));    /* 4096^2 * 34 B < 1 GiB */
  CU_ASSERT_FALSE(topo_check_size(6000, 12000, 2, w, "gpus", &err));  /* 6000^2 * 34 B > 1 GiB */
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "f.json: field 'generator.gpus': 6000 GPUs"));
  g_clear_error(&err);
  /* channels count too: 2500 GPUs fit on NVSwitch, not as a full mesh of
   * 6.25M channels */
  CU_ASSERT_TRUE(topo_check_size(2500, 5000, 2, w, "gpus", &err));
  CU_ASSERT_FALSE(topo_check_size(2500, 6250000, 1, w, "gpus", &err));
}

/* --- costs a file leaves out --- */

static bool defaulted(const topology *t, const char *field) {
  for (guint i = 0; i < t->defaults->len; i++)
    if (!strcmp(((const topo_default *)t->defaults->pdata[i])->field, field)) return true;
  return false;
}

/* A minimal roofline file: host issue, kernel launch and merge costs are
 * the measured defaults (they were 0), costs derived from them follow, and
 * each is listed with its source. */
static void t_default_costs(void) {
  topology *t = load("tests/data/topo_explicit.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_DOUBLE_EQUAL(t->comm_host_s, 54.3e-6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(t->p2p_host_s, 54.3e-6, 1e-12);   /* follows comm.host_us */
  CU_ASSERT_DOUBLE_EQUAL(t->compute.host_s, 33.5e-6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(t->compute.bwd_host_s, 53e-6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(t->compute.lin_host_s[2][0], 33.5e-6, 1e-12); /* follows host_us */
  CU_ASSERT_DOUBLE_EQUAL(t->compute.launch_s, 51e-6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(t->compute.merge_fixed_s, 24e-6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(t->compute.merge_s_per_elem, 15e-12, 1e-18);
  CU_ASSERT_DOUBLE_EQUAL(t->compute.merge_host_s, 90e-6, 1e-12);
  CU_ASSERT_EQUAL(t->defaults->len, 7);
  for (guint i = 0; i < t->defaults->len; i++) {
    const char *src = ((const topo_default *)t->defaults->pdata[i])->source;
    CU_ASSERT(strstr(src, "calibration/") || strstr(src, "the same line"));
  }
  g_autofree char *note = topo_defaults_note(t);
  CU_ASSERT_PTR_NOT_NULL_FATAL(note);
  CU_ASSERT_PTR_NOT_NULL(strstr(note, "topology pair leaves out comm.host_us, compute.host_us"));
  topo_free(t);
  /* a cost the file gives, 0 included, is kept; the backward then follows
   * it as it always has */
  t = load_set("tests/data/topo_explicit.json", "compute.host_us=0");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->compute.host_s, 0);
  CU_ASSERT_EQUAL(t->compute.bwd_host_s, 0);
  CU_ASSERT_FALSE(defaulted(t, "compute.host_us"));
  CU_ASSERT_FALSE(defaulted(t, "compute.bwd_host_us"));
  CU_ASSERT_TRUE(defaulted(t, "comm.host_us"));
  topo_free(t);
  /* a table's kernel times include their launch: no launch default */
  t = load("topologies/h200x4.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_FALSE(defaulted(t, "compute.launch_us"));
  CU_ASSERT_EQUAL(t->compute.launch_s, 0);
  topo_free(t);
}

/* Every bundled topology gives its costs: none is priced by a default, so
 * their predictions are what they were. */
static void t_bundled_no_defaults(void) {
  g_autoptr(GDir) dir = g_dir_open("topologies", 0, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  unsigned files = 0;
  for (const char *f; (f = g_dir_read_name(dir));) {
    if (!g_str_has_suffix(f, ".json")) continue;
    g_autofree char *path = g_build_filename("topologies", f, NULL);
    topology *t = load(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    if (t->defaults->len) fprintf(stderr, "%s: %u defaults\n", path, t->defaults->len);
    CU_ASSERT_EQUAL(t->defaults->len, 0);
    files++;
    topo_free(t);
  }
  CU_ASSERT(files >= 10);
}

/* --- explicit files: nodes and direct links read off the routes --- */

/* The README's 2 x 8 cluster with its channels and routes listed by hand
 * (NVSwitch ports inside a node, NICs across) has the nodes and direct
 * links the multi_node generator gives the same cluster. */
static void t_explicit_nodes_inferred(void) {
  topology *e = load("tests/data/topo_explicit_2x8.json");
  topology *g = load("tests/data/topo_readme_2x8.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  CU_ASSERT_EQUAL(e->gpus_per_node, 8);
  CU_ASSERT_EQUAL(e->nodes_how, TOPO_NODES_INFERRED);
  CU_ASSERT_EQUAL(g->nodes_how, TOPO_NODES_GENERATOR);
  /* two NVSwitch ports or two NICs are one hop through a switch, not a
   * relay through another GPU: every pair is direct, as generated */
  CU_ASSERT_EQUAL(memcmp(e->direct, g->direct, 16 * 16), 0);
  CU_ASSERT_TRUE(e->direct[0 * 16 + 9]);
  topo_free(e);
  topo_free(g);
  /* a declaration wins over the routes */
  e = load_set("tests/data/topo_explicit_2x8.json", "gpus_per_node=4");
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_EQUAL(e->gpus_per_node, 4);
  CU_ASSERT_EQUAL(e->nodes_how, TOPO_NODES_DECLARED);
  topo_free(e);
}

/* Which kinds are the network between nodes. */
static void t_network_kinds(void) {
  CU_ASSERT_TRUE(topo_kind_is_network("nic"));
  CU_ASSERT_TRUE(topo_kind_is_network("NIC_tx"));
  CU_ASSERT_TRUE(topo_kind_is_network("ib.leaf"));
  CU_ASSERT_TRUE(topo_kind_is_network("roce"));
  CU_ASSERT_FALSE(topo_kind_is_network("nvswitch_port"));
  CU_ASSERT_FALSE(topo_kind_is_network("nvlink"));
  CU_ASSERT_FALSE(topo_kind_is_network("link"));
  CU_ASSERT_FALSE(topo_kind_is_network("xgmi"));
  CU_ASSERT_FALSE(topo_kind_is_network("nicety"));  /* a prefix needs a separator */
}

/* A ring of 4 listed by hand: GPUs 2 apart are reached through the GPU
 * between them, so only neighbours are direct; all links are one node. */
static void t_explicit_relay_not_direct(void) {
  topology *t = load("tests/data/topo_explicit_ring4.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->gpus_per_node, 4);
  for (uint32_t s = 0; s < 4; s++)
    for (uint32_t d = 0; d < 4; d++)
      CU_ASSERT_EQUAL(t->direct[s * 4 + d], s != d && (s + 2) % 4 != d);
  topo_free(t);
}

/* Nodes that are not consecutive blocks, a declaration that does not
 * divide the GPUs, a declaration beside a generator: refused, naming the
 * file and the field. */
static void t_explicit_nodes_refused(void) {
  static const struct { const char *file, *set, *needle; } cases[] = {
      {"tests/bad/topo_irregular_nodes.json", NULL,
       "field 'routes': the nodes read from the routes"},
      {"tests/bad/topo_irregular_nodes.json", NULL, "GPU 2 is in one node with GPU 0"},
      {"tests/data/topo_explicit_2x8.json", "gpus_per_node=3",
       "option '--set': gpus_per_node=3: expected a divisor of the 16 GPUs"},
      {"tests/data/topo_explicit_2x8.json", "gpus_per_node=32",
       "option '--set': gpus_per_node=32: expected a divisor"},
      {"tests/data/topo_readme_2x8.json", "gpus_per_node=8",
       "field 'generator': give either a generator or channels and routes"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autoptr(GError) err = NULL;
    char *sets[] = {(char *)cases[i].set, NULL};
    topology *t = topo_load_set(cases[i].file, cases[i].set ? sets : NULL, 0, &err);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    /* a value --set gave is blamed on --set, anything else on the file */
    bool ok = strstr(err->message, cases[i].needle) &&
              strstr(err->message, cases[i].set && strstr(cases[i].needle, "--set")
                                       ? "command line" : cases[i].file);
    if (!ok) fprintf(stderr, "%s: got \"%s\"\n", cases[i].file, err->message);
    CU_ASSERT_TRUE(ok);
    topo_free(t);
  }
  /* the same file, its nodes declared: loads */
  topology *t = load_set("tests/bad/topo_irregular_nodes.json", "gpus_per_node=4");
  CU_ASSERT_PTR_NOT_NULL(t);
  topo_free(t);
}

/* --- NICs shared by GPUs (multi_node's nics_per_node) --- */

static double flow_done[2];
static engine *flow_eng;
static void on_flow_done(void *ctx, uint64_t tag, const net_member *m, uint32_t count) {
  (void)ctx, (void)m, (void)count;
  flow_done[tag] = engine_now(flow_eng);
}

/* Seconds until the last of two concurrent 1 GB flows, a -> a+4 and
 * b -> b+4 (node 0 to node 1), is delivered over t's routes and channels. */
static double two_flows_s(const topology *t, uint32_t a, uint32_t b) {
  engine *e = flow_eng = engine_new();
  g_autofree double *cap = g_new(double, t->channels->len);
  for (guint c = 0; c < t->channels->len; c++) cap[c] = topo_chan(t, c)->cap_Bps;
  net *n = net_new(e, t->channels->len, cap);
  uint32_t src[2] = {a, b};
  for (uint64_t k = 0; k < 2; k++) {
    uint32_t hops;
    const uint32_t *r = topo_route_chans(t, src[k], src[k] + 4, &hops);
    net_flow_start(n, r, hops, 0, 1e9, 0, on_flow_done, NULL, k);
  }
  engine_run(e);
  net_free(n);
  engine_free(e);
  return fmax(flow_done[0], flow_done[1]);
}

/* 4 GPUs a node, 2 NICs of 25 GB/s: GPUs 0-1 share NIC 0, 2-3 NIC 1
 * (blocks, as NCCL with PXN off).  Two GPUs of one block sending across
 * get half a NIC each (1 GB in 80 ms); two of different blocks, or any two
 * with a NIC per GPU, a whole one (40 ms).  A round-robin mapping (GPU i on
 * NIC i % 2) would swap the first two cases. */
static void t_shared_nics(void) {
  topology *t2 = load_set("tests/data/topo_2x4_2nics.json", NULL);
  topology *t4 = load_set("tests/data/topo_2x4_2nics.json", "generator.nics_per_node=4");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t2);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t4);
  CU_ASSERT_EQUAL(t2->nics_per_node, 2);
  CU_ASSERT_EQUAL(t2->channels->len, 2 * 8 + 2 * 2 * 2);  /* ports, then 2 NICs x 2 nodes */
  CU_ASSERT_EQUAL(t4->channels->len, 2 * 8 + 2 * 8);
  CU_ASSERT_CLOSE(two_flows_s(t2, 0, 1), 0.08, 1e-9);
  CU_ASSERT_CLOSE(two_flows_s(t2, 2, 3), 0.08, 1e-9);
  CU_ASSERT_CLOSE(two_flows_s(t2, 0, 2), 0.04, 1e-9);
  CU_ASSERT_CLOSE(two_flows_s(t2, 1, 3), 0.04, 1e-9);
  CU_ASSERT_CLOSE(two_flows_s(t4, 0, 1), 0.04, 1e-9);
  /* the receiving side shares too: GPU 5 arrives through node 1's NIC 0 */
  uint32_t n;
  const uint32_t *r = topo_route_chans(t2, 1, 5, &n);
  CU_ASSERT_EQUAL(n, 2);
  CU_ASSERT_STRING_EQUAL(topo_chan(t2, r[0])->name, "node0.nic0.tx");
  CU_ASSERT_STRING_EQUAL(topo_chan(t2, r[1])->name, "node1.nic0.rx");
  r = topo_route_chans(t2, 2, 4, &n);
  CU_ASSERT_STRING_EQUAL(topo_chan(t2, r[0])->name, "node0.nic1.tx");
  CU_ASSERT_STRING_EQUAL(topo_chan(t2, r[1])->name, "node1.nic0.rx");
  /* with a NIC per GPU the channels keep the names they always had */
  r = topo_route_chans(t4, 2, 4, &n);
  CU_ASSERT_STRING_EQUAL(topo_chan(t4, r[0])->name, "gpu2.nic.tx");
  topo_free(t2);
  topo_free(t4);
  /* a count that does not divide the GPUs (3 NICs for 4), or more NICs than
   * GPUs, is refused naming the assignment */
  static const char *const bad[] = {"generator.nics_per_node=3", "generator.nics_per_node=8",
                                    "generator.nics_per_node=0"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) err = NULL;
    char *sets[] = {(char *)bad[i], NULL};
    CU_ASSERT_PTR_NULL(topo_load_set("tests/data/topo_2x4_2nics.json", sets, 0, &err));
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    g_autofree char *blame = g_strdup_printf("option '--set': %s: expected a ", bad[i]);
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, blame));
  }
}

/* --set: one value parser for files and the command line.  A value is a
 * whole strict JSON value or plain text; never a prefix of either. */
static void t_set_value_parser(void) {
  static const struct { const char *text; json_type type; const char *str; } ok[] = {
      {"25", json_type_int, NULL},          {" 25 ", json_type_int, NULL},
      {"2.5e3", json_type_double, NULL},    {"true", json_type_boolean, NULL},
      {"[4,4]", json_type_array, NULL},     {"{\"a\":1}", json_type_object, NULL},
      {"\"a,b\"", json_type_string, "a,b"}, {"400Gb/s", json_type_string, "400Gb/s"},
      {"25x", json_type_string, "25x"},     {"25 junk", json_type_string, "25 junk"},
      {"25.0.0", json_type_string, "25.0.0"}, {"25]", json_type_string, "25]"},
      {"2x", json_type_string, "2x"}};
  for (size_t i = 0; i < G_N_ELEMENTS(ok); i++) {
    g_autoptr(GError) err = NULL;
    g_autoptr(json_object) v = json_parse_value(ok[i].text, "v", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_TRUE(json_object_is_type(v, ok[i].type));
    if (ok[i].str) CU_ASSERT_STRING_EQUAL(json_object_get_string(v), ok[i].str);
  }
  g_autoptr(json_object) n = json_parse_value("25", "v", NULL);
  CU_ASSERT_EQUAL(json_object_get_int(n), 25);
  static const char *bad[] = {"", "[4,", "[4,4]x", "\"a", "{\"a\":1,\"a\":2}"};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) err = NULL;
    CU_ASSERT_PTR_NULL(json_parse_value(bad[i], "v", &err));
    CU_ASSERT_PTR_NOT_NULL(err);
  }
  /* as understood, for labels */
  g_autofree char *u1 = json_value_understood("generator.nic_gbps", "100Gb/s");
  g_autofree char *u2 = json_value_understood("generator.nic_gbps", "\"1.6Tb/s\"");
  g_autofree char *u3 = json_value_understood("generator.nodes", "2");
  g_autofree char *u4 = json_value_understood("generator.nic_gbps", "25x");
  CU_ASSERT_STRING_EQUAL(u1, "12.5 GB/s");
  CU_ASSERT_STRING_EQUAL(u2, "200 GB/s");
  CU_ASSERT_PTR_NULL(u3);
  CU_ASSERT_PTR_NULL(u4);
}

/* A --set value means what the same value means in the file, and an error
 * about it names --set and the assignment, not the file. */
static void t_set_load(void) {
  g_autoptr(GError) err = NULL;
  char *rate[] = {"generator.nic_gbps=100Gb/s", NULL};
  topology *t = topo_load_set("topologies/h100x8x2.json", rate, 0, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  bool found = false;
  for (uint32_t c = 0; c < t->channels->len; c++)
    if (!strcmp(topo_chan(t, c)->kind, "nic")) {
      CU_ASSERT_CLOSE(topo_chan(t, c)->cap_Bps, 12.5e9, 1e-12);
      found = true;
    }
  CU_ASSERT_TRUE(found);
  CU_ASSERT_STRING_EQUAL(t->name, "h100x8x2");
  CU_ASSERT_STRING_EQUAL(t->overrides, "generator.nic_gbps=100Gb/s (12.5 GB/s)");
  topo_free(t);
  static const struct { const char *set, *msg; } bad[] = {
      {"generator.nodes=2x", "command line: option '--set': generator.nodes=2x: expected a whole number"},
      {"generator.nic_gbps=25]", "command line: option '--set': generator.nic_gbps=25]: expected a rate"},
      {"comm.launch_us=25 junk", "command line: option '--set': comm.launch_us=25 junk: expected a number"},
      {"generator.kind=ring", "command line: option '--set': generator.kind=ring: expected one of"},
      {"compute.model=magic", "command line: option '--set': compute.model=magic: expected \"roofline\""},
      {"comm.kernel_blocks_comm=1", "command line: option '--set': comm.kernel_blocks_comm=1: expected true or false"},
      {"comm.record_stream=yes", "command line: option '--set': comm.record_stream=yes: expected true or false"},
      {"comm.empty_cache_first=1", "command line: option '--set': comm.empty_cache_first=1: expected true or false"},
      {"generator={\"kind\":\"nvswitch\",\"gpus\":8,\"port_gbps\":\"x\"}",
       "}: field 'generator.port_gbps': expected a rate"}};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) e = NULL;
    char *sets[] = {(char *)bad[i].set, NULL};
    CU_ASSERT_PTR_NULL(topo_load_set("topologies/h100x8x2.json", sets, 0, &e));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    if (!strstr(e->message, bad[i].msg)) fprintf(stderr, "%s\n", e->message);
    CU_ASSERT_PTR_NOT_NULL(strstr(e->message, bad[i].msg));
    CU_ASSERT_PTR_NULL(strstr(e->message, "h100x8x2.json"));
  }
}

/* comm.flow_rate_by_size: the points read (MiB, GB/s), the rate between
 * two of them linear in log2(size) and the end points' beyond, the flow's
 * cap the lower of the route's and the table's; --dump-topology lists it;
 * a bad table names its field and loads nothing. */
static void t_flow_rate_by_size(void) {
  topology *t = load_set("topologies/h200x2-linear.json",
                         "comm.flow_rate_by_size=[{\"mib\":64,\"gbps\":200},"
                         "{\"mib\":1024,\"gbps\":360}]");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->flow_rate.n, 2);
  double mib = 1048576.0;
  CU_ASSERT_CLOSE(size_rate_at(&t->flow_rate, 64 * mib), 200e9, 1e-12);
  CU_ASSERT_CLOSE(size_rate_at(&t->flow_rate, 1024 * mib), 360e9, 1e-12);
  CU_ASSERT_CLOSE(size_rate_at(&t->flow_rate, 256 * mib), 280e9, 1e-12); /* 2 of 4 doublings */
  CU_ASSERT_CLOSE(size_rate_at(&t->flow_rate, 1 * mib), 200e9, 1e-12);
  CU_ASSERT_CLOSE(size_rate_at(&t->flow_rate, 4096 * mib), 360e9, 1e-12);
  CU_ASSERT_CLOSE(size_rate_cap(&t->flow_rate, 300e9, 1024 * mib), 300e9, 1e-12);
  CU_ASSERT_CLOSE(size_rate_cap(&t->flow_rate, 300e9, 64 * mib), 200e9, 1e-12);
  CU_ASSERT_CLOSE(size_rate_cap(&t->flow_rate, 0, 1024 * mib), 360e9, 1e-12);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  topo_dump(f, t);
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "flow_rate_by_size (a point-to-point flow's rate, GB/s, "
                                     "by its MiB): 64:200 1024:360\n"));
  free(buf);
  topo_free(t);
  /* none given: no table, the route's cap unchanged */
  t = load("topologies/h200x2-tool.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->flow_rate.n, 0);
  CU_ASSERT_CLOSE(size_rate_cap(&t->flow_rate, 280e9, 64 * mib), 280e9, 1e-12);
  topo_free(t);
  /* the bundled h200x2-linear's table: a 1 GiB hop above the links' rate */
  t = load("topologies/h200x2-linear.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_CLOSE(size_rate_cap(&t->flow_rate, 324.5e9, 1024 * mib), 324.1e9, 1e-12);
  CU_ASSERT_CLOSE(size_rate_cap(&t->flow_rate, 324.5e9, 64 * mib), 280e9, 1e-12);
  topo_free(t);
  static const struct { const char *set, *msg; } bad[] = {
      {"comm.flow_rate_by_size=[]", "comm.flow_rate_by_size=[]: expected at least one"},
      {"comm.flow_rate_by_size=5", "comm.flow_rate_by_size=5: expected an array"},
      {"comm.flow_rate_by_size=[5]", "'comm.flow_rate_by_size[0]': expected an object"},
      {"comm.flow_rate_by_size=[{\"mib\":64}]", "'comm.flow_rate_by_size[0].gbps'"},
      {"comm.flow_rate_by_size=[{\"mib\":0,\"gbps\":200}]", "'comm.flow_rate_by_size[0].mib'"},
      {"comm.flow_rate_by_size=[{\"mib\":64,\"gbps\":-1}]", "'comm.flow_rate_by_size[0].gbps'"},
      {"comm.flow_rate_by_size=[{\"mib\":64,\"gbps\":200,\"x\":1}]", "field 'comm.flow_rate_by_size[0].x': unknown field"},
      {"comm.flow_rate_by_size=[{\"mib\":64,\"gbps\":200},{\"mib\":64,\"gbps\":300}]",
       "field 'comm.flow_rate_by_size[1].mib': expected more than the previous point's 64"}};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) e = NULL;
    char *sets[] = {(char *)bad[i].set, NULL};
    CU_ASSERT_PTR_NULL(topo_load_set("topologies/h200x2-linear.json", sets, 0, &e));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    if (!strstr(e->message, bad[i].msg)) fprintf(stderr, "%s\n", e->message);
    CU_ASSERT_PTR_NOT_NULL(strstr(e->message, bad[i].msg));
  }
}

/* A sweep's budget: what the topologies loaded before left. */
static void t_size_budget(void) {
  json_doc doc = {NULL, "--set", 100u << 20};
  json_where w = {"f.json", "generator", &doc};
  g_autoptr(GError) err = NULL;
  CU_ASSERT_TRUE(topo_check_size(1000, 2000, 2, w, "gpus", &err));  /* 34 MB */
  CU_ASSERT_FALSE(topo_check_size(2000, 4000, 2, w, "gpus", &err)); /* 136 MB > 100 MiB */
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "less the 0.90 GiB the --set sweep's topologies"));
  topology *t = load("topologies/h100x8.json");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_TRUE(topo_bytes(t) > 64 * 26 && topo_bytes(t) < 100000);
  topo_free(t);
}

/* --set lists: quoted values sweep, JSON values stay whole, combinations
 * come in order (the last option fastest) and are counted before made. */
static void t_sweep(void) {
  g_autoptr(GError) err = NULL;
  char *set[] = {"a.x=\"100Gb/s\",\"400Gb/s\"", "a.y=[4,4]", "a.z=1, 2,3", NULL};
  g_autoptr(set_sweep) s = sweep_parse(set, true, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->n, 6);
  CU_ASSERT_EQUAL(s->axes->len, 3);
  g_auto(GStrv) c0 = sweep_assignments(s, 0);
  g_auto(GStrv) c4 = sweep_assignments(s, 4);
  CU_ASSERT_EQUAL(g_strv_length(c0), 3);
  CU_ASSERT_STRING_EQUAL(c0[0], "a.x=\"100Gb/s\"");
  CU_ASSERT_STRING_EQUAL(c0[1], "a.y=[4,4]");
  CU_ASSERT_STRING_EQUAL(c0[2], "a.z=1");
  CU_ASSERT_STRING_EQUAL(c4[0], "a.x=\"400Gb/s\"");
  CU_ASSERT_STRING_EQUAL(c4[2], "a.z= 2");
  g_autoptr(set_sweep) none = sweep_parse(NULL, true, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(none);
  CU_ASSERT_EQUAL(none->n, 1);
  CU_ASSERT_PTR_NULL(sweep_assignments(none, 0));
  static const char *bad[][2] = {
      {"a.x=", "a.x=: expected a value"},
      {"a.x=1,", "item 2 is empty"},
      {"a.x=,1", "item 1 is empty"},
      {"a.x=1,1", "value \"1\" is given twice"},
      {"a.x=\"1\"2", "item 1: expected ','"},
      {"a.x=[1,", "item 1: malformed JSON"},
      {"=1", "expected KEY=VALUE"},
      {"a.x", "expected KEY=VALUE"}};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autoptr(GError) e = NULL;
    char *one[] = {(char *)bad[i][0], NULL};
    CU_ASSERT_PTR_NULL(sweep_parse(one, true, &e));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "option '--set'"));
    if (!strstr(e->message, bad[i][1])) fprintf(stderr, "%s\n", e->message);
    CU_ASSERT_PTR_NOT_NULL(strstr(e->message, bad[i][1]));
  }
  /* 10^8 combinations: refused with the count, nothing made */
  g_autofree char *l100 = NULL;
  GString *l = g_string_new(NULL);
  for (int i = 1; i <= 100; i++) g_string_append_printf(l, "%s%d", i > 1 ? "," : "", i);
  l100 = g_string_free(l, FALSE);
  g_autofree char *a = g_strconcat("a.a=", l100, NULL), *b = g_strconcat("a.b=", l100, NULL),
                  *c = g_strconcat("a.c=", l100, NULL), *d = g_strconcat("a.d=", l100, NULL);
  char *big[] = {a, b, c, d, NULL};
  g_autoptr(GError) e = NULL;
  CU_ASSERT_PTR_NULL(sweep_parse(big, true, &e));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e);
  CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "100000000 combinations (100 x 100 x 100 x 100"));
  /* the bound itself: 64 x 64 = 4096 is accepted, 64 x 65 refused */
  g_autofree char *l64 = g_strndup(l100, strstr(l100, ",65,") - l100);
  g_autofree char *l65 = g_strconcat(l64, ",65", NULL);
  g_autofree char *x64 = g_strconcat("a.x=", l64, NULL), *y64 = g_strconcat("a.y=", l64, NULL),
                  *y65 = g_strconcat("a.y=", l65, NULL);
  char *at[] = {x64, y64, NULL}, *past[] = {x64, y65, NULL};
  g_autoptr(set_sweep) s4096 = sweep_parse(at, true, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s4096);
  CU_ASSERT_EQUAL(s4096->n, SWEEP_MAX_COMBINATIONS);
  g_auto(GStrv) last = sweep_assignments(s4096, s4096->n - 1);
  CU_ASSERT_STRING_EQUAL(last[0], "a.x=64");
  CU_ASSERT_STRING_EQUAL(last[1], "a.y=64");
  CU_ASSERT_PTR_NULL(sweep_parse(past, true, NULL));
  char *dup[] = {"a.x=1", "a.x=2", NULL};
  g_autoptr(GError) e3 = NULL;
  CU_ASSERT_PTR_NULL(sweep_parse(dup, true, &e3));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e3);
  CU_ASSERT_PTR_NOT_NULL(strstr(e3->message, "key 'a.x' is set twice"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e3->message, "a comma list sweeps it"));
  /* a caller that takes one value per key (the search) is not pointed to
   * a list it would refuse */
  g_autoptr(GError) e4 = NULL;
  CU_ASSERT_PTR_NULL(sweep_parse(dup, false, &e4));
  CU_ASSERT_PTR_NOT_NULL_FATAL(e4);
  CU_ASSERT_PTR_NOT_NULL(strstr(e4->message, "key 'a.x' is set twice; expected each key once"));
  CU_ASSERT_PTR_NULL(strstr(e4->message, "comma list"));
}

int main(void) {
  static const test_case cases[] = {TEST(t_bundled_load), TEST(t_nvswitch_routes),
                                    TEST(t_mesh_and_multinode), TEST(t_switched_routes), TEST(t_torus),
                                    TEST(t_bad_files), TEST(t_explicit_file), TEST(t_one_gpu),
                                    TEST(t_size_cap), TEST(t_shared_nics),
                                    TEST(t_explicit_nodes_inferred), TEST(t_network_kinds),
                                    TEST(t_explicit_relay_not_direct),
                                    TEST(t_explicit_nodes_refused), TEST(t_default_costs),
                                    TEST(t_bundled_no_defaults),
                                    TEST(t_set_value_parser), TEST(t_set_load), TEST(t_flow_rate_by_size),
                                    TEST(t_size_budget), TEST(t_sweep), {NULL, NULL}};
  return test_run("topology", cases);
}
