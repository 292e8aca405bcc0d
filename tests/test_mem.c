/* exec_mem and plan_buf: live bytes per GPU through a replay.  Rules
 * (allocated at the first use, freed after the last, kept ones never),
 * what makes a plan's declarations wrong, a peak that moves when a
 * transfer is delayed, and closed-form peaks of schedulers. */
#include "compute.h"
#include "exec_alloc.h"
#include "exec_queue.h"
#include "exec.h"
#include "plan_buf.h"
#include "sched/sched.h"
#include "sched/ulysses.h"
#include "testutil.h"

#include <math.h>
#include <string.h>

/* Per GPU an egress and an ingress channel of bw bytes/s; copies at
 * 1e12 bytes/s. */
static topology *switch_topo(uint32_t n, double bw) {
  topology *t = test_switch(n, bw, 1e-6);
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

/* The replay takes a task's uses in the order they were declared for it,
 * whatever the order across tasks: the same plan with its uses declared
 * task by task (the replay reads them in place) and interleaved across
 * tasks (it indexes them by task first) gives the same peak, live
 * buffers and trace, sample by sample. */
static plan *declared(bool by_task) {
  plan *p = plan_new(1, false);
  uint32_t in = plan_buf_input(p, 0, 10, "in");
  uint32_t a = plan_copy(p, 0, 0, 1e6), b = plan_copy(p, 0, 0, 1e6), c = plan_copy(p, 0, 0, 1e6);
  uint32_t x = plan_buf_new(p, 0, 100, "x"), y = plan_buf_new(p, 0, 1000, "y");
  uint32_t z = plan_buf_new(p, 0, 5, "z");
  if (by_task) {
    plan_buf_writes(p, a, x);
    plan_buf_reads(p, a, in);
    plan_buf_reads(p, b, x);
    plan_buf_writes(p, b, y);
    plan_buf_reads(p, c, y);
    plan_buf_writes(p, c, z);
  } else { /* each task's own uses in the same order, the tasks interleaved */
    plan_buf_writes(p, c, z);
    plan_buf_reads(p, b, x);
    plan_buf_writes(p, a, x);
    plan_buf_reads(p, c, y);
    plan_buf_writes(p, b, y);
    plan_buf_reads(p, a, in);
  }
  plan_buf_keep(p, z);
  plan_finish(p);
  return p;
}

static void t_use_order(void) {
  topology *t = switch_topo(1, 1e9);
  plan *p = declared(true), *q = declared(false);
  exec_result *r = run(p, t, true), *s = run(q, t, true);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  CU_ASSERT_EQUAL(s->mem_errors, 0);
  /* x and y live together at the second copy, beside the input */
  CU_ASSERT_DOUBLE_EQUAL(r->peak_bytes, 10 + 100 + 1000, 0);
  CU_ASSERT_DOUBLE_EQUAL(s->peak_bytes, r->peak_bytes, 0);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(s, 0, "x", NULL), 100, 0);
  CU_ASSERT_EQUAL(s->mem->len, r->mem->len);
  for (guint i = 0; i < r->mem->len && i < s->mem->len; i++) {
    const exec_mem_sample *u = &g_array_index(r->mem, exec_mem_sample, i);
    const exec_mem_sample *v = &g_array_index(s->mem, exec_mem_sample, i);
    CU_ASSERT(u->t_s == v->t_s && u->bytes == v->bytes);
  }
  /* what is handed on: the input and z */
  CU_ASSERT_DOUBLE_EQUAL(g_array_index(s->mem, exec_mem_sample, s->mem->len - 1).bytes, 15, 0);
  exec_result_free(r);
  exec_result_free(s);
  plan_free(p);
  plan_free(q);
  topo_free(t);
}

/* A buffer's name is its text when declared, interned: the same text
 * from another place is the same pointer, and a name built again in the
 * same place with other text is that text (plan_buf_new remembers the
 * places it interned from). */
static void t_buffer_names(void) {
  plan *p = plan_new(1, false);
  char name[16];
  g_strlcpy(name, "acc", sizeof name);
  uint32_t a = plan_buf_new(p, 0, 1, name);
  g_strlcpy(name, "next_k", sizeof name);
  uint32_t b = plan_buf_new(p, 0, 1, name);
  uint32_t c = plan_buf_new(p, 0, 1, "acc");
  CU_ASSERT_STRING_EQUAL(plan_buf_name(p, plan_buf_at(p, a)), "acc");
  CU_ASSERT_STRING_EQUAL(plan_buf_name(p, plan_buf_at(p, b)), "next_k");
  CU_ASSERT_PTR_EQUAL(plan_buf_name(p, plan_buf_at(p, c)), plan_buf_name(p, plan_buf_at(p, a)));
  CU_ASSERT_PTR_EQUAL(plan_buf_name(p, plan_buf_at(p, b)), g_intern_string("next_k"));
  /* more names than the plan's last-looked-up ones (PLAN_BUF_NAME_WAYS):
   * an old name found again through its table keeps its index */
  uint32_t ids[12];
  for (uint32_t i = 0; i < 12; i++) {
    g_snprintf(name, sizeof name, "t%u", i);
    ids[i] = plan_buf_new(p, 0, 1, name);
  }
  uint32_t d = plan_buf_new(p, 0, 1, "t0"), e = plan_buf_new(p, 0, 1, "acc");
  CU_ASSERT_EQUAL(plan_buf_at(p, d)->name_id, plan_buf_at(p, ids[0])->name_id);
  CU_ASSERT_EQUAL(plan_buf_at(p, e)->name_id, plan_buf_at(p, a)->name_id);
  CU_ASSERT_STRING_EQUAL(plan_buf_name(p, plan_buf_at(p, ids[11])), "t11");
  CU_ASSERT_EQUAL(p->buf_names->names->len, 14); /* acc, next_k, t0..t11 */
  plan_free(p);
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
  /* ... but not what another task is still writing: a send of x, free
   * to start with the copy that writes it, reads it unwritten (at the
   * same instant, after the writer in program order) */
  t = switch_topo(2, 1e9);
  p = plan_new(2, false);
  a = plan_copy(p, 0, 0, 1e6);
  x = plan_buf_new(p, 0, 100, "x");
  plan_buf_writes(p, a, x);
  uint32_t g = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, g, 0, 1, 100);
  plan_buf_reads(p, g, x);
  plan_finish(p);
  r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 1);
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

/* MHA workload of n GPUs, 8K tokens, the float32 gradients of
 * ring_flash_attn; U is one bf16 (B, c, H, D) tensor of a GPU's queries,
 * lse its float32 log-sum-exp. */
static workload mha(uint32_t n, bool causal, pass_kind pass, double *u, double *lse) {
  workload w = llama(n, 8192, causal, pass);
  w.kv_heads = w.heads;
  double c = 8192.0 / n;
  *u = c * 32 * 128 * 2;
  *lse = 4.0 * c * 32;
  return w;
}

/* Ring (ring_flash_attn), MHA forward: the peak is at a merge, where
 * update_out_and_lse holds the block's float32 copy and two float32
 * temporaries beside the float32 running output, while the KV chunk held
 * is still referenced (to its step's end) and, from n = 3, the next one
 * arrives: q U + local k, v 2U + held 2U (+ arriving 2U) + the running
 * output 2U + the block output U + the temporaries 6U = 14U at n = 2, 16U
 * from n = 3, and the float32 log-sum-exps (running and block), as
 * measured on H200 (calibration/h200x2-mem: 14U = 7.0 GiB at 64K tokens
 * per GPU, 2 GPUs; 16U at 4 and 8).  The bf16 output is made after the
 * loop, once the temporaries are gone (plan_buf_writes_late): not at the
 * peak. */
static void t_ring_peak(void) {
  for (uint32_t n = 2; n <= 4; n += 2) {
    topology *t = switch_topo(n, 100e9);
    double u, lse;
    workload w = mha(n, false, PASS_FWD, &u, &lse);
    exec_result *r = run_sched(&sched_ring, &w, t);
    for (uint32_t g = 0; g < n; g++)
      CU_ASSERT_CLOSE(r->gpu_peak_bytes[g], (n == 2 ? 14 : 16) * u + 2 * lse, 1e-12);
    /* three float32 tensors of the block's rows, 2U each */
    CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "update_out_and_lse: block_out.to(float32)", NULL),
                           2 * u, 0);
    CU_ASSERT_DOUBLE_EQUAL(
        live_at_peak(r, 0, "update_out_and_lse: out - block_out (float32)", NULL), 2 * u, 0);
    CU_ASSERT_DOUBLE_EQUAL(
        live_at_peak(r, 0, "update_out_and_lse: sigmoid(...) * (out - block_out) (float32)", NULL),
        2 * u, 0);
    CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "out", NULL), 0, 0);
    exec_result_free(r);
    topo_free(t);
  }
}

