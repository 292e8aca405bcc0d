/* topology: the GPUs, the directed channels between them, and the route
 * every ordered GPU pair takes: stored per pair (explicit files, full
 * meshes, tori), or, for the switched generators (nvswitch, multi_node),
 * computed from their structure: a GPU's egress port and the peer's
 * ingress port inside a node, the two NICs' across nodes.  A table per
 * ordered pair is 2.1 GiB at 8,192 GPUs; the structure is a few words.
 *
 * Read from a topology file that either names a generator (nvswitch,
 * full_mesh, multi_node, torus) with its parameters or lists channels and
 * routes explicitly; the file also carries the communication constants
 * (launch cost, per-flow caps) and the compute model of its GPUs.  The
 * format is documented in README.md.  Nodes are consecutive blocks of GPUs:
 * a generator's, or an explicit file's declared or read off its routes
 * (topo_nodes.c); fixed costs a file leaves out are measured defaults
 * (topo_defaults.c), never 0. */
#ifndef TASP_TOPOLOGY_H
#define TASP_TOPOLOGY_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "compute.h"
#include "jsonio.h"
#include "size_rate.h"

typedef struct {
  char *name;       /* e.g. "gpu3.nvl.tx" */
  char *kind;       /* e.g. "nvswitch_port", "xgmi", "nic" */
  double cap_Bps;
  double latency_s;
} topo_channel;

/* How a topology's nodes were found (--dump-topology says which). */
typedef enum {
  TOPO_NODES_ONE,       /* a one-node generator (nvswitch, full_mesh, torus) */
  TOPO_NODES_GENERATOR, /* multi_node's nodes */
  TOPO_NODES_DECLARED,  /* an explicit file's "gpus_per_node" */
  TOPO_NODES_INFERRED,  /* an explicit file's routes: topo_infer_nodes */
} topo_nodes_how;

/* A cost the file left out, priced by a measured default (topo_defaults.c). */
typedef struct {
  const char *field;   /* "compute.host_us" */
  double value;        /* in the field's unit */
  const char *source;  /* the measurement it comes from */
} topo_default;

