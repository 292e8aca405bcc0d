/* allgather: all-gather context parallelism (Llama 3, arXiv 2407.21783,
 * sec. 3.3.2; the standard-attention half of LASP-2H, arXiv 2502.07563).
 *
 * Forward: one all-gather of every GPU's K and V (packed in one call),
 * then each GPU attends its local queries to the whole KV it needs.  Full
 * mask: GPU i holds a contiguous chunk and runs one kernel against all S
 * keys.  Causal: the zigzag layout (chunks i and 2N-1-i, so every GPU has
 * the same work, as Llama 3 does); the gathered KV arrives in rank order
 * and is first rearranged into sequence order (one copy), then two causal
 * kernels: chunk i against keys [0, (i+1)·h) and chunk 2N-1-i against
 * [0, (2N-i)·h), the mask aligned to the end of the keys (flash
 * attention's causal mask when sq < sk); their two outputs are joined by
 * one copy (torch.cat).  No output merge.
 * Backward: the same kernels backward against the KV gathered in forward
 * (kept, not gathered again); dQ stays (causal: its two halves joined by a
 * copy); dK and dV of the whole sequence are gathered into one float32
 * accumulator (--grad-dtype; a copy, and for causal a second one that adds
 * the other kernel's part and puts them in owner order) and
 * reduce-scattered back in one call (scripts/calibrate's allgather pass).
 *
 * Memory, as Llama 3's CP holds it (arXiv 2407.21783 sec. 3.3.2: "all-gather
 * the K and V tensors"): every GPU holds the gathered K and V of the whole
 * sequence (2·B·S·Hkv·D·e), in sequence order (causal: a rearranged copy;
 * the gathered one is freed after it), kept from forward for backward;
 * causal kernels' two outputs until torch.cat joins them; backward, each
 * kernel's dK and dV of the keys it saw, the float32 dQ accumulator of
 * flash backward, and the float32 dK/dV accumulator of the whole
 * sequence until the reduce-scatter has sent it.
 *
 * Packed documents (--docs), as ring_flash_attn's
 * llama3_flash_attn_varlen_func runs them (zhuzilin/ring-flash-attention,
 * ring_flash_attn/llama3_flash_attn_varlen.py): the packed sequence is cut
 * contiguously, GPU i holding tokens [i·S/N, (i+1)·S/N) (no zigzag: a
 * document's balance is whatever its place gives).  The KV heads are
 * walked in strides of `heads_k_stride` (the function's argument; here
 * --allgather-heads-k-stride, by default all KV heads at once, one stride,
 * as the Llama 3 paper gathers all of K and V): per stride, K and V are
 * all-gathered in two calls (all_gather_into_tensor each) into one buffer
 * reused by every stride, then one kernel call over the stride's query
 * heads, each local piece of a document attending to the gathered keys of
 * its own document only, up to the piece's end (causal) or the whole
 * document (full mask): the cu_seqlens_q / cu_seqlens_k that
 * llama3_flash_attn_prepare_cu_seqlens makes, bottom-right aligned.  The
 * outputs of the strides are joined by torch.cat (one copy).  Backward
 * gathers K and V again per stride (the forward saves only its own q, k,
 * v, out, lse), zeroes a dK/dV buffer of the gathered keys in the inputs'
 * dtype, runs the kernel backward into it and reduce-scatters dK and dV
 * (two calls); with a stride below all heads, the stride's K and V are
 * first copied contiguous and its dK, dV copied back into place.  Calls on
 * one stream: a stride's gathers wait for the previous stride's kernels
 * (the buffer is reused), the next kernels for the reduce-scatter. */
#include "sched.h"

/* The kernels of GPU g, reading kv (and saved: the forward's outputs
 * they need, UINT32_MAX none); their ids into ids; backward, each writes
 * its dK and dV into dkv (returns how many). */
