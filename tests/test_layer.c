/* layer and plan_append: a decoder layer around a scheduler's attention.
 * FLOPs of every op against closed forms, the layer's time as the sum of
 * its parts where nothing overlaps, the attention part the scheduler's own
 * plan (every TP rank's copy, on its GPUs), TP collectives' bytes against
 * closed forms, model FLOPs independent of how the job is split, and
 * memory declarations that balance for every scheduler and pass. */
#include "budget.h"
#include "compute.h"
#include "exec.h"
#include "layer.h"
#include "layers.h"
#include "plan_buf.h"
#include "scenario.h"
#include "sim.h"
#include "testutil.h"
#include "verdict.h"

#include <math.h>
#include <string.h>

/* Llama-3-8B's layer (models/llama3-8b.json) */
static workload llama8b(uint32_t sp, uint32_t tp, uint64_t seq, pass_kind pass) {
  return (workload){.gpus = sp, .seq_len = seq, .batch = 1, .heads = 32, .kv_heads = 8,
                    .head_dim = 128, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                    .causal = true, .pass = pass, .attention = ATTN_SOFTMAX, .hidden = 4096,
                    .ffn = 14336, .vocab = 128256, .scope = SCOPE_LAYER, .tp = tp,
                    .linear_block = 64};
}

/* n GPUs on one switch, a roofline compute model and no host costs: a
 * GPU's time is the sum of its kernels where it never waits. */
static topology *ideal(uint32_t n) {
  topology *t = test_switch(n, 400e9, 1e-6);
  compute_model *m = &t->compute;
  m->peak_flops = 989e12;
  m->efficiency = 0.5;
  m->launch_s = 0;
  m->host_s = m->bwd_host_s = m->merge_host_s = m->copy_host_s = 0;
  for (int k = 0; k < 4; k++) m->lin_host_s[k][0] = m->lin_host_s[k][1] = 0;
  return t;
}

static void test_op_flops(void) {
  /* T tokens of a TP group, TP 4: each GEMM's forward 2·T·N·K with the
   * split dimension / TP, backward (dgrad + wgrad) twice that */
  layer_dims d = {.tokens = 16384, .hidden = 4096, .ffn = 14336, .heads = 32, .kv_heads = 8,
                  .head_dim = 128, .tp = 4, .elem_bytes = 2};
  double T = d.tokens, h = 4096, D = 128, tp = 4;
  struct { layer_op op; double fwd; } want[] = {
      {LAYER_QKV, 2 * T * h * (32 + 2 * 8) * D / tp},
      {LAYER_OUT_PROJ, 2 * T * 32 * D * h / tp},
      {LAYER_FC1, 2 * T * h * 2 * 14336 / tp},
      {LAYER_FC2, 2 * T * 14336 * h / tp},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
    plan_op f = compute_layer_op(&d, want[i].op, false), b = compute_layer_op(&d, want[i].op, true);
    CU_ASSERT_CLOSE(compute_op_flops(&f), want[i].fwd, 1e-12);
    CU_ASSERT_CLOSE(compute_op_flops(&b), 2 * want[i].fwd, 1e-12);
  }
  /* element-wise ops count no FLOPs, and run on the GPU's T / tp tokens
   * (norms, residuals) or the gathered T (RoPE, SwiGLU after the GEMMs) */
  plan_op n = compute_layer_op(&d, LAYER_NORM_ATTN, false);
  CU_ASSERT_EQUAL(compute_op_flops(&n), 0);
  CU_ASSERT_EQUAL(n.sq, T / tp);
  CU_ASSERT_EQUAL(compute_layer_op(&d, LAYER_ROPE, false).sq, T);
  CU_ASSERT_EQUAL(compute_layer_op(&d, LAYER_SWIGLU, false).width, 14336 / tp);
}

/* Model FLOPs of the layer plan against the closed form: GEMMs as above
 * over the job's tokens, causal attention 4·B·H·D·S²/2, backward twice
 * forward; the same however the job is split (TP x SP). */
static void test_model_flops(void) {
  topology *t = ideal(8);
  double S = 32768, h = 4096, D = 128, F = 14336;
  double gemm = 2 * S * h * (32 + 16) * D + 2 * S * 32 * D * h + 2 * S * h * 2 * F + 2 * S * F * h;
  double attn = 4.0 * 32 * D * S * S / 2;
  const sched_ops *scheds[] = {&sched_ring, &sched_zigzag, &sched_ulysses};
  uint32_t splits[][2] = {{1, 1}, {2, 1}, {1, 4}, {2, 4}};
  for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++)
    for (size_t i = 0; i < G_N_ELEMENTS(splits); i++)
      for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++) {
        workload w = llama8b(splits[i][1], splits[i][0], (uint64_t)S, (pass_kind)pass);
        plan *p = layer_build(scheds[k], &w, t, true, false);
        double times = pass == PASS_FWD ? 1 : pass == PASS_BWD ? 2 : 3;
        CU_ASSERT_CLOSE(layer_model_flops(p), times * (gemm + attn), 1e-9);
        plan_free(p);
      }
  topo_free(t);
}

/* Sum of compute_op_s over the compute tasks of GPU g (all of them: -1). */
static double sum_parts(const plan *p, const topology *t, int64_t g, bool attention_only) {
  double s = 0;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *k = plan_task_at(p, i);
    if (k->kind != TASK_COMPUTE || (g >= 0 && k->gpu != (uint32_t)g)) continue;
    bool attn = k->op.kind != OP_GEMM && k->op.kind != OP_ELEMWISE;
    if (attention_only && !attn) continue;
    s += compute_op_s(&t->compute, &k->op);
  }
  return s;
}

/* On one GPU (nothing to wait for) the layer's time is the sum of its
 * kernels, and its attention part (the layer less the layer without
 * attention) is the scheduler's plan's own time. */
static void test_sum_of_parts(void) {
  topology *t = ideal(1);
  const sched_ops *scheds[] = {&sched_ring, &sched_ulysses, &sched_allgather};
  for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++)
    for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++) {
      workload w = llama8b(1, 1, 16384, (pass_kind)pass);
      plan *p = layer_build(scheds[k], &w, t, true, false);
      exec_opts o = {0};
      exec_result *r = exec_run(p, t, &o);
      CU_ASSERT_CLOSE(r->step_s, sum_parts(p, t, 0, false), 1e-9);
      plan *rest = layer_build(scheds[k], &w, t, false, false);
      exec_result *r0 = exec_run(rest, t, &o);
      workload a = layer_attention_workload(&w);
      plan *alone = scheds[k]->build(&a, t, false);
      exec_result *ra = exec_run(alone, t, &o);
      CU_ASSERT(ra->step_s > 0);
      CU_ASSERT_CLOSE(r->step_s - r0->step_s, ra->step_s, 1e-9);
      exec_result_free(r);
      exec_result_free(r0);
      exec_result_free(ra);
      plan_free(p);
      plan_free(rest);
      plan_free(alone);
    }
  topo_free(t);
}

/* TP 2 with no communication: both ranks run alike kernels, and the step
 * is one GPU's sum (the TP collectives take no time and hold nothing). */
static void test_sum_of_parts_tp(void) {
  topology *t = ideal(2);
  workload w = llama8b(1, 2, 16384, PASS_FWDBWD);
  plan *p = layer_build(&sched_ring, &w, t, true, false);
  exec_opts o = {.no_comm = true};
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_CLOSE(sum_parts(p, t, 0, false), sum_parts(p, t, 1, false), 1e-12);
  CU_ASSERT_CLOSE(r->step_s, sum_parts(p, t, 0, false), 1e-9);
  /* and half the TP 1 layer's GEMM time, roofline (every GEMM split) */
  workload w1 = llama8b(1, 1, 16384, PASS_FWDBWD);
  plan *p1 = layer_build(&sched_ring, &w1, t, true, false);
  CU_ASSERT(sum_parts(p, t, 0, false) < 0.6 * sum_parts(p1, t, 0, false));
  exec_result_free(r);
  plan_free(p);
  plan_free(p1);
  topo_free(t);
}

/* Every TP rank runs the scheduler's plan of its heads (H / TP) on its
 * own GPUs (r, tp + r, ...): the same attention tasks, rank by rank, and
 * SP transfers only within a rank's GPUs. */
static void test_tp_ranks_exact(void) {
  topology *t = ideal(8);
  const sched_ops *scheds[] = {&sched_ring, &sched_ulysses, &sched_tasp};
  for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++) {
    workload w = llama8b(4, 2, 32768, PASS_FWDBWD);
    plan *p = layer_build(scheds[k], &w, t, true, false);
    workload a = layer_attention_workload(&w);
    CU_ASSERT_EQUAL(a.heads, 16);
    CU_ASSERT_EQUAL(a.kv_heads, 4);
    plan *built = scheds[k]->build(&a, t, false);
    plan *s = built->has_lockstep ? plan_expand(built) : built;
    /* per SP GPU of the scheduler's plan, its attention tasks' heads and
     * FLOPs; every TP rank's copy has the same on its GPU */
    for (uint32_t sr = 0; sr < 4; sr++) {
      double want = 0, want_n = 0;
      for (guint i = 0; i < s->tasks->len; i++) {
        const plan_task *x = plan_task_at(s, i);
        if (x->kind == TASK_COMPUTE && x->gpu == sr && x->op.kind == OP_ATTN) {
          want += compute_op_flops(&x->op);
          want_n++;
          CU_ASSERT(x->op.heads <= 16 && x->op.heads > 0);
        }
      }
      CU_ASSERT(want_n > 0);
      for (uint32_t r = 0; r < 2; r++) {
        double got = 0, got_n = 0;
        for (guint i = 0; i < p->tasks->len; i++) {
          const plan_task *x = plan_task_at(p, i);
          if (x->kind == TASK_COMPUTE && x->gpu == sr * 2 + r && x->op.kind == OP_ATTN) {
            got += compute_op_flops(&x->op);
            got_n++;
          }
        }
        CU_ASSERT_EQUAL(got_n, want_n);
        CU_ASSERT_CLOSE(got, want, 1e-12);
      }
    }
    /* a group moves data within one TP group (a TP collective: ring
     * all-gather or reduce-scatter, six per SP rank in forward then
     * backward) or within one TP rank's GPUs (the scheduler's), never
     * across both */
    unsigned tp_colls = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind != TASK_COMM || !x->n_xfer) continue;
      plan_xfer e0 = g_array_index(p->xfers, plan_xfer, x->xfer_off);
      bool tp_coll = e0.src / 2 == e0.dst / 2;
      if (tp_coll) {
        tp_colls++;
        CU_ASSERT(x->api == COMM_ALL_GATHER || x->api == COMM_REDUCE_SCATTER);
      }
      for (uint32_t j = 0; j < x->n_xfer; j++) {
        plan_xfer e = g_array_index(p->xfers, plan_xfer, x->xfer_off + j);
        if (tp_coll) {
          CU_ASSERT_EQUAL(e.src / 2, e.dst / 2);
        } else {
          CU_ASSERT_EQUAL(e.src % 2, e.dst % 2);
        }
      }
    }
    CU_ASSERT_EQUAL(tp_colls, 10 * 4);
    if (s != built) plan_free(s);
    plan_free(built);
    plan_free(p);
  }
  topo_free(t);
}

