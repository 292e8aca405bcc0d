/* layer_block: one decoder layer's forward and backward in the builder's
 * plan (layer.h): its ops, its TP collectives, its saved tensors, the
 * scheduler's plan appended between them, its gradient bucket. */
#include <string.h>

#include "layer_build.h"

double lb_act_bytes(const lb *b, double rows, double width) {
  return rows * width * b->d.elem_bytes;
}

/* Parameters of one layer on one GPU (its TP shard). */
double lb_layer_params(const lb *b) { return compute_layer_params(&b->d); }

double lb_param_bytes(const lb *b) {
  return b->w->precision == PRECISION_AMP ? 4.0 : b->d.elem_bytes;
}

double lb_fp8_weight_bytes(const lb *b) {
  if (b->w->precision != PRECISION_FP8) return 0;
  return 2.0 * (compute_layer_params(&b->d) - 2.0 * b->d.hidden);
}

double lb_grad_bytes(const lb *b) {
  return b->w->precision == PRECISION_BF16 ? b->d.elem_bytes : 4.0;
}


/* The op's task on GPU g, after whatever the attention's last range left
 * for g; reads `cur` (and `extra`, NONE none) and, a GEMM, the layer's
 * weights; writes a new tensor of out_bytes (0: none) named `name` that
 * becomes cur. */
uint32_t lb_emit(lb *b, uint32_t g, const plan_op *o, uint32_t extra, double out_bytes,
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
  /* FP8: the weights are cast once a step, in the first micro-batch's
   * forward (Megatron passes is_first_microbatch to TE, which caches the
   * FP8 weights for the others and for a recomputed forward) */
  if (o.fp8 && !backward && b->first_mb && !b->recomputing) o.fp8 |= COMPUTE_FP8_CAST_WEIGHT;
  return lb_emit(b, g, &o, extra, out_bytes, name);
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

/* Whether layer l's forward saves tensor k for its backward, by the
 * recipe (layer_build.h): AMP its bf16 weights; fused, each RMSNorm its
 * input (the layer's input, the residual between the blocks); unfused
 * (plain PyTorch, compute.c's element-wise byte counts follow the same
 * code), Hugging Face's LlamaRMSNorm its float32 input (4 bytes) and the
 * normalized rows the weight multiplies instead, silu(gate) * up SiLU's
 * output, and V's view the QKV output's query and key parts where the
 * attention saves the layer's own V.  The forward saves these, a backward
 * alone takes them as inputs, the backward reads them: one list.  (SV_AO
 * is the attention's own buffer, not a layer's saving.) */
static bool saves(const lb *b, uint32_t l, int k) {
  bool unfused = b->d.unfused;
  switch (k) {
  case SV_W: return b->w->precision == PRECISION_AMP;
  case SV_X: case SV_H1: return !unfused;
  case SV_N1F: case SV_N2F: case SV_SILU: return unfused;
  case SV_QK: return unfused && b->qkv_view[b->kind[l]];
  case SV_AO: return false;
  default: return true; /* the norms' outputs, FC1's and SwiGLU's */
  }
}

/* Saved tensor k of layer l on GPU g where the recipe saves it, else none. */
static uint32_t saved(const lb *b, uint32_t l, uint32_t g, int k) {
  return saves(b, l, k) ? SAVED(l, g, k) : NONE;
}

static void read_saved(lb *b, uint32_t l, uint32_t g, int k, uint32_t task) {
  if (SAVED(l, g, k) != NONE) plan_buf_reads(b->p, task, SAVED(l, g, k));
}

/* save(), where the recipe saves tensor k */
static void save_if(lb *b, uint32_t l, uint32_t g, int k, uint32_t task, double bytes,
                    const char *name) {
  if (saves(b, l, k)) save(b, l, g, k, task, bytes, name);
  else SAVED(l, g, k) = NONE;
}

/* AMP: autocast's bf16 copy of the layer's GEMM weights (wcur, float32),
 * made before the first GEMM and saved for the backward's (autograd keeps
 * the copy a matmul read); it becomes what the GEMMs read. */
static void cast_weights(lb *b, uint32_t l, const uint32_t *cm) {
  if (!(b->w->precision == PRECISION_AMP)) return;
  plan_op o = compute_layer_cast_op(&b->d);
  double bytes = (compute_layer_params(&b->d) - 2.0 * b->d.hidden) * b->d.elem_bytes;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, plan_compute(b->p, g, b->step, &o), cm, g);
    if (b->ranks) plan_append_after(b->ranks[(g / (b->tp * b->sp)) * b->tp + g % b->tp], t);
    plan_buf_reads(b->p, t, b->wcur[g]);
    b->wcur[g] = save(b, l, g, SV_W, t, bytes, "weights_bf16");
  }
}