typedef struct topology {
  char *name;
  char *file;
  char *description;       /* the file's, as written (before any --set) */
  char *overrides;         /* the --set assignments applied, each as given and as
                              understood ("generator.nic_gbps=100Gb/s (12.5 GB/s)"),
                              "; " between; NULL: none */
  uint32_t n_gpus;
  /* GPUs per node: nodes are consecutive blocks of this many GPUs (node
   * of GPU g: g / gpus_per_node), on one node all of them */
  uint32_t gpus_per_node;
  topo_nodes_how nodes_how;
  uint32_t nics_per_node;  /* multi_node: NICs per node (GPUs share them in blocks); else 0 */
  GArray *channels;        /* topo_channel */
  /* route from GPU i to GPU j: channels route_chan[route_off[i*n+j] ..
   * route_off[i*n+j+1]) */
  uint32_t *route_off;
  GArray *route_chan;      /* uint32 */
  double *route_latency_s; /* sum of the route's channel latencies */
  double *route_cap_Bps;   /* per-flow cap on the route, 0 = none */
  /* Routes computed instead (the tables above NULL): the nvswitch and
   * multi_node generators' (topo_gen.c); nics 0: one node */
  struct {
    bool on;
    uint32_t nic0, nics;          /* first NIC channel, NICs per node */
    double cap_Bps, inter_cap_Bps; /* per-flow caps inside a node, across */
  } switched;
  /* torus-like topologies: direct neighbours (adjacency for TASP) */
  uint8_t *direct;         /* n*n: 1 when i->j is one hop on one link */
  double launch_s;         /* device-side fixed cost of one collective group */
  double p2p_launch_s;     /* the same for a grouped send/receive... */
  double p2p_msg_s;        /* ...plus this per message of its busiest GPU */
  /* comm.flow_rate_by_size (default none): a point-to-point flow's rate by
   * its message size, holding it below its route's cap (size_rate.h) */
  size_rate flow_rate;
  bool kernel_blocks_comm; /* transfers wait for running attention kernels */
  /* comm.record_stream (default true): the program's send/receive
   * tensors are recorded on the NCCL stream (ProcessGroupNCCL's
   * recordStream for batch_isend_irecv), so a freed block is cached again
   * only once its transfer is done as its host sees it (exec_alloc.h;
   * traced: calibration/h200x2-snap, calibration/h100x2-snap).  false: a
   * program whose transfers are local copies (the calibration tool's
   * one-rank programs) or a library that does not record them
   * (docs/validation.md: reserved within 12.4% on every 2-GPU NCCL
   * record with it, 18.7% without) */
  bool record_stream;
  /* comm.empty_cache_first (default false): the pass starts right after
   * torch.cuda.empty_cache(), as the calibration tool's memory part runs
   * each pass, so its first cudaMalloc waits for the driver to finish
   * releasing what was emptied (exec_alloc_segment_host_s); a job does
   * not empty its cache before a step */
  bool empty_cache_first;
  double comm_host_s;      /* host time to issue one group, per GPU taking part */
  double p2p_host_s;       /* the same for a grouped send/receive (< 0: comm_host_s)... */
  double p2p_op_host_s;    /* ...plus this per op (isend or irecv) the GPU puts in it */
  compute_model compute;
  /* Memory of one GPU, in GiB as torch.cuda.get_device_properties()
   * .total_memory reports it (0: not given), and what a program cannot
   * use of it (CUDA context, NCCL's communicators and buffers: outside
   * PyTorch's allocator): a point fits where its peak allocated bytes are
   * at most memory_gib - memory_headroom_gib. */
  double memory_gib;
  double memory_headroom_gib;
  GPtrArray *defaults;     /* const topo_default *: costs absent from the file, defaulted */
} topology;

/* The most memory the channels and routes of one topology may take.  Routes
 * are n^2 entries, so a file naming 100000 GPUs would otherwise abort in the
 * allocator; the cap (1 GiB) admits about 6000 NVSwitch GPUs or a full mesh
 * of about 2000.  Checked before anything is allocated. */
#define TOPO_MAX_BYTES (1ull << 30)

/* Device memory outside PyTorch's caching allocator once a process has
 * its CUDA context and every NCCL communicator the methods use (grouped
 * send/receive both ways, all-to-all, all-gather, reduce-scatter, and
 * TokenRing's two side groups): 3.14 GiB, measured on H200 with
 * torch.cuda.mem_get_info (calibration/h200x2-mem headroom-n2.jsonl, the
 * last stage).  Allocator fragmentation (reserved over allocated: up to
 * a third more for ring's backward there) is not in it. */
#define TOPO_MEM_HEADROOM_GIB 3.14

/* GiB a point may allocate on one GPU of t; 0 where the topology gives no
 * capacity. */
double topo_usable_gib(const topology *t);

/* Bytes a topology of n GPUs, `chans` channels and up to `hops` channels
 * per route needs (an estimate that errs high; hops 0: routes computed,
 * not stored).  Above TOPO_MAX_BYTES, or
 * above w.doc->max_bytes where that is set (what a --set sweep's other
 * topologies left): an error naming field `field` of w and FALSE. */
bool topo_check_size(uint64_t n_gpus, uint64_t chans, uint32_t hops, json_where w,
                     const char *field, GError **err);

/* Load and check a topology file: the whole file is checked (communication
 * constants, compute model, generator parameters, size) before channel and
 * route tables are built. */
topology *topo_load(const char *file, GError **err);
/* The same with "key=value" assignments (--set) applied to the file's
 * fields first (NULL-terminated; NULL: none), each value read as
 * json_parse_value reads it; an error about a field they set names --set
 * and the assignment.  max_bytes: the most its tables may take (0:
 * TOPO_MAX_BYTES). */
