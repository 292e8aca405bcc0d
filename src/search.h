/* search: which configuration to run (`tasp-sim search`).
 *
 * For a model, a topology, a sequence length and a GPU count, enumerates
 * every way to run the training step on exactly those GPUs: SP method x SP
 * degree x head-parallel degree (the schedulers that divide SP by one
 * first: double ring's Ulysses degree) x SP split (USP's Ulysses degree,
 * double ring's inner ring) x TP x DP x ZeRO stage x recomputation x
 * placement (which of TP, SP
 * and DP lies innermost, inside a node, the others in the default order;
 * only where the job spans several nodes) (SP 1 once, as the
 * pseudo-method "no-sp": no method has anything to do there), in one
 * precision recipe (--precision, as the main command's).  A configuration
 * that cannot run is excluded before anything is simulated, with its reason
 * and class (TP split, global batch, the method's own check, plan size, or
 * memory: weights, gradients, optimizer states and saved layer inputs
 * alone over the usable memory, layer_resident_bytes, or with what each
 * layer's attention keeps for its backward, search_memory_bound_bytes;
 * that second test after the plan size, from the plan of the time bound's
 * attention part).  The others get a
 * lower bound on their step (search_bound.h: their compute and the
 * forward's TP waits) and are simulated best bound first, in rounds of
 * SEARCH_ROUND; a configuration is pruned, not
 * simulated, when its bound shows it can be neither in the top K nor the
 * best of its method.  Rounds are fixed in size and thresholds move only
 * between them, so which configurations are simulated does not depend on
 * --jobs; the ranked answer (top K, each method's best, exclusions) is that
 * of simulating everything, and a shard's pruning is sound for the union
 * of shards (search_merge). */
#ifndef TASP_SEARCH_H
#define TASP_SEARCH_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "scenario.h"

typedef enum { SEARCH_TOKENS, SEARCH_STEP } search_objective;

typedef enum {
  SEARCH_SIMULATED, /* simulated, fits */
  SEARCH_NO_FIT,    /* simulated, does not fit in memory */
  SEARCH_PRUNED,    /* not simulated: its bound cannot reach the answer */
  SEARCH_EXCLUDED,  /* cannot run (klass, reason) */
  SEARCH_STATUSES
} search_status;

/* Configurations simulated between two updates of the pruning thresholds. */
#define SEARCH_ROUND 8u
/* The most configurations one search enumerates (a typo in --gpus must not
 * start an hour of work). */
#define SEARCH_MAX_CONFIGS 2000000u
/* The most tasks a configuration's replayed plan may have (workload's
 * plan_cap_tasks): the same on every machine, so that the configurations
 * a search simulates, and its answer, do not depend on the one it runs on
 * (--shard spreads a search over several).  5e6 tasks take about 3 GiB
 * (sched.h SCHED_PLAN_TASK_BYTES) and a few seconds each; the 1 GiB at
 * 224 B a task the cap was before held 4.8e6. */
#define SEARCH_MAX_PLAN_TASKS 5e6

/* One configuration and what became of it. */
typedef struct {
  uint32_t index;          /* in the enumeration order (search.c) */
  char *sched;
  /* split: the value of the scheduler's option that splits SP in two
   * (USP's Ulysses degree, double ring's inner ring; search.c split_opt);
   * 0: it takes none */
  uint32_t tp, sp, split, dp, zero;
  /* the head-parallel degree SP is divided by before the split (double
   * ring's Ulysses degree; search.c heads_opt): 1 none, the option unset;
   * 0: the scheduler takes none */
  uint32_t head_parallel;
  recompute_kind recompute;
  placement_kind placement;
  uint32_t micro_batches;
  search_status status;
  /* excluded: the class ("tp", "batch", "method", "plan", "memory") and
   * the reason; pruned: the bound's words; simulated: the verdict's why */
  char *klass, *reason;
  double bound_s;          /* lower bound on the step; NAN where excluded before it */
  double mem_bound_gib;    /* lower bound on peak memory; NAN where not formed */
  /* simulated (fitting or not); NAN otherwise */
  double step_s, tokens_per_s_per_gpu, mfu, peak_mem_gib;
} search_row;

