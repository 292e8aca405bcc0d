/* sim: one point, and a whole sweep on a thread pool. */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "attn_orbits.h"
#include "budget.h"
#include "layer.h"
#include "layers.h"
#include "orbits.h"
#include "plan_quotient.h"

/* A switched topology's routes are one channel of the sender's (its
 * port, or its NIC's, by whether the peer shares its node) and one of the
 * receiver's: the channels of all pairs among GPUs [0, gpus) are those of
 * each GPU's routes to and from one peer of its node and one of another
 * node, where it has such peers among them.  O(gpus), not the O(gpus^2)
 * of every pair (three quarters of an 8,192-GPU all-gather point). */
static void switched_available(const topology *t, uint32_t gpus, uint8_t *avail) {
  uint32_t per = t->gpus_per_node, r[TOPO_MAX_HOPS];
  for (uint32_t s = 0; s < gpus; s++) {
    uint32_t first = s / per * per, last = MIN(first + per, gpus);
    uint32_t peers[2], np = 0;
    if (last - first >= 2) peers[np++] = s == first ? first + 1 : first; /* same node */
    if (gpus > per) peers[np++] = s < per ? per : 0;                     /* another */
    for (uint32_t k = 0; k < np; k++)
      for (int way = 0; way < 2; way++) {
        uint32_t n = way ? topo_route_fill(t, peers[k], s, r) : topo_route_fill(t, s, peers[k], r);
        for (uint32_t h = 0; h < n; h++) avail[r[h]] = 1;
      }
  }
}

uint8_t *sim_channels_available(const topology *t, uint32_t gpus) {
  uint8_t *avail = g_new0(uint8_t, t->channels->len);
  if (t->switched.on) {
    switched_available(t, gpus, avail);
    return avail;
  }
  for (uint32_t i = 0; i < gpus; i++)
    for (uint32_t j = 0; j < gpus; j++) {
      uint32_t n;
      const uint32_t *r = topo_route_chans(t, i, j, &n);
      for (uint32_t h = 0; h < n; h++) avail[r[h]] = 1;
    }
  return avail;
}

double sim_util(const topology *t, const exec_result *r, uint32_t c) {
  return r->step_s > 0 ? r->chan_bytes[c] / (topo_chan(t, c)->cap_Bps * r->step_s) : 0;
}

/* One layer of kind k of the point's model, replayed; its scheduler's
 * note appended to `notes`, its model FLOPs (layer.h) added to *flops. */
static exec_result *run_kind(const topology *t, const scenario_point *pt, const exec_opts *o,
                             attn_kind k, GString *notes, double *flops) {
  workload one = layers_one(&pt->w, k);
  plan *p = pt->sched->build(&one, t, false);
  if (p->note->len) g_string_append_printf(notes, "%s%s", notes->len ? "; " : "", p->note->str);
  *flops += layer_model_flops(p);
  /* GPUs that share one timeline replayed once (attn_orbits.h); a trace
   * shows every GPU, so it replays them all, as does a plan the quotient
   * does not take */
  bool all = o->keep_trace || o->per_flow || o->orbits;
  orbits *q = all ? NULL : attn_orbits(pt->sched, &one, t);
  plan *reps = q ? plan_quotient_of(p, q) : NULL;
  exec_opts run = *o;
  if (reps) {
    plan_free(p);
    p = reps;
    run.orbits = q;
  }
  exec_result *r = exec_run(p, t, &run);
  plan_free(p);
  orbits_free(q);
  return r;
}

/* --scope layer: one decoder layer (layer.h) of the model's softmax kind
 * (a linear-only model: linear); --scope model: the training step.  The
 * attention part's time: the scope's less the same scope's without
 * attention.  Model FLOPs leave recomputation out (layer_model_flops). */
