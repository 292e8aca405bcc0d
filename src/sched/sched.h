/* sched: the scheduler interface and registry.
 *
 * A scheduler turns a workload into a plan: which attention kernels each
 * GPU runs, which transfers move between which GPUs, and in which order.
 * It knows nothing of channels or time (only which GPU pairs are direct
 * neighbours, for topology-aware decompositions); the engine says when.
 * Adding a scheduler is adding a file with a `const sched_ops` and a line
 * in sched.c. */
#ifndef TASP_SCHED_H
#define TASP_SCHED_H

#include <glib.h>
#include <stdbool.h>

#include "plan.h"
#include "plan_buf.h"
#include "topology.h"
#include "workload.h"
#include "jsonio.h"

/* A scheduler's own option (USP's Ulysses degree, TASP's given cycles).
 * The scheduler declares it in its file; the command line (--KEY with
 * '-' for '_'), the scenario loader (KEY, in the model object or at the
 * top), --help and --list read it from the registry.  Several schedulers
 * may list the same option (one object): it is then one option.  Values
 * are read as jsonio's json_parse_value reads a command-line value (the
 * --set machinery's reading), so a value means on the command line what
 * it means in a file. */
typedef enum {
  SCHED_OPT_COUNT, /* a whole number from 1 to max (sizes: 4, 1K); unset: 0, the default */
  SCHED_OPT_FLAG,  /* true or false; on the command line, given: true */
  SCHED_OPT_TEXT,  /* a string the scheduler's check judges; unset: NULL */
} sched_opt_type;

typedef struct sched_opt {
  const char *key;     /* scenario key, "usp_ulysses"; option --usp-ulysses */
  bool in_model;       /* the key sits in the scenario's model object */
  sched_opt_type type;
  uint32_t max;        /* COUNT: the largest value */
  const char *metavar; /* --help's placeholder for the value, "N" */
  const char *help;    /* --help's line (the schedulers that read it are added) */
  /* TEXT: given while none of the run's schedulers reads it is an error
   * (the value would be ignored), naming what it is, "cycles"; NULL: no
   * such rule. */
  const char *ignored_noun;
  /* COUNT: a divisor strictly inside the SP degree that splits it in two
   * (USP's Ulysses groups, double ring's inner ring); search enumerates
   * the divisors of SP as a dimension of the space. */
  bool splits_sp;
  /* COUNT: a head-parallel degree the SP degree is divided by before the
   * scheduler's splits_sp option splits what is left (LoongTrain's 2D
   * attention: U head groups x SP / U context ranks, double ring's inner
   * ring among those ranks).  search enumerates its divisors of SP as a
   * dimension of the space (1: the option left unset), and the
   * scheduler's check refuses those its heads cannot take. */
  bool divides_sp_first;
  /* COUNT: a value given splits the heads among GPUs, so a step's kernels
   * are no longer alike on every GPU (no lockstep task): the plan budget
   * (budget.c) bounds its tasks by its spans. */
  bool splits_heads;
  /* COUNT: the value the scheduler takes where none is given (NULL: not
   * said), for what sizes a plan before building it (budget.c) */
  uint32_t (*default_num)(const workload *w, const topology *t);
} sched_opt;

/* The most distinct options all schedulers together declare. */
#define SCHED_MAX_OPTS WORKLOAD_MAX_OPTS

/* Upper fits of the size of a scheduler's plans, per pass, in the SP
 * degree P: tasks t2 P^2 + t1 P, transfers x3 P^3 + x2 P^2 + x1 P, trace
 * spans s2 P^2 + s1 P; t2, t1 and s2 under a causal mask (c) and a full
 * one (f).  Transfers count every one the plan moves (a pattern's
 * expanded: what a trace records); a plan that moves them along patterns
 * (plan_pattern) stores fewer: xs2 P^2 + xs1 P per pass, those listed one
 * by one and each pattern's pairs once (exec_comm.c replays a pattern's
 * transfers from one copy of its pairs: pattern_launch), both 0 where
 * every transfer is listed.  A pattern's launch (its members, routes and
 * net shape) is freed after its last group, and between uses where its
 * groups lie further apart than its pairs (exec_comm.c): a full-mask plan
 * whose patterns each serve a step or two holds the launches of only
 * xl1f P pairs at once (0: every stored pair's launch kept, as a pattern
 * reused every step is).  budget.c reads them; tests/test_budget.c
 * checks them against the plans built at P = 8 and 32. */