/* Whether task `from` is an ancestor of task `to` (through deps; with
 * waits_only, not through overlap edges, which exec drops where transfers
 * progress beside kernels: plan_overlap). */
static bool reaches_by(const plan *p, uint32_t from, uint32_t to, uint8_t *seen, bool waits_only) {
  memset(seen, 0, p->tasks->len);
  GArray *stack = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_array_append_val(stack, to);
  bool found = false;
  while (stack->len && !found) {
    uint32_t x = g_array_index(stack, uint32_t, stack->len - 1);
    g_array_set_size(stack, stack->len - 1);
    const plan_task *t = plan_task_at(p, x);
    for (uint32_t d = 0; d < t->n_dep; d++) {
      uint32_t y = p->deps[t->dep_off + d];
      if (waits_only && plan_dep_is_overlap(t, d)) continue;
      if (y == from) found = true;
      if (!seen[y]) {
        seen[y] = 1;
        g_array_append_val(stack, y);
      }
    }
  }
  g_array_free(stack, TRUE);
  return found;
}

/* Whether task x is GPU g's: a kernel on it, or a group with a transfer
 * from or to it. */
static bool on_gpu(const plan *p, const plan_task *x, uint32_t g) {
  if (x->kind == TASK_COMPUTE) return x->gpu == g;
  for (uint32_t j = 0; j < x->n_xfer; j++) {
    plan_xfer e = g_array_index(p->xfers, plan_xfer, x->xfer_off + j);
    if (e.src == g || e.dst == g) return true;
  }
  return false;
}

static bool reaches(const plan *p, uint32_t from, uint32_t to, uint8_t *seen) {
  return reaches_by(p, from, to, seen, false);
}

/* The seams: on each GPU every task of the attention part that touches it
 * (its kernels, the groups it sends or receives in: Ulysses' output comes
 * home by an all-to-all) comes after that GPU's RoPE and before its output
 * projection. */
static void test_seams(void) {
  topology *t = ideal(4);
  const sched_ops *scheds[] = {&sched_ring, &sched_ulysses, &sched_allgather, &sched_tasp};
  for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++) {
    workload w = llama8b(4, 1, 16384, PASS_FWD);
    plan *p = layer_build(scheds[k], &w, t, true, false);
    g_autofree uint8_t *seen = g_new(uint8_t, p->tasks->len);
    for (uint32_t g = 0; g < 4; g++) {
      int64_t rope = -1, proj = -1;
      for (guint i = 0; i < p->tasks->len; i++) {
        const plan_task *x = plan_task_at(p, i);
        if (x->kind != TASK_COMPUTE || x->gpu != g) continue;
        if (x->op.kind == OP_ELEMWISE && x->op.elemwise == EW_ROPE) rope = i;
        if (x->op.kind == OP_GEMM && x->op.gemm_n == 4096 && x->op.gemm_k == 4096 && proj < 0)
          proj = i;
      }
      CU_ASSERT_FATAL(rope >= 0 && proj > rope);
      unsigned n = 0;
      for (guint i = (guint)rope + 1; i < (guint)proj; i++) {
        const plan_task *x = plan_task_at(p, i);
        if (!on_gpu(p, x, g)) continue;
        n++;
        CU_ASSERT(reaches(p, (uint32_t)rope, i, seen));
        CU_ASSERT(reaches(p, i, (uint32_t)proj, seen));
      }
      CU_ASSERT(n > 0);
    }
    plan_free(p);
  }
  topo_free(t);
}

/* The backward's seam: the attention's backward starts where each GPU's
 * program calls it, after that GPU's output projection backward (the dO it
 * reads), so every task of the layer's backward that touches a GPU (its
 * kernels and the groups it sends or receives in) follows the last kernel
 * that GPU issued before the attention's pass barrier.  A group waiting on
 * the barrier alone counted as one with a predecessor in its range, so a
 * backward opening with a transfer (TokenRing sends Q, dO, O and the LSE;
 * ring its K and V) waited for the forward's attention only and ran during
 * the next layers' forward: mi300x8, TokenRing SP 2 x DP 2, ZeRO 2,
 * Llama-2-7B at 4K, was 0.5% faster with full recomputation than without.
 * Waits only: the edges to the kernels a group runs beside are dropped on
 * mi300x8, where transfers progress beside kernels. */
static void test_backward_seam(void) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load("topologies/mi300x8.json", &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  const sched_ops *scheds[] = {&sched_ring, &sched_tokenring, &sched_ulysses, &sched_allgather,
                               &sched_tasp, &sched_zigzag, &sched_usp};
  for (uint32_t sp = 2; sp <= 8; sp *= 2)
    for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++) {
      if (scheds[k] == &sched_tasp && sp < 4) continue;
      workload w = llama8b(sp, 1, 16384, PASS_FWDBWD);
      plan *p = layer_build(scheds[k], &w, t, true, false);
      g_autofree uint8_t *seen = g_new(uint8_t, p->tasks->len);
      /* the attention's pass barrier (the layer has no other) */
      int64_t barrier = -1;
      for (guint i = 0; i < p->tasks->len; i++) {
        const plan_task *x = plan_task_at(p, i);
        if (x->kind == TASK_COMM && x->api == COMM_BARRIER) barrier = i;
      }
      CU_ASSERT_FATAL(barrier > 0);
      for (uint32_t g = 0; g < sp; g++) {
        int64_t last = -1;
        for (guint i = 0; i < (guint)barrier; i++) {
          const plan_task *x = plan_task_at(p, i);
          if (x->kind == TASK_COMPUTE && x->gpu == g) last = i;
        }
        CU_ASSERT_FATAL(last >= 0);
        unsigned n = 0, groups = 0, early = 0;
        for (guint i = (guint)barrier + 1; i < p->tasks->len; i++) {
          const plan_task *x = plan_task_at(p, i);
          if (!on_gpu(p, x, g)) continue;
          n++;
          groups += x->kind == TASK_COMM;
          early += !reaches_by(p, (uint32_t)last, i, seen, true);
        }
        CU_ASSERT(n > 0 && groups > 0);
        CU_ASSERT_EQUAL(early, 0);
        if (early)
          fprintf(stderr, "\n%s SP %u: %u backward tasks of GPU %u not after its task %ld\n",
                  scheds[k]->name, sp, early, g, (long)last);
      }
      plan_free(p);
    }
  topo_free(t);
}

/* TP collectives per SP rank per layer: forward all-gathers before QKV and
 * fc1 and reduce-scatters after the output projection and fc2, each of
 * a shard of T/tp tokens x hidden x 2 bytes per rank, a ring moving
 * tp (tp - 1) shards in all; backward two reduce-scatters and four
 * all-gathers (the two outputs' gradients, the two inputs again). */
static void test_tp_collective_bytes(void) {
  topology *t = ideal(8);
  uint32_t tp = 4, sp = 2;
  for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++) {
    workload w = llama8b(sp, tp, 65536, (pass_kind)pass);
    w.causal = false;
    plan *p = layer_build(&sched_ring, &w, t, false, false);
    double T = 65536.0 / sp, shard = T / tp * 4096 * 2;
    unsigned ag = 0, rs = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind != TASK_COMM || x->api == COMM_BARRIER) continue;
      CU_ASSERT(x->api == COMM_ALL_GATHER || x->api == COMM_REDUCE_SCATTER);
      ag += x->api == COMM_ALL_GATHER;
      rs += x->api == COMM_REDUCE_SCATTER;
      double bytes = 0;
      for (uint32_t j = 0; j < x->n_xfer; j++)
        bytes += g_array_index(p->xfers, plan_xfer, x->xfer_off + j).bytes;
      CU_ASSERT_CLOSE(bytes, tp * (tp - 1) * shard, 1e-12);
    }
    unsigned want_ag = (pass != PASS_BWD) * 2 + (pass != PASS_FWD) * 4;
    unsigned want_rs = (pass != PASS_BWD) * 2 + (pass != PASS_FWD) * 2;
    CU_ASSERT_EQUAL(ag, want_ag * sp);
    CU_ASSERT_EQUAL(rs, want_rs * sp);
    plan_free(p);
  }
  /* TP 1: no collective at all */
  workload w = llama8b(2, 1, 65536, PASS_FWDBWD);
  plan *p = layer_build(&sched_ring, &w, t, false, false);
  for (guint i = 0; i < p->tasks->len; i++) CU_ASSERT_EQUAL(plan_task_at(p, i)->kind, TASK_COMPUTE);
  plan_free(p);
  topo_free(t);
}

