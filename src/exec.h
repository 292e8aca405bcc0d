/* exec: replays a plan on the engine, the network and the compute model.
 *
 * A task starts when every task it depends on has finished.  Compute
 * tasks take the compute model's time; a communication group waits its
 * launch cost, then starts one flow per transfer over the topology's
 * route and finishes when the last flow is delivered.  A lockstep task
 * (plan.h) runs on every GPU at once; a group along a pattern starts its
 * pairs as bundles whose channel uses are made once per run.  The result
 * holds what the report needs: step time, per-GPU busy times, per-channel
 * bytes and busy time, and, when asked, the spans and rates for a trace. */
#ifndef TASP_EXEC_H
#define TASP_EXEC_H

#include <glib.h>
#include <stdbool.h>

#include "compute.h"
#include "plan.h"
#include "topology.h"

/* How far a run has got, for another thread to show while it runs:
 * tasks finished of the plan's, and engine events (published every 1,024
 * tasks and at the end; read with g_atomic_int_get and
 * g_atomic_pointer_get). */
typedef struct {
  gint done, total;
  gsize events;
} exec_progress;

typedef struct {
  exec_progress *progress; /* NULL: not published */
  bool no_compute;  /* compute takes no time (communication only) */
  bool no_comm;     /* no communication: transfers take no time, and tasks
                       that only add in what one brought (on_arrival) are
                       not run, as a program without communication does
                       (calibration/h200x2-linear: Ring's acc += arrived) */
  bool alone;       /* with no_comm: nor does a GPU wait on another through a
                       transfer, as the program with its communication calls
                       taken out runs (calibrate.py's passes "comm": false) */
  bool keep_trace;  /* record spans and channel rates */
  bool per_flow;    /* every flow on its own (net.h): the bundles' reference */
  bool mem_per_gpu; /* the memory replay GPU by GPU, no classes
                       (exec_mem_class.h): its reference */
  /* A plan for the representatives of a symmetric job (orbits.h): the
   * quotient network is replayed and the result expanded to every GPU
   * and channel; NULL: the plan is the whole job.  Not with keep_trace. */
  const struct orbits *orbits;
} exec_opts;

typedef struct {
  uint32_t gpu;
  uint8_t comm;     /* 0 compute track, 1 communication track */
  uint8_t kind;     /* op_kind (compute track) or comm_api (communication track) */
  uint8_t backward; /* compute: a backward kernel; communication: moves gradients */
  uint32_t step;
  double t0_s, t1_s;
} exec_span;

typedef struct {
  uint32_t chan;
  double t_s, rate_Bps;
} exec_rate;

/* One transfer of a communication group: its first byte leaves at t0_s,
 * it is delivered at t1_s. */
typedef struct {
  uint32_t src, dst, step;
  double bytes, t0_s, t1_s;
} exec_xfer;