static uint32_t kernels(plan *p, const workload *w, uint32_t g, bool backward, int64_t ready,
                        uint32_t kv, uint32_t saved, uint32_t ids[2], uint32_t dkv) {
  plan_seg q[2];
  uint32_t nq = sched_layout(w->seq_len, g, w->gpus, w->causal, q);
  plan_op shape = sched_shape(w, w->causal, backward);
  for (uint32_t i = 0; i < nq; i++) {
    plan_seg k = {0, w->causal ? q[i].start + q[i].len : w->seq_len};
    uint32_t id = plan_attn(p, g, 0, &shape, &q[i], 1, &k, 1);
    if (ready >= 0) plan_dep(p, (uint32_t)ready, id);
    plan_buf_reads(p, id, kv);
    if (saved != UINT32_MAX) plan_buf_reads(p, id, saved);
    double rows = (double)w->batch * q[i].len * w->heads;
    if (backward) {
      plan_buf_out(p, id, rows * w->head_dim * 4.0, "dq_accum (flash backward, float32)");
      plan_buf_writes(p, id, dkv);
    }
    ids[i] = id;
  }
  return nq;
}

static void ranks(uint32_t n, uint32_t *gpus) {
  for (uint32_t g = 0; g < n; g++) gpus[g] = g;
}

static int64_t pass(const sched_ctx *c, bool backward, int64_t after) {
  plan *p = c->p;
  const workload *w = c->w;
  const topology *t = c->t;
  uint32_t n = w->gpus;
  g_autofree uint32_t *gpus = g_new(uint32_t, n);
  ranks(n, gpus);
  double shard = workload_kv_bytes(w, (double)w->seq_len / n);
  double whole = workload_kv_bytes(w, (double)w->seq_len);
  /* a GPU's query rows of output (or dQ) */
  double out = (double)w->batch * w->seq_len / n * w->heads * w->head_dim * w->elem_bytes;
  uint32_t ids[2];
  if (!backward) {
    uint32_t ag = plan_comm(p, 0, COMM_ALL_GATHER);
    plan_coll_ring(p, ag, gpus, n, shard, t->gpus_per_node);
    if (after >= 0) plan_dep(p, (uint32_t)after, ag);
    plan_issue(p, ag, NULL, after, true);
    plan_buf_reads(p, ag, c->io->kv);
    uint32_t kv = plan_buf_out(p, ag, whole, "gathered k, v");
    uint32_t ordered = w->causal ? plan_buf_new(p, PLAN_ALL, whole, "gathered k, v in sequence order")
                                 : kv;
    c->io->saved = ordered; /* backward attends it again */
    sched_io_save(p, w, ordered);
    /* causal: each kernel's output and log-sum-exp, saved for the
     * backward kernel of the same queries (the joined output is the
     * pass's out; the program's `outs`) */
    c->io->n_keep = 0;
    uint32_t chunks = UINT32_MAX;
    if (w->causal) {
      double rows = out / w->elem_bytes / w->head_dim; /* the GPU's query rows x heads */
      chunks = plan_buf_new(p, PLAN_ALL, out + rows * 4.0, "out, softmax_lse of each chunk");
      sched_io_save(p, w, chunks);
      c->io->keep[c->io->n_keep++] = chunks;
    }
    for (uint32_t g = 0; g < n; g++) {
      int64_t ready = ag;
      if (w->causal) {
        ready = plan_copy(p, g, 0, whole);
        plan_dep(p, ag, (uint32_t)ready);
        plan_buf_reads(p, (uint32_t)ready, kv);
        plan_buf_writes(p, (uint32_t)ready, ordered);
      }
      uint32_t nk = kernels(p, w, g, false, ready, ordered, UINT32_MAX, ids, UINT32_MAX);
      if (w->causal) {
        uint32_t cat = plan_copy(p, g, 0, out);
        for (uint32_t i = 0; i < nk; i++) plan_buf_writes(p, ids[i], chunks);
        plan_buf_reads(p, cat, chunks);
      }
    }
    return ag;
  }
  double grad = w->grad_bytes ? (double)w->grad_bytes / w->elem_bytes : 1.0;
  if (c->io->saved == UINT32_MAX) { /* backward alone: forward kept them */
    c->io->saved = plan_buf_saved_input(p, PLAN_ALL, whole, "gathered k, v (from forward)");
    if (w->causal) {
      double rows = out / w->elem_bytes / w->head_dim;
      c->io->keep[c->io->n_keep++] =
          plan_buf_saved_input(p, PLAN_ALL, out + rows * 4.0, "out, softmax_lse of each chunk");
    }
  }
  uint32_t acc = plan_buf_new(p, PLAN_ALL, whole * grad, "dk, dv of the sequence (float32)");
  uint32_t sent = acc;
  if (w->causal) sent = plan_buf_new(p, PLAN_ALL, whole * grad, "dk, dv in owner order (float32)");
  for (uint32_t g = 0; g < n; g++) {
    /* the kernels run one after the other, each one's dK, dV added into
     * the accumulator and freed before the next (the larger key range
     * first): one buffer of the larger size stands for them */
    plan_seg q[2];
    uint32_t nq = sched_layout(w->seq_len, g, n, w->causal, q);
    double keys = w->causal ? q[nq - 1].start + q[nq - 1].len : w->seq_len;
    uint32_t dkv = plan_buf_new(p, g, workload_kv_bytes(w, keys), "dk, dv of the gathered keys");
    uint32_t nk = kernels(p, w, g, true, after, c->io->saved,
                          w->causal ? c->io->keep[0] : UINT32_MAX, ids, dkv);
    /* the accumulator is made before the kernels run (torch.empty), and
     * the full mask's one kernel returns the pass's dQ itself */
    plan_buf_writes(p, ids[0], acc);
    if (nk == 1) plan_buf_writes(p, ids[0], c->io->dq);
    /* the first kernel's part into the accumulator; causal: the queries'
     * two dQ halves joined (torch.cat: the pass's dQ), then the second
     * kernel's part added and the whole put in owner order (index_select:
     * a new float32 buffer beside the accumulator) */
    uint32_t first = plan_copy(p, g, 0, whole * grad);
    plan_buf_writes(p, first, acc);
    plan_buf_reads(p, first, dkv);
    if (w->causal) {
      uint32_t cat = plan_copy(p, g, 0, out);
      uint32_t dq = plan_buf_new(p, g, out, "dq (one chunk each)");
      for (uint32_t i = 0; i < nk; i++) plan_buf_writes(p, ids[i], dq);
      plan_buf_reads(p, cat, dq);
      plan_buf_writes(p, cat, c->io->dq);
      uint32_t second = plan_copy(p, g, 0, whole * grad);
      plan_buf_writes(p, second, acc);
      plan_buf_reads(p, second, dkv);
      /* the kernel's dK, dV are gone (added right after it) before
       * index_select makes the owner-order copy */
      plan_buf_reads_late(p, second, acc);
      plan_buf_writes_late(p, second, sent);
    }
  }
  uint32_t rs = plan_comm(p, 1, COMM_REDUCE_SCATTER);
  c->io->end_task = rs; /* dK, dV: the shard converted after the reduce-scatter */
  plan_task_at(p, rs)->grads = true;
  plan_coll_ring(p, rs, gpus, n, shard * grad, t->gpus_per_node);
  plan_issue(p, rs, NULL, -1, true);
  plan_buf_reads(p, rs, sent);
  plan_buf_out(p, rs, shard * grad, "dk, dv shard (float32)");
  return rs;
}