/* Every scheduler's layer plan declares balanced buffers (exec_mem finds
 * no error), for every pass, at TP 1 and 2; the layer holds more than its
 * attention alone; a forward keeps what backward reads. */
static void test_memory(void) {
  topology *t = ideal(8);
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    if (!((*s)->attention & SCHED_RUNS(ATTN_SOFTMAX)) && (*s)->attention) continue;
    for (uint32_t tp = 1; tp <= 2; tp++)
      for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++) {
        workload w = llama8b(4, tp, 32768, (pass_kind)pass);
        workload a = layer_attention_workload(&w);
        g_autoptr(GError) e = NULL;
        if (!sched_check(*s, &a, t, &e)) continue;
        plan *p = layer_build(*s, &w, t, true, false);
        exec_opts o = {0};
        exec_result *r = exec_run(p, t, &o);
        if (r->mem_errors) fprintf(stderr, "%s tp %u pass %d: %llu\n", (*s)->name, tp, pass,
                                   (unsigned long long)r->mem_errors);
        CU_ASSERT_EQUAL(r->mem_errors, 0);
        plan *alone = (*s)->build(&a, t, false);
        exec_result *ra = exec_run(alone, t, &o);
        CU_ASSERT(r->peak_bytes > ra->peak_bytes);
        exec_result_free(r);
        exec_result_free(ra);
        plan_free(alone);
        plan_free(p);
      }
  }
  /* forward only at TP 1: what it saves is x, two norm outputs, the
   * residual (4 x T x h), fc1's 2F and SwiGLU's F per token, and the
   * layer output, all kept, and the layer's weights (an input) */
  workload w = llama8b(1, 1, 8192, PASS_FWD);
  plan *p = layer_build(&sched_ring, &w, t, false, false);
  double kept = 0;
  for (uint32_t i = 0; i < plan_buf_count(p); i++)
    if (plan_buf_at(p, i)->keep) kept += plan_buf_at(p, i)->bytes;
  double params = 4096.0 * 48 * 128 + 32 * 128 * 4096.0 + 3 * 4096.0 * 14336 + 2 * 4096;
  CU_ASSERT_CLOSE(kept, 8192.0 * 2 * (5 * 4096 + 3 * 14336) + 2 * params, 1e-12);
  plan_free(p);
  topo_free(t);
}

/* sim at scope layer: the columns' figures; at scope attention today's. */
static void test_sim_columns(void) {
  scenario_overrides ov = {.topology = "h100x8", .model = "llama3-8b", .sched = "ring",
                           .seq = "32K", .sp = "2", .pass = "fwdbwd", .scope = "layer",
                           .tp = "2"};
  g_autoptr(GError) e = NULL;
  scenario *s = scenario_load(NULL, &ov, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const scenario_point *pt = &g_array_index(s->points, scenario_point, 0);
  exec_opts o = {0};
  sim_result *r = sim_run_point(s->topo, pt, &o);
  CU_ASSERT_EQUAL(r->job_gpus, 4);
  CU_ASSERT_EQUAL(r->r->n_gpus, 4);
  CU_ASSERT(r->attention_s > 0 && r->attention_s < r->r->step_s);
  CU_ASSERT_CLOSE(sim_tokens_per_s_per_gpu(r), 32768.0 / (r->r->step_s * 4), 1e-12);
  CU_ASSERT_CLOSE(sim_mfu(r), r->model_flops / (s->topo->compute.peak_flops * r->r->step_s * 4),
                  1e-12);
  CU_ASSERT(sim_mfu(r) > 0.05 && sim_mfu(r) < 1);
  sim_result_free(r);
  scenario_free(s);
  /* scope attention: attention_ms is the step, the job is the SP GPUs */
  ov.scope = NULL;
  ov.tp = NULL;
  s = scenario_load(NULL, &ov, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  r = sim_run_point(s->topo, &g_array_index(s->points, scenario_point, 0), &o);
  CU_ASSERT_EQUAL(r->job_gpus, 2);
  CU_ASSERT_EQUAL(r->attention_s, r->r->step_s);
  sim_result_free(r);
  scenario_free(s);
}

/* ---- scope model ---- */

static workload model8b(uint32_t sp, uint32_t tp, uint32_t dp, uint32_t layers, uint64_t seq) {
  workload w = llama8b(sp, tp, seq, PASS_FWDBWD);
  w.scope = SCOPE_MODEL;
  w.dp = dp;
  w.layers[ATTN_SOFTMAX] = layers;
  return w;
}

static double buf_bytes(const plan *p, const char *name, uint32_t gpu) {
  double s = 0;
  for (uint32_t i = 0; i < plan_buf_count(p); i++) {
    const plan_buf *b = plan_buf_at(p, i);
    if (!strcmp(plan_buf_name(p, b), name) && b->gpu == gpu) s += b->bytes;
  }
  return s;
}

/* Model FLOPs of the step: every layer's (as above) and the LM head's
 * 2·T·hidden·vocab, three times forward; DP replicas each add theirs,
 * TP and SP splits none. */
static void test_model_step_flops(void) {
  topology *t = ideal(8);
  double S = 16384, h = 4096, D = 128, F = 14336, V = 128256;
  double gemm = 2 * S * h * (32 + 16) * D + 2 * S * 32 * D * h + 2 * S * h * 2 * F + 2 * S * F * h;
  double attn = 4.0 * 32 * D * S * S / 2, head = 2 * S * h * V;
  uint32_t splits[][3] = {{1, 1, 1}, {2, 2, 1}, {1, 2, 2}, {2, 2, 2}};
  for (size_t i = 0; i < G_N_ELEMENTS(splits); i++) {
    workload w = model8b(splits[i][1], splits[i][0], splits[i][2], 3, (uint64_t)S);
    plan *p = layer_build(&sched_ring, &w, t, true, false);
    CU_ASSERT_CLOSE(layer_model_flops(p), splits[i][2] * 3 * (3 * (gemm + attn) + head), 1e-9);
    plan_free(p);
  }
  topo_free(t);
}

/* On one GPU (no gradient group, nothing to wait for) the step is the
 * sum of its kernels: every layer, the ends and the optimizer. */
static void test_model_sum_of_parts(void) {
  topology *t = ideal(1);
  for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc += 2) {
    workload w = model8b(1, 1, 1, 3, 8192);
    w.recompute = (recompute_kind)rc;
    plan *p = layer_build(&sched_ring, &w, t, true, false);
    exec_opts o = {0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_CLOSE(r->step_s, sum_parts(p, t, 0, false), 1e-9);
    CU_ASSERT_EQUAL(r->mem_errors, 0);
    exec_result_free(r);
    plan_free(p);
  }
  topo_free(t);
}

/* The gradient reduction: one bucket per layer and one for the ends, per
 * TP rank, over the SP x DP GPUs holding its weights; ZeRO 0 all-reduces
 * (a ring moves 2(n-1)/n of the bytes per rank), ZeRO 1-2 reduce-scatter
 * and all-gather the bf16 weights after the optimizer; ZeRO 3 gathers
 * each layer's weights before its forward and its backward. */
static void test_grad_reduction(void) {
  topology *t = ideal(8);
  uint32_t tp = 2, sp = 2, dp = 2, L = 3, n = sp * dp;
  layer_dims d = layer_dims_of(&(workload){.gpus = sp, .seq_len = 16384, .batch = 1,
                                           .heads = 32, .kv_heads = 8, .head_dim = 128,
                                           .hidden = 4096, .ffn = 14336, .tp = tp,
                                           .elem_bytes = 2});
  double lp = compute_layer_params(&d), op = 2.0 * 128256 / tp * 4096 + 4096;
  for (uint32_t zero = 0; zero <= 3; zero++) {
    workload w = model8b(sp, tp, dp, L, 16384);
    w.zero = zero;
    plan *p = layer_build(&sched_ring, &w, t, false, false);
    unsigned ar = 0, rs = 0, ag = 0;
    double ar_b = 0, rs_b = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind != TASK_COMM || !x->n_xfer) continue;
      plan_xfer e0 = g_array_index(p->xfers, plan_xfer, x->xfer_off);
      if (e0.src / tp == e0.dst / tp) continue; /* a TP collective */
      double bytes = 0;
      for (uint32_t j = 0; j < x->n_xfer; j++) {
        plan_xfer e = g_array_index(p->xfers, plan_xfer, x->xfer_off + j);
        CU_ASSERT_EQUAL(e.src % tp, e0.src % tp); /* one TP rank's group */
        bytes += e.bytes;
      }
      if (x->api == COMM_ALL_REDUCE) ar++, ar_b += bytes;
      if (x->api == COMM_REDUCE_SCATTER) rs++, rs_b += bytes;
      if (x->api == COMM_ALL_GATHER) ag++;
    }
    double grads = 4.0 * (L * lp + op) * tp; /* every TP rank's bucket */
    if (zero == 0) {
      CU_ASSERT_EQUAL(ar, (L + 1) * tp);
      CU_ASSERT_CLOSE(ar_b, 2.0 * (n - 1) * grads, 1e-9);
      CU_ASSERT_EQUAL(rs + ag, 0);
    } else {
      CU_ASSERT_EQUAL(ar, 0);
      CU_ASSERT_EQUAL(rs, (L + 1) * tp);
      CU_ASSERT_CLOSE(rs_b, 1.0 * (n - 1) * grads, 1e-9);
      CU_ASSERT_EQUAL(ag, zero == 3 ? 2 * L * tp : tp);
    }
    /* the optimizer states of a GPU: 12 bytes a parameter it owns */
    CU_ASSERT_CLOSE(buf_bytes(p, "optimizer_states", 0), 12.0 * (L * lp + op) / (zero ? n : 1),
                    1e-12);
    plan_free(p);
  }
  topo_free(t);
}

/* Memory falls with each ZeRO stage and with full recomputation, whose
 * step is longer; every plan's buffers balance; the gradient reduction
 * overlaps the backward (the first bucket's all-reduce starts before the
 * last backward GEMM ends). */