/* Ring backward (ring_flash_attn_backward): at the add after a step's
 * last kernel `dk = block_dk_buffer + next_dk` makes a new float32 dK/dV
 * (2 x 2U) while the one sent last step and the one arrived are still
 * referenced: three; the block buffers (3U: block_dq_buffer,
 * block_dk_buffer, block_dv_buffer, three tensors) live to the pass's
 * end; with
 * q, k, v, out, dout (5U), the held KV (2U), the arriving one from n = 3
 * (2U) and the float32 dQ (2U): 24U at n = 2, 26U at n = 4
 * (calibration/h200x2-mem: 12.05 GiB at 64K, 2 GPUs; 3.25 GiB at 16K,
 * rank 3 of 4). */
static void t_ring_backward_peak(void) {
  for (uint32_t n = 2; n <= 4; n += 2) {
    topology *t = switch_topo(n, 100e9);
    double u, lse;
    workload w = mha(n, false, PASS_BWD, &u, &lse);
    exec_result *r = run_sched(&sched_ring, &w, t);
    uint32_t count;
    CU_ASSERT_CLOSE(r->gpu_peak_bytes[0], (n == 2 ? 24 : 26) * u + lse, 1e-12);
    double sums = live_at_peak(r, 0, "dk, dv (float32)", &count);
    double arrived = live_at_peak(r, 0, "next_dk, next_dv", NULL);
    CU_ASSERT_DOUBLE_EQUAL(sums + arrived, 12 * u, 0);
    CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "block_dk_buffer", NULL), u, 0);
    CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "block_dv_buffer", NULL), u, 0);
    exec_result_free(r);
    topo_free(t);
  }
}

/* Zigzag backward adds into the float32 dK/dV that arrived and receives
 * into the one it sent: two such buffers (2 x 4U) at any time, never the
 * ring's three. */
static void t_zigzag_backward_two_accumulators(void) {
  topology *t = switch_topo(4, 100e9);
  double u, lse;
  workload w = mha(4, true, PASS_BWD, &u, &lse);
  exec_result *r = run_sched(&sched_zigzag, &w, t);
  for (uint32_t g = 0; g < 4; g++) {
    double acc = live_at_peak(r, g, "dk, dv (float32)", NULL) +
                 live_at_peak(r, g, "dk_comm_buffer, dv_comm_buffer (float32)", NULL);
    CU_ASSERT_DOUBLE_EQUAL(acc, 8 * u, 0);
  }
  exec_result_free(r);
  topo_free(t);
}

/* Stripe backward (ring_flash_attn's stripe_flash_attn_backward) on 4
 * GPUs, causal: at step s GPU g holds GPU g - s's KV; a later GPU's (s >
 * g) is a shifted block, added into the arrived dK/dV in place; at the
 * others it makes a new float32 sum (`dk = block_dk_buffer + dk`): g + 1
 * sums on GPU g, where Ring makes one every step.  It receives into the
 * one it sent (`dk_comm_buffer`), made once, never a new `next_dk`
 * (calibration/h100x2-snap: one 2 GiB fold buffer on rank 0, two on rank
 * 1, at 64K tokens per GPU). */
static void t_stripe_backward_sums(void) {
  topology *t = switch_topo(4, 100e9);
  double u, lse;
  workload w = mha(4, true, PASS_BWD, &u, &lse);
  plan *p = sched_stripe.build(&w, t, false);
  uint32_t sums[4] = {0}, next = 0, comm_bufs = 0;
  for (uint32_t b = 0; b < plan_buf_count(p); b++) {
    const plan_buf *pb = plan_buf_at(p, b);
    if (!strcmp(plan_buf_name(p, pb), "dk, dv (float32)")) {
      CU_ASSERT_NOT_EQUAL(pb->gpu, PLAN_ALL);
      if (pb->gpu < 4) sums[pb->gpu]++;
    }
    next += !strcmp(plan_buf_name(p, pb), "next_dk, next_dv");
    comm_bufs += !strcmp(plan_buf_name(p, pb), "dk_comm_buffer, dv_comm_buffer (float32)");
  }
  for (uint32_t g = 0; g < 4; g++) CU_ASSERT_EQUAL(sums[g], g + 1);
  CU_ASSERT_EQUAL(next, 0);
  CU_ASSERT_EQUAL(comm_bufs, 1);
  exec_result *r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* Ulysses forward alone: what its attention function saves for the
 * backward (the head-scattered q, k, v, output, log-sum-exp) is kept, so
 * at the output's gather the GPU holds q, k, v (3U), the scattered q, k,
 * v (3U), the kernel's output (U) and log-sum-exp, the all-to-all's
 * output (U) and the pass's output it is copied into (U): 9U and two
 * log-sum-exps
 * (calibration/h200x2-mem: 1.13 GiB at 16K tokens per GPU). */
static void t_ulysses_forward_keeps_saved(void) {
  for (uint32_t n = 2; n <= 4; n += 2) {
    topology *t = switch_topo(n, 100e9);
    double u, lse;
    workload w = mha(n, false, PASS_FWD, &u, &lse);
    exec_result *r = run_sched(&sched_ulysses, &w, t);
    CU_ASSERT_CLOSE(r->peak_bytes, 9 * u + 2 * lse, 1e-12);
    exec_result_free(r);
    topo_free(t);
  }
}

/* All-gather backward, causal, GPU n-1 of 4: q, k, v, out, dout (5U) and
 * the float32 dK/dV of the whole sequence (16U) beside its owner-order
 * copy (index_select, 16U) and the joined dQ (U): 38U (calibration/
 * h200x2-mem emulated/e4: 4.75 GiB at 16K tokens per GPU); the kernels'
 * dK, dV are gone by then.  Full mask, 2 GPUs: at the kernel, 5U, the
 * gathered KV kept from the forward (4U), the accumulator made before it
 * (8U), the kernel's dK, dV (4U), dQ (U) and float32 dQ accumulator (2U):
 * 24U, in a backward alone as after a forward (12.05 GiB at 64K). */
static void t_allgather_backward_peak(void) {
  double u, lse;
  topology *t = switch_topo(4, 100e9);
  workload w = mha(4, true, PASS_BWD, &u, &lse);
  exec_result *r = run_sched(&sched_allgather, &w, t);
  CU_ASSERT_CLOSE(r->gpu_peak_bytes[3], 38 * u + lse, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 3, "dk, dv in owner order (float32)", NULL), 16 * u, 0);
  exec_result_free(r);
  topo_free(t);
  t = switch_topo(2, 100e9);
  for (pass_kind ps = PASS_BWD; ps <= PASS_FWDBWD; ps++) {
    w = mha(2, false, ps, &u, &lse);
    r = run_sched(&sched_allgather, &w, t);
    CU_ASSERT_CLOSE(r->peak_bytes, 24 * u + lse, 1e-12);
    exec_result_free(r);
  }
  topo_free(t);
}

/* TokenRing backward, 2 GPUs, full: the pass's receive buffers from its
 * start (two sets of q, dout, out, lse: 6U + 2 lse; the float32 dQ block
 * 2U), float32 dQ (2U) and dK/dV (4U), q, k, v, out, dout (5U + lse), and
 * at the second step's kernel the first step's dq, dk, dv (3U, still
 * referenced) beside the new ones (3U) and the float32 dQ accumulator
 * (2U): 27U + 3 lse (calibration/h200x2-mem: 3.38 GiB at 16K). */
static void t_tokenring_backward_peak(void) {
  double u, lse;
  topology *t = switch_topo(2, 100e9);
  workload w = mha(2, false, PASS_BWD, &u, &lse);
  exec_result *r = run_sched(&sched_tokenring, &w, t);
  uint32_t count;
  CU_ASSERT_CLOSE(r->peak_bytes, 27 * u + 3 * lse, 1e-12);
  /* three tensors per kernel, the last step's and this one's */
  static const char *const grads[3] = {"dq of the block (flash backward)",
                                       "dk of the block (flash backward)",
                                       "dv of the block (flash backward)"};
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, r->peak_gpu, grads[i], &count), 2 * u, 0);
    CU_ASSERT_EQUAL(count, 2);
  }
  exec_result_free(r);
  topo_free(t);
}

/* USP of Ulysses degree n (one ring rank) backward: yunchang's saved
 * tensors (scattered q, k, v, out: 4U, and lse), dout scattered (U), the
 * kernel's block gradients (3U) and ring_flash_attn's float32 dQ, dK, dV
 * of its one rank (6U) beside q, k, v, out, dout (5U): 19U
 * (calibration/h200x2-mem: 2.38 GiB at 16K tokens per GPU). */