static exec_result *run_layer(const topology *t, const scenario_point *pt, const exec_opts *o,
                              GString *notes, sim_result *res, bool attention_part) {
  workload one = pt->w.scope == SCOPE_MODEL
                     ? pt->w
                     : layers_one(&pt->w, layers_count(&pt->w, ATTN_SOFTMAX) ? ATTN_SOFTMAX
                                                                              : ATTN_LINEAR);
  /* identical replicas and TP ranks, and the GPUs the scheduler's turn
   * carries onto one another in every SP group, simulated once
   * (orbits.h, layer_orbits_sched); a trace shows every GPU, so it
   * replays them all.  A caller that holds the point's orbits already
   * passes them in o->orbits (they depend on TP, SP, DP, the placement,
   * the topology and the scheduler with its options only, so the few
   * layers a step is extended from share them with the step: the search
   * computes them once per point); none given, they are computed here. */
  bool all = o->keep_trace || o->per_flow;
  orbits *own = all || o->orbits ? NULL : layer_orbits_sched(pt->sched, &one, t);
  const orbits *q = all ? NULL : o->orbits ? o->orbits : own;
  orbits *shifts = NULL;
  plan *p = layer_build_orbits(pt->sched, &one, t, true, false, q);
  if (!p) {
    /* the scheduler's plan cut to the representatives of its turn is no
     * quotient (layer.h): the replicas' and TP ranks' shifts alone, whole
     * SP groups (what the plan cap counted: orbits.h turn) */
    q = shifts = layer_orbits(&one, t);
    p = layer_build_orbits(pt->sched, &one, t, true, false, q);
  }
  exec_opts run = *o;
  run.orbits = q;
  if (p->note->len) g_string_append(notes, p->note->str);
  res->model_flops = layer_model_flops(p) * (q ? q->mult : 1);
  exec_result *r = exec_run(p, t, &run);
  plan_free(p);
  if (attention_part) {
    exec_opts quiet = run;
    quiet.progress = NULL;
    quiet.keep_trace = false;
    plan *rest = layer_build_orbits(pt->sched, &one, t, false, false, q);
    exec_result *r0 = exec_run(rest, t, &quiet);
    res->attention_s = r->step_s - r0->step_s;
    exec_result_free(r0);
    plan_free(rest);
  } else {
    res->attention_s = NAN;
  }
  orbits_free(shifts);
  orbits_free(own);
  return r;
}

/* The point's model: one layer is replayed as it is; several are summed,
 * each kind of layer replayed once (layers.h says why; the one thing a
 * chained replay would add is a layer's host issue hiding behind the
 * previous layer's kernels). */
static exec_result *run_layers(const topology *t, const scenario_point *pt, const exec_opts *o,
                               GString *notes, double *flops) {
  if (layers_total(&pt->w) == 1)
    return run_kind(t, pt, o, layers_count(&pt->w, ATTN_LINEAR) ? ATTN_LINEAR : ATTN_SOFTMAX,
                    notes, flops);
  exec_result *acc = exec_result_new(pt->w.gpus, t->channels->len, o->keep_trace);
  double shown = 0;
  for (int k = 0; k < ATTN_KINDS; k++) {
    uint32_t count = layers_count(&pt->w, (attn_kind)k);
    if (!count) continue;
    double f = 0;
    exec_result *r = run_kind(t, pt, o, (attn_kind)k, notes, &f);
    *flops += f * count;
    exec_result_add_layers(acc, r, count, shown);
    shown += r->step_s;
    exec_result_free(r);
  }
  return acc;
}

/* The utilisation figures over the channels among the job's GPUs. */
static void set_util(const topology *t, sim_result *res) {
  double sum = 0;
  unsigned avail_n = 0;
  res->max_util = 0;
  g_autofree uint8_t *avail = sim_channels_available(t, res->job_gpus);
  for (uint32_t c = 0; c < res->r->n_chan; c++) {
    if (!avail[c]) continue;
    double u = sim_util(t, res->r, c);
    sum += u;
    avail_n++;
    if (u > res->max_util) res->max_util = u;
  }
  res->mean_util = avail_n ? sum / avail_n : 0;
}

static sim_result *run_point(const topology *t, const scenario_point *pt, const exec_opts *o,
                             bool attention_part) {
  gint64 t0 = g_get_monotonic_time();
  sim_result *res = g_new0(sim_result, 1);
  res->pt = *pt;
  res->topo = t;
  GString *notes = g_string_new(NULL);
  res->job_gpus = pt->w.gpus;
  if (pt->w.scope == SCOPE_ATTENTION) {
    res->r = run_layers(t, pt, o, notes, &res->model_flops);
    res->attention_s = res->r->step_s;
  } else {
    res->job_gpus = layer_job_gpus(&pt->w);
    res->r = run_layer(t, pt, o, notes, res, attention_part);
  }
  res->note = notes->len ? g_string_free(notes, FALSE) : (g_string_free(notes, TRUE), NULL);
  set_util(t, res);
  res->wall_s = (double)(g_get_monotonic_time() - t0) * 1e-6;
  return res;
}

