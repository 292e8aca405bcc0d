/* exec_mem_class: a lockstep plan's memory replayed once per class of
 * alike GPUs against the replay GPU by GPU (exec_opts.mem_per_gpu, the
 * reference): every memory figure equal, exactly, for every scheduler,
 * both masks and every pass on several topologies and sizes; the classes
 * of a hand-made plan whose GPUs differ in each way a replay can (a use of
 * one GPU's copy, a task and a buffer of one GPU, an input of one GPU),
 * with their peaks worked out by hand and against its expansion. */
#include "exec.h"
#include "exec_mem_class.h"
#include "plan_buf.h"
#include "scenario.h"
#include "sched/sched.h"
#include "testutil.h"

#define MIB (1024.0 * 1024.0)

static const plan_buf_use *plan_use(const void *p, uint32_t i) { return plan_buf_use_at(p, i); }

/* p's classes from its own uses (as exec_mem forms them where no group is
 * held back by a kernel). */
static exec_mem_classes *classes_of(const plan *p) {
  uint32_t nu = plan_buf_use_count(p), nt = p->tasks->len;
  g_autofree uint32_t *off = g_new0(uint32_t, nt + 1), *of = g_new(uint32_t, nu + 1);
  for (uint32_t i = 0; i < nu; i++) off[plan_buf_use_at(p, i)->task + 1]++;
  for (uint32_t t = 0; t < nt; t++) off[t + 1] += off[t];
  g_autofree uint32_t *fill = g_memdup2(off, (nt + 1) * sizeof(uint32_t));
  for (uint32_t i = 0; i < nu; i++) of[fill[plan_buf_use_at(p, i)->task]++] = i;
  return exec_mem_classes_new(p, off, of, plan_use, p, NULL, false);
}

/* Every memory figure of a and b is the same (bit for bit). */
static bool same_memory(const exec_result *a, const exec_result *b) {
  bool ok = a->n_gpus == b->n_gpus && a->peak_bytes == b->peak_bytes &&
            a->peak_gpu == b->peak_gpu && a->peak_reserved_bytes == b->peak_reserved_bytes &&
            a->mem_errors == b->mem_errors && a->peak_live->len == b->peak_live->len;
  for (uint32_t g = 0; ok && g < a->n_gpus; g++)
    ok = a->gpu_peak_bytes[g] == b->gpu_peak_bytes[g] &&
         a->gpu_peak_reserved_bytes[g] == b->gpu_peak_reserved_bytes[g];
  for (guint i = 0; ok && i < a->peak_live->len; i++) {
    const exec_mem_live *x = &g_array_index(a->peak_live, exec_mem_live, i);
    const exec_mem_live *y = &g_array_index(b->peak_live, exec_mem_live, i);
    ok = x->gpu == y->gpu && x->count == y->count && strcmp(x->name, y->name) == 0 &&
         x->bytes == y->bytes;
  }
  return ok;
}

static exec_result *run(const plan *p, const topology *t, bool per_gpu) {
  exec_opts o = {.mem_per_gpu = per_gpu};
  return exec_run(p, t, &o);
}

typedef struct {
  uint32_t points;      /* points run */
  uint32_t full, one;   /* full-mask lockstep plans; of them one class */
} tally;

/* One point: the lockstep plan's memory by class and GPU by GPU. */
static void compare_point(const char *topo, const char *sp, const char *seq, const char *sched,
                          const char *mask, const char *pass, const char *attention, tally *n) {
  scenario_overrides ov = {.topology = topo, .sched = sched, .seq = seq, .sp = sp,
                           .mask = mask, .pass = pass, .attention = attention};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, &ov, &err);
  if (!s) return; /* a scheduler that cannot run this shape here */
  const scenario_point *pt = &g_array_index(s->points, scenario_point, 0);
  if (!pt->na) {
    plan *p = pt->sched->build(&pt->w, s->topo, false);
    exec_result *x = run(p, s->topo, false), *y = run(p, s->topo, true);
    bool ok = same_memory(x, y);
    if (!ok)
      fprintf(stderr, "\n  %s sp %s %s %s %s: by class %.17g B, per GPU %.17g B\n", topo, sp,
              sched, mask, pass, x->peak_bytes, y->peak_bytes);
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(y->mem_errors, 0);
    n->points++;
    if (p->has_lockstep && !pt->w.causal) {
      n->full++;
      exec_mem_classes *c = classes_of(p);
      n->one += c->n == 1;
      exec_mem_classes_free(c);
    }
    exec_result_free(x);
    exec_result_free(y);
    plan_free(p);
  }
  scenario_free(s);
}

