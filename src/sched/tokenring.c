/* tokenring: TokenRing (Wang et al. 2024, arXiv 2412.20501;
 * ACA-Lab-SJTU/token-ring).
 *
 * KV stays where it is; the queries travel.  At step t GPU r holds the
 * queries of owner j = (r - t) mod N and attends them to its own KV, while
 * one grouped send/receive passes the queries it holds one hop on (r to
 * r+1) for step t+1.  The block output and its log-sum-exp go straight
 * back to the owner over the mesh in a second grouped send/receive (one
 * message from r to j, a different peer every step: on NVSwitch or a full
 * mesh these hand-backs use other links than the query ring), and the
 * owner merges each returned block, one step later, so the merge never
 * waits on a transfer still in flight.  Causal: the zigzag layout, with
 * zigzag's block rules seen from the KV's side: j = r one causal block;
 * r < j all of j's queries against r's first chunk; r > j the second half
 * of j's queries against all of r's KV.
 * Backward: the queries travel with their output gradient, output and
 * log-sum-exp (what the backward kernel needs); dK and dV accumulate where
 * the KV is and never move; each block's dQ (float32, --grad-dtype) goes
 * back to the owner, which adds it one step later.
 *
 * Memory, as calibration/h200x2-mem's TokenRing program (after
 * token-ring's pattern) allocates it: for the whole pass two receive
 * buffers of what travels with the queries (double buffering) and, per
 * block size, one of what comes home (forward the block output and its
 * log-sum-exp; backward a float32 dQ partial); each kernel's block result
 * until it has gone home; the owner's float32 accumulators (output and
 * log-sum-exp; backward dQ, and the KV's dK and dV, which stay), and at
 * each forward merge two float32 temporaries of the block's rows (the
 * log-sum-exp merge in place); backward, flash backward's outputs dQ, dK,
 * dV (bf16, three tensors) until added in, and its float32 dQ workspace.
 *
 * Lockstep (plan.h).  Under a full mask every GPU's tasks are the image of
 * GPU 0's under the rotation r -> r+1: the same kernel shapes (every block
 * is c x c), the same merges, the same buffers (the layout is plain), and
 * both transfers of a step are shifts (the queries by +1, the hand-backs
 * by -t).  Unless the plan records segments, a full-mask pass is then
 * emitted once, for GPU 0 standing for all (tasks of gpu PLAN_ALL), and
 * each step's transfers along shift patterns: the N-1 shifts of the ring,
 * registered once per plan (shift_pattern), whose pairs are listed in
 * the order the per-GPU plan lists its transfers (GPU 0 up), so the
 * network sorts them into the same bundles; every GPU is in two pairs of
 * each (one send, one receive), so every host pays the same issue cost
 * and the next lockstep kernel is issued at once on all (exec_host.c
 * would expand the plan otherwise).  The per-GPU plan (record
 * segments) stays the reference: tests/test_tokenring.c holds every figure
 * of the two equal.  Causal: at step t > 0 GPUs below t attend c query
 * rows to c/2 keys and the others c/2 rows to c keys (the zigzag rules
 * above), so GPU r switches kernel shape at its own step r: no two GPUs'
 * passes coincide, and the plan stays per GPU. */
#include "sched.h"

#define NONE UINT32_MAX

/* Buffers of a pass: held[] what travels with the queries now; blk[r] the
 * block result GPU r wrote this step; recv the pass's receive buffers
 * (two query sets, and per block size one for what comes home), made at
 * its start and dropped at its end; NONE without communication. */
typedef struct {
  uint32_t held[4], n_held;
  uint32_t *blk;
  uint32_t acc[2]; /* forward: out, lse (float32); backward: dq, dk+dv (float32) */
  uint32_t qbufs, home;
  uint32_t *grads; /* backward, 3 per GPU: its last kernel's dq, dk, dv, NONE */
  bool lock;       /* lockstep: GPU 0's slots (blk[0], grads[0..2]) stand for all */
} tr_bufs;

static tr_bufs *bufs_of(const sched_ctx *s) { return (tr_bufs *)s->io->aux; }

/* Kernel of GPU r on the queries of j; returns the query rows (0: none).
 * Lockstep: r = 0 stands for every GPU (the task's gpu is PLAN_ALL). */