typedef struct {
  double t2c, t2f, t1c, t1f, x3, x2, x1, s2c, s2f, s1;
  double xs2, xs1;
  double xl1f;
} sched_size;

typedef struct sched_ops {
  const char *name;
  const char *summary;
  /* Can this scheduler run this workload here?  A clear error if not. */
  bool (*check)(const workload *w, const topology *t, GError **err);
  /* The plan (plan_finish already called).  record_segs: keep token
   * segments of every kernel (tests). */
  plan *(*build)(const workload *w, const topology *t, bool record_segs);
  /* The layers it runs: a bit (1u << attn_kind) per kind; 0: softmax
   * attention only.  build() gets one layer, of w->attention. */
  unsigned attention;
  /* Its own options, NULL-terminated; NULL: none. */
  const sched_opt *const *opts;
  sched_size size;
  /* Another scheduler this one is exactly, under a name users know
   * (TransformerEngine's cp_comm_type): runs its plan; --sched all runs
   * that one, not the alias.  NULL: a method of its own. */
  const struct sched_ops *alias_of;
  /* Runs packed documents (workload.docs) with its variable-length
   * layout; false: refused with a message naming those that do. */
  bool docs;
  /* A permutation of the job's GPUs (pi: w->gpus entries, filled) that
   * carries its plan for w onto itself, every task and transfer onto
   * one of the same, where replaying one GPU of each orbit is worth it
   * (attn_orbits.h); NULL or false: none.  USP's and double ring's:
   * every Ulysses group's GPUs turned by one; with block (a divisor of
   * the group's size; 0: the whole group) by one inside each block of
   * that many consecutive ranks of the group, which maps the plan onto
   * itself too (every pair of a group exchanges alike in its
   * all-to-alls; every other transfer keeps its Ulysses rank) and keeps
   * a group that spans nodes node by node (layer_orbits_sched); false
   * where block does not divide it. */
  bool (*turn)(const workload *w, const topology *t, uint32_t block, uint32_t *pi);
} sched_ops;

#define SCHED_RUNS(kind) (1u << (kind))

const sched_ops *sched_find(const char *name);
/* NULL-terminated list of all schedulers. */
const sched_ops *const *sched_all(void);
/* "ring, zigzag, tasp" */
char *sched_names(void);

/* Every distinct option the schedulers declare, in registry order,
 * NULL-terminated (at most SCHED_MAX_OPTS), and an option's index there
 * (its slot in workload.opts), -1: none. */
const sched_opt *const *sched_options(void);
int sched_option_index(const sched_opt *o);
const sched_opt *sched_option_find(const char *key);
/* "--usp-ulysses", and the scenario field "model.usp_ulysses" (interned
 * strings: they live as long as the program). */
const char *sched_option_flag(const sched_opt *o);
const char *sched_option_field(const sched_opt *o);
/* "usp, usp-zigzag": the schedulers that declare o. */
char *sched_option_users(const sched_opt *o);
/* Whether s declares o. */
bool sched_uses_option(const sched_ops *s, const sched_opt *o);
/* o's value in w: COUNT and FLAG as a number (0: unset / false), TEXT as
 * its text (NULL: unset). */
