/* layer: the decoder layer's plan around a scheduler's (layer.h). */
#include "layer.h"

#include "compute.h"
#include "plan_buf.h"

uint32_t layer_tp(const workload *w) { return w->tp ? w->tp : 1; }

layer_dims layer_dims_of(const workload *w) {
  return (layer_dims){.tokens = (double)w->batch * ((double)w->seq_len / w->gpus),
                      .hidden = w->hidden, .ffn = w->ffn, .heads = w->heads,
                      .kv_heads = w->kv_heads, .head_dim = w->head_dim, .tp = layer_tp(w),
                      .elem_bytes = w->elem_bytes, .unfused = w->unfused};
}

workload layer_attention_workload(const workload *w) {
  workload a = *w;
  uint32_t tp = layer_tp(w);
  a.heads /= tp;
  a.kv_heads /= tp;
  a.scope = SCOPE_ATTENTION;
  a.tp = 1;
  return a;
}

/* What forward saves for backward, per GPU (Megatron, no recomputation). */
enum { SV_X, SV_N1, SV_H1, SV_N2, SV_FC1, SV_SWI, SV_COUNT };

typedef struct {
  plan *p;
  const topology *t;
  const workload *w;
  layer_dims d;
  uint32_t tp, sp, n;
  pass_kind pass;
  plan_append *attn;       /* the scheduler's plan, per TP rank; NULL: none */
  plan_append **ranks;     /* tp of them */
  uint32_t *saved;         /* n x SV_COUNT buffers */
  uint32_t *cur;           /* per GPU: the tensor the next op reads (UINT32_MAX: none) */
  uint32_t *weights;       /* per GPU: the layer's weights (an input: held by the caller) */
  uint32_t *group;         /* scratch: one TP group's GPUs */
  uint32_t step;
} lb;

static double act_bytes(const lb *b, double rows, double width) {
  return rows * width * b->d.elem_bytes;
}

/* The op's task on GPU g, after whatever the attention's last range left
 * for g; reads `cur` (and `extra`, UINT32_MAX none), writes a new tensor
 * of out_bytes (0: none) named `name` that becomes cur. */
static uint32_t op(lb *b, uint32_t g, layer_op which, bool backward, uint32_t extra,
                   double out_bytes, const char *name) {
  plan_op o = compute_layer_op(&b->d, which, backward);
  uint32_t id = plan_compute(b->p, g, b->step, &o);
  if (b->ranks) plan_append_after(b->ranks[g % b->tp], id);
  if (b->cur[g] != UINT32_MAX) plan_buf_reads(b->p, id, b->cur[g]);
  if (o.kind == OP_GEMM) plan_buf_reads(b->p, id, b->weights[g]);
  if (extra != UINT32_MAX) plan_buf_reads(b->p, id, extra);
  b->cur[g] = UINT32_MAX;
  if (out_bytes > 0) b->cur[g] = plan_buf_out(b->p, id, out_bytes, name);
  return id;
}

/* Saved tensor k of GPU g: written by task `task` in forward (kept when
 * no backward follows); in a backward-only pass an input. */
static uint32_t save(lb *b, uint32_t g, int k, uint32_t task, double bytes, const char *name) {
  uint32_t id = plan_buf_out(b->p, task, bytes, name);
  if (b->pass == PASS_FWD) plan_buf_keep(b->p, id);
  b->saved[g * SV_COUNT + k] = id;
  return id;
}

/* A weight gradient (float32 main grad, Megatron's main_grad) of op
 * `which`, written by its backward task, kept for the optimizer. */
static void wgrad(lb *b, uint32_t task, layer_op which) {
  plan_op o = compute_layer_op(&b->d, which, false);
  uint32_t id = plan_buf_out(b->p, task, 4.0 * o.gemm_n * o.gemm_k, "main_grad");
  plan_buf_keep(b->p, id);
}

/* One collective of every TP group over `shard` bytes per rank (a ring
 * all-gather or reduce-scatter), reading each GPU's cur (or `src`, per
 * GPU: UINT32_MAX none) and writing a tensor of out_bytes that becomes
 * cur; the next compute task of each GPU waits for it.  Returns nothing
 * at TP 1 (no collective). */