static double block(const sched_ctx *s, uint32_t r, uint32_t j, uint32_t step, bool backward,
                    int64_t ready, GArray *kernels) {
  uint32_t gpu = bufs_of(s)->lock ? PLAN_ALL : r;
  const workload *w = s->w;
  plan_seg q[2], k[2];
  uint32_t nq = sched_layout(w->seq_len, j, w->gpus, w->causal, q);
  uint32_t nk = sched_layout(w->seq_len, r, w->gpus, w->causal, k);
  bool causal = w->causal && j == r;
  const plan_seg *qs = q;
  if (w->causal && r < j) nk = 1;                /* r's first chunk */
  else if (w->causal && r > j) { qs = &q[1]; nq = 1; } /* j's second chunk */
  plan_op shape = sched_shape(w, causal, backward);
  uint32_t id = plan_attn(s->p, gpu, step, &shape, qs, nq, k, nk);
  if (ready >= 0) plan_dep(s->p, (uint32_t)ready, id);
  g_array_append_val(kernels, id);
  double rows = plan_task_at(s->p, id)->op.sq, hr = (double)w->batch * rows * w->heads;
  tr_bufs *b = bufs_of(s);
  for (uint32_t i = 0; i < b->n_held; i++) plan_buf_reads(s->p, id, b->held[i]);
  plan_buf_reads(s->p, id, s->io->kv);
  for (int i = 0; i < 2; i++) plan_buf_writes(s->p, id, b->acc[i]);
  /* the receive buffers are made at the pass's start (buffers()) */
  if (step == 0 && b->qbufs != NONE) {
    plan_buf_writes(s->p, id, b->qbufs);
    plan_buf_writes(s->p, id, b->home);
  }
  if (backward) {
    plan_buf_out(s->p, id, hr * w->head_dim * 4.0, "dq_accum (flash backward, float32)");
    double keys = plan_task_at(s->p, id)->op.sk;
    /* `dq, dk, dv = flash_bwd(...)` (calibrate.py TokenRing.run_backward,
     * line 1656): three tensors, three blocks of the caching allocator
     * (flash-attention's mha_bwd makes each `empty_like` its q, k, v);
     * the last step's are referenced until this call returns and the
     * names are rebound (held through this kernel), the last step's until
     * the pass returns */
    static const char *const grad_names[3] = {"dq of the block (flash backward)",
                                              "dk of the block (flash backward)",
                                              "dv of the block (flash backward)"};
    double grad_bytes[3] = {hr * w->head_dim * w->elem_bytes, workload_kv_bytes(w, keys) / 2,
                            workload_kv_bytes(w, keys) / 2};
    uint32_t *grads = &b->grads[3 * r];
    for (uint32_t i = 0; i < 3; i++) {
      if (grads[i] != NONE) plan_buf_reads(s->p, id, grads[i]);
      grads[i] = plan_buf_out(s->p, id, grad_bytes[i], grad_names[i]);
    }
    /* the last step's block dQ is being sent home through this kernel
     * (`sending`, dropped after the step's wait); this one's is made
     * after the kernel (`dq.float()`), unless the queries are r's own */
    if (b->blk[r] != NONE) plan_buf_reads(s->p, id, b->blk[r]);
    b->blk[r] = NONE;
    if (j != r) {
      b->blk[r] = plan_buf_new(s->p, gpu, hr * w->head_dim * (w->grad_bytes ? w->grad_bytes : w->elem_bytes),
                               "block dq");
      plan_buf_writes_late(s->p, id, b->blk[r]);
    }
  } else {
    b->blk[r] = plan_buf_out(s->p, id, hr * (w->head_dim * w->elem_bytes + 4.0),
                             "block_out, block_lse");
  }
  return rows;
}

/* Pending hand-back of step t: rows per owner, and the group bringing it. */
typedef struct {
  int64_t group;
  double *rows;
} handback;

