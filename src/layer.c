/* layer: the decoder layer's plan around a scheduler's, and the whole
 * training step of a model (layer.h). */
#include "layer.h"

#include <string.h>

#include "compute.h"
#include "layers.h"
#include "plan_buf.h"

uint32_t layer_tp(const workload *w) { return w->tp ? w->tp : 1; }
uint32_t layer_dp(const workload *w) { return w->scope == SCOPE_MODEL && w->dp ? w->dp : 1; }
uint32_t layer_job_gpus(const workload *w) {
  return w->scope == SCOPE_ATTENTION ? w->gpus : layer_tp(w) * w->gpus * layer_dp(w);
}

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
  a.dp = 1;
  return a;
}

void layer_view_init(layer_view *v, const workload *w, const topology *t) {
  uint32_t tp = layer_tp(w);
  v->t = *t;
  v->owned = false;
  if (tp == 1 || w->scope == SCOPE_ATTENTION) return;
  uint32_t N = t->n_gpus, n = N / tp, per = t->gpus_per_node ? t->gpus_per_node : N;
  v->t.n_gpus = n;
  /* TP rank 0's GPUs per node: a node of m GPUs holds m / tp of them
   * where TP divides it; TP groups spanning nodes leave one a node */
  v->t.gpus_per_node = per % tp == 0 ? per / tp : 1;
  if (v->t.gpus_per_node > n) v->t.gpus_per_node = n;
  v->t.direct = g_new(uint8_t, (size_t)n * n);
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < n; j++)
      v->t.direct[(size_t)i * n + j] = t->direct[(size_t)i * tp * N + (size_t)j * tp];
  v->owned = true;
}

void layer_view_clear(layer_view *v) {
  if (v->owned) g_free(v->t.direct);
  v->owned = false;
}

/* What forward saves for backward, per GPU and layer (Megatron, no
 * recomputation): the layer input, the two norms' outputs (the GPU's
 * shard), the attention block's residual, fc1's and SwiGLU's outputs. */
enum { SV_X, SV_N1, SV_H1, SV_N2, SV_FC1, SV_SWI, SV_COUNT };

typedef struct {
  plan *p;
  const topology *t;
  const workload *w;
  layer_dims d;
  uint32_t tp, sp, dp, n, layers;
  uint32_t grad_group;     /* SP x DP: the ranks holding the same weights */
  pass_kind pass;
  bool model;              /* scope model: embedding, head, loss, gradients, optimizer */
  uint32_t zero;
  recompute_kind recompute;
  const plan *attn;        /* the current layer's scheduler plan (expanded); NULL: none */
  uint32_t split;          /* its first backward task */
  const plan *attns[ATTN_KINDS]; /* the scheduler's plan of each kind of layer */
  uint32_t splits[ATTN_KINDS];
  const attn_kind *kind;   /* per layer */
  int64_t *grad_last;      /* per GPU: the last group on its gradient group's NCCL stream */
  plan_append **ranks;     /* the current layer's appenders, tp x dp; NULL: none */
  uint32_t *saved;         /* layers x n x SV_COUNT buffers */
  uint32_t *weights;       /* layers x n: each layer's weights on each GPU (inputs) */
  uint32_t *wcur;          /* per GPU: the weights the GEMMs read now */
  uint32_t *grads;         /* n x 4: the current layer's weight gradients */
  uint32_t *cur;           /* per GPU: the tensor the next op reads (UINT32_MAX: none) */
  uint32_t *group;         /* scratch: one group's GPUs */
  uint32_t step;
  bool transient;          /* a forward whose activations are not saved (full recompute) */
  uint32_t mbs;            /* micro-batches (gradient accumulation) */
  bool last_mb;            /* the step's last micro-batch: its gradients are reduced */
  uint32_t layer;          /* the layer whose backward is being built (layers: the ends) */
  uint32_t *main_grad;     /* (layers + 1) x n x 4: each GEMM's float32 main grad, NONE: none yet */
} lb;

#define NONE UINT32_MAX
#define ALL_GPUS(g) for (uint32_t g = 0; g < b->n; g++)
#define SAVED(l, g, k) b->saved[((size_t)(l) * b->n + (g)) * SV_COUNT + (k)]

static double act_bytes(const lb *b, double rows, double width) {
  return rows * width * b->d.elem_bytes;
}

/* Parameters of one layer on one GPU (its TP shard). */
static double layer_params(const lb *b) { return compute_layer_params(&b->d); }
/* The embedding's, the LM head's (untied, as Llama 3's) and the final
 * norm's on one GPU: the vocabulary split by TP (Megatron's
 * VocabParallelEmbedding and column-parallel output layer). */
static double outer_params(const lb *b) {
  return 2.0 * b->w->vocab / b->tp * b->d.hidden + b->d.hidden;
}

/* The op's task on GPU g, after whatever the attention's last range left
 * for g; reads `cur` (and `extra`, NONE none) and, a GEMM, the layer's
 * weights; writes a new tensor of out_bytes (0: none) named `name` that
 * becomes cur. */
