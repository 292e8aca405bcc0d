/* scenario: what to simulate.  Reads a scenario file, applies command-line
 * overrides, checks everything, and expands the sweep into points.
 *
 * Every problem is found before anything runs, and reported with the file
 * (or "command line"), the field (or option) and what was expected. */
#ifndef TASP_SCENARIO_H
#define TASP_SCENARIO_H

#include <glib.h>
#include <stdbool.h>

#include "sched/sched.h"
#include "topology.h"
#include "workload.h"

/* Defaults of the sweep lists (--help shows these same strings). */
#define SCENARIO_DEFAULT_SCHEDS "ring,zigzag,tasp"
#define SCENARIO_DEFAULT_SEQ "128K"
#define SCENARIO_DEFAULT_MASK "causal"
#define SCENARIO_DEFAULT_PASS "fwd"

/* Bounds on the shape: what a real run could be, with room to spare, so
 * that a typo (--seq 4G --heads 4294967295) is refused instead of priced.
 * Sources: Llama-3-405B has 126 layers, 128 query heads of dimension 128
 * (arXiv 2407.21783, table 3); DeepSeek-V3 128 heads, MLA keys of
 * dimension 192 (arXiv 2412.19437); Gemma 2 head dimension 256 (arXiv
 * 2408.00118); Llama 3 trained on 16,384 H100 GPUs (arXiv 2407.21783);
 * the scale studies run points of 8,192 GPUs at 16M tokens. */
#define SCENARIO_MAX_SEQ (1ull << 30)        /* tokens: 1G, 64x a 16M-token point */
#define SCENARIO_MAX_SP 16384u               /* GPUs sharing a sequence */
#define SCENARIO_MAX_HEADS 1024u             /* 8x the 128 of Llama-3-405B */
#define SCENARIO_MAX_HEAD_DIM 1024u          /* 4x Gemma 2's 256 */
#define SCENARIO_MAX_BATCH 65536u            /* sequences per step */
#define SCENARIO_MAX_LAYERS 1024u            /* 8x Llama-3-405B's 126 */
#define SCENARIO_MAX_BLOCK 65536u            /* linear attention's kernel block */
#define SCENARIO_MAX_TOKENS (1ull << 30)     /* batch x seq_len */
/* A model's other sizes (model.h), 64x Llama-3.1-405B's (hidden 16,384,
 * FFN 53,248: arXiv 2407.21783 table 3) and 64x Gemma 2's vocabulary of
 * 256,000 (arXiv 2408.00118). */
#define SCENARIO_MAX_HIDDEN (1u << 20)
#define SCENARIO_MAX_FFN (1u << 22)
#define SCENARIO_MAX_VOCAB (1u << 24)
/* One Q, K, V or gradient tensor of a layer over the whole sequence
 * (batch x seq_len x heads x head dim x bytes per element), and a linear
 * layer's state (batch x heads x head dim^2 x 4): at most 64 TiB (2^46).
 * Every per-layer byte count tasp-sim forms (a transfer, a channel's sum
 * over a pass: at most a few tensors) then stays below 2^53, where doubles
 * hold whole numbers exactly; 16M tokens x 128 heads x 128 x 4 bytes is
 * 2^40. */
#define SCENARIO_MAX_TENSOR_BYTES (1ull << 46)

/* Command-line overrides; NULL / 0 where not given. */
typedef struct {
  const char *topology;
  const char *sched, *seq, *sp, *mask, *pass, *dtype, *grad_dtype;
  const char *heads, *kv_heads, *head_dim, *batch;
  const char *model;         /* --model: a preset name or a model file */
  /* The schedulers' own options given (sched.h's sched_opt) as
   * "key=value" (a flag: "key=true"), NULL-terminated, or NULL: none. */
  char *const *sched_opts;
  const char *baseline;      /* best (NULL), ring or zigzag */
  char *const *set;          /* topology "key=value" assignments, NULL-terminated, or NULL */
  const char *attention;     /* softmax or linear: every layer's attention */
  bool strict;               /* a point some scheduler cannot run is an error, not an n/a row */
  bool topology_only;        /* --dump-topology: the topology is all that is asked, so the
                                points need not run (gb200nvl72's 72 GPUs at the default
                                128K, which no scheduler splits) */
  uint64_t topo_max_bytes;   /* the most the topology may take; 0: TOPO_MAX_BYTES */
  const char *scope;         /* --scope: attention or layer */
  const char *tp;            /* --tp: tensor-parallel degree */
  const char *elementwise;   /* --elementwise: fused or unfused */
  const char *dp, *zero, *recompute; /* --dp, --zero, --recompute (scope model) */
  const char *micro_batches; /* --micro-batches (scope model) */
  const char *global_batch_tokens; /* --global-batch-tokens (scope model) */
  const char *placement;     /* --placement: tp,sp,dp (default) or another order */
  const char *precision;     /* --precision: megatron (default), amp, bf16 or fp8 */
  const char *docs;          /* --docs: packed documents' lengths, "2K,59K,4K,63K" */
  /* --whole-steps (and --memory, cli.c): a step of scope model is
   * replayed whole, and its plan checked at that size; otherwise from the
   * few layers and micro-batches sim.h extends it from (sim_step_replayed) */
  bool whole_steps;
} scenario_overrides;

typedef struct {
  workload w;                /* gpus = SP degree */
  const sched_ops *sched;
  bool hidden;               /* run only as a baseline (ring, --baseline) for speedups */
  /* Why sched cannot run this otherwise valid point (its check's words,
   * "32 query heads do not divide among a Ulysses degree of 64 ..."), owned
   * by the scenario; NULL: it can.  Such a point is not run: it is a row
   * that says why (n/a), and no verdict or speedup counts it. */
  char *na;
} scenario_point;

typedef struct {
  char *file;                /* NULL without a scenario file */
  char *name;
  topology *topo;
  workload model;            /* shape; gpus and seq_len unset */
  char *model_name;          /* the architecture's name (a preset's, or model.name); NULL: none */
  char *model_file;          /* the model file of --model or model.preset; NULL: none */
  char *opt_text[WORKLOAD_MAX_OPTS]; /* owned; the model's text options point here */
  struct docs_spec *docs_spec; /* --docs / model.docs (docs.h); NULL: none */
  GPtrArray *docs;           /* per sequence length, its documents (GArray of uint64) */
  GArray *seqs;              /* uint64 */
  GArray *sps;               /* uint32 */
  GArray *masks;             /* gboolean causal */
  GArray *passes;            /* pass_kind */
  GPtrArray *scheds;         /* const sched_ops * */
  GArray *points;            /* scenario_point, in output order */
  const sched_ops *baseline; /* what speedup_vs_best compares with; NULL: the group's best */
  bool whole_steps;          /* scenario_overrides.whole_steps */
} scenario;

/* Load, check and expand.  Sweep lists name each value once (32K and
 * 32768 twice is refused) and are never empty; "all" as the schedulers is
 * every scheduler that runs the model's layers.  A point a scheduler
 * cannot run (its check objects to the sequence, SP degree or topology) is
 * kept as an n/a point, unless ov->strict, or unless no shown point at all
 * can run: then the first objection is the error, blaming its input. */
scenario *scenario_load(const char *file, const scenario_overrides *ov, GError **err);
void scenario_free(scenario *s);

const char *pass_name(pass_kind p);
/* "attention", "layer", "model" */
const char *scope_name(scope_kind k);

/* Point groups (one seq x SP x mask x pass each: what --shard deals). */
guint scenario_groups(const scenario *s);

/* Where bundled topologies live (for --topology NAME). */
char *scenario_find_topology(const char *name_or_file);

#endif