static void settle(const sched_ctx *s, handback *h, uint32_t step, bool backward) {
  if (h->group < 0) return;
  const workload *w = s->w;
  plan_op shape = sched_shape(w, false, backward);
  tr_bufs *b = bufs_of(s);
  /* lockstep: one merge, GPU 0's, for all */
  for (uint32_t j = 0; j < (b->lock ? 1 : w->gpus); j++) {
    if (h->rows[j] <= 0) continue;
    uint32_t id, gpu = b->lock ? PLAN_ALL : j;
    if (!backward) id = plan_merge(s->p, gpu, step, &shape, h->rows[j]);
    else /* dQ += the block's dQ: reads two float32 tensors, writes one */
      id = plan_copy(s->p, gpu, step,
                     1.5 * w->batch * h->rows[j] * w->heads * w->head_dim * w->grad_bytes);
    plan_dep(s->p, (uint32_t)h->group, id);
    plan_buf_reads(s->p, id, b->home);
    plan_buf_writes(s->p, id, b->acc[0]);
    if (!backward) {
      plan_buf_writes(s->p, id, b->acc[1]);
      /* acc.sub_(sigmoid(..) * (acc - blk.float())): two float32
       * temporaries of the block's rows at once */
      plan_buf_out(s->p, id, 2.0 * w->batch * h->rows[j] * w->heads * w->head_dim * 4.0,
                   "merge temporaries (float32)");
    }
    h->rows[j] = 0;
  }
  h->group = -1;
}

/* Pattern of the shift r -> r + k mod N (0 < k < N): the N-1 shifts are
 * patterns 0 to N-2, registered at the plan's first lockstep pass (every
 * one is used: the queries' +1, the hand-backs' -1 to -(N-1)) and shared
 * by the next, so a forward and backward store each pair once. */
static uint32_t shift_pattern(plan *p, uint32_t k) {
  uint32_t n = p->n_gpus;
  if (p->patterns->len == 0) {
    g_autofree plan_pair *pairs = g_new(plan_pair, n);
    for (uint32_t sh = 1; sh < n; sh++) {
      for (uint32_t r = 0; r < n; r++) pairs[r] = (plan_pair){r, (r + sh) % n};
      plan_pattern(p, pairs, n);
    }
  }
  g_assert(p->patterns->len == n - 1 && k > 0 && k < n);
  return k - 1;
}

