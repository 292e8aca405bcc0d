/* sched: registry of schedulers and shared checks. */
#include "sched.h"

#include <string.h>

#include "budget.h"
#include "layers.h"
#include "sizes.h"

static const sched_ops *const all[] = {&sched_ring,      &sched_zigzag,    &sched_tasp,
                                       &sched_tasp_mkm,  &sched_ulysses,   &sched_usp,
                                       &sched_usp_zigzag, &sched_tokenring, &sched_allgather,
                                       &sched_lasp,      &sched_lasp2,     &sched_lasp2h,
                                       &sched_stripe,    &sched_double_ring,
                                       &sched_te_p2p,    &sched_te_all_gather, &sched_te_a2a,
                                       &sched_te_a2a_p2p, NULL};

const sched_ops *const *sched_all(void) { return all; }

const sched_ops *sched_find(const char *name) {
  for (const sched_ops *const *s = all; *s; s++)
    if (strcmp((*s)->name, name) == 0) return *s;
  return NULL;
}

char *sched_names(void) {
  GString *s = g_string_new(NULL);
  for (const sched_ops *const *o = all; *o; o++)
    g_string_append_printf(s, "%s%s", o == all ? "" : ", ", (*o)->name);
  return g_string_free(s, FALSE);
}

/* The distinct options, as sched_all() declares them: computed on each
 * call (a few schedulers of a few options each) so that no table needs
 * building before threads read it. */
static guint collect_options(const sched_opt **out) {
  guint n = 0;
  for (const sched_ops *const *s = all; *s; s++)
    for (const sched_opt *const *o = (*s)->opts; o && *o; o++) {
      guint i = 0;
      while (i < n && out[i] != *o) i++;
      if (i < n) continue;
      g_assert(n < SCHED_MAX_OPTS); /* raise WORKLOAD_MAX_OPTS */
      out[n++] = *o;
    }
  out[n] = NULL;
  return n;
}

const sched_opt *const *sched_options(void) {
  static const sched_opt *opts[SCHED_MAX_OPTS + 1];
  static gsize done = 0;
  if (g_once_init_enter(&done)) {
    collect_options(opts);
    g_once_init_leave(&done, 1);
  }
  return opts;
}

int sched_option_index(const sched_opt *o) {
  const sched_opt *const *all_opts = sched_options();
  for (int i = 0; all_opts[i]; i++)
    if (all_opts[i] == o) return i;
  return -1;
}

const sched_opt *sched_option_find(const char *key) {
  for (const sched_opt *const *o = sched_options(); *o; o++)
    if (!strcmp((*o)->key, key)) return *o;
  return NULL;
}

const char *sched_option_flag(const sched_opt *o) {
  g_autofree char *dashed = g_strdelimit(g_strconcat("--", o->key, NULL), "_", '-');
  return g_intern_string(dashed);
}

const char *sched_option_field(const sched_opt *o) {
  g_autofree char *path = g_strconcat(o->in_model ? "model." : "", o->key, NULL);
  return g_intern_string(path);
}

bool sched_uses_option(const sched_ops *s, const sched_opt *o) {
  for (const sched_opt *const *x = s->opts; x && *x; x++)
    if (*x == o) return true;
  return false;
}

char *sched_option_users(const sched_opt *o) {
  GString *s = g_string_new(NULL);
  for (const sched_ops *const *x = all; *x; x++)
    if (sched_uses_option(*x, o)) g_string_append_printf(s, "%s%s", s->len ? ", " : "", (*x)->name);
  return g_string_free(s, FALSE);
}

static workload_opt *slot(workload *w, const sched_opt *o) {
  int i = sched_option_index(o);
  g_assert(i >= 0); /* an option no registered scheduler declares */
  return &w->opts[i];
}

static const workload_opt *cslot(const workload *w, const sched_opt *o) {
  return slot((workload *)w, o);
}

uint32_t sched_opt_num(const workload *w, const sched_opt *o) { return cslot(w, o)->num; }
const char *sched_opt_text(const workload *w, const sched_opt *o) { return cslot(w, o)->text; }
void sched_opt_set_num(workload *w, const sched_opt *o, uint32_t v) { slot(w, o)->num = v; }
void sched_opt_set_text(workload *w, const sched_opt *o, const char *text) {
  slot(w, o)->text = text;
}