/* A weight gradient (float32 main grad, Megatron's main_grad) of op
 * `which`, written by its backward task: kept for the optimizer, unless
 * ZeRO 2-3 reduce-scatters it into a shard and frees it. */
uint32_t lb_wgrad_bytes(lb *b, uint32_t task, double bytes, uint32_t slot) {
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
  double bytes = lb_grad_bytes(b) * o.gemm_n * o.gemm_k;
  uint32_t slot = which == LAYER_QKV ? 0 : which == LAYER_OUT_PROJ ? 1 : which == LAYER_FC1 ? 2 : 3;
  if (b->model) return lb_wgrad_bytes(b, task, bytes, slot);
  uint32_t id = plan_buf_out(b->p, task, bytes, "main_grad");
  if (!b->model) plan_buf_keep(b->p, id);
  return id;
}

/* The GPUs of TP group i (its TP ranks, consecutive). */
void lb_tp_group(lb *b, uint32_t i) {
  for (uint32_t r = 0; r < b->tp; r++) b->group[r] = i * b->tp + r;
}
/* The GPUs holding TP rank r's weights: every SP rank of every replica. */
void lb_grad_group(lb *b, uint32_t r) {
  for (uint32_t k = 0; k < b->grad_group; k++) b->group[k] = k * b->tp + r;
}

bool lb_group_sim(const lb *b, uint32_t k) {
  for (uint32_t j = 0; j < k; j++)
    if (lb_sim(b, b->group[j])) return true;
  return false;
}

static gint by_place(gconstpointer a, gconstpointer b, gpointer phys) {
  uint32_t x = ((const uint32_t *)phys)[*(const uint32_t *)a];
  uint32_t y = ((const uint32_t *)phys)[*(const uint32_t *)b];
  return (x > y) - (x < y);
}

void lb_ring_order(const lb *b, uint32_t k, uint32_t *ring) {
  /* NCCL's rings follow the GPUs' order on the topology, node by node:
   * under a placement of its own, the group in the order of where its
   * GPUs lie */
  memcpy(ring, b->group, k * sizeof *ring);
  if (b->phys) g_qsort_with_data(ring, (gint)k, sizeof *ring, by_place, b->phys);
}

uint32_t lb_ring_per_node(const lb *b, uint32_t k, const uint32_t *ring) {
  /* NCCL's rings cross between nodes once a node each, so a group with
   * c GPUs on each of its nodes runs c rings, ring j entering a node at
   * its j-th GPU of the group: a gradient group strided by TP holds
   * m / tp GPUs of each node of m, not m */
  uint32_t per = b->t->gpus_per_node;
  if (!per) return 0;
  g_autofree uint32_t *at = g_new(uint32_t, k);
  for (uint32_t i = 0; i < k; i++) at[i] = b->phys ? b->phys[ring[i]] : ring[i];
  return lb_node_blocks(at, k, per);
}

/* One ring collective `api` over a group of k GPUs (b->group) of `shard`
 * bytes per rank, reading in[g] (NONE: nothing) and writing a tensor of
 * out_bytes (0: none) on each, into out[g] (NULL: cur); comm_of[g] is set
 * for the next compute to wait on (NULL: none waits). */
