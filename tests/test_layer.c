/* Tests of the layer scope (layer.h) and of splicing a plan (plan.h
 * plan_splice): the layer is the scheduler's own plan with the layer's ops
 * around it, in the right order on every GPU; its FLOPs are the closed
 * forms; on one GPU its time is the sum of its parts. */
#include "exec.h"
#include "layer.h"
#include "plan_buf.h"
#include "testutil.h"

static topology *switch_topo(uint32_t n) {
  topology *t = test_switch(n, 100e9, 1e-6);
  t->compute.peak_flops = 100e12;
  return t;
}

/* A small Llama-like layer: 8 heads, 2 KV heads, head dim 16, hidden 128,
 * FFN 352. */
static workload small(uint32_t n, uint64_t seq, bool causal, pass_kind pass) {
  workload w = {.gpus = n, .seq_len = seq, .batch = 1, .heads = 8, .kv_heads = 2,
                .head_dim = 16, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                .causal = causal, .pass = pass, .linear_block = 4, .hidden = 128,
                .ffn = 352, .scope = SCOPE_LAYER};
  return w;
}

static layer_dims dims(const workload *w) {
  return (layer_dims){.tokens = (double)w->batch * w->seq_len / w->gpus, .hidden = w->hidden,
                      .ffn = w->ffn, .heads = w->heads, .kv_heads = w->kv_heads,
                      .head_dim = w->head_dim, .tp = 1, .elem_bytes = w->elem_bytes};
}

/* Per GPU, the order of a layer's tasks: the ops before the attention
 * (norm, QKV, RoPE) end before any of the GPU's attention tasks starts,
 * the ops after it start after its forward attention tasks end, and the
 * backward's in reverse; every task of the attention plan is in the layer
 * once, marked, with its dependencies; its buffers come along. */
static void check_layer(const sched_ops *s, uint32_t n, bool causal, pass_kind pass) {
  topology *t = switch_topo(n);
  workload w = small(n, 4 * 2 * n * (uint64_t)(n > 1 ? n - 1 : 1), causal, pass);
  if (!s->check(&w, t, NULL) || !sched_check_attention(s, &w, NULL)) {
    topo_free(t);
    return;
  }
  plan *a = s->build(&w, t, false), *q = layer_build(s, &w, t, false);
  uint32_t marked[3] = {0}, ops = 0;
  for (guint i = 0; i < q->tasks->len; i++) {
    const plan_task *k = plan_task_at(q, i);
    marked[k->region]++;
    ops += k->region == 0 && k->kind == TASK_COMPUTE;
  }
  /* every attention task once (joins between streams out of step aside) */
  CU_ASSERT(marked[1] + marked[2] == a->tasks->len);
  CU_ASSERT_EQUAL(marked[2] > 0, pass != PASS_FWD);
  CU_ASSERT_EQUAL(marked[1] > 0, pass != PASS_BWD);
  uint32_t per_pass = 3 + 7; /* 3 ops before the attention, 7 after */
  uint32_t passes = pass == PASS_FWDBWD ? 2 : 1;
  CU_ASSERT(ops >= per_pass * passes && ops <= per_pass * passes * n);
  CU_ASSERT_EQUAL(plan_buf_count(q), plan_buf_count(a));
  CU_ASSERT_EQUAL(plan_buf_use_count(q), plan_buf_use_count(a));
  exec_opts o = {.keep_trace = true};
  exec_result *r = exec_run(q, t, &o), *ra = exec_run(a, t, &o);
  /* per GPU and region: first start, last end of the attention's spans;
   * the layer ops' spans against them */
  for (uint32_t g = 0; g < n; g++) {
    double t0[3] = {INFINITY, INFINITY, INFINITY}, t1[3] = {-1, -1, -1};
    for (guint i = 0; i < r->spans->len; i++) {
      const exec_span *sp = &g_array_index(r->spans, exec_span, i);
      if (sp->comm || sp->gpu != g || !sp->region) continue;
      uint32_t k = sp->region;
      t0[k] = fmin(t0[k], sp->t0_s);
      t1[k] = fmax(t1[k], sp->t1_s);
    }
    for (guint i = 0; i < r->spans->len; i++) {
      const exec_span *sp = &g_array_index(r->spans, exec_span, i);
      if (sp->comm || sp->gpu != g || sp->region) continue;
      bool before_fwd = sp->t1_s <= t0[1] + 1e-12, after_fwd = sp->t0_s >= t1[1] - 1e-12;
      bool before_bwd = sp->t1_s <= t0[2] + 1e-12, after_bwd = sp->t0_s >= t1[2] - 1e-12;
      if (pass == PASS_FWD) CU_ASSERT(before_fwd || after_fwd);
      if (pass == PASS_BWD) CU_ASSERT(before_bwd || after_bwd);
      if (pass == PASS_FWDBWD) CU_ASSERT(before_fwd || (after_fwd && before_bwd) || after_bwd);
    }
  }
  /* the attention part's time: some of the layer's, no more */
  CU_ASSERT(r->region_s > 0 && r->region_s < r->step_s);
  CU_ASSERT(r->step_s > ra->step_s);
  CU_ASSERT_EQUAL(ra->region_s, 0);
  exec_result_free(r);
  exec_result_free(ra);
  plan_free(a);
  plan_free(q);
  topo_free(t);
}