static uint32_t emit(lb *b, uint32_t g, const plan_op *o, uint32_t extra, double out_bytes,
                     const char *name) {
  uint32_t id = plan_compute(b->p, g, b->step, o);
  if (b->ranks) plan_append_after(b->ranks[(g / (b->tp * b->sp)) * b->tp + g % b->tp], id);
  if (b->cur[g] != NONE) plan_buf_reads(b->p, id, b->cur[g]);
  if (o->kind == OP_GEMM && b->wcur[g] != NONE) plan_buf_reads(b->p, id, b->wcur[g]);
  if (extra != NONE) plan_buf_reads(b->p, id, extra);
  b->cur[g] = NONE;
  if (out_bytes > 0) b->cur[g] = plan_buf_out(b->p, id, out_bytes, name);
  return id;
}

static uint32_t op(lb *b, uint32_t g, layer_op which, bool backward, uint32_t extra,
                   double out_bytes, const char *name) {
  plan_op o = compute_layer_op(&b->d, which, backward);
  return emit(b, g, &o, extra, out_bytes, name);
}

/* Saved tensor k of layer l on GPU g, written by `task`: kept when no
 * backward follows; not saved at all in a forward that full recomputation
 * repeats (freed after its last forward reader). */
static uint32_t save(lb *b, uint32_t l, uint32_t g, int k, uint32_t task, double bytes,
                     const char *name) {
  uint32_t id = plan_buf_out(b->p, task, bytes, name);
  if (b->pass == PASS_FWD && !b->transient) plan_buf_keep(b->p, id);
  SAVED(l, g, k) = id;
  return id;
}

/* A weight gradient (float32 main grad, Megatron's main_grad) of op
 * `which`, written by its backward task: kept for the optimizer, unless
 * ZeRO 2-3 reduce-scatters it into a shard and frees it. */
static uint32_t wgrad_bytes(lb *b, uint32_t task, double bytes, uint32_t slot) {
  if (b->model && (b->zero < 2 || b->grad_group < 2 || b->mbs > 1)) {
    /* Megatron allocates every parameter's main_grad before the step
     * (its DDP grad buffer): live from the start, accumulated into by
     * every micro-batch */
    uint32_t g = plan_task_at(b->p, task)->gpu;
    uint32_t *id = &b->main_grad[((size_t)b->layer * b->n + g) * 4 + slot];
    if (*id == NONE) *id = plan_buf_input(b->p, g, bytes, "main_grad");
    plan_buf_writes(b->p, task, *id);
    return *id;
  }
  uint32_t id = plan_buf_out(b->p, task, bytes, "main_grad");
  if (!b->model) plan_buf_keep(b->p, id);
  return id;
}

static uint32_t wgrad(lb *b, uint32_t task, layer_op which) {
  plan_op o = compute_layer_op(&b->d, which, false);
  double bytes = 4.0 * o.gemm_n * o.gemm_k;
  uint32_t slot = which == LAYER_QKV ? 0 : which == LAYER_OUT_PROJ ? 1 : which == LAYER_FC1 ? 2 : 3;
  if (b->model) return wgrad_bytes(b, task, bytes, slot);
  uint32_t id = plan_buf_out(b->p, task, bytes, "main_grad");
  if (!b->model) plan_buf_keep(b->p, id);
  return id;
}

/* The GPUs of TP group i (its TP ranks, consecutive). */
static void tp_group(lb *b, uint32_t i) {
  for (uint32_t r = 0; r < b->tp; r++) b->group[r] = i * b->tp + r;
}
/* The GPUs holding TP rank r's weights: every SP rank of every replica. */
static void grad_group(lb *b, uint32_t r) {
  for (uint32_t k = 0; k < b->grad_group; k++) b->group[k] = k * b->tp + r;
}

/* One ring collective `api` over a group of k GPUs (b->group) of `shard`
 * bytes per rank, reading in[g] (NONE: nothing) and writing a tensor of
 * out_bytes (0: none) on each, into out[g] (NULL: cur); comm_of[g] is set
 * for the next compute to wait on (NULL: none waits). */
static uint32_t ring(lb *b, comm_api api, uint32_t k, double shard, const uint32_t *in,
                     double out_bytes, const char *name, uint32_t *out, uint32_t *comm_of,
                     bool grad_stream) {
  uint32_t c = plan_comm(b->p, b->step, api);
  plan_coll_ring(b->p, c, b->group, k, shard, b->t->gpus_per_node);
  /* TP groups' calls run in order on their NCCL stream (plan_issue's
   * ordering); the gradient group (SP x DP) is another communicator with
   * a stream of its own */
  plan_issue(b->p, c, NULL, -1, !grad_stream);
  for (uint32_t j = 0; grad_stream && j < k; j++) {
    int64_t prev = b->grad_last[b->group[j]];
    bool seen = false;
    for (uint32_t j2 = 0; j2 < j; j2++) seen |= b->grad_last[b->group[j2]] == prev;
    if (prev >= 0 && !seen) plan_dep(b->p, (uint32_t)prev, c);
  }
  for (uint32_t j = 0; grad_stream && j < k; j++) b->grad_last[b->group[j]] = c;
  for (uint32_t j = 0; j < k; j++) {
    uint32_t g = b->group[j];
    if (in && in[g] != NONE) plan_buf_reads(b->p, c, in[g]);
    if (out_bytes > 0) {
      uint32_t buf = plan_buf_new(b->p, g, out_bytes, name);
      plan_buf_writes(b->p, c, buf);
      (out ? out : b->cur)[g] = buf;
    }
    if (comm_of) comm_of[g] = c;
  }
  return c;
}