static void t_usp_one_ring_rank_backward(void) {
  double u, lse;
  topology *t = switch_topo(2, 100e9);
  workload w = mha(2, false, PASS_BWD, &u, &lse);
  sched_opt_set_num(&w, &usp_opt_ulysses, 2);
  exec_result *r = run_sched(&sched_usp, &w, t);
  CU_ASSERT_CLOSE(r->peak_bytes, 19 * u + 2 * lse, 1e-12);
  /* ring_flash_attn's `dk`, `dv`: two float32 tensors */
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "dk (float32)", NULL), 2 * u, 0);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "dv (float32)", NULL), 2 * u, 0);
  exec_result_free(r);
  topo_free(t);
}

/* The causal intra-chunk kernel's workspace, that of the stand-in kernel
 * the linear tables price (sched_lin_intra_workspace): per token and
 * head, 6 D^2 / b bytes forward, 16 D^2 / b + 4 b backward; none for the
 * full mask. */
static void t_linear_intra_workspace(void) {
  topology *t = switch_topo(2, 100e9);
  for (int causal = 0; causal <= 1; causal++)
    for (pass_kind ps = PASS_FWD; ps <= PASS_BWD; ps++) {
      workload w = llama(2, 8192, causal, ps);
      w.attention = ATTN_LINEAR;
      w.linear_block = 64;
      exec_result *r = run_sched(&sched_lasp, &w, t);
      double d2 = 128.0 * 128, per = ps == PASS_BWD ? 16 * d2 / 64 + 4 * 64 : 6 * d2 / 64;
      double want = causal ? per * 4096 * 32 : 0;
      CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "intra-chunk workspace (block states, float32)",
                                          NULL), want, 0);
      exec_result_free(r);
    }
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

/* Where a flash kernel holds all SMs and the KV transfer only starts
 * after it (kernel_blocks_comm, H200), the receive buffer is still made
 * before the kernel is issued (`next_k, next_v = send_recv_kv(k, v)`):
 * zigzag backward on 4 GPUs, GPU 3, at a first-half kernel: q, k, v, out,
 * dout (5U), the held and the arriving KV (4U), the block buffers (3U),
 * float32 dQ (2U), the two float32 dK/dV (8U) and the kernel's float32 dQ
 * accumulator (2U): 24U (calibration/h200x2-mem emulated/e4: 3.13 GiB at
 * 16K tokens per GPU, 25U). */
static void t_receive_buffer_before_kernel(void) {
  topology *t = switch_topo(4, 100e9);
  t->kernel_blocks_comm = true;
  double u, lse;
  workload w = mha(4, true, PASS_BWD, &u, &lse);
  exec_result *r = run_sched(&sched_zigzag, &w, t);
  uint32_t count;
  CU_ASSERT_CLOSE(r->gpu_peak_bytes[3], 24 * u + lse, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 3, "next_k, next_v", &count), 4 * u, 0);
  CU_ASSERT_EQUAL(count, 2);
  exec_result_free(r);
  topo_free(t);
}

/* TASP causal forward on 4 GPUs (two cycles, the ring both ways), GPU 3:
 * every earlier sub-chunk's first piece (c/4 tokens each) comes from two
 * cycles, so its kernel reads them from a torch.cat gather (c/2 tokens'
 * K and V: U), live through the merge: ring's 16U + U
 * (calibration/h200x2-mem emulated/e4: 2.13 GiB at 16K tokens per GPU). */
static void t_tasp_gather(void) {
  topology *t = switch_topo(4, 100e9);
  double u, lse;
  workload w = mha(4, true, PASS_FWD, &u, &lse);
  exec_result *r = run_sched(&sched_tasp, &w, t);
  CU_ASSERT_CLOSE(r->gpu_peak_bytes[3], 17 * u + 2 * lse, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 3, "keys gathered (torch.cat)", NULL), u, 0);
  exec_result_free(r);
  topo_free(t);
}

/* USP with a ring of all GPUs (u = 1), full mask, 2 GPUs:
 * ring_flash_attn's autograd function makes K and V contiguous (U each,
 * two tensors) and saves them: forward, ring's 14U + 2U; backward alone,
 * ring's 24U + 2U,
 * held to the ring's return, after its last add (calibration/h200x2-mem:
 * 2.01 and 3.25 GiB at 16K tokens per GPU). */
static void t_usp_contiguous_kv(void) {
  topology *t = switch_topo(2, 100e9);
  for (pass_kind ps = PASS_FWD; ps <= PASS_BWD; ps++) {
    double u, lse;
    workload w = mha(2, false, ps, &u, &lse);
    sched_opt_set_num(&w, &usp_opt_ulysses, 1);
    exec_result *r = run_sched(&sched_usp, &w, t);
    CU_ASSERT_CLOSE(r->peak_bytes, ps == PASS_FWD ? 16 * u + 2 * lse : 26 * u + lse, 1e-12);
    for (int i = 0; i < 2; i++) {
      static const char *const names[2][2] = {
          {"k made contiguous (ring_flash_attn)", "v made contiguous (ring_flash_attn)"},
          {"k made contiguous (saved by forward)", "v made contiguous (saved by forward)"}};
      CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, r->peak_gpu, names[ps == PASS_BWD][i], NULL), u, 0);
    }
    exec_result_free(r);
  }
  topo_free(t);
}

/* USP of Ulysses degree 2 on 2 GPUs (a ring of one rank), forward then
 * backward: the ring's bf16 output on H/u heads (U) and its float32
 * log-sum-exp (two tensors, two buffers), saved by the forward, is held by the backward beside the scattered q, k, v (3U),
 * dout scattered (U), the block gradients (3U) and ring_flash_attn's
 * float32 dQ, dK, dV (6U), with q, k, v, out, dout (5U): 19U, as in a
 * backward alone (calibration/h200x2-mem: 2.38 GiB at 16K tokens per
 * GPU, both). */
static void t_usp_saves_ring_output(void) {
  topology *t = switch_topo(2, 100e9);
  double u, lse;
  workload w = mha(2, false, PASS_FWDBWD, &u, &lse);
  sched_opt_set_num(&w, &usp_opt_ulysses, 2);
  exec_result *r = run_sched(&sched_usp, &w, t);
  CU_ASSERT_CLOSE(r->peak_bytes, 19 * u + 2 * lse, 1e-12);
  uint32_t count;
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "ring out on H/u heads", &count), u, 0);
  CU_ASSERT_EQUAL(count, 1);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "ring lse on H/u heads (float32)", &count), lse, 0);
  CU_ASSERT_EQUAL(count, 1);
  exec_result_free(r);
  topo_free(t);
}

/* LASP causal: the intra-chunk kernel makes the output beside its
 * workspace (forward, GPU 3 of 4: q, k, v 3U, the output U, the block
 * states 4U and their bf16 prefix 2U: 10U, and the received state), and
 * in backward the chunk's dq, dk, dv beside its workspace (GPU 1 of 2:
 * q, k, v, out, dout 5U, dQ of the received state's product U, dq, dk, dv
 * 3U and 17U of workspace: 26U, and the forward's state)
 * (calibration/h200x2-mem: 1.25 and 3.25 GiB at 16K tokens per GPU). */
static void t_lasp_intra_outputs(void) {
  double u, lse, state = 4.0 * 32 * 128 * 128;
  topology *t = switch_topo(4, 100e9);
  workload w = mha(4, true, PASS_FWD, &u, &lse);
  w.attention = ATTN_LINEAR;
  w.linear_block = 64;
  exec_result *r = run_sched(&sched_lasp, &w, t);
  CU_ASSERT_CLOSE(r->gpu_peak_bytes[3], 10 * u + state, 1e-12);
  exec_result_free(r);
  topo_free(t);
  t = switch_topo(2, 100e9);
  w = mha(2, true, PASS_BWD, &u, &lse);
  w.attention = ATTN_LINEAR;
  w.linear_block = 64;
  r = run_sched(&sched_lasp, &w, t);
  CU_ASSERT_CLOSE(r->gpu_peak_bytes[1], 26 * u + state, 1e-12);
  exec_result_free(r);
  topo_free(t);
}

/* LASP-2 causal backward (calibrate.py Lasp2.run_backward), MHA, 4 GPUs:
 * the last GPU's peak is its intra-chunk backward, while the prefix's dQ
 * (`dqa`, bf16, U) and dM (float32, one state) that the apply's backward
 * made before it are still held (dq += dqa after it); the first GPU has
 * no prefix (calibration/h200x2-mem emulated/e4: 4K tokens per GPU, rank
 * 3, 0.82 GiB measured, 0.78 predicted without them). */
static void t_lasp2_backward_temporaries(void) {
  double u, lse, state = 4.0 * 32 * 128 * 128;
  topology *t = switch_topo(4, 100e9);
  workload w = mha(4, true, PASS_BWD, &u, &lse);
  w.attention = ATTN_LINEAR;
  w.linear_block = 64;
  exec_result *r = run_sched(&sched_lasp2, &w, t);
  uint32_t count;
  CU_ASSERT_CLOSE(live_at_peak(r, 3, "dqa (the prefix's dq)", &count), u, 1e-12);
  CU_ASSERT_EQUAL(count, 1);
  CU_ASSERT_CLOSE(live_at_peak(r, 3, "dm (float32)", &count), state, 1e-12);
  CU_ASSERT_EQUAL(live_at_peak(r, 0, "dqa (the prefix's dq)", &count), 0);
  exec_result_free(r);
  topo_free(t);
}

