/* budget: per-scheduler size of a plan, and the memory budget. */
#include "budget.h"

#include "layer.h"
#include "layers.h"
#include "orbits.h"
#include "sim.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "jsonio.h"
#include "sizes.h"

/* the cap sched_check_tasks puts on a plan is this budget's */
G_STATIC_ASSERT((int)SCHED_PLAN_TASK_BYTES == (int)BUDGET_TASK_BYTES);

/* Each scheduler's size coefficients are its own (sched.h's sched_size,
 * in its file): upper fits of the counts the schedulers' plans have at
 * P = 8, 16, 32 (tests/test_budget.c checks them at 8 and 32).  A causal
 * ring is about P^2 kernels, merges and transfers; TASP moves every chunk
 * over P - 1 cycles (P^3 transfers); Ulysses's and USP's all-to-alls are
 * P^2 transfers in a few tasks per GPU; LASP hands one state along the
 * chain (P transfers). */

static bool has_size(const sched_size *z) {
  static const sched_size none;
  return memcmp(z, &none, sizeof none) != 0;
}

/* Room for the few tasks, transfers and spans any plan has whatever P. */
#define SLACK 32.0
/* Tasks a GPU runs a ring step in a head-parallel scheduler's causal
 * ring (its kernel, its merge or the backward's gradient sums, the
 * step's group, with room; the backward's first block one more): below */
#define HEADS_RING_TASKS 3.5

bool budget_counts_of(const scenario_point *pt, const topology *t, budget_counts *out) {
  /* an alias's plan is its scheduler's */
  const sched_ops *so = pt->sched->alias_of ? pt->sched->alias_of : pt->sched;
  const sched_size *z = &so->size;
  if (!has_size(z)) return false;
  double p = pt->w.gpus, passes = pt->w.pass == PASS_FWDBWD ? 2 : 1;
  bool causal = pt->w.causal;
  /* packed documents: a kernel and a merge per document a step holds
   * (ring.c: one block a document, zigzag's pieces in it); room for four
   * per document, what zigzag's piece pairs took before */
  double docs = pt->w.docs ? 4.0 * pt->w.n_docs : 1;
  out->tasks = passes * docs * ((causal ? z->t2c : z->t2f) * p * p +
                                (causal ? z->t1c : z->t1f) * p) + SLACK;
  out->xfers = passes * (z->x3 * p * p * p + z->x2 * p * p + z->x1 * p) + SLACK;
  out->stored = z->xs2 || z->xs1 ? passes * (z->xs2 * p * p + z->xs1 * p) + SLACK : 0;
  out->launched = z->xl1f && !causal ? z->xl1f * p + SLACK : 0;
  out->spans = passes * docs * ((causal ? z->s2c : z->s2f) * p * p + z->s1 * p) + SLACK;
  /* A head-parallel option (USP's, double ring's degree) changes the
   * plan's shape from the defaults the coefficients were fitted to.
   * Where the degree u is known (given, or the one the scheduler takes on
   * this topology, default_num) the plan is a Ulysses of u-GPU groups
   * around a ring of P / u ranks on each of the P GPUs, and each part is
   * bounded by its own scheduler's fit, whatever u, 1 (a plain ring) and
   * P (a plain Ulysses) included:
   * - causal tasks: at most HEADS_RING_TASKS a GPU and ring step, P^2 / u
   *   in all (USP-Zigzag's kernel and merge every step: 2.1 measured at
   *   P = 32 for u = 8, 2.0 for u = 1; USP's 1.5; double ring at u = P,
   *   one ring rank, 6.7 a GPU fwd+bwd with the backward's gradient sums);
   * - spans, either mask: the ring part's kernels, merges and hops are as
   *   many a GPU and step as Zigzag-Ring's (its s2 over P^2 / u: USP at
   *   u = 1 records 2.9 P^2 a pass, past USP's own 1.2 fitted at u = 8);
   * - transfers: the all-to-alls pair each GPU with the u - 1 others of
   *   its group, as many calls a pass as Ulysses makes (its x2 over P u:
   *   USP at u = P moves 4 P (P - 1) a pass, past 3.5 P^2), and the ring
   *   part Ring's hops (its x2 over P^2 / u).
   * Each is the larger of that and the scheduler's own fit, which holds at
   * its default degree.  Where the degree is not known (no topology to
   * take the default from), the fits stand.  Under a full mask every step
   * and the all-to-alls' copies stay lockstep whatever the degree (ring.c
   * ring_geom_alike, ulysses.c): Ring's few tasks a step (its t1f, the
   * backward's gradient sums among them) over the P / u ring steps, beside
   * the scheduler's own t1f a GPU (USP at u = 1 makes 3.5 a step).  The all-to-alls' patterns pair each GPU with the others of
   * its group (ulysses.c groups_pattern, one pattern reused by every
   * call), the ring's hop a GPU more: P x u pairs, not P^2 (u unknown: at
   * most the heads it divides). */
  for (const sched_opt *const *o = so->opts; o && *o; o++) {
    if (!(*o)->splits_heads) continue;
    double u = sched_opt_num(&pt->w, *o);
    if (!(u > 0) && (*o)->default_num && t) u = (*o)->default_num(&pt->w, t);
    if (u > 0) {
      const sched_size *ring = &sched_ring.size, *zz = &sched_zigzag.size;
      double ring_steps = p * p / u;
      if (causal) out->tasks = passes * docs * (HEADS_RING_TASKS * ring_steps + z->t1c * p) + SLACK;
      else out->tasks = passes * docs * (ring->t1f * p / u + z->t1f * p) + SLACK;
      double ring_s2 = causal ? zz->s2c : zz->s2f;
      out->spans = passes * docs * (ring_s2 * ring_steps + z->s1 * p) + SLACK;
      double parts = sched_ulysses.size.x2 * p * u + ring->x2 * ring_steps;
      out->xfers = passes * (z->x3 * p * p * p + parts + z->x1 * p) + SLACK;
    }
    if (out->stored)
      out->stored = passes * (z->xs2 * p * (u > 0 ? u : fmin(p, pt->w.heads)) + z->xs1 * p) + SLACK;
  }
  if (pt->w.scope != SCOPE_ATTENTION) {
    /* the layer and model scopes (layer.h): the scheduler's plan
     * expanded (a lockstep task one per GPU: as many as its spans),
     * appended per layer (twice with full recomputation), TP rank and
     * replica, and the layer's own ops and collectives on every GPU */
    orbits *o = t ? layer_orbits(&pt->w, t) : NULL;
    double ranks = layer_tp(&pt->w) * layer_dp(&pt->w) / (o ? o->mult : 1);
    orbits_free(o);
    double copies = ranks *
                    (pt->w.scope == SCOPE_MODEL ? layers_total(&pt->w) : 1) *
                    (pt->w.recompute == RECOMPUTE_FULL ? 2 : 1) *
                    layer_micro_batches(&pt->w);
    out->tasks = copies * (fmax(out->tasks, out->spans) + 64 * p) + SLACK;
    out->xfers = copies * (out->xfers + 16 * p * layer_tp(&pt->w)) + SLACK;
    out->stored = 0; /* appended expanded (plan_append): every transfer listed */
    out->launched = 0;
    out->spans = out->tasks;
  }
  /* a transfer starts and ends its flow on the two ports it crosses
   * (measured: at most 4 rate changes per transfer) */
  out->rates = 4 * out->xfers;
  return true;
}