topology *topo_load_set(const char *file, char *const *sets, uint64_t max_bytes, GError **err);
/* The bytes t holds, by topo_check_size's estimate. */
uint64_t topo_bytes(const topology *t);
/* The resolved topology, defaults included: channels by kind, capacities,
 * latencies, per-flow caps, communication costs, compute model. */
void topo_dump(FILE *f, const topology *t);
void topo_free(topology *t);

/* For generators and tests: an empty topology of n GPUs. */
topology *topo_new(const char *name, uint32_t n_gpus);
uint32_t topo_add_channel(topology *t, const char *name, const char *kind, double cap_Bps,
                          double latency_s);
/* Start filling routes; then topo_route(i, j, ...) for every ordered pair in
 * row-major order (i, then j), and topo_routes_done. */
void topo_routes_begin(topology *t);
void topo_route(topology *t, uint32_t src, uint32_t dst, const uint32_t *chans, uint32_t n,
                double cap_Bps);
void topo_routes_done(topology *t);

/* The most channels a route crosses (an explicit file's "via" lists), and
 * a switched generator's routes (egress, ingress). */
#define TOPO_MAX_HOPS 8
#define TOPO_SWITCHED_HOPS 2
/* The channels of the route src -> dst: written into out (room for
 * TOPO_MAX_HOPS); returns how many (0: src == dst). */
uint32_t topo_route_fill(const topology *t, uint32_t src, uint32_t dst, uint32_t *out);
/* The same as a pointer: into the tables, or, where routes are computed,
 * into this thread's buffer, valid until its next call (keep it: copy it,
 * or use topo_route_fill). */
const uint32_t *topo_route_chans(const topology *t, uint32_t src, uint32_t dst, uint32_t *n);
/* Sum of the route's channel latencies; its per-flow cap (0: none). */
double topo_route_latency(const topology *t, uint32_t src, uint32_t dst);
double topo_route_cap(const topology *t, uint32_t src, uint32_t dst);
/* Every route's per-flow cap set to cap_Bps (what-if tools). */
void topo_set_route_caps(topology *t, double cap_Bps);
/* Routes computed from the switched generators' structure (t->switched,
 * set by the generator before); t->direct: every other GPU. */
void topo_routes_switched(topology *t);
const topo_channel *topo_chan(const topology *t, uint32_t c);

/* Channel kinds that are the network between nodes ("nic", "ib", "roce",
 * ...: topo_infer_nodes lists them); every other kind joins GPUs in a node. */
bool topo_kind_is_network(const char *kind);
/* An explicit topology's nodes, from its routes: two GPUs share a node when
 * the route between them crosses no network channel (and by transitivity).
 * Sets gpus_per_node when the nodes are consecutive blocks of equal size;
 * else an error naming the file that asks for "gpus_per_node". */
bool topo_infer_nodes(topology *t, GError **err);
/* An explicit topology's direct links (t->direct): a route is direct unless
 * it passes through another GPU, that is, unless it is the route to some
 * GPU x followed by x's route onward. */
void topo_find_direct(topology *t);

/* Costs a file leaves out (topo_defaults.c): where `comm` or `compute`
 * lacks one of the measured fixed costs (host issue, kernel launch, merge),
 * the default is written into the object before it is read (so costs
 * derived from it follow) and recorded in t->defaults. */
void topo_fill_defaults(json_object *comm, json_object *compute, GPtrArray *used);
/* One line naming the defaulted costs, or NULL where there are none. */
char *topo_defaults_note(const topology *t);

/* Generators (topo_gen.c).  Each reads its "generator" object. */
/* The NIC (0 .. nics-1 of its node) GPU `local` of a node of `per` sends
 * and receives through (multi_node). */
uint32_t topo_nic_for_gpu(uint32_t local, uint32_t per, uint32_t nics);
bool topo_generate(topology *t, json_object *gen, json_where w, double flow_cap_Bps,
                   double inter_cap_Bps, GError **err);

#endif
