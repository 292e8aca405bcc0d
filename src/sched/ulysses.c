/* ulysses: DeepSpeed-Ulysses sequence parallelism (ulysses.h).
 *
 * GPU g holds tokens [g·c, (g+1)·c) of every head.  After the head
 * scatter it holds the whole sequence of heads [g·H/n, (g+1)·H/n) and runs
 * one attention kernel over it (the plain mask: every GPU does the same
 * work, causal or not), then the output goes back by sequence.  Backward:
 * the output gradient is scattered the same way, one backward kernel,
 * then dQ, dK and dV go back (in the kernel's precision: bf16 gradients).
 * The SP degree is limited by the heads: H and the KV heads must divide
 * among the GPUs (KV heads below the degree are replicated).
 * Linear-attention layers (as the LASP papers run Ulysses on them): the
 * same all-to-alls, and one chunked linear-attention kernel over the whole
 * sequence on the GPU's heads. */
#include "ulysses.h"

#include <string.h>

uint32_t ulysses_kv_heads(const workload *w, uint32_t u) {
  return w->kv_heads < u ? u : w->kv_heads;
}

bool ulysses_check_heads(const workload *w, uint32_t u, const char *who, GError **err) {
  if (w->heads % u != 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                "%s: %u query heads do not divide among a Ulysses degree of %u (heads must be "
                "a multiple of it)", who, w->heads, u);
    return false;
  }
  if (w->kv_heads % u != 0 && u % w->kv_heads != 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                "%s: %u KV heads neither divide among a Ulysses degree of %u nor replicate "
                "evenly to it", who, w->kv_heads, u);
    return false;
  }
  return true;
}

uint32_t ulysses_default_degree(const workload *w, const topology *t) {
  uint32_t node = t->gpus_per_node ? t->gpus_per_node : t->n_gpus;
  for (uint32_t u = w->gpus < node ? w->gpus : node; u > 1; u--)
    if (w->gpus % u == 0 && ulysses_check_heads(w, u, "", NULL)) return u;
  return 1;
}

/* Whether the copies around a call may be one lockstep task for every GPU
 * (plan.h): every GPU's compute stream ends in the same task (the start of
 * a pass, or a full-mask ring's lockstep kernels before the gather) and
 * the plan is not the per-GPU reference that records segments. */
static bool lockstep_copies(const plan *p) { return !p->record_segs && plan_lockstep(p); }

/* The pattern (plan.h) of the all-to-alls of every Ulysses group of u
 * consecutive GPUs: each ordered pair of a group, groups in order, in the
 * order plan_coll_all_to_all lists a group's flows (so that the expansion
 * is the per-GPU plan transfer by transfer).  Registered once per plan:
 * an equal pattern registered earlier is reused (a call's n·(u-1) pairs
 * are compared, as many as registering them again would write). */
static uint32_t groups_pattern(plan *p, uint32_t u) {
  uint32_t n = p->n_gpus, k = 0, np = n * (u - 1);
  g_autofree plan_pair *pairs = g_new(plan_pair, np);
  for (uint32_t a = 0; a < n / u; a++)
    for (uint32_t i = 0; i < u; i++)
      for (uint32_t j = 0; j < u; j++)
        if (i != j) pairs[k++] = (plan_pair){a * u + i, a * u + j};
  for (guint id = 0; id < p->patterns->len; id++) {
    const plan_pattern_info *pi = &g_array_index(p->patterns, plan_pattern_info, id);
    if (pi->n_pairs == np &&
        memcmp(&g_array_index(p->pairs, plan_pair, pi->pair_off), pairs, np * sizeof *pairs) == 0)
      return id;
  }
  return plan_pattern(p, pairs, np);
}

/* One all-to-all call in every Ulysses group, of a tensor of `heads`
 * heads over the GPU's c tokens; the copy that lays it out for the call
 * before (scatter) or after (gather) it.  Reads src[0..nsrc) (the tensors
 * it moves) and held; returns the received tensor's buffer in *got.
 * Every group's call moves the same bytes between every pair of its GPUs,
 * so the calls are one pattern group of all the groups' flows (the plan
 * that records segments, the reference, lists them one by one), and the
 * copies are one lockstep task where the GPUs are in step. */