static void test_model_memory_overlap(void) {
  topology *t = ideal(8);
  double last = INFINITY;
  for (uint32_t zero = 0; zero <= 3; zero++) {
    workload w = model8b(2, 2, 2, 3, 16384);
    w.zero = zero;
    plan *p = layer_build(&sched_ring, &w, t, true, false);
    exec_opts o = {.keep_trace = zero == 0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_EQUAL(r->mem_errors, 0);
    CU_ASSERT(r->peak_bytes < last);
    last = r->peak_bytes;
    if (zero == 0) {
      double first_ar = INFINITY, last_gemm_end = 0;
      for (guint i = 0; i < r->spans->len; i++) {
        const exec_span *sp = &g_array_index(r->spans, exec_span, i);
        if (sp->comm && sp->kind == COMM_ALL_REDUCE && sp->t0_s < first_ar) first_ar = sp->t0_s;
        if (!sp->comm && sp->kind == OP_GEMM && sp->backward && sp->t1_s > last_gemm_end)
          last_gemm_end = sp->t1_s;
      }
      CU_ASSERT(first_ar < last_gemm_end);
    }
    exec_result_free(r);
    plan_free(p);
  }
  workload w = model8b(2, 2, 1, 3, 16384);
  exec_opts o = {0};
  plan *p0 = layer_build(&sched_ulysses, &w, t, true, false);
  w.recompute = RECOMPUTE_FULL;
  plan *p1 = layer_build(&sched_ulysses, &w, t, true, false);
  exec_result *r0 = exec_run(p0, t, &o), *r1 = exec_run(p1, t, &o);
  CU_ASSERT_EQUAL(r1->mem_errors, 0);
  CU_ASSERT(r1->peak_bytes < r0->peak_bytes);
  CU_ASSERT(r1->step_s > r0->step_s);
  /* it computes more, by one forward per layer, and its model FLOPs
   * leave that forward out */
  double all0 = layer_tasks_flops(p0, 0, p0->tasks->len);
  double all1 = layer_tasks_flops(p1, 0, p1->tasks->len);
  CU_ASSERT(all1 > 1.2 * all0);
  CU_ASSERT_DOUBLE_EQUAL(p1->recomputed_flops, all1 - all0, 1e-9 * all0);
  CU_ASSERT_DOUBLE_EQUAL(layer_model_flops(p1), layer_model_flops(p0), 1e-9 * all0);
  exec_result_free(r0);
  exec_result_free(r1);
  plan_free(p0);
  plan_free(p1);
  topo_free(t);
}

/* The scheduler's tensors belong to the layer in a chain: with full
 * recomputation no layer's attention output or gradients outlive its
 * layer (at the peak at most one layer's are live), without it each
 * layer's output is saved once. */
static void test_model_owns_attention_buffers(void) {
  topology *t = ideal(2);
  for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc += 2) {
    workload w = model8b(2, 1, 1, 4, 16384);
    w.recompute = (recompute_kind)rc;
    plan *p = layer_build(&sched_ring, &w, t, true, false);
    exec_opts o = {0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_EQUAL(r->mem_errors, 0);
    uint32_t outs = 0, grads = 0;
    for (guint i = 0; i < r->peak_live->len; i++) {
      const exec_mem_live *x = &g_array_index(r->peak_live, exec_mem_live, i);
      if (x->gpu != r->peak_gpu) continue;
      if (!strcmp(x->name, "out")) outs += x->count;
      if (!strcmp(x->name, "dq")) grads += x->count;
    }
    CU_ASSERT(outs <= (rc == RECOMPUTE_FULL ? 1u : 4u));
    CU_ASSERT(grads <= 1);
    exec_result_free(r);
    plan_free(p);
  }
  topo_free(t);
}

/* The memory budget's counts (budget.c) cover the layer and model
 * scopes' plans: never fewer tasks or transfers than they have. */
static void test_budget_covers(void) {
  topology *t = ideal(8);
  const sched_ops *scheds[] = {&sched_ring, &sched_tasp, &sched_ulysses, &sched_tokenring};
  for (size_t k = 0; k < G_N_ELEMENTS(scheds); k++)
    for (int scope = SCOPE_LAYER; scope <= SCOPE_MODEL; scope++) {
      workload w = model8b(4, 2, 1, 3, 32768);
      w.scope = (scope_kind)scope;
      w.recompute = scope == SCOPE_MODEL ? RECOMPUTE_FULL : RECOMPUTE_NONE;
      scenario_point pt = {w, scheds[k], false, NULL};
      budget_counts c;
      CU_ASSERT_FATAL(budget_counts_of(&pt, NULL, &c));
      plan *p = layer_build(scheds[k], &w, t, true, false);
      CU_ASSERT(c.tasks >= p->tasks->len);
      CU_ASSERT(c.xfers >= p->xfers->len);
      CU_ASSERT(layer_tasks_estimate(&w, NULL) >= p->tasks->len);
      plan_free(p);
    }
  topo_free(t);
}

/* Every scheduler's step, every pass, ZeRO stage and recomputation (a
 * hybrid model for the linear ones): balanced buffers, model FLOPs that
 * do not depend on the ZeRO stage or recomputation. */
static void test_model_every_scheduler(void) {
  topology *t = ideal(8);
  unsigned ran = 0;
  for (const sched_ops *const *s = sched_all(); *s; s++)
    for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++) {
      double flops = -1;
      for (uint32_t zero = 0; zero <= 3; zero += 3)
        for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc += 2) {
          workload w = model8b(2, 2, 2, 2, 16384);
          w.pass = (pass_kind)pass;
          w.zero = zero;
          w.recompute = (recompute_kind)rc;
          if ((*s)->attention & SCHED_RUNS(ATTN_LINEAR)) {
            /* hybrid where it runs both kinds, else all linear */
            w.layers[ATTN_SOFTMAX] = (*s)->attention & SCHED_RUNS(ATTN_SOFTMAX) ? 1 : 0;
            w.layers[ATTN_LINEAR] = 3;
            w.attention = ATTN_LINEAR;
            w.heads = w.kv_heads = 16;
          }
          g_autoptr(GError) e = NULL;
          workload a = layer_attention_workload(&w);
          if (!sched_check(*s, &a, t, &e)) continue;
          ran++;
          plan *p = layer_build(*s, &w, t, true, false);
          exec_opts o = {0};
          exec_result *r = exec_run(p, t, &o);
          if (r->mem_errors)
            fprintf(stderr, "%s pass %d zero %u rc %d: %llu\n", (*s)->name, pass, zero, rc,
                    (unsigned long long)r->mem_errors);
          CU_ASSERT_EQUAL(r->mem_errors, 0);
          CU_ASSERT(r->step_s > 0);
          if (rc == RECOMPUTE_NONE) {
            if (flops < 0) flops = layer_model_flops(p);
            CU_ASSERT_CLOSE(layer_model_flops(p), flops, 1e-12);
          }
          exec_result_free(r);
          plan_free(p);
        }
    }
  /* every scheduler ran (a linear one on the hybrid model) */
  unsigned n = 0;
  for (const sched_ops *const *s = sched_all(); *s; s++) n++;
  CU_ASSERT_EQUAL(ran, n * 3 * 4);
  topo_free(t);
}

/* The scheduler's view of the topology: TP rank 0's GPUs, their node
 * blocks and direct links; the topology itself at TP 1. */
static void test_view(void) {
  scenario_overrides ov = {.topology = "h100x8x4", .model = "llama3-70b", .sched = "usp",
                           .seq = "256K", .sp = "4", .pass = "fwd", .scope = "layer",
                           .tp = "8"};
  g_autoptr(GError) e = NULL;
  scenario *s = scenario_load(NULL, &ov, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const topology *t = s->topo;
  for (uint32_t tp = 1; tp <= 8; tp *= 2) {
    workload w = g_array_index(s->points, scenario_point, 0).w;
    w.tp = tp;
    layer_view v;
    layer_view_init(&v, &w, t);
    if (tp == 1) {
      CU_ASSERT_PTR_EQUAL(v.t.direct, t->direct);
      CU_ASSERT_EQUAL(v.t.gpus_per_node, 8);
    } else {
      CU_ASSERT_EQUAL(v.t.n_gpus, 32 / tp);
      CU_ASSERT_EQUAL(v.t.gpus_per_node, 8 / tp);
      for (uint32_t i = 0; i < v.t.n_gpus; i++)
        for (uint32_t j = 0; j < v.t.n_gpus; j++)
          CU_ASSERT_EQUAL(v.t.direct[i * v.t.n_gpus + j], t->direct[i * tp * 32 + j * tp]);
    }
    layer_view_clear(&v);
  }
  /* USP at TP 8 x SP 4: one SP rank a node, so no Ulysses inside one */
  const scenario_point *pt = &g_array_index(s->points, scenario_point, 0);
  exec_opts o = {0};
  sim_result *r = sim_run_point(t, pt, &o);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r->note);
  CU_ASSERT(strstr(r->note, "Ulysses degree 1 x ring degree 4") != NULL);
  sim_result_free(r);
  scenario_free(s);
}

/* Placement: layer_gpu is a bijection onto the job's GPUs with the named
 * dimension innermost; in a plan built under each placement every group
 * talks within its dimension (a TP collective among the GPUs of one SP
 * and DP rank, the scheduler's exchange among one TP and DP rank's SP
 * GPUs, the gradient reduction among one TP rank's), and the view holds
 * TP rank 0's SP GPUs where the placement put them. */