/* A TP collective of every TP group over `shard` bytes per rank, reading
 * each GPU's cur (or src[g]) and writing a tensor of out_bytes that
 * becomes cur; the next compute task of each GPU waits for it. */
static void coll(lb *b, comm_api api, double shard, const uint32_t *src, double out_bytes,
                 const char *name, uint32_t *comm_of) {
  g_autofree uint32_t *in = g_memdup2(src ? src : b->cur, b->n * sizeof *in);
  for (uint32_t i = 0; i < b->n / b->tp; i++) {
    tp_group(b, i);
    ring(b, api, b->tp, shard, in, out_bytes, name, NULL, comm_of, false);
  }
}

/* Per GPU, a compute op after a collective (comm_of[g], NONE none). */
static uint32_t after(lb *b, uint32_t id, const uint32_t *comm_of, uint32_t g) {
  if (comm_of[g] != NONE) plan_dep(b->p, comm_of[g], id);
  return id;
}

static void none_of(lb *b, uint32_t *a) {
  for (uint32_t g = 0; g < b->n; g++) a[g] = NONE;
}

/* The scheduler's plan for layer l: one appender per TP rank of each
 * replica, onto that rank's SP GPUs. */
static void open_ranks(lb *b, uint32_t l) {
  b->attn = b->attns[b->kind[l]];
  b->split = b->splits[b->kind[l]];
  if (!b->attn) return;
  b->ranks = g_new(plan_append *, b->tp * b->dp);
  g_autofree uint32_t *gpus = g_new(uint32_t, b->sp);
  /* Q, K and V come from the layer's RoPE (in a forward), the output and
   * the gradients go to its output projection and RoPE (where a backward
   * follows the forward, or is all there is): what forward alone keeps is
   * saved for a backward not simulated */
  unsigned own = (b->pass != PASS_BWD ? PLAN_APPEND_OWN_INPUTS : 0) |
                 (b->pass != PASS_FWD ? PLAN_APPEND_OWN_OUTPUTS : 0);
  for (uint32_t d = 0; d < b->dp; d++)
    for (uint32_t r = 0; r < b->tp; r++) {
      for (uint32_t s = 0; s < b->sp; s++) gpus[s] = (d * b->sp + s) * b->tp + r;
      b->ranks[d * b->tp + r] = plan_append_new(b->p, b->attn, gpus, own);
    }
}

static void close_ranks(lb *b) {
  if (!b->ranks) return;
  for (uint32_t i = 0; i < b->tp * b->dp; i++) plan_append_free(b->ranks[i]);
  g_clear_pointer(&b->ranks, g_free);
}

static void append_attn(lb *b, uint32_t from, uint32_t to) {
  if (b->ranks)
    for (uint32_t i = 0; i < b->tp * b->dp; i++) plan_append_range(b->ranks[i], from, to);
}

/* ZeRO 3: layer l's weights gathered from their shards before its use
 * (every GPU of its gradient group), read by its GEMMs, freed after. */
static void gather_weights(lb *b, uint32_t l, uint32_t *cm) {
  ALL_GPUS(g) b->wcur[g] = b->weights[(size_t)l * b->n + g];
  if (!b->model || b->zero < 3 || b->grad_group < 2) return;
  double full = layer_params(b) * b->d.elem_bytes;
  g_autofree uint32_t *in = g_memdup2(b->wcur, b->n * sizeof *in);
  for (uint32_t r = 0; r < b->tp; r++) {
    grad_group(b, r);
    ring(b, COMM_ALL_GATHER, b->grad_group, full / b->grad_group, in, full, "weights_gathered",
         b->wcur, cm, true);
  }
}

