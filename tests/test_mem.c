/* exec_mem and plan_buf: live bytes per GPU through a replay.  Rules
 * (allocated at the first use, freed after the last, kept ones never),
 * what makes a plan's declarations wrong, a peak that moves when a
 * transfer is delayed, and closed-form peaks of schedulers. */
#include "compute.h"
#include "exec.h"
#include "plan_buf.h"
#include "sched/sched.h"
#include "sched/ulysses.h"
#include "testutil.h"

#include <string.h>

/* Per GPU an egress and an ingress channel of bw bytes/s; copies at
 * 1e12 bytes/s. */
static topology *switch_topo(uint32_t n, double bw) {
  topology *t = topo_new("ideal", n);
  for (uint32_t g = 0; g < n; g++) {
    topo_add_channel(t, "tx", "port", bw, 1e-6);
    topo_add_channel(t, "rx", "port", bw, 1e-6);
  }
  topo_routes_begin(t);
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t d = 0; d < n; d++) {
      uint32_t r[2] = {2 * s, 2 * d + 1};
      topo_route(t, s, d, r, s == d ? 0 : 2, 0);
      t->direct[s * n + d] = s != d;
    }
  topo_routes_done(t);
  t->compute.peak_flops = 100e12;
  t->compute.efficiency = 0.5;
  t->compute.copy_Bps = 1e12;
  return t;
}

static exec_result *run(const plan *p, const topology *t, bool trace) {
  exec_opts o = {.keep_trace = trace};
  return exec_run(p, t, &o);
}

/* Bytes of the buffers named `name` live at GPU g's peak (0: none). */
static double live_at_peak(const exec_result *r, uint32_t g, const char *name, uint32_t *count) {
  for (guint i = 0; i < r->peak_live->len; i++) {
    const exec_mem_live *l = &g_array_index(r->peak_live, exec_mem_live, i);
    if (l->gpu == g && strcmp(l->name, name) == 0) {
      if (count) *count = l->count;
      return l->bytes;
    }
  }
  if (count) *count = 0;
  return 0;
}

/* A buffer lives from its first use's start to its last use's end: two
 * copies on GPU 0 in a row, a buffer written by the first and read by the
 * second, another written by the second only (freed at its end): the
 * peak is both, at the second copy; an input is live throughout and kept;
 * a kept output stays. */
static void t_lifetimes(void) {
  topology *t = switch_topo(1, 1e9);
  plan *p = plan_new(1, false);
  uint32_t in = plan_buf_input(p, 0, 10, "in");
  uint32_t a = plan_copy(p, 0, 0, 1e6), b = plan_copy(p, 0, 0, 1e6), c = plan_copy(p, 0, 0, 1e6);
  uint32_t x = plan_buf_out(p, a, 100, "x");
  plan_buf_reads(p, b, x);
  plan_buf_reads(p, a, in);
  plan_buf_out(p, b, 1000, "y");
  uint32_t kept = plan_buf_out(p, c, 5, "kept");
  plan_buf_keep(p, kept);
  plan_finish(p);
  exec_result *r = run(p, t, true);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  CU_ASSERT_DOUBLE_EQUAL(r->peak_bytes, 10 + 100 + 1000, 0);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "x", NULL), 100, 0);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "y", NULL), 1000, 0);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "kept", NULL), 0, 0);
  /* largest first */
  CU_ASSERT_STRING_EQUAL(g_array_index(r->peak_live, exec_mem_live, 0).name, "y");
  /* the trace ends with what is handed on: the input and the kept output */
  const exec_mem_sample *last = &g_array_index(r->mem, exec_mem_sample, r->mem->len - 1);
  CU_ASSERT_DOUBLE_EQUAL(last->bytes, 15, 0);
  /* x is freed when b ends (as y is), not when a, its writer, ends */
  double x_at = -1, y_at = -2, both_at = -3;
  for (guint i = 1; i < r->mem->len; i++) {
    const exec_mem_sample *s = &g_array_index(r->mem, exec_mem_sample, i);
    double change = s->bytes - g_array_index(r->mem, exec_mem_sample, i - 1).bytes;
    if (change == -100) x_at = s->t_s;
    if (change == -1000) y_at = s->t_s;
    if (s->bytes == 1110) both_at = s->t_s;
  }
  CU_ASSERT_DOUBLE_EQUAL(x_at, y_at, 0);
  CU_ASSERT_TRUE(x_at > both_at && both_at > 0);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* What a wrong declaration looks like: a buffer read before anything
 * wrote it, a buffer never used, each counted. */