static void t_schedulers_by_class_equal_per_gpu(void) {
  /* h200x4-tool: kernels hold back the groups beside them (moved writes)
   * and recordStream's host clock; nodes over NIC rails; 24: rings that
   * are not whole nodes */
  static const struct { const char *topo, *sp, *seq; } topos[] = {
      {"h100x8", "8", "64K"}, {"h200x4-tool", "4", "32K"}, {"h100x8x2", "16", "192K"},
      {"h100x8x4", "32", "192K"}, {"h100x8x4", "24", "192K"}, {"mi300x8", "8", "64K"}};
  static const char *const passes[] = {"fwd", "bwd", "fwdbwd"};
  tally n = {0};
  for (size_t t = 0; t < G_N_ELEMENTS(topos); t++)
    for (const sched_ops *const *s = sched_all(); *s; s++)
      for (int causal = 0; causal < 2; causal++)
        for (size_t ps = 0; ps < G_N_ELEMENTS(passes); ps++) {
          const char *att = (*s)->attention & SCHED_RUNS(ATTN_SOFTMAX) || !(*s)->attention
                                ? "softmax" : "linear";
          compare_point(topos[t].topo, topos[t].sp, topos[t].seq, (*s)->name,
                        causal ? "causal" : "full", passes[ps], att, &n);
        }
  /* most points ran, and most full-mask lockstep plans were one class
   * (not USP's and Ulysses-and-P2P's over several nodes: their groups of
   * GPUs are tasks of their own, which may end at different times) */
  CU_ASSERT(n.points >= 400);
  CU_ASSERT(n.full >= 120);
  CU_ASSERT(n.one >= n.full * 3 / 4);
}

/* A full-mask ring forward is one class at every size: its tasks and
 * groups touch every GPU alike. */
static void t_ring_one_class(void) {
  for (uint32_t gpus = 4; gpus <= 64; gpus *= 4) {
    topology *t = test_switch(gpus, 100e9, 1e-6);
    workload w = {.gpus = gpus, .seq_len = 1024 * gpus, .batch = 1, .heads = 32, .kv_heads = 8,
                  .head_dim = 128, .elem_bytes = 2, .grad_bytes = 4, .dtype = "bf16",
                  .pass = PASS_FWDBWD};
    plan *p = sched_ring.build(&w, t, false);
    CU_ASSERT_TRUE(p->has_lockstep);
    exec_mem_classes *c = classes_of(p);
    CU_ASSERT_EQUAL(c->n, 1);
    CU_ASSERT_EQUAL(c->size[0], gpus);
    exec_mem_classes_free(c);
    plan_free(p);
    topo_free(t);
  }
}

/* Six GPUs of a lockstep plan: a copy on all writes `a` (3 MiB each); a
 * ring group holds GPU 1's `a` while it runs and writes `recv` (2 MiB) on
 * every GPU, which a second group reads by a use per GPU, each naming its
 * own copy (and so an empty buffer nothing writes: an error on each GPU,
 * once per GPU, not once per use of its class); a copy on all reads
 * `recv`; then GPU 2 alone reads `recv` and writes `b` (5 MiB); GPU 3
 * holds an input of 1 MiB; `unused` is declared on every GPU and never
 * used (an error on each).  Classes {0, 4, 5}, {1}, {2}, {3}; peaks 3, 5,
 * 7 and 4 MiB. */
