/* ring: RingAttention and Zigzag-Ring.
 *
 * Ring (Li et al. 2021; Liu et al. 2023; ring_flash_attn): GPU i holds
 * tokens [i·c, (i+1)·c).  At step t it attends its queries to the KV chunk
 * of GPU (i - t) mod N while passing the chunk it holds to GPU i+1.
 * Causal: the own chunk is a causal block, earlier chunks are full blocks,
 * later chunks are skipped, as ring_flash_attn does: GPU i computes i+1
 * blocks, so the last GPU does almost N times the first one's work.
 *
 * Zigzag (zigzag_ring_flash_attn): the sequence is cut into 2N chunks of
 * c/2 tokens; GPU i holds chunks i and 2N-1-i, so under a causal mask
 * every GPU does the same work.  KV moves around one ring as in Ring.
 * With the KV of GPU j at step t: j = i: one causal block over both local
 * chunks; j < i: all local queries against the first half of j's KV
 * (chunk j); j > i: the second half of the queries (chunk 2N-1-i) against
 * all of j's KV.  Every step past the first is half a full block.
 *
 * Packed documents (--docs), as ring_flash_attn's varlen functions lay
 * them out: every rank holds its 1/N of every document (ring:
 * ring_flash_attn_varlen_func) or its two of 2N pieces of every document
 * (zigzag: zigzag_ring_flash_attn_varlen_func, TransformerEngine's THD
 * format), so each document is balanced as the whole sequence is.  At a
 * step a GPU attends its pieces of each document to the held pieces of
 * the same document only, as the varlen functions call the kernel without
 * documents: its own pieces together causally (zigzag's two pieces one
 * causal block over them, cu_seqlens giving the document's local length),
 * another rank's in full where they come before (zigzag: all its pieces
 * against the first held piece, or its second piece against both), later
 * ones skipped (a full mask: all against all).  Each document's block is
 * its own task, and a step's tasks are one varlen call over cu_seqlens
 * (as the varlen functions make one call a step), each priced as its
 * share of that call (sched_varlen_call; calibration/h100x1-varlen); the
 * call has one output for every document, so the first step's call
 * merges nothing (rotate_mark).
 *
 * Ring on linear-attention layers, as the LASP papers compare it (arXiv
 * 2404.02882, 2502.07563): KV travels the ring exactly as above, and each
 * GPU applies the KV it holds by the right product, K^T V then Q times that
 * state, per step (its own chunk: one intra-chunk kernel); causal skips
 * later chunks.  Backward: dQ and dM = Q^T dO, then the arrived keys' dK
 * and dV from dM, which the accumulators carry on. */
#include "ring.h"

#include "ulysses.h"

ring_geom ring_geom_make(const workload *w, uint32_t u, bool zigzag) {
  uint32_t r = w->gpus / u;
  ring_geom g = {w, r, u, w->seq_len / r, zigzag, 0, NULL, NULL};
  g.kv_bytes = 2.0 * w->batch * (double)g.chunk * ulysses_kv_heads(w, u) / u * w->head_dim *
               w->elem_bytes;
  return g;
}

static void ring_geom_xfers(const void *self, rotate_emit *e, uint32_t step) {
  const ring_geom *g = self;
  (void)step;
  if (g->ranks < 2) return; /* one ring rank: nothing moves */
  rotate_xfer_all(e, g->kv_bytes, 1);
}

/* Under a full mask every GPU attends a chunk of the same size each step. */
static bool ring_geom_alike(const void *self, uint32_t step) {
  const ring_geom *g = self;
  (void)step;
  return !g->w->causal;
}

/* Packed documents: rank a's pieces of each document against the held
 * pieces of rank src of the same document, one block a document. */
static void doc_kernels(const ring_geom *g, rotate_emit *e, uint32_t a, uint32_t src,
                        uint32_t h0, uint32_t heads) {
  const workload *w = g->w;
  uint32_t mark = rotate_mark(e);
  for (uint32_t d = 0; d < w->n_docs; d++) {
    plan_seg q[2], k[2];
    uint32_t nq = sched_doc_layout(w, d, a, g->ranks, g->zigzag, q);
    uint32_t nk = sched_doc_layout(w, d, src, g->ranks, g->zigzag, k);
    if (!w->causal || src == a) {
      rotate_kernel_heads(e, h0, heads, w->causal, q, nq, k, nk);
      continue;
    }
    /* another rank's pieces under a causal mask: the queries that come
     * after some of them against the keys before some query, every such
     * key before every such query in the ring's and zigzag's layouts */
    plan_seg qs[2], ks[2];
    uint32_t mq = 0, mk = 0;
    for (uint32_t i = 0; i < nq; i++) {
      bool sees = false;
      for (uint32_t j = 0; j < nk; j++) sees |= k[j].start + k[j].len <= q[i].start;
      if (sees) qs[mq++] = q[i];
    }
    for (uint32_t j = 0; j < nk; j++) {
      bool seen = false;
      for (uint32_t i = 0; i < mq; i++) seen |= k[j].start + k[j].len <= qs[i].start;
      if (seen) ks[mk++] = k[j];
    }
    for (uint32_t i = 0; i < mq; i++)
      for (uint32_t j = 0; j < mk; j++) g_assert(ks[j].start + ks[j].len <= qs[i].start);
    if (mq) rotate_kernel_heads(e, h0, heads, false, qs, mq, ks, mk);
  }
  rotate_varlen_call(e, mark); /* the step's one call over cu_seqlens */
}

