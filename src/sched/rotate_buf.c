/* rotate_buf: buffer declarations of rotate plans (rotate_buf.h). */
#include "rotate_buf.h"

#include <string.h>

#define NONE UINT32_MAX

struct rotate_buf {
  plan *p;
  const workload *w;
  uint32_t n;
  double kv_bytes, grad_scale, q_bytes, lse_bytes;
  double grad_scale_given; /* grad_scale before a cast (rotate_buf_grads_cast) */
  const char *kv_name;
  bool backward;
  sched_io io;
  uint32_t *kv;       /* per GPU: the KV chunk it holds */
  uint32_t pending;   /* this step's received chunk, NONE before the group */
  bool in_place;      /* backward adds into the received dK/dV (zigzag) */
  bool stripe;        /* ...only at steps > the GPU, and receives into the one
                         it sent (stripe_flash_attn_backward) */
  uint32_t step;      /* the step being declared */
  uint32_t *dkv;      /* per GPU: the dK/dV accumulator that arrived, NONE */
  uint32_t *sum;      /* per GPU: the one it sent last (`dk`, `dv`), NONE */
  uint32_t *step_dkv; /* per GPU: its last kernel of this step, else NONE */
  uint32_t step_all;  /* the last lockstep kernel of this step, else NONE */
  int64_t last_group; /* backward: the last dK/dV group, -1 none */
  uint32_t out, lse, dq, blk_dq, blk_dkv; /* pass-wide */
  uint32_t block_out, block_lse;          /* the last kernel's, for its merge */
  uint32_t state;     /* linear forward: the last state, for its apply */
  /* linear layers (calibrate.py LinRing, the program the LASP papers'
   * Ring comparison was measured with here): two KV receive buffers and,
   * backward, three float32 dK/dV accumulators made at the pass's start;
   * per GPU the step's dq, dk, dv (this step's, the last step's) */
  uint32_t lin_bufs, lin_dacc;
  uint32_t *lin_step, *lin_prev;
  uint32_t *seen;     /* scratch: distinct ids */
  uint32_t *last_kernel; /* per GPU: its last kernel of the pass, NONE */
  /* kv_split: K and V, their receive buffers and float32 dK/dV sums are
   * two tensors each (rotate_buf_kv_split); twins: the first of each such
   * pair of buffers (its V twin is the next id), whose every use is the
   * pair's */
  bool kv_split;
  GHashTable *twins;
};

rotate_buf *rotate_buf_new(plan *p, const workload *w, double kv_bytes, double grad_scale,
                           const char *kv_name, bool in_place) {
  rotate_buf *b = g_new0(rotate_buf, 1);
  b->p = p;
  b->w = w;
  b->n = w->gpus;
  b->kv_bytes = kv_bytes;
  b->grad_scale = b->grad_scale_given = grad_scale;
  b->q_bytes = sched_rows_bytes(w, w->heads);
  b->lse_bytes = 4.0 * w->batch * ((double)w->seq_len / w->gpus) * w->heads;
  b->kv_name = kv_name ? kv_name : "next_k, next_v";
  b->in_place = in_place;
  memset(&b->io, 0xff, sizeof b->io);
  b->io.late = false;
  b->io.end_task = -1;
  b->io.aux = NULL;
  b->io.n_keep = 0;
  b->kv = g_new(uint32_t, b->n);
  b->dkv = g_new(uint32_t, b->n);
  b->sum = g_new(uint32_t, b->n);
  b->step_dkv = g_new(uint32_t, b->n);
  b->seen = g_new(uint32_t, b->n);
  b->lin_step = g_new(uint32_t, b->n);
  b->last_kernel = g_new(uint32_t, b->n);
  b->lin_prev = g_new(uint32_t, b->n);
  b->twins = g_hash_table_new(g_direct_hash, g_direct_equal);
  return b;
}

void rotate_buf_free(rotate_buf *b) {
  if (!b) return;
  g_free(b->kv); g_free(b->dkv); g_free(b->sum); g_free(b->lin_step); g_free(b->lin_prev);
  g_free(b->last_kernel); g_free(b->step_dkv); g_free(b->seen);
  g_hash_table_destroy(b->twins);
  g_free(b);
}

static void fill(uint32_t *a, uint32_t n, uint32_t v) {
  for (uint32_t i = 0; i < n; i++) a[i] = v;
}