bool sim_step_repeats(const workload *w, attn_kind *kind) {
  int kinds = 0;
  for (int k = 0; k < ATTN_KINDS; k++)
    if (layers_count(w, (attn_kind)k)) kinds++, *kind = (attn_kind)k;
  return w->scope == SCOPE_MODEL && kinds == 1 && layers_count(w, *kind) > SIM_REPEAT_FROM + 1;
}

bool sim_step_mbs_repeat(const workload *w) {
  return w->scope == SCOPE_MODEL && layer_micro_batches(w) > SIM_MB_REPEAT_FROM + 1;
}

/* w with n micro-batches (a global batch no longer gives them). */
static workload with_mbs(const workload *w, uint32_t n) {
  workload x = *w;
  x.global_batch_tokens = 0;
  x.micro_batches = n;
  return x;
}

workload sim_step_replayed(const workload *w) {
  workload x = *w;
  attn_kind kind;
  if (sim_step_repeats(w, &kind))
    x.layers[kind] = w->zero >= 2 ? MIN(layers_count(w, kind), SIM_ZERO_PEAK_FAR) : SIM_REPEAT_FROM + 1;
  if (sim_step_mbs_repeat(w)) x = with_mbs(&x, SIM_MB_REPEAT_FROM + 1);
  return x;
}

/* Appends `line` to r's note ("; " between), unless the note has it. */
static void note_add(sim_result *r, const char *line) {
  if (r->note && strstr(r->note, line)) return;
  char *note = r->note ? g_strdup_printf("%s; %s", r->note, line) : g_strdup(line);
  g_free(r->note);
  r->note = note;
}

/* b, the step with one more repeating part than a, extended by `more`
 * such parts; a freed.  The result is pt's.  far (or NULL): the same
 * step with more parts than b, whose difference from b extended by
 * far_more such differences gives the peaks instead (the 6 and 7 parts'
 * kept in peak_near_bytes); freed. */
static sim_result *extend(const topology *t, const scenario_point *pt, sim_result *a,
                          sim_result *b, double more, sim_result *far, double far_more) {
  /* ZeRO 2-3: the gradient shards waiting for their reduce-scatters pile
   * up at the backward's end by more a layer than the loss's peak grows,
   * so the step's peak moves there as layers are added: each phase is
   * extended apart.  ZeRO 0-1 keep every gradient whole from the start:
   * the body's peak stays the step's, and the backward's end, whose peak
   * at 6 and 7 layers can differ by a transient (h100x8x2, double ring SP
   * 4 x TP 2, ZeRO 1: 1.10 GiB from 6 to 7 layers, 1.00-1.05 after), is
   * not extended apart (scripts/sanity_sweep.py seed 301) */
  exec_result *x = exec_result_extend(a->r, b->r, more, pt->w.zero >= 2);
  if (far) {
    b->peak_near_bytes = x->peak_bytes;
    exec_result_extend_peaks(x, b->r, far->r, far_more, true);
    x->events += far->r->events;
    x->flows += far->r->flows;
    x->bundles += far->r->bundles;
    x->solves += far->r->solves;
    x->tasks += far->r->tasks;
    x->mem_errors += far->r->mem_errors;
    b->wall_s += far->wall_s;
    sim_result_free(far);
  }
  exec_result_free(b->r);
  b->r = x;
  b->pt = *pt;
  b->model_flops += more * (b->model_flops - a->model_flops);
  b->attention_s += more * (b->attention_s - a->attention_s); /* NAN stays NAN */
  b->wall_s += a->wall_s;
  b->extended = true;
  if (a->peak_near_bytes > 0 && b->peak_near_bytes > 0)
    b->peak_near_bytes += more * (b->peak_near_bytes - a->peak_near_bytes);
  sim_result_free(a);
  set_util(t, b);
  return b;
}

/* The step along its layers: SIM_REPEAT_FROM and one more, extended.
 * At ZeRO 2-3 each layer's gradients wait for their reduce-scatter on
 * the gradient stream; where it falls behind the backward they pile up
 * at the backward's end by whole buffers, one every few layers, which
 * one layer's difference need not show (l20x8-pcie, all-gather CP SP 8,
 * ZeRO 2, 8K: +0.81, +1.52, +0.81, +1.52, +0.81, +0.81 GiB a layer from
 * 6 layers on; sim.h): the peak is extended over SIM_ZERO_PEAK_FAR - 7
 * layers instead (a third replay), and what 6 and 7 layers alone give is
 * kept in peak_near_bytes for the fit decision (run_extended). */