static void t_errors(void) {
  topology *t = switch_topo(1, 1e9);
  plan *p = plan_new(1, false);
  uint32_t a = plan_copy(p, 0, 0, 1e6), b = plan_copy(p, 0, 0, 1e6);
  uint32_t x = plan_buf_new(p, 0, 100, "x");
  plan_buf_reads(p, a, x); /* read first, */
  plan_buf_writes(p, b, x); /* written after */
  plan_buf_new(p, 0, 7, "unused");
  plan_finish(p);
  exec_result *r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 2);
  exec_result_free(r);
  plan_free(p);
  /* a task may read what it writes (an accumulator) */
  p = plan_new(1, false);
  a = plan_copy(p, 0, 0, 1e6);
  x = plan_buf_new(p, 0, 100, "acc");
  plan_buf_reads(p, a, x);
  plan_buf_writes(p, a, x);
  plan_finish(p);
  r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* The peak moves when a transfer is delayed: GPU 1 receives r1 from GPU 0
 * (read by a copy once here) and, after a 10 us copy on GPU 2, r2 from GPU
 * 2.  On fast links r1 is here and used before r2 arrives: the peak is one
 * buffer.  On slow links r1 is still in flight when r2 is allocated: both
 * are live at once, and the peak is both. */
static double delayed_peak(double bw, uint32_t *both) {
  topology *t = switch_topo(3, bw);
  plan *p = plan_new(3, false);
  uint32_t g1 = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, g1, 0, 1, 1e6);
  plan_issue(p, g1, NULL, -1, false);
  uint32_t r1 = plan_buf_new(p, 1, 1000, "r1");
  plan_buf_writes(p, g1, r1);
  plan_copy(p, 2, 0, 1e7); /* 10 us */
  int64_t issued[3];
  plan_issued(p, issued); /* g2 waits for that copy, not for use1 */
  uint32_t use1 = plan_copy(p, 1, 0, 1e3);
  plan_dep(p, g1, use1);
  plan_buf_reads(p, use1, r1);
  uint32_t g2 = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, g2, 2, 1, 1e3);
  plan_issue(p, g2, issued, -1, false);
  uint32_t r2 = plan_buf_new(p, 1, 1000, "r2");
  plan_buf_writes(p, g2, r2);
  uint32_t use2 = plan_copy(p, 1, 0, 1e3);
  plan_dep(p, g2, use2);
  plan_buf_reads(p, use2, r2);
  plan_finish(p);
  exec_result *r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  double peak = r->gpu_peak_bytes[1];
  *both = (live_at_peak(r, 1, "r1", NULL) > 0) + (live_at_peak(r, 1, "r2", NULL) > 0);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
  return peak;
}

static void t_delayed_transfer(void) {
  uint32_t both;
  CU_ASSERT_DOUBLE_EQUAL(delayed_peak(1e12, &both), 1000, 0); /* 1 us flight */
  CU_ASSERT_EQUAL(both, 1);
  CU_ASSERT_DOUBLE_EQUAL(delayed_peak(1e10, &both), 2000, 0); /* 100 us flight */
  CU_ASSERT_EQUAL(both, 2);
}

static workload llama(uint32_t n, uint64_t seq, bool causal, pass_kind pass) {
  workload w = {.gpus = n, .seq_len = seq, .batch = 1, .heads = 32, .kv_heads = 8,
                .head_dim = 128, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                .causal = causal, .pass = pass};
  return w;
}

static exec_result *run_sched(const sched_ops *s, const workload *w, const topology *t) {
  plan *p = s->build(w, t, false);
  exec_result *r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  plan_free(p);
  return r;
}

/* All-gather CP holds the whole sequence's K and V on every GPU: at a
 * full-mask forward's peak (its kernel) each GPU holds its q, k, v, the
 * gathered K and V (2·B·S·Hkv·D·e), and what the kernel writes: the
 * output and its float32 log-sum-exp. */
static void t_allgather_peak(void) {
  for (uint32_t n = 2; n <= 8; n *= 2) {
    topology *t = switch_topo(n, 100e9);
    workload w = llama(n, 8192, false, PASS_FWD);
    exec_result *r = run_sched(&sched_allgather, &w, t);
    double c = 8192.0 / n, q = c * 32 * 128 * 2, kv = 2 * c * 8 * 128 * 2;
    double whole = 2.0 * 8192 * 8 * 128 * 2, lse = 4.0 * c * 32;
    for (uint32_t g = 0; g < n; g++) {
      CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, g, "gathered k, v", NULL), whole, 0);
      CU_ASSERT_CLOSE(r->gpu_peak_bytes[g], q + kv + whole + q + lse, 1e-12);
    }
    exec_result_free(r);
    topo_free(t);
  }
}

/* Ulysses holds the whole sequence for H/N heads: at its peak the
 * all-to-all outputs are q, k and v of all S tokens on H/N and Hkv/N
 * heads. */
