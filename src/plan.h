/* plan: the task graph a scheduler emits and the engine replays.
 *
 * Two kinds of task.  A compute task runs on one GPU and carries its
 * operation with every operand the compute model needs to price it (kind,
 * batch, the heads *of this task*, head dim, query and key lengths, mask,
 * direction, element size): `compute` prices it through the kind's own
 * model, so a new kind of work is a model entry, not a change to `exec`.
 * A communication group carries the API it is issued through (a grouped
 * send/receive, or one collective call) and the transfers that API really
 * makes: collectives are expanded here into the flows the library moves
 * (plan_coll_*), once, for every scheduler.
 *
 * Tasks depend on others explicitly.  The stream rules every PyTorch
 * program obeys also live here, so that schedulers state what they issue
 * and not how streams order it: compute tasks of one GPU run in the order
 * they were added (one compute stream per GPU); a group issued on a GPU
 * waits for the compute that GPU had issued before it (PyTorch makes the
 * NCCL stream wait for the current stream at issue); collectives of one
 * process group run in issue order on its NCCL stream; a barrier joins
 * every GPU.
 *
 * Lockstep.  Where every GPU does alike work at a step (a full mask: the
 * same kernel shapes on every GPU) a scheduler may emit one compute task
 * for all GPUs of the plan (gpu PLAN_ALL) and one transfer for every edge
 * of a pattern of GPU pairs registered once (plan_pattern): a 1,024-GPU
 * TASP step is then one task and one transfer instead of a million.  A
 * lockstep task only follows lockstep tasks on the compute streams (all
 * GPUs' last compute the same task: plan_lockstep), so its copies start
 * and end together; plan_expand turns a plan into the one it stands for,
 * task by task and transfer by transfer (the reference, and what exec
 * runs when host issue times differ between GPUs).  Attention tasks carry their query and key token segments
 * (global positions) and head range when the plan records them, so tests
 * can check that a schedule covers the mask exactly, head by head. */
#ifndef TASP_PLAN_H
#define TASP_PLAN_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum { TASK_COMPUTE, TASK_COMM } task_kind;

/* What a compute task does. */
typedef enum {
  OP_ATTN,   /* softmax attention block (flash attention kernel) */
  OP_MERGE,  /* log-sum-exp merge of a block output into the running one */
  OP_COPY,   /* memory-bound rearrangement: torch.cat, permute, index */
  /* Linear attention, chunked (compute.c prices each, forward and
   * backward).  Segments say which (query, key) pairs a task accounts for,
   * so that coverage is checked as for softmax blocks: */
  OP_LIN_INTRA, /* a chunk onto itself from a zero state: q = k = the chunk,
                   masked by `causal` (lightning attention's intra and
                   inter-block passes over the chunk) */
  OP_LIN_STATE, /* forward: M = K^T V over the k segments (no q: it covers
                   nothing yet); backward: dK, dV of the k segments from the
                   dM of the q segments' queries */
  OP_LIN_APPLY, /* O += Q M for the q segments, M a state of the k segments'
                   keys (all of them before every query under a causal
                   mask); backward: dQ and the queries' dM = Q^T dO */
  /* The rest of a decoder layer (compute.h: compute_layer_op): */
  OP_GEMM,      /* a linear layer's product, tokens x in by in x out (gemm_m,
                   gemm_n, gemm_k); backward: both products of its gradient */
  OP_ELEMWISE,  /* a memory-bound op (elemwise: RMSNorm, RoPE, SwiGLU, residual
                   add, optimizer update) over sq rows of `width` elements */
  OP_KINDS
} op_kind;

typedef struct { uint64_t start, len; } plan_seg;

/* The operands of a compute task.  Fields lie by size (doubles, then
 * 32-bit, then bytes) so that no padding is spent between them: a causal
 * plan holds a task per GPU and step (a million at 1,024 GPUs). */