/* Layer l's forward; its input is cur (none: an input of the pass). */
static void forward_layer(lb *b, uint32_t l) {
  const layer_dims *d = &b->d;
  double T = d->tokens, local = T / b->tp, h = d->hidden, tp = b->tp;
  double qkv = ((double)d->heads + 2.0 * d->kv_heads) * d->head_dim / tp;
  double f = d->ffn / tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  none_of(b, cm);
  ALL_GPUS(g) {
    if (b->cur[g] == NONE) b->cur[g] = plan_buf_input(b->p, g, act_bytes(b, local, h), "x");
    else if (b->pass == PASS_FWD) plan_buf_keep(b->p, b->cur[g]);
    SAVED(l, g, SV_X) = b->cur[g];
  }
  gather_weights(b, l, cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = after(b, op(b, g, LAYER_NORM_ATTN, false, NONE, 0, NULL), cm, g);
    b->cur[g] = save(b, l, g, SV_N1, t, act_bytes(b, local, h), "norm_out");
  }
  none_of(b, cm);
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  ALL_GPUS(g) after(b, op(b, g, LAYER_QKV, false, NONE, act_bytes(b, T, qkv), "qkv"), cm, g);
  none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_ROPE, false, NONE, 0, NULL);
  append_attn(b, 0, b->split);
  b->step++;
  ALL_GPUS(g) op(b, g, LAYER_OUT_PROJ, false, NONE, act_bytes(b, T, h), "proj_out");
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "proj_scattered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = after(b, op(b, g, LAYER_RESID_ATTN, false, SAVED(l, g, SV_X), 0, NULL), cm, g);
    b->cur[g] = save(b, l, g, SV_H1, t, act_bytes(b, local, h), "resid");
  }
  none_of(b, cm);
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_NORM_MLP, false, NONE, 0, NULL);
    b->cur[g] = save(b, l, g, SV_N2, t, act_bytes(b, local, h), "norm_out");
  }
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = after(b, op(b, g, LAYER_FC1, false, NONE, 0, NULL), cm, g);
    b->cur[g] = save(b, l, g, SV_FC1, t, act_bytes(b, T, 2 * f), "fc1_out");
  }
  none_of(b, cm);
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_SWIGLU, false, NONE, 0, NULL);
    b->cur[g] = save(b, l, g, SV_SWI, t, act_bytes(b, T, f), "swiglu_out");
  }
  ALL_GPUS(g) op(b, g, LAYER_FC2, false, NONE, act_bytes(b, T, h), "fc2_out");
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "fc2_scattered", cm);
  b->step++;
  ALL_GPUS(g) after(b, op(b, g, LAYER_RESID_MLP, false, SAVED(l, g, SV_H1),
                          act_bytes(b, local, h), "layer_out"), cm, g);
}

/* The gradient reduction of layer l's weight gradients grads[g x 4] over
 * each TP rank's gradient group (SP x DP GPUs hold the same weights), in
 * one bucket, issued when the layer's backward is done on the GPU and run
 * on its own NCCL stream while earlier layers' backward goes on: ZeRO 0
 * all-reduces, 1-3 reduce-scatter (ZeRO 2-3 keep only the shard). */
static void reduce_grads(lb *b, double params) {
  /* accumulated over micro-batches, reduced after the last (Megatron's
   * no_sync for the others) */
  if (!b->model || b->grad_group < 2 || b->pass == PASS_FWD || !b->last_mb) return;
  uint32_t k = b->grad_group;
  double bytes = 4.0 * params;
  g_autofree uint32_t *shard = g_new(uint32_t, b->n);
  for (uint32_t r = 0; r < b->tp; r++) {
    grad_group(b, r);
    comm_api api = b->zero ? COMM_REDUCE_SCATTER : COMM_ALL_REDUCE;
    uint32_t c = ring(b, api, k, bytes / k, NULL, b->zero >= 2 ? bytes / k : 0, "grad_shard",
                      shard, NULL, true);
    for (uint32_t j = 0; j < k; j++) {
      uint32_t g = b->group[j];
      for (int i = 0; i < 4; i++)
        if (b->grads[g * 4 + i] != NONE) plan_buf_reads(b->p, c, b->grads[g * 4 + i]);
      if (b->zero >= 2) plan_buf_keep(b->p, shard[g]);
    }
  }
}