static void coll(lb *b, comm_api api, double shard, const uint32_t *src, double out_bytes,
                 const char *name, uint32_t *comm_of) {
  for (uint32_t s = 0; s < b->sp; s++) {
    for (uint32_t r = 0; r < b->tp; r++) b->group[r] = s * b->tp + r;
    uint32_t c = plan_comm(b->p, b->step, api);
    plan_coll_ring(b->p, c, b->group, b->tp, shard, b->t->gpus_per_node);
    plan_issue(b->p, c, NULL, -1, true);
    for (uint32_t r = 0; r < b->tp; r++) {
      uint32_t g = b->group[r];
      uint32_t in = src ? src[g] : b->cur[g];
      if (in != UINT32_MAX) plan_buf_reads(b->p, c, in);
      b->cur[g] = plan_buf_new(b->p, g, out_bytes, name);
      plan_buf_writes(b->p, c, b->cur[g]);
      comm_of[g] = c;
    }
  }
}

/* Per GPU, a compute op after a collective (comm_of[g], UINT32_MAX none). */
static uint32_t op_after(lb *b, uint32_t g, const uint32_t *comm_of, layer_op which,
                         bool backward, uint32_t extra, double out_bytes, const char *name) {
  uint32_t id = op(b, g, which, backward, extra, out_bytes, name);
  if (comm_of[g] != UINT32_MAX) plan_dep(b->p, comm_of[g], id);
  return id;
}

#define ALL_GPUS(g) for (uint32_t g = 0; g < b->n; g++)

static void none_of(lb *b, uint32_t *comm_of) {
  for (uint32_t g = 0; g < b->n; g++) comm_of[g] = UINT32_MAX;
}

static void forward(lb *b, const plan *attn, uint32_t attn_end) {
  const layer_dims *d = &b->d;
  double T = d->tokens, local = T / b->tp, h = d->hidden, tp = b->tp;
  double qkv = ((double)d->heads + 2.0 * d->kv_heads) * d->head_dim / tp;
  double f = d->ffn / tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  none_of(b, cm);
  ALL_GPUS(g) {
    b->saved[g * SV_COUNT + SV_X] = plan_buf_input(b->p, g, act_bytes(b, local, h), "x");
    b->cur[g] = b->saved[g * SV_COUNT + SV_X];
  }
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_NORM_ATTN, false, UINT32_MAX, 0, NULL);
    b->cur[g] = save(b, g, SV_N1, t, act_bytes(b, local, h), "norm_out");
  }
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  ALL_GPUS(g) op_after(b, g, cm, LAYER_QKV, false, UINT32_MAX, act_bytes(b, T, qkv), "qkv");
  none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_ROPE, false, UINT32_MAX, 0, NULL);
  if (attn)
    for (uint32_t r = 0; r < b->tp; r++) plan_append_range(b->ranks[r], 0, attn_end);
  b->step++;
  ALL_GPUS(g) op(b, g, LAYER_OUT_PROJ, false, UINT32_MAX, act_bytes(b, T, h), "proj_out");
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "proj_scattered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_RESID_ATTN, false, b->saved[g * SV_COUNT + SV_X], 0,
                          NULL);
    b->cur[g] = save(b, g, SV_H1, t, act_bytes(b, local, h), "resid");
  }
  none_of(b, cm);
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_NORM_MLP, false, UINT32_MAX, 0, NULL);
    b->cur[g] = save(b, g, SV_N2, t, act_bytes(b, local, h), "norm_out");
  }
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_FC1, false, UINT32_MAX, 0, NULL);
    b->cur[g] = save(b, g, SV_FC1, t, act_bytes(b, T, 2 * f), "fc1_out");
  }
  none_of(b, cm);
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_SWIGLU, false, UINT32_MAX, 0, NULL);
    b->cur[g] = save(b, g, SV_SWI, t, act_bytes(b, T, f), "swiglu_out");
  }
  ALL_GPUS(g) op(b, g, LAYER_FC2, false, UINT32_MAX, act_bytes(b, T, h), "fc2_out");
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "fc2_scattered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_RESID_MLP, false, b->saved[g * SV_COUNT + SV_H1], 0,
                          NULL);
    uint32_t out = plan_buf_out(b->p, t, act_bytes(b, local, h), "layer_out");
    plan_buf_keep(b->p, out);
    b->cur[g] = UINT32_MAX;
  }
}