typedef struct {
  double sq, sk;      /* attention: query and key lengths; merge: rows in sq */
  double pairs;       /* attention: (query, key) token pairs per batch and head */
  double diag_pairs;  /* causal attention: of those, the pairs of a token with
                         itself (the sequence's diagonal), which model FLOPs
                         count half as the mask's S^2 / 2 does; the kernel is
                         priced by its call's shape whatever they are
                         (compute_op_flops: a causal call's diagonal is its
                         own, sq / 2).  Off the sequence's diagonal (a
                         stripe's blocks between two GPUs) 0. */
  double bytes;       /* copy: bytes read (and as many written) */
  double gemm_m, gemm_n, gemm_k; /* GEMM: M x K input by K x N weight (forward) */
  double width;       /* element-wise: elements per row */
  op_kind kind;
  uint32_t batch, head_off, heads, head_dim; /* heads [head_off, head_off + heads) */
  uint32_t elem_bytes;
  uint32_t block;     /* linear: block length of the chunked kernels; copy: the ops it
                         stands for, each a kernel and a host issue (0: one) */
  /* attention, merge: one of call_parts tasks that together are one
   * variable-length call over cu_seqlens (packed documents: a document's
   * piece each; sched_varlen_call), priced as 1/call_parts of a call over
   * call_parts copies of its shape (compute.c); 0 or 1: a call of its own */
  uint32_t call_parts;
  bool causal;        /* attention: mask key <= query over global positions */
  bool backward;
  bool mixed;         /* copy: an add of two dtypes (float32 += bf16); compute prices it */
  bool decay;         /* linear: a scalar decay per head */
  bool into;          /* linear apply, forward: adds Q M into the output
                         (baddbmm_), which reads the output too */
  uint8_t fp8;        /* GEMM: 0 bf16, else FP8 operands and the casts that come
                         with them (compute.h: COMPUTE_FP8_*) */
  uint8_t elemwise;   /* element-wise: which op (compute_elemwise) */
  bool unfused;       /* element-wise: as plain PyTorch runs it (several kernels) */
} plan_op;

/* A transfer; `msgs` is how many messages it is issued as (a piece per
 * contiguous token range): point-to-point groups pay per message.  `steps`:
 * a collective's ring edge carries its bytes in that many pipelined steps,
 * each paying the route's latency once. */
typedef struct { uint32_t src, dst; double bytes; uint32_t msgs, steps; } plan_xfer;

/* task.gpu of a lockstep compute task; plan_xfer.src of a transfer along
 * every pair of pattern plan_xfer.dst (a group holding one holds only it) */
#define PLAN_ALL UINT32_MAX

typedef struct { uint32_t src, dst; } plan_pair;

/* A set of GPU pairs, its GPUs (ascending, each once) and how many of its
 * pairs each GPU is in (sending or receiving): into plan.pairs, .pattern_gpus
 * and .pattern_degree (n_gpus entries per pattern). */
typedef struct {
  uint32_t pair_off, n_pairs, gpu_off, n_gpus, degree_off, max_degree;
} plan_pattern_info;

/* How a communication group is issued: grouped send/receive
 * (batch_isend_irecv, as ring_flash_attn does) or one collective call. */
typedef enum {
  COMM_P2P,
  COMM_ALL_TO_ALL,
  COMM_ALL_GATHER,
  COMM_REDUCE_SCATTER,
  COMM_ALL_REDUCE,
  COMM_BARRIER,   /* no data: joins its predecessors */
  COMM_APIS
} comm_api;

/* A task in 160 bytes (a causal plan holds a million at 1,024 GPUs):
 * its kind and API are a byte each (task_kind, comm_api), beside the
 * two flags, after the 32-bit fields. */