static sim_result *run_layers_extended(const topology *t, const scenario_point *pt,
                                       const exec_opts *o, bool attention_part) {
  attn_kind kind;
  if (!sim_step_repeats(&pt->w, &kind)) return run_point(t, pt, o, attention_part);
  uint32_t layers = layers_count(&pt->w, kind);
  scenario_point few = *pt;
  few.w.layers[kind] = SIM_REPEAT_FROM;
  sim_result *a = run_point(t, &few, o, attention_part);
  few.w.layers[kind] = SIM_REPEAT_FROM + 1;
  sim_result *b = run_point(t, &few, o, attention_part);
  if (pt->w.zero < 2) return extend(t, pt, a, b, layers - (SIM_REPEAT_FROM + 1.0), NULL, 0);
  few.w.layers[kind] = MIN(layers, SIM_ZERO_PEAK_FAR);
  sim_result *far = run_point(t, &few, o, attention_part);
  double span = few.w.layers[kind] - (SIM_REPEAT_FROM + 1.0);
  double far_more = (layers - (double)few.w.layers[kind]) / span;
  sim_result *x = extend(t, pt, a, b, layers - (SIM_REPEAT_FROM + 1.0), far, far_more);
  if (far_more > 0) {
    g_autofree char *line = g_strdup_printf(
        "peak memory extended from %d and %u layers: at ZeRO 2-3 gradients waiting for their "
        "reduce-scatters pile up by whole buffers, one every few layers, so it may be high or "
        "low by a few (--whole-steps replays every layer)",
        SIM_REPEAT_FROM + 1, few.w.layers[kind]);
    note_add(x, line);
  } else {
    x->peak_near_bytes = 0; /* the peaks are the whole step's replay's */
  }
  return x;
}

/* Then along its micro-batches: SIM_MB_REPEAT_FROM and one more, each
 * extended along its layers, extended. */
static sim_result *run_mbs_extended(const topology *t, const scenario_point *pt,
                                    const exec_opts *o, bool attention_part) {
  if (!sim_step_mbs_repeat(&pt->w)) return run_layers_extended(t, pt, o, attention_part);
  scenario_point few = *pt;
  few.w = with_mbs(&pt->w, SIM_MB_REPEAT_FROM);
  sim_result *a = run_layers_extended(t, &few, o, attention_part);
  few.w = with_mbs(&pt->w, SIM_MB_REPEAT_FROM + 1);
  sim_result *b = run_layers_extended(t, &few, o, attention_part);
  sim_result *x = extend(t, pt, a, b, layer_micro_batches(&pt->w) - (SIM_MB_REPEAT_FROM + 1.0),
                         NULL, 0);
  /* ZeRO 2-3: the gradients a micro-batch leaves waiting need not repeat
   * from the 2nd micro-batch to the 3rd */
  static const char mbs_note[] = "peak memory extended from 2 and 3 micro-batches: at ZeRO 2-3 "
                                 "gradients waiting for their reduce-scatters pile up by steps "
                                 "a few micro-batches need not show, so it may be high or low "
                                 "(--whole-steps replays every layer)";
  if (pt->w.zero >= 2) note_add(x, mbs_note);
  return x;
}

/* What an extended step must hold at least: its busiest GPU's
 * communication in flight, or a channel's busy time, each extended apart
 * as the step is. */
static double extended_busiest_s(const exec_result *r) {
  double busiest = r->comm_s;
  for (uint32_t c = 0; r->chan_busy_s && c < r->n_chan; c++) busiest = MAX(busiest, r->chan_busy_s[c]);
  return busiest;
}

/* Extended step r, which `line` says cannot be trusted, replayed whole
 * where its plan is within the plan cap and the run's memory budget (the
 * extension's plans were checked before the run, not this one), its note
 * saying so; else r kept, its note saying `else_words`. */