static int64_t a2a(plan *p, const workload *w, uint32_t u, uint32_t step, double heads,
                   double elem_bytes, bool scatter, bool grads, int64_t after,
                   const uint32_t *src, uint32_t nsrc, const ulysses_bufs *held, uint32_t *got) {
  uint32_t n = w->gpus;
  double c = (double)w->seq_len / n;
  double bytes = (double)w->batch * c * heads * w->head_dim * elem_bytes;
  uint32_t sent = UINT32_MAX;
  if (scatter) {
    sent = plan_buf_new(p, PLAN_ALL, bytes, "all_to_all input_t");
    bool all = lockstep_copies(p);
    for (uint32_t g = 0; g < (all ? 1 : n); g++) {
      uint32_t cp = plan_copy(p, all ? PLAN_ALL : g, step, bytes);
      plan_buf_writes(p, cp, sent);
      for (uint32_t i = 0; i < nsrc; i++) plan_buf_reads(p, cp, src[i]);
    }
  }
  uint32_t comm = plan_comm(p, step, COMM_ALL_TO_ALL);
  plan_task_at(p, comm)->grads = grads;
  if (!p->record_segs) {
    plan_xfer_pattern(p, comm, groups_pattern(p, u), bytes / u, 1);
  } else {
    g_autofree uint32_t *gpus = g_new(uint32_t, u);
    for (uint32_t a = 0; a < n / u; a++) {
      for (uint32_t i = 0; i < u; i++) gpus[i] = a * u + i;
      plan_coll_all_to_all(p, comm, gpus, u, bytes / u);
    }
  }
  if (after >= 0) plan_dep(p, (uint32_t)after, comm);
  plan_issue(p, comm, NULL, after, true);
  if (sent != UINT32_MAX) plan_buf_reads(p, comm, sent);
  else
    for (uint32_t i = 0; i < nsrc; i++) plan_buf_reads(p, comm, src[i]);
  for (uint32_t i = 0; held && i < held->n; i++) plan_buf_reads(p, comm, held->id[i]);
  *got = plan_buf_out(p, comm, bytes, "all_to_all output");
  if (!scatter) {
    bool all = lockstep_copies(p);
    for (uint32_t g = 0; g < (all ? 1 : n); g++) {
      uint32_t cp = plan_copy(p, all ? PLAN_ALL : g, step, bytes);
      plan_dep(p, comm, cp);
      plan_buf_reads(p, cp, *got);
    }
  }
  return comm;
}

static void add(ulysses_bufs *b, uint32_t id) {
  g_assert(b->n < G_N_ELEMENTS(b->id));
  b->id[b->n++] = id;
}

/* Heads of the tensors one phase moves: Q, K, V (fused: one call of all
 * three) or the output (gradient).  src: the tensors sent, in that order
 * (scatter: q then k, v; gather: dq, dk, dv).  Returns the last call. */
static int64_t move_qkv(plan *p, const workload *w, uint32_t u, uint32_t step, bool scatter,
                        bool grads, int64_t after, const uint32_t *src, uint32_t nsrc,
                        const ulysses_bufs *held, ulysses_bufs *got) {
  double kv = ulysses_kv_heads(w, u), e = w->elem_bytes;
  uint32_t id;
  if (sched_opt_num(w, &ulysses_opt_fused)) {
    after = a2a(p, w, u, step, w->heads + 2 * kv, e, scatter, grads, after, src, nsrc, held, &id);
    if (got) add(got, id);
    return after;
  }
  double heads[3] = {w->heads, kv, kv};
  for (uint32_t i = 0; i < 3; i++) {
    /* a call sends its own tensor: q, then k and v (one buffer here) */
    uint32_t s = i < nsrc ? i : nsrc - 1;
    after = a2a(p, w, u, step, heads[i], e, scatter, grads, after, nsrc ? &src[s] : NULL,
                nsrc ? 1 : 0, held, &id);
    if (got) add(got, id);
  }
  return after;
}

