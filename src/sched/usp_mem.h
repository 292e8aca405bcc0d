/* usp_mem: the memory of Ulysses around a ring (USP's, yunchang's
 * LongContextAttention), as rotate_ops' prologue and epilogue: the head
 * scatter before the ring's first step and the head gather after its
 * last, with what the forward saves for the backward.  For the schedulers
 * that put a Ulysses dimension around a ring of their own (double-ring's
 * head-parallel degree); self is a ring_geom (ring.h) whose held and mem
 * point at the caller's ulysses_bufs and usp_mem (usp.c and doublering.c
 * both). */
#ifndef TASP_SCHED_USP_MEM_H
#define TASP_SCHED_USP_MEM_H

#include "ring.h"

/* What the forward saves for the backward, and where the pass began. */
struct usp_mem {
  ulysses_bufs saved;
  uint32_t first_task;
};

int64_t usp_mem_prologue(const void *self, plan *p, bool backward, int64_t after,
                         const sched_io *io);
int64_t usp_mem_epilogue(const void *self, plan *p, bool backward, int64_t last);

#endif