bool sched_opt_value(const sched_opt *o, const char *cli_text, json_object *v, workload_opt *out,
                     char **why) {
  switch (o->type) {
    case SCHED_OPT_COUNT: {
      /* the command line's text as the --set machinery reads a value: a
       * JSON number, or a size in text (4, 1K) */
      g_autoptr(json_object) parsed = cli_text ? json_parse_value(cli_text, "", NULL) : NULL;
      json_object *x = cli_text ? parsed : v;
      uint64_t n = 0;
      bool ok = false;
      if (x && json_object_is_type(x, json_type_int) && json_object_get_int64(x) >= 1) {
        n = (uint64_t)json_object_get_int64(x);
        ok = true;
      } else if (cli_text && x && json_object_is_type(x, json_type_string)) {
        ok = size_parse(json_object_get_string(x), &n);
      }
      if (!ok || n > o->max) {
        *why = cli_text ? g_strdup_printf("expected a whole number from 1 to %u, got \"%s\"",
                                          o->max, cli_text)
                        : g_strdup_printf("expected a whole number from 1 to %u", o->max);
        return false;
      }
      out->num = (uint32_t)n;
      return true;
    }
    case SCHED_OPT_FLAG:
      if (cli_text) {
        out->num = 1; /* a flag given */
        return true;
      }
      if (!json_object_is_type(v, json_type_boolean)) {
        *why = g_strdup("expected true or false");
        return false;
      }
      out->num = json_object_get_boolean(v);
      return true;
    case SCHED_OPT_TEXT:
      if (!cli_text && !json_object_is_type(v, json_type_string)) {
        *why = g_strdup("expected a string");
        return false;
      }
      out->text = cli_text ? cli_text : json_object_get_string(v);
      return true;
  }
  g_assert_not_reached();
}

static bool runs(const sched_ops *s, attn_kind k) {
  unsigned kinds = s->attention ? s->attention : SCHED_RUNS(ATTN_SOFTMAX);
  return kinds & SCHED_RUNS(k);
}

bool sched_check_attention(const sched_ops *s, const workload *w, GError **err) {
  for (int k = 0; k < ATTN_KINDS; k++) {
    if (layers_count(w, (attn_kind)k) && !runs(s, (attn_kind)k)) {
      GString *who = g_string_new(NULL);
      for (const sched_ops *const *o = all; *o; o++)
        if (runs(*o, (attn_kind)k))
          g_string_append_printf(who, "%s%s", who->len ? ", " : "", (*o)->name);
      g_autofree char *mix = layers_text(w);
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "%s does not run %s-attention layers (the model has %s); schedulers that "
                  "do: %s", s->name, attn_name((attn_kind)k), mix, who->str);
      g_string_free(who, TRUE);
      return false;
    }
  }
  return true;
}

bool sched_check(const sched_ops *s, const workload *w, const topology *t, GError **err) {
  if (!sched_check_attention(s, w, err)) return false;
  if (w->docs && !s->docs) return sched_check_docs(s, w, 1, "", err);
  for (int k = 0; k < ATTN_KINDS; k++) {
    if (!layers_count(w, (attn_kind)k)) continue;
    workload one = layers_one(w, (attn_kind)k);
    if (!s->check(&one, t, err)) return false;
  }
  return true;
}

bool sched_check_docs(const sched_ops *s, const workload *w, uint64_t parts, const char *why,
                      GError **err) {
  if (!w->docs) return true;
  /* every variable-length layout here is flash attention's (cu_seqlens):
   * softmax layers only */
  if (layers_count(w, ATTN_LINEAR)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_DOCS,
                "%s: packed documents (--docs) run on softmax-attention layers only (the "
                "variable-length layouts are flash attention's); the model has linear-attention "
                "layers", s->name);
    return false;
  }
  if (!s->docs) {
    GString *who = g_string_new(NULL);
    for (const sched_ops *const *o = all; *o; o++)
      if ((*o)->docs && sched_check_attention(*o, w, NULL))
        g_string_append_printf(who, "%s%s", who->len ? ", " : "", (*o)->name);
    g_set_error(err, TASP_ERROR, TASP_ERROR_DOCS,
                "%s does not run packed documents (--docs) yet; schedulers that do: %s",
                s->name, who->str);
    g_string_free(who, TRUE);
    return false;
  }
  uint64_t pieces = parts * w->gpus;
  for (uint32_t d = 0; parts && d < w->n_docs; d++)
    if (w->docs[d] % pieces) {
      g_autofree char *len = size_format(w->docs[d]);
      g_set_error(err, TASP_ERROR, TASP_ERROR_DOCS,
                  "document %u (%s tokens) does not divide into %" G_GUINT64_FORMAT " equal "
                  "pieces (%s; pad it to a multiple of %" G_GUINT64_FORMAT ")", d + 1, len,
                  pieces, why, pieces);
      return false;
    }
  return true;
}

uint32_t sched_doc_layout(const workload *w, uint32_t doc, uint32_t a, uint32_t r, bool zigzag,
                          plan_seg out[2]) {
  uint64_t start = 0;
  for (uint32_t d = 0; d < doc; d++) start += w->docs[d];
  plan_seg piece[2];
  uint32_t n = sched_layout(w->docs[doc], a, r, zigzag, piece);
  for (uint32_t i = 0; i < n; i++) out[i] = (plan_seg){start + piece[i].start, piece[i].len};
  return n;
}