uint32_t sched_opt_num(const workload *w, const sched_opt *o);
const char *sched_opt_text(const workload *w, const sched_opt *o);
void sched_opt_set_num(workload *w, const sched_opt *o, uint32_t v);
void sched_opt_set_text(workload *w, const sched_opt *o, const char *text);
/* Read o's value: given on the command line as cli_text (read as
 * jsonio's json_parse_value reads a --set value; a FLAG given is true),
 * else v from a scenario file.  The text a TEXT option keeps points into
 * cli_text or v.  FALSE with *why (owned) saying what was expected. */
bool sched_opt_value(const sched_opt *o, const char *cli_text, json_object *v, workload_opt *out,
                     char **why);

/* Whether s runs every kind of layer in w's model; an error naming the
 * schedulers that do where not. */
bool sched_check_attention(const sched_ops *s, const workload *w, GError **err);
/* sched_check_attention, then s->check on one layer of each kind: the
 * check callers make. */
bool sched_check(const sched_ops *s, const workload *w, const topology *t, GError **err);

/* Packed documents: where w has them, refused (TASP_ERROR_DOCS, naming the
 * schedulers that run them) unless s runs them, and every document must
 * divide into `parts` equal pieces per GPU (the variable-length layouts
 * cut each document so, `why`; 0: any length will do). */
bool sched_check_docs(const sched_ops *s, const workload *w, uint64_t parts, const char *why,
                      GError **err);
/* The pieces of document `doc` that rank a of r holds: its a-th of r
 * equal pieces (ring_flash_attn_varlen_func's layout), or (zigzag) its
 * a-th and (2r-1-a)-th of 2r (zigzag_ring_flash_attn_varlen_func's).
 * Returns how many. */
uint32_t sched_doc_layout(const workload *w, uint32_t doc, uint32_t a, uint32_t r, bool zigzag,
                          plan_seg out[2]);

/* The attention tasks from task `first` on are one variable-length call
 * over cu_seqlens (flash attention's varlen kernel over the packed
 * documents' pieces), as are the merges among them: each is priced as its
 * share of the call (plan_op.call_parts). */
void sched_varlen_call(plan *p, uint32_t first);

/* Shared checks: sequence divisible into `parts` equal pieces per GPU
 * group, with at least one token per piece. */
bool sched_check_divisible(const workload *w, uint64_t parts, const char *why, GError **err);

/* A plan of about `tasks` tasks fits in memory: each costs at most
 * SCHED_PLAN_TASK_BYTES here and in the replay (its record, dependencies,
 * buffer declarations and the executor's state: budget.h's
 * BUDGET_TASK_BYTES, measured there); refused past the memory budget
 * (budget_limit: TASP_MEMORY_BUDGET, or half of what the process may
 * use), or, where w has a plan_cap_tasks (a search), past that,
 * blaming --sp.  Checked where a scheduler or a scope knows its
 * plan's size before the point is listed (a point refused so is n/a in a
 * sweep, where budget_check refuses a whole run), so the two agree. */
#define SCHED_PLAN_TASK_BYTES 640.0
bool sched_check_tasks(const workload *w, double tasks, const char *who, GError **err);

/* Token segments rank a of r holds: one contiguous chunk of S/r tokens,
 * or (zigzag) chunks a and 2r-1-a of S/2r tokens (zigzag_ring_flash_attn's
 * layout, balanced under a causal mask).  Returns how many. */
uint32_t sched_layout(uint64_t seq, uint32_t a, uint32_t r, bool zigzag, plan_seg out[2]);

/* The layer's tensors on every GPU (its S/N tokens of every head), as
 * plan buffers (plan_buf.h), one declaration for all GPUs.  Forward reads
 * the inputs q and kv (K and V) and hands on its output o and, softmax,
 * the float32 log-sum-exp lse (flash attention's softmax_lse, saved for
 * backward); backward reads q, kv, o, lse and the output gradient dout,
 * and hands on dq and dkv (the gradients in the inputs' dtype, as
 * ring_flash_attn and DeepSpeed return them).  In forward then backward,
 * backward reads what forward handed on; dout is an input of the whole
 * plan (allocated by the caller: live from its start).  UINT32_MAX: none. */