/* ---- packed documents: llama3_flash_attn_varlen_func ---- */

static const sched_opt allgather_opt_stride = {
    .key = "allgather_heads_k_stride",
    .in_model = true,
    .type = SCHED_OPT_COUNT,
    .max = 16384,
    .metavar = "H",
    .help = "packed documents: KV heads all-gathered per step (ring_flash_attn "
            "llama3_flash_attn_varlen_func's heads_k_stride); default: all at once"};

static const sched_opt *const allgather_opts[] = {&allgather_opt_stride, NULL};

static uint32_t heads_k_stride(const workload *w) {
  uint32_t s = sched_opt_num(w, &allgather_opt_stride);
  return s ? s : w->kv_heads;
}

/* GPU g's pieces of the documents (queries q, keys k of each), as
 * llama3_flash_attn_prepare_cu_seqlens cuts them; returns how many. */
static uint32_t doc_segs(const workload *w, uint32_t g, plan_seg *q, plan_seg *k) {
  uint64_t len = w->seq_len / w->gpus, lo = g * len, hi = lo + len, start = 0;
  uint32_t n = 0;
  for (uint32_t d = 0; d < w->n_docs; start += w->docs[d], d++) {
    uint64_t end = start + w->docs[d];
    if (end <= lo || start >= hi) continue;
    uint64_t q0 = start > lo ? start : lo, q1 = end < hi ? end : hi;
    q[n] = (plan_seg){q0, q1 - q0};
    k[n] = (plan_seg){start, (w->causal ? q1 : end) - start};
    n++;
  }
  return n;
}