static void backward(lb *b, const plan *attn, uint32_t attn_from) {
  const layer_dims *d = &b->d;
  double T = d->tokens, local = T / b->tp, h = d->hidden, tp = b->tp;
  double qkv = ((double)d->heads + 2.0 * d->kv_heads) * d->head_dim / tp;
  double q = (double)d->heads * d->head_dim / tp, f = d->ffn / tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  g_autofree uint32_t *regather = g_new(uint32_t, b->n);
  g_autofree uint32_t *dres = g_new(uint32_t, b->n);
  none_of(b, cm);
  if (b->pass == PASS_BWD) {
    /* what a forward would have saved: inputs of the pass */
    double bytes[SV_COUNT] = {act_bytes(b, local, h), act_bytes(b, local, h),
                              act_bytes(b, local, h), act_bytes(b, local, h),
                              act_bytes(b, T, 2 * f), act_bytes(b, T, f)};
    static const char *const names[SV_COUNT] = {"x", "norm_out", "resid", "norm_out",
                                                "fc1_out", "swiglu_out"};
    ALL_GPUS(g) for (int k = 0; k < SV_COUNT; k++)
      b->saved[g * SV_COUNT + k] = plan_buf_input(b->p, g, bytes[k], names[k]);
  }
#define SAVED(g, k) b->saved[(g) * SV_COUNT + (k)]
  ALL_GPUS(g) b->cur[g] = plan_buf_input(b->p, g, act_bytes(b, local, h), "dout");
  b->step++;
  /* the MLP block's residual: the gradient goes both ways */
  ALL_GPUS(g) {
    op(b, g, LAYER_RESID_MLP, true, UINT32_MAX, act_bytes(b, local, h), "dresid");
    dres[g] = b->cur[g];
  }
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "dgathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_FC2, true, SAVED(g, SV_SWI), act_bytes(b, T, f),
                          "dswiglu");
    wgrad(b, t, LAYER_FC2);
  }
  none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_SWIGLU, true, SAVED(g, SV_FC1), act_bytes(b, T, 2 * f), "dfc1");
  if (b->tp > 1) {
    ALL_GPUS(g) regather[g] = SAVED(g, SV_N2);
    g_autofree uint32_t *keep_cur = g_memdup2(b->cur, b->n * sizeof *b->cur);
    coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), regather, act_bytes(b, T, h), "gathered",
         cm);
    ALL_GPUS(g) {
      regather[g] = b->cur[g];
      b->cur[g] = keep_cur[g];
    }
  }
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_FC1, true,
                          b->tp > 1 ? regather[g] : SAVED(g, SV_N2), act_bytes(b, T, h), "dnorm");
    wgrad(b, t, LAYER_FC1);
  }
  none_of(b, cm);
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "dscattered", cm);
  b->step++;
  ALL_GPUS(g) op_after(b, g, cm, LAYER_NORM_MLP, true, SAVED(g, SV_H1), act_bytes(b, local, h),
                       "dresid");
  none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_RESID_ATTN, true, dres[g], act_bytes(b, local, h), "dresid");
  ALL_GPUS(g) dres[g] = b->cur[g];
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "dgathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_OUT_PROJ, true, UINT32_MAX, act_bytes(b, T, q),
                          "dattn_out");
    wgrad(b, t, LAYER_OUT_PROJ);
  }
  none_of(b, cm);
  if (attn)
    for (uint32_t r = 0; r < b->tp; r++)
      plan_append_range(b->ranks[r], attn_from, attn->tasks->len);
  b->step++;
  ALL_GPUS(g) op(b, g, LAYER_ROPE, true, UINT32_MAX, act_bytes(b, T, qkv), "dqkv");
  if (b->tp > 1) {
    ALL_GPUS(g) regather[g] = SAVED(g, SV_N1);
    g_autofree uint32_t *keep_cur = g_memdup2(b->cur, b->n * sizeof *b->cur);
    coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), regather, act_bytes(b, T, h), "gathered",
         cm);
    ALL_GPUS(g) {
      regather[g] = b->cur[g];
      b->cur[g] = keep_cur[g];
    }
  }
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_QKV, true, b->tp > 1 ? regather[g] : SAVED(g, SV_N1),
                          act_bytes(b, T, h), "dnorm");
    wgrad(b, t, LAYER_QKV);
  }
  none_of(b, cm);
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "dscattered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = op_after(b, g, cm, LAYER_NORM_ATTN, true, SAVED(g, SV_X), 0, NULL);
    plan_buf_reads(b->p, t, dres[g]);
    uint32_t dx = plan_buf_out(b->p, t, act_bytes(b, local, h), "dx");
    plan_buf_keep(b->p, dx);
  }
