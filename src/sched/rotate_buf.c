/* rotate_buf: buffer declarations of rotate plans (rotate_buf.h). */
#include "rotate_buf.h"

#include <string.h>

#define NONE UINT32_MAX

struct rotate_buf {
  plan *p;
  const workload *w;
  uint32_t n;
  double kv_bytes, grad_scale, q_bytes, lse_bytes;
  const char *kv_name;
  bool backward;
  sched_io io;
  uint32_t *kv;       /* per GPU: the KV chunk it holds */
  uint32_t pending;   /* this step's received chunk, NONE before the group */
  uint32_t *dkv;      /* per GPU: the dK/dV accumulator it holds (received), NONE */
  uint32_t *step_dkv; /* per GPU: 1 where it ran kernels this step, else NONE */
  uint32_t step_all;  /* 1 where lockstep kernels ran this step, else NONE */
  uint32_t out, lse, dq, blk_dq, blk_dkv; /* pass-wide */
  uint32_t block_out, block_lse;          /* the last kernel's, for its merge */
  uint32_t state;     /* linear forward: the last state, for its apply */
  uint32_t *seen;     /* scratch: distinct ids */
};

rotate_buf *rotate_buf_new(plan *p, const workload *w, double kv_bytes, double grad_scale,
                           const char *kv_name) {
  rotate_buf *b = g_new0(rotate_buf, 1);
  b->p = p;
  b->w = w;
  b->n = w->gpus;
  b->kv_bytes = kv_bytes;
  b->grad_scale = grad_scale;
  b->q_bytes = sched_rows_bytes(w, w->heads);
  b->lse_bytes = 4.0 * w->batch * ((double)w->seq_len / w->gpus) * w->heads;
  b->kv_name = kv_name ? kv_name : "next_k, next_v";
  memset(&b->io, 0xff, sizeof b->io);
  b->io.late = false;
  b->io.end_task = -1;
  b->io.aux = NULL;
  b->io.n_keep = 0;
  b->kv = g_new(uint32_t, b->n);
  b->dkv = g_new(uint32_t, b->n);
  b->step_dkv = g_new(uint32_t, b->n);
  b->seen = g_new(uint32_t, b->n);
  return b;
}

void rotate_buf_free(rotate_buf *b) {
  if (!b) return;
  g_free(b->kv); g_free(b->dkv); g_free(b->step_dkv); g_free(b->seen);
  g_free(b);
}

static void fill(uint32_t *a, uint32_t n, uint32_t v) {
  for (uint32_t i = 0; i < n; i++) a[i] = v;
}

void rotate_buf_pass(rotate_buf *b, bool backward) {
  plan *p = b->p;
  b->backward = backward;
  sched_io_pass(p, b->w, &b->io, backward);
  fill(b->kv, b->n, b->io.kv);
  fill(b->dkv, b->n, NONE);
  fill(b->step_dkv, b->n, NONE);
  b->pending = b->step_all = b->state = NONE;
  b->out = b->lse = b->dq = b->blk_dq = b->blk_dkv = NONE;
  if (b->w->attention != ATTN_SOFTMAX) return;
  double f32 = 4.0 / b->w->elem_bytes; /* float32 bytes per element byte */
  if (!backward) {
    b->out = plan_buf_new(p, PLAN_ALL, b->q_bytes * f32, "out (float32)");
    b->lse = plan_buf_new(p, PLAN_ALL, b->lse_bytes, "lse (float32)");
    return;
  }
  b->blk_dq = plan_buf_new(p, PLAN_ALL, b->q_bytes, "block_dq_buffer");
  b->blk_dkv = plan_buf_new(p, PLAN_ALL, b->kv_bytes, "block_dk_buffer, block_dv_buffer");
  b->dq = plan_buf_new(p, PLAN_ALL, b->q_bytes * f32, "dq (float32)");
}

const sched_io *rotate_buf_io(const rotate_buf *b) { return &b->io; }

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Reads every distinct id of ids[0..n) (NONE skipped) by task t, in
 * ascending order (sorted: n log n where the GPUs hold n of their own). */
static void read_distinct(rotate_buf *b, uint32_t t, const uint32_t *ids, uint32_t n) {
  memcpy(b->seen, ids, n * sizeof(uint32_t));
  qsort(b->seen, n, sizeof(uint32_t), cmp_u32);
  for (uint32_t i = 0; i < n; i++)
    if (b->seen[i] != NONE && (i == 0 || b->seen[i] != b->seen[i - 1]))
      plan_buf_reads(b->p, t, b->seen[i]);
}

