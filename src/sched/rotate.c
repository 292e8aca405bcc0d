/* rotate: steps of overlapped transfer and compute. */
#include "rotate.h"

#include "rotate_buf.h"

#include <string.h>

struct rotate_emit {
  plan *p;
  const workload *w;
  uint32_t comm;          /* group being filled */
  uint32_t gpu, step;
  bool backward;
  double grad_scale;      /* dK/dV accumulator bytes per KV byte */
  double byte_scale;      /* of the group being filled: 1, or grad_scale */
  int64_t arrived;        /* comm group that brought this step's KV, -1 none */
  int64_t pattern;        /* plan pattern of ops.pairs, -1 none */
  int64_t grads_wait;     /* backward: a dK/dV group this step's kernels also
                             wait for (rotate_ops.grads_then_ahead), -1 none */
  int64_t grads_arrived;  /* backward: group that brought the dK/dV accumulator
                             this step adds to its own, -1 none */
  bool *started;          /* per GPU: has a kernel in this phase */
  int call_merges;        /* while a variable-length call is open (rotate_mark
                             to rotate_varlen_call): whether its kernels merge,
                             the GPU having had an output before the call
                             (1) or not (0); -1: none open */
  GArray *step_kernels;   /* kernels of the current step (uint32) */
  rotate_buf *buf;        /* what the plan allocates (rotate_buf.h) */
};

bool rotate_records_segs(const rotate_emit *e) { return e->p->record_segs; }

void rotate_xfer_all(rotate_emit *e, double bytes, uint32_t msgs) {
  g_assert(e->pattern >= 0);
  plan_xfer_pattern(e->p, e->comm, (uint32_t)e->pattern, bytes * e->byte_scale, msgs);
}

void rotate_xfer_pairs(rotate_emit *e, const plan_pair *pairs, uint32_t n, int64_t *slot,
                       double bytes, uint32_t msgs) {
  if (*slot < 0) *slot = plan_pattern(e->p, pairs, n);
  plan_xfer_pattern(e->p, e->comm, (uint32_t)*slot, bytes * e->byte_scale, msgs);
}

/* Whether the GPU (all GPUs: lockstep) being emitted has had a kernel in
 * this pass; then it has. */
static bool started_once(rotate_emit *e) {
  uint32_t g = e->gpu == PLAN_ALL ? 0 : e->gpu;
  bool was = e->started[g];
  if (e->gpu == PLAN_ALL) memset(e->started, 1, e->p->n_gpus * sizeof(bool));
  else e->started[g] = true;
  return was;
}

/* A task of the step, a kernel or one beside them: after what the step
 * waits for, and before the step's dK/dV hop.  The gradient sums' buffers
 * are rotate_buf's, declared with the kernels, so they stop here. */
static void step_task(rotate_emit *e, uint32_t id) {
  if (e->arrived >= 0) plan_dep(e->p, (uint32_t)e->arrived, id);
  if (e->grads_wait >= 0) plan_dep(e->p, (uint32_t)e->grads_wait, id);
  g_array_append_val(e->step_kernels, id);
}

/* A kernel of the step (or a task whose buffers rotate_buf declares as a
 * kernel's): a step task through rotate_buf. */
static void step_kernel(rotate_emit *e, uint32_t id) {
  step_task(e, id);
  rotate_buf_kernel(e->buf, id);
}

/* Bytes of a float32 accumulator's elements per element of the inputs'
 * dtype: the running output, and dQ, dK/dV where the workload keeps them
 * in float32 (grad_bytes). */
#define F32_BYTES 4.0

/* A copy task standing for `ops` PyTorch ops of `bytes` read and written
 * in all (each op a kernel and a host issue: compute.c), `mixed` where
 * they add two dtypes. */
static uint32_t sum_copy(rotate_emit *e, double bytes, uint32_t ops, bool mixed) {
  uint32_t id = plan_copy(e->p, e->gpu, e->step, bytes);
  plan_task_at(e->p, id)->op.block = ops;
  plan_task_at(e->p, id)->op.mixed = mixed;
  step_task(e, id);
  return id;
}