static void backward_layer(lb *b, uint32_t l) {
  const layer_dims *d = &b->d;
  double T = d->tokens, local = T / b->tp, h = d->hidden, tp = b->tp;
  double qkv = ((double)d->heads + 2.0 * d->kv_heads) * d->head_dim / tp;
  double q = (double)d->heads * d->head_dim / tp, f = d->ffn / tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  g_autofree uint32_t *regather = g_new(uint32_t, b->n);
  g_autofree uint32_t *dres = g_new(uint32_t, b->n);
  none_of(b, cm);
  b->layer = l;
  /* this layer's kind's plan (its appenders, if open, were made for it) */
  b->attn = b->attns[b->kind[l]];
  b->split = b->splits[b->kind[l]];
  if (b->pass == PASS_BWD) {
    /* what a forward would have saved: inputs of the pass */
    double bytes[SV_COUNT] = {act_bytes(b, local, h), act_bytes(b, local, h),
                              act_bytes(b, local, h), act_bytes(b, local, h),
                              act_bytes(b, T, 2 * f), act_bytes(b, T, f)};
    static const char *const names[SV_COUNT] = {"x", "norm_out", "resid", "norm_out",
                                                "fc1_out", "swiglu_out"};
    ALL_GPUS(g) for (int k = 0; k < SV_COUNT; k++)
      SAVED(l, g, k) = plan_buf_input(b->p, g, bytes[k], names[k]);
    open_ranks(b, l);
  } else if (b->recompute == RECOMPUTE_FULL) {
    /* the layer's forward again from its saved input (Megatron's full
     * recomputation: one checkpoint per layer), its output dropped */
    g_autofree uint32_t *grad = g_memdup2(b->cur, b->n * sizeof *grad);
    ALL_GPUS(g) b->cur[g] = SAVED(l, g, SV_X);
    bool was = b->transient;
    b->transient = false;
    pass_kind pass = b->pass;
    b->pass = PASS_FWDBWD;
    close_ranks(b);
    open_ranks(b, l);
    forward_layer(b, l);
    b->pass = pass;
    b->transient = was;
    memcpy(b->cur, grad, b->n * sizeof *grad);
  } else if (!b->ranks) {
    open_ranks(b, l);
  }
  gather_weights(b, l, cm);
  ALL_GPUS(g) {
    if (b->cur[g] == NONE) b->cur[g] = plan_buf_input(b->p, g, act_bytes(b, local, h), "dout");
    for (int i = 0; i < 4; i++) b->grads[g * 4 + i] = NONE;
  }
  b->step++;
  /* the MLP block's residual: the gradient goes both ways */
  ALL_GPUS(g) {
    after(b, op(b, g, LAYER_RESID_MLP, true, NONE, act_bytes(b, local, h), "dresid"), cm, g);
    dres[g] = b->cur[g];
  }
  none_of(b, cm);
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "dgathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = after(b, op(b, g, LAYER_FC2, true, SAVED(l, g, SV_SWI), act_bytes(b, T, f),
                             "dswiglu"), cm, g);
    b->grads[g * 4 + 3] = wgrad(b, t, LAYER_FC2);
  }
  none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_SWIGLU, true, SAVED(l, g, SV_FC1), act_bytes(b, T, 2 * f), "dfc1");
  if (b->tp > 1) {
    ALL_GPUS(g) regather[g] = SAVED(l, g, SV_N2);
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
    uint32_t t = after(b, op(b, g, LAYER_FC1, true,
                             b->tp > 1 ? regather[g] : SAVED(l, g, SV_N2), act_bytes(b, T, h),
                             "dnorm"), cm, g);
    b->grads[g * 4 + 2] = wgrad(b, t, LAYER_FC1);
  }
  none_of(b, cm);
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "dscattered", cm);
  b->step++;
  ALL_GPUS(g) after(b, op(b, g, LAYER_NORM_MLP, true, SAVED(l, g, SV_H1), act_bytes(b, local, h),
                          "dresid"), cm, g);
  none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_RESID_ATTN, true, dres[g], act_bytes(b, local, h), "dresid");
  ALL_GPUS(g) dres[g] = b->cur[g];
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "dgathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = after(b, op(b, g, LAYER_OUT_PROJ, true, NONE, act_bytes(b, T, q),
                             "dattn_out"), cm, g);
    b->grads[g * 4 + 1] = wgrad(b, t, LAYER_OUT_PROJ);
  }
  none_of(b, cm);
  append_attn(b, b->split, b->attn ? b->attn->tasks->len : 0);
  b->step++;
  ALL_GPUS(g) op(b, g, LAYER_ROPE, true, NONE, act_bytes(b, T, qkv), "dqkv");
  if (b->tp > 1) {
    ALL_GPUS(g) regather[g] = SAVED(l, g, SV_N1);
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
    uint32_t t = after(b, op(b, g, LAYER_QKV, true,
                             b->tp > 1 ? regather[g] : SAVED(l, g, SV_N1), act_bytes(b, T, h),
                             "dnorm"), cm, g);
    b->grads[g * 4 + 0] = wgrad(b, t, LAYER_QKV);
  }
  none_of(b, cm);
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "dscattered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = after(b, op(b, g, LAYER_NORM_ATTN, true, SAVED(l, g, SV_X), 0, NULL), cm, g);
    plan_buf_reads(b->p, t, dres[g]);
    b->cur[g] = plan_buf_out(b->p, t, act_bytes(b, local, h), "dx");
  }
  close_ranks(b);
  reduce_grads(b, layer_params(b));
}

/* ---- the model's ends: embedding, final norm, LM head, loss ---- */

static plan_op gemm_op(const lb *b, double n, double k, bool backward) {
  return (plan_op){.kind = OP_GEMM, .backward = backward, .batch = 1,
                   .elem_bytes = b->d.elem_bytes, .gemm_m = b->d.tokens, .gemm_n = n,
                   .gemm_k = k};
}

static plan_op copy_op(double bytes) { return (plan_op){.kind = OP_COPY, .bytes = bytes}; }

/* Per GPU: the embedding table's and LM head's weights (inputs), what the
 * head's backward needs, the logits' float32 softmax Megatron's
 * vocab-parallel cross entropy saves. */
typedef struct { uint32_t *emb, *head, *norm_in, *norm_out, *probs; } ends;

