/* ring: the ring family (RingAttention, Zigzag-Ring) over a ring geometry
 * that USP reuses for its ring part.
 *
 * A geometry puts r ring ranks on n = r·u GPUs: GPU g is ring rank g / u
 * and works on the query heads of its Ulysses rank g % u (u = 1: all
 * heads); its ring neighbour is GPU g + u.  Each ring rank holds `chunk`
 * tokens: contiguous (ring) or the zigzag pair of half chunks (zigzag). */
#ifndef TASP_SCHED_RING_H
#define TASP_SCHED_RING_H

#include "rotate.h"
#include "ulysses.h"

struct usp_mem;

typedef struct {
  const workload *w;
  uint32_t ranks, u;  /* ring degree r, GPUs per ring rank (Ulysses degree) */
  uint64_t chunk;     /* tokens per ring rank */
  bool zigzag;
  double kv_bytes;    /* bytes of the KV a GPU holds and passes on */
  ulysses_bufs *held; /* usp: what the Ulysses scatter received, for the gather */
  struct usp_mem *mem; /* usp: what the forward saves for the backward (usp.c) */
} ring_geom;

/* r = n / u ring ranks over the sequence; KV heads per GPU: kv_heads / u,
 * or one replica where kv_heads < u (ulysses.h). */
ring_geom ring_geom_make(const workload *w, uint32_t u, bool zigzag);
/* The plan of g's ring over its ranks, with `ops`' prologue and epilogue
 * (the steps, transfers and kernels are the geometry's). */
plan *ring_geom_build(const ring_geom *g, rotate_ops ops, bool record_segs);

#endif