static void ring_geom_kernels(const void *self, rotate_emit *e, uint32_t gpu, uint32_t step) {
  const ring_geom *g = self;
  uint32_t r = g->ranks, a = gpu / g->u, src = (a + r - step) % r;
  uint32_t heads = g->w->heads / g->u, h0 = (gpu % g->u) * heads;
  if (g->w->docs) {
    doc_kernels(g, e, a, src, h0, heads);
    return;
  }
  plan_seg q[2], k[2];
  uint32_t nq = sched_layout(g->w->seq_len, a, r, g->zigzag, q);
  uint32_t nk = sched_layout(g->w->seq_len, src, r, g->zigzag, k);
  if (g->w->attention == ATTN_LINEAR) {
    g_assert(!g->zigzag); /* only ring registers linear layers */
    rotate_linear(e, h0, heads, !g->w->causal || src <= a, src == a, q, nq, k, nk);
    return;
  }
  if (!g->w->causal) rotate_kernel_heads(e, h0, heads, false, q, nq, k, nk);
  else if (src == a) rotate_kernel_heads(e, h0, heads, true, q, nq, k, nk);
  else if (!g->zigzag && src < a) rotate_kernel_heads(e, h0, heads, false, q, nq, k, nk);
  else if (g->zigzag && src < a) rotate_kernel_heads(e, h0, heads, false, q, 2, k, 1);
  else if (g->zigzag) rotate_kernel_heads(e, h0, heads, false, &q[1], 1, k, 2);
}

plan *ring_geom_build(const ring_geom *g, rotate_ops ops, bool record_segs) {
  uint32_t n = g->w->gpus;
  g_autofree plan_pair *pairs = g_new(plan_pair, n);
  for (uint32_t i = 0; i < n; i++) pairs[i] = (plan_pair){i, (i + g->u) % n};
  ops.n_steps = g->ranks;
  ops.xfers = ring_geom_xfers;
  ops.kernels = ring_geom_kernels;
  ops.alike = ring_geom_alike;
  ops.pairs = pairs;
  ops.n_pairs = g->ranks < 2 ? 0 : n;
  ops.kv_bytes = g->kv_bytes;
  ops.grads_in_place = g->zigzag;
  return rotate_build(&ops, g, g->w, record_segs);
}

static bool ring_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  if (w->docs && w->attention == ATTN_LINEAR) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_DOCS,
                "ring runs packed documents (--docs) on softmax layers only");
    return false;
  }
  return sched_check_docs(&sched_ring, w, 1, "ring_flash_attn_varlen_func gives every GPU 1/N "
                          "of every document", err) &&
         sched_check_divisible(w, 1, "ring gives every GPU an equal contiguous chunk", err);
}

static bool zigzag_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return sched_check_docs(&sched_zigzag, w, 2, "zigzag_ring_flash_attn_varlen_func cuts every "
                          "document into 2N pieces", err) &&
         sched_check_divisible(w, 2, "zigzag cuts the sequence into 2N equal chunks", err);
}

static plan *build(const workload *w, bool record_segs, bool zigzag) {
  ring_geom g = ring_geom_make(w, 1, zigzag);
  return ring_geom_build(&g, (rotate_ops){0}, record_segs);
}

static plan *ring_build(const workload *w, const topology *t, bool record_segs) {
  (void)t;
  return build(w, record_segs, false);
}

static plan *zigzag_build(const workload *w, const topology *t, bool record_segs) {
  (void)t;
  return build(w, record_segs, true);
}

const sched_ops sched_ring = {
    .name = "ring",
    .summary = "RingAttention: contiguous chunks, KV passed around one ring",
    .check = ring_check,
    .build = ring_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX) | SCHED_RUNS(ATTN_LINEAR),
    .docs = true,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h): the KV moves
     * along one pattern of P pairs */
    .size = {1.2, 0, 3, 3.5, 0, 2, 0, 3.2, 4, 8, 0, 1, 0}};
const sched_ops sched_zigzag = {
    .name = "zigzag",
    .summary = "Zigzag-Ring: 2N chunks, GPU i holds i and 2N-1-i; balanced causal",
    .check = zigzag_check,
    .build = zigzag_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .docs = true,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {2.1, 0, 3, 3.5, 0, 2, 0, 4, 4, 8, 0, 1, 0}};