#undef SAVED
}

/* Where the scheduler's backward begins: after its pass barrier (forward
 * then backward), at 0 (backward only), at the end (forward only). */
static uint32_t backward_start(const plan *a, pass_kind pass) {
  if (pass == PASS_BWD) return 0;
  if (pass == PASS_FWD) return a->tasks->len;
  for (uint32_t i = a->tasks->len; i-- > 0;) {
    const plan_task *t = plan_task_at(a, i);
    if (t->kind == TASK_COMM && t->api == COMM_BARRIER) return i;
  }
  g_error("layer: a forward-then-backward plan without its pass barrier");
}

plan *layer_build(const sched_ops *s, const workload *w, const topology *t, bool with_attention,
                  bool record_segs) {
  lb b = {.t = t, .w = w, .d = layer_dims_of(w), .tp = layer_tp(w), .sp = w->gpus,
          .pass = w->pass};
  b.n = b.tp * b.sp;
  b.p = plan_new(b.n, record_segs);
  b.saved = g_new(uint32_t, (size_t)b.n * SV_COUNT);
  b.cur = g_new(uint32_t, b.n);
  b.group = g_new(uint32_t, b.tp);
  b.weights = g_new(uint32_t, b.n);
  for (uint32_t g = 0; g < b.n; g++) {
    b.cur[g] = UINT32_MAX;
    /* the layer's parameters on this GPU in the layer's dtype (Megatron's
     * bf16 weights; the optimizer's float32 copies belong to the model
     * scope) */
    b.weights[g] = plan_buf_input(b.p, g, compute_layer_params(&b.d) * w->elem_bytes, "weights");
  }
  plan *attn = NULL;
  if (with_attention) {
    workload a = layer_attention_workload(w);
    plan *built = s->build(&a, t, record_segs);
    attn = built->has_lockstep ? plan_expand(built) : built;
    if (attn != built) plan_free(built);
    b.ranks = g_new(plan_append *, b.tp);
    g_autofree uint32_t *gpus = g_new(uint32_t, b.sp);
    for (uint32_t r = 0; r < b.tp; r++) {
      for (uint32_t sr = 0; sr < b.sp; sr++) gpus[sr] = sr * b.tp + r;
      b.ranks[r] = plan_append_new(b.p, attn, gpus);
    }
  }
  uint32_t split = attn ? backward_start(attn, w->pass) : 0;
  if (w->pass != PASS_BWD) forward(&b, attn, split);
  if (w->pass != PASS_FWD) backward(&b, attn, split);
  plan_finish(b.p);
  if (b.ranks)
    for (uint32_t r = 0; r < b.tp; r++) plan_append_free(b.ranks[r]);
  g_free(b.ranks);
  plan_free(attn);
  g_free(b.saved);
  g_free(b.cur);
  g_free(b.weights);
  g_free(b.group);
  return b.p;
}

double layer_model_flops(const plan *p) {
  double sum = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE) continue;
    plan_op o = t->op;
    o.backward = false;
    double copies = t->gpu == PLAN_ALL ? p->n_gpus : 1;
    sum += copies * compute_op_flops(&o) * (t->op.backward ? 2 : 1);
  }
  return sum;
}
