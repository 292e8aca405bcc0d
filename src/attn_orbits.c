/* attn_orbits: a scheduler's turn as orbits of the topology (attn_orbits.h). */
#include "attn_orbits.h"

orbits *attn_orbits(const sched_ops *s, const workload *w, const topology *t) {
  if (!s->turn || w->gpus > t->n_gpus) return NULL;
  /* the job's GPUs are the topology's first; the rest stay where they are */
  g_autofree uint32_t *pi = g_new(uint32_t, t->n_gpus);
  for (uint32_t g = 0; g < t->n_gpus; g++) pi[g] = g;
  if (!s->turn(w, t, 0, pi)) return NULL;
  const uint32_t *gens[] = {pi};
  return orbits_new(t, gens, 1);
}
