/* scenario: files, overrides, sweep expansion and the errors users see. */
#include <math.h>

#include <glib/gstdio.h>
#include <unistd.h>

#include "docs.h"
#include "jsonio.h"
#include "layers.h"
#include "model.h"
#include "scenario.h"
#include "sim.h"
#include "testutil.h"
#include "verdict.h"

static void t_h100x8_points(void) {
  scenario_overrides ov = {0};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load("scenarios/h100x8.json", &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 6 * 3 * 7);
  const scenario_point *p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(p->w.seq_len, 32 * 1024);
  CU_ASSERT_EQUAL(p->w.gpus, 2);
  CU_ASSERT_EQUAL(p->w.kv_heads, 8);
  CU_ASSERT_TRUE(p->w.causal);
  CU_ASSERT_STRING_EQUAL(p->sched->name, "ring");
  scenario_free(s);
}

/* Options override the file; a missing ring is added as a hidden baseline. */
static void t_overrides(void) {
  scenario_overrides ov = {.sched = "tasp", .seq = "1M", .sp = "8", .mask = "full",
                           .heads = "16", .kv_heads = "16", .head_dim = "64", .batch = "2"};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load("scenarios/h100x8.json", &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 2);
  const scenario_point *p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(p->w.seq_len, 1024 * 1024);
  CU_ASSERT_EQUAL(p->w.batch, 2);
  CU_ASSERT_EQUAL(p->w.head_dim, 64);
  CU_ASSERT_FALSE(p->w.causal);
  CU_ASSERT_FALSE(p->hidden);
  CU_ASSERT_TRUE(g_array_index(s->points, scenario_point, 1).hidden);
  scenario_free(s);
}

static void t_topology_only(void) {
  scenario_overrides ov = {.topology = "mi300x8", .seq = "32K"};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(NULL, &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 3);  /* ring, zigzag, tasp at SP 8 */
  CU_ASSERT_EQUAL(g_array_index(s->points, scenario_point, 0).w.gpus, 8);
  scenario_free(s);
}

static void expect_error(const char *file, scenario_overrides ov, const char *needle) {
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(file, &ov, &err);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NOT_NULL_FATAL(err);
  bool ok = strstr(err->message, needle) != NULL;
  if (!ok) fprintf(stderr, "expected \"%s\" in \"%s\"\n", needle, err->message);
  CU_ASSERT_TRUE(ok);
  scenario_free(s);
}

static void t_errors(void) {
  scenario_overrides none = {0};
  expect_error("tests/bad/scen_sp.json", none,
               "tests/bad/scen_sp.json: field 'sp': SP degree 16 exceeds the 8 GPUs");
  expect_error("tests/bad/scen_sched.json", none,
               "field 'schedulers': unknown scheduler \"ulysses2\" (did you mean ulysses?); expected one of: ring, zigzag, tasp");
  expect_error("tests/bad/scen_seq.json", none,
               "field 'seq_len': expected a positive token count");
  expect_error("tests/bad/scen_indivisible.json", none,
               "field 'seq_len': zigzag at seq_len 1000, SP 8: sequence length 1000 is not divisible");
  expect_error("tests/bad/scen_heads.json", none, "field 'model.heads': expected a whole number from 1 to 1024");
  expect_error("tests/bad/scen_kv.json", none, "field 'model.kv_heads': expected a divisor");
  expect_error("tests/bad/scen_topology.json", none, "field 'topology': topology file");
  expect_error("tests/bad/scen_typo.json", none, "field 'seqlen': unknown field");
  expect_error("tests/bad/scen_mask.json", none, "field 'mask': expected full or causal");
  scenario_overrides sp = {.sp = "0"};
  expect_error("scenarios/h100x8.json", sp, "command line: option '--sp': expected a whole number from 1 to 16384, got \"0\"");
  scenario_overrides seq = {.seq = "-4K"};
  expect_error("scenarios/h100x8.json", seq, "option '--seq'");
  scenario_overrides nothing = {0};
  expect_error(NULL, nothing, "no scenario file and no --topology");
  expect_error("tests/bad/scen_attention.json", none,
               "field 'model.attention': expected softmax or linear, got \"quadratic\"");
  expect_error("tests/bad/scen_layers.json", none, "field 'model.layers[0].count'");
  expect_error("tests/bad/scen_linear_sched.json", none,
               "field 'schedulers': zigzag does not run linear-attention layers (the model has 1 "
               "linear); schedulers that do: ring, ulysses, lasp, lasp2, lasp2h");
  expect_error("tests/bad/scen_hybrid_sched.json", none,
               "field 'schedulers': lasp2 does not run softmax-attention layers (the model has 3 "
               "linear + 1 softmax)");
  scenario_overrides lin = {.attention = "linear", .sched = "tasp"};
  expect_error("scenarios/h100x8.json", lin, "option '--sched': tasp does not run linear");
  scenario_overrides bad_attn = {.attention = "cosine"};
  expect_error("scenarios/h100x8.json", bad_attn,
               "command line: option '--attention': expected softmax or linear");
}

/* model.layers adds up per kind (3 + 3 linear, 1 + 1 softmax: count
 * defaults to 1); --attention makes every layer that kind; a point's
 * figures are the sum over its layers, each kind simulated once. */
