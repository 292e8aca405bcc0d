/* sim: runs sweep points (build the plan, replay it) and derives the
 * figures every report shows: speedup over Ring at the same point, link
 * utilisation.  Points are independent, so they run on a pool of threads
 * and the results come back in point order whatever the thread count. */
#ifndef TASP_SIM_H
#define TASP_SIM_H

#include <glib.h>

#include "exec.h"
#include "scenario.h"

typedef struct {
  scenario_point pt;      /* points into the scenario, which outlives the result */
  const topology *topo;   /* the point's topology (a --set sweep has several) */
  exec_result *r;         /* NULL: an n/a point (pt.na says why), not run */
  char *note;             /* scheduler's remark, or NULL */
  /* NAN where there is none: an n/a row, or a baseline that cannot run
   * the point (ring_na, base_na say why) */
  double speedup_vs_ring;
  double speedup_vs_best;  /* the group's baseline step / this step */
  const char *baseline;    /* the baseline's scheduler name: the fastest of the
                              group that ran, or the one --baseline names */
  const char *ring_na, *base_na; /* why ring, --baseline's scheduler cannot run it */
  /* Utilisation of a channel: bytes carried / (capacity x step time), a
   * fraction.  Over the channels on routes among the point's GPUs (the
   * rows of the links report), idle ones included. */
  double max_util, mean_util;
  double wall_s;          /* host time to build and replay this point */
  /* The scope's figures (layer.h): GPUs of the job (TP x SP), the time of
   * its attention part (at scope attention the step; at scope layer the
   * layer's step less the same layer's without attention), its model
   * FLOPs (layer_model_flops, over every GPU and layer). */
  uint32_t job_gpus;
  double attention_s;
  double model_flops;
  /* the step was extended from a few replayed layers or micro-batches
   * (sim_run_point_repeating): peak reserved memory is NAN */
  bool extended;
  /* At ZeRO 2-3, a step extended along its layers: its largest peak as
   * the 6 and 7 layers' difference extends it (r's comes from 7 and
   * SIM_ZERO_PEAK_FAR layers); the two on either side of the usable
   * memory leave fits undecided (sim_run_point_repeating).  0: none. */
  double peak_near_bytes;
} sim_result;

typedef struct {
  exec_opts exec;
  unsigned jobs;          /* threads; 0 = one per CPU */
  unsigned shard, shards; /* run points with index % shards == shard; shards 0 = all */
  bool progress;          /* progress line on stderr (sim_progress_format) */
  /* Called with each point of this shard (hidden baselines too) as soon
   * as it and every point before it have finished: in point order, one
   * call at a time, before the speedups are set.  It may free the
   * point's trace arrays (trace.h streams them so).  With it, a point
   * starts only when fewer than `jobs` points before it are yet to be
   * handed on, so at most `jobs` points are running or held at once.
   * NULL: none. */
  void (*on_point)(sim_result *r, void *user);
  void *user;
} sim_opts;

/* Memory: the largest total of live bytes on one GPU during the point's
 * run (exec_result.peak_bytes), in GiB (NAN for an n/a point); whether it
 * fits the topology's usable memory per GPU (topo_usable_gib; true where
 * the topology gives none; and its reserved peak too, which passes it only
 * where PyTorch would run out of memory).  A point that does not fit is never the
 * group's baseline (the fastest that fits is; the fastest of all only
 * where none fits). */
double sim_peak_gib(const sim_result *r);
/* The same for reserved memory (exec_result.peak_reserved_bytes: the
 * caching allocator's segments, torch.cuda.max_memory_reserved). */
double sim_peak_reserved_gib(const sim_result *r);
bool sim_fits(const sim_result *r);
/* Why a point that ran does not fit: "96.2 GiB > 78.0 GiB usable", or
 * where its allocated bytes fit but the allocator's segments do not,
 * "reserved 41.5 GiB > 41.4 GiB usable"; g_free it. */
char *sim_unfit_text(const sim_result *r);
/* Tokens per second per GPU of the job (batch x seq / (step x job GPUs)),
 * and model FLOPs utilisation: model FLOPs / (peak FLOP/s x step x job
 * GPUs); NAN for an n/a point (mfu: or where the topology gives no peak). */
double sim_tokens_per_s_per_gpu(const sim_result *r);
double sim_mfu(const sim_result *r);

sim_result *sim_run_point(const topology *t, const scenario_point *pt, const exec_opts *o);
/* The same at scope layer or model without the attention part
 * (attention_s NAN): one replay instead of two, what a search needs. */