static sim_result *replayed_whole(const topology *t, const scenario_point *pt,
                                  const exec_opts *o, bool attention_part, sim_result *r,
                                  const char *line, const char *else_words) {
  g_autoptr(GError) e = NULL;
  double mult = o->orbits ? o->orbits->mult / o->orbits->turn : 1;
  if (!sched_check_tasks(&pt->w, layer_tasks_estimate_mult(&pt->w, mult), pt->sched->name, &e) ||
      budget_point_bytes(pt, t, false) > budget_run_limit()) {
    g_autofree char *why = g_strconcat(line, else_words, " (--whole-steps replays every layer)",
                                       NULL);
    note_add(r, why);
    return r;
  }
  sim_result_free(r);
  sim_result *w = run_point(t, pt, o, attention_part);
  g_autofree char *why = g_strconcat(line, "every layer replayed", NULL);
  note_add(w, why);
  return w;
}

/* A step extended from replays whose layers had not settled can come out
 * shorter than what it must hold (its busiest GPU's communication or a
 * channel's busy time): such a step is replayed whole, where its plan is
 * within the plan cap and the run's memory budget (the extension's plans
 * were checked before the run), else said.  (The case that asked for it,
 * torus4x4, usp-zigzag SP 8, ZeRO 3, AMP, Llama-2-7B 16K, 979 ms extended
 * against 1,105 ms of communication, had its 6-layer replay end at a
 * stale network wake 10.9 ms after its last task; exec.c ends a step at
 * its last task, and it extends to the whole step's 1,251.67 ms.) */
static sim_result *settled(const topology *t, const scenario_point *pt, const exec_opts *o,
                           bool attention_part, sim_result *r) {
  double busiest = extended_busiest_s(r->r);
  if (!r->extended || busiest <= r->r->step_s * (1 + 1e-9)) return r;
  g_autofree char *line = g_strdup_printf(
      "step extended from a few layers shorter (%.3f ms) than its own communication (%.3f ms): ",
      r->r->step_s * 1e3, busiest * 1e3);
  return replayed_whole(t, pt, o, attention_part, r, line,
                        "the replayed layers' time had not settled");
}

/* Whether a step extended along its layers at ZeRO 2-3 fits is decided
 * only where its two extensions of the peak (from 6 and 7 layers, and
 * from 7 and SIM_ZERO_PEAK_FAR) lie on one side of the usable memory:
 * their disagreement is the error the replays themselves show of the
 * gradient queue's pile-up (l20x8-pcie, all-gather CP SP 8, 8K, ZeRO 2:
 * 34.34 and 43.23 GiB about 41.38 usable, 42.87 whole).  Otherwise the
 * step is replayed whole, within the plan cap and the run's memory
 * budget (as settled() does), else its note says fits is undecided. */
static sim_result *fit_decided(const topology *t, const scenario_point *pt, const exec_opts *o,
                               bool attention_part, sim_result *r) {
  double usable = topo_usable_gib(t) * 1073741824.0;
  if (!r->extended || !(r->peak_near_bytes > 0) || usable <= 0) return r;
  double lo = MIN(r->peak_near_bytes, r->r->peak_bytes);
  double hi = MAX(r->peak_near_bytes, r->r->peak_bytes);
  if (!(lo <= usable && usable < hi)) return r;
  g_autofree char *line = g_strdup_printf(
      "peak memory extended from 6 and 7 layers (%.2f GiB) and from 7 and %d (%.2f GiB) on "
      "either side of the %.2f GiB usable: ",
      r->peak_near_bytes / 1073741824.0, SIM_ZERO_PEAK_FAR, r->r->peak_bytes / 1073741824.0,
      usable / 1073741824.0);
  return replayed_whole(t, pt, o, attention_part, r, line, "whether it fits is undecided");
}

/* The point's orbits (run_layer) computed once for its up to four
 * replays, where the caller has not given them. */
static sim_result *run_extended(const topology *t, const scenario_point *pt, const exec_opts *o,
                                bool attention_part) {
  if (o->keep_trace) return run_point(t, pt, o, attention_part);
  if (pt->w.scope != SCOPE_MODEL || o->per_flow || o->orbits)
    return fit_decided(t, pt, o, attention_part,
                       settled(t, pt, o, attention_part, run_mbs_extended(t, pt, o, attention_part)));
  exec_opts with = *o;
  orbits *q = layer_orbits_sched(pt->sched, &pt->w, t);
  with.orbits = q;
  const exec_opts *use = q ? &with : o;
  sim_result *r = fit_decided(
      t, pt, use, attention_part,
      settled(t, pt, use, attention_part, run_mbs_extended(t, pt, use, attention_part)));
  orbits_free(q);
  return r;
}