static void t_layers(void) {
  scenario_overrides none = {0};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load("tests/data/scen_hybrid.json", &none, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const scenario_point *p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_LINEAR), 6);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_SOFTMAX), 2);
  g_autofree char *mix = layers_text(&p->w);
  CU_ASSERT_STRING_EQUAL(mix, "6 linear + 2 softmax");
  exec_opts o = {0};
  sim_result *all = sim_run_point(s->topo, p, &o);
  double step = 0, flops = 0, bytes0 = 0, compute = 0;
  for (int k = 0; k < ATTN_KINDS; k++) {
    scenario_point one = *p;
    one.w = layers_one(&p->w, (attn_kind)k);
    sim_result *r = sim_run_point(s->topo, &one, &o);
    uint32_t count = layers_count(&p->w, (attn_kind)k);
    step += count * r->r->step_s;
    flops += count * r->r->flops;
    bytes0 += count * r->r->chan_bytes[0];
    compute += count * r->r->gpu_compute_s[3];
    sim_result_free(r);
  }
  CU_ASSERT_CLOSE(all->r->step_s, step, 1e-12);
  CU_ASSERT_CLOSE(all->r->flops, flops, 1e-12);
  CU_ASSERT_CLOSE(all->r->chan_bytes[0], bytes0, 1e-12);
  CU_ASSERT_CLOSE(all->r->gpu_compute_s[3], compute, 1e-12);
  CU_ASSERT(all->r->gpu_finish_s[all->r->last_gpu] <= all->r->step_s * (1 + 1e-12));
  sim_result_free(all);
  scenario_free(s);
  scenario_overrides soft = {.attention = "softmax", .sched = "ring"};
  s = scenario_load("tests/data/scen_hybrid.json", &soft, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  p = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_SOFTMAX), 8);
  CU_ASSERT_EQUAL(layers_count(&p->w, ATTN_LINEAR), 0);
  scenario_free(s);
}

/* Sweep lists are sets, never empty; "all" is every scheduler that runs
 * the model's layers. */
