/* layer_orbits: a job's data-parallel replicas and TP ranks as images of
 * TP rank 0 of replica 0 (layer.h layer_orbits; orbits.h says when that
 * is exact and how the replay uses it).
 *
 * The builder makes the plan G-invariant by construction for its tasks:
 * every TP rank and replica runs the same ops and the same scheduler plan
 * on its own SP GPUs.  What could break it are the collectives' rings:
 * NCCL orders a group's ring by where its GPUs lie, so under some
 * placements shifting the replicas does not carry one ring onto another
 * (SP outermost: the gradient group's ring runs replica by replica inside
 * each SP rank, and its hand-over between SP ranks is no image of another
 * edge).  Every kind of group's rings are checked here: the multiset of
 * all their edges, moved by a generator, must be itself.
 *
 * With a scheduler that turns its GPUs (sched.h turn: USP's and double
 * ring's Ulysses groups under a causal mask) the same turn of every SP
 * group is a further generator (layer_orbits_sched), checked the same
 * way; the representatives then hold part of each SP group, and the
 * builder keeps their part of the scheduler's plan (plan_append into a
 * plan built for representatives). */
#include <string.h>

#include "layer_build.h"
#include "layers.h"
#include "orbits.h"
#include "sched/sched.h"

static gint by_key(gconstpointer a, gconstpointer b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The edges of every group of one kind (TP groups: tp_kind, else the
 * gradient groups), in the builder's numbering, each moved by gen (NULL:
 * as they are), as sorted keys src x n + dst. */
static GArray *ring_edges(lb *b, bool tp_kind, const uint32_t *gen) {
  uint32_t groups = tp_kind ? b->n / b->tp : b->tp, k = tp_kind ? b->tp : b->grad_group;
  GArray *keys = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  g_autofree uint32_t *ring = g_new(uint32_t, k);
  g_autofree plan_pair *e = g_new(plan_pair, (size_t)k * MAX(b->t->gpus_per_node, 1));
  for (uint32_t i = 0; i < groups; i++) {
    if (tp_kind) lb_tp_group(b, i);
    else lb_grad_group(b, i);
    lb_ring_order(b, k, ring);
    uint32_t ne = plan_coll_ring_edges(k, lb_ring_per_node(b, k, ring), e);
    for (uint32_t j = 0; j < ne; j++) {
      uint32_t src = ring[e[j].src], dst = ring[e[j].dst];
      if (gen) src = gen[src], dst = gen[dst];
      uint64_t key = (uint64_t)src * b->n + dst;
      g_array_append_val(keys, key);
    }
  }
  g_array_sort(keys, by_key);
  return keys;
}

/* Whether gen carries each kind's ring edges onto themselves; base[kind]:
 * the unmoved edges, made at the first call and kept for the other
 * candidate shifts (NULL where the kind has no ring). */
static bool rings_invariant(lb *b, const uint32_t *gen, GArray *base[2]) {
  for (int tp_kind = 0; tp_kind < 2; tp_kind++) {
    if ((tp_kind ? b->tp : b->grad_group) < 2) continue;
    if (!base[tp_kind]) base[tp_kind] = ring_edges(b, tp_kind, NULL);
    GArray *a = base[tp_kind], *m = ring_edges(b, tp_kind, gen);
    bool same = a->len == m->len && !memcmp(a->data, m->data, a->len * sizeof(uint64_t));
    g_array_free(m, TRUE);
    if (!same) return false;
  }
  return true;
}

/* Shift by k along one dimension in the builder's numbering (TP rank +
 * tp (SP rank + sp DP rank)), inside blocks of `block` consecutive ranks
 * of it (block: the dimension's size, a plain cyclic shift): the next
 * k-th replica, or TP rank, of its block. */
static void shift(const lb *b, bool tp_dim, uint32_t k, uint32_t block, uint32_t *gb) {
  uint32_t stride = tp_dim ? 1 : b->tp * b->sp, size = tp_dim ? b->tp : b->dp;
  for (uint32_t g = 0; g < b->n; g++) {
    uint32_t rank = g / stride % size, in = rank % block;
    gb[g] = g - in * stride + (in + k) % block * stride;
  }
}