typedef struct {
  plan_op op;          /* compute tasks */
  uint32_t gpu;        /* compute tasks */
  uint32_t step;       /* scheduler step, for traces */
  uint32_t xfer_off, n_xfer;      /* comm: into plan.xfers */
  uint32_t seg_off, n_qseg, n_kseg; /* attention: into plan.segs (q then k) */
  uint32_t dep_off, n_dep;        /* predecessors, into plan.deps (after finish) */
  uint32_t n_overlap;             /* comm: the last n_overlap of its n_dep
                                     predecessors are compute tasks it runs
                                     beside (plan_overlap): exec keeps those
                                     edges only where the hardware says the
                                     group makes no progress beside them */
  uint32_t host_at;               /* comm: the task at whose place in plan order
                                     the host issues it (plan_issue_at), or
                                     PLAN_IN_PLACE: at its own */
  bool grads;                     /* comm: moves gradients (traces) */
  bool on_arrival;                /* compute: adds in what a transfer brought;
                                     a run without communication has nothing
                                     to add and skips it (exec no_comm) */
  uint8_t kind;                   /* task_kind */
  uint8_t api;                    /* comm: comm_api */
} plan_task;

#define PLAN_IN_PLACE UINT32_MAX

typedef struct {
  uint32_t n_gpus;
  bool record_segs;
  GArray *tasks;  /* plan_task */
  GArray *xfers;  /* plan_xfer */
  GArray *segs;   /* plan_seg */
  GArray *dep_from, *dep_to; /* uint32 edge lists while building (NULL after plan_finish) */
  GArray *dep_overlap;       /* uint8 per edge: an overlap edge (plan_overlap) */
  uint32_t *deps; /* predecessors grouped by task, after plan_finish */
  int64_t *last_compute; /* last compute task per GPU, -1 none */
  int64_t *last_coll;    /* last collective group per GPU (its NCCL stream), -1 none */
  uint8_t *scratch;      /* per GPU, all zero between calls */
  uint32_t *gpu_buf;     /* per GPU, scratch for plan_issue */
  int64_t *coll_buf;     /* per GPU, scratch for plan_issue */
  GString *note;  /* what the scheduler wants the user to know */
  GArray *patterns;       /* plan_pattern_info */
  GArray *pairs;          /* plan_pair */
  GArray *pattern_gpus;   /* uint32 */
  GArray *pattern_degree; /* uint32 */
  bool has_lockstep;      /* some task or transfer is PLAN_ALL */
  GArray *bufs, *buf_uses; /* plan_buf, plan_buf_use (plan_buf.h); NULL: none */
  struct plan_buf_names *buf_names; /* the buffers' names (plan_buf.h); NULL: none */
  uint32_t pass_barrier;   /* the barrier between the forward and the
                              backward pass (plan_barrier), or UINT32_MAX */
  uint32_t attn_out;       /* an attention plan's forward output (sched_io's
                              o: what a layer's out projection reads and
                              saves for its weight gradient), or UINT32_MAX */
  GArray *phases;          /* uint32 pairs (first task, plan_phase), first
                              tasks ascending (plan_phase_from); NULL: none */
  double recomputed_flops; /* FLOPs of the tasks that run a forward again
                              (full recomputation): not model FLOPs */
  /* A plan for the representatives of a symmetric job (orbits.h): while
   * it is built, q_sim (per GPU: simulated) and q_rep (per GPU: its
   * representative) filter transfers (plan_quotient); xfer_to (uint32 per
   * transfer; NULL: a plan of every GPU) the GPU each transfer really
   * reaches, its route's end, where dst is that GPU's representative */
  const uint8_t *q_sim;
  const uint32_t *q_rep;
  GArray *xfer_to;
} plan;

plan *plan_new(uint32_t n_gpus, bool record_segs);
void plan_free(plan *p);

/* ---- phases of a step ---- */

/* What part of a training step a task belongs to, for its peak memory.
 * A step's peak is reached at the loss (its logits and softmax, every
 * layer's saved activations) or at the backward's end (ZeRO 2-3: every
 * layer's gradient shards waiting for their reduce-scatters), and which
 * one changes with the layers: an extended step extends each phase's
 * peak apart (exec_result.gpu_peak_phase_bytes).  PLAN_BODY: a
 * micro-batch's forward and the backward of every layer but the first;
 * PLAN_BACKWARD_END: the first layer's backward and what follows it; the
 * optimizer step its own. */