int64_t ulysses_scatter_heads(plan *p, const workload *w, uint32_t u, bool backward,
                              uint32_t step, int64_t after, const sched_io *io,
                              ulysses_bufs *held) {
  if (u < 2) return after;
  uint32_t id;
  if (backward) {
    after = a2a(p, w, u, step, w->heads, w->elem_bytes, true, true, after, &io->dout, 1, NULL, &id);
    add(held, id);
    return after;
  }
  uint32_t src[2] = {io->q, io->kv};
  return move_qkv(p, w, u, step, true, false, after, src, 2, NULL, held);
}

int64_t ulysses_gather_heads(plan *p, const workload *w, uint32_t u, bool backward,
                             uint32_t step, const ulysses_bufs *src, const ulysses_bufs *held) {
  if (u < 2) return -1;
  uint32_t id;
  if (backward) return move_qkv(p, w, u, step, false, true, -1, src->id, src->n, held, NULL);
  return a2a(p, w, u, step, w->heads, w->elem_bytes, false, false, -1, src->id, src->n, held, &id);
}

/* A buffer on every GPU, written by each of ks[0..nk). */
static uint32_t result(plan *p, const uint32_t *ks, uint32_t nk, double bytes, const char *name,
                       ulysses_bufs *out) {
  uint32_t id = plan_buf_new(p, PLAN_ALL, bytes, name);
  for (uint32_t i = 0; i < nk; i++) plan_buf_writes(p, ks[i], id);
  if (out) add(out, id);
  return id;
}

void ulysses_kernel_bufs(plan *p, const workload *w, uint32_t u, bool backward,
                         const uint32_t *ks, uint32_t nk, ulysses_bufs *out,
                         const ulysses_bufs *held) {
  double rows = (double)w->batch * w->seq_len * w->heads / u; /* the whole sequence, H/u heads */
  double q = rows * w->head_dim * w->elem_bytes;
  double kv = (double)w->batch * w->seq_len * ulysses_kv_heads(w, u) / u * w->head_dim *
              w->elem_bytes;
  for (uint32_t i = 0; held && i < held->n; i++)
    for (uint32_t k = 0; k < nk; k++) plan_buf_reads(p, ks[k], held->id[i]);
  if (!backward) {
    result(p, ks, nk, q, "out", out);
    if (w->attention == ATTN_SOFTMAX) result(p, ks, nk, rows * 4.0, "softmax_lse", out);
    return;
  }
  if (w->attention == ATTN_SOFTMAX)
    result(p, ks, nk, rows * w->head_dim * 4.0, "dq_accum (flash backward, float32)", NULL);
  result(p, ks, nk, q, "dq", out);
  result(p, ks, nk, kv, "dk", out);
  result(p, ks, nk, kv, "dv", out);
}

static bool ulysses_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  if (w->docs && w->attention == ATTN_LINEAR) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_DOCS,
                "ulysses runs packed documents (--docs) on softmax layers only");
    return false;
  }
  /* after the all-to-all a GPU holds whole documents: any length will do */
  return sched_check_docs(&sched_ulysses, w, 0, "", err) &&
         ulysses_check_heads(w, w->gpus, "ulysses", err) &&
         sched_check_divisible(w, 1, "ulysses gives every GPU an equal contiguous chunk", err);
}