typedef struct {
  double step_s;       /* last task's end */
  double compute_s;    /* compute busy time of the busiest GPU */
  double comm_s;       /* time the busiest GPU has communication in flight */
  /* At the GPU finishing last, step_s = its compute busy time + imbalance_s
   * + exposed_s.  Its idle time is split by what the step would be had the
   * network taken no time (the run's task graph replayed with every group
   * instant, every kernel at its own speed, host issue left out):
   * imbalance_s is that step less the GPU's compute, its waits on other
   * GPUs' compute however they reach it (through chains of transfers: a
   * transfer held by a late producer waits on that producer); exposed_s is
   * the rest, what the network adds: flights beyond what compute hides,
   * launch costs, host issue waits.  Of exposed_s, what the same replay
   * keeps with hosts issuing kernels only is exposed_host_s (kernel issue:
   * the hosts, not the network), and what it then keeps with launch costs
   * and every issue wait as in the run is exposed_fixed_s (launch and group
   * issue costs, which faster links do not shorten); the rest is flights.
   * gpu_imbalance_s: per GPU, its end in the replay without the network
   * less its compute (the last GPU's: imbalance_s). */
  double exposed_s;
  double imbalance_s;
  double exposed_fixed_s;
  double exposed_host_s;
  uint32_t last_gpu;
  uint32_t n_gpus, n_chan;
  double *gpu_compute_s, *gpu_comm_s, *gpu_finish_s, *gpu_imbalance_s;
  double *chan_bytes, *chan_busy_s;
  double flops;        /* nominal FLOPs of all kernels (compute_op_flops) */
  compute_lookup conf; /* how far the kernels' prices are from measured data: the worst */
  uint64_t events, flows, bundles, solves, tasks;
  GArray *spans;       /* exec_span, with keep_trace */
  GArray *rates;       /* exec_rate, with keep_trace */
  GArray *xfers;       /* exec_xfer, with keep_trace, in delivery order */
  /* Memory (exec_mem.c): live bytes of the plan's buffers (plan_buf.h)
   * per GPU through the run.  gpu_peak_bytes: each GPU's largest total;
   * peak_bytes the largest of them, on peak_gpu; peak_live: per GPU, the
   * buffers live at its peak, by name, largest first (GPU ascending);
   * mem_errors: uses that do not balance (a buffer read before anything
   * wrote it, or declared and never used, or left live and not kept):
   * zero for a well-declared plan; mem: with keep_trace, every change. */
  double peak_bytes;
  uint32_t peak_gpu;
  double *gpu_peak_bytes;
  /* plan_phase x n_gpus: each GPU's peak reached while it is in each
   * phase (the phase of its last compute task to start: a request its
   * host makes ahead for a later phase's task counts in the one the GPU
   * is in) (a plan with phases: a model's step); an extended step
   * extends each apart and takes the largest (exec_result_extend); NULL:
   * a plan without phases */
  double *gpu_peak_phase_bytes;
  /* Reserved memory (exec_alloc.h): the segments PyTorch's caching
   * allocator would hold replaying the same allocations in the same
   * order (torch.cuda.max_memory_reserved): per GPU, and the largest. */
  double peak_reserved_bytes;
  double *gpu_peak_reserved_bytes;
  GArray *peak_live;   /* exec_mem_live */
  uint64_t mem_errors;
  GArray *mem;         /* exec_mem_sample, with keep_trace */
} exec_result;

/* `count` buffers named `name` on GPU gpu, of `bytes` together. */
typedef struct {
  uint32_t gpu, count;
  const char *name;
  double bytes;
} exec_mem_live;

typedef struct {
  uint32_t gpu;
  double t_s, bytes;
} exec_mem_sample;

exec_result *exec_run(const plan *p, const topology *t, const exec_opts *opts);
void exec_result_free(exec_result *r);

/* A step whose middle repeats: `a` and `b` the same step with one
 * repeating part (a model's layer) more in b; the result is b with
 * `more` such parts more, every time, busy time, byte count, FLOP count
 * and per-GPU peak allocated extended by more x (b - a); reserved memory
 * NAN (the allocator's cache does not repeat part by part); the last
 * GPU is b's; events and the like are what the two replays did; no
 * trace, no buffers at the peak.  Exact where the replays repeat period
 * by period (sim.h says how near they come).  by_phase: each phase's peak
 * (gpu_peak_phase_bytes) extended apart and the largest taken, for a
 * step whose peak moves from one phase to another as parts are added;
 * else the peak itself extended. */
exec_result *exec_result_extend(const exec_result *a, const exec_result *b, double more,
                                bool by_phase);
/* r's per-GPU peaks allocated (and per phase), its peak and peak GPU
 * replaced by those of a and b extended by `more` as exec_result_extend
 * does: the peaks of a step extended from other replays than its times
 * (sim.c: at ZeRO 2-3 from a longer span of layers). */
void exec_result_extend_peaks(exec_result *r, const exec_result *a, const exec_result *b,
                              double more, bool by_phase);

/* An empty result for n GPUs and channels, to add layers to. */
exec_result *exec_result_new(uint32_t n_gpus, uint32_t n_chan, bool keep_trace);
/* Adds `count` layers, each `r` (one simulated layer), after what `acc`
 * holds, as if they ran one after the other: times, busy times, bytes and
 * FLOPs scale by count; the busiest-GPU figures (compute_s, comm_s) add
 * the per-layer maxima (an upper bound where the busiest GPU differs
 * between kinds of layer); spans and rates of the one simulated layer are
 * kept, shifted by `shown_s` (the simulated layers before it, back to
 * back); event counts are the simulated ones; conf is the worse of the two. */
void exec_result_add_layers(exec_result *acc, const exec_result *r, uint32_t count,
                            double shown_s);

#endif