sim_result *sim_run_step_repeating(const topology *t, const scenario_point *pt,
                                   const exec_opts *o) {
  return run_extended(t, pt, o, false);
}

/* The attention part is the step less the step without attention, and
 * removing work from a replay can lengthen it: the rest's collectives meet
 * on the links in another order (a 4x4 torus, a linear model whose
 * attention is about 1% of the step: -0.4 to -1.3 ms of 138 ms;
 * scripts/sanity_sweep.py).  Below zero the part is within that
 * reordering's noise: shown as 0, and the note says by how much the step
 * without attention ran longer. */
static sim_result *attention_floor(sim_result *r) {
  if (!(r->attention_s < 0)) return r;
  g_autofree char *line = g_strdup_printf("attention part below zero (the step without "
                                          "attention ran %.3f ms longer): shown as 0",
                                          -r->attention_s * 1e3);
  note_add(r, line);
  r->attention_s = 0;
  return r;
}

sim_result *sim_run_point_repeating(const topology *t, const scenario_point *pt,
                                    const exec_opts *o) {
  return attention_floor(run_extended(t, pt, o, true));
}

sim_result *sim_run_point(const topology *t, const scenario_point *pt, const exec_opts *o) {
  return attention_floor(run_point(t, pt, o, true));
}

sim_result *sim_run_step(const topology *t, const scenario_point *pt, const exec_opts *o) {
  return run_point(t, pt, o, false);
}

void sim_result_free(sim_result *r) {
  if (!r) return;
  exec_result_free(r->r);
  g_free(r->note);
  g_free(r);
}

typedef struct {
  const scenario *s;
  const sim_opts *o;
  sim_result **out;
  exec_progress *slots;   /* per point: its replay's progress */
  guint *state;           /* per point: 0 waiting, 1 running, 2 done (atomic) */
  guint total;
  gint64 t0;
  GMutex lock;
  GCond cond;
  bool stop;
  const gboolean *mine;   /* per point: of this shard */
  GMutex emit;            /* held while handing points to on_point */
  GCond emitted;          /* signalled when points were handed on */
  guint next;             /* the first point not handed yet */
  guint handed;           /* points of the shard handed on */
  guint *rank;            /* per point: its place among the shard's */
  guint window;           /* with on_point: a point starts only when fewer
                             than this many points before it are unhanded */
} pool_ctx;

/* Hands on the finished points that come next in point order. */
static void emit_ready(pool_ctx *c) {
  g_mutex_lock(&c->emit);
  guint n = c->s->points->len;
  for (; c->next < n; c->next++) {
    if (!c->mine[c->next]) continue;
    if ((guint)g_atomic_int_get(&c->state[c->next]) != 2) break;
    c->o->on_point(c->out[c->next], c->o->user);
    c->handed++;
  }
  g_cond_broadcast(&c->emitted);
  g_mutex_unlock(&c->emit);
}

static void run_one(gpointer data, gpointer user) {
  pool_ctx *c = user;
  guint i = GPOINTER_TO_UINT(data) - 1;
  const scenario_point *pt = &g_array_index(c->s->points, scenario_point, i);
  exec_opts o = c->o->exec;
  o.progress = &c->slots[i];
  /* points finished ahead of one still running are held (with their
   * traces) until it is handed on: at most `window` points are running or
   * held at once, as the memory budget assumes.  The pool takes points in
   * order, so the first unhanded one is always running: no deadlock. */
  if (c->o->on_point) {
    g_mutex_lock(&c->emit);
    while (c->rank[i] >= c->handed + c->window) g_cond_wait(&c->emitted, &c->emit);
    g_mutex_unlock(&c->emit);
  }
  g_atomic_int_set(&c->state[i], 1);
  if (pt->na) {
    c->out[i] = g_new0(sim_result, 1);
    c->out[i]->pt = *pt;
    c->out[i]->topo = c->s->topo;
  } else {
    c->out[i] = (c->s->whole_steps ? sim_run_point : sim_run_point_repeating)(c->s->topo, pt, &o);
  }
  g_atomic_int_set(&c->state[i], 2);
  if (c->o->on_point) emit_ready(c);
}

