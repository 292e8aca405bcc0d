/* search: enumeration, exclusion, bounds and the pruned simulation
 * (search.h). */
#include "search.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "compute.h"
#include "jsonio.h"
#include "layer.h"
#include "layers.h"
#include "orbits.h"
#include "search_bound.h"
#include "sim.h"
#include "sizes.h"
#include "verdict.h"

#define GIB 1073741824.0

const char *search_status_name(search_status s) {
  static const char *const names[SEARCH_STATUSES] = {"simulated", "does not fit", "pruned",
                                                     "excluded"};
  return names[s];
}

const char *search_objective_name(search_objective o) {
  return o == SEARCH_STEP ? "step" : "tokens";
}

static const char *const precision_names[PRECISION_KINDS] = {"megatron", "amp", "bf16", "fp8"};

const char *search_precision_name(precision_kind p) {
  return (unsigned)p < PRECISION_KINDS ? precision_names[p] : NULL;
}

bool search_precision_parse(const char *text, precision_kind *out) {
  for (int k = 0; k < PRECISION_KINDS; k++)
    if (!strcmp(text, precision_names[k])) {
      *out = (precision_kind)k;
      return true;
    }
  return false;
}

static void row_free(gpointer p) {
  search_row *r = p;
  g_free(r->sched);
  g_free(r->klass);
  g_free(r->reason);
  g_free(r);
}

void search_result_free(search_result *r) {
  if (!r) return;
  g_free(r->q.model);
  g_free(r->q.topology);
  g_ptr_array_unref(r->rows);
  g_free(r);
}

search_result *search_result_new(void) {
  search_result *r = g_new0(search_result, 1);
  r->rows = g_ptr_array_new_with_free_func(row_free);
  return r;
}

/* Figures not known yet read NAN (the CSV's empty cells). */
static search_row *figures_unknown(search_row *r) {
  r->bound_s = r->mem_bound_gib = r->step_s = r->tokens_per_s_per_gpu = r->mfu =
      r->peak_mem_gib = NAN;
  return r;
}

search_row *search_row_new(void) { return figures_unknown(g_new0(search_row, 1)); }

double search_score(const search_question *q, const search_row *r) {
  return q->objective == SEARCH_STEP ? -r->step_s : r->tokens_per_s_per_gpu;
}