void rotate_buf_grads_stripe(rotate_buf *b) { b->stripe = true; }

void rotate_buf_kv_split(rotate_buf *b) { b->kv_split = true; }

/* The V twin of buffer `buf` (a pair's first), else NONE. */
static uint32_t twin(const rotate_buf *b, uint32_t buf) {
  return g_hash_table_contains(b->twins, GUINT_TO_POINTER(buf)) ? buf + 1 : NONE;
}

/* A use of `buf` and, where it is a pair's K, of its V (made, read and
 * dropped right after it, as the program's statements do: `next_k,
 * next_v = ...`, `dk = ...; dv = ...`). */
static void use_on(rotate_buf *b, uint32_t task, uint32_t buf, uint32_t gpu, bool write,
                   plan_buf_when when) {
  plan_buf_use_on(b->p, task, buf, gpu, write, when);
  uint32_t v = twin(b, buf);
  if (v != NONE) plan_buf_use_on(b->p, task, v, gpu, write, when);
}
static void reads(rotate_buf *b, uint32_t t, uint32_t buf) {
  use_on(b, t, buf, PLAN_ALL, false, PLAN_BUF_DURING);
}
static void writes(rotate_buf *b, uint32_t t, uint32_t buf) {
  use_on(b, t, buf, PLAN_ALL, true, PLAN_BUF_DURING);
}
static void reads_early(rotate_buf *b, uint32_t t, uint32_t buf) {
  use_on(b, t, buf, PLAN_ALL, false, PLAN_BUF_EARLY);
}
static void reads_late(rotate_buf *b, uint32_t t, uint32_t buf) {
  use_on(b, t, buf, PLAN_ALL, false, PLAN_BUF_LATE);
}
static void writes_late(rotate_buf *b, uint32_t t, uint32_t buf) {
  use_on(b, t, buf, PLAN_ALL, true, PLAN_BUF_LATE);
}

/* A KV-sized buffer of `bytes` (K and V together) on GPU gpu: two
 * tensors of half the size where `split` (ring_flash_attn's `k`, `v`),
 * named k_name and v_name, else one (a packed (B, c, 2, H, D) tensor, as
 * calibrate.py's Pass makes), named `packed`; returns the first id. */
static uint32_t kv_new(rotate_buf *b, bool split, uint32_t gpu, double bytes, const char *packed,
                       const char *k_name, const char *v_name) {
  if (!split) return plan_buf_new(b->p, gpu, bytes, packed);
  uint32_t k = plan_buf_new(b->p, gpu, bytes / 2, k_name);
  uint32_t v = plan_buf_new(b->p, gpu, bytes / 2, v_name);
  g_assert(v == k + 1);
  g_hash_table_add(b->twins, GUINT_TO_POINTER(k));
  return k;
}

/* ... written by task `task`, on its GPU (plan_buf_out's). */
static uint32_t kv_out(rotate_buf *b, uint32_t task, double bytes, const char *packed,
                       const char *k_name, const char *v_name) {
  const plan_task *t = plan_task_at(b->p, task);
  uint32_t id = kv_new(b, b->kv_split, t->kind == TASK_COMPUTE ? t->gpu : PLAN_ALL, bytes,
                       packed, k_name, v_name);
  writes(b, task, id);
  return id;
}