/* Ring on linear layers (calibrate.py LinRing), MHA, full mask, 2 GPUs:
 * forward, q, k, v (3U), the pair of KV receive buffers made at the
 * pass's start (4U) and the output (U): 8U, and the arrived chunk's
 * state K^T V as it is applied; backward, q, k, v, out, dout
 * (5U), the pair (4U), three float32 dK/dV accumulators (12U) and the
 * last step's dq, dk, dv beside this step's (6U): 27U
 * (calibration/h200x2-mem: 1.00 and 3.38 GiB at 16K tokens per GPU). */
static void t_linear_ring_peak(void) {
  topology *t = switch_topo(2, 100e9);
  for (pass_kind ps = PASS_FWD; ps <= PASS_BWD; ps++) {
    double u, lse;
    workload w = mha(2, false, ps, &u, &lse);
    w.attention = ATTN_LINEAR;
    w.linear_block = 64;
    exec_result *r = run_sched(&sched_ring, &w, t);
    double state = 4.0 * 32 * 128 * 128; /* the arrived chunk's K^T V, float32 */
    CU_ASSERT_CLOSE(r->peak_bytes, ps == PASS_FWD ? 8 * u + state : 27 * u, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "bufs: KV receive buffers (x2)", NULL), 4 * u, 0);
    exec_result_free(r);
  }
  topo_free(t);
}

/* When in a task a use holds its reference (plan_buf_when), on one GPU:
 * copy A makes a 100-byte temporary and `held` (10) and, as it ends, its
 * 1000-byte result (late): never the temporary beside the result.  Copy B
 * reads `held` and the result early and makes `new` (50): they go once
 * new is allocated, so B then holds new alone.  Copy C writes an accumulator (7) and, late, reads it and makes
 * `res` (3) from it: both live at C's end. */
static void t_phases(void) {
  topology *t = switch_topo(1, 1e9);
  plan *p = plan_new(1, false);
  uint32_t a = plan_copy(p, 0, 0, 1e6), b = plan_copy(p, 0, 0, 1e6), c = plan_copy(p, 0, 0, 1e6);
  plan_buf_out(p, a, 100, "tmp");
  uint32_t res = plan_buf_new(p, 0, 1000, "result");
  plan_buf_writes_late(p, a, res);
  uint32_t held = plan_buf_out(p, a, 10, "held");
  plan_buf_reads_early(p, b, held);
  plan_buf_reads_early(p, b, res);
  plan_buf_out(p, b, 50, "new");
  uint32_t acc = plan_buf_out(p, c, 7, "acc");
  plan_buf_reads_late(p, c, acc);
  uint32_t out = plan_buf_new(p, 0, 3, "res");
  plan_buf_writes_late(p, c, out);
  plan_buf_keep(p, out);
  plan_finish(p);
  exec_result *r = run(p, t, true);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  /* B's start: new 50 beside result 1000 and held 10, which go at once;
   * never tmp beside result */
  CU_ASSERT_DOUBLE_EQUAL(r->peak_bytes, 1060, 0);
  CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, "tmp", NULL), 0, 0);
  bool acc_and_res = false, new_alone = false;
  for (guint i = 0; i < r->mem->len; i++) {
    const exec_mem_sample *x = &g_array_index(r->mem, exec_mem_sample, i);
    if (x->bytes == 7 + 3) acc_and_res = true;
    if (x->bytes == 50) new_alone = true;
  }
  CU_ASSERT_TRUE(acc_and_res);
  CU_ASSERT_TRUE(new_alone);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* plan_buf_use_on: a group that reads GPU 0's copy of a buffer on every
 * GPU, not GPU 1's: GPU 1's copy goes when its own copy task ends, before
 * GPU 1 makes a larger buffer; read on both, it would be held to the
 * group's end, and GPU 1's peak would hold both.  GPU 0's copy is held to
 * the group's end either way: beside what GPU 0 makes meanwhile. */
static double use_on_peak(bool one) {
  topology *t = switch_topo(2, 1e9);
  plan *p = plan_new(2, false);
  uint32_t x = plan_buf_new(p, PLAN_ALL, 100, "x");
  uint32_t c0 = plan_copy(p, 0, 0, 1e6), c1 = plan_copy(p, 1, 0, 1e6);
  plan_buf_writes(p, c0, x);
  plan_buf_writes(p, c1, x);
  uint32_t c1b = plan_copy(p, 1, 0, 1e6);
  plan_buf_out(p, c1b, 1000, "y");
  uint32_t g = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, g, 0, 1, 1e6);
  plan_dep(p, c1b, g);
  plan_dep(p, c0, g);
  plan_issue(p, g, NULL, -1, false);
  plan_buf_out(p, plan_copy(p, 0, 0, 1e6), 1000, "z");
  if (one) plan_buf_use_on(p, g, x, 0, false, PLAN_BUF_DURING);
  else plan_buf_reads(p, g, x);
  plan_finish(p);
  exec_result *r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  CU_ASSERT_DOUBLE_EQUAL(r->gpu_peak_bytes[0], 1100, 0);
  double peak = r->gpu_peak_bytes[1];
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
  return peak;
}

static void t_use_on(void) {
  CU_ASSERT_DOUBLE_EQUAL(use_on_peak(true), 1000, 0);
  CU_ASSERT_DOUBLE_EQUAL(use_on_peak(false), 1100, 0);
}

#define MIB (1024.0 * 1024.0)

/* The caching allocator's rounding and segment sizes
 * (c10/cuda/CUDACachingAllocator.cpp round_size, get_allocation_size). */
static void t_alloc_rounding(void) {
  CU_ASSERT_EQUAL(exec_alloc_round(1), 512);
  CU_ASSERT_EQUAL(exec_alloc_round(512), 512);
  CU_ASSERT_EQUAL(exec_alloc_round(513), 1024);
  CU_ASSERT_EQUAL(exec_alloc_segment_size(512), 2u << 20);
  CU_ASSERT_EQUAL(exec_alloc_segment_size(1u << 20), 2u << 20);
  CU_ASSERT_EQUAL(exec_alloc_segment_size((1u << 20) + 512), 20u << 20);
  CU_ASSERT_EQUAL(exec_alloc_segment_size((10u << 20) - 512), 20u << 20);
  CU_ASSERT_EQUAL(exec_alloc_segment_size(10u << 20), 10u << 20);
  CU_ASSERT_EQUAL(exec_alloc_segment_size((10u << 20) + 512), 12u << 20);
  /* a small request takes a 2 MiB small-pool segment; a large one of
   * 2 MiB does not share it */
  exec_alloc *a = exec_alloc_new();
  exec_alloc_release(a, exec_alloc_take(a, 0)); /* an empty tensor: no storage */
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 0);
  exec_alloc_take(a, 1000);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 2u << 20);
  CU_ASSERT_EQUAL(exec_alloc_allocated(a), 1024);
  exec_alloc_take(a, 1000);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 2u << 20); /* the split remainder */
  exec_alloc_take(a, 2u << 20);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 22u << 20); /* 2 MiB < 10 MiB: a 20 MiB segment */
  exec_alloc_free(a);
}

/* Freed blocks are cached and reused, split where more than 1 MiB would
 * remain, best fit first, merged with free neighbours. */
/* recordStream: a block freed while a transfer's use of it is not done
 * (exec_alloc_release_after) is neither reused nor merged with its free
 * neighbours until a request made at or after that use's end settles it;
 * then it is cached as any freed block. */
static void t_alloc_pending(void) {
  exec_alloc *a = exec_alloc_new();
  uint32_t x = exec_alloc_take(a, 100 * MIB);
  exec_alloc_release_after(a, x, 5.0);
  CU_ASSERT_EQUAL(exec_alloc_allocated(a), 0); /* the host's free: no longer allocated */
  exec_alloc_settle(a, 4.0);
  uint32_t y = exec_alloc_take(a, 100 * MIB); /* the transfer is not done: a new segment */
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 200 * MIB);
  exec_alloc_release(a, y);
  exec_alloc_settle(a, 5.0);
  exec_alloc_take(a, 100 * MIB);
  exec_alloc_take(a, 100 * MIB); /* both segments' blocks are cached now */
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 200 * MIB);
  exec_alloc_free(a);
  /* a pending block merges with nothing: its free neighbour stays apart */
  a = exec_alloc_new();
  uint32_t p = exec_alloc_take(a, 100 * MIB);
  exec_alloc_release(a, p);
  uint32_t l = exec_alloc_take(a, 50 * MIB), r = exec_alloc_take(a, 50 * MIB);
  exec_alloc_release_after(a, l, 1.0);
  exec_alloc_release(a, r);
  exec_alloc_take(a, 100 * MIB); /* 50 + 50 pending: not one block yet */
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 200 * MIB);
  exec_alloc_free(a);
}

