/* cli: the command line.  Parses and checks the options into a cli_opts,
 * with no side effects (no printing, no exiting), so that main and the
 * option-parser fuzzer run the same code. */
#ifndef TASP_CLI_H
#define TASP_CLI_H

#include <glib.h>
#include <stdbool.h>

#include "scenario.h"

/* The most threads --jobs may ask for: points are independent and a few
 * per core saturate any machine; 100000 would start 100000 threads. */
#define CLI_MAX_JOBS 256

typedef struct {
  /* strings as given, owned; NULL where not given */
  char *topology, *sched, *seq, *sp, *heads, *kv_heads, *head_dim, *batch, *dtype, *mask,
      *pass, *grad_dtype, *attention, *model;
  char *csv, *trace, *links, *memory, *shard, *baseline;
  char **set;           /* --set KEY=VALUE, repeated; NULL-terminated or NULL */
  char *scenario;       /* the one positional argument, or NULL */
  char *scope, *tp, *elementwise, *dp, *zero, *recompute, *micro_batches, *placement,
      *precision, *global_batch_tokens; /* the scopes' */
  char *docs;           /* --docs */
  /* The schedulers' own options (sched.h), by their index among them:
   * text as given (owned; NULL: not given), or a flag given; and those
   * given as "key=value" for the scenario (owned, NULL-terminated). */
  char *opt_text[SCHED_MAX_OPTS];
  gboolean opt_flag[SCHED_MAX_OPTS];
  char **sched_opts;
  gboolean strict;      /* a point a scheduler cannot run is an error (exit 2), not an n/a row */
  gboolean quiet, version, help, list, dump_topology, no_compute, no_comm, alone, links_summary,
      per_flow;
  gboolean whole_steps; /* replay every layer and micro-batch (sim_opts.whole_steps) */
  int jobs;             /* 0: one per CPU */
  unsigned shard_i, shard_n; /* shard_n 0: all */
} cli_opts;

/* Parse argv (not modified).  FALSE with a message naming the option and
 * what was expected. */
bool cli_parse(int argc, char **argv, cli_opts *o, GError **err);
void cli_opts_clear(cli_opts *o);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(cli_opts, cli_opts_clear)
/* The scenario overrides the options give (pointing into o). */
scenario_overrides cli_overrides(const cli_opts *o);
/* --help text: options, schedulers, bundled topologies, examples. */
char *cli_help(void);

#endif