void rotate_buf_pass(rotate_buf *b, bool backward) {
  b->grad_scale = b->grad_scale_given;
  plan *p = b->p;
  b->backward = backward;
  b->step = 0;
  /* the program's dK and dV are converted apart where it holds them so */
  if (b->kv_split) sched_io_pass_apart(p, b->w, &b->io, backward);
  else sched_io_pass(p, b->w, &b->io, backward);
  fill(b->kv, b->n, b->io.kv);
  fill(b->dkv, b->n, NONE);
  fill(b->sum, b->n, NONE);
  fill(b->step_dkv, b->n, NONE);
  b->last_group = -1;
  b->pending = b->step_all = b->state = NONE;
  b->out = b->lse = b->dq = b->blk_dq = b->blk_dkv = NONE;
  b->lin_bufs = b->lin_dacc = NONE;
  fill(b->last_kernel, b->n, NONE);
  fill(b->lin_step, b->n, NONE);
  fill(b->lin_prev, b->n, NONE);
  if (b->w->attention != ATTN_SOFTMAX) return;
  double f32 = 4.0 / b->w->elem_bytes; /* float32 bytes per element byte */
  if (!backward) {
    b->out = plan_buf_new(p, PLAN_ALL, b->q_bytes * f32, "out (float32)");
    b->lse = plan_buf_new(p, PLAN_ALL, b->lse_bytes, "lse (float32)");
    return;
  }
  b->blk_dq = plan_buf_new(p, PLAN_ALL, b->q_bytes, "block_dq_buffer");
  /* two tensors in every program: ring_flash_attn's two torch.empty,
   * flash backward's dk and dv in calibrate.py's (flash-attention's
   * mha_bwd makes dq, dk, dv apart) */
  b->blk_dkv = kv_new(b, true, PLAN_ALL, b->kv_bytes, "block_dk_buffer, block_dv_buffer",
                      "block_dk_buffer", "block_dv_buffer");
  b->dq = plan_buf_new(p, PLAN_ALL, b->q_bytes * f32, "dq (float32)");
}

const sched_io *rotate_buf_io(const rotate_buf *b) { return &b->io; }

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Reads every distinct id of ids[0..n) (NONE skipped) by task t, in
 * ascending order.  A lockstep step's GPUs hold one buffer and a per-GPU
 * step's hold theirs in GPU order, both ascending already: read as they
 * are (a sort of every step's n ids was two fifths of a 4,096-GPU ring
 * forward); else sorted (n log n). */
static void read_distinct(rotate_buf *b, uint32_t t, const uint32_t *ids, uint32_t n) {
  const uint32_t *s = ids;
  for (uint32_t i = 1; i < n; i++)
    if (ids[i] < ids[i - 1]) {
      memcpy(b->seen, ids, n * sizeof(uint32_t));
      qsort(b->seen, n, sizeof(uint32_t), cmp_u32);
      s = b->seen;
      break;
    }
  for (uint32_t i = 0; i < n; i++)
    if (s[i] != NONE && (i == 0 || s[i] != s[i - 1])) reads(b, t, s[i]);
}

/* Buffer `buf` is read by task t at `when`, or, where t is a lockstep
 * kernel and buf one GPU's (steps that were not alike before), early by
 * the group `comm` instead. */
static void touch(rotate_buf *b, uint32_t t, uint32_t comm, uint32_t buf, plan_buf_when when) {
  if (buf == NONE) return;
  const plan_task *k = plan_task_at(b->p, t);
  if (k->kind == TASK_COMPUTE && k->gpu == PLAN_ALL && plan_buf_at(b->p, buf)->gpu != PLAN_ALL)
    reads_early(b, comm, buf);
  else if (when == PLAN_BUF_LATE)
    reads_late(b, t, buf);
  else
    reads(b, t, buf);
}

/* The dK/dV sum GPU g (PLAN_ALL: every GPU, lockstep) sends from this
 * step, whose last kernel is k (NONE: it ran none).
 * Ring (ring_flash_attn_backward): `dk = block_dk_buffer + next_dk`, a new
 * float32 tensor made right after the kernel, while the one it sent last
 * step (`dk`) and the arrived one (`next_dk`) are still referenced: three
 * live at the add; the old `dk` goes with the assignment.  The first step
 * makes it from the block (`block_dk_buffer.to(float32)`).  A GPU the
 * mask skips sends the arrived one on (`dk, dv = next_dk, next_dv`).
 * Zigzag (zigzag_ring_flash_attn_backward): adds into the arrived one
 * (`dk = next_dk; dk[...] += block_dk_buffer`), no new tensor past the
 * first step. */
static uint32_t step_sum(rotate_buf *b, uint32_t comm, uint32_t g, uint32_t k) {
  uint32_t i = g == PLAN_ALL ? 0 : g, arrived = b->dkv[i], old = b->sum[i];
  double acc = b->kv_bytes * b->grad_scale;
  /* stripe: at step s GPU g holds GPU g - s's KV, a later GPU's when s > g */
  bool in_place = b->in_place || (b->stripe && g != PLAN_ALL && b->step > g);
  if (k == NONE) {
    if (!b->in_place && !b->stripe && old != NONE && old != arrived)
      use_on(b, comm, old, g, false, PLAN_BUF_EARLY);
    return arrived;
  }
  if (in_place && arrived != NONE) {
    writes(b, k, arrived);
    return arrived;
  }
  uint32_t sum = kv_new(b, b->kv_split, g, acc, "dk, dv (float32)", "dk (float32)", "dv (float32)");
  writes_late(b, k, sum);
  /* the old sum is held to the add; the arrived one, whose group may not
   * be done when the kernel is (the program waits for it: the add is
   * where the model's timing and the program's part), is held by this
   * step's group until it starts */
  if (!b->in_place) touch(b, k, comm, old, PLAN_BUF_LATE);
  return sum;
}

