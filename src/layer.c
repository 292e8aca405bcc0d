/* layer: the decoder layer's plan around a scheduler's, and the whole
 * training step of a model (layer.h). */
#include "layer.h"

#include <string.h>

#include "layer_build.h"
#include "orbits.h"

uint32_t layer_tp(const workload *w) { return w->tp ? w->tp : 1; }
uint32_t layer_dp(const workload *w) { return w->scope == SCOPE_MODEL && w->dp ? w->dp : 1; }
uint32_t layer_job_gpus(const workload *w) {
  return w->scope == SCOPE_ATTENTION ? w->gpus : layer_tp(w) * w->gpus * layer_dp(w);
}

uint32_t layer_micro_batches(const workload *w) {
  if (w->scope != SCOPE_MODEL) return 1;
  if (w->global_batch_tokens)
    return (uint32_t)(w->global_batch_tokens / ((uint64_t)w->batch * w->seq_len * layer_dp(w)));
  return w->micro_batches > 1 ? w->micro_batches : 1;
}

layer_dims layer_dims_of(const workload *w) {
  return (layer_dims){.tokens = (double)w->batch * ((double)w->seq_len / w->gpus),
                      .hidden = w->hidden, .ffn = w->ffn, .heads = w->heads,
                      .kv_heads = w->kv_heads, .head_dim = w->head_dim, .tp = layer_tp(w),
                      .elem_bytes = w->elem_bytes, .unfused = w->unfused,
                      .fp8 = w->precision == PRECISION_FP8};
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

/* Each placement's dimensions (0 TP, 1 SP, 2 DP), innermost first. */
static const uint8_t place_order[PLACE_KINDS][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
static const char *const place_names[PLACE_KINDS] = {"tp,sp,dp", "tp,dp,sp", "sp,tp,dp",
                                                     "sp,dp,tp", "dp,tp,sp", "dp,sp,tp"};

const char *layer_placement_name(placement_kind k) { return place_names[k]; }

bool layer_placement_parse(const char *text, placement_kind *out) {
  for (int k = 0; k < PLACE_KINDS; k++)
    if (!strcmp(text, place_names[k])) {
      *out = (placement_kind)k;
      return true;
    }
  return false;
}

uint32_t *lb_placement(const workload *w) {
  uint32_t tp = layer_tp(w), sp = w->gpus, n = tp * sp * layer_dp(w);
  uint32_t *to = g_new(uint32_t, n);
  for (uint32_t g = 0; g < n; g++) to[g] = layer_gpu(w, g % tp, g / tp % sp, g / (tp * sp));
  return to;
}

uint32_t layer_gpu(const workload *w, uint32_t r, uint32_t s, uint32_t d) {
  uint32_t size[3] = {layer_tp(w), w->gpus, layer_dp(w)}, rank[3] = {r, s, d};
  placement_kind k = w->scope == SCOPE_ATTENTION ? PLACE_TP_SP_DP : w->placement;
  uint32_t g = 0;
  for (int i = 2; i >= 0; i--) g = g * size[place_order[k][i]] + rank[place_order[k][i]];
  return g;
}

bool layer_placed_by_default(const workload *w) {
  if (w->scope == SCOPE_ATTENTION || w->placement == PLACE_TP_SP_DP) return true;
  uint32_t size[3] = {layer_tp(w), w->gpus, layer_dp(w)};
  /* the dimensions of more than one GPU, in each order */
  int a[3], b[3], na = 0, nb = 0;
  for (int i = 0; i < 3; i++) {
    if (size[place_order[w->placement][i]] > 1) a[na++] = place_order[w->placement][i];
    if (size[place_order[PLACE_TP_SP_DP][i]] > 1) b[nb++] = place_order[PLACE_TP_SP_DP][i];
  }
  return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

uint32_t lb_node_blocks(const uint32_t *phys, uint32_t n, uint32_t per) {
  uint32_t c = 0;
  for (uint32_t i = 0; i < n; i++) c += phys[i] / per == phys[0] / per;
  for (uint32_t i = 0; i < n; i++) {
    bool same = phys[i] / per == phys[i - i % c] / per;
    bool next = i % c || !i || phys[i] / per != phys[i - 1] / per;
    if (!same || !next) return 1;
  }
  return c;
}

void layer_view_init(layer_view *v, const workload *w, const topology *t) {
  uint32_t tp = layer_tp(w);
  v->t = *t;
  v->owned = false;
  bool by_default = layer_placed_by_default(w);
  if (w->scope == SCOPE_ATTENTION || (tp == 1 && by_default)) return;
  uint32_t N = t->n_gpus, per = t->gpus_per_node ? t->gpus_per_node : N, n;
  g_autofree uint32_t *phys = NULL;
  if (by_default) {
    /* TP rank 0's GPUs per node: a node of m GPUs holds m / tp of them
     * where TP divides it; TP groups spanning nodes leave one a node */
    n = N / tp;
    v->t.gpus_per_node = per % tp == 0 ? per / tp : 1;
    phys = g_new(uint32_t, n);
    for (uint32_t i = 0; i < n; i++) phys[i] = i * tp;
  } else {
    /* the job's SP GPUs of TP rank 0, DP rank after DP rank */
    uint32_t sp = w->gpus;
    n = sp * layer_dp(w);
    phys = g_new(uint32_t, n);
    for (uint32_t i = 0; i < n; i++) phys[i] = layer_gpu(w, 0, i % sp, i / sp);
    v->t.gpus_per_node = lb_node_blocks(phys, n, per);
  }
  v->t.n_gpus = n;
  if (v->t.gpus_per_node > n) v->t.gpus_per_node = n;
  v->t.direct = g_new(uint8_t, (size_t)n * n);
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < n; j++)
      v->t.direct[(size_t)i * n + j] = t->direct[(size_t)phys[i] * N + phys[j]];
  v->owned = true;
}

void layer_view_clear(layer_view *v) {
  if (v->owned) g_free(v->t.direct);
  v->owned = false;
}

/* What forward saves for backward, per GPU and layer (Megatron, no
 * recomputation): the layer input, the two norms' outputs (the GPU's
 * shard), the attention block's residual, fc1's and SwiGLU's outputs. */

static uint32_t backward_start(const plan *a, pass_kind pass) {
  if (pass == PASS_BWD) return 0;
  if (pass == PASS_FWD) return a->tasks->len;
  for (uint32_t i = a->tasks->len; i-- > 0;) {
    const plan_task *t = plan_task_at(a, i);
    if (t->kind == TASK_COMM && t->api == COMM_BARRIER) return i;
  }
  g_error("layer: a forward-then-backward plan without its pass barrier");
}

/* Whether attention plan a's kernels read the layer's own K and V (its
 * input "k, v", sched_io): autograd then saves them for the backward
 * (ring_flash_attn's first step, the all-gather and TokenRing programs).
 * An attention that moves K and V into new tensors before its kernels
 * (Ulysses' all-to-all) saves those instead. */
static bool attn_keeps_own_kv(const plan *a) {
  const char *kv = g_intern_static_string("k, v");
  for (uint32_t u = 0; u < plan_buf_use_count(a); u++) {
    const plan_buf_use *use = plan_buf_use_at(a, u);
    const plan_buf *buf = plan_buf_at(a, use->buf);
    const plan_task *x = plan_task_at(a, use->task);
    if (plan_buf_name(a, buf) == kv && buf->input && x->kind == TASK_COMPUTE && x->op.kind == OP_ATTN)
      return true;
  }
  return false;
}

plan *layer_build(const sched_ops *s, const workload *w, const topology *t, bool with_attention,
                  bool record_segs) {
  return layer_build_orbits(s, w, t, with_attention, record_segs, NULL);
}

plan *layer_build_orbits(const sched_ops *s, const workload *w, const topology *t,
                         bool with_attention, bool record_segs, const orbits *o) {
  lb b = {.t = t, .w = w, .d = layer_dims_of(w), .tp = layer_tp(w), .sp = w->gpus,
          .dp = layer_dp(w), .pass = w->pass, .model = w->scope == SCOPE_MODEL,
          .zero = w->zero, .recompute = w->recompute};
  b.layers = b.model ? layers_total(w) : 1;
  b.n = b.tp * b.sp * b.dp;
  b.grad_group = b.sp * b.dp;
  b.p = plan_new(b.n, record_segs);
  uint32_t *placed = lb_placement(w);
  if (o) {
    /* o's representatives, in the builder's numbering (whole TP ranks of
     * replicas, or the least SP ranks of the scheduler's turn's orbits in
     * them: layer_orbits_sched) */
    g_autofree uint32_t *at = g_new(uint32_t, t->n_gpus);
    for (uint32_t g = 0; g < b.n; g++) at[placed[g]] = g;
    b.sim = g_new0(uint8_t, b.n);
    b.rep = g_new(uint32_t, b.n);
    for (uint32_t g = 0; g < b.n; g++) {
      b.rep[g] = at[o->rep[placed[g]]];
      b.sim[g] = b.rep[g] == g;
    }
    plan_quotient(b.p, b.sim, b.rep);
  }
  if (layer_placed_by_default(w)) g_free(placed);
  else b.phys = placed;
  b.saved = g_new(uint32_t, (size_t)b.layers * b.n * SV_COUNT);
  b.weights = g_new(uint32_t, (size_t)b.layers * b.n);
  b.wcur = g_new(uint32_t, b.n);
  b.grads = g_new(uint32_t, (size_t)b.n * 4);
  b.cur = g_new(uint32_t, b.n);
  b.group = g_new(uint32_t, MAX(b.tp, b.grad_group));
  /* the layers' parameters on each GPU in the layer's dtype (Megatron's
   * bf16 weights; ZeRO 3: a 1 / (SP x DP) shard) */
  double wbytes = lb_layer_params(&b) * lb_param_bytes(&b);
  if (b.model && b.zero >= 3 && b.grad_group > 1) wbytes /= b.grad_group;
  lb *bp = &b;
  for (uint32_t l = 0; l < b.layers; l++)
    LB_GPUS(bp, g) b.weights[(size_t)l * b.n + g] = plan_buf_input(b.p, g, wbytes, "weights");
  /* FP8: TransformerEngine keeps each GEMM weight's FP8 copy and its
   * transpose (forward and dgrad operands) between steps, 2 bytes a
   * weight beside the bf16 one (the norms' weights stay bf16) */
  if (w->precision == PRECISION_FP8)
    for (uint32_t l = 0; l < b.layers; l++)
      LB_GPUS(bp, g) plan_buf_input(b.p, g, lb_fp8_weight_bytes(&b), "weights_fp8");
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
    b.qkv_view[k] = attn_keeps_own_kv(b.attns[k]);
    b.attn_srcs[k] = plan_append_src_new(b.attns[k]);
    if (b.attns[k]->note->len && !g_strstr_len(b.p->note->str, -1, b.attns[k]->note->str))
      g_string_append_printf(b.p->note, "%s%s", b.p->note->len ? "; " : "",
                             b.attns[k]->note->str);
  }
  layer_view_clear(&view);
  g_autofree plan_append **open = g_new0(plan_append *, (size_t)b.layers * b.tp * b.dp);
  uint32_t *e_arr = g_new(uint32_t, (size_t)5 * b.n);
  ends e = {e_arr, e_arr + b.n, e_arr + 2 * b.n, e_arr + 3 * b.n, e_arr + 4 * b.n};
  for (uint32_t i = 0; i < 5 * b.n; i++) e_arr[i] = NONE;
  b.mbs = layer_micro_batches(w);
  b.main_grad = g_new(uint32_t, ((size_t)b.layers + 1) * b.n * 4);
  for (size_t i = 0; i < ((size_t)b.layers + 1) * b.n * 4; i++) b.main_grad[i] = NONE;
  /* micro-batches one after the other, each forward then backward, the
   * gradients accumulated and reduced after the last, one optimizer step */
  for (uint32_t mb = 0; mb < b.mbs; mb++) {
    b.last_mb = mb + 1 == b.mbs;
    b.first_mb = mb == 0;
    for (uint32_t g = 0; g < b.n; g++) b.cur[g] = NONE;
    b.transient = b.recompute == RECOMPUTE_FULL && w->pass == PASS_FWDBWD;
    if (w->pass != PASS_BWD) {
      if (b.model) plan_phase_from(b.p, PLAN_BODY);
      if (b.model) lb_embed(&b, &e);
      for (uint32_t l = 0; l < b.layers; l++) {
        lb_open_ranks(&b, l);
        lb_forward_layer(&b, l);
        /* each layer's appenders wait for its backward (none with full
         * recomputation, which appends the forward again) */
        if (b.ranks) {
          if (b.transient || w->pass == PASS_FWD) lb_close_ranks(&b);
          else {
            memcpy(open + (size_t)l * b.tp * b.dp, b.ranks, b.tp * b.dp * sizeof *b.ranks);
            g_clear_pointer(&b.ranks, g_free);
          }
        }
      }
      if (b.model) lb_head_forward(&b, &e);
      else
        LB_GPUS(bp, g) plan_buf_keep(b.p, b.cur[g]); /* the layer's output */
    }
    b.transient = false;
    if (w->pass != PASS_FWD) {
      if (b.model) lb_head_backward(&b, &e);
      else
        for (uint32_t g = 0; g < b.n; g++) b.cur[g] = NONE;
      for (uint32_t l = b.layers; l-- > 0;) {
        size_t at = (size_t)l * b.tp * b.dp;
        if (open[at]) {
          b.ranks = g_new(plan_append *, b.tp * b.dp);
          memcpy(b.ranks, open + at, b.tp * b.dp * sizeof *b.ranks);
          memset(open + at, 0, b.tp * b.dp * sizeof *b.ranks);
        }
        if (b.model && l == 0) plan_phase_from(b.p, PLAN_BACKWARD_END);
        lb_backward_layer(&b, l);
      }
      if (b.model) lb_embed_backward(&b, &e);
      else
        LB_GPUS(bp, g) plan_buf_keep(b.p, b.cur[g]); /* dx */
    }
  }
  if (b.model && w->pass != PASS_FWD) {
    plan_phase_from(b.p, PLAN_OPTIMIZER);
    lb_optimizer(&b);
  }
  plan_quotient_end(b.p);
  if (b.unfit) g_clear_pointer(&b.p, plan_free);
  if (b.p) plan_finish(b.p);
  if (b.phys && b.p) plan_relabel(b.p, b.phys);
  g_free(b.phys);
  g_free(b.sim);
  g_free(b.rep);
  g_free(e_arr);
  g_free(b.main_grad);
  for (int k = 0; k < ATTN_KINDS; k++) {
    plan_append_src_free(b.attn_srcs[k]);
    plan_free((plan *)b.attns[k]);
  }
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

double layer_tasks_estimate_mult(const workload *w, double mult) {
  double sp = w->gpus, layers = w->scope == SCOPE_MODEL ? layers_total(w) : 1;
  /* per layer, TP rank and replica: a ring-like attention plan (a kernel,
   * a merge and a group per GPU and step, both passes) and the layer's
   * ops and collectives on each SP GPU */
  double mbs = layer_micro_batches(w), copies = layer_tp(w) * layer_dp(w) / mult;
  return mbs * layers * copies * (6 * sp * sp + 64 * sp) + 16;
}

double layer_tasks_estimate(const workload *w, const topology *t) {
  orbits *o = t ? layer_orbits(w, t) : NULL;
  double mult = o ? o->mult : 1;
  orbits_free(o);
  return layer_tasks_estimate_mult(w, mult);
}

double layer_op_model_flops(const plan_op *op) {
  if (op->kind != OP_ATTN || !op->causal) return compute_op_flops(op);
  /* the mask's diagonal half, not the call's (plan.h diag_pairs): a
   * stripe's block between two GPUs is all model work */
  double pairs = op->pairs - op->diag_pairs / 2;
  return 4.0 * op->batch * op->heads * op->head_dim * pairs;
}

double layer_tasks_flops(const plan *p, guint from, guint to) {
  double sum = 0;
  for (guint i = from; i < to; i++) {
    const plan_task *t = plan_task_at(p, i);
    if (t->kind != TASK_COMPUTE) continue;
    plan_op o = t->op;
    o.backward = false;
    double copies = t->gpu == PLAN_ALL ? p->n_gpus : 1;
    sum += copies * layer_op_model_flops(&o) * (t->op.backward ? 2 : 1);
  }
  return sum;
}

double layer_model_flops(const plan *p) {
  return layer_tasks_flops(p, 0, p->tasks->len) - p->recomputed_flops;
}