/* What was asked: the ranked answer depends on all of it, so shards merge
 * only when it is the same. */
typedef struct {
  char *model, *topology;  /* names */
  uint64_t seq_len;
  uint32_t gpus;
  uint64_t global_batch_tokens; /* 0: one sequence per DP replica */
  bool causal;
  search_objective objective;
  uint32_t top;
  uint32_t configs;        /* how many the enumeration holds */
  double usable_gib;       /* memory a GPU may allocate (0: not given) */
  precision_kind precision; /* every configuration's recipe */
} search_question;

typedef struct {
  search_question q;
  GPtrArray *rows;         /* search_row *, by index; a shard's only */
} search_result;

typedef struct {
  const scenario *s;       /* topology, the model's shape and precision, seq_len (the
                              first), mask (the first) */
  uint32_t gpus;
  uint64_t global_batch_tokens;
  const char *global_batch_from; /* "command line: option '--global-batch-tokens'", or a file's field */
  search_objective objective;
  uint32_t top;
  GPtrArray *scheds;       /* const sched_ops *: the methods */
  unsigned jobs;           /* threads (0: one per CPU) */
  unsigned shard, shards;  /* configurations with index % shards == shard; shards 0: all */
  bool exhaustive;         /* simulate every configuration that can run (no pruning) */
  bool whole_steps;        /* replay every layer of a step (sim_run_step), not a few
                              layers extended (sim_run_step_repeating) */
  bool count_only;         /* enumerate, exclude and bound only: nothing simulated */
} search_opts;

/* Enumerate, exclude, bound, prune and simulate.  An error (exit 2) where
 * the question itself is wrong (GPUs beyond the topology, a global batch
 * that is not whole sequences, too many configurations). */
search_result *search_run(const search_opts *o, GError **err);
void search_result_free(search_result *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(search_result, search_result_free)

/* A lower bound on the step of workload w (scope model, forward then
 * backward) under scheduler s on t: per micro-batch one GPU's layer ops
 * as compute prices them (forward, backward, and the forward again under
 * full recomputation) and the attention's compute on the busiest GPU of
 * the scheduler's own plan, and the forward's TP waits (search_bound.h);
 * no other communication or waiting, no embedding, head or optimizer.
 * test_search and test_search_bound check it against simulated steps. */
double search_bound_s(const sched_ops *s, const workload *w, const topology *t);

/* For search_out.c's merge: an empty result, a row of NAN figures. */
search_result *search_result_new(void);
search_row *search_row_new(void);

/* The objective's value of a simulated row (larger is better). */
double search_score(const search_question *q, const search_row *r);
/* Rows that fit, best first (ties: lower index first). */
GPtrArray *search_ranked(const search_result *r);

/* The answer as a table (search_out.c): the question, counts per status
 * and class, the dimensions enumerated, the top K, the winner's margin over
 * each other method's best, a line per excluded class.  The same bytes for
 * a whole search and for the merge of its shards. */
void search_print(FILE *f, const search_result *r);
/* Its first lines only: the question, the counts per class, the
 * dimensions (what --count prints). */
void search_print_counts(FILE *f, const search_result *r);
/* Every row of r as CSV (the question in every row). */
void search_csv(FILE *f, const search_result *r);
/* Reads the CSVs of the shards of one search (files[0..n)) into one
 * result: each names the same question, and together they hold every
 * configuration once. */
search_result *search_merge(char *const *files, guint n, GError **err);

/* `tasp-sim search ...` (search_cli.c): argv[0] is "search"; the exit
 * status (2: bad input, 1: an output could not be written). */
int search_main(int argc, char **argv);

const char *search_status_name(search_status s);
const char *search_objective_name(search_objective o);
/* --precision's words: "megatron", "amp", "bf16", "fp8"; NULL: none such. */
const char *search_precision_name(precision_kind p);
bool search_precision_parse(const char *text, precision_kind *out);

/* The first option scheduler s declares that splits SP in two
 * (sched_opt.splits_sp: USP's Ulysses degree, double ring's inner ring);
 * NULL: it takes none.  Its values are the space's split dimension. */
const sched_opt *search_split_opt(const sched_ops *s);

#endif
