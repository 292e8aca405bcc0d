/* exec_mem_class: the GPUs whose memory replays coincide (exec_mem.c),
 * so that each class is replayed once and its figures given to every GPU
 * of it.
 *
 * exec_mem's replay of a GPU is the sequence of its buffer operations:
 * at each task's start and end (one simulated instant for all of the
 * task's GPUs: a lockstep task or a pattern group starts and ends once),
 * the uses of the task that touch that GPU's copies, in the task's use
 * order; the inputs it holds from time 0; and, with recordStream, the
 * place of its first kernel.  Two GPUs with the same sequence have the same
 * live bytes, allocator segments and peaks at every instant.  A lockstep
 * plan (plan.h) under a full mask is one class: its tasks touch every GPU
 * alike, and a per-GPU replay repeated the same work n times (n^2 over a
 * ring).
 *
 * A GPU's sequence is summarised as a 128-bit hash: per task, the task
 * and the uses that touch only some of its GPUs (a buffer of one GPU, a
 * use naming one GPU's copy) with their places among the others; the
 * uses touching all of the task's GPUs alike are left out, as are tasks
 * touching every GPU alike (they add the same to every GPU's sequence).
 * Per-task parts are added, so a task costs its own uses, plus its GPUs
 * only where a group spans some of them (added per pattern, once).  GPUs
 * with equal hashes are one class; a collision (two unlike GPUs called
 * alike) has odds of about n^2 / 2^128.  Where every GPU has a compute
 * task of its own with a use (a causal plan: per-GPU kernels), its sum
 * names a task no other GPU's does, so every GPU is a class of its own
 * and no hash is made.  tests/test_mem.c compares every memory figure
 * with the replay GPU by GPU. */
#ifndef TASP_EXEC_MEM_CLASS_H
#define TASP_EXEC_MEM_CLASS_H

#include "plan.h"
#include "plan_buf.h"

typedef struct {
  uint32_t n;      /* classes */
  uint32_t *of;    /* per GPU: its class (numbered by first GPU, ascending) */
  uint32_t *rep;   /* per class: its first GPU */
  uint32_t *size;  /* per class: how many GPUs */
} exec_mem_classes;

/* The i-th use exec_mem replays (the plan's, then uses it added). */
typedef const plan_buf_use *(*exec_use_fn)(const void *ctx, uint32_t i);

/* Classes of p's GPUs for a replay whose uses are, by task, use_of[use_off[t]
 * .. use_off[t + 1]) (indices for `use`; use_of NULL: the indices
 * themselves, the uses being in task order); first_kernel (per GPU, NULL:
 * none) a figure the replay reads per GPU.  `per_gpu`: every GPU a class
 * of its own (the reference). */
exec_mem_classes *exec_mem_classes_new(const plan *p, const uint32_t *use_off,
                                       const uint32_t *use_of, exec_use_fn use,
                                       const void *ctx, const uint64_t *first_kernel,
                                       bool per_gpu);
void exec_mem_classes_free(exec_mem_classes *c);

#endif