static int64_t pass(const sched_ctx *s, bool backward, int64_t after) {
  const workload *w = s->w;
  plan *p = s->p;
  uint32_t n = w->gpus;
  double c = (double)w->seq_len / n, e = w->elem_bytes;
  double row = (double)w->batch * w->heads * w->head_dim; /* elements per query row */
  double lse = (double)w->batch * w->heads * 4;           /* float32 per row */
  /* what travels with the queries; what comes back per row */
  double travel = backward ? c * (3 * row * e + lse) : c * row * e;
  double back = backward ? row * (w->grad_bytes ? w->grad_bytes : e) : row * e + lse;
  g_autofree int64_t *issued = g_new(int64_t, n);
  g_autoptr(GArray) kernels = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_autofree double *rows = g_new0(double, n), *pending_rows = g_new0(double, n);
  handback pending = {-1, pending_rows};
  int64_t arrived = after, q_prev = after, last = after;
  g_autofree uint32_t *blk = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) blk[g] = NONE;
  g_autofree uint32_t *grads = g_new(uint32_t, 3 * n);
  for (uint32_t g = 0; g < 3 * n; g++) grads[g] = NONE;
  /* a full mask: every GPU's pass is GPU 0's rotated (the header) */
  bool lock = !w->causal && !p->record_segs && n > 1 && plan_lockstep(p);
  uint32_t copies = lock ? 1 : n; /* GPUs emitted: lockstep, GPU 0 for all */
  tr_bufs b = {{s->io->q, s->io->dout, s->io->o, s->io->lse}, backward ? 4 : 1, blk, {0, 0},
               UINT32_MAX, UINT32_MAX, grads, lock};
  if (n > 1) {
    double sizes = w->causal ? 1.5 * c : c; /* block rows: c, and c/2 causal */
    b.qbufs = plan_buf_new(p, PLAN_ALL, 2 * travel,
                           backward ? "q, dout, out, lse receive buffers (x2)" : "q receive buffers (x2)");
    b.home = plan_buf_new(p, PLAN_ALL, sizes * back,
                          backward ? "dq receive buffers (float32, per block size)"
                                   : "block_out, lse receive buffers (per block size)");
  }
  s->io->aux = &b;
  double f32 = 4.0 / e, q_bytes = c * row * e;
  if (backward) {
    b.acc[0] = plan_buf_new(p, PLAN_ALL, q_bytes * f32, "dq (float32)");
    b.acc[1] = plan_buf_new(p, PLAN_ALL, workload_kv_bytes(w, c) * f32, "dk, dv (float32)");
  } else {
    b.acc[0] = plan_buf_new(p, PLAN_ALL, q_bytes * f32, "out (float32)");
    b.acc[1] = plan_buf_new(p, PLAN_ALL, c * lse, "lse (float32)");
  }
  for (uint32_t t = 0; t < n; t++) {
    bool more = t + 1 < n;
    int64_t qg = -1;
    plan_issued(p, issued);
    g_array_set_size(kernels, 0);
    for (uint32_t r = 0; r < copies; r++)
      rows[r] = block(s, r, (r + n - t) % n, t, backward, arrived, kernels);
    if (more) {
      /* the hand-on is issued before the step's kernels and runs beside
       * them, as far as the hardware lets it (plan_overlap) */
      qg = plan_comm(p, t, COMM_P2P);
      if (lock) plan_xfer_pattern(p, (uint32_t)qg, shift_pattern(p, 1), travel, 1);
      else
        for (uint32_t r = 0; r < n; r++) plan_xfer_add(p, (uint32_t)qg, r, (r + 1) % n, travel);
      plan_overlap(p, kernels, (uint32_t)qg);
    }
    if (qg >= 0) {
      if (q_prev >= 0) plan_dep(p, (uint32_t)q_prev, (uint32_t)qg);
      plan_issue(p, (uint32_t)qg, issued, q_prev, false);
      /* the queries held go on; the next ones arrive */
      for (uint32_t i = 0; i < b.n_held; i++) plan_buf_reads(p, (uint32_t)qg, b.held[i]);
      plan_buf_writes(p, (uint32_t)qg, b.qbufs);
      b.held[0] = b.qbufs;
      b.n_held = 1;
    }
    settle(s, &pending, t, backward); /* last step's blocks, behind this step's kernels */
    if (t > 0) {
      uint32_t og = plan_comm(p, t, COMM_P2P);
      plan_task_at(p, og)->grads = backward;
      if (lock) { /* every block has GPU 0's rows (a full mask: > 0) */
        plan_xfer_pattern(p, og, shift_pattern(p, n - t), rows[0] * back, 1);
        pending.rows[0] = rows[0];
      } else {
        for (uint32_t r = 0; r < n; r++) {
          uint32_t j = (r + n - t) % n;
          if (rows[r] > 0) plan_xfer_add(p, og, r, j, rows[r] * back);
          pending.rows[j] = rows[r];
        }
      }
      plan_issue(p, og, NULL, -1, false);
      for (uint32_t r = 0; r < copies; r++)
        if (rows[r] > 0 && blk[r] != NONE) plan_buf_reads(p, og, blk[r]);
      plan_buf_writes(p, og, b.home);
      pending.group = og;
      last = og;
    }
    arrived = qg;
    if (qg >= 0) q_prev = qg;
  }
  settle(s, &pending, n, backward);
  /* the receive buffers are dropped at the pass's end */
  int64_t done = -1;
  for (uint32_t g = 0; g < n; g++) {
    int64_t at = p->last_compute[g];
    if (at < 0 || at == done) continue;
    done = at;
    for (uint32_t i = 0; i < 3; i++)
      if (grads[3 * g + i] != NONE) plan_buf_reads(p, (uint32_t)at, grads[3 * g + i]);
    if (b.qbufs == UINT32_MAX) continue;
    plan_buf_reads(p, (uint32_t)at, b.qbufs);
    plan_buf_reads(p, (uint32_t)at, b.home);
  }
  s->io->aux = NULL;
  return last;
}

static bool tokenring_check(const workload *w, const topology *t, GError **err) {
  (void)t;
  return sched_check_divisible(w, w->causal ? 2 : 1,
                               w->causal ? "tokenring's causal layout cuts the sequence into "
                                           "2N equal chunks"
                                         : "tokenring gives every GPU an equal chunk", err);
}

static plan *tokenring_build(const workload *w, const topology *t, bool record_segs) {
  return sched_passes(w, t, record_segs, pass);
}

const sched_ops sched_tokenring = {
    .name = "tokenring",
    .summary = "TokenRing: KV stays, Q moves one hop a step, block outputs go straight home",
    .check = tokenring_check,
    .build = tokenring_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 xl1f (sched.h): a full
     * mask is lockstep (about 4 tasks a step) along the N-1 shift patterns,
     * stored once (P^2 pairs), each step launching the hand-on's pattern
     * (kept: used every step) and one hand-back's (freed after it): 2 P
     * pairs launched at once, 4 P with room; causal lists its 2 P^2
     * transfers */
    .size = {2.2, 0, 3, 4, 0, 2, 0, 4, 4, 8, 2, 0, 4}};