/* The scheduler's turn of its SP ranks inside blocks of `block` ranks of
 * its groups (sched.h turn) for every kind of layer the job runs, as the
 * builder plans them (layer.c: each kind's attention workload on `view`,
 * TP rank 0's GPUs), into pi (sp entries); false: none, kinds whose
 * turns differ, or not a permutation of the SP ranks. */
static bool sp_turn(const sched_ops *s, const workload *w, const topology *view, uint32_t block,
                    uint32_t *pi) {
  uint32_t sp = w->gpus, nv = view->n_gpus;
  g_autofree uint32_t *kp = g_new(uint32_t, MAX(nv, sp));
  g_autofree uint8_t *hit = g_new(uint8_t, sp);
  bool ok = sp <= nv, any = false;
  for (int k = 0; k < ATTN_KINDS && ok; k++) {
    bool used = w->scope == SCOPE_MODEL ? layers_count(w, (attn_kind)k) > 0
                                        : w->attention == (attn_kind)k;
    if (!used) continue;
    workload a = layers_one(w, (attn_kind)k);
    a = layer_attention_workload(&a);
    for (uint32_t g = 0; g < nv; g++) kp[g] = g;
    ok = s->turn(&a, view, block, kp);
    memset(hit, 0, sp);
    for (uint32_t g = 0; g < sp && ok; g++) {
      ok = kp[g] < sp && !hit[kp[g]] && (!any || kp[g] == pi[g]);
      if (ok) hit[kp[g]] = 1;
    }
    if (ok && !any) memcpy(pi, kp, sp * sizeof *pi);
    any = true;
  }
  return ok && any;
}

orbits *layer_orbits(const workload *w, const topology *t) {
  return layer_orbits_sched(NULL, w, t);
}

