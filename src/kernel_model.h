/* kernel_model: how long a flash-attention kernel takes, from why it takes
 * it (the "kernel_model" object of a topology's compute section).
 *
 * A FlashAttention-2 kernel (PyTorch's flash backend) is a grid of thread
 * blocks (CTAs) scheduled over the SMs:
 *  - forward: B x H x ceil(sq / bm) CTAs, each a block of bm query rows
 *    walking the key blocks (bn keys) it sees: all under a full mask, up
 *    to its diagonal under a causal one (bottom-right aligned when sq !=
 *    sk).  Causal CTAs are launched shortest first (blockIdx.x is the
 *    query block), so a causal kernel over few heads ends in a tail of
 *    long CTAs on few SMs.  Where B x H x ceil(sq / 64) < 0.8 x 2 x SMs
 *    the kernel splits the keys instead (split-KV: 64-row CTAs over a
 *    share of the key blocks each), with the fewest splits whose wave
 *    efficiency is within 85% of the best;
 *  - backward: B x H x ceil(sk / bn) CTAs, each a key block walking the
 *    query blocks that see it (causal: longest first).
 * Tiles (bm x bn), CTAs per SM and the split rule are the kernel's own
 * (FlashAttention-2: csrc/flash_attn/src/flash_fwd_launch_template.h,
 * flash_bwd_launch_template.h, flash_api.cpp num_splits_heuristic, as
 * PyTorch vendors it), not fitted.  CTAs go to SMs round-robin at launch,
 * then each freed slot takes the next CTA; an SM holding k of the 2 CTAs
 * it fits runs at min(1, k x lone_cta_share) of its full rate, shared
 * equally.  A CTA's work is its (query, key) pairs plus two tiles (load
 * Q, write O).  The kernel's time: fixed + busy x (1 + slowdown x (1 -
 * exp(-busy / after))), busy = the makespan in pairs x the seconds one SM
 * takes per pair at head dim D (measured per head dim; between and
 * beyond them the FLOP rate of the measured head dims of D's own tile
 * configuration, linear in D, else of all): a sustained kernel
 * runs at the clock the power limit holds, a short one at boost.
 *
 * Constants (scripts/kernel_model.py fits them to a kernel sweep; the
 * topology says which): fixed forward and backward time, the lone CTA's
 * share, the sustained slowdown and its onset (5 fitted), the per-pair
 * time per measured head dim, forward and backward (measured; `fit
 * --sibling` adds the head dims only another sweep of the same kernel
 * measured, at its time there times the ratio at the dims both measured:
 * the H200 topologies' 96 and 192).  The FLOP-rate rule for the other
 * dims is scripts/kernel_model.py's PAIR_RULE "rate"; its cross-validation
 * compares it with a + b D (docs/validation.md, "Kernel model"). */
#ifndef TASP_KERNEL_MODEL_H
#define TASP_KERNEL_MODEL_H

#include <glib.h>
#include <json-c/json.h>
#include <stdbool.h>

#include "jsonio.h"

#define KERNEL_MODEL_MAX_DIMS 16

/* Kernels already priced (a step prices the same few shapes once per
 * layer and pass; one costs a CTA-by-CTA walk): shared by shallow copies
 * of the model, safe across threads, freed by kernel_model_clear. */
typedef struct kernel_model_memo kernel_model_memo;

typedef struct {
  bool set;              /* false: no kernel model (the table or roofline alone) */
  double sms;            /* streaming multiprocessors */
  double lone_share;     /* a lone CTA's share of an SM that fits two */
  double slowdown;       /* sustained-load slowdown, a fraction */
  double after_s;        /* ... reached after about this much busy time */
  double fixed_s[2];     /* [fwd, bwd]: host issue and launch of one call */
  guint n_dims;
  double dims[KERNEL_MODEL_MAX_DIMS];        /* ascending */
  double pair_s[2][KERNEL_MODEL_MAX_DIMS];   /* [fwd, bwd] seconds per pair per SM */
  kernel_model_memo *memo;
} kernel_model;

/* Read a "kernel_model" object (w.path names it). */
bool kernel_model_parse(json_object *obj, json_where w, kernel_model *k, GError **err);

void kernel_model_clear(kernel_model *k);

/* Seconds of one kernel over B x H = bh heads. */
double kernel_model_s(const kernel_model *k, double bh, double head_dim, double sq, double sk,
                      bool causal, bool backward);

/* The split-KV count the forward kernel picks (1: none), and the makespan
 * in (query, key) pairs at an SM's full rate: exposed for the tests. */
unsigned kernel_model_splits(const kernel_model *k, double bh, double head_dim, double sq,
                             double sk);
double kernel_model_makespan(const kernel_model *k, double bh, double head_dim, double sq,
                             double sk, bool causal, bool backward);

#endif
