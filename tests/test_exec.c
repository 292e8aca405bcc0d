/* exec: analytic cross-checks of whole replays. */
#include "compute.h"
#include "exec.h"
#include "exec_internal.h" /* EXEC_PRICE_WAYS */
#include "sched/sched.h"
#include "sim.h"
#include "testutil.h"
#include "verdict.h"

#include <json-c/json.h>

/* An NVSwitch-like topology: per GPU an egress and an ingress channel of
 * bw bytes/s, each with half the route latency. */
static topology *switch_topo(uint32_t n, double bw, double lat, double launch) {
  topology *t = test_switch(n, bw, lat / 2);
  t->launch_s = t->p2p_launch_s = launch;
  t->compute.peak_flops = 100e12;
  t->compute.efficiency = 0.5;
  t->compute.launch_s = 3e-6;
  return t;
}

static workload llama(uint32_t n, uint64_t seq, bool causal) {
  workload w = {.gpus = n, .seq_len = seq, .batch = 1, .heads = 32, .kv_heads = 8,
                .head_dim = 128, .elem_bytes = 2, .dtype = "bf16", .causal = causal,
                .pass = PASS_FWD};
  return w;
}

/* Communication only: a ring of n steps moves n-1 chunks one after the
 * other, each taking bytes/bw + latency + launch. */
static void t_comm_only_ring(void) {
  for (uint32_t n = 2; n <= 8; n++) {
    double bw = 100e9, lat = 4e-6, launch = 20e-6;
    topology *t = switch_topo(n, bw, lat, launch);
    workload w = llama(n, 840 * 128, false); /* divisible by 2..8 */
    plan *p = sched_ring.build(&w, t, false);
    exec_opts o = {.no_compute = true};
    exec_result *r = exec_run(p, t, &o);
    double bytes = workload_kv_bytes(&w, (double)w.seq_len / n);
    double want = (n - 1) * (bytes / bw + lat + launch);
    CU_ASSERT_CLOSE(r->step_s, want, 1e-9);
    CU_ASSERT_CLOSE(r->comm_s, want, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r->compute_s, 0, 0);
    /* each egress channel carried n-1 chunks */
    CU_ASSERT_CLOSE(r->chan_bytes[0], (n - 1) * bytes, 1e-9);
    exec_result_free(r);
    plan_free(p);
    topo_free(t);
  }
}

/* Grouped send/receive pays per message of its busiest GPU: a ring step
 * has one message out and one in per GPU; a causal TASP step on 5 GPUs has
 * 4 cycles x 2 pieces out and as many in.  A collective group pays none. */
static void t_p2p_message_cost(void) {
  double bw = 100e9, lat = 4e-6, launch = 20e-6, msg = 5e-6;
  uint32_t n = 5;
  workload w = llama(n, 840 * 128, true);
  for (int s = 0; s < 2; s++) {
    const sched_ops *sc = s ? &sched_tasp : &sched_ring;
    double per_step_msgs = s ? 16 : 2;
    double base = 0, with = 0;
    for (int pass = 0; pass < 2; pass++) {
      topology *t = switch_topo(n, bw, lat, launch);
      if (pass) t->p2p_msg_s = msg;
      plan *p = sc->build(&w, t, false);
      exec_opts o = {.no_compute = true};
      exec_result *r = exec_run(p, t, &o);
      *(pass ? &with : &base) = r->step_s;
      if (pass) { /* as collectives, the same groups pay no message cost */
        for (guint i = 0; i < p->tasks->len; i++)
          if (plan_task_at(p, i)->kind == TASK_COMM) plan_task_at(p, i)->api = COMM_ALL_TO_ALL;
        exec_result *c = exec_run(p, t, &o);
        CU_ASSERT_CLOSE(c->step_s, base, 1e-9);
        exec_result_free(c);
      }
      exec_result_free(r);
      plan_free(p);
      topo_free(t);
    }
    CU_ASSERT_CLOSE(with - base, (n - 1) * per_step_msgs * msg, 1e-9);
  }
}

/* TASP's all-to-all on the same ports: each step moves the same bytes per
 * GPU over n-1 flows that share the egress port, so it takes as long as a
 * ring step when nothing caps a single flow; with a per-flow cap of bw/2 a
 * ring step takes twice as long, TASP's does not. */
static void t_comm_only_tasp_vs_cap(void) {
  uint32_t n = 8;
  double bw = 100e9;
  topology *t = switch_topo(n, bw, 0, 0);
  workload w = llama(n, 56 * 1024, false);
  exec_opts o = {.no_compute = true};
  double bytes = workload_kv_bytes(&w, (double)w.seq_len / n);
  plan *pr = sched_ring.build(&w, t, false), *pt = sched_tasp.build(&w, t, false);
  exec_result *rr = exec_run(pr, t, &o), *rt = exec_run(pt, t, &o);
  CU_ASSERT_CLOSE(rr->step_s, (n - 1) * bytes / bw, 1e-9);
  CU_ASSERT_CLOSE(rt->step_s, (n - 1) * bytes / bw, 1e-9);
  exec_result_free(rr);
  exec_result_free(rt);
  for (size_t p = 0; p < (size_t)n * n; p++) t->route_cap_Bps[p] = bw / 2;
  rr = exec_run(pr, t, &o);
  rt = exec_run(pt, t, &o);
  CU_ASSERT_CLOSE(rr->step_s, 2 * (n - 1) * bytes / bw, 1e-9);
  CU_ASSERT_CLOSE(rt->step_s, (n - 1) * bytes / bw, 1e-9);
  exec_result_free(rr);
  exec_result_free(rt);
  plan_free(pr);
  plan_free(pt);
  topo_free(t);
}

/* comm.flow_rate_by_size: a ring step's one transfer on 2 GPUs runs at the
 * table's rate for its size (a small one at 100 GB/s, a large one at 300,
 * each port 400), not at one rate for both; where the route's cap is lower
 * than the table's rate the cap holds; without the table both run at the
 * port's rate. */
static void t_flow_rate_by_size(void) {
  double bw = 400e9;
  uint32_t n = 2;
  workload small = llama(n, 4096, false), large = llama(n, 65536, false);
  double b_small = workload_kv_bytes(&small, 2048), b_large = workload_kv_bytes(&large, 32768);
  topology *t = switch_topo(n, bw, 0, 0);
  t->flow_rate = (size_rate){2, g_new(double, 2), g_new(double, 2)};
  t->flow_rate.bytes[0] = b_small;
  t->flow_rate.bytes[1] = b_large;
  t->flow_rate.rate_Bps[0] = 100e9;
  t->flow_rate.rate_Bps[1] = 300e9;
  exec_opts o = {.no_compute = true};
  const workload *ws[] = {&small, &large};
  double bytes[] = {b_small, b_large}, want[] = {b_small / 100e9, b_large / 300e9};
  for (int i = 0; i < 2; i++) {
    plan *p = sched_ring.build(ws[i], t, false);
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_CLOSE(r->step_s, want[i], 1e-9);
    CU_ASSERT_CLOSE(r->chan_bytes[0], bytes[i], 1e-12);
    exec_result_free(r);
    /* a route cap of 200 GB/s: the small transfer keeps the table's 100,
     * the large one is held to the cap */
    for (size_t q = 0; q < (size_t)n * n; q++) t->route_cap_Bps[q] = 200e9;
    r = exec_run(p, t, &o);
    CU_ASSERT_CLOSE(r->step_s, i ? b_large / 200e9 : b_small / 100e9, 1e-9);
    exec_result_free(r);
    for (size_t q = 0; q < (size_t)n * n; q++) t->route_cap_Bps[q] = 0;
    plan_free(p);
  }
  size_rate_clear(&t->flow_rate);
  for (int i = 0; i < 2; i++) {
    plan *p = sched_ring.build(ws[i], t, false);
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_CLOSE(r->step_s, bytes[i] / bw, 1e-9);
    exec_result_free(r);
    plan_free(p);
  }
  topo_free(t);
}