static plan *split_plan(void) {
  plan *p = plan_new(6, false);
  uint32_t a = plan_buf_new(p, PLAN_ALL, 3 * MIB, "a");
  plan_buf_new(p, PLAN_ALL, MIB, "unused");
  plan_buf_input(p, 3, MIB, "in3");
  plan_op op = {.kind = OP_COPY, .bytes = 1e6};
  uint32_t t0 = plan_compute(p, PLAN_ALL, 0, &op);
  plan_buf_writes(p, t0, a);
  plan_pair pairs[6];
  for (uint32_t g = 0; g < 6; g++) pairs[g] = (plan_pair){g, (g + 1) % 6};
  uint32_t c = plan_comm(p, 1, COMM_P2P);
  plan_xfer_pattern(p, c, plan_pattern(p, pairs, 6), 1e6, 1);
  plan_issue(p, c, NULL, -1, false);
  plan_buf_use_on(p, c, a, 1, false, PLAN_BUF_DURING);
  uint32_t recv = plan_buf_out(p, c, 2 * MIB, "recv");
  /* a second group reads each GPU's `recv` by a use of its own (as a
   * ring step sends each GPU's own sum) */
  uint32_t c2 = plan_comm(p, 1, COMM_P2P);
  plan_xfer_pattern(p, c2, plan_pattern(p, pairs, 6), 1e6, 1);
  plan_issue(p, c2, NULL, -1, false);
  plan_dep(p, c, c2);
  uint32_t blank = plan_buf_new(p, PLAN_ALL, 0, "never written");
  for (uint32_t g = 0; g < 6; g++) {
    plan_buf_use_on(p, c2, recv, g, false, PLAN_BUF_DURING);
    plan_buf_use_on(p, c2, blank, g, false, PLAN_BUF_DURING);
  }
  uint32_t t1 = plan_compute(p, PLAN_ALL, 2, &op);
  plan_dep(p, c, t1);
  plan_buf_reads(p, t1, recv);
  uint32_t t2 = plan_copy(p, 2, 3, 1e6);
  plan_buf_reads(p, t2, recv);
  plan_buf_out(p, t2, 5 * MIB, "b");
  plan_finish(p);
  return p;
}

static void t_split_classes(void) {
  plan *p = split_plan();
  exec_mem_classes *c = classes_of(p);
  static const uint32_t want[] = {0, 1, 2, 3, 0, 0};
  CU_ASSERT_EQUAL(c->n, 4);
  for (uint32_t g = 0; g < 6; g++) CU_ASSERT_EQUAL(c->of[g], want[g]);
  CU_ASSERT_EQUAL(c->size[0], 3);
  CU_ASSERT_EQUAL(c->rep[3], 3);
  exec_mem_classes_free(c);

  topology *t = test_switch(6, 100e9, 1e-6);
  plan *q = plan_expand(p);
  exec_result *x = run(p, t, false), *y = run(p, t, true), *z = run(q, t, false);
  CU_ASSERT_TRUE(same_memory(x, y));
  CU_ASSERT_TRUE(same_memory(x, z));
  static const double peak[] = {3, 5, 7, 4, 3, 3};
  for (uint32_t g = 0; g < 6; g++) CU_ASSERT_DOUBLE_EQUAL(x->gpu_peak_bytes[g], peak[g] * MIB, 0);
  CU_ASSERT_EQUAL(x->peak_gpu, 2);
  CU_ASSERT_EQUAL(x->mem_errors, 12); /* `unused` and `never written`, once per GPU */
  /* GPU 1's peak: its `a` held through the group beside `recv` */
  uint32_t on1 = 0;
  for (guint i = 0; i < x->peak_live->len; i++)
    on1 += g_array_index(x->peak_live, exec_mem_live, i).gpu == 1;
  CU_ASSERT_EQUAL(on1, 2);
  exec_result_free(x);
  exec_result_free(y);
  exec_result_free(z);
  plan_free(q);
  plan_free(p);
  topo_free(t);
}

int main(void) {
  static const test_case cases[] = {TEST(t_ring_one_class), TEST(t_split_classes),
                                    TEST(t_schedulers_by_class_equal_per_gpu), {NULL, NULL}};
  return test_run("mem_class", cases);
}