typedef enum { PLAN_BODY, PLAN_BACKWARD_END, PLAN_OPTIMIZER, PLAN_PHASES } plan_phase;

/* The tasks from the next one appended on are of phase ph (until the
 * next call); before the first call, PLAN_BODY. */
void plan_phase_from(plan *p, plan_phase ph);
/* The phase of task id. */
plan_phase plan_task_phase(const plan *p, uint32_t id);

/* ---- compute ---- */

/* A compute task of GPU gpu; appended to its compute stream.  For
 * attention use plan_attn, which also fills the segments and pairs. */
uint32_t plan_compute(plan *p, uint32_t gpu, uint32_t step, const plan_op *op);
/* An attention kernel of GPU gpu over query segments q and key segments k,
 * on the heads and shape of `shape` (kind, sq, sk and pairs are filled in).
 * Causal kernels mask by global position (key <= query). */
uint32_t plan_attn(plan *p, uint32_t gpu, uint32_t step, const plan_op *shape,
                   const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk);
/* A linear-attention task of kind (OP_LIN_*) on `shape`'s heads: sq and sk
 * are the tokens of q and k; segments recorded as for plan_attn. */
uint32_t plan_linear(plan *p, uint32_t gpu, uint32_t step, const plan_op *shape, op_kind kind,
                     const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk);
/* A merge of `rows` query rows of a block output on `shape`'s heads. */
uint32_t plan_merge(plan *p, uint32_t gpu, uint32_t step, const plan_op *shape, double rows);
/* A memory-bound copy of `bytes` on GPU gpu. */
uint32_t plan_copy(plan *p, uint32_t gpu, uint32_t step, double bytes);
/* Whether every GPU's compute stream ends in the same task (or none): a
 * lockstep task (gpu PLAN_ALL) may be added only then. */
bool plan_lockstep(const plan *p);

/* ---- communication ---- */

/* From now on, p holds the tasks of the GPUs marked in sim only (its
 * builder adds no other's) and transfers leaving them: one from another
 * GPU is dropped (it is the image of one leaving a representative), one
 * to another GPU g is kept with dst rep[g], whose receive it stands for,
 * and g as the GPU it reaches (plan_xfer_to).  sim and rep (n_gpus
 * entries each) must live until plan_quotient_end. */
void plan_quotient(plan *p, const uint8_t *sim, const uint32_t *rep);
void plan_quotient_end(plan *p);
/* The GPU the i-th transfer of group t reaches: its dst, or in a plan for
 * representatives the GPU its route ends at. */
uint32_t plan_xfer_to(const plan *p, const plan_task *t, uint32_t i);

/* An empty communication group; add transfers with plan_xfer_add or a
 * collective with plan_coll_*, then issue it with plan_issue. */
uint32_t plan_comm(plan *p, uint32_t step, comm_api api);
void plan_xfer_add(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes);
/* The same, issued as `msgs` messages. */
void plan_xfer_add_msgs(plan *p, uint32_t comm, uint32_t src, uint32_t dst, double bytes,
                        uint32_t msgs);
/* Any transfer, as given. */
void plan_xfer_push(plan *p, uint32_t comm, plan_xfer x);
/* Registers the pairs[0..n) (distinct, src != dst) as a pattern; returns
 * its id. */
uint32_t plan_pattern(plan *p, const plan_pair *pairs, uint32_t n);
/* One transfer of `bytes` in `msgs` messages along every pair of pattern
 * `pattern`: the group's only transfer. */
void plan_xfer_pattern(plan *p, uint32_t comm, uint32_t pattern, double bytes, uint32_t msgs);
/* The transfers group t stands for (patterns expanded): how many, and the
 * i-th of them. */
uint32_t plan_xfer_count(const plan *p, const plan_task *t);
plan_xfer plan_xfer_at(const plan *p, const plan_task *t, uint32_t i);
/* A group's pattern info, or NULL when its transfers are listed one by one. */
const plan_pattern_info *plan_task_pattern(const plan *p, const plan_task *t);