static void test_placement(void) {
  topology *t = ideal(8);
  for (int k = 0; k < PLACE_KINDS; k++) {
    workload w = model8b(2, 2, 2, 2, 16384);
    w.placement = (placement_kind)k;
    uint32_t rank[8][3], seen = 0;
    for (uint32_t d = 0; d < 2; d++)
      for (uint32_t sr = 0; sr < 2; sr++)
        for (uint32_t r = 0; r < 2; r++) {
          uint32_t g = layer_gpu(&w, r, sr, d);
          CU_ASSERT_FATAL(g < 8);
          seen |= 1u << g;
          rank[g][0] = r;
          rank[g][1] = sr;
          rank[g][2] = d;
        }
    CU_ASSERT_EQUAL(seen, 0xffu);
    /* the innermost dimension's ranks are consecutive GPUs */
    const char *name = layer_placement_name(w.placement);
    int inner = name[0] == 't' ? 0 : name[0] == 's' ? 1 : 2;
    CU_ASSERT_EQUAL(rank[1][inner], 1);
    CU_ASSERT_EQUAL(rank[0][inner], 0);
    placement_kind back;
    CU_ASSERT(layer_placement_parse(name, &back) && back == w.placement);
    plan *p = layer_build(&sched_ring, &w, t, true, false);
    unsigned tp_colls = 0, sp_p2p = 0, grad_colls = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind != TASK_COMM || !x->n_xfer) continue;
      /* a TP collective's transfers change the TP rank alone; the
       * scheduler's, the SP rank alone; the gradient group's, never the
       * TP rank */
      bool tp_only = true, sp_only = true, same_tp = true;
      for (uint32_t j = 0; j < x->n_xfer; j++) {
        const plan_xfer *f = &g_array_index(p->xfers, plan_xfer, x->xfer_off + j);
        bool dr = rank[f->src][0] != rank[f->dst][0], ds = rank[f->src][1] != rank[f->dst][1];
        bool dd = rank[f->src][2] != rank[f->dst][2];
        tp_only &= dr && !ds && !dd;
        sp_only &= ds && !dr && !dd;
        same_tp &= !dr;
      }
      CU_ASSERT(tp_only || same_tp);
      if (x->api == COMM_P2P) CU_ASSERT(sp_only);
      tp_colls += tp_only;
      sp_p2p += x->api == COMM_P2P;
      grad_colls += same_tp && (x->api == COMM_ALL_REDUCE || x->api == COMM_REDUCE_SCATTER);
    }
    CU_ASSERT(tp_colls > 0 && sp_p2p > 0 && grad_colls > 0);
    exec_opts o = {0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_EQUAL(r->mem_errors, 0);
    exec_result_free(r);
    plan_free(p);
    layer_view v;
    layer_view_init(&v, &w, t);
    CU_ASSERT_EQUAL(v.t.n_gpus, 4);
    layer_view_clear(&v);
  }
  /* one GPU per node, the view of DP innermost at TP 1: SP rank s of DP
   * rank 0 is GPU 2 s, and no two of them share a node of two */
  workload w = model8b(4, 1, 2, 2, 16384);
  w.placement = PLACE_DP_SP_TP;
  t->gpus_per_node = 2;
  layer_view v;
  layer_view_init(&v, &w, t);
  CU_ASSERT_EQUAL(v.t.n_gpus, 8);
  CU_ASSERT_EQUAL(v.t.gpus_per_node, 1);
  CU_ASSERT(v.owned);
  layer_view_clear(&v);
  w.placement = PLACE_SP_DP_TP;
  layer_view_init(&v, &w, t);
  CU_ASSERT_EQUAL(v.t.gpus_per_node, 2);
  layer_view_clear(&v);
  /* a dimension of one GPU does not count: TP 1 puts SP innermost either way */
  w.placement = PLACE_TP_SP_DP;
  CU_ASSERT(layer_placed_by_default(&w));
  w.placement = PLACE_SP_TP_DP;
  CU_ASSERT(layer_placed_by_default(&w));
  w.placement = PLACE_DP_SP_TP;
  CU_ASSERT(!layer_placed_by_default(&w));
  topo_free(t);
}

/* PyTorch AMP's recipe against Megatron's: float32 weights (twice the
 * bytes), Adam's moments alone (8 bytes a parameter, not 12), one cast of
 * every layer's GEMM weights per forward (again under full
 * recomputation), whose bf16 copy the backward reads; every plan
 * balances, and the resident bound stays below the peak. */
static void test_amp(void) {
  topology *t = ideal(4);
  uint32_t L = 3;
  for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc += 2)
    for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++) {
      double bytes[2][2] = {{0}};
      for (int amp = 0; amp <= 1; amp++) {
        workload w = model8b(2, 2, 1, L, 16384);
        w.recompute = (recompute_kind)rc;
        w.pass = (pass_kind)pass;
        w.precision = amp ? PRECISION_AMP : PRECISION_MEGATRON;
        plan *p = layer_build(&sched_zigzag, &w, t, true, false);
        unsigned casts = 0;
        for (guint i = 0; i < p->tasks->len; i++) {
          const plan_task *x = plan_task_at(p, i);
          casts += x->kind == TASK_COMPUTE && x->op.kind == OP_ELEMWISE &&
                   x->op.elemwise == EW_CAST;
        }
        /* a backward alone gets the forward's saved copies as inputs */
        unsigned forwards = pass == PASS_BWD ? 0 : pass == PASS_FWD ? 1 : 1 + (rc == RECOMPUTE_FULL);
        CU_ASSERT_EQUAL(casts, amp ? L * 4 * forwards : 0);
        bytes[amp][0] = buf_bytes(p, "weights", 0);
        bytes[amp][1] = buf_bytes(p, "optimizer_states", 0);
        exec_opts o = {0};
        exec_result *r = exec_run(p, t, &o);
        CU_ASSERT_EQUAL(r->mem_errors, 0);
        if (pass == PASS_FWDBWD) CU_ASSERT(layer_resident_bytes(&w) <= r->peak_bytes);
        exec_result_free(r);
        plan_free(p);
      }
      CU_ASSERT_CLOSE(bytes[1][0], 2 * bytes[0][0], 1e-12);
      if (pass != PASS_FWD) CU_ASSERT_CLOSE(bytes[1][1], bytes[0][1] * 8 / 12, 1e-12);
    }
  topo_free(t);
}

/* Whether a backward compute task (of kind `kind`, OP_KINDS: any) touches
 * GPU gpu's buffer `name`. */
static bool read_in_backward_by(const plan *p, const char *name, uint32_t gpu, int kind) {
  for (uint32_t u = 0; u < plan_buf_use_count(p); u++) {
    const plan_buf_use *use = plan_buf_use_at(p, u);
    const plan_buf *b = plan_buf_at(p, use->buf);
    const plan_task *x = plan_task_at(p, use->task);
    if (!strcmp(plan_buf_name(p, b), name) && b->gpu == gpu && x->kind == TASK_COMPUTE && x->op.backward &&
        (kind == OP_KINDS || x->op.kind == (op_kind)kind))
      return true;
  }
  return false;
}

static bool read_in_backward(const plan *p, const char *name, uint32_t gpu) {
  return read_in_backward_by(p, name, gpu, OP_KINDS);
}

/* Unfused (plain PyTorch) layers save what autograd keeps besides the
 * ops' outputs: each RMSNorm's float32 input and normalized rows (local
 * tokens x hidden x (4 + 2) bytes), SiLU's output (T x ffn/tp x 2) and,
 * where the attention saves the layer's own V (ring), the fused QKV
 * output's query and key parts V's view keeps alive (T x (heads + KV
 * heads) x head dim / tp x 2, to the attention's backward); fused layers
 * none of them.  Unfused, neither the layer's input nor the residual
 * between the blocks is saved (each RMSNorm saves its float32 copy) and the residual add's backward
 * makes no copy of the gradient: two "dresid" a layer instead of three
 * (calibration/h100x1-layer-trace).  Pure bf16 keeps bf16 gradients (half
 * the float32 main grads) and Adam's moments in bf16 (4 bytes a
 * parameter). */
