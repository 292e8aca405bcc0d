/* plan_coll: collectives as the flows NCCL moves for them.
 *
 * All-to-all: NCCL implements ncclAllToAll (and PyTorch's
 * all_to_all_single) as one grouped send and receive per peer, so each
 * ordered pair is a direct flow of its own, held to one connection's rate
 * like any point-to-point transfer (NCCL docs, "Point-to-point
 * communication: all-to-all").
 *
 * All-gather, reduce-scatter, all-reduce: NCCL's ring algorithm (the
 * default for these on NVLink and InfiniBand outside NVLS/CollNet): the n
 * ranks form a ring and each shard travels n-1 hops, one step at a time,
 * pipelined, so every ring edge carries (n-1) shards in n-1 steps (twice
 * that for all-reduce, a reduce-scatter then an all-gather); the alpha-beta
 * cost is (n-1)(alpha + shard/beta) (Thakur, Rabenseifner and Gropp 2005;
 * NCCL's tuning model in src/graph/tuning.cc uses the same step count).
 * NCCL runs a collective over several channels at once, each a ring, so a
 * ring edge is not held to the rate of one connection (nccl-tests reach the
 * port rate on NVSwitch); on several nodes the channels cross between
 * nodes at different GPUs, one per NIC rail, so the rings here do too:
 * with m GPUs per node, m rings, ring j entering each node at local GPU j,
 * each carrying 1/m of every shard. */
#include "plan.h"

void plan_coll_all_to_all(plan *p, uint32_t comm, const uint32_t *gpus, uint32_t n,
                          double bytes) {
  g_assert(plan_task_at(p, comm)->api == COMM_ALL_TO_ALL);
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < n; j++)
      if (i != j) plan_xfer_add(p, comm, gpus[i], gpus[j], bytes);
}

uint32_t plan_coll_rings(uint32_t n, uint32_t per_node) {
  /* several nodes, each wholly in the group: one ring per local GPU */
  return per_node && n > per_node && n % per_node == 0 ? per_node : 1;
}

uint32_t plan_coll_ring_edges(uint32_t n, uint32_t per_node, plan_pair *out) {
  if (n < 2) return 0;
  uint32_t m = plan_coll_rings(n, per_node), nodes = n / m, k = 0;
  for (uint32_t j = 0; j < m; j++)
    for (uint32_t a = 0; a < nodes; a++)
      for (uint32_t i = 0; i < m; i++) {
        /* position i of node a on ring j is local GPU (j + i) mod m; the
         * last one hands over to the first of the next node */
        uint32_t src = a * m + (j + i) % m;
        uint32_t dst = i + 1 < m ? a * m + (j + i + 1) % m : ((a + 1) % nodes) * m + j;
        if (src != dst) out[k++] = (plan_pair){src, dst};
      }
  return k;
}

void plan_coll_ring(plan *p, uint32_t comm, const uint32_t *gpus, uint32_t n, double bytes,
                    uint32_t per_node) {
  comm_api api = plan_task_at(p, comm)->api;
  g_assert(plan_api_is_ring(api));
  if (n < 2) return;
  uint32_t rounds = api == COMM_ALL_REDUCE ? 2 : 1;
  uint32_t m = plan_coll_rings(n, per_node);
  double edge = bytes * (n - 1) * rounds / m;
  g_autofree plan_pair *e = g_new(plan_pair, (size_t)n * m);
  uint32_t k = plan_coll_ring_edges(n, per_node, e);
  for (uint32_t i = 0; i < k; i++)
    plan_xfer_push(p, comm, (plan_xfer){gpus[e[i].src], gpus[e[i].dst], edge, 1, (n - 1) * rounds});
}

bool plan_api_is_ring(comm_api a) {
  return a == COMM_ALL_GATHER || a == COMM_REDUCE_SCATTER || a == COMM_ALL_REDUCE;
}