/* Elements of K and V (each in the inputs' dtype) of `tokens` tokens, the
 * `share` of the KV heads a kernel holds. */
static double kv_elems_of(const workload *w, double tokens, double share) {
  return workload_kv_bytes(w, tokens) * share / w->elem_bytes;
}

/* The gradient sums around one backward kernel of a ring of two GPUs or
 * more (one GPU runs one flash call, as a layer without SP does), as ring_flash_attn's
 * backward runs them (scripts/calibrate/calibrate.py RingPass.run_backward
 * and fold; the same pattern in its double-ring and USP programs): dQ in
 * float32, the pass's first block's made from it (block_dq.to(float32):
 * bf16 read, float32 written), every later one added into it (dq[:, sl] +=
 * block_dq: float32 read and written, bf16 read); the dK/dV of the KV held
 * summed in float32, from zeros at the GPU's first block (torch.zeros of
 * its chunk's dK/dV), each block's dK and dV added (two adds of float32
 * and bf16), once what earlier holders added has arrived.  A GPU's first
 * block's ops are two tasks (the copy and zeros; the adds), a later
 * block's one (its three adds): as many tasks as a forward's merges.
 * Measured on one H200 (calibration/h200x1-bwd-small/fold-n1.jsonl): at
 * 3K tokens of 32 x 128 heads dQ's add 47 us, the two dK/dV adds 110 us,
 * zeros 22 us, the backward kernel 1.3 ms. */
static void grad_sums(rotate_emit *e, plan_op k, bool first) {
  const plan_op *sh = &k; /* a copy: plan_copy may move the tasks */
  const workload *w = e->w;
  double eb = sh->elem_bytes, gb = e->grad_scale * eb;
  double q_elems = sh->batch * sh->sq * sh->heads * (double)sh->head_dim;
  double share = (double)sh->heads / w->heads; /* of the KV heads, in a head-split kernel */
  double kv_elems = kv_elems_of(w, sh->sk, share);
  double adds = kv_elems * (2 * gb + eb); /* dK's and dV's */
  uint32_t id;
  if (first) {
    double chunk = kv_elems_of(w, (double)w->seq_len / w->gpus, share);
    sum_copy(e, q_elems * (eb + F32_BYTES) + chunk * gb, 2, false);
    id = sum_copy(e, adds, 2, gb != eb);
  } else {
    id = sum_copy(e, q_elems * (2 * F32_BYTES + eb) + adds, 3, true);
  }
  if (e->grads_arrived >= 0) plan_dep(e->p, (uint32_t)e->grads_arrived, id);
}

void rotate_kernel(rotate_emit *e, bool causal, const plan_seg *q, uint32_t nq,
                   const plan_seg *k, uint32_t nk) {
  rotate_kernel_heads(e, 0, e->w->heads, causal, q, nq, k, nk);
}

void rotate_kernel_heads(rotate_emit *e, uint32_t head_off, uint32_t heads, bool causal,
                         const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk) {
  plan_op shape = sched_shape(e->w, causal, e->backward);
  shape.head_off = head_off;
  shape.heads = heads;
  uint32_t id = plan_attn(e->p, e->gpu, e->step, &shape, q, nq, k, nk);
  step_kernel(e, id);
  /* a variable-length call's kernels are one output for all their
   * documents: they merge into an earlier call's, never into each other,
   * and the backward's gradient sums start at the first call and add from
   * the next (the first call's document parts each start theirs, so the
   * zeroing of the dK/dV sum is counted once a document there) */
  bool merges = started_once(e);
  if (e->call_merges >= 0) merges = e->call_merges;
  if (merges && !e->backward)
    rotate_buf_merge(e->buf, plan_merge(e->p, e->gpu, e->step, &shape, plan_task_at(e->p, id)->op.sq));
  if (e->backward && e->p->n_gpus > 1) grad_sums(e, plan_task_at(e->p, id)->op, !merges);
}