static void test_unfused_saved_and_bf16(void) {
  topology *t = ideal(4);
  double T = 16384, h = 4096, f = 14336, tp = 2, sp = 2, local = T / sp / tp;
  for (int pass = PASS_FWD; pass <= PASS_FWDBWD; pass++)
    for (int unfused = 0; unfused <= 1; unfused++) {
      workload w = llama8b((uint32_t)sp, (uint32_t)tp, (uint64_t)T, (pass_kind)pass);
      w.unfused = unfused;
      plan *p = layer_build(&sched_ring, &w, t, true, false);
      double Tg = T / sp; /* the TP group's tokens */
      CU_ASSERT_CLOSE(buf_bytes(p, "norm_fp32", 0), unfused ? 2 * local * h * 6 : 0, 1e-12);
      CU_ASSERT_CLOSE(buf_bytes(p, "silu_out", 0), unfused ? Tg * f / tp * 2 : 0, 1e-12);
      double qk = (32 + 8) * 128 / tp, qkv = (32 + 16) * 128 / tp;
      /* a backward alone has no QKV op: only what the forward saved */
      double none = pass == PASS_BWD ? 0 : Tg * qkv * 2;
      CU_ASSERT_CLOSE(buf_bytes(p, "qkv", 0), unfused ? Tg * qk * 2 : none, 1e-12);
      if (pass == PASS_FWDBWD) {
        CU_ASSERT_EQUAL(read_in_backward(p, "qkv", 0), unfused);
        CU_ASSERT_EQUAL(read_in_backward(p, "resid", 0), !unfused);
        CU_ASSERT_EQUAL(read_in_backward(p, "x", 0), !unfused);
        CU_ASSERT_CLOSE(buf_bytes(p, "dresid", 0), (unfused ? 2 : 3) * local * h * 2, 1e-12);
      }
      /* Ulysses' all-to-all saves copies: the projection's output dies at RoPE */
      workload wu = w;
      wu.gpus = 2;
      plan *pu = layer_build(&sched_ulysses, &wu, t, true, false);
      CU_ASSERT_CLOSE(buf_bytes(pu, "qkv", 0), none, 1e-12);
      CU_ASSERT(!read_in_backward(pu, "qkv", 0));
      /* the out projection saves its input for its weight gradient: the
       * attention's output, Ulysses' copy after its all-to-all included */
      if (pass == PASS_FWDBWD) {
        CU_ASSERT(read_in_backward_by(p, "out", 0, OP_GEMM));
        CU_ASSERT(read_in_backward_by(pu, "out", 0, OP_GEMM));
      }
      plan_free(pu);
      exec_opts o = {0};
      exec_result *r = exec_run(p, t, &o);
      CU_ASSERT_EQUAL(r->mem_errors, 0);
      exec_result_free(r);
      plan_free(p);
    }
  double grads[2] = {0}, states[2] = {0};
  for (int bf16 = 0; bf16 <= 1; bf16++) {
    workload w = model8b(2, 2, 1, 2, 16384);
    w.precision = bf16 ? PRECISION_BF16 : PRECISION_MEGATRON;
    plan *p = layer_build(&sched_ring, &w, t, true, false);
    grads[bf16] = buf_bytes(p, "main_grad", 0);
    states[bf16] = buf_bytes(p, "optimizer_states", 0);
    exec_opts o = {0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_EQUAL(r->mem_errors, 0);
    CU_ASSERT(layer_resident_bytes(&w) <= r->peak_bytes);
    exec_result_free(r);
    plan_free(p);
  }
  CU_ASSERT(grads[0] > 0);
  CU_ASSERT_CLOSE(grads[1], grads[0] / 2, 1e-12);
  CU_ASSERT_CLOSE(states[1], states[0] * 4 / 12, 1e-12);
  topo_free(t);
}

/* Gradient accumulation: M micro-batches are M times the model FLOPs,
 * one gradient reduction and one optimizer step, and the peak of one. */
static void test_micro_batches(void) {
  topology *t = ideal(8);
  double flops1 = 0, peak1 = 0;
  unsigned colls1 = 0;
  for (uint32_t m = 1; m <= 3; m += 2) {
    workload w = model8b(2, 2, 2, 2, 16384);
    w.zero = 1;
    w.micro_batches = m;
    plan *p = layer_build(&sched_ring, &w, t, true, false);
    unsigned colls = 0, opt = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind == TASK_COMM && x->n_xfer) {
        plan_xfer e0 = g_array_index(p->xfers, plan_xfer, x->xfer_off);
        /* the gradient reduce-scatters (a TP group is GPUs 2k, 2k + 1) */
        colls += x->api == COMM_REDUCE_SCATTER && e0.src / 2 != e0.dst / 2;
      }
      opt += x->kind == TASK_COMPUTE && x->op.kind == OP_ELEMWISE &&
             x->op.elemwise == EW_OPTIMIZER;
    }
    exec_opts o = {0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_EQUAL(r->mem_errors, 0);
    CU_ASSERT_EQUAL(opt, 8); /* one per GPU */
    if (m == 1) {
      flops1 = layer_model_flops(p);
      peak1 = r->peak_bytes;
      colls1 = colls;
      CU_ASSERT(colls > 0);
    } else {
      CU_ASSERT_CLOSE(layer_model_flops(p), m * flops1, 1e-12);
      CU_ASSERT_EQUAL(colls, colls1);
      CU_ASSERT_CLOSE(r->peak_bytes, peak1, 1e-9);
    }
    exec_result_free(r);
    plan_free(p);
  }
  topo_free(t);
}

/* TransformerEngine's FP8 recipe against Megatron's bf16: every layer
 * GEMM in FP8 (the LM head's not), the weights cast once a step (the
 * first micro-batch's forward: 4 GEMMs a layer per GPU), and per GPU the
 * FP8 copy and transpose of each layer's GEMM weights, 2 bytes a weight
 * (closed form: Llama-3-8B's (6144 + 4096) x 4096 + 3 x 14336 x 4096
 * weights a layer over TP 2), which is also exactly what the peak and the
 * resident bound grow by; the model FLOPs stay Megatron's. */
static void test_fp8(void) {
  topology *t = ideal(8);
  uint32_t L = 3, mbs = 2;
  double gemm_w = ((6144.0 + 4096) * 4096 + 3.0 * 14336 * 4096) / 2;
  double peak[2] = {0}, resident[2] = {0}, flops[2] = {0}, step[2] = {0};
  for (int fp8 = 0; fp8 <= 1; fp8++) {
    workload w = model8b(2, 2, 2, L, 16384);
    w.zero = 1;
    w.micro_batches = mbs;
    w.precision = fp8 ? PRECISION_FP8 : PRECISION_MEGATRON;
    plan *p = layer_build(&sched_zigzag, &w, t, true, false);
    unsigned fp8_gemms = 0, bf16_gemms = 0, weight_casts = 0;
    for (guint i = 0; i < p->tasks->len; i++) {
      const plan_task *x = plan_task_at(p, i);
      if (x->kind != TASK_COMPUTE || x->op.kind != OP_GEMM || x->gpu != 0) continue;
      if (x->op.fp8 & COMPUTE_FP8) fp8_gemms++;
      else bf16_gemms++;
      weight_casts += (x->op.fp8 & COMPUTE_FP8_CAST_WEIGHT) != 0;
    }
    /* per GPU and micro-batch 4 GEMMs forward, 4 backward a layer; the
     * LM head's forward and backward */
    CU_ASSERT_EQUAL(fp8_gemms, fp8 ? mbs * L * 8 : 0);
    CU_ASSERT_EQUAL(bf16_gemms, fp8 ? mbs * 2 : mbs * (L * 8 + 2));
    CU_ASSERT_EQUAL(weight_casts, fp8 ? L * 4 : 0);
    CU_ASSERT_CLOSE(buf_bytes(p, "weights_fp8", 0), fp8 ? L * 2 * gemm_w : 0, 1e-12);
    CU_ASSERT_CLOSE(buf_bytes(p, "weights_fp8", 7), fp8 ? L * 2 * gemm_w : 0, 1e-12);
    exec_opts o = {0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_EQUAL(r->mem_errors, 0);
    peak[fp8] = r->peak_bytes;
    step[fp8] = r->step_s;
    resident[fp8] = layer_resident_bytes(&w);
    flops[fp8] = layer_model_flops(p);
    CU_ASSERT(resident[fp8] <= r->peak_bytes);
    exec_result_free(r);
    plan_free(p);
  }
  CU_ASSERT_CLOSE(peak[1] - peak[0], L * 2 * gemm_w, 1e-9);
  CU_ASSERT_CLOSE(resident[1] - resident[0], L * 2 * gemm_w, 1e-9);
  CU_ASSERT_CLOSE(flops[1], flops[0], 1e-12);
  /* the roofline topology prices FP8 at twice the bf16 peak */
  CU_ASSERT(step[1] < step[0]);
  topo_free(t);
}

/* Two verdicts with the same words, their whole numbers (percentages of
 * the step) at most one apart: figures within the step's 0.5% tolerance
 * may round to neighbouring percents. */
static bool verdicts_alike(const char *a, const char *b) {
  while (*a && *b) {
    if (g_ascii_isdigit(*a) && g_ascii_isdigit(*b)) {
      char *ea, *eb;
      long x = strtol(a, &ea, 10), y = strtol(b, &eb, 10);
      if (labs(x - y) > 1) return false;
      a = ea, b = eb;
    } else if (*a++ != *b++) {
      return false;
    }
  }
  return !*a && !*b;
}

/* A step of many layers and micro-batches priced from SIM_REPEAT_FROM
 * layers and one more, SIM_MB_REPEAT_FROM micro-batches and one more
 * (sim_run_step_repeating; sim_run_point_repeating, as the main command
 * runs a step, where the attention part is checked too) equals the whole
 * step replayed (sim_run_step, sim_run_point), for every scheduler that
 * runs softmax layers, ZeRO 0 and 3, recomputation none and full,
 * micro-batches 1 to SIM_MB_REPEAT_FROM + 3 (those above
 * SIM_MB_REPEAT_FROM + 1 extended; the attention part at the most), on
 * two nodes (DP across them): the time and the parts the verdict reads
 * within 0.5% (sim.h), the attention part within 0.5% of the step (the
 * difference of two extended steps), peak allocated memory per GPU and
 * model FLOPs exactly, the verdict's words alike; the worst relative
 * difference of each figure is printed. */
static void test_step_repeating(void) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load("topologies/h100x8x2.json", &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  unsigned ran = 0, extended_mbs = 0;
  const char *names[] = {"step", "compute", "exposed", "attention/step", "mean util", "peak",
                         "model flops"};
  /* [0]: every case; [1]: those whose micro-batches were extended */
  double worst[2][G_N_ELEMENTS(names)] = {{0}};
  char worst_at[2][G_N_ELEMENTS(names)][96] = {{{0}}};
  for (const sched_ops *const *s = sched_all(); *s; s++) {
    if (!((*s)->attention & SCHED_RUNS(ATTN_SOFTMAX)) || (*s)->alias_of) continue;
    for (uint32_t zero = 0; zero <= 3; zero += 3)
      for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc += 2)
        for (uint32_t mb = 1; mb <= SIM_MB_REPEAT_FROM + 3; mb++) {
          workload w = model8b(2, 2, 4, SIM_REPEAT_FROM + 3, 8192);
          w.zero = zero;
          w.recompute = (recompute_kind)rc;
          w.micro_batches = mb;
          workload a = layer_attention_workload(&w);
          g_autoptr(GError) e = NULL;
          if (!sched_check(*s, &a, t, &e)) continue;
          ran++;
          extended_mbs += sim_step_mbs_repeat(&w);
          scenario_point pt = {w, *s, false, NULL};
          exec_opts o = {0};
          bool attention = mb == SIM_MB_REPEAT_FROM + 3;
          sim_result *whole = (attention ? sim_run_point : sim_run_step)(t, &pt, &o);
          sim_result *rep = (attention ? sim_run_point_repeating : sim_run_step_repeating)(t, &pt, &o);
          const exec_result *x = whole->r, *y = rep->r;
          CU_ASSERT(rep->extended && !whole->extended);
          /* ZeRO 2-3: a step of no more than SIM_ZERO_PEAK_FAR layers
           * takes its peak from its whole replay (exact: no note); its
           * micro-batches extended, the note says the peak is inexact */
          CU_ASSERT((rep->note && strstr(rep->note, "ZeRO 2-3")) ==
                    (zero >= 2 && sim_step_mbs_repeat(&w)));
          CU_ASSERT(SIM_REPEAT_FROM + 3 <= SIM_ZERO_PEAK_FAR);
          CU_ASSERT(rep->peak_near_bytes == 0);
          CU_ASSERT(!(whole->note && strstr(whole->note, "ZeRO 2-3")));
          CU_ASSERT(attention ? !isnan(rep->attention_s) : isnan(rep->attention_s));
          double parts[][3] = {{x->step_s, y->step_s, 5e-3},
                               {x->compute_s, y->compute_s, 5e-3},
                               {x->exposed_s, y->exposed_s, 5e-3},
                               {whole->attention_s, rep->attention_s, 5e-3},
                               {whole->mean_util, rep->mean_util, 5e-3},
                               {x->peak_bytes, y->peak_bytes, 1e-9},
                               {whole->model_flops, rep->model_flops, 1e-9}};
          for (size_t i = 0; i < G_N_ELEMENTS(parts); i++) {
            if (i == 3 && !attention) continue;
            /* the attention part relative to the step */
            double d = fabs(parts[i][0] - parts[i][1]) / fabs(i == 3 ? x->step_s : parts[i][0]);
            for (int m = 0; m <= (int)sim_step_mbs_repeat(&w); m++)
              if (d > worst[m][i]) {
                worst[m][i] = d;
                g_snprintf(worst_at[m][i], sizeof worst_at[m][i], "%s zero %u rc %d mb %u",
                           (*s)->name, zero, rc, mb);
              }
            if (!(d <= parts[i][2]))
              fprintf(stderr, "%s zero %u rc %d mb %u: %s %.12g vs %.12g\n", (*s)->name, zero,
                      rc, mb, names[i], parts[i][0], parts[i][1]);
            CU_ASSERT(d <= parts[i][2]);
          }
          for (uint32_t g = 0; g < x->n_gpus; g++)
            CU_ASSERT_CLOSE(y->gpu_peak_bytes[g], x->gpu_peak_bytes[g], 1e-9);
          CU_ASSERT(isnan(y->peak_reserved_bytes));
          g_autofree char *v0 = verdict_reason(t, whole, NULL);
          g_autofree char *v1 = verdict_reason(t, rep, NULL);
          CU_ASSERT(verdicts_alike(v0, v1));
          sim_result_free(whole);
          sim_result_free(rep);
        }
  }
  for (int m = 0; m < 2; m++)
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
      fprintf(stderr, "step extended%s: %s worst %.3g (%s)\n",
              m ? " (micro-batches too)" : "", names[i], worst[m][i], worst_at[m][i]);
  fprintf(stderr, "step extended: %u cases, %u with micro-batches extended\n", ran,
          extended_mbs);
  /* every scheduler ran each case; the micro-batches extended in 2 of 5 */
  CU_ASSERT(ran >= 100);
  CU_ASSERT(extended_mbs * 5 == ran * 2);
  topo_free(t);
}