static double trace_bytes(const budget_counts *k) {
  return k->spans * BUDGET_SPAN_BYTES + k->xfers * BUDGET_TRACE_XFER_BYTES +
         k->rates * BUDGET_RATE_BYTES;
}

static double plan_bytes(const budget_counts *k) {
  /* stored pairs, each with its launch unless the plan holds only some
   * launches at once */
  double pairs = !k->stored ? k->xfers * BUDGET_XFER_BYTES
                 : k->launched ? k->stored * BUDGET_STORED_PAIR_BYTES +
                                     fmin(k->launched, k->stored) * BUDGET_PAIR_BYTES
                               : k->stored * BUDGET_PAIR_BYTES;
  return k->tasks * BUDGET_TASK_BYTES + pairs;
}

double budget_point_bytes(const scenario_point *pt, const topology *t, bool trace) {
  budget_counts k;
  /* a scheduler with no coefficients (test_budget fails for it) is not
   * refused */
  if (!budget_counts_of(pt, trace ? NULL : t, &k)) return 0;
  return plan_bytes(&k) + (trace ? trace_bytes(&k) : 0);
}

static const char *budget_from_env(void) { return g_getenv("TASP_MEMORY_BUDGET"); }

/* A number read from `file`, or INFINITY ("max", none, unreadable). */
static double read_limit(const char *file) {
  g_autofree char *text = NULL;
  if (!g_file_get_contents(file, &text, NULL, NULL)) return INFINITY;
  char *end;
  double v = g_ascii_strtod(text, &end);
  return end != text && v > 0 ? v : INFINITY;
}

/* The memory limit of this process's cgroup: v2's memory.max, or v1's
 * memory.limit_in_bytes (about 2^63 where there is none). */
static double cgroup_limit(void) {
  g_autofree char *self = NULL;
  if (!g_file_get_contents("/proc/self/cgroup", &self, NULL, NULL)) return INFINITY;
  double limit = INFINITY;
  g_auto(GStrv) lines = g_strsplit(self, "\n", -1);
  for (char **l = lines; *l; l++) {
    g_autofree char *file = NULL;
    if (g_str_has_prefix(*l, "0::/"))
      file = g_build_filename("/sys/fs/cgroup", *l + 3, "memory.max", NULL);
    else if (strstr(*l, ":memory:/"))
      file = g_build_filename("/sys/fs/cgroup/memory", strstr(*l, ":memory:/") + 8,
                              "memory.limit_in_bytes", NULL);
    if (file) limit = fmin(limit, read_limit(file));
  }
  return limit;
}