orbits *layer_orbits_sched(const sched_ops *s, const workload *w, const topology *t) {
  uint32_t tp = layer_tp(w), dp = layer_dp(w), sp = w->gpus;
  if (w->scope == SCOPE_ATTENTION) return NULL;
  bool turns = s && s->turn;
  if (tp * dp < 2 && !turns) return NULL;
  lb b = {.t = t, .w = w, .tp = tp, .sp = sp, .dp = dp, .n = tp * sp * dp};
  b.grad_group = sp * dp;
  b.group = g_new(uint32_t, MAX(tp, b.grad_group));
  b.phys = lb_placement(w);
  const uint32_t *phys = b.phys;
  /* per dimension, the shift by the fewest replicas (TP ranks) that is an
   * automorphism of the topology and carries the rings onto one another:
   * by one where replicas fill whole nodes, by a node's worth where
   * several share one (a shift inside a node would move a ring's hand-over
   * between nodes) */
  uint32_t n_gens = 0, N = t->n_gpus;
  g_autofree uint32_t *gb = g_new(uint32_t, b.n);
  g_autofree uint32_t *by_gpu = g_new(uint32_t, 3 * (size_t)N);
  const uint32_t *gens[3];
  GArray *base[2] = {NULL, NULL};
  for (int dim = 0; dim < 2; dim++) {
    uint32_t size = dim ? tp : dp;
    bool found = false;
    /* a shift of the whole dimension first; where none is exact, one by one
     * inside blocks of its ranks, the largest block first: replicas (TP
     * ranks) spanning several nodes with the dimension innermost
     * (dp,tp,sp: 8 replicas a node) are rotated inside each node, which
     * keeps the topology and every ring (plan_coll_ring_edges: each local
     * GPU starts a ring, so turning every node's GPUs alike maps rings onto
     * rings) where a shift across nodes moves a hand-over between them */
    for (uint32_t pass = 0; pass < 2 && !found; pass++)
      for (uint32_t j = 1 + pass; j < size && !found; j++) {
        /* pass 0: shifts by k = j of the whole dimension; pass 1: by one
         * inside blocks of size / j ranks (j 1: pass 0's first) */
        uint32_t k = pass ? 1 : j, block = pass ? size / j : size;
        if (size % j || block < 2) continue;
        shift(&b, dim, k, block, gb);
        uint32_t *gp = by_gpu + (size_t)n_gens * N;
        for (uint32_t g = 0; g < N; g++) gp[g] = g;
        for (uint32_t g = 0; g < b.n; g++) gp[phys[g]] = phys[gb[g]];
        if (!orbits_automorphism(t, gp) || !rings_invariant(&b, gb, base)) continue;
        gens[n_gens++] = gp;
        found = true;
      }
  }
  /* the scheduler's turn inside every SP group (sched.h turn: USP's
   * Ulysses groups under a causal mask), of every TP rank of every
   * replica alike: SP rank s of each becomes pi[s].  It carries each TP
   * group onto another (the same TP ranks of another SP rank) and each
   * gradient group onto itself; exact where that keeps the topology and
   * every ring's edges, as the shifts are checked.  The rest of the layer
   * is alike on every SP rank (the same ops on the same tokens' worth,
   * the same buffers and checkpoints), and the scheduler's plan is the
   * turn's own promise. */
  bool turn_gen = false;
  g_autofree uint32_t *pi = g_new(uint32_t, sp);
  if (turns) {
    layer_view view;
    layer_view_init(&view, w, t);
    /* the whole group first, then blocks of it, the largest first: a
     * group across nodes is turned inside each node's part of it */
    for (uint32_t block = sp; block >= 2 && !turn_gen; block--) {
      if (sp % block || !sp_turn(s, w, &view.t, block, pi)) continue;
      for (uint32_t g = 0; g < b.n; g++) {
        uint32_t r = g % tp, srank = g / tp % sp, d = g / (tp * sp);
        gb[g] = r + tp * (pi[srank] + sp * d);
      }
      uint32_t *gp = by_gpu + (size_t)n_gens * N;
      for (uint32_t g = 0; g < N; g++) gp[g] = g;
      for (uint32_t g = 0; g < b.n; g++) gp[phys[g]] = phys[gb[g]];
      if (orbits_automorphism(t, gp) && rings_invariant(&b, gb, base)) {
        gens[n_gens++] = gp;
        turn_gen = true;
      }
    }
    layer_view_clear(&view);
  }
  for (int k = 0; k < 2; k++)
    if (base[k]) g_array_free(base[k], TRUE);
  orbits *o = n_gens ? orbits_new(t, gens, n_gens) : NULL;
  if (!o && turn_gen) { /* not free with the turn: the shifts alone */
    turn_gen = false;
    o = --n_gens ? orbits_new(t, gens, n_gens) : NULL;
  }
  uint32_t turn_order = 1;
  for (uint32_t x = turn_gen ? pi[0] : 0; x != 0; x = pi[x]) turn_order++;
  if (o) o->turn = turn_order;
  /* the builder simulates, of each TP rank of a replica, all its SP GPUs
   * or none, or with the turn the least SP rank of each of its orbits
   * (plan_append keeps those GPUs' part of the scheduler's plan) */
  g_autofree uint8_t *sp_rep = g_new(uint8_t, sp);
  for (uint32_t srank = 0; srank < sp; srank++) {
    uint32_t least = srank;
    for (uint32_t x = turn_gen ? pi[srank] : srank; x != srank; x = pi[x]) least = MIN(least, x);
    sp_rep[srank] = least == srank;
  }
  for (uint32_t rank = 0; o && rank < tp * dp; rank++) {
    uint32_t r = rank % tp, d = rank / tp, reps = 0, same = 0;
    for (uint32_t srank = 0; srank < sp; srank++) {
      bool rep = orbits_is_rep(o, phys[r + tp * (srank + sp * d)]);
      reps += rep;
      same += rep == sp_rep[srank];
    }
    if (reps && same < sp) g_clear_pointer(&o, orbits_free);
  }
  g_free(b.group);
  g_free(b.phys);
  return o;
}
