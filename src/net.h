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
 * The network knows nothing of attention or of GPUs.
 *
 * Bundles.  Flows that start together with the same bytes, cap, latency
 * and route length are started as one bundle: the network solves it as one
 * variable whose flows all get the same rate, a channel counting each of
 * its flows that cross it.  That is exact when every flow of a bundle would
 * get the same max-min rate one by one.  It holds by symmetry when, for
 * each hop of every bundle's routes, the channels the bundle crosses there
 * are interchangeable: the same capacity and the same number of flows of
 * every bundle (progressive filling then saturates them together and
 * fixes every flow of the bundle at once); each solve checks that, for the
 * channels that changed.  Where it does not hold, the solved rates are
 * checked instead: they are the per-flow max-min rates exactly when every
 * flow has a bottleneck (at its cap, or on a full channel where no flow is
 * faster), and a bundle with flows that have none is split into those with
 * and those without and the component solved again (after a few rounds,
 * into its flows: the per-flow model).  `net_set_per_flow` starts every
 * flow on its own: the reference the bundled model is tested against.
 *
 * Blocks.  A bundle started from a shape (a lockstep step: one flow per
 * GPU, a channel per GPU at each hop) crosses, at each hop, channels that
 * no other bundle crosses alone.  Such channels are solved as one block
 * (net.c says when that is exact and how it is kept so), so that a step
 * costs its hops rather than its GPUs; results are the same bit for bit
 * with blocks off (`net_set_blocks`). */
#ifndef TASP_NET_H
#define TASP_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define NET_MAX_HOPS 8

typedef struct net net;

/* One flow of a bundle: its route (n_hops channels) and the caller's id. */
typedef struct {
  const uint32_t *route;
  uint32_t id;
} net_member;

/* Called when flows have been delivered: `count` of them, `members` (valid
 * during the call only), all started with `tag`. */
typedef void (*net_done_fn)(void *ctx, uint64_t tag, const net_member *members,
                            uint32_t count);
/* Called whenever the total rate through a channel changes. */
typedef void (*net_rate_fn)(void *ctx, uint32_t chan, double t_s, double rate_Bps);

net *net_new(engine *eng, size_t n_chan, const double *cap_Bps);
void net_free(net *n);
void net_set_rate_observer(net *n, net_rate_fn fn, void *ctx);
/* Start every flow as a bundle of its own (the reference model). */
void net_set_per_flow(net *n, bool per_flow);
/* Whether bundles started from shapes may cross blocks (default on): off,
 * every channel is listed on its own (the reference blocks are tested
 * against; the same results bit for bit). */
void net_set_blocks(net *n, bool on);

/* Start `count` flows now, each of `bytes` over its member's route of
 * n_hops channels (members and routes must outlive the flows), each held
 * to cap_Bps (<= 0: no cap of its own), each delivered latency_s after its
 * last byte left. */
void net_bundle_start(net *n, const net_member *members, uint32_t count, uint32_t n_hops,
                      double latency_s, double bytes, double cap_Bps, net_done_fn done,
                      void *ctx, uint64_t tag);
/* The channels members[0..count) cross, each counted once with its flows:
 * made once for a bundle of the same members started again and again (an
 * all-to-all step after step), so that a start costs the channels crossed,
 * not the flows.  Members must outlive the shape. */
typedef struct net_shape net_shape;
net_shape *net_shape_new(const net_member *members, uint32_t count, uint32_t n_hops);
void net_shape_free(net_shape *s);
/* net_bundle_start of the shape's members. */
void net_shape_start(net *n, net_shape *s, double latency_s, double bytes,
                     double cap_Bps, net_done_fn done, void *ctx, uint64_t tag);

/* One flow (a bundle of one; `route` must outlive it). */
void net_flow_start(net *n, const uint32_t *route, uint32_t n_hops, double latency_s,
                    double bytes, double cap_Bps, net_done_fn done, void *ctx, uint64_t tag);

double net_chan_bytes(const net *n, uint32_t chan);   /* bytes carried so far */
double net_chan_busy_s(const net *n, uint32_t chan);  /* time with >= 1 flow */
uint64_t net_flows_started(const net *n);
uint64_t net_bundles_started(const net *n);           /* splits included */
uint64_t net_solves(const net *n);                    /* max-min solves run */
uint64_t net_blocks_made(const net *n);
uint64_t net_blocks_dissolved(const net *n);
/* Solves whose bundles were still splitting after a few rounds and went
 * apart into their flows (net.c, SPLIT_ROUNDS). */
uint64_t net_split_apart(const net *n);

#endif