static void t_every_scheduler_layer(void) {
  for (const sched_ops *const *s = sched_all(); *s; s++)
    for (int c = 0; c < 2; c++)
      for (pass_kind ps = PASS_FWD; ps <= PASS_FWDBWD; ps++) {
        check_layer(*s, 2, c, ps);
        check_layer(*s, 4, c, ps);
      }
}

/* FLOPs of the layer's ops against closed forms: per pass, the GEMMs
 * 2·T·hidden·(H + 2·KVH)·D (QKV), 2·T·H·D·hidden (out projection),
 * 2·T·hidden·2·FFN (FC1), 2·T·FFN·hidden (FC2), twice that backward (dgrad
 * and wgrad); element-wise ops none.  The layer's FLOPs are the
 * attention's plus those. */
static void t_layer_flops(void) {
  topology *t = switch_topo(4);
  for (pass_kind ps = PASS_FWD; ps <= PASS_FWDBWD; ps++) {
    workload w = small(4, 4096, true, ps);
    plan *a = sched_ring.build(&w, t, false), *q = layer_build(&sched_ring, &w, t, false);
    exec_opts o = {0};
    exec_result *r = exec_run(q, t, &o), *ra = exec_run(a, t, &o);
    double T = 1024, h = 128, H = 8, KV = 2, D = 16, f = 352;
    double fwd = 2 * T * (h * (H + 2 * KV) * D + H * D * h + h * 2 * f + f * h);
    double want = (ps != PASS_BWD ? fwd : 0) + (ps != PASS_FWD ? 2 * fwd : 0);
    CU_ASSERT_CLOSE(r->flops - ra->flops, want * 4, 1e-12); /* 4 GPUs */
    layer_dims d = dims(&w);
    plan_op rms = compute_layer_op(&d, LAYER_NORM_ATTN, false);
    CU_ASSERT_EQUAL(compute_op_flops(&rms), 0);
    exec_result_free(r);
    exec_result_free(ra);
    plan_free(a);
    plan_free(q);
  }
  topo_free(t);
}

/* On one GPU, with no host costs, the layer's time is the sum of its
 * parts: each op's price alone plus the attention's own time. */
static void t_layer_sum_of_parts(void) {
  topology *t = switch_topo(1);
  t->compute.host_s = t->compute.bwd_host_s = t->compute.copy_host_s = 0;
  t->compute.merge_host_s = 0;
  memset(t->compute.lin_host_s, 0, sizeof t->compute.lin_host_s);
  t->launch_s = t->p2p_launch_s = t->p2p_host_s = t->p2p_op_host_s = 0;
  for (pass_kind ps = PASS_FWD; ps <= PASS_FWDBWD; ps++) {
    workload w = small(1, 8192, true, ps);
    plan *a = sched_ring.build(&w, t, false), *q = layer_build(&sched_ring, &w, t, false);
    exec_opts o = {0};
    exec_result *r = exec_run(q, t, &o), *ra = exec_run(a, t, &o);
    layer_dims d = dims(&w);
    double parts = ra->step_s;
    for (int b = 0; b < 2; b++) {
      if ((b && ps == PASS_FWD) || (!b && ps == PASS_BWD)) continue;
      for (layer_op k = 0; k < LAYER_OPS; k++) {
        plan_op op = compute_layer_op(&d, k, b);
        parts += compute_op_s(&t->compute, &op);
      }
    }
    CU_ASSERT_CLOSE(r->step_s, parts, 1e-9);
    CU_ASSERT_CLOSE(r->region_s, ra->step_s, 1e-9);
    exec_result_free(r);
    exec_result_free(ra);
    plan_free(a);
    plan_free(q);
  }
  topo_free(t);
}

int main(void) {
  static const test_case cases[] = {TEST(t_every_scheduler_layer), TEST(t_layer_flops),
                                    TEST(t_layer_sum_of_parts), {NULL, NULL}};
  return test_run("layer", cases);
}