static void t_ulysses_peak(void) {
  uint32_t n = 4;
  topology *t = switch_topo(n, 100e9);
  workload w = llama(n, 8192, false, PASS_FWD);
  exec_result *r = run_sched(&sched_ulysses, &w, t);
  double whole = 8192.0 * (32 + 2 * 8) / n * 128 * 2;
  uint32_t count;
  CU_ASSERT_TRUE(live_at_peak(r, 0, "all_to_all output", &count) >= whole);
  CU_ASSERT_TRUE(count >= 3);
  exec_result_free(r);
  topo_free(t);
}

/* Ring (ring_flash_attn), MHA: while step t's chunk is attended, step
 * t+1's arrives (double buffering); the peak is at a merge, where
 * update_out_and_lse holds the block's float32 copy and two float32
 * temporaries beside the float32 running output: with U one bf16 tensor
 * of the GPU's queries, q U + local k, v 2U + the arriving chunk 2U + the
 * running output 2U + the block output U + the temporaries 6U = 14U, and
 * the float32 log-sum-exps (running and block), as measured on H200
 * (calibration/h200x2-mem: "14U = 7.0 GiB" at 64K tokens per GPU).
 * Backward adds float32 dK/dV accumulators. */
static void t_ring_peak(void) {
  uint32_t n = 4;
  topology *t = switch_topo(n, 100e9);
  workload w = llama(n, 8192, false, PASS_FWD);
  w.kv_heads = w.heads;
  exec_result *r = run_sched(&sched_ring, &w, t);
  double c = 8192.0 / n, u = c * 32 * 128 * 2, lse = 4.0 * c * 32;
  uint32_t count;
  for (uint32_t g = 0; g < n; g++) CU_ASSERT_CLOSE(r->gpu_peak_bytes[g], 14 * u + 2 * lse, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "next_k, next_v", &count), 2 * u, 0);
  CU_ASSERT_EQUAL(count, 1);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "update_out_and_lse temporaries (float32)", NULL),
                         6 * u, 0);
  double fwd = r->peak_bytes;
  exec_result_free(r);
  w.pass = PASS_BWD;
  r = run_sched(&sched_ring, &w, t);
  CU_ASSERT_TRUE(r->peak_bytes > fwd);
  CU_ASSERT_TRUE(live_at_peak(r, 0, "dk, dv (float32)", NULL) >= 2 * 2 * u);
  exec_result_free(r);
  topo_free(t);
}

/* The same ring on links 1000 times slower: the chunk a GPU sends on
 * stays live until its send is done, so while the next arrives both are
 * held at the merge's peak (one more chunk than on fast links). */
static void t_ring_slow_link(void) {
  uint32_t n = 4;
  topology *t = switch_topo(n, 100e6);
  workload w = llama(n, 8192, false, PASS_FWD);
  w.kv_heads = w.heads;
  exec_result *r = run_sched(&sched_ring, &w, t);
  double c = 8192.0 / n, u = c * 32 * 128 * 2, lse = 4.0 * c * 32;
  uint32_t count;
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "next_k, next_v", &count), 4 * u, 0);
  CU_ASSERT_EQUAL(count, 2);
  CU_ASSERT_CLOSE(r->peak_bytes, 16 * u + 2 * lse, 1e-12);
  exec_result_free(r);
  topo_free(t);
}

/* A lockstep plan and its expansion peak alike, GPU by GPU, and list the
 * same buffers. */
static void t_lockstep_expand(void) {
  topology *t = switch_topo(4, 100e9);
  workload w = llama(4, 8192, false, PASS_FWDBWD);
  plan *p = sched_tasp.build(&w, t, false);
  CU_ASSERT_TRUE(p->has_lockstep);
  plan *q = plan_expand(p);
  exec_result *a = run(p, t, false), *b = run(q, t, false);
  CU_ASSERT_EQUAL(a->peak_live->len, b->peak_live->len);
  for (uint32_t g = 0; g < 4; g++) CU_ASSERT_CLOSE(a->gpu_peak_bytes[g], b->gpu_peak_bytes[g], 1e-12);
  exec_result_free(a);
  exec_result_free(b);
  plan_free(q);
  plan_free(p);
  topo_free(t);
}

int main(void) {
  static const test_case cases[] = {TEST(t_lifetimes),      TEST(t_errors),
                                    TEST(t_delayed_transfer), TEST(t_allgather_peak),
                                    TEST(t_ulysses_peak),   TEST(t_ring_peak),       TEST(t_ring_slow_link),
                                    TEST(t_lockstep_expand), {NULL, NULL}};
  return test_run("mem", cases);
}