uint32_t lb_ring(lb *b, comm_api api, uint32_t k, double shard, const uint32_t *in,
                     double out_bytes, const char *name, uint32_t *out, uint32_t *comm_of,
                     bool grad_stream) {
  uint32_t c = plan_comm(b->p, b->step, api);
  g_autofree uint32_t *ring = g_new(uint32_t, k);
  lb_ring_order(b, k, ring);
  plan_coll_ring(b->p, c, ring, k, shard, lb_ring_per_node(b, k, ring));
  /* TP groups' calls run in order on their NCCL stream (plan_issue's
   * ordering); the gradient group (SP x DP) is another communicator with
   * a stream of its own */
  plan_issue(b->p, c, NULL, -1, !grad_stream);
  if (grad_stream) {
    /* after each distinct last call of the members' gradient streams, in
     * the members' order */
    g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
    for (uint32_t j = 0; j < k; j++) {
      int64_t prev = b->grad_last[b->group[j]];
      if (prev < 0 || !g_hash_table_add(seen, GUINT_TO_POINTER((guint)prev + 1))) continue;
      plan_dep(b->p, (uint32_t)prev, c);
    }
    for (uint32_t j = 0; j < k; j++) b->grad_last[b->group[j]] = c;
  }
  for (uint32_t j = 0; j < k; j++) {
    uint32_t g = b->group[j];
    if (!lb_sim(b, g)) continue;
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
void lb_coll(lb *b, comm_api api, double shard, const uint32_t *src, double out_bytes,
                 const char *name, uint32_t *comm_of) {
  g_autofree uint32_t *in = g_memdup2(src ? src : b->cur, b->n * sizeof *in);
  for (uint32_t i = 0; i < b->n / b->tp; i++) {
    lb_tp_group(b, i);
    if (lb_group_sim(b, b->tp))
      lb_ring(b, api, b->tp, shard, in, out_bytes, name, NULL, comm_of, false);
  }
}

/* Per GPU, a compute op after a collective (comm_of[g], NONE none). */
uint32_t lb_after(lb *b, uint32_t id, const uint32_t *comm_of, uint32_t g) {
  if (comm_of[g] != NONE) plan_dep(b->p, comm_of[g], id);
  return id;
}

void lb_none_of(lb *b, uint32_t *a) {
  for (uint32_t g = 0; g < b->n; g++) a[g] = NONE;
}

/* The scheduler's plan for layer l: one appender per TP rank of each
 * replica, onto that rank's SP GPUs. */
void lb_open_ranks(lb *b, uint32_t l) {
  b->attn = b->attns[b->kind[l]];
  b->split = b->splits[b->kind[l]];
  b->attn_src = b->attn_srcs[b->kind[l]];
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
      bool any = false;
      for (uint32_t s = 0; s < b->sp; s++) {
        gpus[s] = (d * b->sp + s) * b->tp + r;
        any |= lb_sim(b, gpus[s]);
      }
      /* a rank of no simulated GPU: the image of one that has them; of
       * some (the scheduler's turn, layer_orbits_sched), their part of
       * its plan (plan_append into the quotient plan) */
      b->ranks[d * b->tp + r] = any ? plan_append_new_shared(b->p, b->attn_src, gpus, own) : NULL;
    }
}

void lb_close_ranks(lb *b) {
  if (!b->ranks) return;
  for (uint32_t i = 0; i < b->tp * b->dp; i++)
    if (b->ranks[i]) {
      b->unfit |= plan_append_unfit(b->ranks[i]);
      plan_append_free(b->ranks[i]);
    }
  g_clear_pointer(&b->ranks, g_free);
}

static void append_attn(lb *b, uint32_t from, uint32_t to) {
  if (b->ranks)
    for (uint32_t i = 0; i < b->tp * b->dp; i++)
      if (b->ranks[i]) plan_append_range(b->ranks[i], from, to);
}

/* ZeRO 3: layer l's weights gathered from their shards before its use
 * (every GPU of its gradient group), read by its GEMMs, freed after. */
static void gather_weights(lb *b, uint32_t l, uint32_t *cm) {
  ALL_GPUS(g) b->wcur[g] = b->weights[(size_t)l * b->n + g];
  if (!b->model || b->zero < 3 || b->grad_group < 2) return;
  double full = lb_layer_params(b) * lb_param_bytes(b);
  g_autofree uint32_t *in = g_memdup2(b->wcur, b->n * sizeof *in);
  for (uint32_t r = 0; r < b->tp; r++) {
    lb_grad_group(b, r);
    if (!lb_group_sim(b, b->grad_group)) continue;
    lb_ring(b, COMM_ALL_GATHER, b->grad_group, full / b->grad_group, in, full, "weights_gathered",
         b->wcur, cm, true);
  }
}

/* The attention's output on GPU g, as the layer's last appended range
 * made it (NONE: no attention, or g not simulated). */
static uint32_t attn_output(const lb *b, uint32_t g) {
  if (!b->ranks || !b->attn || b->attn->attn_out == UINT32_MAX) return NONE;
  const plan_append *a = b->ranks[(g / (b->tp * b->sp)) * b->tp + g % b->tp];
  if (!a) return NONE;
  uint32_t id = plan_append_buf(a, b->attn->attn_out, (g / b->tp) % b->sp);
  return id == UINT32_MAX ? NONE : id;
}

/* Layer l's forward; its input is cur (none: an input of the pass). */
void lb_forward_layer(lb *b, uint32_t l) {
  const layer_dims *d = &b->d;
  double T = d->tokens, local = T / b->tp, h = d->hidden, tp = b->tp;
  double qkv = ((double)d->heads + 2.0 * d->kv_heads) * d->head_dim / tp;
  double f = d->ffn / tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  lb_none_of(b, cm);
  ALL_GPUS(g) {
    if (b->cur[g] == NONE) {
      /* the caller's tensor (a layer alone): held by the caller throughout */
      b->cur[g] = plan_buf_input(b->p, g, lb_act_bytes(b, local, h), "x");
      plan_buf_keep(b->p, b->cur[g]);
    } else if (b->pass == PASS_FWD) {
      plan_buf_keep(b->p, b->cur[g]);
    }
    SAVED(l, g, SV_X) = b->cur[g];
  }
  gather_weights(b, l, cm);
  cast_weights(b, l, cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, LAYER_NORM_ATTN, false, NONE, 0, NULL), cm, g);
    save_if(b, l, g, SV_N1F, t, local * h * (4.0 + d->elem_bytes), "norm_fp32");
    b->cur[g] = save(b, l, g, SV_N1, t, lb_act_bytes(b, local, h), "norm_out");
  }
  lb_none_of(b, cm);
  if (b->tp > 1) lb_coll(b, COMM_ALL_GATHER, lb_act_bytes(b, local, h), NULL, lb_act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  /* unfused, where the attention saves the layer's own V: V is a view of
   * the fused projection's output (its split), so the saved V keeps the
   * query and key parts before RoPE alive until the attention's backward
   * (V's own bytes are the attention's "k, v"; measured op by op on the
   * calibration tool's layer: calibration/h100x1-layer-trace) */
  bool view = saves(b, l, SV_QK);
  double qk = ((double)d->heads + d->kv_heads) * d->head_dim / tp;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, LAYER_QKV, false, NONE, view ? 0 : lb_act_bytes(b, T, qkv),
                                "qkv"), cm, g);
    SAVED(l, g, SV_QK) = NONE;
    if (view) b->cur[g] = save(b, l, g, SV_QK, t, lb_act_bytes(b, T, qk), "qkv");
  }
  lb_none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_ROPE, false, NONE, 0, NULL);
  append_attn(b, 0, b->split);
  b->step++;
  /* its input is the attention's output, a view of it (flash attention
   * writes it (tokens, heads, dim), so the transpose back is no copy),
   * saved for the weight gradient: the very tensor the ring family's
   * backward reads again, a copy of its own after Ulysses' all-to-all */
  ALL_GPUS(g) {
    op(b, g, LAYER_OUT_PROJ, false, NONE, lb_act_bytes(b, T, h), "proj_out");
    SAVED(l, g, SV_AO) = attn_output(b, g);
  }
  if (b->tp > 1) lb_coll(b, COMM_REDUCE_SCATTER, lb_act_bytes(b, local, h), NULL,
                      lb_act_bytes(b, local, h), "proj_scattered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, LAYER_RESID_ATTN, false, SAVED(l, g, SV_X), 0, NULL), cm, g);
    /* unsaved (unfused), it lives to the block's last residual add */
    if (saves(b, l, SV_H1)) b->cur[g] = save(b, l, g, SV_H1, t, lb_act_bytes(b, local, h), "resid");
    else b->cur[g] = SAVED(l, g, SV_H1) = plan_buf_out(b->p, t, lb_act_bytes(b, local, h), "resid");
  }
  lb_none_of(b, cm);
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_NORM_MLP, false, NONE, 0, NULL);
    save_if(b, l, g, SV_N2F, t, local * h * (4.0 + d->elem_bytes), "norm_fp32");
    b->cur[g] = save(b, l, g, SV_N2, t, lb_act_bytes(b, local, h), "norm_out");
  }
  if (b->tp > 1) lb_coll(b, COMM_ALL_GATHER, lb_act_bytes(b, local, h), NULL, lb_act_bytes(b, T, h),
                      "gathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, LAYER_FC1, false, NONE, 0, NULL), cm, g);
    b->cur[g] = save(b, l, g, SV_FC1, t, lb_act_bytes(b, T, 2 * f), "fc1_out");
  }
  lb_none_of(b, cm);
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_SWIGLU, false, NONE, 0, NULL);
    save_if(b, l, g, SV_SILU, t, T * f * d->elem_bytes, "silu_out");
    b->cur[g] = save(b, l, g, SV_SWI, t, lb_act_bytes(b, T, f), "swiglu_out");
  }
  ALL_GPUS(g) op(b, g, LAYER_FC2, false, NONE, lb_act_bytes(b, T, h), "fc2_out");
  if (b->tp > 1) lb_coll(b, COMM_REDUCE_SCATTER, lb_act_bytes(b, local, h), NULL,
                      lb_act_bytes(b, local, h), "fc2_scattered", cm);
  b->step++;
  ALL_GPUS(g) lb_after(b, op(b, g, LAYER_RESID_MLP, false, SAVED(l, g, SV_H1),
                          lb_act_bytes(b, local, h), "layer_out"), cm, g);
}

