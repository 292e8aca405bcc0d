/* ulysses: DeepSpeed-Ulysses's all-to-alls, for ulysses and usp.
 *
 * Inside each group of u consecutive GPUs (Ulysses groups sit inside a
 * node), an all-to-all scatters heads and gathers the sequence before
 * attention, and the reverse after it (Jacobs et al. 2023, arXiv
 * 2309.14509, sec. 3; DeepSpeed's DistributedAttention issues one
 * all-to-all per tensor: Q, K, V, then the output).  Each all-to-all needs
 * its tensor rearranged so that what goes to one peer is contiguous: one
 * copy per GPU per call, before a head scatter, after a head gather. */
#ifndef TASP_SCHED_ULYSSES_H
#define TASP_SCHED_ULYSSES_H

#include "sched.h"

/* KV heads each Ulysses group spreads over its u GPUs: kv_heads, or u when
 * kv_heads < u (each KV head then replicated to u / kv_heads GPUs: a KV
 * head cannot be split, and every query head needs its KV head beside it). */
uint32_t ulysses_kv_heads(const workload *w, uint32_t u);
/* Heads divisible by u, KV heads divisible by u or dividing it. */
bool ulysses_check_heads(const workload *w, uint32_t u, const char *who, GError **err);
/* The largest Ulysses degree that divides the SP degree, fits in a node
 * and passes ulysses_check_heads (1 if none larger does). */
uint32_t ulysses_default_degree(const workload *w, const topology *t);

/* Before attention: forward Q, K, V (three calls, or one fused call),
 * backward the output gradient.  After `after` (-1 none); returns the last
 * all-to-all, which attention must wait for. */
int64_t ulysses_scatter_heads(plan *p, const workload *w, uint32_t u, bool backward,
                              uint32_t step, int64_t after);
/* After attention: forward the output, backward dQ, dK, dV (three calls
 * or one fused).  Issued after each GPU's last compute; returns the last. */
int64_t ulysses_gather_heads(plan *p, const workload *w, uint32_t u, bool backward,
                             uint32_t step);

#endif