/* The embedding lookup of the GPU's T/tp tokens: a gather of rows of
 * hidden (Megatron's VocabParallelEmbedding, then the sequence-parallel
 * reduce-scatter it ends with, priced as the copy it is at TP 1). */
static void embed(lb *b, ends *e) {
  double local = b->d.tokens / b->tp, h = b->d.hidden;
  b->step++;
  ALL_GPUS(g) {
    if (e->emb[g] == NONE)
      e->emb[g] = plan_buf_input(b->p, g, (double)b->w->vocab / b->tp * h * b->d.elem_bytes,
                                 "embedding");
    plan_op o = copy_op(act_bytes(b, local, h));
    b->cur[g] = NONE;
    emit(b, g, &o, e->emb[g], act_bytes(b, local, h), "embedded");
  }
}

/* Final RMSNorm, LM head (column-parallel over the vocabulary: the
 * sequence all-gathered first) and the loss: Megatron's
 * vocab_parallel_cross_entropy makes the logits float32 and saves their
 * softmax for backward (T x V/tp x 4 bytes: the known OOM of large
 * vocabularies at long context). */
static void head_forward(lb *b, ends *e) {
  double T = b->d.tokens, local = T / b->tp, h = b->d.hidden, V = (double)b->w->vocab / b->tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  none_of(b, cm);
  b->step++;
  ALL_GPUS(g) {
    e->norm_in[g] = b->cur[g];
    if (b->pass == PASS_FWD) plan_buf_keep(b->p, b->cur[g]);
    plan_op n = compute_layer_op(&b->d, LAYER_NORM_ATTN, false);
    uint32_t t = emit(b, g, &n, NONE, 0, NULL);
    e->norm_out[g] = b->cur[g] = plan_buf_out(b->p, t, act_bytes(b, local, h), "norm_out");
    if (b->pass == PASS_FWD) plan_buf_keep(b->p, b->cur[g]);
  }
  if (b->tp > 1) coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), NULL, act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  ALL_GPUS(g) {
    if (e->head[g] == NONE) e->head[g] = plan_buf_input(b->p, g, V * h * b->d.elem_bytes, "lm_head");
    plan_op o = gemm_op(b, V, h, false);
    b->wcur[g] = e->head[g];
    after(b, emit(b, g, &o, NONE, act_bytes(b, T, V), "logits"), cm, g);
    plan_op loss = copy_op(T * V * (b->d.elem_bytes + 4));
    uint32_t t = emit(b, g, &loss, NONE, 0, NULL);
    e->probs[g] = plan_buf_out(b->p, t, T * V * 4, "softmax");
    if (b->pass == PASS_FWD) plan_buf_keep(b->p, e->probs[g]);
    b->cur[g] = NONE;
  }
}

static void head_backward(lb *b, ends *e) {
  double T = b->d.tokens, local = T / b->tp, h = b->d.hidden, V = (double)b->w->vocab / b->tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  g_autofree uint32_t *gath = g_new(uint32_t, b->n);
  none_of(b, cm);
  if (b->pass == PASS_BWD)
    ALL_GPUS(g) {
      e->norm_in[g] = plan_buf_input(b->p, g, act_bytes(b, local, h), "x");
      e->norm_out[g] = plan_buf_input(b->p, g, act_bytes(b, local, h), "norm_out");
      e->probs[g] = plan_buf_input(b->p, g, T * V * 4, "softmax");
      if (e->head[g] == NONE)
        e->head[g] = plan_buf_input(b->p, g, V * h * b->d.elem_bytes, "lm_head");
    }
  b->step++;
  /* the loss's gradient: softmax less the one-hot target, in the logits' dtype */
  ALL_GPUS(g) {
    plan_op o = copy_op(T * V * (4 + b->d.elem_bytes));
    b->cur[g] = NONE;
    emit(b, g, &o, e->probs[g], act_bytes(b, T, V), "dlogits");
  }
  if (b->tp > 1) {
    g_autofree uint32_t *keep_cur = g_memdup2(b->cur, b->n * sizeof *b->cur);
    coll(b, COMM_ALL_GATHER, act_bytes(b, local, h), e->norm_out, act_bytes(b, T, h),
         "gathered", cm);
    ALL_GPUS(g) {
      gath[g] = b->cur[g];
      b->cur[g] = keep_cur[g];
    }
  }
  b->step++;
  ALL_GPUS(g) {
    plan_op o = gemm_op(b, V, h, true);
    b->wcur[g] = e->head[g];
    uint32_t t = after(b, emit(b, g, &o, b->tp > 1 ? gath[g] : e->norm_out[g],
                               act_bytes(b, T, h), "dnorm"), cm, g);
    b->layer = b->layers;
    wgrad_bytes(b, t, 4.0 * V * h, 0);
  }
  none_of(b, cm);
  if (b->tp > 1) coll(b, COMM_REDUCE_SCATTER, act_bytes(b, local, h), NULL,
                      act_bytes(b, local, h), "dscattered", cm);
  b->step++;
  ALL_GPUS(g) {
    plan_op n = compute_layer_op(&b->d, LAYER_NORM_ATTN, true);
    after(b, emit(b, g, &n, e->norm_in[g], act_bytes(b, local, h), "dx"), cm, g);
  }
}