/* The gradient reduction of layer l's weight gradients grads[g x 4] over
 * each TP rank's gradient group (SP x DP GPUs hold the same weights), in
 * one bucket, issued when the layer's backward is done on the GPU and run
 * on its own NCCL stream while earlier layers' backward goes on: ZeRO 0
 * all-reduces, 1-3 reduce-scatter (ZeRO 2-3 keep only the shard). */
void lb_reduce_grads(lb *b, double params) {
  /* accumulated over micro-batches, reduced after the last (Megatron's
   * no_sync for the others) */
  if (!b->model || b->grad_group < 2 || b->pass == PASS_FWD || !b->last_mb) return;
  uint32_t k = b->grad_group;
  double bytes = lb_grad_bytes(b) * params;
  g_autofree uint32_t *shard = g_new(uint32_t, b->n);
  for (uint32_t r = 0; r < b->tp; r++) {
    lb_grad_group(b, r);
    if (!lb_group_sim(b, k)) continue;
    comm_api api = b->zero ? COMM_REDUCE_SCATTER : COMM_ALL_REDUCE;
    uint32_t c = lb_ring(b, api, k, bytes / k, NULL, b->zero >= 2 ? bytes / k : 0, "grad_shard",
                      shard, NULL, true);
    for (uint32_t j = 0; j < k; j++) {
      uint32_t g = b->group[j];
      if (!lb_sim(b, g)) continue;
      for (int i = 0; i < 4; i++)
        if (b->grads[g * 4 + i] != NONE) plan_buf_reads(b->p, c, b->grads[g * 4 + i]);
      if (b->zero >= 2) plan_buf_keep(b->p, shard[g]);
    }
  }
}