void sched_varlen_call(plan *p, uint32_t first) {
  uint32_t n[OP_KINDS] = {0};
  for (uint32_t i = first; i < p->tasks->len; i++) n[plan_task_at(p, i)->op.kind]++;
  for (uint32_t i = first; i < p->tasks->len; i++) {
    plan_op *op = &plan_task_at(p, i)->op;
    if (op->kind == OP_ATTN || op->kind == OP_MERGE) op->call_parts = n[op->kind];
  }
}

bool sched_check_divisible(const workload *w, uint64_t parts, const char *why, GError **err) {
  uint64_t pieces = parts * w->gpus;
  if (w->seq_len % pieces != 0 || w->seq_len < pieces) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SEQ,
                "sequence length %" G_GUINT64_FORMAT " is not divisible into %" G_GUINT64_FORMAT
                " equal chunks (%s)", w->seq_len, pieces, why);
    return false;
  }
  return true;
}

bool sched_check_tasks(const workload *w, double tasks, const char *who, GError **err) {
  double bytes = tasks * SCHED_PLAN_TASK_BYTES, limit;
  if (w->plan_cap_tasks > 0) {
    if (tasks <= w->plan_cap_tasks) return true;
    g_autofree char *need = budget_bytes_text(bytes);
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                "%s: a plan of about %.3g tasks (about %s); a search simulates plans of at most "
                "%.3g tasks on any machine (the main command runs one within the memory budget)",
                who, tasks, need, w->plan_cap_tasks);
    return false;
  }
  if (!budget_limit(&limit, err)) return false;
  if (bytes <= limit) return true;
  g_autofree char *need = budget_bytes_text(bytes), *have = budget_bytes_text(limit);
  g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
              "%s: a plan of about %.3g tasks needs about %s; expected at most %s, the memory "
              "budget (%s; or fewer GPUs, or a full mask, whose steps are one task for all GPUs)",
              who, tasks, need, have,
              g_getenv("TASP_MEMORY_BUDGET") ? "TASP_MEMORY_BUDGET"
                                             : "half of the memory this process may use; "
                                               "TASP_MEMORY_BUDGET sets another");
  return false;
}

plan *sched_passes(const workload *w, const topology *t, bool record_segs, sched_pass_fn pass) {
  sched_io io;
  memset(&io, 0xff, sizeof io);
  io.late = false;
  io.end_task = -1;
  io.aux = NULL;
  io.n_keep = 0;
  sched_ctx c = {plan_new(w->gpus, record_segs), w, t, &io};
  int64_t last = -1;
  if (w->pass != PASS_BWD) {
    sched_io_pass(c.p, w, &io, false);
    last = pass(&c, false, -1);
    sched_io_end(c.p, &io, false, io.late);
  }
  /* the backward pass starts once every GPU's forward is done */
  if (w->pass == PASS_FWDBWD) last = plan_barrier(c.p, w->gpus, last);
  if (w->pass != PASS_FWD) {
    sched_io_pass(c.p, w, &io, true);
    pass(&c, true, last);
    sched_io_end(c.p, &io, true, io.late);
  }
  plan_finish(c.p);
  return c.p;
}

void sched_io_save(plan *p, const workload *w, uint32_t buf) {
  if (w->pass == PASS_FWD) plan_buf_keep(p, buf);
}

/* The causal intra-chunk kernel whose times the linear tables hold is
 * scripts/calibrate/calibrate.py's stand-in for lightning attention
 * (lin_intra, lin_intra_bwd; calibration/h200x2-linear), so its memory is
 * charged too, as that kernel's workspace: per token and head, with b the
 * block length and D the head dim, the float32 states K_i^T V_i of every
 * block (4 D^2 / b bytes) and their bf16 exclusive prefix (2 D^2 / b)
 * beside the output, forward; backward, at its peak (the suffix sum), the
 * block states and prefix, the float32 dP_i = Q_i^T dO_i and its suffix
 * difference (4 + 4 D^2 / b) and that made bf16 (2 D^2 / b), and the
 * masked scores and dS of the diagonal blocks (2 b each): 16 D^2 / b + 4 b
 * (calibration/h200x2-mem: LASP causal at 64K tokens, D = 128, b = 64,
 * peaks 5.0 / 13.0 GiB against 2.0 / 4.0 of the full mask).  Lightning
 * attention's fused kernels keep these in on-chip memory: a model of them
 * would declare none; the times priced here are the stand-in's, and so is
 * the memory. */
