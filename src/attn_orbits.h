/* attn_orbits: the GPUs of an attention plan that share one timeline.
 *
 * A scheduler whose plan a permutation of its GPUs carries onto itself
 * (sched.h turn: USP's and double ring's Ulysses groups under a causal
 * mask) is replayed on one GPU of each orbit of the group that
 * permutation generates, with the multiplicity its order (orbits.h:
 * exact where the permutation is an automorphism of the topology too;
 * plan_quotient.h takes the plan). */
#ifndef TASP_ATTN_ORBITS_H
#define TASP_ATTN_ORBITS_H

#include "orbits.h"
#include "sched/sched.h"

/* The orbits of s's turn for w on t, or NULL: s has none for w, or it is
 * not an automorphism of t that orbits.h can check (a mesh, a torus, a
 * Ulysses group across nodes, GPUs of a NIC split), or its classes are
 * not free. */
orbits *attn_orbits(const sched_ops *s, const workload *w, const topology *t);

#endif