void rotate_kernel_diag_pairs(rotate_emit *e, double diag_pairs) {
  g_assert(e->step_kernels->len > 0);
  uint32_t id = g_array_index(e->step_kernels, uint32_t, e->step_kernels->len - 1);
  plan_task_at(e->p, id)->op.diag_pairs = diag_pairs;
}

uint32_t rotate_mark(rotate_emit *e) {
  e->call_merges = e->started[e->gpu == PLAN_ALL ? 0 : e->gpu];
  return e->p->tasks->len;
}

void rotate_varlen_call(rotate_emit *e, uint32_t mark) {
  e->call_merges = -1;
  sched_varlen_call(e->p, mark);
}

void rotate_kernel_gathers(rotate_emit *e, double tokens) {
  g_assert(e->step_kernels->len > 0);
  uint32_t id = g_array_index(e->step_kernels, uint32_t, e->step_kernels->len - 1);
  uint32_t buf = plan_buf_out(e->p, id, workload_kv_bytes(e->w, tokens), "keys gathered (torch.cat)");
  /* referenced through the kernel's merge (`del o, blse, kv` after it) */
  uint32_t last = e->p->tasks->len - 1;
  if (last != id && plan_task_at(e->p, last)->op.kind == OP_MERGE) plan_buf_reads(e->p, last, buf);
}


static double seg_tokens(const plan_seg *s, uint32_t n) {
  double t = 0;
  for (uint32_t i = 0; i < n; i++) t += s[i].len;
  return t;
}

/* The memory-bound steps of a linear Ring backward step around its
 * kernels, as the measured program runs them (scripts/calibrate
 * calibrate.py LinRing.run_backward; GPU times in
 * calibration/h200x2-linfid/lingpu-n1.jsonl): before, zero_ of the step's
 * dK/dV accumulator (2 x B x c x H x D in the gradient dtype: written
 * once); after needed kernels, acc[0] += dK, acc[1] += dV (each element:
 * the accumulator read and written, the gradient read), and for another
 * chunk's keys dQ += dQ (read two, write one); then, from the second step
 * on, acc += the accumulator that arrived (read two, write one) once it is
 * here.  Each is priced by the bytes it moves (OP_COPY). */
static void linear_grad_steps(rotate_emit *e, const plan_op *shape, bool needed, bool own,
                              double q_tokens, double k_tokens, bool before) {
  double gb = e->grad_scale * shape->elem_bytes, eb = shape->elem_bytes;
  double row = (double)shape->batch * shape->heads * shape->head_dim;
  double acc = 2 * k_tokens * row; /* accumulator elements */
  if (before) {
    step_kernel(e, plan_copy(e->p, e->gpu, e->step, acc * gb));
    return;
  }
  /* float32 += bf16: two dtypes, which compute prices slower per byte */
  if (needed) {
    uint32_t id = plan_copy(e->p, e->gpu, e->step, acc * (2 * gb + eb));
    plan_task_at(e->p, id)->op.mixed = gb != eb;
    step_kernel(e, id);
  }
  if (needed && !own) step_kernel(e, plan_copy(e->p, e->gpu, e->step, 3 * eb * q_tokens * row));
  if (e->grads_arrived >= 0) {
    uint32_t id = plan_copy(e->p, e->gpu, e->step, acc * 3 * gb);
    plan_task_at(e->p, id)->on_arrival = true;
    plan_dep(e->p, (uint32_t)e->grads_arrived, id);
    step_kernel(e, id);
  }
}