static int by_score(gconstpointer a, gconstpointer b, gpointer user) {
  const search_question *q = user;
  const search_row *x = *(search_row *const *)a, *y = *(search_row *const *)b;
  double sx = search_score(q, x), sy = search_score(q, y);
  if (sx != sy) return sx > sy ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

GPtrArray *search_ranked(const search_result *r) {
  GPtrArray *out = g_ptr_array_new();
  for (guint i = 0; i < r->rows->len; i++) {
    search_row *x = r->rows->pdata[i];
    if (x->status == SEARCH_SIMULATED) g_ptr_array_add(out, x);
  }
  g_ptr_array_sort_with_data(out, by_score, (gpointer)&r->q);
  return out;
}

/* ---- the space ---- */

/* The first option the scheduler declares that splits SP in two (a
 * divisor strictly inside it, sched_opt.splits_sp: USP's Ulysses degree,
 * arXiv 2405.07719; double ring's inner ring, arXiv 2406.18485); its
 * values are a dimension.  NULL: it takes none. */
const sched_opt *search_split_opt(const sched_ops *s) {
  for (const sched_opt *const *o = s->opts; o && *o; o++)
    if ((*o)->splits_sp) return *o;
  return NULL;
}

/* The first option the scheduler declares that divides SP before its
 * split (sched_opt.divides_sp_first: double ring's head-parallel degree,
 * LoongTrain's 2D attention, arXiv 2406.18485 sec. 4.1); its values are a
 * dimension.  NULL: it takes none. */
static const sched_opt *heads_opt(const sched_ops *s) {
  for (const sched_opt *const *o = s->opts; o && *o; o++)
    if ((*o)->divides_sp_first) return *o;
  return NULL;
}

static GArray *divisors(uint32_t n) {
  GArray *d = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  for (uint32_t k = 1; k <= n; k++)
    if (n % k == 0) g_array_append_val(d, k);
  return d;
}

typedef void (*visit_fn)(uint32_t index, const sched_ops *s, const char *name,
                         const search_row *c, void *user);

/* At SP 1 no method has anything to do: those configurations are one
 * pseudo-method, its attention local (ring's plan on one GPU). */
#define SEARCH_NO_SP "no-sp"

/* The placements of TP x SP x DP worth telling apart: which dimension
 * lies innermost (inside a node), the other two in the default order,
 * those placing the GPUs alike counted once (a dimension of one GPU has
 * no place); one where the job fits in a node. */
static uint32_t placements(const search_opts *o, uint32_t tp, uint32_t sp, uint32_t dp,
                           placement_kind out[3]) {
  static const placement_kind inner[] = {PLACE_TP_SP_DP, PLACE_SP_TP_DP, PLACE_DP_TP_SP};
  const topology *t = o->s->topo;
  out[0] = PLACE_TP_SP_DP;
  if (!t->gpus_per_node || o->gpus <= t->gpus_per_node) return 1;
  uint32_t n = 0;
  for (size_t k = 0; k < G_N_ELEMENTS(inner); k++) {
    workload w = {.scope = SCOPE_MODEL, .tp = tp, .gpus = sp, .dp = dp, .placement = inner[k]};
    bool same = false;
    for (uint32_t j = 0; j < n && !same; j++) {
      same = true;
      for (uint32_t g = 0; g < tp * sp * dp && same; g++) {
        workload v = w;
        v.placement = out[j];
        same = layer_gpu(&w, g % tp, g / tp % sp, g / (tp * sp)) ==
               layer_gpu(&v, g % tp, g / tp % sp, g / (tp * sp));
      }
    }
    if (!same) out[n++] = inner[k];
  }
  return n;
}

/* Every configuration in the enumeration order (SP 1 first, then each
 * method; TP, SP, placement, head-parallel degree, split, ZeRO,
 * recomputation); returns how many.
 * ZeRO shards over the SP x DP ranks, so with one of them its stages are
 * one configuration; a split lies strictly inside what it splits (SP, or
 * SP over the head-parallel degree: 1 and all of it are the ring and
 * Ulysses, or a double ring of one window, methods of their own); a
 * head-parallel degree is every divisor of SP (1: none), those the heads
 * cannot take left to the scheduler's check to exclude with its reason. */
static uint64_t enumerate(const search_opts *o, visit_fn fn, void *user) {
  static const recompute_kind recs[] = {RECOMPUTE_NONE, RECOMPUTE_FULL};
  uint64_t index = 0;
  g_autoptr(GArray) tps = divisors(o->gpus);
  for (guint k = 0; k <= o->scheds->len; k++) {
    const sched_ops *s = k ? o->scheds->pdata[k - 1] : &sched_ring;
    const char *name = k ? s->name : SEARCH_NO_SP;
    for (guint a = 0; a < tps->len; a++) {
      uint32_t tp = g_array_index(tps, uint32_t, a);
      g_autoptr(GArray) sps = divisors(o->gpus / tp);
      for (guint b = 0; b < sps->len; b++) {
        uint32_t sp = g_array_index(sps, uint32_t, b), dp = o->gpus / tp / sp;
        if ((sp == 1) != (k == 0)) continue;
        /* the (head-parallel degree, split) pairs: hs[i], us[i] */
        g_autoptr(GArray) hs = g_array_new(FALSE, FALSE, sizeof(uint32_t));
        g_autoptr(GArray) us = g_array_new(FALSE, FALSE, sizeof(uint32_t));
        g_autoptr(GArray) heads = divisors(heads_opt(s) ? sp : 1);
        for (guint h = 0; h < heads->len; h++) {
          uint32_t hp = heads_opt(s) ? g_array_index(heads, uint32_t, h) : 0;
          uint32_t rest = sp / (hp ? hp : 1), none = 0;
          if (!search_split_opt(s)) {
            g_array_append_val(hs, hp);
            g_array_append_val(us, none);
            continue;
          }
          g_autoptr(GArray) ds = divisors(rest);
          for (guint i = 0; i < ds->len; i++) {
            uint32_t u = g_array_index(ds, uint32_t, i);
            if (u == 1 || u == rest) continue;
            g_array_append_val(hs, hp);
            g_array_append_val(us, u);
          }
        }
        uint32_t zeros = sp * dp > 1 ? 4 : 1;
        placement_kind places[3];
        uint32_t np = placements(o, tp, sp, dp, places);
        for (uint32_t pl = 0; pl < np; pl++)
          for (guint i = 0; i < us->len; i++)
            for (uint32_t z = 0; z < zeros; z++)
              for (size_t r = 0; r < G_N_ELEMENTS(recs); r++) {
                if (fn) {
                  search_row c = {.tp = tp, .sp = sp, .dp = dp, .zero = z, .recompute = recs[r],
                                  .split = g_array_index(us, uint32_t, i),
                                  .head_parallel = g_array_index(hs, uint32_t, i),
                                  .placement = places[pl]};
                  fn((uint32_t)index, s, name, &c, user);
                }
                if (++index > SEARCH_MAX_CONFIGS && !fn) return index;
              }
      }
    }
  }
  return index;
}

/* ---- exclusion and bounds ---- */

typedef struct {
  const search_opts *o;
  search_result *res;
  GPtrArray *ops;       /* per row: its const sched_ops * */
  uint64_t seqs;        /* sequences of the global batch (0: one per replica) */
  double usable;        /* GiB */
  GHashTable *attention; /* "method/tp/sp/heads/split/placement" -> search_attention */
  /* "tp/sp/dp/placement" -> degrees: what depends on those alone, once
   * for every configuration of them */
  GHashTable *degrees;
  /* "tp/sp/dp/placement/method/heads/split" -> orbits (layer_orbits_sched):
   * the orbits with the method's turn (sched.h turn) a simulated row of a
   * method that turns replays with, made before its round (run_rounds);
   * its plan estimate counts the shifts' (degrees) */
  GHashTable *turned;
  /* the view the last row's scheduler planned on (layer_view_init), for
   * the next rows of the same TP, SP, DP and placement: the enumeration
   * goes through every head-parallel degree, split, ZeRO stage and
   * recomputation of them in a row; view_key NULL: none yet */
  layer_view view;
  char *view_key;
} space;

typedef struct {
  orbits *o;            /* layer_orbits (its plan estimate and its replays);
                           NULL: none (every GPU simulated) */
  double tp_ingress_Bps; /* search_tp_ingress_Bps (its step bound) */
} degrees;

static void degrees_free(gpointer p) {
  degrees *x = p;
  orbits_free(x->o);
  g_free(x);
}

static char *degrees_key(const search_row *c) {
  return g_strdup_printf("%u/%u/%u/%d", c->tp, c->sp, c->dp, (int)c->placement);
}

static void turned_free(gpointer p) { orbits_free(p); }

/* degrees_key, the method, head-parallel degree and split: what a
 * method's turn depends on (sched.h turn, layer_orbits_sched). */
static char *turned_key(const sched_ops *s, const search_row *c) {
  g_autofree char *key = degrees_key(c);
  return g_strdup_printf("%s/%s/%u/%u", key, s->name, c->head_parallel, c->split);
}

static const degrees *config_degrees(space *sp, const workload *w, const search_row *c) {
  g_autofree char *key = degrees_key(c);
  degrees *x = g_hash_table_lookup(sp->degrees, key);
  if (!x) {
    x = g_new(degrees, 1);
    x->o = layer_orbits(w, sp->o->s->topo);
    x->tp_ingress_Bps = search_tp_ingress_Bps(w, sp->o->s->topo);
    g_hash_table_insert(sp->degrees, g_steal_pointer(&key), x);
  }
  return x;
}

/* The view a row's scheduler plans on, kept for the rows after it. */
static const topology *config_view(space *sp, const workload *w, const search_row *c) {
  g_autofree char *key = degrees_key(c);
  if (!sp->view_key || strcmp(key, sp->view_key)) {
    layer_view_clear(&sp->view);
    layer_view_init(&sp->view, w, sp->o->s->topo);
    g_free(sp->view_key);
    sp->view_key = g_steal_pointer(&key);
  }
  return &sp->view.t;
}

static workload config_workload(const space *sp, const sched_ops *s, const search_row *c) {
  workload w = sp->o->s->model;
  w.seq_len = g_array_index(sp->o->s->seqs, uint64_t, 0);
  w.causal = g_array_index(sp->o->s->masks, gboolean, 0);
  w.pass = PASS_FWDBWD;
  w.scope = SCOPE_MODEL;
  w.gpus = c->sp;
  w.tp = c->tp;
  w.dp = c->dp;
  w.zero = c->zero;
  w.recompute = c->recompute;
  w.micro_batches = c->micro_batches;
  if (c->split) sched_opt_set_num(&w, search_split_opt(s), c->split);
  if (c->head_parallel > 1) sched_opt_set_num(&w, heads_opt(s), c->head_parallel);
  w.placement = c->placement;
  w.plan_cap_tasks = SEARCH_MAX_PLAN_TASKS;
  return w;
}

static void set_excluded(search_row *c, const char *klass, char *reason) {
  c->status = SEARCH_EXCLUDED;
  c->klass = g_strdup(klass);
  c->reason = reason;
}

/* A check's words without the scheduler's name the row already shows. */
static char *without_name(const sched_ops *s, const char *msg) {
  size_t n = strlen(s->name);
  if (!strncmp(msg, s->name, n) && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  return g_strdup(msg);
}

static double micro_batches(const workload *w) {
  return w->micro_batches > 1 ? w->micro_batches : 1;
}

double search_bound_s(const sched_ops *s, const workload *w, const topology *t) {
  search_attention attn;
  search_attention_of(s, w, t, &attn);
  return search_step_bound_s(w, t, &attn, search_tp_ingress_Bps(w, t));
}

/* The step's tokens (every DP replica's micro-batches). */
static double step_tokens(const workload *w) {
  return (double)w->batch * (double)w->seq_len * (w->dp ? w->dp : 1) * micro_batches(w);
}

/* What a row can score at best (its bound's). */
static double score_bound(const search_question *q, const search_row *c, const workload *w) {
  if (q->objective == SEARCH_STEP) return -c->bound_s;
  return step_tokens(w) / (c->bound_s * q->gpus);
}

static void visit(uint32_t index, const sched_ops *s, const char *name, const search_row *c0,
                  void *user) {
  space *sp = user;
  const search_opts *o = sp->o;
  if (o->shards && index % o->shards != o->shard) return;
  search_row *c = figures_unknown(g_memdup2(c0, sizeof *c0));
  c->index = index;
  c->sched = g_strdup(name);
  c->micro_batches = 1;
  g_ptr_array_add(sp->res->rows, c);
  g_ptr_array_add(sp->ops, (gpointer)s);
  if (sp->seqs) {
    if (sp->seqs % c->dp) {
      set_excluded(c, "batch", g_strdup_printf("DP %u does not divide the %llu sequences of the "
                                               "global batch", c->dp,
                                               (unsigned long long)sp->seqs));
      return;
    }
    c->micro_batches = (uint32_t)(sp->seqs / c->dp);
  }
  workload w = config_workload(sp, s, c);
  layer_dims d = layer_dims_of(&w);
  g_autoptr(GError) e = NULL;
  if (!compute_layer_check(&d, &e)) {
    set_excluded(c, "tp", g_strdup(e->message));
    return;
  }
  if (fmod(d.tokens, c->tp)) {
    set_excluded(c, "tp", g_strdup_printf("TP %u does not divide the %.0f tokens of an SP rank",
                                          c->tp, d.tokens));
    return;
  }
  const topology *view = config_view(sp, &w, c);
  workload chk = layer_attention_workload(&w);
  if (!sched_check(s, &chk, view, &e)) {
    set_excluded(c, "method", without_name(s, e->message));
    return;
  }
  c->mem_bound_gib = layer_resident_bytes(&w) / GIB;
  if (sp->usable > 0 && c->mem_bound_gib > sp->usable) {
    set_excluded(c, "memory", g_strdup_printf("does not fit: weights, gradients, optimizer "
                                              "states and saved activations alone %.1f GiB > "
                                              "%.1f GiB usable", c->mem_bound_gib, sp->usable));
    return;
  }
  /* the plan the simulation builds: a few layers where it extends them */
  workload built = o->whole_steps ? w : sim_step_replayed(&w);
  const degrees *deg = config_degrees(sp, &w, c);
  const orbits *q = deg->o;
  if (!sched_check_tasks(&built, layer_tasks_estimate_mult(&built, q ? q->mult : 1), s->name, &e)) {
    set_excluded(c, "plan", without_name(s, e->message));
    return;
  }
  /* the attention's part, once per method, TP, SP, head-parallel degree,
   * split and placement */
  g_autofree char *key = g_strdup_printf("%s/%u/%u/%u/%u/%d", s->name, c->tp, c->sp, c->head_parallel,
                                         c->split, (int)c->placement);
  search_attention *attn = g_hash_table_lookup(sp->attention, key);
  if (!attn) {
    attn = g_new(search_attention, 1);
    search_attention_on(s, &w, o->s->topo, view, attn);
    g_hash_table_insert(sp->attention, g_steal_pointer(&key), attn);
  }
  /* with what the attention keeps for the backward (search_bound.h) */
  double resident_gib = c->mem_bound_gib;
  c->mem_bound_gib = search_memory_bound_bytes(&w, attn) / GIB;
  if (sp->usable > 0 && c->mem_bound_gib > sp->usable) {
    set_excluded(c, "memory", g_strdup_printf("does not fit: weights, gradients, optimizer "
                                              "states, saved activations and the attention's "
                                              "tensors kept for the backward (%.1f GiB) alone "
                                              "%.1f GiB > %.1f GiB usable",
                                              c->mem_bound_gib - resident_gib, c->mem_bound_gib,
                                              sp->usable));
    return;
  }
  c->bound_s = search_step_bound_s(&w, o->s->topo, attn, deg->tp_ingress_Bps);
}

/* ---- simulation ---- */

typedef struct {
  const space *sp;
  GHashTable *at;       /* row -> its const sched_ops * */
  bool profile;         /* TASP_SEARCH_PROFILE set: profile_line */
} sim_ctx;

/* The CPU time this thread has used, in seconds. */
static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* With TASP_SEARCH_PROFILE set, a line on stderr per simulated
 * configuration: its dimensions, the CPU seconds its simulation took and
 * whether it fit: where a search's time goes.  Lines come in the order
 * the simulations end. */
static void profile_line(const search_row *c, double cpu_s) {
  fprintf(stderr, "search-profile: %u %s tp %u sp %u heads %u split %u dp %u zero %u %s %s "
          "%.3f s %s\n", c->index, c->sched, c->tp, c->sp, c->head_parallel, c->split, c->dp,
          c->zero, c->recompute == RECOMPUTE_FULL ? "full" : "none",
          layer_placement_name(c->placement), cpu_s,
          c->status == SEARCH_SIMULATED ? "fits" : "does-not-fit");
}

static void simulate(gpointer data, gpointer user) {
  search_row *c = data;
  const sim_ctx *x = user;
  double cpu0 = x->profile ? thread_cpu_s() : 0;
  const sched_ops *s = g_hash_table_lookup(x->at, c);
  scenario_point pt = {config_workload(x->sp, s, c), s, false, NULL};
  /* the orbits its plan estimate took (visit: every row simulated has
   * them), or with its method's turn (run_rounds made them before the
   * round); read only here, from several threads */
  g_autofree char *key = s->turn ? turned_key(s, c) : degrees_key(c);
  const orbits *q = NULL;
  if (s->turn) {
    q = g_hash_table_lookup(x->sp->turned, key);
  } else {
    const degrees *d = g_hash_table_lookup(x->sp->degrees, key);
    q = d ? d->o : NULL;
  }
  exec_opts eo = {.orbits = q};
  sim_result *r = (x->sp->o->whole_steps ? sim_run_step : sim_run_step_repeating)(
      x->sp->o->s->topo, &pt, &eo);
  c->step_s = r->r->step_s;
  c->tokens_per_s_per_gpu = sim_tokens_per_s_per_gpu(r);
  c->mfu = sim_mfu(r);
  c->peak_mem_gib = sim_peak_gib(r);
  if (sim_fits(r)) {
    c->status = SEARCH_SIMULATED;
    c->reason = verdict_reason(x->sp->o->s->topo, r, NULL);
  } else {
    c->status = SEARCH_NO_FIT;
    c->klass = g_strdup("memory");
    g_autofree char *why = sim_unfit_text(r);
    c->reason = g_strdup_printf("does not fit: %s", why);
  }
  sim_result_free(r);
  if (x->profile) profile_line(c, thread_cpu_s() - cpu0);
}

/* The K-th best score of the rows that fit so far (-inf: fewer than K),
 * and each method's best. */
typedef struct {
  GArray *scores;       /* double, best first, at most top */
  GHashTable *best;     /* method name -> double * */
} thresholds;

static void thresholds_add(thresholds *th, const search_question *q, const search_row *c) {
  double s = search_score(q, c);
  guint i = 0;
  while (i < th->scores->len && g_array_index(th->scores, double, i) >= s) i++;
  if (i < q->top) g_array_insert_val(th->scores, i, s);
  if (th->scores->len > q->top) g_array_set_size(th->scores, q->top);
  double *b = g_hash_table_lookup(th->best, c->sched);
  if (!b) {
    b = g_new(double, 1);
    *b = -INFINITY;
    g_hash_table_insert(th->best, c->sched, b);
  }
  if (s > *b) *b = s;
}

/* Whether a row scoring at most `ub` can be neither in the top K nor its
 * method's best (a tie could be: only a strictly lower bound prunes). */
static bool prunable(const thresholds *th, const search_question *q, const search_row *c,
                     double ub) {
  if (th->scores->len < q->top) return false;
  double *b = g_hash_table_lookup(th->best, c->sched);
  return b && ub < g_array_index(th->scores, double, q->top - 1) && ub < *b;
}

typedef struct {
  search_row *row;
  double ub;
} cand;

static int by_bound(gconstpointer a, gconstpointer b) {
  const cand *x = a, *y = b;
  if (x->ub != y->ub) return x->ub > y->ub ? -1 : 1;
  return (x->row->index > y->row->index) - (x->row->index < y->row->index);
}

static void run_rounds(space *sp, GArray *cands) {
  const search_opts *o = sp->o;
  const search_question *q = &sp->res->q;
  g_autoptr(GHashTable) at = g_hash_table_new(NULL, NULL);
  for (guint i = 0; i < sp->res->rows->len; i++)
    g_hash_table_insert(at, sp->res->rows->pdata[i], sp->ops->pdata[i]);
  sim_ctx x = {sp, at, g_getenv("TASP_SEARCH_PROFILE") != NULL};
  thresholds th = {g_array_new(FALSE, FALSE, sizeof(double)),
                   g_hash_table_new_full(g_str_hash, g_str_equal, NULL, g_free)};
  unsigned jobs = o->jobs ? o->jobs : (unsigned)g_get_num_processors();
  guint i = 0;
  g_autoptr(GPtrArray) round = g_ptr_array_new();
  while (i < cands->len) {
    g_ptr_array_set_size(round, 0);
    while (i < cands->len && round->len < SEARCH_ROUND) {
      cand *c = &g_array_index(cands, cand, i++);
      if (!o->exhaustive && prunable(&th, q, c->row, c->ub)) {
        c->row->status = SEARCH_PRUNED;
        c->row->reason = g_strdup_printf("compute and the forward's TP waits alone take %.4g "
                                         "s: outside the top %u and below the best of %s",
                                         c->row->bound_s, q->top, c->row->sched);
        continue;
      }
      g_ptr_array_add(round, c->row);
    }
    /* the orbits with the turn of each method that turns, once per key,
     * here in one thread (simulate reads them) */
    for (guint k = 0; k < round->len; k++) {
      search_row *r = round->pdata[k];
      const sched_ops *s = g_hash_table_lookup(at, r);
      if (!s->turn) continue;
      g_autofree char *key = turned_key(s, r);
      if (g_hash_table_contains(sp->turned, key)) continue;
      workload w = config_workload(sp, s, r);
      g_hash_table_insert(sp->turned, g_steal_pointer(&key),
                          layer_orbits_sched(s, &w, o->s->topo));
    }
    if (jobs > 1 && round->len > 1) {
      GThreadPool *pool = g_thread_pool_new(simulate, &x, (gint)MIN(jobs, round->len), TRUE, NULL);
      for (guint k = 0; k < round->len; k++) g_thread_pool_push(pool, round->pdata[k], NULL);
      g_thread_pool_free(pool, FALSE, TRUE);
    } else {
      for (guint k = 0; k < round->len; k++) simulate(round->pdata[k], &x);
    }
    for (guint k = 0; k < round->len; k++) {
      search_row *r = round->pdata[k];
      if (r->status == SEARCH_SIMULATED) thresholds_add(&th, q, r);
    }
  }
  g_array_unref(th.scores);
  g_hash_table_unref(th.best);
}

search_result *search_run(const search_opts *o, GError **err) {
  const topology *t = o->s->topo;
  if (o->gpus == 0 || o->gpus > t->n_gpus) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--gpus': expected 1 "
                "to the %u GPUs of topology %s, got %u", t->n_gpus, t->name, o->gpus);
    return NULL;
  }
  uint64_t seq = g_array_index(o->s->seqs, uint64_t, 0);
  double per_seq = (double)seq * o->s->model.batch;
  uint64_t seqs = 0;
  if (o->global_batch_tokens) {
    if (fmod((double)o->global_batch_tokens, per_seq) != 0) {
      g_autofree char *g = size_format(o->global_batch_tokens), *s = size_format(seq);
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: expected whole sequences of %s "
                  "tokens x batch %u, got %s tokens",
                  o->global_batch_from ? o->global_batch_from
                                       : "command line: option '--global-batch-tokens'",
                  s, o->s->model.batch, g);
      return NULL;
    }
    seqs = (uint64_t)((double)o->global_batch_tokens / per_seq);
  }
  uint64_t total = enumerate(o, NULL, NULL);
  if (total > SEARCH_MAX_CONFIGS) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "command line: option '--gpus': %u GPUs "
                "give more than %u configurations; name fewer methods (--sched) or GPUs",
                o->gpus, SEARCH_MAX_CONFIGS);
    return NULL;
  }
  search_result *res = search_result_new();
  res->q = (search_question){.model = g_strdup(o->s->model_name ? o->s->model_name : "model"),
                             .topology = g_strdup(t->name), .seq_len = seq, .gpus = o->gpus,
                             .global_batch_tokens = o->global_batch_tokens,
                             .causal = g_array_index(o->s->masks, gboolean, 0),
                             .objective = o->objective, .top = o->top,
                             .configs = (uint32_t)total, .usable_gib = topo_usable_gib(t),
                             .precision = o->s->model.precision};
  space sp = {o, res, g_ptr_array_new(), seqs, res->q.usable_gib,
              g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free),
              g_hash_table_new_full(g_str_hash, g_str_equal, g_free, degrees_free),
              g_hash_table_new_full(g_str_hash, g_str_equal, g_free, turned_free),
              {.owned = false}, NULL};
  enumerate(o, visit, &sp);
  layer_view_clear(&sp.view);
  g_free(sp.view_key);
  g_autoptr(GArray) cands = g_array_new(FALSE, FALSE, sizeof(cand));
  for (guint i = 0; i < res->rows->len; i++) {
    search_row *c = res->rows->pdata[i];
    if (c->status == SEARCH_EXCLUDED) continue;
    workload w = config_workload(&sp, sp.ops->pdata[i], c);
    cand x = {c, score_bound(&res->q, c, &w)};
    g_array_append_val(cands, x);
  }
  g_array_sort(cands, by_bound);
  if (!o->count_only) run_rounds(&sp, cands);
  g_ptr_array_unref(sp.ops);
  g_hash_table_unref(sp.attention);
  g_hash_table_unref(sp.degrees);
  g_hash_table_unref(sp.turned);
  return res;
}