static int64_t pass(const sched_ctx *c, bool backward, int64_t after) {
  plan *p = c->p;
  const workload *w = c->w;
  uint32_t n = w->gpus, heads = w->heads / n;
  ulysses_bufs held = {{0}, 0}, res = {{0}, 0};
  int64_t ready = ulysses_scatter_heads(p, w, n, backward, 0, after, c->io, &held);
  /* packed documents: one varlen call over cu_seqlens on each GPU, a
   * task per document (sched_varlen_call prices each as its share) */
  uint32_t m = w->docs ? w->n_docs : 1, nk = n * m;
  g_autofree uint32_t *ks = g_new(uint32_t, nk);
  plan_seg all = {0, w->seq_len};
  for (uint32_t g = 0; g < n; g++) {
    uint32_t call = p->tasks->len;
    for (uint32_t d = 0; d < m; d++) {
      plan_op shape = sched_shape(w, w->causal, backward);
      shape.head_off = g * heads;
      shape.heads = heads;
      plan_seg doc[2], seg = all;
      if (w->docs && sched_doc_layout(w, d, 0, 1, false, doc)) seg = doc[0];
      uint32_t k = w->attention == ATTN_LINEAR
                       ? plan_linear(p, g, 0, &shape, OP_LIN_INTRA, &seg, 1, &seg, 1)
                       : plan_attn(p, g, 0, &shape, &seg, 1, &seg, 1);
      if (ready >= 0) plan_dep(p, (uint32_t)ready, k);
      if (w->attention == ATTN_LINEAR) sched_lin_intra_workspace(p, k);
      ks[g * m + d] = k;
    }
    if (w->docs) sched_varlen_call(p, call);
  }
  ulysses_kernel_bufs(p, w, n, backward, ks, nk, &res, &held);
  /* DeepSpeed's attention saves its head-scattered inputs, output and
   * log-sum-exp for backward (flash attention's autograd): forward hands
   * them on, backward's kernels read them and free them (a backward alone
   * starts with them) */
  if (!backward) {
    c->io->n_keep = 0;
    for (uint32_t i = 0; i < held.n; i++) c->io->keep[c->io->n_keep++] = held.id[i];
    for (uint32_t i = 0; i < res.n; i++) c->io->keep[c->io->n_keep++] = res.id[i];
    for (uint32_t i = 0; i < c->io->n_keep; i++) sched_io_save(p, w, c->io->keep[i]);
  } else if (n > 1) {
    if (c->io->n_keep == 0) {
      double rows = (double)w->batch * w->seq_len * w->heads / n;
      double kv = workload_kv_bytes(w, (double)w->seq_len) * ulysses_kv_heads(w, n) / w->kv_heads / n;
      double bytes = 2 * rows * w->head_dim * w->elem_bytes + kv +
                     (w->attention == ATTN_SOFTMAX ? rows * 4.0 : 0);
      c->io->keep[c->io->n_keep++] =
          plan_buf_saved_input(p, PLAN_ALL, bytes, "saved by forward: q, k, v, out, lse on H/N heads");
    }
    for (uint32_t i = 0; i < c->io->n_keep; i++)
      for (uint32_t k = 0; k < nk; k++) plan_buf_reads(p, ks[k], c->io->keep[i]);
  }
  return ulysses_gather_heads(p, w, n, backward, 1, &res, &held);
}

static plan *ulysses_build(const workload *w, const topology *t, bool record_segs) {
  plan *p = sched_passes(w, t, record_segs, pass);
  if (w->kv_heads < w->gpus)
    g_string_printf(p->note, "ulysses: %u KV heads replicated to %u GPUs (one each)",
                    w->kv_heads, w->gpus);
  return p;
}

const sched_opt ulysses_opt_fused = {
    .key = "ulysses_fused",
    .in_model = true,
    .type = SCHED_OPT_FLAG,
    .help = "Ulysses moves Q, K and V in one all-to-all instead of three calls"};

static const sched_opt *const ulysses_opts[] = {&ulysses_opt_fused, NULL};

const sched_ops sched_ulysses = {
    .name = "ulysses",
    .summary = "DeepSpeed-Ulysses: all-to-all to heads x whole sequence, attention, back",
    .check = ulysses_check,
    .build = ulysses_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX) | SCHED_RUNS(ATTN_LINEAR),
    .opts = ulysses_opts,
    .docs = true,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {0, 0, 6, 6, 0, 4, 0, 0, 0, 10, 0, 0, 0}};
