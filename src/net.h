/* net: flow-level network of directed channels.
 *
 * A channel is one direction of a link or of a switch port, with a capacity
 * in bytes per second.  A flow moves a number of bytes over a route (a list
 * of channels); concurrent flows share channels by max-min fairness
 * (progressive filling, as SimGrid's flow model does), and a flow may carry
 * its own rate cap (one NCCL peer connection does not fill an NVSwitch
 * port).  Rates are recomputed when flows start or end, for the connected
 * component of channels and flows that changed only, once per instant.  A
 * flow is delivered when its last byte has left, plus its route's latency.
 * The network knows nothing of attention or of GPUs. */
#ifndef TASP_NET_H
#define TASP_NET_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define NET_MAX_HOPS 8

typedef struct net net;

/* Called with the flow's tag when the flow has been delivered. */
typedef void (*net_done_fn)(void *ctx, uint64_t tag);
/* Called whenever the total rate through a channel changes. */
typedef void (*net_rate_fn)(void *ctx, uint32_t chan, double t_s, double rate_Bps);

net *net_new(engine *eng, size_t n_chan, const double *cap_Bps);
void net_free(net *n);
void net_set_rate_observer(net *n, net_rate_fn fn, void *ctx);

/* Start a flow now.  route: n_hops channel indices (the array must outlive
 * the flow); cap_Bps <= 0 means no cap of its own. */
void net_flow_start(net *n, const uint32_t *route, uint32_t n_hops, double latency_s,
                    double bytes, double cap_Bps, net_done_fn done, void *ctx,
                    uint64_t tag);

double net_chan_bytes(const net *n, uint32_t chan);   /* bytes carried so far */
double net_chan_busy_s(const net *n, uint32_t chan);  /* time with >= 1 flow */
uint64_t net_flows_started(const net *n);
uint64_t net_solves(const net *n);                    /* max-min solves run */

#endif