/* Linear layers' pair of KV receive buffers (`self.bufs`), made with the
 * pass's first task that touches them. */
static uint32_t lin_bufs(rotate_buf *b) {
  if (b->lin_bufs == NONE)
    b->lin_bufs = plan_buf_new(b->p, PLAN_ALL, 2 * b->kv_bytes, "bufs: KV receive buffers (x2)");
  return b->lin_bufs;
}

void rotate_buf_group(rotate_buf *b, uint32_t comm, bool grads) {
  plan *p = b->p;
  bool moves = plan_xfer_count(p, plan_task_at(p, comm)) > 0; /* else one ring rank */
  if (!moves && grads) {
    /* ring_flash_attn on one rank still makes its float32 sums
     * (`block_dk_buffer.to(float32)`), converted at the end */
    if (b->step_all != NONE) fill(b->sum, b->n, step_sum(b, comm, PLAN_ALL, b->step_all));
    else
      for (uint32_t g = 0; g < b->n; g++)
        if (b->step_dkv[g] != NONE) b->sum[g] = step_sum(b, comm, g, b->step_dkv[g]);
    /* the block gradients go once converted (the measured USP program,
     * calibrate.py USP.attend_bwd: `del bq, bk, bv`; ring_flash_attn
     * would hold its block buffers to its return, through the output
     * conversions, which here follow in the Ulysses gather) */
    for (uint32_t g = 0; g < b->n; g++) {
      uint32_t k = b->step_all != NONE ? b->step_all : b->step_dkv[g];
      if (k == NONE) continue;
      if (b->blk_dq != NONE) reads_late(b, k, b->blk_dq);
      if (b->blk_dkv != NONE) reads_late(b, k, b->blk_dkv);
      if (b->step_all != NONE) break;
    }
    fill(b->step_dkv, b->n, NONE);
    b->step_all = NONE;
    return;
  }
  if (!moves) return;
  bool linear = b->w->attention == ATTN_LINEAR;
  if (!grads && linear) {
    /* `recv = self.bufs[t % 2]`: the pair made at the pass's start */
    read_distinct(b, comm, b->kv, b->n);
    writes(b, comm, lin_bufs(b));
    b->pending = b->lin_bufs;
    return;
  }
  if (!grads) {
    read_distinct(b, comm, b->kv, b->n);
    /* `next_k, next_v = send_recv_kv(k, v)` makes the receive buffer
     * before the step's kernels are issued; where the hardware holds the
     * transfer back until they end, exec still makes it there (exec_mem:
     * a group's allocations at the kernels it overlaps) */
    b->pending = kv_out(b, comm, b->kv_bytes, b->kv_name, "next_k", "next_v");
    return;
  }
  if (linear) { /* the accumulator held is sent from the three, into them */
    if (b->lin_dacc != NONE) writes(b, comm, b->lin_dacc);
    fill(b->step_dkv, b->n, NONE);
    b->step_all = NONE;
    b->last_group = comm;
    return;
  }
  g_autofree uint32_t *sent = g_new(uint32_t, b->n); /* what each GPU sends */
  bool all = b->step_all != NONE;
  if (all) fill(sent, b->n, step_sum(b, comm, PLAN_ALL, b->step_all));
  else
    for (uint32_t g = 0; g < b->n; g++) sent[g] = step_sum(b, comm, g, b->step_dkv[g]);
  /* each GPU's copy: the sum it sends, read while it is sent; what
   * arrived, referenced until send_recv_kv returns the next receive
   * buffer (`next_dk, next_dv = ...`), unless it is what is sent */
  for (uint32_t g = 0; g < b->n; g++) {
    uint32_t on = all ? PLAN_ALL : g;
    if (sent[g] != NONE) use_on(b, comm, sent[g], on, false, PLAN_BUF_DURING);
    if (b->dkv[g] != NONE && b->dkv[g] != sent[g] && !b->in_place)
      use_on(b, comm, b->dkv[g], on, false, PLAN_BUF_EARLY);
    if (all) break;
  }
  if ((b->in_place || b->stripe) && b->sum[0] != NONE) {
    /* zigzag and stripe receive into the buffer they sent last step
     * (dk_comm_buffer, dv_comm_buffer alternate with dk, dv) */
    for (uint32_t g = 0; g < b->n; g++) {
      if (b->sum[g] != NONE) use_on(b, comm, b->sum[g], all ? PLAN_ALL : g, true,
                                             PLAN_BUF_DURING);
      if (all) break;
    }
    memcpy(b->dkv, b->sum, b->n * sizeof(uint32_t));
  } else {
    bool comm_buffer = b->in_place || b->stripe;
    uint32_t next = kv_out(b, comm, b->kv_bytes * b->grad_scale,
                           comm_buffer ? "dk_comm_buffer, dv_comm_buffer (float32)"
                                       : "next_dk, next_dv",
                           comm_buffer ? "dk_comm_buffer (float32)" : "next_dk",
                           comm_buffer ? "dv_comm_buffer (float32)" : "next_dv");
    fill(b->dkv, b->n, next);
  }
  memcpy(b->sum, sent, b->n * sizeof(uint32_t));
  fill(b->step_dkv, b->n, NONE);
  b->step_all = NONE;
  b->last_group = comm;
}