/* A step whose peak memory moves from the loss (its logits and softmax)
 * to the backward's end (ZeRO 3: each layer's gradient shards waiting for
 * their reduce-scatters) as layers are added: at SIM_REPEAT_FROM + 1
 * layers the body's peak (plan_phase) is the larger, at 24 the
 * backward's end's.  Extended from the few layers phase by phase
 * (exec_result_extend), every GPU's peak is the whole step's exactly;
 * extending the step's single peak instead gives the body's, 11% low
 * (h100x8, Llama-3-8B at 16K, ring SP 2, full recomputation). */
static void test_step_phase_peaks(void) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load("topologies/h100x8.json", &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  workload w = model8b(2, 1, 1, 24, 16384);
  w.zero = 3;
  w.recompute = RECOMPUTE_FULL;
  scenario_point pt = {w, sched_find("ring"), false, NULL};
  exec_opts o = {0};
  sim_result *whole = sim_run_step(t, &pt, &o);
  sim_result *rep = sim_run_step_repeating(t, &pt, &o);
  pt.w.layers[ATTN_SOFTMAX] = SIM_REPEAT_FROM + 1;
  sim_result *few = sim_run_step(t, &pt, &o);
  const double *fw = few->r->gpu_peak_phase_bytes, *wh = whole->r->gpu_peak_phase_bytes;
  CU_ASSERT_PTR_NOT_NULL_FATAL(fw);
  CU_ASSERT_PTR_NOT_NULL_FATAL(wh);
  uint32_t n = whole->r->n_gpus;
  CU_ASSERT(rep->extended);
  for (uint32_t g = 0; g < n; g++) {
    /* the phase of the peak switches between the few layers and 24 */
    CU_ASSERT(fw[PLAN_BODY * n + g] > fw[PLAN_BACKWARD_END * n + g]);
    CU_ASSERT(wh[PLAN_BACKWARD_END * n + g] > wh[PLAN_BODY * n + g]);
    /* the whole step's peak is its phases' largest, and the extended one
     * equals it */
    CU_ASSERT_EQUAL(whole->r->gpu_peak_bytes[g], MAX(wh[PLAN_BACKWARD_END * n + g],
                                                     MAX(wh[PLAN_BODY * n + g],
                                                         wh[PLAN_OPTIMIZER * n + g])));
    CU_ASSERT_CLOSE(rep->r->gpu_peak_bytes[g], whole->r->gpu_peak_bytes[g], 1e-9);
    CU_ASSERT_CLOSE(rep->r->gpu_peak_phase_bytes[PLAN_BACKWARD_END * n + g],
                    wh[PLAN_BACKWARD_END * n + g], 1e-9);
  }
  sim_result_free(few);
  sim_result_free(whole);
  sim_result_free(rep);
  topo_free(t);
}

/* A trace kept, or a step of few layers and micro-batches: replayed
 * whole (sim.h), the same figures to the bit. */
static void test_step_not_extended(void) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load("topologies/h100x8x2.json", &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  workload few = model8b(2, 2, 4, SIM_REPEAT_FROM + 1, 8192);
  few.micro_batches = SIM_MB_REPEAT_FROM + 1;
  workload many = few;
  many.layers[ATTN_SOFTMAX]++;
  many.micro_batches++;
  attn_kind k;
  CU_ASSERT(!sim_step_repeats(&few, &k) && !sim_step_mbs_repeat(&few));
  CU_ASSERT(sim_step_repeats(&many, &k) && sim_step_mbs_repeat(&many));
  /* the plan the extension builds: the largest of its replays */
  workload built = sim_step_replayed(&many);
  CU_ASSERT_EQUAL(layers_total(&built), SIM_REPEAT_FROM + 1);
  CU_ASSERT_EQUAL(layer_micro_batches(&built), SIM_MB_REPEAT_FROM + 1);
  /* a global batch's micro-batches count the same */
  many.micro_batches = 0;
  many.global_batch_tokens = (uint64_t)(SIM_MB_REPEAT_FROM + 2) * 8192 * 4;
  CU_ASSERT(sim_step_mbs_repeat(&many));
  built = sim_step_replayed(&many);
  CU_ASSERT_EQUAL(layer_micro_batches(&built), SIM_MB_REPEAT_FROM + 1);
  for (int trace = 0; trace < 2; trace++) {
    scenario_point pt = {trace ? many : few, &sched_zigzag, false, NULL};
    exec_opts o = {.keep_trace = trace};
    sim_result *a = sim_run_point(t, &pt, &o), *b = sim_run_point_repeating(t, &pt, &o);
    CU_ASSERT(!b->extended);
    CU_ASSERT_EQUAL(a->r->step_s, b->r->step_s);
    CU_ASSERT_EQUAL(a->attention_s, b->attention_s);
    CU_ASSERT_EQUAL(a->r->peak_reserved_bytes, b->r->peak_reserved_bytes);
    CU_ASSERT(trace ? b->r->spans && b->r->spans->len : !b->r->spans);
    sim_result_free(a);
    sim_result_free(b);
  }
  topo_free(t);
}

/* The gradient group's NCCL rings run over the nodes its GPUs lie on:
 * TP 2 x SP 4 x DP 4 on four nodes of 8, the gradient group of TP rank r
 * holds 4 GPUs (r, r + 2, ...) of each node, so its collectives run as 4
 * rings (ring j entering each node at the group's j-th GPU there): each
 * member sends on 4 edges to members of its own TP rank, and each ring
 * crosses into each of the 4 nodes once, at a GPU of its own (16
 * crossings, distinct entry and exit GPUs). Rings over blocks of the
 * topology's whole nodes (8) would send on 8 edges with 32 crossings. */
