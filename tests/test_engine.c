/* engine: events run in (time, insertion) order, deterministically. */
#include <glib.h>
#include <math.h>

#include "engine.h"
#include "testutil.h"

static GArray *order;

static void record(void *ctx, uint64_t arg) {
  (void)ctx;
  g_array_append_val(order, arg);
}

static void chain(void *ctx, uint64_t arg) {
  engine *e = ctx;
  g_array_append_val(order, arg);
  if (arg < 5) engine_at(e, engine_now(e) + 1.0, chain, e, arg + 1);
}

static void t_time_then_insertion_order(void) {
  order = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  engine *e = engine_new();
  /* scheduled out of order, with ties at t = 2 */
  engine_at(e, 3.0, record, NULL, 30);
  engine_at(e, 2.0, record, NULL, 20);
  engine_at(e, 1.0, record, NULL, 10);
  engine_at(e, 2.0, record, NULL, 21);
  engine_at(e, 2.0, record, NULL, 22);
  engine_run(e);
  uint64_t want[] = {10, 20, 21, 22, 30};
  CU_ASSERT_EQUAL(order->len, 5);
  for (guint i = 0; i < 5 && i < order->len; i++)
    CU_ASSERT_EQUAL(g_array_index(order, uint64_t, i), want[i]);
  CU_ASSERT_EQUAL(engine_events(e), 5);
  CU_ASSERT_DOUBLE_EQUAL(engine_now(e), 3.0, 0);
  engine_free(e);
  g_array_free(order, TRUE);
}

static void t_events_scheduled_from_events(void) {
  order = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  engine *e = engine_new();
  engine_at(e, 0.5, chain, e, 0);
  engine_run(e);
  CU_ASSERT_EQUAL(order->len, 6);
  CU_ASSERT_DOUBLE_EQUAL(engine_now(e), 5.5, 1e-12);
  engine_free(e);
  g_array_free(order, TRUE);
}

static void t_past_clamped_to_now(void) {
  order = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  engine *e = engine_new();
  engine_at(e, 1.0, chain, e, 5);     /* records 5 at t = 1 */
  engine_run(e);
  engine_at(e, 0.25, record, NULL, 7); /* in the past: runs at now */
  engine_run(e);
  CU_ASSERT_DOUBLE_EQUAL(engine_now(e), 1.0, 0);
  engine_free(e);
  g_array_free(order, TRUE);
}

/* Many events with random times and many ties: the order is sorted by
 * time and, within a time, by insertion; two runs agree exactly. */
static void t_heap_order_many(void) {
  GArray *runs[2];
  for (int run = 0; run < 2; run++) {
    order = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    engine *e = engine_new();
    GRand *r = g_rand_new_with_seed(42);
    for (uint64_t i = 0; i < 5000; i++)
      engine_at(e, (double)g_rand_int_range(r, 0, 50), record, NULL, i);
    engine_run(e);
    g_rand_free(r);
    engine_free(e);
    runs[run] = order;
  }
  CU_ASSERT_EQUAL(runs[0]->len, 5000);
  GRand *r = g_rand_new_with_seed(42);
  double *t = g_new(double, 5000);
  for (int i = 0; i < 5000; i++) t[i] = g_rand_int_range(r, 0, 50);
  g_rand_free(r);
  for (guint i = 1; i < runs[0]->len; i++) {
    uint64_t a = g_array_index(runs[0], uint64_t, i - 1), b = g_array_index(runs[0], uint64_t, i);
    CU_ASSERT(t[a] < t[b] || (t[a] == t[b] && a < b));
  }
  CU_ASSERT_EQUAL(memcmp(runs[0]->data, runs[1]->data, 5000 * sizeof(uint64_t)), 0);
  g_free(t);
  g_array_free(runs[0], TRUE);
  g_array_free(runs[1], TRUE);
}

int main(void) {
  static const test_case cases[] = {TEST(t_time_then_insertion_order),
                                    TEST(t_events_scheduled_from_events),
                                    TEST(t_past_clamped_to_now), TEST(t_heap_order_many),
                                    {NULL, NULL}};
  return test_run("engine", cases);
}