/* Pending blocks are settled in the order they become ready (then by
 * id), whatever the order they were freed in: freed with ready times
 * 0..39 in the order 7i mod 40, each settle at time k caches exactly the
 * block ready at k, and the next one pending is ready at k + 1; more
 * freed after most have settled (the pending list's room reused, then
 * grown) keep the order. */
static void t_alloc_pending_order(void) {
  exec_alloc *a = exec_alloc_new();
  uint32_t id[100];
  for (int i = 0; i < 100; i++) id[i] = exec_alloc_take(a, 100 * MIB);
  for (int i = 0; i < 40; i++) exec_alloc_release_after(a, id[i], (double)(i * 7 % 40));
  for (int k = 0; k < 36; k++) {
    CU_ASSERT_EQUAL(exec_alloc_next_ready(a), (double)k);
    exec_alloc_settle(a, k);
  }
  /* 60 more, ready at 100 + (13j mod 60), while 4 of the first wait */
  for (int j = 0; j < 60; j++)
    exec_alloc_release_after(a, id[40 + j], 100.0 + j * 13 % 60);
  for (int k = 36; k < 40; k++) {
    CU_ASSERT_EQUAL(exec_alloc_next_ready(a), (double)k);
    exec_alloc_settle(a, k);
  }
  for (int k = 100; k < 160; k++) {
    CU_ASSERT_EQUAL(exec_alloc_next_ready(a), (double)k);
    exec_alloc_settle(a, k);
  }
  CU_ASSERT(isinf(exec_alloc_next_ready(a)));
  /* every block is cached: 100 requests take them, no segment more */
  for (int i = 0; i < 100; i++) exec_alloc_take(a, 100 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 100 * 100 * MIB);
  exec_alloc_free(a);
}

/* comm.record_stream: ring's backward on 2 GPUs, whose dK/dV sums travel:
 * the host, which never waits for the GPU here (no host costs), frees a
 * sum it sent before the GPU has sent it, so the next sum cannot reuse
 * its block (calibration/h200x2-snap: 16.05 GiB reserved with NCCL, 14.05
 * with local copies at 64K tokens per GPU); bytes allocated do not
 * change. */
static void t_record_stream(void) {
  topology *t = switch_topo(2, 100e9);
  double u, lse;
  workload w = mha(2, false, PASS_BWD, &u, &lse);
  t->record_stream = false; /* the default is on (topology.h) */
  exec_result *off = run_sched(&sched_ring, &w, t);
  t->record_stream = true;
  exec_result *on = run_sched(&sched_ring, &w, t);
  CU_ASSERT_DOUBLE_EQUAL(on->peak_bytes, off->peak_bytes, 0);
  /* at least one float32 dK/dV sum more: 4U, its segment */
  CU_ASSERT(on->peak_reserved_bytes >= off->peak_reserved_bytes + 4 * u);
  CU_ASSERT_EQUAL(on->mem_errors, 0);
  exec_result_free(on);
  exec_result_free(off);
  topo_free(t);
}

/* comm.record_stream, ring's forward on 4 GPUs: the KV chunk held a step
 * ago was sent by the GPU after the host freed it, so the next receive
 * buffer takes a segment of its own, one KV chunk (2U) beyond the
 * allocated peak (16U + the float32 log-sum-exps) and no more: the
 * merge's three float32 temporaries are three blocks of 2U
 * (update_out_and_lse's tensors), which the next merge reuses.  Declared as
 * one block of 6U, the receive buffer split it and every later merge
 * needed a new 6U segment (calibration/h100x4-sp: 6.79 GiB reserved at
 * 48K tokens per GPU, where that replay gave 8.27 GiB and this one 6.77). */
static void t_record_stream_forward(void) {
  topology *t = switch_topo(4, 100e9);
  t->record_stream = true;
  /* kernels of 14 ms a step: the host, its cudaMallocs included, is far
   * ahead (at 1.4 ms, about as long as its cudaMallocs, the held chunk's
   * send is done before the next request: t_record_stream_host_mallocs) */
  t->compute.peak_flops = 10e12;
  double u, lse;
  workload w = mha(4, false, PASS_FWD, &u, &lse);
  exec_result *r = run_sched(&sched_ring, &w, t);
  for (uint32_t g = 0; g < 4; g++) {
    CU_ASSERT_CLOSE(r->gpu_peak_bytes[g], 16 * u + 2 * lse, 1e-12);
    /* a KV chunk's segment more, give or take the small pool's and the
     * rounding's few MiB */
    CU_ASSERT(r->gpu_peak_reserved_bytes[g] >= r->gpu_peak_bytes[g] + 2 * u);
    CU_ASSERT(r->gpu_peak_reserved_bytes[g] < r->gpu_peak_bytes[g] + 3 * u);
  }
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  exec_result_free(r);
  topo_free(t);
}

/* comm.record_stream, zigzag forward+backward on 2 GPUs: the forward's only
 * transfer is issued before the GPU's first kernel, so it runs at once and
 * its receive buffer is cached again when freed (calibration/h100x2-snap:
 * `free_completed` at the next request, 3.4 ms of host time into the
 * pass), and the backward's first receive buffer reuses it: GPU 1, whose
 * backward's transfers leave no block pending where it matters, reserves
 * as much as without recordStream.  Held to its GPU end behind the
 * kernels, it took one KV chunk's segment more (2U). */
static void t_record_stream_idle_gpu(void) {
  topology *t = switch_topo(2, 100e9);
  double u, lse;
  workload w = mha(2, true, PASS_FWDBWD, &u, &lse);
  t->record_stream = false; /* the default is on (topology.h) */
  exec_result *off = run_sched(&sched_zigzag, &w, t);
  t->record_stream = true;
  exec_result *on = run_sched(&sched_zigzag, &w, t);
  CU_ASSERT_DOUBLE_EQUAL(on->gpu_peak_bytes[1], off->gpu_peak_bytes[1], 0);
  CU_ASSERT_DOUBLE_EQUAL(on->gpu_peak_reserved_bytes[1], off->gpu_peak_reserved_bytes[1], 0);
  CU_ASSERT_EQUAL(on->mem_errors, 0);
  exec_result_free(on);
  exec_result_free(off);
  topo_free(t);
}

/* comm.record_stream, USP 2 x 2 forward+backward on 4 GPUs: the ring's
 * first transfer comes after the Ulysses all-to-all and the layout copies
 * (memory-bound, short) but before any attention kernel, so it too is done
 * before its KV buffer is freed and the backward reuses the block: each
 * GPU reserves what it does without recordStream.  The backward's float32
 * dK and dV sums held past their free are two tensors of 2U (calibrate.py
 * USP.attend_bwd, ring_flash_attn's `dk`, `dv`), which blocks left cached
 * hold; declared as one 4U tensor they took a segment of their own (+4U:
 * calibration/h100x4-sp USP 2 x 2 full forward+backward, 9.1% -> 8.7%).
 * (calibration/h100x4-sp: +15% with the copies counted as kernels, within
 * 9.1% without; this switched topology's replay does not separate the
 * two.) */
static void t_record_stream_after_copies(void) {
  topology *t = switch_topo(4, 100e9);
  double u, lse;
  workload w = mha(4, false, PASS_FWDBWD, &u, &lse);
  sched_opt_set_num(&w, &usp_opt_ulysses, 2);
  t->record_stream = false; /* the default is on (topology.h) */
  exec_result *off = run_sched(&sched_usp, &w, t);
  t->record_stream = true;
  exec_result *on = run_sched(&sched_usp, &w, t);
  for (uint32_t g = 0; g < 4; g++)
    CU_ASSERT_DOUBLE_EQUAL(on->gpu_peak_reserved_bytes[g], off->gpu_peak_reserved_bytes[g], 0);
  CU_ASSERT_EQUAL(on->mem_errors, 0);
  exec_result_free(on);
  exec_result_free(off);
  topo_free(t);
}

/* comm.record_stream and the host's own cudaMallocs: GPU 0 runs a kernel
 * writing X (100 MiB, a new segment), sends X (its last use, so X is
 * freed pending until the send is done), a copy writing Z (200 MiB, a new
 * segment), then, after the send, a copy reading Z and writing Y (100
 * MiB).  Host costs are nil but for the two cudaMallocs
 * (exec_alloc_segment_host_s), which the GPU does not wait for: the host
 * asks for Y that much late.  A send done by then (it was issued after X's
 * cudaMalloc and takes xfer_s) leaves X's block cached and Y takes it: 300
 * MiB reserved; one not done yet (the host behind by the first cudaMalloc
 * when it issued it, so the GPU ran it that much late), a segment of its
 * own: 400 MiB, exactly the block more.  Without recordStream, 300 MiB.
 * peer_bytes: GPU 1, the receiver, first runs a kernel making a segment of
 * that size (its host's cudaMalloc). */