/* GPU g's kernels over its document pieces on KV-head stride `stride`
 * (each after task `ready`); their ids into ids, how many returned. */
static uint32_t doc_kernels(plan *p, const workload *w, uint32_t g, uint32_t stride,
                            bool backward, uint32_t ready, uint32_t *ids) {
  uint32_t s = heads_k_stride(w), per = w->heads / w->kv_heads;
  g_autofree plan_seg *q = g_new(plan_seg, w->n_docs), *k = g_new(plan_seg, w->n_docs);
  uint32_t n = doc_segs(w, g, q, k);
  plan_op shape = sched_shape(w, w->causal, backward);
  shape.head_off = stride * s * per;
  shape.heads = s * per;
  uint32_t call = p->tasks->len;
  for (uint32_t i = 0; i < n; i++) {
    ids[i] = plan_attn(p, g, stride, &shape, &q[i], 1, &k[i], 1);
    plan_dep(p, ready, ids[i]);
  }
  sched_varlen_call(p, call); /* one _flash_attn_varlen call a stride */
  return n;
}

/* One all-gather (or reduce-scatter) of `bytes` per GPU on every GPU. */
static uint32_t coll(plan *p, const topology *t, uint32_t step, comm_api api, const uint32_t *gpus,
                     uint32_t n, double bytes, int64_t after) {
  uint32_t id = plan_comm(p, step, api);
  plan_coll_ring(p, id, gpus, n, bytes, t->gpus_per_node);
  if (after >= 0) plan_dep(p, (uint32_t)after, id);
  plan_issue(p, id, NULL, -1, true);
  return id;
}

