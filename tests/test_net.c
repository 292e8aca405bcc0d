/* net: flow completion times under sharing, caps, latency; counters. */
#include <math.h>

#include "net.h"
#include "testutil.h"

static double done_at[16];
static engine *g_eng; /* the engine of the running test */

static void on_done(void *ctx, uint64_t tag, const net_member *m, uint32_t count) {
  (void)m;
  (void)count;
  (void)ctx;
  done_at[tag] = engine_now(g_eng);
}

/* One flow of 1 GB on a 100 GB/s channel with 5 us latency: 10 ms + 5 us. */
static void t_single_flow(void) {
  engine *e = g_eng = engine_new();
  double cap[] = {100e9};
  net *n = net_new(e, 1, cap);
  uint32_t r[] = {0};
  net_flow_start(n, r, 1, 5e-6, 1e9, 0, on_done, e, 0);
  engine_run(e);
  CU_ASSERT_DOUBLE_EQUAL(done_at[0], 0.01 + 5e-6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(net_chan_bytes(n, 0), 1e9, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(net_chan_busy_s(n, 0), 0.01, 1e-12);
  net_free(n);
  engine_free(e);
}

/* Two flows on one channel, 1 GB and 3 GB at 100 GB/s: they share 50/50
 * until the first ends at 20 ms; the second then has 2 GB left at full
 * rate: ends at 40 ms. */
static void t_sharing_then_speedup(void) {
  engine *e = g_eng = engine_new();
  double cap[] = {100e9};
  net *n = net_new(e, 1, cap);
  uint32_t r[] = {0};
  net_flow_start(n, r, 1, 0, 1e9, 0, on_done, e, 0);
  net_flow_start(n, r, 1, 0, 3e9, 0, on_done, e, 1);
  engine_run(e);
  CU_ASSERT_DOUBLE_EQUAL(done_at[0], 0.02, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(done_at[1], 0.04, 1e-12);
  net_free(n);
  engine_free(e);
}

static void start_late(void *ctx, uint64_t arg) {
  net *n = ctx;
  static const uint32_t r[] = {0};
  net_flow_start(n, r, 1, 0, 1e9, 0, on_done, NULL, arg);
}


/* A flow joining later slows the first: 2 GB alone at 100 GB/s for 10 ms
 * (1 GB sent), then 1 GB each at 50 GB/s: both end at 30 ms. */
static void t_late_join(void) {
  engine *e = g_eng = engine_new();
  double cap[] = {100e9};
  net *n = net_new(e, 1, cap);
  uint32_t r[] = {0};
  net_flow_start(n, r, 1, 0, 2e9, 0, on_done, NULL, 0);
  engine_at(e, 0.01, start_late, n, 1);
  engine_run(e);
  CU_ASSERT_DOUBLE_EQUAL(done_at[0], 0.03, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(done_at[1], 0.03, 1e-12);
  net_free(n);
  engine_free(e);
}

/* Per-flow cap below the channel: 1 GB capped at 25 GB/s takes 40 ms, and
 * a second uncapped flow on the same channel gets the other 75 GB/s. */
static void t_cap(void) {
  engine *e = g_eng = engine_new();
  double cap[] = {100e9};
  net *n = net_new(e, 1, cap);
  uint32_t r[] = {0};
  net_flow_start(n, r, 1, 0, 1e9, 25e9, on_done, e, 0);
  net_flow_start(n, r, 1, 0, 1.5e9, 0, on_done, e, 1);
  engine_run(e);
  CU_ASSERT_DOUBLE_EQUAL(done_at[0], 0.04, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(done_at[1], 0.02, 1e-12);
  net_free(n);
  engine_free(e);
}

/* Independent components keep their rates: a flow on channel 1 is not
 * slowed by flows on channel 0, and each solve touches only what changed. */
static void t_components_independent(void) {
  engine *e = g_eng = engine_new();
  double cap[] = {100e9, 10e9};
  net *n = net_new(e, 2, cap);
  uint32_t r0[] = {0}, r1[] = {1};
  net_flow_start(n, r1, 1, 0, 1e9, 0, on_done, e, 0);       /* 100 ms alone */
  for (int i = 1; i <= 4; i++) net_flow_start(n, r0, 1, 0, 1e9, 0, on_done, e, (uint64_t)i);
  engine_run(e);
  CU_ASSERT_DOUBLE_EQUAL(done_at[0], 0.1, 1e-12);
  for (int i = 1; i <= 4; i++) CU_ASSERT_DOUBLE_EQUAL(done_at[i], 0.04, 1e-12);
  net_free(n);
  engine_free(e);
}

/* Zero bytes: delivered after the latency alone. */
static void t_zero_bytes(void) {
  engine *e = g_eng = engine_new();
  double cap[] = {100e9};
  net *n = net_new(e, 1, cap);
  uint32_t r[] = {0};
  net_flow_start(n, r, 1, 7e-6, 0, 0, on_done, e, 0);
  engine_run(e);
  CU_ASSERT_DOUBLE_EQUAL(done_at[0], 7e-6, 1e-15);
  CU_ASSERT_DOUBLE_EQUAL(net_chan_bytes(n, 0), 0, 0);
  net_free(n);
  engine_free(e);
}

int main(void) {
  static const test_case cases[] = {TEST(t_single_flow), TEST(t_sharing_then_speedup),
                                    TEST(t_late_join), TEST(t_cap),
                                    TEST(t_components_independent), TEST(t_zero_bytes),
                                    {NULL, NULL}};
  return test_run("net", cases);
}