/* Collectives over the ranks gpus[0..n) (a process group, in rank order),
 * expanded into the flows NCCL moves for them (plan_coll.c says why):
 *   all-to-all: `bytes` per ordered pair, direct;
 *   all-gather and reduce-scatter: `bytes` per rank's shard, around rings;
 *   all-reduce: a reduce-scatter then an all-gather of `bytes`/n shards.
 * `per_node`: GPUs per node of the topology (0: one node), which sets the
 * rings' node crossings.  The group's api must match. */
void plan_coll_all_to_all(plan *p, uint32_t comm, const uint32_t *gpus, uint32_t n,
                          double bytes);
void plan_coll_ring(plan *p, uint32_t comm, const uint32_t *gpus, uint32_t n, double bytes,
                    uint32_t per_node);
/* How many rings plan_coll_ring runs over a group of n ranks (one per
 * local GPU where the group is several whole nodes, else one). */
uint32_t plan_coll_rings(uint32_t n, uint32_t per_node);
/* The ring edges plan_coll_ring moves over a group of n ranks (pairs of
 * positions in the group), at most n x per_node of them; returns how many. */
uint32_t plan_coll_ring_edges(uint32_t n, uint32_t per_node, plan_pair *out);
/* Whether NCCL runs the API as rings (plan_coll_ring): several channels per
 * ring edge, so no per-connection cap, and a latency per pipelined step. */
bool plan_api_is_ring(comm_api a);

/* ---- stream rules ---- */

/* The GPUs a group's transfers touch, each once, in ascending order;
 * returns how many (out has room for n_gpus). */
uint32_t plan_comm_gpus(plan *p, uint32_t comm, uint32_t *out);
/* Snapshot of each GPU's last issued compute task (n_gpus entries). */
void plan_issued(const plan *p, int64_t *issued);
/* Issue a filled group on its GPUs: it starts after the compute each of
 * them had issued (`issued`, a snapshot; NULL: now), except `skip` (a task
 * already depended on, -1 none); `ordered`: also after the collective
 * previously issued on each of its GPUs (one NCCL stream per process group:
 * its calls run in issue order). */
void plan_issue(plan *p, uint32_t comm, const int64_t *issued, int64_t skip, bool ordered);

/* The host issues group comm at the place of the earlier task `at`, before
 * it: a group that must come after tasks in the plan (it depends on them)
 * but that the program issues before them (exec's host clock). */
void plan_issue_at(plan *p, uint32_t comm, uint32_t at);
/* A synchronisation point after every GPU's issued compute and after
 * `after` (-1 none): the boundary between a plan's forward and backward
 * pass (plan.pass_barrier).  Returns its id. */
uint32_t plan_barrier(plan *p, uint32_t step, int64_t after);
void plan_dep(plan *p, uint32_t before, uint32_t after);
/* `after` waits for every task in ids. */
void plan_dep_all(plan *p, const GArray *ids, uint32_t after);
/* Group `comm` runs beside the compute tasks in ids (a step's exchange
 * beside the step's kernels: double buffering), which were added before it
 * but which the program issues after it: the host is charged for the group
 * at the first of them (plan_issue_at).  Whether the group makes progress
 * while they run is the hardware's rule, not the scheduler's: the edges
 * from ids to comm are overlap edges (the group's last n_overlap
 * predecessors), which exec keeps only for kernels that hold every SM
 * where the topology's kernel_blocks_comm says a transfer gets none beside
 * them (exec_internal.h exec_dep_kept).  A scheduler emits the same plan
 * on every topology. */
void plan_overlap(plan *p, const GArray *ids, uint32_t comm);
/* One overlap edge: group comm runs beside compute task `task` (copying a
 * plan's edges as they are: plan_append). */
void plan_overlap_dep(plan *p, uint32_t task, uint32_t comm);
/* Whether the i-th predecessor of task t (finished plan) is an overlap
 * edge (plan_overlap). */
static inline bool plan_dep_is_overlap(const plan_task *t, uint32_t i) {
  return i >= t->n_dep - t->n_overlap;
}
/* Build the dependency index; call once, after the last task. */
void plan_finish(plan *p);
/* The finished plan p stands for, with every lockstep task one task per
 * GPU and every pattern transfer one transfer per pair (record_segs as p,
 * segments copied to each copy). */