typedef struct {
  uint32_t q, kv, o, lse, dout, dq, dkv;
  uint32_t dv; /* V's gradient, where the program returns it apart from
                  K's (dkv then holds dK alone: sched_io_pass_apart) */
  uint32_t saved; /* a scheduler's own tensor forward hands to backward */
  uint32_t keep[8], n_keep; /* more of them (n_keep 0: none; set by forward) */
  bool late;      /* the pass's outputs are made as its last task ends
                     (sched_io_end's late; set by the pass, reset by sched_io_pass) */
  int64_t end_task; /* that task where it is not each GPU's last compute (a
                       collective the conversion follows), else -1 */
  void *aux;      /* a scheduler's own state while it builds a pass */
} sched_io;

/* Declares a pass's tensors into io (all UINT32_MAX before the first
 * pass; the forward's are kept for backward). */
void sched_io_pass(plan *p, const workload *w, sched_io *io, bool backward);
/* ... where backward's dK and dV are two tensors (ring_flash_attn's
 * `next_dk.to(q.dtype)`, `next_dv.to(q.dtype)`): io->dkv and io->dv. */
void sched_io_pass_apart(plan *p, const workload *w, sched_io *io, bool backward);
/* The outputs of the pass io was last declared for are written by each
 * GPU's last compute task so far (the pass's final conversion or copy);
 * late: as it ends (plan_buf_writes_late: a conversion after the task's
 * temporaries are gone), else while it runs (the task is that copy). */
void sched_io_end(plan *p, const sched_io *io, bool backward, bool late);
/* Buffer `buf`, made by the forward, is saved for the backward (as an
 * autograd function's saved tensors): kept to the end of a forward-only
 * plan (the backward that frees it is not part of it), freed after its
 * last reader where the backward runs too. */
void sched_io_save(plan *p, const workload *w, uint32_t buf);
/* Declares the workspace of intra-chunk linear-attention task `task`
 * (OP_LIN_INTRA; none for the full mask): that of the kernel the linear
 * tables price, calibrate.py's lin_intra / lin_intra_bwd (sched.c). */
void sched_lin_intra_workspace(plan *p, uint32_t task);
/* Bytes per GPU of its S/N tokens of `heads` heads in the layer's dtype. */
double sched_rows_bytes(const workload *w, double heads);

/* What a scheduler's pass builds on: io holds the pass's tensors. */
typedef struct {
  plan *p;
  const workload *w;
  const topology *t;
  sched_io *io;
} sched_ctx;

/* The plan of the passes w->pass asks for: forward, backward, or forward
 * then a barrier then backward, finished.  pass(c, backward, after) emits
 * one pass after task `after` (-1 none) and returns its last task. */
typedef int64_t (*sched_pass_fn)(const sched_ctx *c, bool backward, int64_t after);
plan *sched_passes(const workload *w, const topology *t, bool record_segs, sched_pass_fn pass);

/* The operands of an attention task over all of w's heads (linear tasks:
 * with w's block length and decay). */
plan_op sched_shape(const workload *w, bool causal, bool backward);

extern const sched_ops sched_ring;
extern const sched_ops sched_zigzag;
extern const sched_ops sched_tasp;
extern const sched_ops sched_tasp_mkm;
extern const sched_ops sched_ulysses;
extern const sched_ops sched_usp;
extern const sched_ops sched_usp_zigzag;
extern const sched_ops sched_tokenring;
extern const sched_ops sched_allgather;
extern const sched_ops sched_lasp;
extern const sched_ops sched_lasp2;
extern const sched_ops sched_lasp2h;
extern const sched_ops sched_stripe;
extern const sched_ops sched_double_ring;
extern const sched_ops sched_te_p2p;
extern const sched_ops sched_te_all_gather;
extern const sched_ops sched_te_a2a;
extern const sched_ops sched_te_a2a_p2p;

#endif