/* Compute only: each GPU's time is the sum of its kernels (plus merges);
 * for causal ring the last GPU does all the work. */
static void t_compute_only_sum(void) {
  uint32_t n = 4;
  topology *t = switch_topo(n, 100e9, 0, 0);
  t->compute.merge_fixed_s = 5e-6;
  workload w = llama(n, 32 * 1024, true);
  plan *p = sched_ring.build(&w, t, false);
  exec_opts o = {.no_comm = true};
  exec_result *r = exec_run(p, t, &o);
  double c = (double)w.seq_len / n;
  for (uint32_t g = 0; g < n; g++) {
    double want = compute_attn_s(&t->compute, compute_attn_flops(1, 32, 128, c, c, true), 32, 128, c, c, true, false);
    want += g * (compute_attn_s(&t->compute, compute_attn_flops(1, 32, 128, c, c, false), 32, 128, c, c, false, false) +
                 compute_merge_s(&t->compute, c * 32 * 128));
    /* then the float32 output cast to bf16 and the log-sum-exp laid out */
    plan_op out = {.kind = OP_COPY, .bytes = c * 32 * 128 * (4.0 + 2)};
    plan_op lse = {.kind = OP_COPY, .bytes = 2 * 4.0 * 32 * c};
    want += compute_op_s(&t->compute, &out) + compute_op_s(&t->compute, &lse);
    CU_ASSERT_CLOSE(r->gpu_compute_s[g], want, 1e-12);
  }
  CU_ASSERT_CLOSE(r->step_s, r->gpu_compute_s[n - 1], 1e-12);
  CU_ASSERT_EQUAL(r->last_gpu, n - 1);
  CU_ASSERT_DOUBLE_EQUAL(r->exposed_s, 0, 1e-15);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* Kernel prices are looked up once per distinct op among the last few
 * (exec_prices): a chain of copies on one GPU cycling through more
 * shapes than are remembered, each shape repeated, and attention blocks
 * alike in all but one operand, takes the sum of each task's own price. */
static void t_price_memo(void) {
  topology *t = switch_topo(1, 100e9, 0, 0);
  t->compute.copy_Bps = 1e12;
  t->compute.copy_fixed_s = 1e-6;
  plan *p = plan_new(1, false);
  double want = 0;
  for (uint32_t round = 0; round < 3; round++)
    for (uint32_t k = 0; k < 2 * EXEC_PRICE_WAYS + 3; k++) {
      uint32_t id = plan_copy(p, 0, round, 1e6 * (1 + k % (EXEC_PRICE_WAYS + 3)));
      want += compute_op_lookup(&t->compute, &plan_task_at(p, id)->op, NULL);
      /* the same block, causal or not, forward or backward, longer keys */
      workload w = llama(1, 4096, k % 2);
      plan_op shape = sched_shape(&w, k % 2, k % 3 == 0);
      plan_seg q = {0, 4096}, kv = {0, 1024 * (1 + k % 4)};
      id = plan_attn(p, 0, round, &shape, &q, 1, &kv, 1);
      want += compute_op_lookup(&t->compute, &plan_task_at(p, id)->op, NULL);
    }
  plan_finish(p);
  exec_opts o = {.no_comm = true};
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_CLOSE(r->gpu_compute_s[0], want, 1e-12);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* Overlap: with both, the step is at least the larger of the two and at
 * most their sum; compute hides communication when it dominates. */
static void t_overlap_bounds(void) {
  uint32_t n = 8;
  topology *t = switch_topo(n, 50e9, 2e-6, 10e-6);
  for (int big = 0; big < 2; big++) {
    workload w = llama(n, big ? 512 * 1024 : 16 * 1024, false);
    plan *p = sched_ring.build(&w, t, false);
    exec_opts both = {0}, cpu = {.no_comm = true}, net = {.no_compute = true};
    exec_result *rb = exec_run(p, t, &both), *rc = exec_run(p, t, &cpu),
                *rn = exec_run(p, t, &net);
    CU_ASSERT(rb->step_s >= fmax(rc->step_s, rn->step_s) * (1 - 1e-12));
    CU_ASSERT(rb->step_s <= (rc->step_s + rn->step_s) * (1 + 1e-12));
    if (big) CU_ASSERT(rb->exposed_s < 0.01 * rb->step_s);
    exec_result_free(rb); exec_result_free(rc); exec_result_free(rn);
    plan_free(p);
  }
  topo_free(t);
}

/* Host issue costs overlap GPU work: with long kernels they add only the
 * first issue; alone (no compute), comm launches queue on the host. */
static void t_host_issue(void) {
  uint32_t n = 4;
  topology *t = switch_topo(n, 100e9, 0, 0);
  t->comm_host_s = 50e-6;
  workload w = llama(n, 16 * 1024, false);
  plan *p = sched_ring.build(&w, t, false);
  exec_opts o = {.no_compute = true};
  exec_result *r = exec_run(p, t, &o);
  double bytes = workload_kv_bytes(&w, (double)w.seq_len / n);
  /* step k can start only once the host issued it at (k+1)·50 us */
  double want = 0;
  for (uint32_t k = 0; k < n - 1; k++) want = fmax(want, (k + 1) * 50e-6) + bytes / 100e9;
  CU_ASSERT_CLOSE(r->step_s, want, 1e-9);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* The host issue rule on a hand-built plan: a grouped send/receive costs
 * each GPU in it p2p_host_s plus p2p_op_host_s per isend/irecv it issues
 * (one per message), a collective comm_host_s, a compute task its kind's
 * host cost.  Group A: 0->1 as 2 messages, 1->0 as 1, 0->2 as 1 (GPU 0
 * issues 4 ops, GPU 1 3, GPU 2 1); group B: 1->2 as 1 message; then one
 * causal linear intra task on GPU 2.  Transfers of one byte and kernels of
 * no time: the pass ends when the last task is issued. */
static void t_host_issue_per_op(void) {
  topology *t = switch_topo(3, 1e15, 0, 0);
  t->comm_host_s = 1e-3;  /* a collective's: must not apply here */
  t->p2p_host_s = 10e-6;
  t->p2p_op_host_s = 2e-6;
  t->compute.lin_host_s[1][0] = 7e-6;  /* causal intra, forward */
  t->compute.lin_host_s[0][0] = 1e-3;  /* full intra: must not apply */
  plan *p = plan_new(3, false);
  uint32_t a = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add_msgs(p, a, 0, 1, 1, 2);
  plan_xfer_add_msgs(p, a, 1, 0, 1, 1);
  plan_xfer_add_msgs(p, a, 0, 2, 1, 1);
  plan_issue(p, a, NULL, -1, false);
  uint32_t b = plan_comm(p, 1, COMM_P2P);
  plan_xfer_add_msgs(p, b, 1, 2, 1, 1);
  plan_issue(p, b, NULL, -1, false);
  plan_dep(p, a, b);
  plan_op op = {.kind = OP_LIN_INTRA, .causal = true};
  uint32_t k = plan_compute(p, 2, 1, &op);
  plan_dep(p, b, k);
  plan_finish(p);
  exec_opts o = {.keep_trace = true};
  exec_result *r = exec_run(p, t, &o);
  /* A: issued once GPU 0 has (10 + 4 x 2 us); B: GPU 1 at 10 + 3 x 2 +
   * 10 + 2, GPU 2 at 10 + 2 + 10 + 2 (B waits for A's end anyway); the
   * kernel: GPU 2's host after B, + 7 us */
  double a_at = 18e-6, b_at = fmax(28e-6, a_at), k_at = 24e-6 + 7e-6;
  CU_ASSERT_CLOSE(r->step_s, fmax(b_at, k_at), 1e-6);
  bool seen_a = false;
  for (guint i = 0; i < r->spans->len; i++) {
    const exec_span *sp = &g_array_index(r->spans, exec_span, i);
    if (sp->comm && sp->step == 0) {
      CU_ASSERT_CLOSE(sp->t0_s, a_at, 1e-6);
      seen_a = true;
    }
  }
  CU_ASSERT(seen_a);
  exec_result_free(r);
  /* without the op cost every group costs its base only: the kernel is
   * issued at 10 + 10 + 7 us */
  t->p2p_op_host_s = 0;
  r = exec_run(p, t, &o);
  CU_ASSERT_CLOSE(r->step_s, 27e-6, 1e-6);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* Same inputs, same numbers, to the bit. */
static void t_deterministic(void) {
  topology *t = switch_topo(8, 80e9, 3e-6, 20e-6);
  for (size_t p = 0; p < 64; p++) t->route_cap_Bps[p] = 60e9;
  workload w = llama(8, 128 * 1024, true);
  plan *p = sched_tasp.build(&w, t, false);
  exec_opts o = {0};
  exec_result *a = exec_run(p, t, &o), *b = exec_run(p, t, &o);
  CU_ASSERT_EQUAL(memcmp(&a->step_s, &b->step_s, sizeof(double)), 0);
  CU_ASSERT_EQUAL(memcmp(a->chan_bytes, b->chan_bytes, a->n_chan * sizeof(double)), 0);
  CU_ASSERT_EQUAL(a->events, b->events);
  exec_result_free(a);
  exec_result_free(b);
  plan_free(p);
  topo_free(t);
}

/* Collectives, communication only: Ulysses forward is four all-to-alls one
 * after the other on the NCCL stream, each moving (n-1)/n of a tensor over
 * direct flows; the all-gather of all-gather CP is a ring of n-1 pipelined
 * steps, each paying the latency once, not held to the per-flow cap. */
static void t_collectives(void) {
  for (uint32_t n = 2; n <= 8; n *= 2) {
    double bw = 100e9, lat = 4e-6, launch = 20e-6;
    topology *t = switch_topo(n, bw, lat, launch);
    workload w = llama(n, 840 * 128, true);
    w.kv_heads = 32 / n < 8 ? 8 : 32 / n;
    exec_opts o = {.no_compute = true};
    double c = (double)w.seq_len / n, q = c * 32 * 128 * 2, kv = c * w.kv_heads * 128 * 2;
    /* with n peers a GPU's egress carries n-1 pieces of tensor/n at once */
    double want = 4 * launch + 4 * lat + (2 * q + 2 * kv) * (n - 1) / n / bw;
    plan *p = sched_ulysses.build(&w, t, false);
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_CLOSE(r->step_s, want, 1e-9);
    exec_result_free(r);
    plan_free(p);
    /* a per-flow cap below the port rate slows the all-to-all's flows
     * (when one peer carries a whole egress), never the ring's */
    for (uint32_t pr = 0; pr < n * n; pr++) t->route_cap_Bps[pr] = bw / 4;
    p = sched_allgather.build(&w, t, false);
    r = exec_run(p, t, &o);
    double shard = workload_kv_bytes(&w, c);
    CU_ASSERT_CLOSE(r->step_s, launch + (n - 1) * lat + (n - 1) * shard / bw, 1e-9);
    exec_result_free(r);
    plan_free(p);
    topo_free(t);
  }
}

/* Hand-built 2-GPU plans for the split of idle time.  GPU 0 runs a kernel
 * of L0 tokens, GPU 1 one of L1; GPU 0's second kernel needs what GPU 1
 * sends after its kernel (via=comm) or GPU 1's kernel itself (via=none).
 * GPU 0 finishes last: step = T1 + C + T0 (with the transfer C), of which
 * 2 T0 is GPU 0's compute, T1 - T0 (if positive) waiting on GPU 1's
 * compute, C on the transfer. */
static double kernel_s(const topology *t, const workload *w, double l) {
  return compute_attn_s(&t->compute,
                        compute_attn_flops(w->batch, w->heads, w->head_dim, l, l, false),
                        (double)w->batch * w->heads, w->head_dim, l, l, false, false);
}

static exec_result *two_gpu_run(const topology *t, const workload *w, uint64_t l0, uint64_t l1,
                                bool via_comm, double bytes) {
  plan *p = plan_new(2, false);
  plan_seg q0 = {0, l0}, q1 = {0, l1};
  plan_op shape = sched_shape(w, false, false);
  plan_attn(p, 0, 0, &shape, &q0, 1, &q0, 1);
  uint32_t a1 = plan_attn(p, 1, 0, &shape, &q1, 1, &q1, 1);
  uint32_t before = a1;
  if (via_comm) {
    uint32_t c = plan_comm(p, 0, COMM_P2P);
    plan_xfer_add(p, c, 1, 0, bytes);
    plan_dep(p, 0, c);
    plan_dep(p, a1, c);
    before = c;
  }
  uint32_t b0 = plan_attn(p, 0, 1, &shape, &q0, 1, &q0, 1);
  plan_dep(p, before, b0);
  plan_finish(p);
  exec_opts o = {0};
  exec_result *r = exec_run(p, t, &o);
  plan_free(p);
  return r;
}

static void t_imbalance_vs_exposed(void) {
  double bw = 100e9, lat = 4e-6, launch = 20e-6, bytes = 64e6;
  topology *t = switch_topo(2, bw, lat, launch);
  workload w = llama(2, 8192, false);
  double c = launch + bytes / bw + lat;
  double t0 = kernel_s(t, &w, 2048), t1 = kernel_s(t, &w, 4096); /* t1 ~ 4 t0 > 2 t0 */
  CU_ASSERT_TRUE_FATAL(t1 > 2 * t0);
  /* GPU 1 is the busiest, GPU 0 finishes last: the split is GPU 0's */
  exec_result *r = two_gpu_run(t, &w, 2048, 4096, true, bytes);
  CU_ASSERT_EQUAL(r->last_gpu, 0);
  CU_ASSERT_CLOSE(r->step_s, t1 + c + t0, 1e-9);
  CU_ASSERT_CLOSE(r->compute_s, t1, 1e-9);
  CU_ASSERT_CLOSE(r->imbalance_s, t1 - t0, 1e-9);
  CU_ASSERT_CLOSE(r->exposed_s, c, 1e-9);
  exec_result_free(r);
  /* GPU 1 done first: GPU 0 waits on the transfer only */
  r = two_gpu_run(t, &w, 4096, 2048, true, bytes);
  CU_ASSERT_CLOSE(r->step_s, 2 * t1 + c, 1e-9);  /* here t1 is GPU 0's kernel */
  CU_ASSERT_DOUBLE_EQUAL(r->imbalance_s, 0, 1e-15);
  CU_ASSERT_CLOSE(r->exposed_s, c, 1e-9);
  exec_result_free(r);
  /* waiting directly on GPU 1's kernel: all imbalance, nothing exposed */
  r = two_gpu_run(t, &w, 2048, 4096, false, 0);
  CU_ASSERT_CLOSE(r->step_s, t1 + t0, 1e-9);
  CU_ASSERT_CLOSE(r->imbalance_s, t1 - t0, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r->exposed_s, 0, 1e-12);
  exec_result_free(r);
  topo_free(t);
}

/* A chain across 3 GPUs: GPU 0's kernel A (4 ms, the late producer), its
 * result to GPU 1 (X1), GPU 1's kernel B (1 ms; `relay`: none, GPU 1
 * passes X1 on), B's result to GPU 2 (X2), GPU 2's kernel C1 (0.5 ms;
 * `tail`: none, GPU 2 ends on X2's arrival).  GPU 2 ran C0 (1 ms) at the
 * start and then waits for the whole chain.  Copies price kernels exactly
 * (copy_Bps, no fixed or host cost); every transfer takes c = launch +
 * bytes / bw + latency. */
static exec_result *chain_run(const topology *t, bool relay, bool tail) {
  double ms = 1e-3 * t->compute.copy_Bps; /* bytes a 1 ms copy moves */
  plan *p = plan_new(3, false);
  plan_copy(p, 0, 0, 4 * ms); /* A */
  plan_copy(p, 2, 0, 1 * ms); /* C0 */
  uint32_t x1 = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, x1, 0, 1, 1e6);
  plan_issue(p, x1, NULL, -1, false); /* after A */
  uint32_t before = x1;
  if (!relay) {
    before = plan_copy(p, 1, 1, 1 * ms); /* B */
    plan_dep(p, x1, before);
  }
  uint32_t x2 = plan_comm(p, 1, COMM_P2P);
  plan_xfer_add(p, x2, 1, 2, 1e6);
  plan_dep(p, before, x2);
  plan_issue(p, x2, NULL, -1, false); /* after B (or nothing) and C0 */
  if (!tail) {
    uint32_t c1 = plan_copy(p, 2, 2, 0.5 * ms);
    plan_dep(p, x2, c1);
  }
  plan_finish(p);
  exec_opts o = {0};
  exec_result *r = exec_run(p, t, &o);
  plan_free(p);
  return r;
}

/* The chain's wait on GPU 2 is the late producer's compute (A beyond C0,
 * then B): imbalance, whatever stands between, transfers included; the
 * transfers' own time is exposed.  A slow link leaves the imbalance as it
 * was and adds to the exposed time exactly what it adds to the step. */
static void t_chain_attribution(void) {
  double lat = 4e-6, launch = 20e-6;
  double step[2], exposed[2];
  for (int slow = 0; slow < 2; slow++) {
    double bw = slow ? 1e8 : 100e9; /* 1 MB: 10 us, or 10 ms */
    topology *t = switch_topo(3, bw, lat, launch);
    t->compute.copy_fixed_s = t->compute.copy_host_s = 0;
    double c = launch + 1e6 / bw + lat;
    /* A, X1, B, X2, C1: GPU 2 computes 1.5 ms of it */
    exec_result *r = chain_run(t, false, false);
    CU_ASSERT_EQUAL(r->last_gpu, 2);
    CU_ASSERT_CLOSE(r->step_s, 5.5e-3 + 2 * c, 1e-9);
    CU_ASSERT_CLOSE(r->gpu_compute_s[2], 1.5e-3, 1e-9);
    CU_ASSERT_CLOSE(r->imbalance_s, 4e-3, 1e-9);  /* (4 - 1) ms of A, 1 ms of B */
    CU_ASSERT_CLOSE(r->exposed_s, 2 * c, 1e-9);   /* X1 and X2 */
    CU_ASSERT_CLOSE(r->exposed_fixed_s, 2 * launch, 1e-9); /* their launches */
    CU_ASSERT_CLOSE(r->gpu_imbalance_s[2], r->imbalance_s, 1e-12);
    if (slow) { /* the wait is the link's */
      CU_ASSERT(r->exposed_s > r->imbalance_s);
    } else { /* the wait is A's and B's */
      CU_ASSERT(r->imbalance_s > 50 * r->exposed_s);
    }
    step[slow] = r->step_s;
    exposed[slow] = r->exposed_s;
    exec_result_free(r);
    /* GPU 1 passes X1 on at once: transfer -> transfer */
    r = chain_run(t, true, false);
    CU_ASSERT_EQUAL(r->last_gpu, 2);
    CU_ASSERT_CLOSE(r->step_s, 4.5e-3 + 2 * c, 1e-9);
    CU_ASSERT_CLOSE(r->imbalance_s, 3e-3, 1e-9);
    CU_ASSERT_CLOSE(r->exposed_s, 2 * c, 1e-9);
    exec_result_free(r);
    /* GPU 2 ends on X2's arrival, with no kernel after it (a backward's
     * dK/dV hand-off): its last wait is split the same way */
    r = chain_run(t, false, true);
    CU_ASSERT_CLOSE(r->gpu_finish_s[2], 5e-3 + 2 * c, 1e-9);
    CU_ASSERT_CLOSE(r->gpu_imbalance_s[2], 4e-3, 1e-9);
    /* GPU 1 finishes with it: its wait for X1 is A's 4 ms (imbalance),
     * then X1 and X2 are exposed */
    CU_ASSERT_CLOSE(r->step_s, 5e-3 + 2 * c, 1e-9);
    CU_ASSERT_CLOSE(r->imbalance_s, 4e-3, 1e-9);
    CU_ASSERT_CLOSE(r->exposed_s, 2 * c, 1e-9);
    exec_result_free(r);
    topo_free(t);
  }
  /* what a slower link costs is what exposed_s grew by */
  CU_ASSERT_CLOSE(step[1] - step[0], exposed[1] - exposed[0], 1e-9);
}

/* Exposed is what the network adds, not every transfer on the path: GPU 2
 * needs what GPU 0 (kernel of 4 ms) and GPU 1 (4.5 ms) send it.  GPU 0's
 * 1 MB over a 1 GB/s link arrives last, at 4 ms + c; without the
 * network's time GPU 2 would still wait for GPU 1's kernel until 4.5 ms:
 * only c - 0.5 ms is exposed, and the 4.5 ms less GPU 2's first kernel
 * are imbalance. */
static void t_exposed_beyond_hidden(void) {
  double lat = 4e-6, launch = 20e-6, bw = 1e9;
  topology *t = switch_topo(3, bw, lat, launch);
  t->compute.copy_fixed_s = t->compute.copy_host_s = 0;
  double ms = 1e-3 * t->compute.copy_Bps, c = launch + 1e6 / bw + lat;
  plan *p = plan_new(3, false);
  plan_copy(p, 0, 0, 4 * ms);
  plan_copy(p, 1, 0, 4.5 * ms);
  plan_copy(p, 2, 0, 0.25 * ms);
  uint32_t x0 = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, x0, 0, 2, 1e6);
  plan_issue(p, x0, NULL, -1, false);
  uint32_t x1 = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, x1, 1, 2, 1);
  plan_issue(p, x1, NULL, -1, false);
  uint32_t k = plan_copy(p, 2, 1, 0.5 * ms);
  plan_dep(p, x0, k);
  plan_dep(p, x1, k);
  plan_finish(p);
  exec_opts o = {0};
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_EQUAL(r->last_gpu, 2);
  /* (GPU 1's one byte shares GPU 2's port with GPU 0's flow for 1 ns) */
  CU_ASSERT_DOUBLE_EQUAL(r->step_s, 4.5e-3 + c, 1e-8);
  CU_ASSERT_DOUBLE_EQUAL(r->exposed_s, c - 0.5e-3, 1e-8);
  CU_ASSERT_CLOSE(r->imbalance_s, 4.25e-3, 1e-9);
  /* ... and that is what taking the network away saves */
  exec_opts free_comm = {.no_comm = true};
  exec_result *f = exec_run(p, t, &free_comm);
  CU_ASSERT_CLOSE(r->step_s - f->step_s, r->exposed_s, 1e-9);
  exec_result_free(f);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* The exposed time's parts: GPU 0 runs three 0.1 ms kernels that its
 * host takes 1 ms each to issue, then sends 1 MB to GPU 1 in a group its
 * host takes 0.5 ms to issue (launch 20 us, flight 1e6 / bw + latency),
 * and GPU 1 runs a 0.1 ms kernel on it.  Without the network's time the
 * step is 0.4 ms (GPU 1 waits 0.3 ms on GPU 0's kernels: imbalance); with
 * kernel issue, 3.2 ms (2.8 ms host); with group issue and launch too,
 * 3.62 ms (0.42 ms fixed); the flight is the 14 us left. */
static void t_exposed_parts(void) {
  double lat = 4e-6, launch = 20e-6, bw = 100e9;
  topology *t = switch_topo(2, bw, lat, launch);
  t->compute.copy_fixed_s = 0;
  t->compute.copy_host_s = 1e-3;
  t->p2p_host_s = 0.5e-3;
  t->p2p_op_host_s = t->p2p_msg_s = 0;
  double k = 0.1e-3 * t->compute.copy_Bps, flight = 1e6 / bw + lat;
  plan *p = plan_new(2, false);
  for (int i = 0; i < 3; i++) plan_copy(p, 0, 0, k);
  uint32_t x = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, x, 0, 1, 1e6);
  plan_issue(p, x, NULL, -1, false);
  plan_dep(p, x, plan_copy(p, 1, 1, k));
  plan_finish(p);
  exec_opts o = {0};
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_EQUAL(r->last_gpu, 1);
  CU_ASSERT_CLOSE(r->step_s, 3.6e-3 + launch + flight, 1e-9);
  CU_ASSERT_CLOSE(r->imbalance_s, 0.3e-3, 1e-9);
  CU_ASSERT_CLOSE(r->exposed_s, 3.2e-3 + launch + flight, 1e-9);
  CU_ASSERT_CLOSE(r->exposed_host_s, 2.8e-3, 1e-9);
  CU_ASSERT_CLOSE(r->exposed_fixed_s, 0.4e-3 + launch, 1e-9);
  CU_ASSERT_CLOSE(r->exposed_s - r->exposed_host_s - r->exposed_fixed_s, flight, 1e-6);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* A group whose transfers alternate between two kinds (1 and 2 MB, each
 * GPU to the one 4 ahead) starts one bundle per kind, whatever their
 * order (exec_comm.c sort_kinds groups runs of alike transfers, then the
 * runs by kind), and moves what every flow on its own moves. */
static void t_group_kinds_interleaved(void) {
  double bw = 100e9, lat = 4e-6;
  topology *t = switch_topo(8, bw, lat, 20e-6);
  exec_result *r[2];
  for (int reference = 0; reference < 2; reference++) {
    plan *p = plan_new(8, false);
    uint32_t x = plan_comm(p, 0, COMM_P2P);
    for (uint32_t g = 0; g < 8; g++) plan_xfer_add(p, x, g, (g + 4) % 8, g % 2 ? 2e6 : 1e6);
    plan_finish(p);
    exec_opts o = {.per_flow = reference};
    r[reference] = exec_run(p, t, &o);
    plan_free(p);
  }
  CU_ASSERT_EQUAL(r[0]->flows, 8);
  CU_ASSERT_EQUAL(r[0]->bundles, 2);
  CU_ASSERT_EQUAL(r[1]->bundles, 8);
  CU_ASSERT_CLOSE(r[0]->step_s, r[1]->step_s, 1e-12);
  CU_ASSERT_CLOSE(r[0]->step_s, 20e-6 + 2e6 / bw + lat, 1e-9);
  for (uint32_t c = 0; c < r[0]->n_chan; c++)
    CU_ASSERT_CLOSE(r[0]->chan_bytes[c], r[1]->chan_bytes[c], 1e-12);
  exec_result_free(r[0]);
  exec_result_free(r[1]);
  topo_free(t);
}

/* The verdict reads the split: a hand-made result on 2 GPUs (step 10 ms,
 * GPU 1 finishing last with `c1` ms of compute, GPU 0 `c0`), its exposed
 * time in parts, channel 0 (kind port) carrying `bytes`. */
static char *reason_of(const topology *t, double step, double c0, double c1, double imb,
                       double host, double fixed, double flight, double comm, double bytes) {
  exec_result *x = exec_result_new(2, t->channels->len, false);
  x->step_s = step * 1e-3;
  x->gpu_compute_s[0] = c0 * 1e-3;
  x->gpu_compute_s[1] = x->compute_s = c1 * 1e-3;
  if (c0 > c1) x->compute_s = c0 * 1e-3;
  x->last_gpu = 1;
  x->imbalance_s = imb * 1e-3;
  x->exposed_host_s = host * 1e-3;
  x->exposed_fixed_s = fixed * 1e-3;
  x->exposed_s = (host + fixed + flight) * 1e-3;
  x->comm_s = comm * 1e-3;
  x->chan_bytes[0] = bytes;
  sim_result r = {.pt = {.sched = &sched_ring}, .r = x};
  char *why = verdict_reason(t, &r, NULL);
  exec_result_free(x);
  return why;
}

static void t_verdict_classes(void) {
  topology *t = switch_topo(2, 100e9, 0, 0);
  struct {
    double step, c0, c1, imb, host, fixed, flight, comm, bytes;
    const char *want;
  } cases[] = {
      {10, 9.5, 9.5, 0, 0.1, 0.1, 0.3, 5, 1e6, "compute-bound: communication hidden"},
      {10, 9.5, 9.5, 0, 0.5, 0, 0, 0, 0, "compute-bound: no communication"},
      /* GPU 0 computes twice GPU 1's: uneven work */
      {10, 8, 4, 4, 0.5, 0.5, 1, 5, 1e6, "load imbalance: busiest GPU computes 1.33x the mean"},
      /* as much work everywhere, waits on others' compute: a chain */
      {10, 5, 5, 4, 0.5, 0.5, 0, 5, 1e6, "serialized: 40% of the step waiting on other GPUs' "
                                         "compute in turn (busiest GPU computes 1.00x the mean)"},
      {10, 5, 5, 1, 0.5, 0.5, 3, 5, 1e6, "communication-bound on port: 40% of the step exposed"},
      {10, 5, 5, 1, 0.5, 2, 1.5, 5, 1e6,
       "communication-bound on launch and issue costs: 40% of the step exposed"},
      /* transfers that moved no bytes cost their launch only */
      {10, 5, 5, 1, 0.5, 1, 2.5, 5, 0,
       "communication-bound on launch and issue costs: 40% of the step exposed"},
      {10, 5, 5, 1, 2, 1, 1, 5, 1e6, "host-bound: 20% of the step waiting on kernel issue"},
      /* no transfer in flight: exposed time is kernel issue, whatever the parts say */
      {10, 5, 5, 1, 0, 0, 4, 0, 0, "host-bound: 40% of the step waiting on kernel issue"},
      {0, 0, 0, 0, 0, 0, 0, 0, 0, "no time: nothing to do"},
  };
  for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
    g_autofree char *why = reason_of(t, cases[i].step, cases[i].c0, cases[i].c1, cases[i].imb,
                                     cases[i].host, cases[i].fixed, cases[i].flight,
                                     cases[i].comm, cases[i].bytes);
    CU_ASSERT_STRING_EQUAL(why, cases[i].want);
  }
  /* speedups of steps of no time: alike, or infinitely faster; never 0 */
  CU_ASSERT_DOUBLE_EQUAL(sim_speedup(0, 0), 1, 0);
  CU_ASSERT(isinf(sim_speedup(2e-3, 0)));
  CU_ASSERT_DOUBLE_EQUAL(sim_speedup(3e-3, 2e-3), 1.5, 1e-12);
  topo_free(t);
}

static workload linear(uint32_t n, uint64_t seq, bool causal, pass_kind pass) {
  workload w = llama(n, seq, causal);
  w.kv_heads = 32;
  w.attention = ATTN_LINEAR;
  w.linear_block = 64;
  w.pass = pass;
  return w;
}

/* LASP's chain, communication only: the running float32 state (B·H·D·D·4
 * bytes) goes from GPU to GPU, each hop after the one before: (n-1) x
 * (launch + state/bw + latency) causal, forward or backward; two laps,
 * 2(n-1) hops, bidirectional. */
static void t_lasp_chain(void) {
  for (uint32_t n = 2; n <= 8; n++) {
    double bw = 100e9, lat = 4e-6, launch = 20e-6;
    topology *t = switch_topo(n, bw, lat, launch);
    exec_opts o = {.no_compute = true};
    for (int c = 0; c < 2; c++)
      for (int pass = PASS_FWD; pass <= PASS_BWD; pass++) {
        workload w = linear(n, 840 * 128, c, (pass_kind)pass);
        double Z = 4.0 * 32 * 128 * 128;
        CU_ASSERT_DOUBLE_EQUAL(workload_state_bytes(&w), Z, 0);
        plan *p = sched_lasp.build(&w, t, false);
        exec_result *r = exec_run(p, t, &o);
        double hops = c ? n - 1 : 2 * (n - 1);
        CU_ASSERT_CLOSE(r->step_s, hops * (launch + Z / bw + lat), 1e-9);
        exec_result_free(r);
        plan_free(p);
      }
    topo_free(t);
  }
}

/* LASP-2, communication only: one all-gather of the states, NCCL's ring:
 * launch + (n-1) x (latency + state/bw) per pass. */
static void t_lasp2_gather(void) {
  for (uint32_t n = 2; n <= 8; n++) {
    double bw = 100e9, lat = 4e-6, launch = 20e-6, Z = 4.0 * 32 * 128 * 128;
    topology *t = switch_topo(n, bw, lat, launch);
    exec_opts o = {.no_compute = true};
    workload w = linear(n, 840 * 128, true, PASS_FWD);
    plan *p = sched_lasp2.build(&w, t, false);
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_CLOSE(r->step_s, launch + (n - 1) * (lat + Z / bw), 1e-9);
    exec_result_free(r);
    plan_free(p);
    topo_free(t);
  }
}

/* Compute only, causal forward: LASP serialises the applies (each GPU
 * applies the running state, adds its own and hands it on), LASP-2 does
 * not (every GPU sums the gathered states at once): the last GPU ends at
 * state + intra + (n-1) x (apply) + (n-2) x (add of two states) under
 * LASP, at state + intra + sum of n-1 states + apply under LASP-2. */
static void t_lasp_compute_chain(void) {
  uint32_t n = 8;
  topology *t = switch_topo(n, 100e9, 0, 0);
  t->compute.copy_host_s = 0;
  workload w = linear(n, 256 * 1024, true, PASS_FWD);
  double c = (double)w.seq_len / n, Z = workload_state_bytes(&w);
  plan_op op = {.batch = 1, .heads = 32, .head_dim = 128, .elem_bytes = 2, .block = 64,
                .sq = c, .sk = c};
  op.kind = OP_LIN_STATE;
  double st = compute_op_s(&t->compute, &op);
  op.kind = OP_LIN_APPLY;
  op.into = true; /* into the intra-chunk output */
  double ap = compute_op_s(&t->compute, &op);
  op.into = false;
  op.kind = OP_LIN_INTRA;
  op.causal = true;
  double in = compute_op_s(&t->compute, &op);
  double add2 = t->compute.copy_fixed_s + 1.5 * Z / t->compute.copy_Bps;
  double sum7 = t->compute.copy_fixed_s + 4.0 * Z / t->compute.copy_Bps;
  exec_opts o = {.no_comm = true};
  plan *p = sched_lasp.build(&w, t, false);
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_CLOSE(r->step_s, st + in + (n - 1) * ap + (n - 2) * add2, 1e-9);
  exec_result_free(r);
  plan_free(p);
  p = sched_lasp2.build(&w, t, false);
  r = exec_run(p, t, &o);
  /* GPU 7 also keeps a copy of its prefix state for backward */
  double keep = t->compute.copy_fixed_s + Z / t->compute.copy_Bps;
  CU_ASSERT_CLOSE(r->step_s, st + in + sum7 + keep + ap, 1e-9);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* compute.comm_slowdown: a copy of d seconds alone on GPU 0 starts with a
 * transfer 0 -> 1 of x < d seconds; while the transfer runs it progresses
 * at 1 - s, so it ends at x + (d - (1 - s) x).  Two transfers in a row
 * (the second after the first) slow it the same way; without the
 * slowdown it ends at d; a copy that starts after the transfer is not
 * slowed. */
static void t_comm_slowdown(void) {
  topology *t = switch_topo(2, 100e9, 0, 0);
  t->compute.copy_fixed_s = 0;
  t->compute.copy_host_s = 0;
  double bw = 100e9, x = 1e-3, d = 3e-3, s = 0.35;
  for (int slow = 0; slow < 2; slow++) {
    t->compute.comm_slowdown = slow ? s : 0;
    plan *p = plan_new(2, false);
    uint32_t g = plan_comm(p, 0, COMM_P2P);
    plan_xfer_add(p, g, 0, 1, x * bw);
    plan_copy(p, 0, 0, d * t->compute.copy_Bps);
    uint32_t late = plan_copy(p, 1, 0, d * t->compute.copy_Bps);
    plan_dep(p, g, late);
    plan_finish(p);
    exec_opts o = {.keep_trace = true};
    exec_result *r = exec_run(p, t, &o);
    double want0 = slow ? x + (d - (1 - s) * x) : d, want1 = x + d;
    CU_ASSERT_CLOSE(r->gpu_finish_s[0], want0, 1e-9);
    CU_ASSERT_CLOSE(r->gpu_finish_s[1], want1, 1e-9);
    CU_ASSERT_CLOSE(r->step_s, fmax(want0, want1), 1e-9);
    exec_result_free(r);
    plan_free(p);
  }
  /* the transfer outlasts the copy: slowed the whole way, d / (1 - s) */
  t->compute.comm_slowdown = s;
  plan *p = plan_new(2, false);
  uint32_t g = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, g, 0, 1, 10 * d * bw);
  plan_copy(p, 0, 0, d * t->compute.copy_Bps);
  plan_finish(p);
  exec_opts o = {0};
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_CLOSE(r->gpu_compute_s[0], d, 1e-12);
  CU_ASSERT_CLOSE(r->step_s, 10 * d, 1e-9);
  double span = 0;
  exec_result_free(r);
  o.keep_trace = true;
  r = exec_run(p, t, &o);
  for (guint i = 0; i < r->spans->len; i++) {
    exec_span *sp = &g_array_index(r->spans, exec_span, i);
    if (!sp->comm) span = sp->t1_s - sp->t0_s;
  }
  CU_ASSERT_CLOSE(span, d / (1 - s), 1e-9);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* Lockstep: a plan whose pattern gives GPUs different host costs (GPU 0
 * in two pairs, the others in one) cannot issue the next lockstep kernel
 * at once on every GPU; exec must run the plan it stands for, task by
 * task, and so match it exactly.  With equal costs it stays lockstep
 * (fewer tasks) and still matches. */
static void t_lockstep_expand(void) {
  topology *t = switch_topo(3, 100e9, 2e-6, 5e-6);
  t->p2p_host_s = 10e-6;
  t->compute.launch_s = 0;
  for (int uneven = 0; uneven < 2; uneven++) {
    t->p2p_op_host_s = uneven ? 40e-6 : 0;
    plan *p = plan_new(3, false);
    plan_pair pairs[] = {{0, 1}, {0, 2}};
    uint32_t pat = plan_pattern(p, pairs, 2);
    plan_op op = {.kind = OP_COPY, .bytes = 1e6};
    plan_compute(p, PLAN_ALL, 0, &op);
    uint32_t c = plan_comm(p, 0, COMM_P2P);
    plan_xfer_pattern(p, c, pat, 1e6, 1);
    plan_issue(p, c, NULL, -1, false);
    plan_compute(p, PLAN_ALL, 1, &op);  /* after the group's issue on each host */
    plan_finish(p);
    plan *q = plan_expand(p);
    CU_ASSERT_EQUAL(q->tasks->len, 2 * 3 + 1);
    CU_ASSERT_EQUAL(plan_task_at(q, 3)->n_xfer, 2);
    exec_opts o = {.keep_trace = true};
    exec_result *a = exec_run(p, t, &o), *b = exec_run(q, t, &o);
    CU_ASSERT_EQUAL(a->tasks, uneven ? q->tasks->len : p->tasks->len);
    CU_ASSERT_CLOSE(a->step_s, b->step_s, 1e-12);
    for (uint32_t g = 0; g < 3; g++) {
      CU_ASSERT_CLOSE(a->gpu_finish_s[g], b->gpu_finish_s[g], 1e-12);
      CU_ASSERT_CLOSE(a->gpu_compute_s[g], b->gpu_compute_s[g], 1e-12);
    }
    for (uint32_t ch = 0; ch < a->n_chan; ch++) CU_ASSERT_CLOSE(a->chan_bytes[ch], b->chan_bytes[ch], 1e-12);
    /* the uneven host costs do show: GPU 0 issues the second kernel later */
    double at[3] = {0};
    for (guint i = 0; i < b->spans->len; i++) {
      const exec_span *sp = &g_array_index(b->spans, exec_span, i);
      if (!sp->comm && sp->step == 1) at[sp->gpu] = sp->t0_s;
    }
    CU_ASSERT(uneven ? at[0] > at[1] + 30e-6 : at[0] == at[1]);
    CU_ASSERT_DOUBLE_EQUAL(at[1], at[2], 1e-15);
    exec_result_free(a);
    exec_result_free(b);
    plan_free(q);
    plan_free(p);
  }
  topo_free(t);
}

/* no_comm: a task that adds in what a transfer brought is not run (no
 * time, no host cost); with communication it costs its full price. */
static void t_no_comm_arrival(void) {
  topology *t = switch_topo(2, 100e9, 2e-6, 5e-6);
  t->compute.copy_host_s = 4e-6;
  for (int flag = 0; flag < 2; flag++) {
    plan *p = plan_new(2, false);
    uint32_t c = plan_comm(p, 0, COMM_P2P);
    plan_xfer_add(p, c, 0, 1, 1e6);
    plan_issue(p, c, NULL, -1, false);
    uint32_t k = plan_copy(p, 1, 0, 1e9);
    plan_task_at(p, k)->on_arrival = flag;
    plan_dep(p, c, k);
    plan_finish(p);
    exec_opts with = {0}, without = {.no_comm = true};
    exec_result *a = exec_run(p, t, &with), *b = exec_run(p, t, &without);
    double copy = compute_op_s(&t->compute, &plan_task_at(p, k)->op);
    CU_ASSERT(copy > 1e-4);
    CU_ASSERT(a->step_s > copy);
    if (flag) {
      CU_ASSERT_DOUBLE_EQUAL(b->step_s, 0, 1e-15);
    } else {
      CU_ASSERT_CLOSE(b->step_s, t->compute.copy_host_s + copy, 1e-9);
    }
    exec_result_free(a);
    exec_result_free(b);
    plan_free(p);
  }
  topo_free(t);
}

/* A call whose time alone is measured (compute_op_alone_s: a linear
 * state here, 20 us of host work, 40 us of GPU work, 50 us alone) starts
 * when its host begins it and ends no earlier than that plus its time
 * alone: one call on an idle GPU takes its time alone (50 us, not 20 + 40);
 * a second, issued from 20 us, queues behind the first (50 + 40 us) and
 * would end at its host start + 50 us = 70 us if the GPU were idle; a
 * third that the host issues from 40 us behind a long copy ends 40 us
 * after the copy. */
static void t_call_alone(void) {
  topology *t = switch_topo(2, 100e9, 0, 0);
  compute_model_clear(&t->compute);
  g_autoptr(json_object) m = json_tokener_parse(
      "{\"model\": \"roofline\", \"peak_tflops\": 100, \"linear_host_us\": {\"state\": 20}, "
      "\"copy_GBps\": 1000, \"copy_fixed_us\": 0, \"copy_host_us\": 0, \"linear_table\": ["
      "{\"kind\": \"state\", \"heads\": 2, \"head_dim\": 128, \"tokens\": 4096, "
      "\"fwd_ms\": 0.05, \"bwd_ms\": 0.1, \"gpu_fwd_ms\": 0.04, \"gpu_bwd_ms\": 0.08}]}");
  g_autoptr(GError) err = NULL;
  compute_model_init(&t->compute);
  CU_ASSERT_TRUE_FATAL(
      compute_model_parse(m, (json_where){"t.json", "compute", NULL}, &t->compute, &err));
  plan_op op = {.kind = OP_LIN_STATE, .batch = 1, .heads = 2, .head_dim = 128,
                .elem_bytes = 2, .block = 64, .sq = 4096, .sk = 4096};
  double want[] = {50e-6, 90e-6};
  for (uint32_t calls = 1; calls <= 2; calls++) {
    plan *p = plan_new(2, false);
    for (uint32_t c = 0; c < calls; c++) plan_compute(p, 0, 0, &op);
    plan_finish(p);
    exec_opts o = {0};
    exec_result *r = exec_run(p, t, &o);
    CU_ASSERT_CLOSE(r->step_s, want[calls - 1], 1e-9);
    CU_ASSERT_CLOSE(r->gpu_compute_s[0], calls * 40e-6, 1e-9);
    exec_result_free(r);
    plan_free(p);
  }
  plan *p = plan_new(2, false);
  plan_copy(p, 0, 0, 1e9); /* 1 ms at 1000 GB/s, issued at once */
  plan_compute(p, 0, 0, &op);
  plan_finish(p);
  exec_opts o = {0};
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_CLOSE(r->step_s, 1e-3 + 40e-6, 1e-9);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* plan_issue_at (through plan_overlap): a group placed after a
 * kernel in the plan but issued by the host before it costs the host first, so the kernel is issued after
 * the group's host cost; plan_expand keeps the place, as the expanded
 * task. */
static void t_issue_at(void) {
  topology *t = switch_topo(2, 100e9, 0, 0);
  t->p2p_host_s = 30e-6;
  t->p2p_op_host_s = 0;
  t->compute.copy_host_s = 10e-6;
  for (int early = 0; early < 2; early++) {
    plan *p = plan_new(2, false);
    uint32_t k = plan_copy(p, PLAN_ALL, 0, 1e3);
    uint32_t g = plan_comm(p, 0, COMM_P2P);
    plan_xfer_add(p, g, 0, 1, 1e3);
    plan_issue(p, g, NULL, -1, false);
    plan_dep(p, k, g);
    if (early) { /* as a group waiting for blocking kernels is placed */
      g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
      g_array_append_val(ids, k);
      plan_overlap(p, ids, g);
      CU_ASSERT_EQUAL(plan_task_at(p, g)->host_at, k);
    }
    plan_finish(p);
    exec_opts o = {.keep_trace = true};
    exec_result *r = exec_run(p, t, &o);
    double kernel_at = -1, group_at = -1;
    for (guint i = 0; i < r->spans->len; i++) {
      const exec_span *sp = &g_array_index(r->spans, exec_span, i);
      if (sp->comm) group_at = sp->t0_s;
      else if (sp->gpu == 0) kernel_at = sp->t0_s;
    }
    CU_ASSERT_CLOSE(kernel_at, early ? 40e-6 : 10e-6, 1e-9);
    /* the group waits for the kernel either way (its dependency) */
    CU_ASSERT(group_at >= kernel_at + compute_op_s(&t->compute, &plan_task_at(p, k)->op) - 1e-12);
    exec_result_free(r);
    plan *q = plan_expand(p);
    CU_ASSERT_EQUAL(q->tasks->len, 3);
    CU_ASSERT_EQUAL(plan_task_at(q, 2)->host_at, early ? 0 : PLAN_IN_PLACE);
    plan_free(q);
    plan_free(p);
  }
  topo_free(t);
}

/* Alone (exec_opts.alone): the program without its communication calls,
 * where a GPU waits on no other; without communication (no_comm) a GPU
 * still waits for the data it needs. */
static void t_alone(void) {
  topology *t = switch_topo(2, 100e9, 0, 0);
  t->compute.copy_host_s = 0;
  t->compute.copy_fixed_s = 0;
  plan *p = plan_new(2, false);
  plan_copy(p, 0, 0, 1e-3 * t->compute.copy_Bps);
  uint32_t g = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, g, 0, 1, 1e6);
  plan_issue(p, g, NULL, -1, false);
  uint32_t k = plan_copy(p, 1, 1, 1e-3 * t->compute.copy_Bps);
  plan_dep(p, g, k);
  plan_finish(p);
  exec_opts free_comm = {.no_comm = true}, alone = {.no_comm = true, .alone = true};
  exec_result *a = exec_run(p, t, &free_comm), *b = exec_run(p, t, &alone);
  CU_ASSERT_CLOSE(a->step_s, 2e-3, 1e-9);
  CU_ASSERT_CLOSE(a->imbalance_s, 1e-3, 1e-9);
  CU_ASSERT_CLOSE(b->step_s, 1e-3, 1e-9);
  CU_ASSERT_CLOSE(b->gpu_finish_s[1], 1e-3, 1e-9);
  exec_result_free(a);
  exec_result_free(b);
  plan_free(p);
  topo_free(t);
}

/* Progress: every task counted by the end, the events published are the
 * run's; the line's fraction and time left. */
static void t_progress(void) {
  topology *t = switch_topo(4, 100e9, 2e-6, 5e-6);
  workload w = llama(4, 4 * 1024, true);
  plan *p = sched_ring.build(&w, t, false);
  exec_progress pr = {0};
  exec_opts o = {.progress = &pr};
  exec_result *r = exec_run(p, t, &o);
  CU_ASSERT_EQUAL(pr.total, (gint)p->tasks->len);
  CU_ASSERT_EQUAL(pr.done, pr.total);
  CU_ASSERT_EQUAL(pr.events, r->events);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
  g_autoptr(GString) l = g_string_new(NULL);
  sim_progress_format(l, 1, 4, 0.25, 2.5e6, 10);
  CU_ASSERT_STRING_EQUAL(l->str, "tasp-sim: 1/4 points, 25%, 2.5e+06 events, ETA 30 s");
  sim_progress_format(l, 0, 1, 0.1, 1e3, 20);
  CU_ASSERT_STRING_EQUAL(l->str, "tasp-sim: 0/1 points, 10%, 1e+03 events, ETA 3 min 00 s");
  sim_progress_format(l, 2, 2, 1, 5, 20);
  CU_ASSERT_STRING_EQUAL(l->str, "tasp-sim: 2/2 points, 100%, 5 events");
}

int main(void) {
  static const test_case cases[] = {TEST(t_comm_only_ring), TEST(t_comm_only_tasp_vs_cap), TEST(t_flow_rate_by_size),
                                    TEST(t_compute_only_sum), TEST(t_price_memo), TEST(t_overlap_bounds),
                                    TEST(t_host_issue), TEST(t_host_issue_per_op), TEST(t_deterministic),
                                    TEST(t_p2p_message_cost), TEST(t_collectives),
                                    TEST(t_imbalance_vs_exposed), TEST(t_chain_attribution), TEST(t_exposed_beyond_hidden), TEST(t_exposed_parts), TEST(t_group_kinds_interleaved), TEST(t_verdict_classes), TEST(t_lasp_chain),
                                    TEST(t_lasp2_gather), TEST(t_lasp_compute_chain),
                                    TEST(t_comm_slowdown), TEST(t_lockstep_expand),
                                    TEST(t_progress), TEST(t_no_comm_arrival), TEST(t_call_alone),
                                    TEST(t_issue_at), TEST(t_alone), {NULL, NULL}};
  return test_run("exec", cases);
}