static double reserved_after(double xfer_s, bool record_stream, double peer_bytes,
                             bool empty_cache_first) {
  const double bw = 100e9;
  topology *t = switch_topo(2, bw);
  t->record_stream = record_stream;
  t->empty_cache_first = empty_cache_first;
  t->compute.host_s = t->compute.bwd_host_s = t->compute.copy_host_s = 0;
  t->compute.merge_host_s = 0;
  t->comm_host_s = t->p2p_host_s = t->p2p_op_host_s = 0;
  plan *p = plan_new(2, false);
  plan_op op = {.kind = OP_ATTN, .batch = 1, .heads = 1, .head_dim = 128, .elem_bytes = 2,
                .sq = 128, .sk = 128, .pairs = 128 * 128};
  uint32_t k = plan_compute(p, 0, 0, &op);
  uint32_t x = plan_buf_out(p, k, 100 * MIB, "x");
  if (peer_bytes > 0) /* the receiving GPU's host makes a segment first */
    plan_buf_out(p, plan_compute(p, 1, 0, &op), peer_bytes, "peer's");
  int64_t issued[2];
  plan_issued(p, issued);
  uint32_t send = plan_comm(p, 0, COMM_P2P);
  plan_xfer_add(p, send, 0, 1, xfer_s * bw);
  plan_issue(p, send, issued, -1, false);
  plan_buf_reads(p, send, x);
  uint32_t c = plan_copy(p, 0, 0, 1e6);
  uint32_t z = plan_buf_out(p, c, 200 * MIB, "z");
  uint32_t b = plan_copy(p, 0, 1, 1e6);
  plan_dep(p, send, b);
  plan_buf_reads(p, b, z);
  plan_buf_out(p, b, 100 * MIB, "y");
  plan_finish(p);
  exec_result *r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  double reserved = r->gpu_peak_reserved_bytes[0];
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
  return reserved;
}

static double reserved_after_host_mallocs(double xfer_s, bool record_stream, double peer_bytes) {
  return reserved_after(xfer_s, record_stream, peer_bytes, false);
}

static void t_record_stream_host_mallocs(void) {
  double x_s = exec_alloc_segment_host_s(100 * MIB, false), z_s = exec_alloc_segment_host_s(200 * MIB, false);
  CU_ASSERT(x_s > 0 && z_s > 0);
  /* done within the second cudaMalloc: X's block is reused */
  CU_ASSERT_DOUBLE_EQUAL(reserved_after_host_mallocs(z_s / 4, true, 0), 300 * MIB, 0);
  /* the send would be done by the host's request in the GPU's own time
   * (xfer_s < both cudaMallocs), but it was issued after the first: not */
  CU_ASSERT_DOUBLE_EQUAL(reserved_after_host_mallocs(z_s + x_s / 2, true, 0), 400 * MIB, 0);
  CU_ASSERT_DOUBLE_EQUAL(reserved_after_host_mallocs(z_s + x_s / 2, false, 0), 300 * MIB, 0);
  /* long after the host's request: pending */
  CU_ASSERT_DOUBLE_EQUAL(reserved_after_host_mallocs(4 * (x_s + z_s), true, 0), 400 * MIB, 0);
  /* the send starts once both hosts issued it: the receiver's host, behind
   * by a cudaMalloc longer than both of GPU 0's, issues it after GPU 0's
   * request (a 4 GiB segment: 1.1 ms) */
  CU_ASSERT(exec_alloc_segment_host_s(4096 * MIB, false) > x_s + z_s);
  CU_ASSERT_DOUBLE_EQUAL(reserved_after_host_mallocs(z_s / 4, true, 4096 * MIB), 400 * MIB, 0);
  /* after empty_cache() a GPU's first cudaMalloc waits for the driver's
   * release (comm.empty_cache_first): the receiver's first segment, 256
   * MiB, then takes longer than GPU 0's two (its first, X, longer too),
   * and the send is issued after GPU 0's request; without it, it does not */
  double peer = exec_alloc_segment_host_s(256 * MIB, true);
  CU_ASSERT(peer > exec_alloc_segment_host_s(100 * MIB, true) + z_s);
  CU_ASSERT(exec_alloc_segment_host_s(256 * MIB, false) < x_s + z_s);
  CU_ASSERT_DOUBLE_EQUAL(reserved_after(z_s / 4, true, 256 * MIB, false), 300 * MIB, 0);
  CU_ASSERT_DOUBLE_EQUAL(reserved_after(z_s / 4, true, 256 * MIB, true), 400 * MIB, 0);
  /* h200x2-hostline: +290 / +380 / +660 us for a first segment of 48 /
   * 96 / 192 MiB */
  CU_ASSERT(fabs(exec_alloc_segment_host_s(48 * MIB, true) - 290e-6) < 10e-6);
  CU_ASSERT(fabs(exec_alloc_segment_host_s(192 * MIB, true) - 660e-6) < 10e-6);
}

/* How far the host runs ahead, and a device that fills up (recordStream
 * on): GPU 0 runs `steps` kernels of 0.7 ms, each writing a 12 MiB buffer
 * that a send to GPU 1 then reads last, so each is freed pending until
 * its send is done.  Host costs are nil: without a bound the host asks
 * for every buffer at once and each takes a segment of its own.  The
 * launch queue (exec_queue.h) holds the host to EXEC_LAUNCH_QUEUE kernels
 * ahead, so it asks for buffer k once kernel k - EXEC_LAUNCH_QUEUE has
 * ended, when the sends before it are done and their blocks cached: about
 * EXEC_LAUNCH_QUEUE segments (those pending, and a few in flight), not
 * `steps`.  usable_mib: what the device lets the allocator reserve; past
 * it, the allocator waits for the pending blocks and gives whole free
 * segments back before making one (release_cached_blocks). */
static double reserved_after_steps(uint32_t steps, double usable_mib) {
  topology *t = switch_topo(2, 100e9);
  t->record_stream = true;
  t->compute.host_s = t->compute.bwd_host_s = t->compute.copy_host_s = 0;
  t->compute.merge_host_s = 0;
  t->comm_host_s = t->p2p_host_s = t->p2p_op_host_s = 0;
  t->memory_gib = usable_mib / 1024;
  t->memory_headroom_gib = 0;
  plan *p = plan_new(2, false);
  /* an attention kernel of about 0.7 ms (3.4e10 FLOPs at 50 TFLOP/s) */
  plan_op op = {.kind = OP_ATTN, .batch = 1, .heads = 1, .head_dim = 128, .elem_bytes = 2,
                .sq = 8192, .sk = 8192, .pairs = 8192.0 * 8192};
  for (uint32_t k = 0; k < steps; k++) {
    uint32_t c = plan_compute(p, 0, k, &op);
    uint32_t x = plan_buf_out(p, c, 12 * MIB, "x");
    int64_t issued[2];
    plan_issued(p, issued);
    uint32_t send = plan_comm(p, k, COMM_P2P);
    plan_xfer_add(p, send, 0, 1, 1e6);
    plan_issue(p, send, issued, -1, false);
    plan_buf_reads(p, send, x);
  }
  plan_finish(p);
  exec_result *r = run(p, t, false);
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  double reserved = r->gpu_peak_reserved_bytes[0];
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
  return reserved;
}

/* The launch queue's floor at its boundary: a GPU's launch number
 * EXEC_LAUNCH_QUEUE (0-based) is the first that waits, for launch 0's end;
 * the one before it waits for nothing, and asked again after a later one
 * (the host's order is walked back) it still does not; a GPU with fewer
 * launches never waits. */
static uint64_t place(const plan *p, uint32_t task) {
  (void)p;
  return (uint64_t)task << 1 | 1;
}

static void t_launch_queue_floor(void) {
  uint32_t n = EXEC_LAUNCH_QUEUE + 2;
  plan *p = plan_new(2, false);
  for (uint32_t k = 0; k < n; k++) plan_copy(p, 0, k, 1e6);
  for (uint32_t k = 0; k < 3; k++) plan_copy(p, 1, k, 1e6);
  plan_finish(p);
  exec_queue *q = exec_queue_new(p, place);
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  exec_queue_ended(q, 0, 1.0);
  exec_queue_ended(q, 1, 2.0);
  CU_ASSERT_DOUBLE_EQUAL(exec_queue_host_floor(q, 0, EXEC_LAUNCH_QUEUE - 1, 9.0), 0, 0);
  CU_ASSERT_DOUBLE_EQUAL(exec_queue_host_floor(q, 0, EXEC_LAUNCH_QUEUE, 9.0), 1.0, 0);
  CU_ASSERT_DOUBLE_EQUAL(exec_queue_host_floor(q, 0, EXEC_LAUNCH_QUEUE + 1, 9.0), 2.0, 0);
  CU_ASSERT_DOUBLE_EQUAL(exec_queue_host_floor(q, 0, EXEC_LAUNCH_QUEUE - 1, 9.0), 0, 0);
  /* not ended yet: the GPU starts it now, when the host got there */
  CU_ASSERT_DOUBLE_EQUAL(exec_queue_host_floor(q, 0, EXEC_LAUNCH_QUEUE, 0.5), 0.5, 0);
  CU_ASSERT_DOUBLE_EQUAL(exec_queue_host_floor(q, 1, n + 2, 9.0), 0, 0);
  exec_queue_free(q);
  plan_free(p);
}

