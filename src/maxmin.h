/* maxmin: max-min fair rates by progressive filling.
 *
 * Independent of what the resources are (as SimGrid's LMM solver is): the
 * caller declares constraints (channels with a capacity) and variables
 * (flows crossing some channels, each with an optional rate cap), and gets
 * back the max-min fair rate of every flow.  Progressive filling: raise all
 * unfixed rates together; when a channel saturates, fix the rates of the
 * flows on it; when a flow reaches its own cap, fix it there; repeat.
 *
 * A variable may stand for a bundle of identical flows: `mult[h]` of them
 * cross channel chan[h] (net.c's bundles), all at the one rate solved for;
 * a channel then counts each such flow once in its fair share. */
#ifndef TASP_MAXMIN_H
#define TASP_MAXMIN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const uint32_t *chan; /* indices into the capacity array */
  uint32_t n_chan;
  double cap;           /* the flow's own rate cap; <= 0 or INFINITY: none */
  const uint32_t *mult; /* flows of the bundle on each channel; NULL: one */
} maxmin_flow;

/* Reusable scratch space so repeated solves do not allocate. */
typedef struct maxmin_work maxmin_work;

maxmin_work *maxmin_work_new(void);
void maxmin_work_free(maxmin_work *w);
/* From how many channels a solve finds each bottleneck in a heap rather
 * than by a scan (the same rates bit for bit; tests set 0 or SIZE_MAX). */
void maxmin_work_heap_from(maxmin_work *w, size_t n_chan);

/* Solve for n_flows flows over n_chan channels with capacities cap[].
 * Writes rate[f] for every flow.  A flow that crosses no channel and has no
 * cap gets INFINITY. */
void maxmin_solve(maxmin_work *w, size_t n_chan, const double *cap,
                  size_t n_flows, const maxmin_flow *flows, double *rate);

#endif
