/* plan: the task graph a scheduler emits and the engine replays.
 *
 * Three kinds of task: an attention kernel on one GPU, a merge of a block
 * output into the running output on one GPU, and a communication group (a
 * batch of point-to-point transfers, or one all-to-all) that starts with a
 * fixed launch cost and ends with its last transfer.  Tasks depend on
 * others explicitly; compute tasks of one GPU also run in the order they
 * were added (one compute stream per GPU).  Attention kernels carry their
 * query and key token segments (global positions) when the plan records
 * them, so tests can check that the schedule covers the mask exactly. */
#ifndef TASP_PLAN_H
#define TASP_PLAN_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum { TASK_ATTN, TASK_MERGE, TASK_COMM } task_kind;

typedef struct { uint64_t start, len; } plan_seg;
/* A transfer; `msgs` is how many messages it is issued as (a piece per
 * contiguous token range): point-to-point groups pay per message. */
typedef struct { uint32_t src, dst; double bytes; uint32_t msgs; } plan_xfer;
/* How a communication group is issued: grouped send/receive
 * (batch_isend_irecv, as ring_flash_attn does) or one collective call. */
typedef enum { COMM_P2P, COMM_COLLECTIVE } comm_api;

typedef struct {
  task_kind kind;
  uint32_t gpu;        /* compute tasks */
  uint32_t step;       /* scheduler step, for traces */
  bool causal;         /* attention: causal mask over global positions */
  bool backward;
  double sq, sk;       /* attention: query and key lengths; merge: rows in sq */
  double pairs;        /* attention: (query, key) token pairs computed */
  uint32_t xfer_off, n_xfer;      /* comm: into plan.xfers */
  comm_api api;                   /* comm */
  uint32_t seg_off, n_qseg, n_kseg; /* attention: into plan.segs (q then k) */
  uint32_t dep_off, n_dep;        /* predecessors, into plan.deps (after finish) */
} plan_task;

typedef struct {
  uint32_t n_gpus;
  bool record_segs;
  GArray *tasks;  /* plan_task */
  GArray *xfers;  /* plan_xfer */
  GArray *segs;   /* plan_seg */
  GArray *dep_from, *dep_to; /* uint32 edge lists while building */
  uint32_t *deps; /* predecessors grouped by task, after plan_finish */
  int64_t *last_compute; /* last compute task per GPU, -1 none */
  GString *note;  /* what the scheduler wants the user to know */
} plan;

plan *plan_new(uint32_t n_gpus, bool record_segs);
void plan_free(plan *p);

/* An attention kernel of GPU gpu over query segments q and key segments k.
 * Causal kernels mask by global position (key <= query).  Returns its id. */
uint32_t plan_attn(plan *p, uint32_t gpu, uint32_t step, bool causal, bool backward,
                   const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk);
/* A merge of `rows` query rows of a block output. */
uint32_t plan_merge(plan *p, uint32_t gpu, uint32_t step, double rows);
/* An empty communication group; add transfers with plan_xfer_add. */
uint32_t plan_comm(plan *p, uint32_t step);
void plan_xfer_add(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes);
/* The same, issued as `msgs` messages. */
void plan_xfer_add_msgs(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes,
                        uint32_t msgs);
void plan_dep(plan *p, uint32_t before, uint32_t after);
/* Build the dependency index; call once, after the last task. */
void plan_finish(plan *p);

static inline plan_task *plan_task_at(const plan *p, uint32_t id) {
  return &g_array_index(p->tasks, plan_task, id);
}

/* (query, key) pairs of one segment pair under a causal mask. */
double plan_causal_pairs(plan_seg q, plan_seg k);

#endif