static void t_launch_queue_and_full_device(void) {
  /* below the queue's depth the host is held back only by its cudaMallocs
   * (0.2 ms each against 0.7 ms kernels): a segment for most buffers, more
   * with more steps */
  double below = reserved_after_steps(EXEC_LAUNCH_QUEUE - 122, 0) / (12 * MIB);
  double more = reserved_after_steps(EXEC_LAUNCH_QUEUE - 22, 0) / (12 * MIB);
  CU_ASSERT(more > below + 50);
  /* beyond it the host, held back by its queue, reuses the blocks of the
   * sends done by then: about EXEC_LAUNCH_QUEUE segments, however many
   * steps */
  double held = reserved_after_steps(1500, 0) / (12 * MIB);
  CU_ASSERT(held >= EXEC_LAUNCH_QUEUE && held <= EXEC_LAUNCH_QUEUE + 3);
  CU_ASSERT_DOUBLE_EQUAL(reserved_after_steps(2000, 0) / (12 * MIB), held, 0);
  /* a device of 600 segments' worth: the allocator fills it, then waits
   * for the pending blocks and makes its segments again from there */
  double full = reserved_after_steps(1500, 600 * 12);
  CU_ASSERT(full <= 600 * 12 * MIB && full >= 599 * 12 * MIB);
  /* the allocator alone: a block pending until 5 s, a request that does
   * not fit beside it; the host waits, the block's segment goes back, and
   * the next request settles what was ready by 5 s though asked at 1 s */
  exec_alloc *a = exec_alloc_new();
  exec_alloc_set_capacity(a, 20 * MIB);
  /* settled from 5 s on */
  CU_ASSERT_EQUAL(exec_alloc_release_after(a, exec_alloc_take(a, 12 * MIB), 5.0), 5.0);
  CU_ASSERT(!exec_alloc_synced(a));
  uint32_t b = exec_alloc_take(a, 12 * MIB);
  CU_ASSERT(exec_alloc_synced(a));
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 12 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_peak_reserved(a), 12 * MIB);
  uint32_t c = exec_alloc_take(a, 4 * MIB); /* a 20 MiB segment: past the device */
  /* ready before the 5 s the host waited for: by any settle */
  CU_ASSERT_EQUAL(exec_alloc_release_after(a, c, 4.0), -INFINITY);
  exec_alloc_release(a, b);
  exec_alloc_settle(a, 1.0);
  /* c's block was cached (its segment merged whole): 8 MiB reuse it */
  exec_alloc_take(a, 8 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 32 * MIB);
  exec_alloc_free(a);
}

/* Starts at one instant are applied in the program's order: a group the
 * host issues before a kernel (plan_overlap places it there) allocates
 * first even though the plan lists it after.  GPU 0 frees a 100 MiB block,
 * then at once a kernel asks for 40 MiB and the exchange for 100 MiB:
 * the exchange takes the cached block and the kernel a new segment (140
 * MiB reserved); in plan order the kernel would split the block and the
 * exchange need a segment of its own (200 MiB). */
static void t_starts_in_program_order(void) {
  topology *t = switch_topo(2, 100e9);
  t->compute.copy_host_s = 0;
  t->comm_host_s = t->p2p_host_s = 0;
  plan *p = plan_new(2, false);
  uint32_t before = plan_copy(p, 0, 0, 1e6);
  uint32_t x = plan_buf_new(p, 0, 100 * MIB, "freed");
  plan_buf_writes(p, before, x);
  g_autofree int64_t *issued = g_new(int64_t, 2);
  plan_issued(p, issued);
  uint32_t k = plan_copy(p, 0, 1, 1e6);
  plan_buf_writes(p, k, plan_buf_new(p, 0, 40 * MIB, "kernel's"));
  uint32_t g = plan_comm(p, 1, COMM_P2P);
  plan_xfer_add(p, g, 1, 0, 1e3);
  plan_issue(p, g, issued, -1, false);
  plan_buf_writes(p, g, plan_buf_new(p, 0, 100 * MIB, "received"));
  g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  g_array_append_val(ids, k);
  plan_overlap(p, ids, g);
  plan_finish(p);
  exec_opts o = {.keep_trace = true};
  exec_result *r = exec_run(p, t, &o);
  double k_at = -1, g_at = -1;
  for (guint i = 0; i < r->spans->len; i++) {
    const exec_span *sp = &g_array_index(r->spans, exec_span, i);
    if (sp->comm) g_at = sp->t0_s;
    else if (sp->gpu == 0 && sp->step == 1) k_at = sp->t0_s;
  }
  CU_ASSERT_DOUBLE_EQUAL(g_at, k_at, 0); /* one instant */
  CU_ASSERT_EQUAL(r->mem_errors, 0);
  CU_ASSERT_DOUBLE_EQUAL(r->gpu_peak_reserved_bytes[0], 140 * MIB, 0);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

static void t_alloc_reuse(void) {
  exec_alloc *a = exec_alloc_new();
  uint32_t x = exec_alloc_take(a, 100 * MIB);
  exec_alloc_release(a, x);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 100 * MIB); /* cached, not returned */
  uint32_t y = exec_alloc_take(a, 60 * MIB), z = exec_alloc_take(a, 40 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 100 * MIB); /* both from the split block */
  CU_ASSERT_EQUAL(exec_alloc_allocated(a), 100 * MIB);
  exec_alloc_release(a, y);
  exec_alloc_release(a, z); /* merged back into one 100 MiB block */
  uint32_t w = exec_alloc_take(a, 100 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 100 * MIB);
  exec_alloc_release(a, w);
  /* no split for a remainder of 1 MiB or less: the whole block */
  w = exec_alloc_take(a, 99.5 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_allocated(a), 100 * MIB);
  exec_alloc_release(a, w);
  /* best fit: of free blocks of 100 and 30 MiB, 25 MiB comes from the 30 */
  uint32_t big = exec_alloc_take(a, 100 * MIB), small = exec_alloc_take(a, 30 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 130 * MIB);
  exec_alloc_release(a, big);
  exec_alloc_release(a, small);
  exec_alloc_take(a, 25 * MIB);
  exec_alloc_take(a, 100 * MIB); /* the 100 MiB block is still whole */
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 130 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_peak_reserved(a), 130 * MIB);
  exec_alloc_free(a);
}

/* A block merged into its neighbour leaves a record that the next split
 * reuses: a thousand rounds of splitting a cached block in two and merging
 * it back hold three records, not two thousand, and the two live blocks of
 * a round are always two different handles. */
static void t_alloc_records_reused(void) {
  exec_alloc *a = exec_alloc_new();
  exec_alloc_release(a, exec_alloc_take(a, 100 * MIB));
  for (int i = 0; i < 1000; i++) {
    uint32_t y = exec_alloc_take(a, 60 * MIB), z = exec_alloc_take(a, 40 * MIB);
    CU_ASSERT_NOT_EQUAL(y, z);
    CU_ASSERT_EQUAL(exec_alloc_allocated(a), 100 * MIB);
    exec_alloc_release(a, y);
    exec_alloc_release(a, z);
  }
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 100 * MIB);
  CU_ASSERT_TRUE(exec_alloc_records(a) <= 3);
  exec_alloc_free(a);
}

/* Fragmentation: two 40 MiB tensors in segments of their own; the first
 * freed, a 60 MiB request cannot use its 40 MiB: a new segment, 140 MiB
 * reserved for 100 MiB allocated. */
static void t_alloc_fragmentation(void) {
  exec_alloc *a = exec_alloc_new();
  uint32_t x = exec_alloc_take(a, 40 * MIB);
  exec_alloc_take(a, 40 * MIB);
  exec_alloc_release(a, x);
  exec_alloc_take(a, 60 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_allocated(a), 100 * MIB);
  CU_ASSERT_EQUAL(exec_alloc_reserved(a), 140 * MIB);
  exec_alloc_free(a);
}

/* Through exec: a plan whose buffers fragment reports a peak reserved
 * above its peak allocated, per GPU and overall; 4 U of ring backward's
 * float32 dK/dV come and go beside larger and smaller ones. */