/* The kernels of rotate_linear. */
static void linear_kernels(rotate_emit *e, const plan_op *sh, bool own, const plan_seg *q,
                           uint32_t nq, const plan_seg *k, uint32_t nk) {
  plan_op shape = *sh;
  if (own) {
    step_kernel(e, plan_linear(e->p, e->gpu, e->step, &shape, OP_LIN_INTRA, q, nq, k, nk));
  } else if (!e->backward) {
    /* forward: M = K^T V of the arrived chunk, then O += Q M */
    shape.causal = false;
    step_kernel(e, plan_linear(e->p, e->gpu, e->step, &shape, OP_LIN_STATE, NULL, 0, k, nk));
    shape.into = true; /* into what the earlier steps gave */
    step_kernel(e, plan_linear(e->p, e->gpu, e->step, &shape, OP_LIN_APPLY, q, nq, k, nk));
  } else {
    /* backward: dQ from M (cached in forward) and dM = Q^T dO, then the
     * arrived keys' dK, dV from dM: what the dK/dV accumulators carry on */
    shape.causal = false;
    step_kernel(e, plan_linear(e->p, e->gpu, e->step, &shape, OP_LIN_APPLY, q, nq, k, nk));
    step_kernel(e, plan_linear(e->p, e->gpu, e->step, &shape, OP_LIN_STATE, q, nq, k, nk));
  }
}

void rotate_linear(rotate_emit *e, uint32_t head_off, uint32_t heads, bool needed, bool own,
                   const plan_seg *q, uint32_t nq, const plan_seg *k, uint32_t nk) {
  plan_op shape = sched_shape(e->w, e->w->causal, e->backward);
  shape.head_off = head_off;
  shape.heads = heads;
  double qt = seg_tokens(q, nq), kt = seg_tokens(k, nk);
  if (e->backward) linear_grad_steps(e, &shape, needed, own, qt, kt, true);
  if (needed) linear_kernels(e, &shape, own, q, nq, k, nk);
  if (e->backward) linear_grad_steps(e, &shape, needed, own, qt, kt, false);
  if (needed) started_once(e);
}

/* A communication group for the given step's pattern, after `after` and
 * after the compute tasks `issued` (a snapshot) that its GPUs had issued
 * before it (plan_issue).  grads: the group moves dK/dV accumulators. */
static uint32_t add_group(const rotate_ops *ops, const void *self, rotate_emit *e,
                          uint32_t step, int64_t after, const int64_t *issued, bool grads) {
  e->comm = plan_comm(e->p, step, COMM_P2P);
  plan_task_at(e->p, e->comm)->grads = grads;
  bool cast = ops->grads_cast_step && step >= ops->grads_cast_step;
  e->byte_scale = grads && !cast ? e->grad_scale : 1.0;
  ops->xfers(self, e, step);
  rotate_buf_group(e->buf, e->comm, grads);
  if (after >= 0) plan_dep(e->p, (uint32_t)after, e->comm);
  plan_issue(e->p, e->comm, issued, after, false);
  return e->comm;
}

/* A softmax pass's results made in the inputs' dtype once its last step
 * is done, as ring_flash_attn's functions end (calibrate.py RingPass.run
 * and run_backward): forward, the float32 running output cast to bf16 and
 * the float32 log-sum-exp laid out (B, H, S) (`lse.squeeze(-1).transpose(1,
 * 2).contiguous()`); backward, the float32 dQ and the dK/dV that came home
 * (after the last dK/dV hop, `dkv_last`) cast to bf16.  Measured on one
 * H200 at 3K tokens of 32 x 128 heads: the dQ cast 18 us, dK/dV's 36 us
 * (calibration/h200x1-bwd-small/fold-n1.jsonl). */
