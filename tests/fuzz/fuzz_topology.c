/* fuzz_topology: libFuzzer harness for the topology loader (generators,
 * explicit channels and routes, communication constants, compute models).
 * Any input must give a topology or a GError; a topology must have a
 * route for every ordered pair of its GPUs, and nodes of equal size that
 * the GPUs fill (schedulers take node g / gpus_per_node). */
#include "fuzz_util.h"
#include "topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *file = fuzz_file(data, size);
  GError *err = NULL;
  topology *t = topo_load(file, &err);
  if (!t == !err) abort();
  if (t) {
    if (!t->gpus_per_node || t->n_gpus % t->gpus_per_node) abort();
    if (t->nics_per_node && t->gpus_per_node % t->nics_per_node) abort();
    for (uint32_t i = 0; i < t->n_gpus && i < 64; i++)
      for (uint32_t j = 0; j < t->n_gpus && j < 64; j++) {
        uint32_t n;
        const uint32_t *r = topo_route_chans(t, i, j, &n);
        if ((i == j) != (n == 0)) abort();
        for (uint32_t h = 0; h < n; h++)
          if (r[h] >= t->channels->len) abort();
      }
  }
  topo_free(t);
  g_clear_error(&err);
  return 0;
}