static void t_reserved_in_results(void) {
  topology *t = switch_topo(1, 1e9);
  plan *p = plan_new(1, false);
  uint32_t a = plan_copy(p, 0, 0, 1e6), b = plan_copy(p, 0, 0, 1e6), c = plan_copy(p, 0, 0, 1e6);
  uint32_t x = plan_buf_out(p, a, 40 * MIB, "x");
  uint32_t y = plan_buf_out(p, a, 40 * MIB, "y");
  plan_buf_reads(p, b, y);
  plan_buf_reads(p, c, y);
  (void)x;
  plan_buf_out(p, b, 60 * MIB, "z"); /* x is free by then: 40 MiB cached, unused */
  plan_finish(p);
  exec_result *r = run(p, t, false);
  CU_ASSERT_DOUBLE_EQUAL(r->peak_bytes, 100 * MIB, 0);
  CU_ASSERT_DOUBLE_EQUAL(r->peak_reserved_bytes, 140 * MIB, 0);
  CU_ASSERT_DOUBLE_EQUAL(r->gpu_peak_reserved_bytes[0], 140 * MIB, 0);
  exec_result_free(r);
  plan_free(p);
  topo_free(t);
}

/* Tensors the program makes separately are separate blocks of the
 * caching allocator, so a freed block of one size is reused by the next
 * request of that size.  USP of Ulysses degree 2 on 2 GPUs (one ring
 * rank), forward at 4K tokens per GPU: the ring's bf16 output (U = 32
 * MiB) takes the 32 MiB block its last kernel's `block_out` leaves and
 * its float32 log-sum-exp (0.5 MiB) a small-pool segment, so the
 * reserved peak is within one 2 MiB small segment of the allocated
 * (declared as one 32.5 MiB buffer: a new segment, +35 MiB).  TokenRing
 * backward and forward+backward on 2 GPUs at 16K tokens per GPU, both
 * masks: flash backward's dq, dk, dv (U = 128 MiB each, half that for
 * causal half blocks) are reused step after step, reserved within 1% of
 * allocated (declared as one 384 MiB buffer, a later 256 MiB float32 dQ
 * partial splits it and later steps take new segments: +2% to +8%).
 * recordStream off: the allocator's reuse alone (the one-rank programs
 * of calibration/h200x2-mem/emulated, reserved +10% to +12% with one
 * buffer, within 4.4% with the separate ones). */
static void t_separate_tensors_reuse_blocks(void) {
  topology *t = switch_topo(2, 100e9);
  t->record_stream = false;
  double u, lse;
  workload w = mha(2, false, PASS_FWD, &u, &lse);
  sched_opt_set_num(&w, &usp_opt_ulysses, 2);
  exec_result *r = run_sched(&sched_usp, &w, t);
  CU_ASSERT_DOUBLE_EQUAL(u, 32 * MIB, 0);
  CU_ASSERT_TRUE(r->peak_reserved_bytes >= r->peak_bytes);
  CU_ASSERT_TRUE(r->peak_reserved_bytes <= r->peak_bytes + 2 * MIB);
  exec_result_free(r);
  for (pass_kind ps = PASS_BWD; ps <= PASS_FWDBWD; ps++)
    for (int causal = 0; causal < 2; causal++) {
      workload tw = mha(2, causal, ps, &u, &lse);
      tw.seq_len = 2 * 16384;
      r = run_sched(&sched_tokenring, &tw, t);
      CU_ASSERT_TRUE(r->peak_reserved_bytes >= r->peak_bytes);
      CU_ASSERT_TRUE(r->peak_reserved_bytes <= 1.01 * r->peak_bytes);
      exec_result_free(r);
    }
  topo_free(t);
}

/* USP with a ring of both GPUs (u = 1), backward alone, full mask, 2 GPUs,
 * recordStream off: calibrate.py's USP (USP.attend_bwd) and
 * ring_flash_attn_backward hold K and V, their float32 sums and the
 * received ones as two tensors each (`nk, nv`, `dk, dv`, `ndk, ndv`;
 * `next_k, next_v`, `dk = block_dk_buffer + next_dk` and the same for dv)
 * and return dK and dV apart (`dk.to(bfloat16)`, `dv.to(bfloat16)`).  At
 * the peak, step 1's add: the sum sent at step 0 and the new one (dK and
 * dV, 2U each: two of each), the arrived dK and dV (2U each), the next K
 * and V (U each).  Reserved: at that add flash backward's float32 dQ
 * accumulator (2U) has just been freed, and the new dK sum takes its
 * block, so only dV's makes a segment: 26U and the log-sum-exp's small
 * segment, as allocated; a 4U tensor of both could not take it, and one
 * more segment of 2U stays (28U: the one-rank records of
 * calibration/h200x2-mem/emulated, USP 1 x 4 and 1 x 8
 * forward+backward, reserved +10.7% as one tensor, within 0.1% as two). */
static void t_usp_kv_apart(void) {
  topology *t = switch_topo(2, 100e9);
  t->record_stream = false;
  double u, lse;
  workload w = mha(2, false, PASS_BWD, &u, &lse);
  sched_opt_set_num(&w, &usp_opt_ulysses, 1);
  exec_result *r = run_sched(&sched_usp, &w, t);
  CU_ASSERT_DOUBLE_EQUAL(u, 32 * MIB, 0);
  CU_ASSERT_CLOSE(r->gpu_peak_bytes[0], 26 * u + lse, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->gpu_peak_reserved_bytes[0], 26 * u + 2 * MIB, 0);
  static const struct {
    const char *name;
    double units;
    uint32_t count;
  } live[] = {{"dk (float32)", 4, 2}, {"dv (float32)", 4, 2}, {"next_dk", 2, 1},
              {"next_dv", 2, 1},      {"next_k", 1, 1},       {"next_v", 1, 1}};
  for (size_t i = 0; i < G_N_ELEMENTS(live); i++) {
    uint32_t count;
    CU_ASSERT_DOUBLE_EQUAL(live_at_peak(r, 0, live[i].name, &count), live[i].units * u, 0);
    CU_ASSERT_EQUAL(count, live[i].count);
  }
  exec_result_free(r);
  /* the pass's gradients: dq, dk, dv, three kept tensors of U */
  plan *p = sched_usp.build(&w, t, false);
  uint32_t kept = 0;
  for (uint32_t b = 0; b < plan_buf_count(p); b++) {
    const plan_buf *pb = plan_buf_at(p, b);
    if (!pb->keep || pb->input) continue;
    CU_ASSERT_TRUE(!strcmp(plan_buf_name(p, pb), "dq") || !strcmp(plan_buf_name(p, pb), "dk") || !strcmp(plan_buf_name(p, pb), "dv"));
    CU_ASSERT_DOUBLE_EQUAL(pb->bytes, u, 0);
    kept++;
  }
  CU_ASSERT_EQUAL(kept, 3);
  plan_free(p);
  topo_free(t);
}

int main(void) {
  static const test_case cases[] = {TEST(t_lifetimes),      TEST(t_use_order),   TEST(t_buffer_names), TEST(t_errors),
                                    TEST(t_delayed_transfer), TEST(t_allgather_peak),
                                    TEST(t_ulysses_peak),   TEST(t_ring_peak),
                                    TEST(t_lockstep_expand), TEST(t_ring_backward_peak),
                                    TEST(t_zigzag_backward_two_accumulators),
                                    TEST(t_ulysses_forward_keeps_saved),
                                    TEST(t_allgather_backward_peak), TEST(t_tokenring_backward_peak),
                                    TEST(t_usp_one_ring_rank_backward),
                                    TEST(t_linear_intra_workspace), TEST(t_linear_ring_peak),
                                    TEST(t_receive_buffer_before_kernel), TEST(t_tasp_gather),
                                    TEST(t_usp_contiguous_kv), TEST(t_lasp_intra_outputs),
                                    TEST(t_usp_saves_ring_output), TEST(t_separate_tensors_reuse_blocks),
                                    TEST(t_usp_kv_apart),
                                    TEST(t_phases),
                                    TEST(t_use_on), TEST(t_alloc_rounding), TEST(t_alloc_reuse),
                                    TEST(t_alloc_pending), TEST(t_alloc_pending_order),
                                    TEST(t_record_stream), TEST(t_record_stream_forward),
                                    TEST(t_record_stream_idle_gpu), TEST(t_record_stream_host_mallocs),
                                    TEST(t_launch_queue_floor), TEST(t_launch_queue_and_full_device), TEST(t_lasp2_backward_temporaries), TEST(t_stripe_backward_sums), TEST(t_record_stream_after_copies),
                                    TEST(t_starts_in_program_order), TEST(t_alloc_records_reused),
                                    TEST(t_alloc_fragmentation), TEST(t_reserved_in_results),
                                    {NULL, NULL}};
  return test_run("mem", cases);
}