/* The embedding's backward: the rows' gradients added into its float32
 * main grad; then the ends' gradient reduction. */
static void embed_backward(lb *b, ends *e) {
  double local = b->d.tokens / b->tp, h = b->d.hidden;
  b->step++;
  ALL_GPUS(g) {
    if (e->emb[g] == NONE)
      e->emb[g] = plan_buf_input(b->p, g, (double)b->w->vocab / b->tp * h * b->d.elem_bytes,
                                 "embedding");
    plan_op o = copy_op(act_bytes(b, local, h) + 4.0 * local * h);
    uint32_t t = emit(b, g, &o, e->emb[g], 0, NULL);
    b->layer = b->layers;
    wgrad_bytes(b, t, 4.0 * b->w->vocab / b->tp * h, 1);
    for (int i = 0; i < 4; i++) b->grads[g * 4 + i] = NONE;
  }
  reduce_grads(b, outer_params(b));
}

/* The optimizer step on every GPU after its gradients are reduced: Adam
 * over the parameters it owns (ZeRO 1-3: 1 / (SP x DP) of its TP shard),
 * reading its float32 master weights and moments (12 bytes a parameter,
 * Megatron's bf16 recipe), then (ZeRO 1-2) the updated bf16 weights
 * all-gathered back. */
static void optimizer(lb *b) {
  uint32_t k = b->grad_group, shard = b->zero >= 1 ? k : 1;
  double params = layer_params(b) * b->layers + outer_params(b);
  b->step++;
  ALL_GPUS(g) {
    uint32_t st = plan_buf_input(b->p, g, 12.0 * params / shard, "optimizer_states");
    plan_op o = compute_layer_optimizer_op(&b->d);
    o.sq = params / shard;
    o.batch *= b->layers;
    o.batch += 3; /* embedding, head, final norm */
    b->cur[g] = NONE;
    uint32_t t = emit(b, g, &o, st, 0, NULL);
    /* after every gradient reduction touching it: they run in issue order
     * on the gradient group's stream, so after its last one */
    int64_t lc = b->grad_last[g];
    if (lc >= 0) plan_dep(b->p, (uint32_t)lc, t);
  }
  if (b->zero >= 1 && b->zero <= 2 && k > 1) {
    double bytes = params * b->d.elem_bytes;
    for (uint32_t r = 0; r < b->tp; r++) {
      grad_group(b, r);
      ring(b, COMM_ALL_GATHER, k, bytes / k, NULL, 0, NULL, NULL, NULL, true);
    }
  }
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
          .dp = layer_dp(w), .pass = w->pass, .model = w->scope == SCOPE_MODEL,
          .zero = w->zero, .recompute = w->recompute};
  b.layers = b.model ? layers_total(w) : 1;
  b.n = b.tp * b.sp * b.dp;
  b.grad_group = b.sp * b.dp;
  b.p = plan_new(b.n, record_segs);
  b.saved = g_new(uint32_t, (size_t)b.layers * b.n * SV_COUNT);
  b.weights = g_new(uint32_t, (size_t)b.layers * b.n);
  b.wcur = g_new(uint32_t, b.n);
  b.grads = g_new(uint32_t, (size_t)b.n * 4);
  b.cur = g_new(uint32_t, b.n);
  b.group = g_new(uint32_t, MAX(b.tp, b.grad_group));
  /* the layers' parameters on each GPU in the layer's dtype (Megatron's
   * bf16 weights; ZeRO 3: a 1 / (SP x DP) shard) */
  double wbytes = layer_params(&b) * w->elem_bytes;
  if (b.model && b.zero >= 3 && b.grad_group > 1) wbytes /= b.grad_group;
  for (uint32_t l = 0; l < b.layers; l++)
    for (uint32_t g = 0; g < b.n; g++)
      b.weights[(size_t)l * b.n + g] = plan_buf_input(b.p, g, wbytes, "weights");
  for (uint32_t g = 0; g < b.n; g++) b.cur[g] = b.wcur[g] = NONE;
  b.grad_last = g_new(int64_t, b.n);
  for (uint32_t g = 0; g < b.n; g++) b.grad_last[g] = -1;
  /* each kind of layer's attention, the scheduler's plan of one TP rank's
   * heads; a mix interleaved evenly (LASP-2H's 1/4 hybrid: every fourth
   * layer softmax) */
  attn_kind *kinds = g_new(attn_kind, b.layers);
  uint32_t soft = b.model ? layers_count(w, ATTN_SOFTMAX) : 0;
  for (uint32_t l = 0; l < b.layers; l++)
    kinds[l] = !b.model ? w->attention
               : (uint64_t)(l + 1) * soft / b.layers > (uint64_t)l * soft / b.layers
                   ? ATTN_SOFTMAX : ATTN_LINEAR;
  b.kind = kinds;
  layer_view view;
  layer_view_init(&view, w, t);
  for (int k = 0; k < ATTN_KINDS && with_attention; k++) {
    bool used = false;
    for (uint32_t l = 0; l < b.layers; l++) used |= kinds[l] == (attn_kind)k;
    if (!used) continue;
    workload a = layers_one(w, (attn_kind)k);
    a = layer_attention_workload(&a);
    plan *built = s->build(&a, &view.t, record_segs);
    b.attns[k] = built->has_lockstep ? plan_expand(built) : built;
    if (b.attns[k] != built) plan_free(built);
    b.splits[k] = backward_start(b.attns[k], w->pass);
    if (b.attns[k]->note->len && !g_strstr_len(b.p->note->str, -1, b.attns[k]->note->str))
      g_string_append_printf(b.p->note, "%s%s", b.p->note->len ? "; " : "",
                             b.attns[k]->note->str);
  }
  layer_view_clear(&view);
  g_autofree plan_append **open = g_new0(plan_append *, (size_t)b.layers * b.tp * b.dp);
  uint32_t *e_arr = g_new(uint32_t, (size_t)5 * b.n);
  ends e = {e_arr, e_arr + b.n, e_arr + 2 * b.n, e_arr + 3 * b.n, e_arr + 4 * b.n};
  for (uint32_t i = 0; i < 5 * b.n; i++) e_arr[i] = NONE;
  b.mbs = b.model && w->micro_batches > 1 ? w->micro_batches : 1;
  b.main_grad = g_new(uint32_t, ((size_t)b.layers + 1) * b.n * 4);
  for (size_t i = 0; i < ((size_t)b.layers + 1) * b.n * 4; i++) b.main_grad[i] = NONE;
  /* micro-batches one after the other, each forward then backward, the
   * gradients accumulated and reduced after the last, one optimizer step */
  for (uint32_t mb = 0; mb < b.mbs; mb++) {
    b.last_mb = mb + 1 == b.mbs;
    for (uint32_t g = 0; g < b.n; g++) b.cur[g] = NONE;
    b.transient = b.recompute == RECOMPUTE_FULL && w->pass == PASS_FWDBWD;
    if (w->pass != PASS_BWD) {
      if (b.model) embed(&b, &e);
      for (uint32_t l = 0; l < b.layers; l++) {
        open_ranks(&b, l);
        forward_layer(&b, l);
        /* each layer's appenders wait for its backward (none with full
         * recomputation, which appends the forward again) */
        if (b.ranks) {
          if (b.transient || w->pass == PASS_FWD) close_ranks(&b);
          else {
            memcpy(open + (size_t)l * b.tp * b.dp, b.ranks, b.tp * b.dp * sizeof *b.ranks);
            g_clear_pointer(&b.ranks, g_free);
          }
        }
      }
      if (b.model) head_forward(&b, &e);
      else
        for (uint32_t g = 0; g < b.n; g++) plan_buf_keep(b.p, b.cur[g]); /* the layer's output */
    }
    b.transient = false;
    if (w->pass != PASS_FWD) {
      if (b.model) head_backward(&b, &e);
      else
        for (uint32_t g = 0; g < b.n; g++) b.cur[g] = NONE;
      for (uint32_t l = b.layers; l-- > 0;) {
        size_t at = (size_t)l * b.tp * b.dp;
        if (open[at]) {
          b.ranks = g_new(plan_append *, b.tp * b.dp);
          memcpy(b.ranks, open + at, b.tp * b.dp * sizeof *b.ranks);
          memset(open + at, 0, b.tp * b.dp * sizeof *b.ranks);
        }
        backward_layer(&b, l);
      }
      if (b.model) embed_backward(&b, &e);
      else
        for (uint32_t g = 0; g < b.n; g++) plan_buf_keep(b.p, b.cur[g]); /* dx */
    }
  }
  if (b.model && w->pass != PASS_FWD) optimizer(&b);
  plan_finish(b.p);
  g_free(e_arr);
  g_free(b.main_grad);
  for (int k = 0; k < ATTN_KINDS; k++) plan_free((plan *)b.attns[k]);
  g_free(kinds);
  g_free(b.grad_last);
  g_free(b.saved);
  g_free(b.weights);
  g_free(b.wcur);
  g_free(b.grads);
  g_free(b.cur);
  g_free(b.group);
  return b.p;
}

double layer_tasks_estimate(const workload *w) {
  double sp = w->gpus, layers = w->scope == SCOPE_MODEL ? layers_total(w) : 1;
  /* per layer, TP rank and replica: a ring-like attention plan (a kernel,
   * a merge and a group per GPU and step, both passes) and the layer's
   * ops and collectives on each SP GPU */
  double mbs = w->scope == SCOPE_MODEL && w->micro_batches > 1 ? w->micro_batches : 1;
  return mbs * layers * layer_tp(w) * layer_dp(w) * (6 * sp * sp + 64 * sp) + 16;
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