static void cast_results(rotate_emit *e, bool backward, int64_t dkv_last) {
  const workload *w = e->w;
  double eb = w->elem_bytes, gb = e->grad_scale * eb, tokens = (double)w->seq_len / w->gpus;
  double q_elems = w->batch * tokens * w->heads * (double)w->head_dim;
  /* one lockstep task where every stream ends in the same lockstep one */
  int64_t end = e->p->last_compute[0];
  bool all = plan_lockstep(e->p) && (end < 0 || plan_task_at(e->p, (uint32_t)end)->gpu == PLAN_ALL);
  for (uint32_t g = 0; g < (all ? 1 : e->p->n_gpus); g++) {
    uint32_t gpu = all ? PLAN_ALL : g;
    plan_copy(e->p, gpu, e->step, q_elems * (F32_BYTES + eb)); /* output or dQ */
    if (!backward) {
      plan_copy(e->p, gpu, e->step, 2 * F32_BYTES * w->batch * w->heads * tokens);
      continue;
    }
    uint32_t id = plan_copy(e->p, gpu, e->step, kv_elems_of(w, tokens, 1) * (gb + eb));
    if (dkv_last >= 0) plan_dep(e->p, (uint32_t)dkv_last, id);
  }
}

/* One pass; `after` is a task the pass must wait for (-1 none). Returns the
 * last communication group. */
static int64_t build_pass(const rotate_ops *ops, const void *self, rotate_emit *e,
                          bool backward, int64_t after) {
  uint32_t n = e->p->n_gpus;
  e->backward = backward;
  e->grads_wait = -1;
  rotate_buf_pass(e->buf, backward);
  if (ops->prologue) after = ops->prologue(self, e->p, backward, after, rotate_buf_io(e->buf));
  e->arrived = after;
  memset(e->started, 0, n * sizeof(bool));
  int64_t kv_prev = after, dkv_prev = after;
  /* the last dK/dV hop on the KV hops' communicator (-1: none) */
  int64_t dkv_stream = -1;
  /* the transfer in flight of ops.ahead, the step it is due at and its
   * receive buffer (-1: none) */
  int64_t ahead = -1;
  uint32_t ahead_due = 0, ahead_buf = 0;
  g_autofree int64_t *issued = g_new(int64_t, n);
  for (uint32_t t = 0; t < ops->n_steps; t++) {
    int64_t kv = -1;
    bool more = t + 1 < ops->n_steps;
    plan_issued(e->p, issued);
    g_array_set_size(e->step_kernels, 0);
    e->step = t;
    if (ahead >= 0 && ahead_due == t) { /* this step's KV came ahead */
      e->arrived = ahead;
      rotate_buf_hold(e->buf, ahead_buf);
      ahead = -1;
    }
    uint32_t lead = more && ops->ahead ? ops->ahead(self, t) : 0;
    e->grads_arrived = backward && t > 0 ? dkv_prev : -1;
    if (ops->alike && !e->p->record_segs && plan_lockstep(e->p) && ops->alike(self, t)) {
      e->gpu = PLAN_ALL;
      ops->kernels(self, e, 0, t);
    } else {
      for (uint32_t g = 0; g < n; g++) {
        e->gpu = g;
        ops->kernels(self, e, g, t);
      }
    }
    if (lead) {
      /* issued before the step's kernels, after the KV it sends arrived,
       * on its own communicator (not after the step chain's groups) */
      g_assert(ahead < 0 && t + lead < ops->n_steps);
      uint32_t c = plan_comm(e->p, t, COMM_P2P);
      e->comm = c;
      e->byte_scale = 1.0;
      ops->ahead_xfers(self, e, t);
      ahead_buf = rotate_buf_ahead(e->buf, c);
      if (e->arrived >= 0) plan_dep(e->p, (uint32_t)e->arrived, c);
      plan_issue(e->p, c, issued, e->arrived, false);
      plan_overlap(e->p, e->step_kernels, c);
      ahead = c;
      ahead_due = t + lead;
    }
    if (more && !(ahead >= 0 && ahead_due == t + 1)) {
      /* The next step's KV moves beside this step's kernels (double
       * buffering): the program issues the transfer before them (the host
       * pays for it there: plan_overlap).  Emitted after them so that it
       * can name them: whether it makes progress beside them is the
       * hardware's rule, which exec applies (a flash kernel that holds
       * every SM leaves it none where the topology's kernel_blocks_comm
       * says so). */
      kv = add_group(ops, self, e, t, kv_prev, issued, false);
      /* one NCCL stream with the dK/dV hops (rotate_ops.grads_own_comm):
       * the previous step's, issued before this one, runs first */
      if (dkv_stream >= 0) plan_dep(e->p, (uint32_t)dkv_stream, (uint32_t)kv);
      plan_overlap(e->p, e->step_kernels, (uint32_t)kv);
    }
    e->grads_wait = -1;
    if (backward) {
      plan_issued(e->p, issued);
      uint32_t d = add_group(ops, self, e, t, dkv_prev, issued, true);
      plan_dep_all(e->p, e->step_kernels, d);
      if (!ops->grads_own_comm) {
        /* behind this step's KV hop on their one stream (issued before
         * the step's kernels) */
        if (kv >= 0) plan_dep(e->p, (uint32_t)kv, d);
        dkv_stream = d;
      }
      dkv_prev = d;
      if (ops->grads_then_ahead && ops->grads_then_ahead(self, t)) {
        /* issued once d is done (the program waits for it first, and
         * the next step's kernels wait for it too), after the cast */
        if (ops->grads_cast_step == t + 1) rotate_buf_grads_cast(e->buf);
        uint32_t c = plan_comm(e->p, t, COMM_P2P);
        plan_task_at(e->p, c)->grads = true;
        e->comm = c;
        e->byte_scale = ops->grads_cast_step && t + 1 >= ops->grads_cast_step ? 1.0
                                                                              : e->grad_scale;
        ops->ahead_xfers(self, e, t);
        rotate_buf_grads_ahead(e->buf, c);
        plan_dep(e->p, d, c);
        plan_issue(e->p, c, issued, d, false);
        e->grads_wait = d;
        dkv_prev = c;
      }
    }
    e->arrived = kv; /* or, at ahead_due, the group ahead */
    if (kv >= 0) kv_prev = kv;
    rotate_buf_step_end(e->buf);
  }
  int64_t last = backward ? dkv_prev : kv_prev;
  if (ops->epilogue) last = ops->epilogue(self, e->p, backward, last);
  rotate_buf_pass_end(e->buf);
  /* after the memory's pass end, which reads these from the last group
   * or kernel (rotate_buf_pass_end) */
  if (e->w->attention != ATTN_LINEAR && e->p->n_gpus > 1) cast_results(e, backward, dkv_prev);
  return last;
}

