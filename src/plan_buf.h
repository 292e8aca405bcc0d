/* plan_buf: the buffers a plan allocates, and which tasks touch them.
 *
 * Memory is a property of the plan, not a formula per scheduler: a
 * scheduler names each tensor its program allocates (the layer's inputs,
 * received chunks, gathered KV, all-to-all buffers, float32 accumulators,
 * gradients, linear-attention states, kernel workspace), with its size in
 * bytes per GPU, and hangs it on the tasks that write and read it.  exec
 * (exec_mem.c) then tracks live bytes per GPU over simulated time as
 * PyTorch's caching allocator sees tensors: a buffer is allocated when
 * the first task touching it starts, and freed when the last one ends (a
 * tensor is freed when its last reference is dropped), unless it is kept:
 * handed on to the next pass or to the caller (forward's output and
 * log-sum-exp, backward's gradients, the layer's inputs).  A use may hold
 * its reference only at its task's start or only at its end
 * (plan_buf_when: a name rebound by the task's first statement, a result
 * made after its temporaries are gone), and may name one GPU's copy.
 *
 * A buffer of gpu PLAN_ALL is one buffer on every GPU (lockstep tasks and
 * pattern groups touch all of them at once); a task touches the copy of
 * each GPU it runs on (a group: each GPU it sends from or receives on).
 * plan_expand keeps the buffers, their uses following each task's copies.
 *
 * Names are those of the code a scheduler cites (ring_flash_attn's
 * `next_k`, `out`, `lse`, `dk`; Ulysses' all-to-all buffers); tasks
 * touching one buffer share it, so a name given twice is two tensors. */
#ifndef TASP_PLAN_BUF_H
#define TASP_PLAN_BUF_H

#include "plan.h"

/* A buffer in 16 bytes (a causal plan declares a few per task: 2.6
 * million in a 1,024-GPU ring forward, 11.8 million in TASP's): its name
 * is an index into its plan's names (plan_buf_name), sharing a word with
 * the two flags. */
typedef struct {
  double bytes;     /* per GPU */
  uint32_t gpu;     /* PLAN_ALL: one on every GPU */
  uint32_t name_id : 30; /* into the plan's names: plan_buf_name */
  uint32_t input : 1;    /* live from the pass's start (allocated by the caller) */
  uint32_t keep : 1;     /* not freed: handed on to the next pass or the caller */
} plan_buf;

/* A plan's buffer names, each once, interned (g_intern_string: they
 * outlive the plan), and the last few looked up with their indices. */
#define PLAN_BUF_NAME_WAYS 8
typedef struct plan_buf_names {
  GPtrArray *names;  /* const char *, by name_id */
  GHashTable *index; /* interned name -> 1 + its name_id */
  const char *seen[PLAN_BUF_NAME_WAYS];
  uint32_t seen_id[PLAN_BUF_NAME_WAYS];
  unsigned next;
} plan_buf_names;

/* When in its task a use holds its reference. */
typedef enum {
  PLAN_BUF_DURING, /* from the task's start to its end */
  PLAN_BUF_EARLY,  /* at its start only: dropped once the start's allocations are made */
  PLAN_BUF_LATE,   /* at its end, after its other references are dropped */
} plan_buf_when;

/* A use in 12 bytes: a causal plan holds several per task (a 1,024-GPU
 * causal ring forward: 7.3 million, TASP's: 31.6 million), and the
 * replay reads them in task order; the buffer's index shares a word with
 * the two small fields (a plan has fewer than PLAN_BUF_MAX buffers). */
#define PLAN_BUF_BITS 29
#define PLAN_BUF_MAX (1u << PLAN_BUF_BITS)
typedef struct {
  uint32_t buf : PLAN_BUF_BITS;
  uint32_t write : 1;
  uint32_t when : 2; /* plan_buf_when */
  uint32_t task;
  uint32_t gpu; /* the copy of that GPU only (PLAN_ALL: of each GPU the task runs on) */
} plan_buf_use;

/* A buffer of `bytes` on GPU gpu (PLAN_ALL: on each), named `name`. */
uint32_t plan_buf_new(plan *p, uint32_t gpu, double bytes, const char *name);
/* An input of the pass: live from its start, kept (the caller holds it). */
uint32_t plan_buf_input(plan *p, uint32_t gpu, double bytes, const char *name);
/* A tensor the forward saved for the backward, given to a backward-only
 * plan: live from its start, freed after its last reader (autograd frees
 * a node's saved tensors once its backward has run). */
uint32_t plan_buf_saved_input(plan *p, uint32_t gpu, double bytes, const char *name);
/* Task `task` writes (allocates, fills) or reads buffer `buf`. */
void plan_buf_writes(plan *p, uint32_t task, uint32_t buf);
void plan_buf_reads(plan *p, uint32_t task, uint32_t buf);
/* Task `task` writes buffer `buf` as it ends: the statement after the
 * task's last kernel that makes the pass's result (ring_flash_attn's
 * `out.to(q.dtype)` after its loop), once the task's temporaries and the
 * references it held are gone; a buffer it last reads is freed first. */
void plan_buf_writes_late(plan *p, uint32_t task, uint32_t buf);
/* Task `task` reads `buf` as it starts and drops it once its own
 * allocations are made (a Python name rebound by the task's first
 * statement: ring_flash_attn's `next_dk` when send_recv_kv returns the
 * next receive buffer). */
void plan_buf_reads_early(plan *p, uint32_t task, uint32_t buf);
/* ... and reads `buf` there too (what that statement copies from): the
 * buffer outlives the task's other references. */
void plan_buf_reads_late(plan *p, uint32_t task, uint32_t buf);
/* The general form: task `task` reads or writes, at `when`, the copy of
 * buffer `buf` on GPU `gpu` only (PLAN_ALL: each GPU the task runs on; a
 * group that sends some GPUs' copies of a buffer and not others'). */
void plan_buf_use_on(plan *p, uint32_t task, uint32_t buf, uint32_t gpu, bool write,
                     plan_buf_when when);
/* Buffer `buf` outlives the pass (an output handed on). */
void plan_buf_keep(plan *p, uint32_t buf);
/* A new buffer written by task `task`, on its GPU (a lockstep task or a
 * group: on each of its GPUs). */
uint32_t plan_buf_out(plan *p, uint32_t task, double bytes, const char *name);

/* How many buffers and uses; the i-th (inline: the memory replay reads
 * them once per use, a few percent of a large point's time as calls). */
static inline uint32_t plan_buf_count(const plan *p) { return p->bufs ? p->bufs->len : 0; }
static inline const plan_buf *plan_buf_at(const plan *p, uint32_t i) {
  return &g_array_index(p->bufs, plan_buf, i);
}
/* Buffer b's name (of plan p's), interned. */
static inline const char *plan_buf_name(const plan *p, const plan_buf *b) {
  return (const char *)g_ptr_array_index(p->buf_names->names, b->name_id);
}
static inline uint32_t plan_buf_use_count(const plan *p) {
  return p->buf_uses ? p->buf_uses->len : 0;
}
static inline const plan_buf_use *plan_buf_use_at(const plan *p, uint32_t i) {
  return &g_array_index(p->buf_uses, plan_buf_use, i);
}

/* For plan.c: free a plan's buffers; copy them into q, the expansion of
 * p, where task i of p became first[i] (a lockstep task: first[i] + g on
 * GPU g). */
void plan_buf_free_all(plan *p);
void plan_buf_expand(plan *q, const plan *p, const uint32_t *first);

#endif