char *budget_bytes_text(double bytes) {
  if (bytes >= 1073741824.0) return g_strdup_printf("%.1f GiB", bytes / 1073741824.0);
  return g_strdup_printf("%.1f MiB", bytes / 1048576.0);
}

bool budget_limit(double *bytes, GError **err) {
  const char *env = budget_from_env();
  if (env) {
    uint64_t v;
    if (!size_parse(env, &v)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "environment: TASP_MEMORY_BUDGET: expected a size in bytes such as 512M or "
                  "16G (K, M, G = 1024-multiples), got \"%s\"", env);
      return false;
    }
    *bytes = (double)v;
    return true;
  }
  double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  if (!(mem > 0)) mem = INFINITY;
  mem = fmin(mem, cgroup_limit());
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    mem = fmin(mem, (double)rl.rlim_cur);
  if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    mem = fmin(mem, (double)rl.rlim_cur);
  /* half: the topology, the results and the allocator's slack take the
   * rest, and a machine is rarely idle */
  *bytes = mem / 2;
  return true;
}

static int by_size_desc(gconstpointer a, gconstpointer b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

static double run_limit = INFINITY;

double budget_run_limit(void) { return run_limit; }

bool budget_check(GPtrArray *scens, bool trace, const char *sp_source, unsigned *jobs,
                  GError **err) {
  double limit;
  if (!budget_limit(&limit, err)) return false;
  g_autoptr(GArray) need = g_array_new(FALSE, FALSE, sizeof(double));
  for (guint k = 0; k < scens->len; k++) {
    const scenario *s = scens->pdata[k];
    for (guint i = 0; i < s->points->len; i++) {
      scenario_point *asked = &g_array_index(s->points, scenario_point, i);
      if (asked->na) continue; /* not run */
      /* the plan built: the step's, or (no trace kept) the largest of the
       * few it is extended from (sim.h) */
      scenario_point built = *asked;
      if (!s->whole_steps && !trace) built.w = sim_step_replayed(&built.w);
      const scenario_point *pt = &built;
      /* without a trace the two are one estimate (its orbits once) */
      double plan = budget_point_bytes(pt, s->topo, false);
      double all = trace ? budget_point_bytes(pt, s->topo, true) : plan;
      if (all > limit && asked->hidden) {
        /* a baseline not asked for: its row's speedups go unfilled */
        g_autofree char *need = budget_bytes_text(all), *have = budget_bytes_text(limit);
        asked->na = g_strdup_printf("needs about %s to simulate, over the memory budget of %s",
                                    need, have);
        continue;
      }
      if (all > limit) {
        budget_counts c = {0};
        budget_counts_of(pt, trace ? NULL : s->topo, &c);
        g_autofree char *seq = size_format(pt->w.seq_len);
        bool by_trace = plan <= limit;
        /* the transfers a plan of patterns stores, where the plan is over */
        g_autofree char *stored =
            c.stored && !by_trace ? g_strdup_printf(" along %.3g stored", c.stored) : g_strdup("");
        g_autofree char *need = budget_bytes_text(all), *have = budget_bytes_text(limit);
        g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                    "%s: %s at SP %u (seq_len %s, %s mask, %s) needs about %s to "
                    "simulate%s (%.3g tasks, %.3g transfers%s), over the memory budget of %s "
                    "(%s); expected %s",
                    by_trace ? "command line: option '--trace'" : sp_source, pt->sched->name,
                    pt->w.gpus, seq, pt->w.causal ? "causal" : "full", pass_name(pt->w.pass),
                    need, by_trace ? " with its trace" : "", c.tasks, c.xfers, stored, have,
                    budget_from_env() ? "TASP_MEMORY_BUDGET"
                                      : "half of the memory this process may use; "
                                        "TASP_MEMORY_BUDGET sets another",
                    by_trace ? "a trace of fewer GPUs (a smaller --sp), or no --trace"
                             : "a smaller SP degree");
        return false;
      }
      g_array_append_val(need, all);
    }
  }
  /* the threads run the largest points at once in the worst case */
  g_array_sort(need, by_size_desc);
  unsigned want = *jobs ? *jobs : (unsigned)g_get_num_processors(), fit = 0;
  double sum = 0;
  for (guint i = 0; i < need->len && fit < want; i++) {
    sum += g_array_index(need, double, i);
    if (sum > limit) break;
    fit++;
  }
  *jobs = MAX(fit, 1u);
  run_limit = limit; /* set before any thread starts, read by them */
  return true;
}