plan *rotate_build(const rotate_ops *ops, const void *self, const workload *w,
                   bool record_segs) {
  plan *p = plan_new(w->gpus, record_segs);
  rotate_emit e = {.p = p, .w = w, .call_merges = -1,
                   .grad_scale = w->grad_bytes ? (double)w->grad_bytes / w->elem_bytes : 1.0,
                   .started = g_new0(bool, w->gpus), .pattern = -1, .grads_wait = -1,
                   .step_kernels = g_array_new(FALSE, FALSE, sizeof(uint32_t))};
  if (ops->n_pairs) e.pattern = plan_pattern(p, ops->pairs, ops->n_pairs);
  e.buf = rotate_buf_new(p, w, ops->kv_bytes ? ops->kv_bytes : workload_kv_bytes(w, (double)w->seq_len / w->gpus),
                         e.grad_scale, ops->kv_name, ops->grads_in_place);
  if (ops->grads_stripe) rotate_buf_grads_stripe(e.buf);
  if (ops->kv_split) rotate_buf_kv_split(e.buf);
  int64_t last = -1;
  if (w->pass != PASS_BWD) last = build_pass(ops, self, &e, false, -1);
  if (w->pass != PASS_FWD) {
    /* the backward pass starts once every GPU's forward is done */
    if (w->pass == PASS_FWDBWD) last = plan_barrier(p, ops->n_steps, last);
    build_pass(ops, self, &e, true, last);
  }
  g_free(e.started);
  g_array_free(e.step_kernels, TRUE);
  rotate_buf_free(e.buf);
  plan_finish(p);
  return p;
}