uint32_t rotate_buf_ahead(rotate_buf *b, uint32_t comm) {
  /* the held chunk is read while it is sent; the receive buffer is made
   * as the group is issued (`torch.empty_like(start)`, InternEvo's
   * double ring) and held from the step that attends it */
  read_distinct(b, comm, b->kv, b->n);
  return kv_out(b, comm, b->kv_bytes, "KV from the window before", "K from the window before",
                "V from the window before");
}

void rotate_buf_hold(rotate_buf *b, uint32_t buf) { fill(b->kv, b->n, buf); }

void rotate_buf_grads_ahead(rotate_buf *b, uint32_t comm) {
  /* InternEvo's double ring: `done` (what the last hop around brought)
   * is sent across into `torch.empty_like(done)`; the buffer that hop was
   * sent from goes with `del dkv`, and the next round's first hop around
   * receives into a new one (`spare` is None) */
  read_distinct(b, comm, b->dkv, b->n);
  fill(b->dkv, b->n,
       kv_out(b, comm, b->kv_bytes * b->grad_scale, "dK/dV from the window before",
              "dK from the window before", "dV from the window before"));
  fill(b->sum, b->n, NONE);
  b->last_group = comm;
}

void rotate_buf_grads_cast(rotate_buf *b) { b->grad_scale = 1.0; }

/* Linear layers' backward task `id`: the float32 accumulators from the
 * pass's start; a kernel's dq, dk, dv (`self.dq, dk, dv = ...`, `dq, dm
 * = ...`, `dk, dv = ...`) into the step's buffer of its GPU, the last
 * step's referenced until these names are rebound, through this step's
 * kernels. */
static void linear_backward(rotate_buf *b, uint32_t id) {
  plan *p = b->p;
  const plan_task *t = plan_task_at(p, id);
  uint32_t g = t->gpu, i = g == PLAN_ALL ? 0 : g;
  if (b->lin_dacc == NONE)
    b->lin_dacc = plan_buf_new(p, PLAN_ALL, 3 * b->kv_bytes * b->grad_scale,
                               "dacc: dK/dV accumulators (float32, x3)");
  writes(b, id, b->lin_dacc);
  if (t->op.kind == OP_COPY) return;
  if (b->lin_step[i] == NONE) {
    uint32_t step = plan_buf_new(p, g, b->q_bytes + b->kv_bytes, "dq, dk, dv of the step");
    if (g == PLAN_ALL) fill(b->lin_step, b->n, step);
    else b->lin_step[g] = step;
  }
  writes(b, id, b->lin_step[i]);
  touch(b, id, id, b->lin_prev[i], PLAN_BUF_DURING);
}