static int64_t doc_pass(const sched_ctx *c, bool backward, int64_t after) {
  plan *p = c->p;
  const workload *w = c->w;
  uint32_t n = w->gpus, s = heads_k_stride(w), strides = w->kv_heads / s;
  g_autofree uint32_t *gpus = g_new(uint32_t, n);
  ranks(n, gpus);
  g_autofree uint32_t *ids = g_new(uint32_t, w->n_docs);
  /* K or V of one stride: a GPU's share, and the gathered whole */
  double one = workload_kv_bytes(w, (double)w->seq_len / n) / 2 * s / w->kv_heads;
  double gathered = 2 * one * n;
  double out = sched_rows_bytes(w, w->heads);
  uint32_t kvbuf = plan_buf_new(p, PLAN_ALL, gathered, "kv_buffer: gathered k, v of a head stride");
  uint32_t dkvbuf = UINT32_MAX, contig = UINT32_MAX, outs = UINT32_MAX;
  if (backward) {
    dkvbuf = plan_buf_new(p, PLAN_ALL, gathered, "dkv_buffer: dk, dv of the gathered keys");
    if (s != w->kv_heads)
      contig = plan_buf_new(p, PLAN_ALL, 2 * one, "kv_contiguous_buffer: a stride's k, v");
  } else {
    /* each stride's output and log-sum-exp until torch.cat joins them */
    outs = plan_buf_new(p, PLAN_ALL, out + (double)w->batch * w->seq_len / n * w->heads * 4.0,
                        "out, lse of each head stride");
  }
  int64_t prev = after;
  for (uint32_t i = 0; i < strides; i++) {
    for (uint32_t g = 0; backward && g < n; g++) {
      uint32_t zero = plan_copy(p, g, i, gathered / 2); /* zero_(): writes only */
      if (prev >= 0) plan_dep(p, (uint32_t)prev, zero);
      plan_buf_writes(p, zero, dkvbuf);
      if (contig == UINT32_MAX) continue;
      uint32_t cp = plan_copy(p, g, i, 2 * one);
      plan_buf_reads(p, cp, c->io->kv);
      plan_buf_writes(p, cp, contig);
    }
    uint32_t agk = coll(p, c->t, i, COMM_ALL_GATHER, gpus, n, one, prev);
    uint32_t agv = coll(p, c->t, i, COMM_ALL_GATHER, gpus, n, one, agk);
    for (int j = 0; j < 2; j++) {
      uint32_t ag = j ? agv : agk;
      plan_buf_reads(p, ag, contig != UINT32_MAX ? contig : c->io->kv);
      plan_buf_writes(p, ag, kvbuf);
    }
    for (uint32_t g = 0; g < n; g++) {
      uint32_t nk = doc_kernels(p, w, g, i, backward, agv, ids);
      for (uint32_t k = 0; k < nk; k++) {
        plan_buf_reads(p, ids[k], kvbuf);
        if (!backward) {
          plan_buf_writes(p, ids[k], outs);
          continue;
        }
        plan_buf_writes(p, ids[k], dkvbuf);
        plan_buf_writes(p, ids[k], c->io->dq);
        const plan_op *op = &plan_task_at(p, ids[k])->op;
        plan_buf_out(p, ids[k], (double)op->batch * op->sq * op->heads * op->head_dim * 4.0,
                     "dq_accum (flash backward, float32)");
      }
    }
    if (!backward) {
      prev = agv;
      continue;
    }
    uint32_t rsk = coll(p, c->t, i, COMM_REDUCE_SCATTER, gpus, n, one, -1);
    uint32_t rsv = coll(p, c->t, i, COMM_REDUCE_SCATTER, gpus, n, one, rsk);
    for (int j = 0; j < 2; j++) {
      uint32_t rs = j ? rsv : rsk;
      plan_task_at(p, rs)->grads = true;
      plan_buf_reads(p, rs, dkvbuf);
      plan_buf_writes(p, rs, contig != UINT32_MAX ? contig : c->io->dkv);
    }
    prev = rsv;
    for (uint32_t g = 0; contig != UINT32_MAX && g < n; g++) {
      uint32_t cp = plan_copy(p, g, i, 2 * one); /* dk[:, stride] = dk_i */
      plan_dep(p, rsv, cp);
      plan_buf_reads(p, cp, contig);
      plan_buf_writes(p, cp, c->io->dkv);
    }
  }
  if (backward) {
    /* the last stride's reduce-scatter hands on dK, dV (and the kernels' dQ) */
    if (contig == UINT32_MAX) c->io->end_task = prev;
    return prev;
  }
  for (uint32_t g = 0; g < n; g++) {
    uint32_t cat = plan_copy(p, g, strides, out); /* torch.cat of the strides' outputs */
    plan_buf_reads(p, cat, outs);
  }
  return prev;
}

static bool allgather_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  uint32_t s = sched_opt_num(w, &allgather_opt_stride);
  if (s && !w->docs) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_OPTION,
                "allgather_heads_k_stride: the head-stride gather is llama3_flash_attn_varlen_"
                "func's, for packed documents (--docs); without them allgather gathers all KV "
                "heads at once");
    return false;
  }
  if (s && w->kv_heads % s) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_OPTION,
                "allgather_heads_k_stride: expected a divisor of the %u KV heads, got %u",
                w->kv_heads, s);
    return false;
  }
  if (w->docs)
    return sched_check_docs(&sched_allgather, w, 0, "", err) &&
           sched_check_divisible(w, 1, "llama3_flash_attn_varlen_func gives every GPU an equal "
                                 "contiguous slice of the packed sequence", err);
  return sched_check_divisible(w, w->causal ? 2 : 1,
                               w->causal ? "allgather's causal layout cuts the sequence into "
                                           "2N equal chunks"
                                         : "allgather gives every GPU an equal chunk", err);
}

static plan *allgather_build(const workload *w, const topology *t, bool record_segs) {
  return sched_passes(w, t, record_segs, w->docs ? doc_pass : pass);
}

const sched_ops sched_allgather = {
    .name = "allgather",
    .summary = "All-gather CP (Llama 3): gather all KV once, local queries attend to it",
    .check = allgather_check,
    .build = allgather_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = allgather_opts,
    .docs = true,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {0, 0, 5.1, 2.1, 0, 0.5, 0, 0, 0, 6, 0, 0, 0}};
