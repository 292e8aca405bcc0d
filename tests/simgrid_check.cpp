/* simgrid_check: tasp-sim's communication times against SimGrid's.
 *
 * SimGrid (Casanova et al.) implements flow-level max-min bandwidth
 * sharing independently of tasp-sim.  For each case this program loads a
 * topology with tasp-sim, builds the Ring or TASP plan of a workload, and
 * replays its communication groups round by round twice: once in tasp-sim
 * (exec_run with no compute and no fixed costs) and once in SimGrid on the
 * same channels (one SimGrid link per channel, SHARED; a per-flow cap is a
 * FATPIPE link on the route, which limits every flow alone).  The two
 * totals must agree within 0.1%.
 *
 * SimGrid's CM02 model is used with its corrections off (latency and
 * bandwidth factors 1, no cross-traffic, no TCP window), which is plain
 * max-min sharing.  SimGrid charges a route's latency before the data
 * moves and tasp-sim after; both give the same round time when all flows
 * of a round have the same latency, so the multi-node case (NIC routes
 * are longer) is compared with latencies set to zero. */
#include <glib.h>
#include <json-c/json.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

extern "C" {
#include "exec.h"
#include "sched/sched.h"
#include "topology.h"
}

namespace sg4 = simgrid::s4u;

struct check_case {
  const char *topo, *sched;
  uint32_t gpus;
  bool causal, zero_latency;
  uint64_t seq;  /* 0: llama()'s */
};

static topology *load(const check_case &c) {
  GError *err = nullptr;
  std::string path = std::string("topologies/") + c.topo + ".json";
  topology *t = topo_load(path.c_str(), &err);
  if (!t) {
    std::fprintf(stderr, "simgrid_check: %s\n", err->message);
    std::exit(2);
  }
  /* pure bandwidth sharing: no fixed costs on either side */
  t->launch_s = t->p2p_launch_s = t->p2p_msg_s = t->comm_host_s = 0;
  t->p2p_host_s = t->p2p_op_host_s = 0;
  if (c.zero_latency) {
    for (guint i = 0; i < t->channels->len; i++)
      g_array_index(t->channels, topo_channel, i).latency_s = 0;
    /* computed routes (switched generators) sum the channels' latencies */
    for (size_t p = 0; t->route_latency_s && p < (size_t)t->n_gpus * t->n_gpus; p++)
      t->route_latency_s[p] = 0;
  }
  return t;
}

static workload llama(uint32_t n, bool causal) {
  workload w = {};
  w.gpus = n;
  w.seq_len = 2 * 3 * 5 * 7 * 8 * 64; /* divisible into 2 x n x (n-1) pieces */
  w.batch = 1;
  w.heads = 32;
  w.kv_heads = 8;
  w.head_dim = 128;
  w.elem_bytes = 2;
  w.dtype = "bf16";
  w.causal = causal;
  w.pass = PASS_FWD;
  return w;
}

/* The plan's communication rounds replayed in SimGrid; total seconds. */
static double simgrid_time(const topology *t, const plan *p) {
  sg4::NetZone *zone = sg4::create_full_zone("tasp");
  std::vector<sg4::Host *> hosts;
  for (uint32_t g = 0; g < t->n_gpus; g++)
    hosts.push_back(zone->create_host("gpu" + std::to_string(g), 1e9));
  std::vector<sg4::Link *> links;
  for (guint c = 0; c < t->channels->len; c++) {
    const topo_channel *ch = topo_chan(t, c);
    links.push_back(zone->create_link("c" + std::to_string(c), ch->cap_Bps)
                        ->set_latency(ch->latency_s)
                        ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                        ->seal());
  }
  std::map<double, sg4::Link *> caps;
  for (uint32_t s = 0; s < t->n_gpus; s++)
    for (uint32_t d = 0; d < t->n_gpus; d++) {
      if (s == d) continue;
      uint32_t hops;
      const uint32_t *r = topo_route_chans(t, s, d, &hops);
      std::vector<sg4::LinkInRoute> route;
      for (uint32_t h = 0; h < hops; h++) route.emplace_back(links[r[h]]);
      double cap = topo_route_cap(t, s, d);
      if (cap > 0) {
        if (!caps.count(cap))
          caps[cap] = zone->create_link("cap" + std::to_string(caps.size()), cap)
                          ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                          ->seal();
        route.emplace_back(caps[cap]);
      }
      zone->add_route(hosts[s]->get_netpoint(), hosts[d]->get_netpoint(), nullptr, nullptr,
                      route, false);
    }
  zone->seal();
  double total = 0;
  sg4::Actor::create("driver", hosts[0], [&]() {
    double t0 = sg4::Engine::get_clock();
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *k = plan_task_at(p, i);
      if (k->kind != TASK_COMM || k->n_xfer == 0) continue;
      std::vector<sg4::CommPtr> round;
      for (uint32_t x = 0; x < k->n_xfer; x++) {
        const plan_xfer *f = &g_array_index(p->xfers, plan_xfer, k->xfer_off + x);
        round.push_back(sg4::Comm::sendto_async(hosts[f->src], hosts[f->dst],
                                                (uint64_t)llround(f->bytes)));
      }
      sg4::Comm::wait_all(round);
    }
    total = sg4::Engine::get_clock() - t0;
  });
  sg4::Engine::get_instance()->run();
  return total;
}