void rotate_buf_kernel(rotate_buf *b, uint32_t id) {
  plan *p = b->p;
  const plan_task *t = plan_task_at(p, id);
  plan_op op = t->op;
  uint32_t g = t->gpu;
  double rows = (double)op.batch * op.sq * op.heads; /* query rows of this task */
  if (op.kind != OP_COPY) {
    if (g == PLAN_ALL) fill(b->last_kernel, b->n, id);
    else b->last_kernel[g] = id;
  }
  /* backward: the held KV is referenced past the kernel, to the add that
   * follows it (`k, v = next_k, next_v` ends the step) */
  if (op.kind != OP_COPY) {
    uint32_t kv = g == PLAN_ALL ? b->kv[0] : b->kv[g];
    if (b->backward) reads_late(b, id, kv);
    else reads(b, id, kv);
  }
  /* ring_flash_attn's forward saves q, k, v, out and softmax_lse for its
   * backward (ctx.save_for_backward), whose kernels read them with dout:
   * declared, so that a layer's chain holds them from its forward to its
   * backward (in a step of many layers, each layer's) */
  if (op.kind == OP_ATTN) {
    reads(b, id, b->io.q);
    if (b->backward) {
      reads(b, id, b->io.o);
      reads(b, id, b->io.lse);
      reads(b, id, b->io.dout);
    }
  }
  if (op.kind == OP_LIN_INTRA) sched_lin_intra_workspace(p, id);
  /* forward: the own chunk's intra-chunk kernel makes the output, to
   * which later steps add */
  if (op.kind == OP_LIN_INTRA && !b->backward) writes(b, id, b->io.o);
  /* made before the loop, whether or not anything arrives in them */
  if (op.kind != OP_COPY && b->w->attention == ATTN_LINEAR) writes(b, id, lin_bufs(b));
  if (b->backward && b->w->attention == ATTN_LINEAR) linear_backward(b, id);
  if (op.kind == OP_LIN_STATE && !b->backward) {
    b->state = plan_buf_out(p, id, 4.0 * op.batch * op.heads * op.head_dim * op.head_dim,
                            "kv_state (float32)");
    return;
  }
  if (op.kind == OP_LIN_APPLY && !b->backward && b->state != NONE) {
    reads(b, id, b->state);
    b->state = NONE;
  }
  if (op.kind == OP_ATTN && !b->backward) {
    b->block_out = plan_buf_out(p, id, rows * op.head_dim * op.elem_bytes, "block_out");
    b->block_lse = plan_buf_out(p, id, rows * 4.0, "block_lse");
    writes(b, id, b->out);
    writes(b, id, b->lse);
    return;
  }
  if (!b->backward) return;
  if (op.kind == OP_ATTN) {
    plan_buf_out(p, id, rows * op.head_dim * 4.0, "dq_accum (flash backward, float32)");
    writes(b, id, b->blk_dq);
    writes(b, id, b->blk_dkv);
    /* `dq = block_dq_buffer.to(float32)` after the first kernel, then
     * `dq += block_dq_buffer` */
    writes_late(b, id, b->dq);
  }
  /* this GPU (every GPU, lockstep) makes its dK/dV sum after this step */
  if (g == PLAN_ALL) b->step_all = id;
  else b->step_dkv[g] = id;
}

void rotate_buf_merge(rotate_buf *b, uint32_t id) {
  plan *p = b->p;
  const plan_op *op = &plan_task_at(p, id)->op;
  /* update_out_and_lse: the block's float32 copy and two float32
   * temporaries of the out-of-place update beside the running output
   * (calibration/h200x2-mem: ring's forward peak is at the first merge):
   * three tensors, each its own block of the caching allocator (one
   * buffer of three times the size would be one block, which a later
   * request of one KV chunk's size splits: exec_alloc.h), as
   * `block_out.to(float32)`, `out - block_out` and the product
   * `sigmoid(block_lse - lse) * (out - block_out)` are made */
  double rows_f32 = (double)op->batch * op->sq * op->heads * op->head_dim * 4.0;
  plan_buf_out(p, id, rows_f32, "update_out_and_lse: block_out.to(float32)");
  plan_buf_out(p, id, rows_f32, "update_out_and_lse: out - block_out (float32)");
  plan_buf_out(p, id, rows_f32, "update_out_and_lse: sigmoid(...) * (out - block_out) (float32)");
  reads(b, id, b->block_out);
  reads(b, id, b->block_lse);
  /* the KV chunk held (`k`, `v`) is referenced until the step's loop
   * body ends, after the merge (`k, v = next_k, next_v`) */
  uint32_t g = plan_task_at(p, id)->gpu;
  reads(b, id, g == PLAN_ALL ? b->kv[0] : b->kv[g]);
  writes(b, id, b->out);
  writes(b, id, b->lse);
}