void sim_progress_format(GString *out, guint done, guint total, double frac, double events,
                         double elapsed_s) {
  g_string_printf(out, "tasp-sim: %u/%u points, %.0f%%, %.3g events", done, total, 100 * frac,
                  events);
  if (frac <= 0 || frac >= 1) return;
  double eta = elapsed_s * (1 - frac) / frac;
  if (eta < 60) g_string_append_printf(out, ", ETA %.0f s", eta);
  else g_string_append_printf(out, ", ETA %.0f min %02.0f s", floor(eta / 60), fmod(eta, 60));
}

/* A line on stderr, redrawn twice a second from one second on: points
 * done, the fraction done (finished points plus the finished share of
 * the tasks of points running), events so far and the time left at the
 * rate so far.  A long single point shows its own progress this way. */
static gpointer ticker(gpointer data) {
  pool_ctx *c = data;
  g_autoptr(GString) line = g_string_new(NULL);
  g_mutex_lock(&c->lock);
  while (!c->stop) {
    g_cond_wait_until(&c->cond, &c->lock, g_get_monotonic_time() + G_TIME_SPAN_SECOND / 2);
    double elapsed = (double)(g_get_monotonic_time() - c->t0) * 1e-6;
    if (c->stop || elapsed < 1) continue;
    guint done = 0;
    double part = 0, events = 0;
    for (guint i = 0; i < c->s->points->len; i++) {
      guint st = (guint)g_atomic_int_get(&c->state[i]);
      if (st == 0) continue;
      events += (double)g_atomic_pointer_get(&c->slots[i].events);
      gint d = g_atomic_int_get(&c->slots[i].done), t = g_atomic_int_get(&c->slots[i].total);
      if (st == 2) done++;
      else if (t > 0) part += (double)d / t;
    }
    sim_progress_format(line, done, c->total, c->total ? (done + part) / c->total : 0, events,
                        elapsed);
    fprintf(stderr, "\r\033[K%s", line->str);
  }
  g_mutex_unlock(&c->lock);
  return NULL;
}

static bool same_point(const workload *a, const workload *b) {
  return a->seq_len == b->seq_len && a->gpus == b->gpus && a->causal == b->causal &&
         a->pass == b->pass;
}

double sim_peak_gib(const sim_result *r) {
  return r->r ? r->r->peak_bytes / 1073741824.0 : NAN;
}

double sim_peak_reserved_gib(const sim_result *r) {
  return r->r ? r->r->peak_reserved_bytes / 1073741824.0 : NAN;
}

bool sim_fits(const sim_result *r) {
  double usable = topo_usable_gib(r->topo);
  /* the reserved peak passes the usable memory only where the caching
   * allocator, having waited for and released what it could, still needs
   * a segment the device does not have: PyTorch raises out-of-memory
   * (exec_alloc.h); NAN (an extended step): not known */
  return !r->r || usable <= 0 ||
         (sim_peak_gib(r) <= usable && !(sim_peak_reserved_gib(r) > usable));
}

char *sim_unfit_text(const sim_result *r) {
  double usable = topo_usable_gib(r->topo);
  if (sim_peak_gib(r) > usable)
    return g_strdup_printf("%.1f GiB > %.1f GiB usable", sim_peak_gib(r), usable);
  return g_strdup_printf("reserved %.1f GiB > %.1f GiB usable", sim_peak_reserved_gib(r), usable);
}

double sim_tokens_per_s_per_gpu(const sim_result *r) {
  if (!r->r || r->r->step_s <= 0) return NAN;
  const workload *w = &r->pt.w;
  /* a TP group shares its tokens: the job's tokens are batch x seq per
   * DP replica, over TP x SP x DP GPUs */
  double mbs = layer_micro_batches(w);
  return (double)w->batch * (double)w->seq_len * layer_dp(w) * mbs / (r->r->step_s * r->job_gpus);
}

double sim_mfu(const sim_result *r) {
  double peak = r->topo->compute.peak_flops;
  if (!r->r || r->r->step_s <= 0 || peak <= 0) return NAN;
  return r->model_flops / (peak * r->r->step_s * r->job_gpus);
}

double sim_speedup(double base_s, double step_s) {
  if (step_s > 0) return base_s / step_s;
  return base_s > 0 ? INFINITY : 1;
}

