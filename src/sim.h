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
  const topology *topo;   /* the point's topology (a --set sweep has several) */
  exec_result *r;
  char *note;             /* scheduler's remark, or NULL */
  double speedup_vs_ring;
  double speedup_vs_best;  /* the group's baseline step / this step */
  const char *baseline;    /* the baseline's scheduler name: the fastest of the
                              group, or the one --baseline names */
  /* Utilisation of a channel: bytes carried / (capacity x step time), a
   * fraction.  Over the channels on routes among the point's GPUs (the
   * rows of the links report), idle ones included. */
  double max_util, mean_util;
  double wall_s;          /* host time to build and replay this point */
} sim_result;

typedef struct {
  exec_opts exec;
  unsigned jobs;          /* threads; 0 = one per CPU */
  unsigned shard, shards; /* run points with index % shards == shard; shards 0 = all */
  bool progress;          /* progress line on stderr (sim_progress_format) */
  /* Called with each point of this shard (hidden baselines too) as soon
   * as it and every point before it have finished: in point order, one
   * call at a time, before the speedups are set.  It may free the
   * point's trace arrays (trace.h streams them so).  With it, a point
   * starts only when fewer than `jobs` points before it are yet to be
   * handed on, so at most `jobs` points are running or held at once.
   * NULL: none. */
  void (*on_point)(sim_result *r, void *user);
  void *user;
} sim_opts;

sim_result *sim_run_point(const topology *t, const scenario_point *pt, const exec_opts *o);
void sim_result_free(sim_result *r);

/* All points of the scenario (of this shard); results in point order.
 * Hidden ring baselines are run too and then dropped. */
GPtrArray *sim_run_all(const scenario *s, const sim_opts *o);

/* The progress line: points done of total, the fraction of the work done
 * (frac), events so far and, from the rate so far, the time left. */
void sim_progress_format(GString *out, guint done, guint total, double frac, double events,
                         double elapsed_s);

/* Utilisation of channel c in run r (see sim_result). */
double sim_util(const topology *t, const exec_result *r, uint32_t c);

/* Marks, per channel, whether it is on a route among the first `gpus` GPUs. */
uint8_t *sim_channels_available(const topology *t, uint32_t gpus);

#endif
