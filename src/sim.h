/* sim: runs sweep points (build the plan, replay it) and derives the
 * figures every report shows: speedup over Ring at the same point, link
 * utilisation.  Points are independent, so they run on a pool of threads
 * and the results come back in point order whatever the thread count. */
#ifndef TASP_SIM_H
#define TASP_SIM_H

#include <glib.h>

#include "exec.h"
#include "scenario.h"

typedef struct {
  scenario_point pt;
  exec_result *r;
  char *note;             /* scheduler's remark, or NULL */
  double speedup_vs_ring;
  double max_util, mean_util; /* over channels that carried traffic */
  double wall_s;          /* host time to build and replay this point */
} sim_result;

typedef struct {
  exec_opts exec;
  unsigned jobs;          /* threads; 0 = one per CPU */
  unsigned shard, shards; /* run points with index % shards == shard; shards 0 = all */
  bool progress;          /* progress line on stderr */
} sim_opts;

sim_result *sim_run_point(const topology *t, const scenario_point *pt, const exec_opts *o);
void sim_result_free(sim_result *r);

/* All points of the scenario (of this shard); results in point order.
 * Hidden ring baselines are run too and then dropped. */
GPtrArray *sim_run_all(const scenario *s, const sim_opts *o);

/* Marks, per channel, whether it is on a route among the first `gpus` GPUs. */
uint8_t *sim_channels_available(const topology *t, uint32_t gpus);

#endif