int main(int argc, char **argv) {
  /* one case per process: a SimGrid engine holds one platform */
  static const check_case cases[] = {
      {"h100x8", "ring", 8, false, false, 0},  {"h100x8", "tasp", 8, false, false, 0},
      {"h100x8", "tasp", 8, true, false, 0},   {"mi300x8", "ring", 8, false, false, 0},
      {"mi300x8", "tasp", 8, false, false, 0}, {"mi300x8", "tasp", 7, true, false, 0},
      {"h100x8x2", "ring", 16, false, true, 0}, {"h100x8x2", "tasp", 16, false, true, 0},
      /* 128 GPUs over NIC rails: bundles of hundreds of flows; 130048 =
       * 2 x 128 x 127 x 4 splits into even pieces.  (tasp at 128 agrees
       * too, but SimGrid takes minutes over its 2M flows.) */
      {"h100x8x32", "ring", 128, true, false, 130048},
      {"h100x8x32", "tasp-mkm", 128, false, false, 130048},
  };
  const int n_cases = (int)(sizeof cases / sizeof cases[0]);
  if (argc < 2) { /* driver: run every case in a child, count failures */
    int failed = 0;
    for (int i = 0; i < n_cases; i++) {
      std::string cmd = std::string(argv[0]) + " " + std::to_string(i);
      failed += std::system(cmd.c_str()) != 0;
    }
    std::printf("simgrid_check: %d passed, %d failed\n", n_cases - failed, failed);
    return failed != 0;
  }
  int idx = std::atoi(argv[1]);
  if (idx < 0 || idx >= n_cases) return 2;
  const check_case &c = cases[idx];
  int sg_argc = 7;
  char a0[] = "simgrid_check", a1[] = "--cfg=network/model:CM02",
       a2[] = "--cfg=network/latency-factor:1", a3[] = "--cfg=network/bandwidth-factor:1",
       a4[] = "--cfg=network/crosstraffic:0", a5[] = "--cfg=network/TCP-gamma:0",
       a6[] = "--log=root.thres:critical";
  char *sg_argv[] = {a0, a1, a2, a3, a4, a5, a6, nullptr};
  sg4::Engine engine(&sg_argc, sg_argv);

  topology *t = load(c);
  workload w = llama(c.gpus, c.causal);
  if (c.seq) w.seq_len = c.seq;
  const sched_ops *s = sched_find(c.sched);
  /* ours: lockstep tasks and patterns as built; SimGrid's: every flow */
  plan *built = s->build(&w, t, false), *p = plan_expand(built);
  exec_opts o = {};
  o.no_compute = true;
  exec_result *r = exec_run(built, t, &o);
  plan_free(built);
  double ours = r->step_s, theirs = simgrid_time(t, p);
  double err = std::fabs(ours / theirs - 1);
  bool ok = err <= 1e-3;
  std::printf("%s %-9s %-5s %2u GPUs %-6s: tasp-sim %.6f ms, SimGrid %.6f ms, %.4f%%\n",
              ok ? "ok  " : "FAIL", c.topo, c.sched, c.gpus, c.causal ? "causal" : "full",
              ours * 1e3, theirs * 1e3, 100 * err);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
  return ok ? 0 : 1;
}