void sched_lin_intra_workspace(plan *p, uint32_t task) {
  const plan_op *op = &plan_task_at(p, task)->op;
  g_assert(op->kind == OP_LIN_INTRA);
  if (!op->causal) return;
  double b = op->block && op->block < op->sq ? op->block : op->sq;
  double d2 = (double)op->head_dim * op->head_dim;
  double per = op->backward ? 16 * d2 / b + 4 * b : 6 * d2 / b;
  plan_buf_out(p, task, per * op->batch * op->heads * op->sq,
               "intra-chunk workspace (block states, float32)");
}

double sched_rows_bytes(const workload *w, double heads) {
  return (double)w->batch * ((double)w->seq_len / w->gpus) * heads * w->head_dim * w->elem_bytes;
}

/* apart: backward's dK and dV two tensors (sched_io_pass_apart) */
static void io_pass(plan *p, const workload *w, sched_io *io, bool backward, bool apart) {
  double q = sched_rows_bytes(w, w->heads), kv = workload_kv_bytes(w, (double)w->seq_len / w->gpus);
  /* flash attention's softmax_lse: float32, one per query row and head */
  double lse = 4.0 * w->batch * ((double)w->seq_len / w->gpus) * w->heads;
  bool softmax = w->attention == ATTN_SOFTMAX;
  io->late = false;
  io->end_task = -1;
  io->dv = UINT32_MAX;
  if (io->q == UINT32_MAX) io->q = plan_buf_input(p, PLAN_ALL, q, "q");
  if (io->kv == UINT32_MAX) io->kv = plan_buf_input(p, PLAN_ALL, kv, "k, v");
  if (!backward) {
    io->o = p->attn_out = plan_buf_new(p, PLAN_ALL, q, "out");
    io->lse = softmax ? plan_buf_new(p, PLAN_ALL, lse, "softmax_lse") : UINT32_MAX;
    plan_buf_keep(p, io->o);
    if (softmax) plan_buf_keep(p, io->lse);
    return;
  }
  if (io->o == UINT32_MAX) io->o = plan_buf_input(p, PLAN_ALL, q, "out");
  if (io->lse == UINT32_MAX && softmax) io->lse = plan_buf_input(p, PLAN_ALL, lse, "softmax_lse");
  io->dout = plan_buf_input(p, PLAN_ALL, q, "dout");
  io->dq = plan_buf_new(p, PLAN_ALL, q, "dq");
  io->dkv = plan_buf_new(p, PLAN_ALL, apart ? kv / 2 : kv, apart ? "dk" : "dk, dv");
  if (apart) io->dv = plan_buf_new(p, PLAN_ALL, kv / 2, "dv");
  plan_buf_keep(p, io->dq);
  plan_buf_keep(p, io->dkv);
  if (apart) plan_buf_keep(p, io->dv);
}

void sched_io_pass(plan *p, const workload *w, sched_io *io, bool backward) {
  io_pass(p, w, io, backward, false);
}

void sched_io_pass_apart(plan *p, const workload *w, sched_io *io, bool backward) {
  io_pass(p, w, io, backward, true);
}

void sched_io_end(plan *p, const sched_io *io, bool backward, bool late) {
  uint32_t outs[3] = {backward ? io->dq : io->o, backward ? io->dkv : io->lse,
                      backward ? io->dv : UINT32_MAX};
  if (io->end_task >= 0) {
    for (int i = 0; i < 3; i++)
      if (outs[i] != UINT32_MAX) plan_buf_writes_late(p, (uint32_t)io->end_task, outs[i]);
    return;
  }
  int64_t done = -1;
  for (uint32_t g = 0; g < p->n_gpus; g++) {
    int64_t t = p->last_compute[g];
    if (t < 0 || t == done) continue;
    done = t; /* a lockstep task writes every GPU's at once */
    for (int i = 0; i < 3; i++) {
      if (outs[i] == UINT32_MAX) continue;
      if (late) plan_buf_writes_late(p, (uint32_t)t, outs[i]);
      else plan_buf_writes(p, (uint32_t)t, outs[i]);
    }
  }
}

plan_op sched_shape(const workload *w, bool causal, bool backward) {
  return (plan_op){.kind = OP_ATTN, .causal = causal, .backward = backward, .batch = w->batch,
                   .heads = w->heads, .head_dim = w->head_dim, .elem_bytes = w->elem_bytes,
                   .block = w->linear_block, .decay = w->decay};
}

uint32_t sched_layout(uint64_t seq, uint32_t a, uint32_t r, bool zigzag, plan_seg out[2]) {
  if (!zigzag) {
    out[0] = (plan_seg){a * (seq / r), seq / r};
    return 1;
  }
  uint64_t half = seq / (2 * (uint64_t)r);
  out[0] = (plan_seg){a * half, half};
  out[1] = (plan_seg){(2 * (uint64_t)r - 1 - a) * half, half};
  return 2;
}