static void t_sweep_lists(void) {
  scenario_overrides dup_seq = {.topology = "h100x8", .seq = "32K,64K,32768"};
  expect_error(NULL, dup_seq, "option '--seq': \"32K\" and \"32768\" are the same value (32768)");
  scenario_overrides dup_sp = {.topology = "h100x8", .seq = "32K", .sp = "2,4,2"};
  expect_error(NULL, dup_sp, "option '--sp': \"2\" is given twice");
  scenario_overrides dup_sched = {.topology = "h100x8", .seq = "32K", .sched = "tasp,ring,tasp"};
  expect_error(NULL, dup_sched, "option '--sched': \"tasp\" is given twice");
  scenario_overrides empty = {.topology = "h100x8", .mask = ""};
  expect_error(NULL, empty, "option '--mask': expected at least one value, got an empty list");
  scenario_overrides all_and = {.topology = "h100x8", .seq = "32K", .sched = "ring,all"};
  expect_error(NULL, all_and, "\"all\" names every scheduler");
  g_autoptr(GError) err = NULL;
  scenario_overrides all = {.topology = "h100x8", .seq = "32K", .sp = "8", .sched = "all",
                            .attention = "linear"};
  scenario *s = scenario_load(NULL, &all, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  guint want = 0;
  for (const sched_ops *const *a = sched_all(); *a; a++)
    want += ((*a)->attention & SCHED_RUNS(ATTN_LINEAR)) != 0;
  CU_ASSERT_EQUAL(s->scheds->len, want);
  CU_ASSERT_EQUAL(s->scheds->len, 5); /* ring, ulysses, lasp, lasp2, lasp2h */
  for (guint k = 0; k < s->scheds->len; k++)
    CU_ASSERT_TRUE(sched_check_attention(s->scheds->pdata[k], &s->model, NULL));
  scenario_free(s);
  /* softmax: every method once, TransformerEngine's names (aliases of
   * schedulers already there) left out */
  all.attention = NULL;
  s = scenario_load(NULL, &all, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  guint methods = 0;
  for (const sched_ops *const *a = sched_all(); *a; a++)
    methods += !(*a)->alias_of && (!(*a)->attention || ((*a)->attention & SCHED_RUNS(ATTN_SOFTMAX)));
  CU_ASSERT_EQUAL(s->scheds->len, methods);
  bool stripe = false, dring = false;
  for (guint k = 0; k < s->scheds->len; k++) {
    const sched_ops *so = s->scheds->pdata[k];
    CU_ASSERT_PTR_NULL(so->alias_of);
    stripe |= so == &sched_stripe;
    dring |= so == &sched_double_ring;
  }
  CU_ASSERT_TRUE(stripe && dring);
  scenario_free(s);
}

/* Bounds: at the bound is accepted, one past it refused. */
static void t_bounds(void) {
  g_autoptr(GError) err = NULL;
  /* 1G tokens x 128 heads x 128 x 4 bytes (fp32 gradients) = 2^46 */
  scenario_overrides at = {.topology = "h100x8", .seq = "1G", .sp = "8", .sched = "ring",
                           .heads = "128", .kv_heads = "8"};
  scenario *s = scenario_load(NULL, &at, &err);
  CU_ASSERT_PTR_NOT_NULL(s);
  scenario_free(s);
  scenario_overrides past = at;
  past.heads = "136";
  expect_error(NULL, past, "option '--seq': batch 1 x 1G tokens x 136 heads x head dim 128 x 4 "
               "bytes is 68 TiB in one tensor of the layer; expected at most 64 TiB");
  scenario_overrides seq = {.topology = "h100x8", .seq = "1G,1025M", .sched = "ring"};
  expect_error(NULL, seq, "option '--seq': expected a token count from 1 to 1G (1073741824), "
               "got 1025M");
  scenario_overrides heads = {.topology = "h100x8", .seq = "32K", .heads = "1025"};
  expect_error(NULL, heads, "option '--heads': expected a whole number from 1 to 1024");
  scenario_overrides heads_ok = {.topology = "h100x8", .seq = "32K", .sp = "8",
                                 .sched = "ring", .heads = "1024", .kv_heads = "1024",
                                 .head_dim = "1024"};
  s = scenario_load(NULL, &heads_ok, &err);
  CU_ASSERT_PTR_NOT_NULL(s);
  scenario_free(s);
  scenario_overrides batch = {.topology = "h100x8", .seq = "16K", .batch = "65536", .sp = "8",
                              .sched = "ring"};
  s = scenario_load(NULL, &batch, &err);  /* 2^30 tokens: at the bound */
  CU_ASSERT_PTR_NOT_NULL(s);
  scenario_free(s);
  batch.seq = "16K,32K";
  expect_error(NULL, batch, "option '--seq': batch 65536 x 32K tokens is");
  scenario_overrides usp = {.topology = "h100x8", .seq = "32K", 
                            .sched_opts = (char *[]){"usp_ulysses=16385", NULL}};
  expect_error(NULL, usp, "option '--usp-ulysses': expected a whole number from 1 to 16384");
}

/* A point a scheduler cannot run is an n/a point with the reason; the
 * rest run; --strict, or no shown point that can run, is an error. */
static void t_na_points(void) {
  g_autoptr(GError) err = NULL;
  scenario_overrides ov = {.topology = "h100x8", .seq = "32K", .sp = "1,8",
                           .sched = "tasp,ring"};
  scenario *s = scenario_load(NULL, &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(s->points->len, 4);
  const scenario_point *p0 = &g_array_index(s->points, scenario_point, 0);
  CU_ASSERT_PTR_EQUAL(p0->sched, &sched_tasp);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p0->na);
  CU_ASSERT_STRING_EQUAL(p0->na, "tasp needs an SP degree of at least 2");
  for (guint i = 1; i < 4; i++) CU_ASSERT_PTR_NULL(g_array_index(s->points, scenario_point, i).na);

  /* sim: the n/a row is not run, has no speedups; the others rank alone */
  sim_opts so = {.jobs = 1};
  GPtrArray *res = sim_run_all(s, &so);
  CU_ASSERT_EQUAL_FATAL(res->len, 4);
  sim_result *na = res->pdata[0], *ring1 = res->pdata[1], *tasp8 = res->pdata[2];
  CU_ASSERT_PTR_NULL(na->r);
  CU_ASSERT_TRUE(isnan(na->speedup_vs_ring) && isnan(na->speedup_vs_best));
  CU_ASSERT_STRING_EQUAL(na->baseline, "");
  CU_ASSERT_DOUBLE_EQUAL(ring1->speedup_vs_best, 1.0, 1e-12); /* the only one that ran */
  CU_ASSERT_STRING_EQUAL(ring1->baseline, "ring");
  CU_ASSERT_PTR_NULL(ring1->ring_na);
  CU_ASSERT_PTR_NOT_NULL(tasp8->r);
  g_autofree char *v = verdict_line(s->topo, (sim_result *const *)res->pdata, 2);
  CU_ASSERT_TRUE(g_str_has_prefix(v, "ring only ("));
  CU_ASSERT_TRUE(g_str_has_suffix(v, "); n/a: tasp"));
  g_autofree char *none = verdict_line(s->topo, (sim_result *const *)res->pdata, 1);
  CU_ASSERT_STRING_EQUAL(none, "no scheduler can run this point; n/a: tasp");
  g_ptr_array_free(res, TRUE);
  scenario_free(s);

  ov.strict = true;
  expect_error(NULL, ov, "option '--sp': tasp at seq_len 32K, SP 1: tasp needs an SP degree");
  /* no shown point can run: the first objection is the error */
  scenario_overrides none_ran = {.topology = "h100x8", .seq = "32K", .sp = "1", .sched = "tasp"};
  expect_error(NULL, none_ran, "option '--sp': tasp at seq_len 32K, SP 1");
  /* bad input stays an error even beside points that run: malformed
   * given cycles, a scheduler that does not run the layers */
  scenario_overrides cyc = {.topology = "h200x4", .seq = "6K", .sp = "4", .sched = "ring,tasp",
                            .sched_opts = (char *[]){"tasp_cycles=0-1-2,0-3-2-1", NULL}};
  expect_error(NULL, cyc, "option '--tasp-cycles': tasp at seq_len 6K, SP 4: ");
  scenario_overrides lin = {.topology = "h100x8", .seq = "32K", .sched = "ring,tasp",
                            .attention = "linear"};
  expect_error(NULL, lin, "option '--sched': tasp does not run linear-attention layers");
  /* the hidden ring cannot run: its reason reaches every row */
  scenario_overrides hid = {.topology = "h100x8", .seq = "1001,32K", .sp = "8",
                            .sched = "zigzag"};
  s = scenario_load(NULL, &hid, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  res = sim_run_all(s, &so);
  CU_ASSERT_EQUAL_FATAL(res->len, 2);
  sim_result *z = res->pdata[0];
  CU_ASSERT_PTR_NULL(z->r);
  CU_ASSERT_PTR_NOT_NULL(z->ring_na);
  CU_ASSERT_PTR_NULL(((sim_result *)res->pdata[1])->ring_na);
  CU_ASSERT_FALSE(isnan(((sim_result *)res->pdata[1])->speedup_vs_ring));
  g_ptr_array_free(res, TRUE);
  scenario_free(s);
}

/* ---- models: presets, model files, the scenario's model ---- */

/* A file holding text (removed by the caller); its path. */
static char *tmp_file(const char *text) {
  g_autoptr(GError) err = NULL;
  char *path = NULL;
  int fd = g_file_open_tmp("tasp-model-XXXXXX.json", &path, &err);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  CU_ASSERT_FATAL(g_file_set_contents(path, text, -1, &err));
  return path;
}

static scenario *load_text(const char *text, scenario_overrides ov, GError **err) {
  g_autofree char *path = tmp_file(text);
  scenario *s = scenario_load(path, &ov, err);
  remove(path);
  return s;
}

/* Every bundled preset loads, cites a source for every figure, and holds
 * the figures of its public config (spot checks). */
static void t_model_presets(void) {
  g_autoptr(GPtrArray) all = model_presets();
  static const char *const want[] = {"linear-llama3-1b", "linear-llama3-1b-hybrid", "llama2-7b",
                                     "llama3-405b", "llama3-70b", "llama3-8b", "qwen2.5-72b"};
  CU_ASSERT_EQUAL_FATAL(all->len, G_N_ELEMENTS(want));
  for (guint i = 0; i < all->len; i++) {
    g_auto(GStrv) p = g_strsplit(all->pdata[i], "\t", 2);
    CU_ASSERT_STRING_EQUAL(p[0], want[i]);
    CU_ASSERT(p[1] && *p[1]); /* --list describes it */
    g_autofree char *path = model_find(p[0]);
    g_auto(model_spec) m = {0};
    g_autoptr(GError) err = NULL;
    CU_ASSERT_TRUE_FATAL(model_load_file(path, &m, &err));
    g_autoptr(json_object) root = json_read_file(path, NULL);
    json_object *src = NULL;
    CU_ASSERT_TRUE_FATAL(json_object_object_get_ex(root, "sources", &src));
    for (const char *const *f = model_fields; *f; f++) {
      json_object *v = NULL;
      bool cited = json_object_object_get_ex(src, *f, &v) && strlen(json_object_get_string(v)) > 20;
      if (!cited) fprintf(stderr, "%s: no source for %s\n", path, *f);
      CU_ASSERT_TRUE(cited);
    }
  }
  struct { const char *name; uint32_t hidden, ffn, heads, kv, dim, vocab, soft, lin; } c[] = {
      {"llama3-8b", 4096, 14336, 32, 8, 128, 128256, 32, 0},
      {"llama3-70b", 8192, 28672, 64, 8, 128, 128256, 80, 0},
      {"llama3-405b", 16384, 53248, 128, 8, 128, 128256, 126, 0},
      {"qwen2.5-72b", 8192, 29568, 64, 8, 128, 152064, 80, 0},
      {"llama2-7b", 4096, 11008, 32, 32, 128, 32000, 32, 0},
      {"linear-llama3-1b", 2048, 8192, 16, 16, 128, 128256, 0, 16},
      {"linear-llama3-1b-hybrid", 2048, 8192, 16, 16, 128, 128256, 4, 12}};
  for (size_t i = 0; i < G_N_ELEMENTS(c); i++) {
    g_autofree char *path = model_find(c[i].name);
    g_auto(model_spec) m = {0};
    g_autoptr(GError) err = NULL;
    CU_ASSERT_TRUE_FATAL(model_load_file(path, &m, &err));
    CU_ASSERT_EQUAL(m.hidden, c[i].hidden);
    CU_ASSERT_EQUAL(m.ffn, c[i].ffn);
    CU_ASSERT_EQUAL(m.heads, c[i].heads);
    CU_ASSERT_EQUAL(m.kv_heads, c[i].kv);
    CU_ASSERT_EQUAL(m.head_dim, c[i].dim);
    CU_ASSERT_EQUAL(m.vocab, c[i].vocab);
    CU_ASSERT_EQUAL(m.layers[ATTN_SOFTMAX], c[i].soft);
    CU_ASSERT_EQUAL(m.layers[ATTN_LINEAR], c[i].lin);
  }
}

/* --model sets the attention shape and layers; options override single
 * fields; no --model leaves today's defaults. */
static void t_model_option(void) {
  g_autoptr(GError) err = NULL;
  scenario_overrides ov = {.topology = "h100x8", .seq = "32K", .sp = "8", .model = "llama3-70b"};
  scenario *s = scenario_load(NULL, &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const workload *w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(w->heads, 64);
  CU_ASSERT_EQUAL(w->kv_heads, 8);
  CU_ASSERT_EQUAL(w->head_dim, 128);
  CU_ASSERT_EQUAL(layers_count(w, ATTN_SOFTMAX), 80);
  CU_ASSERT_EQUAL(layers_count(w, ATTN_LINEAR), 0);
  CU_ASSERT_EQUAL(w->hidden, 8192);
  CU_ASSERT_EQUAL(w->ffn, 28672);
  CU_ASSERT_EQUAL(w->vocab, 128256);
  CU_ASSERT_STRING_EQUAL(s->model_name, "Llama-3-70B");
  CU_ASSERT_PTR_NOT_NULL(strstr(s->model_file, "models/llama3-70b.json"));
  scenario_free(s);
  /* --heads overrides the preset's; its KV heads stay */
  ov.heads = "32";
  ov.batch = "2";
  s = scenario_load(NULL, &ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(w->heads, 32);
  CU_ASSERT_EQUAL(w->kv_heads, 8);
  CU_ASSERT_EQUAL(w->batch, 2);
  CU_ASSERT_EQUAL(layers_count(w, ATTN_SOFTMAX), 80);
  scenario_free(s);
  /* --attention makes every layer of the preset that kind */
  scenario_overrides lin = {.topology = "h100x8", .seq = "32K", .sp = "8", .sched = "ring",
                            .model = "llama3-8b", .attention = "linear"};
  s = scenario_load(NULL, &lin, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(layers_count(w, ATTN_LINEAR), 32);
  CU_ASSERT_EQUAL(layers_count(w, ATTN_SOFTMAX), 0);
  scenario_free(s);
  /* the LASP-2 model: 16 linear layers */
  scenario_overrides l2 = {.topology = "a100x8x8", .seq = "64K", .sp = "64", .sched = "lasp2",
                           .model = "linear-llama3-1b"};
  s = scenario_load(NULL, &l2, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(layers_count(w, ATTN_LINEAR), 16);
  CU_ASSERT_EQUAL(w->heads, 16);
  CU_ASSERT_EQUAL(w->attention, ATTN_LINEAR);
  scenario_free(s);
  /* no model: one layer of Llama-3-8B's attention, no other sizes */
  scenario_overrides none = {.topology = "h100x8", .seq = "32K", .sp = "8"};
  s = scenario_load(NULL, &none, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(layers_total(w), 1);
  CU_ASSERT_EQUAL(w->heads, 32);
  CU_ASSERT_EQUAL(w->kv_heads, 8);
  CU_ASSERT_EQUAL(w->hidden, 0);
  CU_ASSERT_PTR_NULL(s->model_name);
  scenario_free(s);
}

/* In a scenario: "model": "NAME", or {"preset": NAME, fields...}; one
 * model object; --model replaces the file's architecture, not its batch. */
static void t_model_in_file(void) {
  g_autoptr(GError) err = NULL;
  scenario_overrides ov = {.topology = "h100x8", .sched = "ring"};
  scenario *s = load_text("{\"model\": \"llama3-8b\", \"seq_len\": \"32K\", \"sp\": 8}", ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const workload *w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(layers_count(w, ATTN_SOFTMAX), 32);
  CU_ASSERT_EQUAL(w->ffn, 14336);
  scenario_free(s);
  const char *obj = "{\"model\": {\"preset\": \"llama3-70b\", \"heads\": 32, \"batch\": 2, "
                    "\"ffn\": 1000, \"layers\": [{\"attention\": \"softmax\", \"count\": 4}]}, "
                    "\"seq_len\": \"32K\", \"sp\": 8}";
  s = load_text(obj, ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(w->heads, 32);
  CU_ASSERT_EQUAL(w->kv_heads, 8);
  CU_ASSERT_EQUAL(w->batch, 2);
  CU_ASSERT_EQUAL(w->ffn, 1000);
  CU_ASSERT_EQUAL(w->hidden, 8192);
  CU_ASSERT_EQUAL(layers_count(w, ATTN_SOFTMAX), 4);
  scenario_free(s);
  /* --model over the file's preset: the file's architecture fields give
   * way, its batch stays; --heads still wins */
  scenario_overrides m = {.topology = "h100x8", .sched = "ring", .model = "llama2-7b"};
  s = load_text(obj, m, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(w->heads, 32);
  CU_ASSERT_EQUAL(w->kv_heads, 32);
  CU_ASSERT_EQUAL(w->ffn, 11008);
  CU_ASSERT_EQUAL(w->batch, 2);
  CU_ASSERT_EQUAL(layers_count(w, ATTN_SOFTMAX), 32);
  CU_ASSERT_STRING_EQUAL(s->model_name, "Llama-2-7B");
  scenario_free(s);
  /* a model object of run fields only (batch, dtype, docs) keeps the
   * default shape, Llama-3-8B's 32 heads and 8 KV heads, as --batch does;
   * heads given without KV heads are heads with their own KV (MHA), as
   * --heads gives.  The object alone made the KV heads 32 */
  s = load_text("{\"model\": {\"batch\": 2, \"dtype\": \"fp16\"}, \"seq_len\": \"32K\", \"sp\": 8}",
                ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(w->heads, 32);
  CU_ASSERT_EQUAL(w->kv_heads, 8);
  CU_ASSERT_EQUAL(w->batch, 2);
  scenario_free(s);
  s = load_text("{\"model\": {\"heads\": 16}, \"seq_len\": \"32K\", \"sp\": 8}", ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(g_array_index(s->points, scenario_point, 0).w.kv_heads, 16);
  scenario_free(s);
  scenario_overrides heads = {.topology = "h100x8", .sched = "ring", .heads = "16"};
  s = load_text("{\"model\": {\"batch\": 2}, \"seq_len\": \"32K\", \"sp\": 8}", heads, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(g_array_index(s->points, scenario_point, 0).w.kv_heads, 16);
  scenario_free(s);
  /* model.attention over a preset's layers: every layer that kind */
  s = load_text("{\"model\": {\"preset\": \"llama3-8b\", \"attention\": \"linear\"}, "
                "\"seq_len\": \"32K\", \"sp\": 8}", ov, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(layers_count(&g_array_index(s->points, scenario_point, 0).w, ATTN_LINEAR), 32);
  scenario_free(s);
  /* a model file by path */
  g_autofree char *mf = tmp_file("{\"name\": \"Tiny\", \"hidden\": 512, \"ffn\": 2048, "
                                 "\"heads\": 8, \"head_dim\": 64, \"vocab\": 1000, "
                                 "\"layers\": [{\"attention\": \"softmax\", \"count\": 2}]}");
  scenario_overrides f = {.topology = "h100x8", .seq = "32K", .sp = "8", .model = mf};
  s = scenario_load(NULL, &f, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL(w->kv_heads, 8); /* heads where not given */
  CU_ASSERT_EQUAL(w->head_dim, 64);
  CU_ASSERT_EQUAL(layers_total(w), 2);
  CU_ASSERT_STRING_EQUAL(s->model_name, "Tiny");
  scenario_free(s);
  /* named in a scenario: relative to the scenario file */
  g_autofree char *dir = g_path_get_dirname(mf), *base = g_path_get_basename(mf);
  g_autofree char *sub = g_build_filename(dir, "tasp-model-sub", NULL);
  g_mkdir(sub, 0700);
  g_autofree char *scen = g_build_filename(sub, "s.json", NULL);
  g_autofree char *text = g_strdup_printf("{\"topology\": \"h100x8\", \"model\": "
                                          "{\"preset\": \"../%s\"}, \"seq_len\": \"32K\", "
                                          "\"sp\": 8}", base);
  CU_ASSERT_TRUE(g_file_set_contents(scen, text, -1, NULL));
  scenario_overrides none = {0};
  s = scenario_load(scen, &none, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_STRING_EQUAL(s->model_name, "Tiny");
  scenario_free(s);
  remove(scen);
  g_rmdir(sub);
  remove(mf);
}

static void expect_text_error(const char *text, scenario_overrides ov, const char *needle) {
  g_autoptr(GError) err = NULL;
  scenario *s = load_text(text, ov, &err);
  CU_ASSERT_PTR_NULL(s);
  bool ok = err && strstr(err->message, needle);
  if (!ok) fprintf(stderr, "expected \"%s\" in \"%s\"\n", needle, err ? err->message : "");
  CU_ASSERT_TRUE(ok);
  scenario_free(s);
}

/* Bad models: each error names the file or option, the field and what
 * was expected. */
static void t_model_errors(void) {
  scenario_overrides ov = {.topology = "h100x8", .seq = "32K", .sp = "8", .model = "llama3-8"};
  expect_error(NULL, ov, "command line: option '--model': \"llama3-8\" is neither a model file "
               "nor a bundled model; did you mean llama3-8b?");
  ov.model = "llama3-8b";
  ov.heads = "12";
  expect_error(NULL, ov, "command line: option '--heads': expected a multiple of the 8 KV heads "
               "of model Llama-3-8B");
  ov.heads = "2000";
  expect_error(NULL, ov, "option '--heads': expected a whole number from 1 to 1024");
  scenario_overrides file = {.topology = "h100x8", .seq = "32K", .sp = "8"};
  expect_text_error("{\"model\": 3}", file, "field 'model': expected a preset name");
  expect_text_error("{\"model\": \"gpt5\"}", file,
                    "field 'model': \"gpt5\" is neither a model file nor a bundled model");
  expect_text_error("{\"model\": {\"preset\": \"lama3-8b\"}}", file,
                    "field 'model.preset': \"lama3-8b\" is neither a model file nor a bundled "
                    "model; did you mean llama3-8b?");
  expect_text_error("{\"model\": {\"preset\": 8}}", file, "field 'model.preset': expected a string");
  expect_text_error("{\"model\": {\"hidden\": 0}}", file,
                    "field 'model.hidden': expected a whole number from 1 to 1048576");
  expect_text_error("{\"model\": {\"vocab\": 99999999}}", file,
                    "field 'model.vocab': expected a whole number from 1 to 16777216");
  expect_text_error("{\"model\": {\"preset\": \"llama3-8b\", \"ffn\": \"big\"}}", file,
                    "field 'model.ffn': expected a whole number");
  /* model files */
  static const char *const bad[][2] = {
      {"{\"heads\": 8}", "field 'hidden': missing"},
      {"{\"hidden\": 512, \"ffn\": 2048, \"heads\": 8, \"head_dim\": 64, \"vocab\": 1000, "
       "\"layers\": 2}", "field 'layers': expected a list"},
      {"{\"hidden\": 512, \"ffn\": 2048, \"heads\": 8, \"kv_heads\": 3, \"head_dim\": 64, "
       "\"vocab\": 1000, \"layers\": [{\"attention\": \"softmax\"}]}",
       "field 'kv_heads': expected a divisor of the 8 query heads, got 3"},
      {"{\"hidden\": 512, \"ffn\": 2048, \"heads\": 8, \"head_dim\": 64, \"vocab\": 1000, "
       "\"layers\": [{\"attention\": \"mamba\"}]}",
       "field 'layers[0].attention': expected softmax or linear, got \"mamba\""},
      {"{\"hidden\": 512, \"ffn\": 2048, \"heads\": 8, \"head_dim\": 64, \"vocab\": 1000, "
       "\"layers\": [{\"attention\": \"linear\", \"count\": 1000}, "
       "{\"attention\": \"softmax\", \"count\": 1000}]}",
       "field 'layers[1].count': the model's layers add up to more than 1024"},
      {"{\"hidden\": 512, \"ffn\": 2048, \"heads\": 8, \"head_dim\": 64, \"vocab\": 1000, "
       "\"layers\": [{\"attention\": \"softmax\"}], \"sources\": {\"hiden\": \"x\"}}", "field 'sources.hiden': unknown field"},
      {"{\"hidden\": 512, \"ffn\": 2048, \"heads\": 8, \"head_dim\": 64, \"vocab\": 1000, "
       "\"layers\": [{\"attention\": \"softmax\"}], \"sources\": {\"hidden\": 4}}",
       "field 'sources.hidden': expected the source"},
      {"{\"hidden\": 512, \"ffn\": 2048, \"heads\": 8, \"head_dim\": 64, \"vocab\": 1000, "
       "\"layers\": [{\"attention\": \"softmax\"}], \"hidden_size\": 4}", "field 'hidden_size': unknown field"},
      {"[1]", "expected a JSON object"}};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *mf = tmp_file(bad[i][0]);
    scenario_overrides m = {.topology = "h100x8", .seq = "32K", .sp = "8", .model = mf};
    g_autofree char *needle = g_strdup_printf("%s: %s", mf, bad[i][1]);
    if (i == G_N_ELEMENTS(bad) - 1) expect_error(NULL, m, bad[i][1]);
    else expect_error(NULL, m, needle);
    remove(mf);
  }
}

/* The schedulers' own options come from their declarations: every one
 * reaches the points from the command line (winning over the file) and
 * from the file, and a bad value is refused naming the option. */
static void t_sched_options(void) {
  const sched_opt *const *opts = sched_options();
  CU_ASSERT_PTR_NOT_NULL_FATAL(opts[0]);
  for (int i = 0; opts[i]; i++) {
    const sched_opt *o = opts[i];
    g_autofree char *users = sched_option_users(o);
    CU_ASSERT(users[0] != '\0' && o->help && o->key);
    CU_ASSERT_EQUAL(sched_option_index(o), i);
    CU_ASSERT_PTR_EQUAL(sched_option_find(o->key), o);
    if (o->type == SCHED_OPT_TEXT) continue; /* judged by the scheduler (test_sched, test_cli) */
    /* its first user runs it: the value reaches every point */
    g_auto(GStrv) first = g_strsplit(users, ",", 2);
    g_autofree char *given = g_strconcat(o->key, o->type == SCHED_OPT_FLAG ? "=true" : "=2", NULL);
    char *pairs[] = {given, NULL};
    /* allgather's head stride is llama3_flash_attn_varlen_func's: packed documents only */
    bool docs = !strcmp(o->key, "allgather_heads_k_stride");
    scenario_overrides ov = {.topology = "h100x8", .seq = "32K", .sp = "8", .sched = first[0],
                             .sched_opts = pairs, .docs = docs ? "16K,16K" : NULL};
    g_autoptr(GError) err = NULL;
    scenario *s = scenario_load(NULL, &ov, &err);
    if (!s) fprintf(stderr, "%s: %s\n", o->key, err->message);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (guint k = 0; k < s->points->len; k++)
      CU_ASSERT_EQUAL(sched_opt_num(&g_array_index(s->points, scenario_point, k).w, o),
                      o->type == SCHED_OPT_FLAG ? 1 : 2);
    scenario_free(s);
    /* the file's value, and the command line's over it */
    g_autofree char *text = g_strdup_printf(
        "{\"topology\": \"h100x8\", \"seq_len\": \"32K\", \"sp\": 8, \"schedulers\": \"%s\", "
        "%s%s\": %s%s}", first[0],
        o->in_model ? (docs ? "\"model\": {\"docs\": \"16K,16K\", \"" : "\"model\": {\"") : "\"", o->key,
        o->type == SCHED_OPT_FLAG ? "false" : "4", o->in_model ? "}" : "");
    g_autofree char *file = tmp_file(text);
    scenario_overrides none = {0};
    s = scenario_load(file, &none, &err);
    if (!s) fprintf(stderr, "%s: %s\n", o->key, err->message);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(sched_opt_num(&g_array_index(s->points, scenario_point, 0).w, o),
                    o->type == SCHED_OPT_FLAG ? 0 : 4);
    scenario_free(s);
    s = scenario_load(file, &ov, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(sched_opt_num(&g_array_index(s->points, scenario_point, 0).w, o),
                    o->type == SCHED_OPT_FLAG ? 1 : 2);
    scenario_free(s);
    remove(file);
    if (o->type != SCHED_OPT_COUNT) continue;
    g_autofree char *zero = g_strconcat(o->key, "=0", NULL);
    pairs[0] = zero;
    g_autofree char *want = g_strdup_printf("option '%s': expected a whole number from 1 to %u, "
                                            "got \"0\"", sched_option_flag(o), o->max);
    expect_error(NULL, ov, want);
  }
}

/* Packed documents from a file (model.docs) reach every point; the
 * command line's --docs wins; a document list that does not fill the
 * sequence is refused naming the field. */
static void t_docs(void) {
  g_autofree char *file = tmp_file("{\"topology\": \"h100x8\", \"seq_len\": \"128K\", "
                                   "\"schedulers\": [\"ring\", \"zigzag\"], \"model\": {\"docs\": "
                                   "[65536, \"32K\", \"32K\"]}}");
  scenario_overrides none = {0};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(file, &none, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  for (guint i = 0; i < s->points->len; i++) {
    const workload *w = &g_array_index(s->points, scenario_point, i).w;
    CU_ASSERT_EQUAL_FATAL(w->n_docs, 3);
    CU_ASSERT_EQUAL(w->docs[0], 65536);
    CU_ASSERT_EQUAL(w->docs[2], 32768);
  }
  scenario_free(s);
  scenario_overrides cli = {.docs = "96K,32K"};
  s = scenario_load(file, &cli, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(g_array_index(s->points, scenario_point, 0).w.n_docs, 2);
  scenario_free(s);
  scenario_overrides seq = {.seq = "64K"};
  g_autofree char *want = g_strdup_printf("%s: field 'model.docs': the documents add up to 128K "
                                          "tokens, expected the sequence length 64K", file);
  expect_error(file, seq, want);
  remove(file);
}

/* Document lengths from a file (file:PATH): commas, blanks and lines,
 * '#' comments; named in a scenario, found beside it; an unreadable file
 * or a bad length is refused naming the file and line. */
static void t_docs_file(void) {
  g_autofree char *lengths = tmp_file("# packed batch\n64K, 32K # two\n\n 16K\t16K\n");
  g_autofree char *base = g_path_get_basename(lengths);
  g_autofree char *text = g_strdup_printf("{\"topology\": \"h100x8\", \"seq_len\": \"128K\", "
                                          "\"schedulers\": \"ring\", \"model\": {\"docs\": "
                                          "\"file:%s\"}}", base);
  g_autofree char *file = tmp_file(text);
  scenario_overrides none = {0};
  g_autoptr(GError) err = NULL;
  scenario *s = scenario_load(file, &none, &err);
  if (!s) fprintf(stderr, "%s\n", err->message);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  const workload *w = &g_array_index(s->points, scenario_point, 0).w;
  CU_ASSERT_EQUAL_FATAL(w->n_docs, 4);
  CU_ASSERT(w->docs[0] == 65536 && w->docs[1] == 32768 && w->docs[2] == 16384 &&
            w->docs[3] == 16384);
  scenario_free(s);
  g_autofree char *cli_text = g_strconcat("file:", lengths, NULL);
  scenario_overrides cli = {.topology = "h100x8", .seq = "128K", .sched = "ring", .docs = cli_text};
  s = scenario_load(NULL, &cli, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(s);
  CU_ASSERT_EQUAL(g_array_index(s->points, scenario_point, 0).w.n_docs, 4);
  scenario_free(s);
  CU_ASSERT(g_file_set_contents(lengths, "64K\n32K, 3x\n", -1, NULL));
  g_autofree char *want = g_strdup_printf("option '--docs': file:%s: line 2: expected a length "
                                          "from 1 to 1G tokens (4096, 4K), got \"3x\"", lengths);
  expect_error(NULL, cli, want);
  remove(lengths);
  g_autofree char *gone = g_strdup_printf("option '--docs': file:%s: cannot read it", lengths);
  expect_error(NULL, cli, gone);
  remove(file);
}

/* Document lengths drawn from a distribution: they fill the sequence, are
 * padded, follow the distribution's mean, and are the same for a seed. */
static void t_docs_distributions(void) {
  char *why = NULL;
  uint64_t seq = 64ull << 20;
  docs_spec *ln = docs_parse("lognormal:mean=8K,sigma=1.0,seed=7,pad=16", &why);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ln);
  GArray *a = docs_for(ln, seq, &why), *b = docs_for(ln, seq, &why);
  CU_ASSERT_PTR_NOT_NULL_FATAL(a);
  uint64_t sum = 0;
  for (guint i = 0; i < a->len; i++) {
    uint64_t len = g_array_index(a, uint64_t, i);
    CU_ASSERT(len > 0 && len % 16 == 0);
    sum += len;
  }
  CU_ASSERT_EQUAL(sum, seq);
  /* the mean of about 8K draws (the last one cut) within 5% of 8K: the
   * standard error is 8K x sqrt(e - 1) / sqrt(8K), 1.5% */
  CU_ASSERT(fabs((double)seq / a->len - 8192) < 0.05 * 8192);
  CU_ASSERT_EQUAL(a->len, b->len);
  CU_ASSERT(memcmp(a->data, b->data, a->len * sizeof(uint64_t)) == 0);
  g_array_unref(a);
  g_array_unref(b);
  docs_spec_free(ln);
  docs_spec *un = docs_parse("uniform:min=1K,max=3K,seed=1", &why);
  CU_ASSERT_PTR_NOT_NULL_FATAL(un);
  a = docs_for(un, seq, &why);
  for (guint i = 0; i + 1 < a->len; i++)
    CU_ASSERT(g_array_index(a, uint64_t, i) >= 1024 && g_array_index(a, uint64_t, i) <= 3072);
  CU_ASSERT(fabs((double)seq / a->len - 2048) < 0.02 * 2048);
  g_array_unref(a);
  docs_spec_free(un);
  static const char *const bad[][2] = {
      {"lognormal:mean=8K,sigma=1", "lognormal: expected mean=, sigma= and seed="},
      {"lognormal:mean=8K,sigma=-1,seed=1", "lognormal: sigma: expected a number from 0 to 10"},
      {"uniform:min=4K,max=1K,seed=1", "uniform: min is above max"},
      {"uniform:min=1K,max=4K,seed=1,mean=3", "uniform: unknown key \"mean\""},
      {"uniform:min=1K,max=4K,seed=1,seed=2", "uniform: seed is given twice"},
      {"2K,x", "document 2: expected a length"}};
  for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *msg = NULL;
    CU_ASSERT_PTR_NULL(docs_parse(bad[i][0], &msg));
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    if (!strstr(msg, bad[i][1])) fprintf(stderr, "%s: %s\n", bad[i][0], msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i][1]));
  }
  scenario_overrides pad = {.topology = "h100x8", .seq = "128K", .sched = "ring",
                            .docs = "uniform:min=1K,max=4K,seed=1,pad=3"};
  expect_error(NULL, pad, "option '--docs': pad=3 does not divide the sequence length 128K");
}

int main(void) {
  static const test_case cases[] = {TEST(t_h100x8_points), TEST(t_overrides),
                                    TEST(t_topology_only), TEST(t_errors), TEST(t_layers),
                                    TEST(t_sweep_lists), TEST(t_bounds), TEST(t_na_points),
                                    TEST(t_model_presets), TEST(t_model_option),
                                    TEST(t_model_in_file), TEST(t_model_errors),
                                    TEST(t_sched_options), TEST(t_docs),
                                    TEST(t_docs_distributions), TEST(t_docs_file), {NULL, NULL}};
  return test_run("scenario", cases);
}
