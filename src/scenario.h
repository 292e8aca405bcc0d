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

/* Command-line overrides; NULL / 0 where not given. */
typedef struct {
  const char *topology;
  const char *sched, *seq, *sp, *mask, *pass, *dtype, *grad_dtype;
  const char *heads, *kv_heads, *head_dim, *batch;
  const char *tasp_cycles;
  const char *usp_ulysses;   /* USP's Ulysses degree */
  bool ulysses_fused;        /* one all-to-all for Q, K and V */
  const char *baseline;      /* best (NULL), ring or zigzag */
  char *const *set;          /* topology "key=value" assignments, NULL-terminated, or NULL */
  const char *attention;     /* softmax or linear: every layer's attention */
  uint64_t topo_max_bytes;   /* the most the topology may take; 0: TOPO_MAX_BYTES */
} scenario_overrides;

typedef struct {
  workload w;                /* gpus = SP degree */
  const sched_ops *sched;
  bool hidden;               /* run only as a baseline (ring, --baseline) for speedups */
} scenario_point;

typedef struct {
  char *file;                /* NULL without a scenario file */
  char *name;
  topology *topo;
  workload model;            /* shape; gpus and seq_len unset */
  char *tasp_cycles;         /* owned; model.tasp_cycles points here */
  GArray *seqs;              /* uint64 */
  GArray *sps;               /* uint32 */
  GArray *masks;             /* gboolean causal */
  GArray *passes;            /* pass_kind */
  GPtrArray *scheds;         /* const sched_ops * */
  GArray *points;            /* scenario_point, in output order */
  const sched_ops *baseline; /* what speedup_vs_best compares with; NULL: the group's best */
} scenario;

scenario *scenario_load(const char *file, const scenario_overrides *ov, GError **err);
void scenario_free(scenario *s);

const char *pass_name(pass_kind p);

/* Where bundled topologies live (for --topology NAME). */
char *scenario_find_topology(const char *name_or_file);

#endif