GPtrArray *sim_run_all(const scenario *s, const sim_opts *o) {
  guint n = s->points->len;
  pool_ctx c = {.s = s, .o = o, .out = g_new0(sim_result *, n),
                .slots = g_new0(exec_progress, n), .state = g_new0(guint, n),
                .t0 = g_get_monotonic_time()};
  g_mutex_init(&c.lock);
  g_mutex_init(&c.emit);
  g_cond_init(&c.emitted);
  g_cond_init(&c.cond);
  /* a shard takes whole groups (one seq x SP x mask x pass), so a shard's
   * rows carry their ring speedups and shards concatenate into the sweep */
  g_autofree guint *group = g_new(guint, n);
  guint g = 0;
  for (guint i = 0; i < n; i++) {
    const scenario_point *p = &g_array_index(s->points, scenario_point, i);
    if (i > 0 && !same_point(&p->w, &g_array_index(s->points, scenario_point, i - 1).w)) g++;
    group[i] = g;
  }
  g_autofree gboolean *mine = g_new0(gboolean, n);
  for (guint i = 0; i < n; i++) {
    mine[i] = o->shards == 0 || group[i] % o->shards == o->shard;
    c.total += mine[i];
  }
  c.mine = mine;
  g_autofree guint *rank = g_new(guint, n);
  for (guint i = 0, r = 0; i < n; i++) rank[i] = mine[i] ? r++ : 0;
  c.rank = rank;
  GThread *tick = o->progress ? g_thread_new("progress", ticker, &c) : NULL;
  unsigned jobs = o->jobs ? o->jobs : (unsigned)g_get_num_processors();
  if (jobs > c.total) jobs = c.total;  /* an exclusive pool starts all its threads */
  c.window = MAX(jobs, 1u);
  if (jobs > 1 && c.total > 1) {
    GThreadPool *pool = g_thread_pool_new(run_one, &c, (gint)jobs, TRUE, NULL);
    for (guint i = 0; i < n; i++)
      if (mine[i]) g_thread_pool_push(pool, GUINT_TO_POINTER(i + 1), NULL);
    g_thread_pool_free(pool, FALSE, TRUE);
  } else {
    for (guint i = 0; i < n; i++)
      if (mine[i]) run_one(GUINT_TO_POINTER(i + 1), &c);
  }
  if (tick) {
    g_mutex_lock(&c.lock);
    c.stop = true;
    g_cond_signal(&c.cond);
    g_mutex_unlock(&c.lock);
    g_thread_join(tick);
    fprintf(stderr, "\r\033[K");
  }
  g_mutex_clear(&c.lock);
  g_mutex_clear(&c.emit);
  g_cond_clear(&c.emitted);
  g_cond_clear(&c.cond);
  g_free(c.slots);
  g_free(c.state);

  GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)sim_result_free);
  /* groups are contiguous: find each group's ring and baseline (the
   * fastest shown row that fits in memory, first in order on a tie, or
   * --baseline's; where none fits, the fastest), then give its rows their
   * speedups (linear in the number of points) */
  for (guint start = 0, end; start < n; start = end) {
    sim_result *ring = NULL, *base = NULL, *fastest = NULL;
    for (end = start; end < n && group[end] == group[start]; end++) {
      sim_result *x = c.out[end];
      if (!x) continue;
      if (x->pt.sched == &sched_ring) ring = x;
      bool shown = x->r && !x->pt.hidden;
      if (shown && (!fastest || x->r->step_s < fastest->r->step_s)) fastest = x;
      if (s->baseline ? x->pt.sched == s->baseline
                      : shown && sim_fits(x) && (!base || x->r->step_s < base->r->step_s))
        base = x;
    }
    if (!s->baseline && !base) base = fastest;
    for (guint i = start; i < end; i++) {
      sim_result *x = c.out[i];
      if (!x) continue;
      x->ring_na = ring ? ring->pt.na : NULL;
      x->base_na = base ? base->pt.na : NULL;
      x->baseline = base && x->r ? base->pt.sched->name : "";
      if (!x->r) {
        x->speedup_vs_ring = x->speedup_vs_best = NAN;
        continue;
      }
      double st = x->r->step_s;
      x->speedup_vs_ring = !ring || !ring->r ? NAN : sim_speedup(ring->r->step_s, st);
      x->speedup_vs_best = !base || !base->r ? NAN : sim_speedup(base->r->step_s, st);
    }
  }
  for (guint i = 0; i < n; i++) {
    if (!c.out[i]) continue;
    if (c.out[i]->pt.hidden) sim_result_free(c.out[i]);
    else g_ptr_array_add(out, c.out[i]);
  }
  g_free(c.out);
  return out;
}