sim_result *sim_run_step(const topology *t, const scenario_point *pt, const exec_opts *o);
/* A whole step extended from a few replays (scope model).  A step of
 * many identical layers or micro-batches is replayed with fewer and the
 * rest extended from the difference (exec_result_extend): a layer in the
 * middle of the step repeats the one before it, and a micro-batch in the
 * middle repeats the one before it (the same kernels, transfers,
 * prefetches and buffers, one period later).
 * - Layers: a model of one kind of layer, more than SIM_REPEAT_FROM + 1 of
 *   them, is replayed with SIM_REPEAT_FROM and SIM_REPEAT_FROM + 1 layers
 *   (at ZeRO 2-3 also with SIM_ZERO_PEAK_FAR, or all of them where it has
 *   no more, for its peak memory: below).
 * - Micro-batches: more than SIM_MB_REPEAT_FROM + 1 are replayed as
 *   SIM_MB_REPEAT_FROM and SIM_MB_REPEAT_FROM + 1 (the first micro-batch
 *   and the last, which reduces the gradients, are unlike the middle
 *   ones, and one micro-batch keeps no whole gradients under ZeRO 2-3:
 *   the smallest step with a middle one has three).
 * Both: four replays (6 and 7 layers x 2 and 3 micro-batches), extended
 * along layers, then along micro-batches (bilinear in the two counts).
 * Per output, what the extension gives:
 * - step, compute, communication, exposed, imbalance times (and per GPU),
 *   channel bytes and busy times (so utilisation and --links), FLOPs,
 *   model FLOPs, the attention part (sim_run_point's, extended the same
 *   way): extended; within 0.5% of the whole step where a layer's time
 *   repeats (every switched topology tested; on a 4x4 torus with DP
 *   across it a layer takes 12.20-12.52 ms by turns as the gradients' and
 *   the layers' traffic interleave on shared links, and a 32-layer step
 *   extended from 6 and 7 was 1.0% short: scripts/sanity_sweep.py,
 *   llama3-8b 8K, ring SP 2 x TP 4 x DP 2, torus4x4).  tests/test_layer.c,
 *   every softmax scheduler x ZeRO 0/3 x recomputation none/full x
 *   micro-batches 1-5 (9 layers, 16 GPUs on two nodes: 260 cases, 104
 *   with the micro-batches extended), worst: step 0.048%, exposed 0.089%
 *   (tokenring, ZeRO 0, no recomputation, 2 micro-batches; where the
 *   micro-batches are extended 0.033% and 0.082%, 4 micro-batches),
 *   attention part 0.029% of the step, compute 4e-14;
 *   Llama-3-70B at 256K: 1e-10; small layers, where the hosts' lead over
 *   the GPUs still moves from layer to layer, up to 0.22% seen (search);
 * - peak allocated memory, per GPU and the largest (so fits): at ZeRO 2-3
 *   each phase of the step (plan_phase: the body, the backward's end)
 *   extended apart and the largest taken, so a peak that moves from the
 *   loss to the backward's end as layers are added is followed (test_layer's
 *   test_step_phase_peaks); at ZeRO 0-1 the peak itself (the body's),
 *   exact (the same tests; test_cli's double ring at ZeRO 1) but for
 *   the receive buffers a host allocates as it issues the next layers'
 *   transfers ahead of its GPU (exec_queue.h), whose count at the peak
 *   steps by whole buffers as layers are added (h100x8x2, stripe SP 2 x
 *   TP 4, 4K: 9.99 GiB extended, 10.13 whole; sanity_sweep seed 404; h100x8
 *   double ring SP 2 x TP 4: next_k, next_v 4, 4, 5, 6 at 5-8 layers, 22
 *   at 32, none with comm.host_us 400);
 *   and a step whose layer time has not settled by the 7th layer is
 *   extended wrong (mi300x8, stripe TP 2 x SP 2, 16K: 3.8%, a layer's
 *   time fluctuating by 10% up to the 16th): where it comes out shorter
 *   than its own communication it cannot be right and is replayed whole
 *   (the torus case that asked for it, usp-zigzag SP 8, ZeRO 3,
 *   Llama-2-7B 16K, 979 ms extended for 1252 whole, was a replay's end
 *   taken from a stale network wake, exec.c: it now extends exactly)
 *   (within the plan cap and the run's memory budget; else a note says so).
 *   At ZeRO 2-3 the gradients waiting for their reduce-scatters pile up at
 *   the backward's end by whole buffers, one every few layers where the
 *   gradient stream falls behind the backward, which one layer's
 *   difference need not show (l20x8-pcie, Llama-3-8B, all-gather CP SP 8,
 *   8K, ZeRO 2: +0.81, +1.52, +0.81, +1.52, +0.81, +0.81 GiB a layer from
 *   the 6th; extended from 6 and 7 layers 34.34 GiB, fits, for 42.87
 *   whole over the 41.38 usable; with full recomputation 51.40 for
 *   36.47): the peak is extended from SIM_REPEAT_FROM + 1 and
 *   SIM_ZERO_PEAK_FAR layers instead, over which the steps average out
 *   (a third replay: about twice the CPU of the 6 and 7; every case
 *   known, 0.4% to 2.6% off where the queue piles up, none seen above,
 *   and exact where it does not: README, --whole-steps), and its
 *   note says it may be high or low by a few buffers.  Where this peak
 *   and the 6 and 7 layers' lie on either side of the usable memory
 *   (their disagreement is the error the replays show), fits is decided
 *   by replaying the step whole (within the plan cap and the memory
 *   budget; else the note says fits is undecided);
 * - peak reserved memory: NAN (the caching allocator's segments do not
 *   repeat layer by layer): the CSV's peak_reserved_gib is empty;
 * - the buffers live at the peak (--memory) and traces (--trace): none
 *   are extended, so a point that needs them (sim_opts.whole_steps, or
 *   exec_opts.keep_trace) replays every layer and micro-batch;
 * - events, flows, tasks: what the replays did (the work actually done).
 * Other points (scope attention or layer, hybrid models, few layers and
 * micro-batches) are replayed whole. */