void rotate_buf_step_end(rotate_buf *b) {
  b->step++;
  if (b->pending != NONE) fill(b->kv, b->n, b->pending);
  b->pending = NONE;
  for (uint32_t g = 0; g < b->n; g++)
    if (b->lin_step[g] != NONE) {
      b->lin_prev[g] = b->lin_step[g];
      b->lin_step[g] = NONE;
    }
}

void rotate_buf_pass_end(rotate_buf *b) {
  plan *p = b->p;
  /* the final conversions read the accumulators (out.to(q.dtype), dq.to) */
  uint32_t acc[2] = {b->backward ? b->dq : b->out, b->backward ? NONE : b->lse};
  /* backward converts once the last dK/dV hop is home (`d_kv_comm.wait()`
   * before `next_dk.to(q.dtype)`), unless tasks follow it (USP's gather) */
  bool after_group = b->backward && b->last_group >= 0;
  for (uint32_t g = 0; after_group && g < b->n; g++)
    if (p->last_compute[g] > b->last_group) after_group = false;
  if (after_group) {
    uint32_t t = (uint32_t)b->last_group;
    b->io.end_task = t;
    for (int i = 0; i < 2; i++)
      if (acc[i] != NONE) reads_late(b, t, acc[i]);
    if (b->dkv[0] != NONE) reads_late(b, t, b->dkv[0]); /* `next_dk.to(q.dtype)` */
    if (b->lin_dacc != NONE) reads_late(b, t, b->lin_dacc);
    /* the block buffers are the function's locals, gone as it returns */
    if (b->blk_dq != NONE) reads_late(b, t, b->blk_dq);
    if (b->blk_dkv != NONE) reads_late(b, t, b->blk_dkv);
  } else {
    /* tasks follow the ring (USP's gather): the block buffers go as the
     * ring's function returns, after its last kernel's add */
    for (uint32_t g = 0; g < b->n; g++) {
      uint32_t k = b->last_kernel[g];
      if (k == NONE || (g > 0 && k == b->last_kernel[g - 1])) continue;
      if (b->blk_dq != NONE) reads_late(b, k, b->blk_dq);
      if (b->blk_dkv != NONE) reads_late(b, k, b->blk_dkv);
      /* and its accumulators are converted then, into what follows */
      for (int i = 0; i < 2; i++)
        if (acc[i] != NONE) reads_late(b, k, acc[i]);
    }
    int64_t done = -1;
    for (uint32_t g = 0; g < b->n; g++) {
      int64_t t = p->last_compute[g];
      if (t < 0 || t == done) continue;
      done = t;
      for (int i = 0; i < 2; i++)
        if (acc[i] != NONE && b->last_kernel[g] == NONE) reads(b, (uint32_t)t, acc[i]);
      /* one ring rank: its own float32 dK/dV sum, converted */
      uint32_t home = b->backward && b->last_group < 0 ? b->sum[g] : NONE;
      if (home != NONE) touch(b, (uint32_t)t, (uint32_t)t, home, PLAN_BUF_DURING);
      if (b->lin_dacc != NONE) reads(b, (uint32_t)t, b->lin_dacc);
    }
  }
  /* linear: the receive buffers and the last step's gradients go as the
   * pass returns */
  int64_t done = -1;
  for (uint32_t g = 0; g < b->n; g++) {
    int64_t t = p->last_compute[g];
    if (t < 0) continue;
    if (t != done && b->lin_bufs != NONE) reads(b, (uint32_t)t, b->lin_bufs);
    uint32_t prev = b->lin_step[g] != NONE ? b->lin_step[g] : b->lin_prev[g];
    if (prev != NONE) touch(b, (uint32_t)t, (uint32_t)t, prev, PLAN_BUF_DURING);
    done = t;
  }
  /* ring_flash_attn converts after its loop, the step's tensors gone */
  sched_io_end(p, &b->io, b->backward, true);
}