plan *plan_expand(const plan *p);

/* ---- one plan inside another (plan_append.c) ---- */

/* Moves every GPU g of finished plan p to GPU to[g] (a permutation of its
 * GPUs): compute tasks, transfers and buffers; a plan without patterns
 * (plan_expand it first).  Where a job's dimensions lie otherwise than the
 * order its builder numbers them in (layer.h's placement). */
void plan_relabel(plan *p, const uint32_t *to);

/* Appends finished plan src (no lockstep task or pattern: plan_expand it
 * first) into dst, src GPU g becoming dst GPU gpus[g], in ranges of its
 * tasks (a scheduler's forward then, later, its backward, with the host
 * plan's own tasks between).  Dependencies, transfers, segments (where
 * both record them), host issue places and buffers (one per GPU where src
 * has one on every GPU) are copied remapped; a range's first compute task
 * of each GPU follows that GPU's compute in dst, and its groups with no
 * predecessor in the range wait for the compute their GPUs had issued. */
typedef struct plan_append plan_append;
/* `own`: what of src's caller's the host plan takes over: its inputs
 * (PLAN_APPEND_OWN_INPUTS: the host's tasks make them, so they come into
 * being in the range that first touches them, not at the start) and what
 * it keeps (PLAN_APPEND_OWN_OUTPUTS: the host's tasks consume its inputs
 * and outputs, so they are freed after their last use instead of kept);
 * 0: as src declares. */
enum { PLAN_APPEND_OWN_INPUTS = 1, PLAN_APPEND_OWN_OUTPUTS = 2 };
plan_append *plan_append_new(plan *dst, const plan *src, const uint32_t *gpus, unsigned own);
/* What appending src needs that depends on src alone (the GPUs each task
 * touches, its buffers' copies, each range's sinks and groups that wait
 * on nothing in it), worked out once and shared by every appender of src
 * (a model's step appends one attention plan per layer, TP rank and
 * replica).  src must outlive it and stay unchanged; not for appenders on
 * several threads at once (a range is worked out where first appended). */
typedef struct plan_append_src plan_append_src;
plan_append_src *plan_append_src_new(const plan *src);
void plan_append_src_free(plan_append_src *s);
/* plan_append_new for s's plan, through s (which must outlive it). */
plan_append *plan_append_new_shared(plan *dst, plan_append_src *s, const uint32_t *gpus,
                                    unsigned own);
/* Tasks [from, to) of src, after every earlier range. */
void plan_append_range(plan_append *a, uint32_t from, uint32_t to);
/* dst's compute task `task` waits for the last range's tasks that have no
 * successor in it and touch its GPU (its outputs, however they arrive). */
void plan_append_after(plan_append *a, uint32_t task);
/* The dst buffer src buffer `buf` (its copy on src GPU g, where it has
 * one on every GPU) became; UINT32_MAX where no range appended so far has
 * touched it. */
uint32_t plan_append_buf(const plan_append *a, uint32_t buf, uint32_t g);
/* Into a dst built for representatives (plan_quotient), a range keeps
 * their part of src as plan_quotient_of keeps a finished plan's: their
 * kernels, the groups with a transfer leaving one (received by the
 * representative of the GPU it reaches) or with none, their buffers'
 * copies.  Whether a kept task waited on one left out (a kernel after
 * another GPU's task, an issue place on another GPU): then the plan is
 * not the job's quotient. */
bool plan_append_unfit(const plan_append *a);
void plan_append_free(plan_append *a);

static inline plan_task *plan_task_at(const plan *p, uint32_t id) {
  return &g_array_index(p->tasks, plan_task, id);
}

/* (query, key) pairs of one segment pair under a causal mask. */
double plan_causal_pairs(plan_seg q, plan_seg k);

const char *plan_op_name(op_kind k);
const char *plan_api_name(comm_api a);

#endif