#define SIM_REPEAT_FROM 6
#define SIM_MB_REPEAT_FROM 2
/* ZeRO 2-3: the peak extended from SIM_REPEAT_FROM + 1 and this many
 * layers (the whole step where it has no more).  Over six layers the
 * gradient queue's whole-buffer steps (one every 2-3 layers on
 * l20x8-pcie) average out: sim.h's table above. */
#define SIM_ZERO_PEAK_FAR (2 * SIM_REPEAT_FROM + 1)
/* The --whole-steps option's help, the same for tasp-sim and its search. */
#define SIM_WHOLE_STEPS_HELP                                                                  \
  "Replay every layer and micro-batch of each step (scope model; default: a step of many "   \
  "layers of one kind is replayed with 6 and 7 layers, of many micro-batches with 2 and 3, " \
  "and the rest extended from their difference: peak allocated memory the same (at ZeRO "  \
  "2-3 extended from 7 and 13 layers, within a few gradient buffers), times within 0.5%, "  \
  "peak reserved memory not given)"
/* Whether w's step is extended along its layers (then *kind is its
 * layers' kind, of which it replays SIM_REPEAT_FROM + 1 at most), along
 * its micro-batches; the largest workload the extension replays (w
 * itself where it is not extended): the plan whose size counts. */
bool sim_step_repeats(const workload *w, attn_kind *kind);
bool sim_step_mbs_repeat(const workload *w);
workload sim_step_replayed(const workload *w);
/* sim_run_step, extended where sim_step_repeats or sim_step_mbs_repeat
 * (and no trace is kept); the search's. */
sim_result *sim_run_step_repeating(const topology *t, const scenario_point *pt,
                                   const exec_opts *o);
/* sim_run_point, extended the same way (the attention part too); the
 * main command's default (sim_opts.whole_steps). */
sim_result *sim_run_point_repeating(const topology *t, const scenario_point *pt,
                                    const exec_opts *o);
void sim_result_free(sim_result *r);

/* All points of the scenario (of this shard); results in point order.
 * A step is extended from a few layers and micro-batches
 * (sim_run_point_repeating) unless s->whole_steps (--whole-steps, and
 * --memory: its buffers at the peak are not extended).
 * Hidden ring baselines are run too and then dropped.  n/a points are not
 * run: their rows have r NULL, and speedups and the group's best count
 * only the points that ran. */
GPtrArray *sim_run_all(const scenario *s, const sim_opts *o);

/* base_s / step_s: how many times faster a step of step_s is than one of
 * base_s.  Two steps of no time are alike (1: neither has anything to do);
 * a step of no time against one that takes time is infinitely faster. */
double sim_speedup(double base_s, double step_s);

/* The progress line: points done of total, the fraction of the work done
 * (frac), events so far and, from the rate so far, the time left. */
void sim_progress_format(GString *out, guint done, guint total, double frac, double events,
                         double elapsed_s);

/* Utilisation of channel c in run r (see sim_result). */
double sim_util(const topology *t, const exec_result *r, uint32_t c);

/* Marks, per channel, whether it is on a route among the first `gpus` GPUs. */
uint8_t *sim_channels_available(const topology *t, uint32_t gpus);

#endif