static void test_grad_rings_follow_nodes(void) {
  g_autoptr(GError) err = NULL;
  topology *t = topo_load("topologies/h100x8x4.json", &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  workload w = model8b(4, 2, 4, 1, 32768);
  w.zero = 3;
  plan *p = layer_build(&sched_zigzag, &w, t, true, false);
  unsigned checked = 0;
  for (uint32_t i = 0; i < p->tasks->len; i++) {
    const plan_task *c = plan_task_at(p, i);
    if (c->kind != TASK_COMM || !plan_api_is_ring(c->api) || c->n_xfer <= 2) continue;
    uint32_t sends[32] = {0}, in_at[32] = {0}, out_at[32] = {0}, crossings = 0;
    bool same_rank = true;
    for (uint32_t k = 0; k < c->n_xfer; k++) {
      const plan_xfer *x = &g_array_index(p->xfers, plan_xfer, c->xfer_off + k);
      sends[x->src]++;
      same_rank &= x->src % 2 == x->dst % 2;
      if (x->src / 8 != x->dst / 8) crossings++, in_at[x->dst]++, out_at[x->src]++;
    }
    CU_ASSERT(same_rank);
    CU_ASSERT_EQUAL(c->n_xfer, 16 * 4);
    CU_ASSERT_EQUAL(crossings, 16);
    for (uint32_t g = 0; g < 32; g++) {
      CU_ASSERT(sends[g] == 0 || sends[g] == 4);
      CU_ASSERT(in_at[g] <= 1 && out_at[g] <= 1);
    }
    checked++;
  }
  /* ZeRO 3: each layer's weights gathered (forward, backward) and its
   * gradients reduce-scattered, over both TP ranks' groups */
  CU_ASSERT(checked >= 6);
  plan_free(p);
  topo_free(t);
}

/* plan_append on a plan small enough to know every edge and buffer use
 * of: GPU 0's kernel t0, a send from GPU 0 to GPU 1 after it (t1), GPU
 * 1's kernel after the send (t2); then, a second range, GPU 0's kernel t3.
 * t0 and t3 read an input the host makes.  Appended twice through one
 * shared plan_append_src (src GPUs 0, 1 onto host GPUs 2, 3, then 0, 1),
 * each copy must be the same: remapped GPUs and edges; after the first
 * range, a host kernel of host GPU 1 (src GPU 1) waits only for that
 * range's sink there (t2: the send has a successor on GPU 1; a wait on it
 * too is an edge too many); the input is written by its first range's use
 * (it comes into being there) and read by the later range's. */
static void test_append_exact(void) {
  plan *src = plan_new(2, false);
  plan_op k = {.kind = OP_COPY, .bytes = 1e6};
  uint32_t in = plan_buf_input(src, 0, 100, "in");
  uint32_t t0 = plan_compute(src, 0, 0, &k);
  plan_buf_reads(src, t0, in);
  uint32_t t1 = plan_comm(src, 0, COMM_P2P);
  plan_xfer_add(src, t1, 0, 1, 1e6);
  plan_issue(src, t1, NULL, -1, false);
  uint32_t t2 = plan_compute(src, 1, 0, &k);
  plan_dep(src, t1, t2);
  uint32_t t3 = plan_compute(src, 0, 1, &k);
  plan_buf_reads(src, t3, in);
  plan_finish(src);
  plan *dst = plan_new(4, false);
  plan_append_src *shared = plan_append_src_new(src);
  const uint32_t maps[2][2] = {{2, 3}, {0, 1}};
  uint32_t host[2], first[2];
  for (int m = 0; m < 2; m++) {
    plan_append *a = plan_append_new_shared(dst, shared, maps[m], PLAN_APPEND_OWN_INPUTS);
    first[m] = dst->tasks->len;
    plan_append_range(a, t0, t3);
    host[m] = plan_compute(dst, maps[m][1], 0, &k);
    plan_append_after(a, host[m]);
    plan_append_range(a, t3, t3 + 1);
    plan_append_free(a);
  }
  plan_append_src_free(shared);
  plan_finish(dst);
  CU_ASSERT_EQUAL_FATAL(dst->tasks->len, 10);
  for (int m = 0; m < 2; m++) {
    uint32_t f = first[m];
    CU_ASSERT_EQUAL(host[m], f + 3);
    const plan_task *c0 = plan_task_at(dst, f), *c1 = plan_task_at(dst, f + 1),
                    *c2 = plan_task_at(dst, f + 2), *h = plan_task_at(dst, f + 3),
                    *c3 = plan_task_at(dst, f + 4);
    CU_ASSERT(c0->kind == TASK_COMPUTE && c0->gpu == maps[m][0] && c0->n_dep == 0);
    CU_ASSERT_FATAL(c1->kind == TASK_COMM && c1->n_xfer == 1);
    plan_xfer e = g_array_index(dst->xfers, plan_xfer, c1->xfer_off);
    CU_ASSERT(e.src == maps[m][0] && e.dst == maps[m][1]);
    CU_ASSERT(c1->n_dep == 1 && dst->deps[c1->dep_off] == f);
    CU_ASSERT(c2->gpu == maps[m][1] && c2->n_dep == 1 && dst->deps[c2->dep_off] == f + 1);
    /* the host kernel: after t2 (stream and sink alike), once */
    CU_ASSERT(h->n_dep == 1 && dst->deps[h->dep_off] == f + 2);
    /* t3 after t0's copy: src's edge, copied, and the seam's (GPU 0's
     * last compute in the host plan), the same task twice */
    CU_ASSERT(c3->gpu == maps[m][0] && c3->n_dep == 2 && dst->deps[c3->dep_off] == f &&
              dst->deps[c3->dep_off + 1] == f);
    unsigned seen = 0;
    for (uint32_t u = 0; u < plan_buf_use_count(dst); u++) {
      const plan_buf_use *use = plan_buf_use_at(dst, u);
      if (use->task != f && use->task != f + 4) continue;
      const plan_buf *b = plan_buf_at(dst, use->buf);
      CU_ASSERT(b->gpu == maps[m][0] && !b->input && b->keep);
      CU_ASSERT_EQUAL(use->write, use->task == f);
      seen |= use->task == f ? 1 : 2;
    }
    CU_ASSERT_EQUAL(seen, 3);
  }
  CU_ASSERT_EQUAL(plan_buf_use_count(dst), 4);
  CU_ASSERT_EQUAL(plan_buf_count(dst), 2);
  plan_free(dst);
  plan_free(src);
}

/* A group's uses naming one GPU's copy each of a buffer of every GPU (a
 * ring's backward reads each GPU's arrived dK/dV so: rotate_buf.c), as
 * plan_append copies them: each such use stands for every copy the group
 * touches, so of the n uses of an n-GPU group only the first and the last
 * are appended, each copy's first and last in their places (the replay
 * makes a copy at its task's first use and frees it at the last; those
 * between change nothing), n^2 uses becoming 2n.  The appended plan
 * replays as its source does, every figure within 1e-9. */
static void test_append_repeats(void) {
  enum { N = 4 };
  plan *src = plan_new(N, false);
  uint32_t b = plan_buf_new(src, PLAN_ALL, 1e6, "arrived");
  uint32_t groups[2];
  for (int i = 0; i < 2; i++) {
    groups[i] = plan_comm(src, (uint32_t)i, COMM_P2P);
    for (uint32_t g = 0; g < N; g++) plan_xfer_add(src, groups[i], g, (g + 1) % N, 1e6);
    plan_issue(src, groups[i], NULL, -1, false);
  }
  plan_dep(src, groups[0], groups[1]);
  plan_buf_writes(src, groups[0], b);
  for (uint32_t g = 0; g < N; g++)
    plan_buf_use_on(src, groups[1], b, g, false, PLAN_BUF_DURING);
  plan_finish(src);
  plan *dst = plan_new(N, false);
  const uint32_t same[N] = {0, 1, 2, 3};
  plan_append *a = plan_append_new(dst, src, same, 0);
  plan_append_range(a, 0, src->tasks->len);
  plan_append_free(a);
  plan_finish(dst);
  CU_ASSERT_EQUAL_FATAL(dst->tasks->len, 2);
  /* the read: 2N uses, N distinct copies (one per GPU) and then the same
   * N again in the same order */
  uint32_t reads[4 * N], n_reads = 0, writes = 0;
  for (uint32_t u = 0; u < plan_buf_use_count(dst); u++) {
    const plan_buf_use *use = plan_buf_use_at(dst, u);
    if (use->task == 1 && !use->write && n_reads < 4 * N) reads[n_reads++] = use->buf;
    writes += use->task == 0 && use->write;
  }
  CU_ASSERT_EQUAL(writes, N);
  CU_ASSERT_EQUAL_FATAL(n_reads, 2 * N);
  unsigned gpus_seen = 0;
  for (uint32_t i = 0; i < N; i++) {
    CU_ASSERT_EQUAL(reads[i], reads[N + i]);
    gpus_seen |= 1u << plan_buf_at(dst, reads[i])->gpu;
  }
  CU_ASSERT_EQUAL(gpus_seen, (1u << N) - 1);
  topology *t = test_switch(N, 100e9, 1e-6);
  exec_opts o = {0};
  exec_result *rs = exec_run(src, t, &o), *rd = exec_run(dst, t, &o);
  CU_ASSERT_DOUBLE_EQUAL(rd->step_s, rs->step_s, 1e-9 * rs->step_s);
  CU_ASSERT(rs->peak_bytes >= 1e6);
  for (uint32_t g = 0; g < N; g++)
    CU_ASSERT_DOUBLE_EQUAL(rd->gpu_peak_bytes[g], rs->gpu_peak_bytes[g], 1e-9 * rs->peak_bytes);
  CU_ASSERT_EQUAL(rd->mem_errors, 0);
  CU_ASSERT_EQUAL(rs->mem_errors, 0);
  exec_result_free(rs);
  exec_result_free(rd);
  topo_free(t);
  plan_free(dst);
  plan_free(src);
}

int main(void) {
  const test_case cases[] = {TEST(test_step_repeating), TEST(test_step_phase_peaks), TEST(test_step_not_extended),TEST(test_op_flops),        TEST(test_model_flops),
                             TEST(test_sum_of_parts),    TEST(test_sum_of_parts_tp),
                             TEST(test_tp_ranks_exact),  TEST(test_tp_collective_bytes),
                             TEST(test_memory),          TEST(test_sim_columns),
                             TEST(test_seams),           TEST(test_backward_seam),           TEST(test_model_step_flops),
                             TEST(test_model_sum_of_parts), TEST(test_grad_reduction),
                             TEST(test_model_memory_overlap),
                             TEST(test_model_owns_attention_buffers),
                             TEST(test_budget_covers),   TEST(test_model_every_scheduler),
                             TEST(test_view),            TEST(test_micro_batches), TEST(test_placement), TEST(test_amp),
                             TEST(test_unfused_saved_and_bf16), TEST(test_fp8),
                             TEST(test_grad_rings_follow_nodes), TEST(test_append_exact), TEST(test_append_repeats),
                             {NULL, NULL}};
  return test_run("layer", cases);
}