/* A column-parallel GEMM's backward (QKV, FC1) from the norm output it
 * read (saved tensor `saved`): at TP > 1 that shard all-gathered again
 * (Megatron keeps the local shard only) for the weight gradient, dgrad and
 * wgrad (its main grad in slot `slot`), then the input gradient
 * reduce-scattered back to the sequence shard. */
static void column_backward(lb *b, uint32_t l, layer_op which, int saved, int slot,
                            uint32_t *regather, uint32_t *cm) {
  const layer_dims *d = &b->d;
  double T = d->tokens, local = T / b->tp, h = d->hidden;
  if (b->tp > 1) {
    ALL_GPUS(g) regather[g] = SAVED(l, g, saved);
    g_autofree uint32_t *keep_cur = g_memdup2(b->cur, b->n * sizeof *b->cur);
    lb_coll(b, COMM_ALL_GATHER, lb_act_bytes(b, local, h), regather, lb_act_bytes(b, T, h),
            "gathered", cm);
    ALL_GPUS(g) {
      regather[g] = b->cur[g];
      b->cur[g] = keep_cur[g];
    }
  }
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, which, true,
                             b->tp > 1 ? regather[g] : SAVED(l, g, saved), lb_act_bytes(b, T, h),
                             "dnorm"), cm, g);
    b->grads[g * 4 + slot] = wgrad(b, t, which);
  }
  lb_none_of(b, cm);
  if (b->tp > 1) lb_coll(b, COMM_REDUCE_SCATTER, lb_act_bytes(b, local, h), NULL,
                      lb_act_bytes(b, local, h), "dscattered", cm);
}