void rotate_buf_group(rotate_buf *b, uint32_t comm, bool grads) {
  plan *p = b->p;
  if (plan_xfer_count(p, plan_task_at(p, comm)) == 0) return; /* one ring rank: nothing moves */
  if (!grads) {
    read_distinct(b, comm, b->kv, b->n);
    b->pending = plan_buf_out(p, comm, b->kv_bytes, b->kv_name);
    return;
  }
  /* what each GPU sends: `dk = block_dk_buffer + next_dk`, a new float32
   * sum made once its kernels are done and the last accumulator has
   * arrived (d_kv_comm.wait()), as this group starts; or, where the mask
   * skipped the step, the arrived accumulator itself */
  read_distinct(b, comm, b->dkv, b->n);
  double acc = b->kv_bytes * b->grad_scale;
  if (b->step_all != NONE) {
    uint32_t sum = plan_buf_new(p, PLAN_ALL, acc, "dk, dv (float32)");
    plan_buf_writes(p, comm, sum);
    plan_buf_reads(p, comm, sum);
  } else {
    for (uint32_t g = 0; g < b->n; g++) {
      if (b->step_dkv[g] == NONE) continue;
      uint32_t sum = plan_buf_new(p, g, acc, "dk, dv (float32)");
      plan_buf_writes(p, comm, sum);
      plan_buf_reads(p, comm, sum);
    }
  }
  uint32_t next = plan_buf_out(p, comm, b->kv_bytes * b->grad_scale, "next_dk, next_dv");
  fill(b->dkv, b->n, next);
  fill(b->step_dkv, b->n, NONE);
  b->step_all = NONE;
}

void rotate_buf_kernel(rotate_buf *b, uint32_t id) {
  plan *p = b->p;
  const plan_task *t = plan_task_at(p, id);
  plan_op op = t->op;
  uint32_t g = t->gpu;
  double rows = (double)op.batch * op.sq * op.heads; /* query rows of this task */
  if (op.kind != OP_COPY) plan_buf_reads(p, id, g == PLAN_ALL ? b->kv[0] : b->kv[g]);
  if (op.kind == OP_LIN_STATE && !b->backward) {
    b->state = plan_buf_out(p, id, 4.0 * op.batch * op.heads * op.head_dim * op.head_dim,
                            "kv_state (float32)");
    return;
  }
  if (op.kind == OP_LIN_APPLY && !b->backward && b->state != NONE) {
    plan_buf_reads(p, id, b->state);
    b->state = NONE;
  }
  if (op.kind == OP_ATTN && !b->backward) {
    b->block_out = plan_buf_out(p, id, rows * op.head_dim * op.elem_bytes, "block_out");
    b->block_lse = plan_buf_out(p, id, rows * 4.0, "block_lse");
    plan_buf_writes(p, id, b->out);
    plan_buf_writes(p, id, b->lse);
    return;
  }
  if (!b->backward) return;
  if (op.kind == OP_ATTN) {
    plan_buf_out(p, id, rows * op.head_dim * 4.0, "dq_accum (flash backward, float32)");
    plan_buf_writes(p, id, b->blk_dq);
    plan_buf_writes(p, id, b->blk_dkv);
    plan_buf_writes(p, id, b->dq);
  }
  /* this GPU (every GPU, lockstep) makes a new dK/dV sum this step */
  if (g == PLAN_ALL) b->step_all = 1;
  else b->step_dkv[g] = 1;
}

void rotate_buf_merge(rotate_buf *b, uint32_t id) {
  plan *p = b->p;
  const plan_op *op = &plan_task_at(p, id)->op;
  /* update_out_and_lse: the block's float32 copy and two float32
   * temporaries of the out-of-place update beside the running output
   * (calibration/h200x2-mem: ring's forward peak is at the first merge) */
  plan_buf_out(p, id, 3.0 * op->batch * op->sq * op->heads * op->head_dim * 4.0,
               "update_out_and_lse temporaries (float32)");
  plan_buf_reads(p, id, b->block_out);
  plan_buf_reads(p, id, b->block_lse);
  /* the KV chunk held (`k`, `v`) is referenced until the step's loop
   * body ends, after the merge (`k, v = next_k, next_v`) */
  uint32_t g = plan_task_at(p, id)->gpu;
  plan_buf_reads(p, id, g == PLAN_ALL ? b->kv[0] : b->kv[g]);
  plan_buf_writes(p, id, b->out);
  plan_buf_writes(p, id, b->lse);
}

void rotate_buf_step_end(rotate_buf *b) {
  if (b->pending != NONE) fill(b->kv, b->n, b->pending);
  b->pending = NONE;
}

void rotate_buf_pass_end(rotate_buf *b) {
  plan *p = b->p;
  /* the final conversions read the accumulators (out.to(q.dtype), dq.to) */
  uint32_t acc[2] = {b->backward ? b->dq : b->out, b->backward ? NONE : b->lse};
  int64_t done = -1;
  for (uint32_t g = 0; g < b->n; g++) {
    int64_t t = p->last_compute[g];
    if (t < 0 || t == done) continue;
    done = t;
    for (int i = 0; i < 2; i++)
      if (acc[i] != NONE) plan_buf_reads(p, (uint32_t)t, acc[i]);
  }
  /* ring_flash_attn converts after its loop, the step's tensors gone */
  sched_io_end(p, &b->io, b->backward, true);
}