void lb_backward_layer(lb *b, uint32_t l) {
  const layer_dims *d = &b->d;
  double T = d->tokens, local = T / b->tp, h = d->hidden, tp = b->tp;
  double qkv = ((double)d->heads + 2.0 * d->kv_heads) * d->head_dim / tp;
  double q = (double)d->heads * d->head_dim / tp, f = d->ffn / tp;
  double qk = ((double)d->heads + d->kv_heads) * d->head_dim / tp;
  g_autofree uint32_t *cm = g_new(uint32_t, b->n);
  g_autofree uint32_t *regather = g_new(uint32_t, b->n);
  g_autofree uint32_t *dres = g_new(uint32_t, b->n);
  lb_none_of(b, cm);
  b->layer = l;
  /* this layer's kind's plan (its appenders, if open, were made for it) */
  b->attn = b->attns[b->kind[l]];
  b->split = b->splits[b->kind[l]];
  b->attn_src = b->attn_srcs[b->kind[l]];
  if (b->pass == PASS_BWD) {
    /* what a forward would have saved: inputs of the pass, each freed
     * after its last reader as autograd frees a node's saved tensors once
     * its backward has run (plan_buf_saved_input; the layer's fwdbwd
     * frees the same tensors at the same tasks) */
    double e = d->elem_bytes;
    double bytes[SV_COUNT] = {lb_act_bytes(b, local, h), lb_act_bytes(b, local, h),
                              lb_act_bytes(b, local, h), lb_act_bytes(b, local, h),
                              lb_act_bytes(b, T, 2 * f), lb_act_bytes(b, T, f),
                              (lb_layer_params(b) - 2.0 * h) * e, local * h * (4 + e),
                              local * h * (4 + e), T * f * e, T * qk * e, 0};
    static const char *const names[SV_COUNT] = {"x", "norm_out", "resid", "norm_out",
                                                "fc1_out", "swiglu_out", "weights_bf16",
                                                "norm_fp32", "norm_fp32", "silu_out", "qkv",
                                                "out"};
    ALL_GPUS(g) for (int k = 0; k < SV_COUNT; k++)
      SAVED(l, g, k) = saves(b, l, k) ? plan_buf_saved_input(b->p, g, bytes[k], names[k]) : NONE;
    lb_open_ranks(b, l);
  } else if (b->recompute == RECOMPUTE_FULL) {
    /* the layer's forward again from its saved input (Megatron's full
     * recomputation: one checkpoint per layer), its output dropped */
    g_autofree uint32_t *grad = g_memdup2(b->cur, b->n * sizeof *grad);
    ALL_GPUS(g) b->cur[g] = SAVED(l, g, SV_X);
    bool was = b->transient;
    b->transient = false;
    pass_kind pass = b->pass;
    b->pass = PASS_FWDBWD;
    guint first = b->p->tasks->len;
    lb_close_ranks(b);
    lb_open_ranks(b, l);
    b->recomputing = true;
    lb_forward_layer(b, l);
    b->recomputing = false;
    b->p->recomputed_flops += layer_tasks_flops(b->p, first, b->p->tasks->len);
    b->pass = pass;
    b->transient = was;
    memcpy(b->cur, grad, b->n * sizeof *grad);
  } else if (!b->ranks) {
    lb_open_ranks(b, l);
  }
  /* AMP: the GEMMs read the bf16 copy the forward saved */
  if ((b->w->precision == PRECISION_AMP)) ALL_GPUS(g) b->wcur[g] = SAVED(l, g, SV_W);
  else gather_weights(b, l, cm);
  ALL_GPUS(g) {
    if (b->cur[g] == NONE) b->cur[g] = plan_buf_input(b->p, g, lb_act_bytes(b, local, h), "dout");
    for (int i = 0; i < 4; i++) b->grads[g * 4 + i] = NONE;
  }
  b->step++;
  /* the MLP block's residual: the gradient goes both ways */
  ALL_GPUS(g) {
    uint32_t in = b->cur[g];
    lb_after(b, op(b, g, LAYER_RESID_MLP, true, NONE, d->unfused ? 0 : lb_act_bytes(b, local, h),
                   "dresid"), cm, g);
    /* unfused, the add's backward hands the gradient itself on, no copy
     * (measured: calibration/h100x1-layer-trace); its kernel stands for
     * the gradient's last accumulation (the layer input's, after the
     * attention block's RMSNorm), which that op's price leaves out */
    if (d->unfused) b->cur[g] = in;
    dres[g] = b->cur[g];
  }
  lb_none_of(b, cm);
  if (b->tp > 1) lb_coll(b, COMM_ALL_GATHER, lb_act_bytes(b, local, h), NULL, lb_act_bytes(b, T, h),
                      "dgathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, LAYER_FC2, true, SAVED(l, g, SV_SWI), lb_act_bytes(b, T, f),
                             "dswiglu"), cm, g);
    b->grads[g * 4 + 3] = wgrad(b, t, LAYER_FC2);
  }
  lb_none_of(b, cm);
  ALL_GPUS(g) {
    uint32_t t = op(b, g, LAYER_SWIGLU, true, SAVED(l, g, SV_FC1), lb_act_bytes(b, T, 2 * f), "dfc1");
    read_saved(b, l, g, SV_SILU, t);
  }
  column_backward(b, l, LAYER_FC1, SV_N2, 2, regather, cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, LAYER_NORM_MLP, true, saved(b, l, g, SV_H1),
                                lb_act_bytes(b, local, h), "dresid"), cm, g);
    read_saved(b, l, g, SV_N2F, t);
  }
  lb_none_of(b, cm);
  ALL_GPUS(g) op(b, g, LAYER_RESID_ATTN, true, dres[g], lb_act_bytes(b, local, h), "dresid");
  ALL_GPUS(g) dres[g] = b->cur[g];
  if (b->tp > 1) lb_coll(b, COMM_ALL_GATHER, lb_act_bytes(b, local, h), NULL, lb_act_bytes(b, T, h),
                      "dgathered", cm);
  b->step++;
  ALL_GPUS(g) {
    uint32_t t = lb_after(b, op(b, g, LAYER_OUT_PROJ, true, NONE, lb_act_bytes(b, T, q),
                             "dattn_out"), cm, g);
    read_saved(b, l, g, SV_AO, t);
    b->grads[g * 4 + 1] = wgrad(b, t, LAYER_OUT_PROJ);
  }
  lb_none_of(b, cm);
  append_attn(b, b->split, b->attn ? b->attn->tasks->len : 0);
  b->step++;
  ALL_GPUS(g) read_saved(b, l, g, SV_QK, op(b, g, LAYER_ROPE, true, NONE, lb_act_bytes(b, T, qkv),
                                          "dqkv"));
  column_backward(b, l, LAYER_QKV, SV_N1, 0, regather, cm);
  b->step++;
  ALL_GPUS(g) {
    /* unfused, the RMSNorm's backward reads its float32 copy (SV_N1F), not
     * the layer's input (calibration/h100x1-layer-trace) */
    uint32_t t = lb_after(b, op(b, g, LAYER_NORM_ATTN, true, saved(b, l, g, SV_X), 0, NULL), cm, g);
    plan_buf_reads(b->p, t, dres[g]);
    read_saved(b, l, g, SV_N1F, t);
    b->cur[g] = plan_buf_out(b->p, t, lb_act_bytes(b, local, h), "dx");
  }
  lb_close_ranks(b);
  lb_reduce_grads(b, lb_layer_params(b));
}
