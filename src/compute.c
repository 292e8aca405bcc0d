/* compute: roofline or measured-table kernel times (the model: compute.h). */
#include "compute.h"

#include <math.h>

#include "sizes.h"

void compute_model_init(compute_model *m) {
  memset(m, 0, sizeof *m);
  m->efficiency = 1.0;
  /* backward/forward time measured 2.7-3.0x on H200 flash attention
   * (shared/calibration/h200x4/compute-n4.jsonl); 2.8 is its middle */
  m->bwd_ratio = 2.8;
  /* A rearranging copy reads and writes every byte: about 2 TB/s of bytes
   * copied on H100/H200 HBM (3.35 and 4.8 TB/s nominal; torch.cat and
   * .contiguous() reach 60-85% of it), a launch of a few microseconds, and
   * a host issue cost of one small PyTorch op.  Topology files may say
   * otherwise (compute.copy_GBps, copy_fixed_us, copy_host_us). */
  m->copy_Bps = 2000e9;
  m->copy_fixed_s = 5e-6;
  m->copy_host_s = 15e-6;
  m->copy_mixed_Bps = 0; /* 0: copy_Bps */
  m->comm_slowdown = 0;
  for (int c = 0; c < 2; c++) {
    m->points[c] = g_array_new(FALSE, FALSE, sizeof(compute_point));
    m->aspect_points[c] = g_array_new(FALSE, FALSE, sizeof(compute_point));
  }
  m->table_scale = 1.0;
  m->linear_efficiency = m->efficiency;
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 2; c++) {
      m->lin_points[k][c] = g_array_new(FALSE, FALSE, sizeof(compute_point));
      m->lin_gpu_points[k][c] = g_array_new(FALSE, FALSE, sizeof(compute_point));
    }
  m->gemm_points = g_array_new(FALSE, FALSE, sizeof(compute_point));
  m->fp8_gemm_points = g_array_new(FALSE, FALSE, sizeof(compute_point));
  /* Roofline GEMMs: large bf16 GEMMs of a layer's shapes run at about 70%
   * of the dense peak on H100 and A100 (cuBLAS): an assumption, until the
   * topology has a measured gemm_table (scripts/calibrate --parts gemm). */
  m->gemm_efficiency = 0.7;
}

void compute_model_clear(compute_model *m) {
  for (int c = 0; c < 2; c++) {
    if (m->points[c]) g_array_free(m->points[c], TRUE);
    if (m->aspect_points[c]) g_array_free(m->aspect_points[c], TRUE);
  }
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 2; c++)
    {
      if (m->lin_points[k][c]) g_array_free(m->lin_points[k][c], TRUE);
      if (m->lin_gpu_points[k][c]) g_array_free(m->lin_gpu_points[k][c], TRUE);
    }
  if (m->gemm_points) g_array_free(m->gemm_points, TRUE);
  if (m->fp8_gemm_points) g_array_free(m->fp8_gemm_points, TRUE);
  g_free(m->table_from);
  kernel_model_clear(&m->mech);
  memset(m, 0, sizeof *m);
}

double compute_attn_flops(double batch, double heads, double head_dim, double sq,
                          double sk, bool causal) {
  double f = 4.0 * batch * heads * sq * sk * head_dim;
  return causal ? f / 2 : f;
}

static int cmp_point(gconstpointer a, gconstpointer b) {
  const compute_point *p = a, *q = b;
  if (p->head_dim != q->head_dim) return (p->head_dim > q->head_dim) - (p->head_dim < q->head_dim);
  if (p->bh != q->bh) return (p->bh > q->bh) - (p->bh < q->bh);
  if (p->aspect != q->aspect) return (p->aspect > q->aspect) - (p->aspect < q->aspect);
  return (p->flops > q->flops) - (p->flops < q->flops);
}

/* Least-squares non-decreasing fit of log(time) over one run of points
 * (pool adjacent violators; weights: the repeats each point merged).  A
 * noisy dip is shared between its neighbours, where a running maximum
 * would lift every later point to the earlier one's time.  Backward: over
 * the points that measure it. */
static void isotonic(compute_point *p, const double *w, guint n, bool bwd) {
  g_autofree double *v = g_new(double, n), *wt = g_new(double, n);
  g_autofree guint *len = g_new(guint, n), *idx = g_new(guint, n);
  guint m = 0, k = 0;
  for (guint i = 0; i < n; i++) {
    double t = bwd ? p[i].bwd_s : p[i].fwd_s;
    if (t <= 0) continue;
    idx[k++] = i;
    v[m] = log(t);
    wt[m] = w[i];
    len[m++] = 1;
    while (m > 1 && v[m - 2] > v[m - 1]) {
      v[m - 2] = (v[m - 2] * wt[m - 2] + v[m - 1] * wt[m - 1]) / (wt[m - 2] + wt[m - 1]);
      wt[m - 2] += wt[m - 1];
      len[m - 2] += len[m - 1];
      m--;
    }
  }
  for (guint b = 0, pos = 0; b < m; b++)
    for (guint l = 0; l < len[b]; l++) {
      compute_point *q = &p[idx[pos++]];
      *(bwd ? &q->bwd_s : &q->fwd_s) = exp(v[b]);
    }
}

/* Sort by (head dim, batch x heads, aspect, FLOPs); repeated kernels (GQA
 * and MHA of one size, say) become one point at the geometric mean of their
 * times; then, within a head dim, batch x heads and aspect, times are made
 * non-decreasing (isotonic), so the interpolation is monotone even where
 * measurement noise is not. */
static void tidy_points(GArray *pts) {
  g_array_sort(pts, cmp_point);
  g_autofree double *w = g_new(double, pts->len + 1);
  guint out = 0;
  for (guint i = 0; i < pts->len;) {
    compute_point *p = &g_array_index(pts, compute_point, i);
    double lf = 0, lb = 0;
    guint j = i;
    bool has_bwd = true;
    for (; j < pts->len && g_array_index(pts, compute_point, j).flops == p->flops &&
           g_array_index(pts, compute_point, j).aspect == p->aspect &&
           g_array_index(pts, compute_point, j).head_dim == p->head_dim &&
           g_array_index(pts, compute_point, j).bh == p->bh; j++) {
      lf += log(g_array_index(pts, compute_point, j).fwd_s);
      double b = g_array_index(pts, compute_point, j).bwd_s;
      if (b > 0) lb += log(b); else has_bwd = false;
    }
    compute_point merged = {p->head_dim, p->bh, p->aspect, p->flops, exp(lf / (j - i)),
                            has_bwd ? exp(lb / (j - i)) : 0, p->sq};
    w[out] = j - i;
    g_array_index(pts, compute_point, out++) = merged;
    i = j;
  }
  g_array_set_size(pts, out);
  compute_point *p = (compute_point *)pts->data;
  for (guint i = 0; i < out;) {
    guint j = i;
    while (j < out && p[j].aspect == p[i].aspect && p[j].head_dim == p[i].head_dim &&
           p[j].bh == p[i].bh)
      j++;
    isotonic(p + i, w + i, j - i, false);
    isotonic(p + i, w + i, j - i, true);
    i = j;
  }
}

/* One measured kernel into pts[causal].  kv_heads is accepted for the
 * record: GQA and MHA kernels of one shape take the same time (compute.h). */
static bool parse_kernel(json_object *p, json_where w, GArray *pts[2], GError **err) {
  static const char *const keys[] = {"batch", "heads", "kv_heads", "head_dim", "sq", "sk",
                                     "causal", "fwd_ms", "bwd_ms", NULL};
  if (!json_object_is_type(p, json_type_object)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field '%s': expected an object",
                w.file, w.path);
    return false;
  }
  if (!json_check_keys(p, w, keys, err)) return false;
  uint32_t b, h, hk, d, sq, sk;
  double fwd, bwd;
  if (!json_get_u32(p, w, "batch", false, 1, 1, &b, err) ||
      !json_get_u32(p, w, "heads", true, 0, 1, &h, err) ||
      !json_get_u32(p, w, "kv_heads", false, 1, 1, &hk, err) ||
      !json_get_u32(p, w, "head_dim", true, 0, 1, &d, err) ||
      !json_get_u32(p, w, "sq", true, 0, 1, &sq, err) ||
      !json_get_u32(p, w, "sk", true, 0, 1, &sk, err) ||
      !json_get_double(p, w, "fwd_ms", true, 0, 0, &fwd, err) ||
      !json_get_double(p, w, "bwd_ms", false, 0, -1, &bwd, err))
    return false;
  bool causal = false;
  if (!json_get_bool(p, w, "causal", &causal, err)) return false;
  compute_point pt = {d, (double)b * h, log2((double)sk / sq),
                      compute_attn_flops(b, h, d, sq, sk, causal),
                      fwd * 1e-3, bwd * 1e-3, sq};
  g_array_append_val(pts[causal], pt);
  return true;
}

static bool parse_point(json_object *p, json_where w, compute_model *m, GError **err) {
  return parse_kernel(p, w, m->points, err);
}

static bool parse_aspect_point(json_object *p, json_where w, compute_model *m, GError **err) {
  return parse_kernel(p, w, m->aspect_points, err);
}

/* ---- linear attention: FLOPs, bytes, measured kernels ---- */

/* The block length a chunked kernel works in when a task names none:
 * flash-linear-attention's chunk kernels use 64-token chunks, as LASP's
 * forward kernel does (lasp/lasp_naive.py: BLOCK = 64). */
#define LIN_DEFAULT_BLOCK 64

static double lin_tokens(const plan_op *op) {
  return op->kind == OP_LIN_STATE ? op->sk : op->sq;
}

/* Forward FLOPs per batch and head, n tokens, head dim D, blocks of b:
 *   intra, full mask: the chunk's state K^T V and its product with Q,
 *     2nD² each: 4nD²;
 *   intra, causal: lightning attention's two passes (Qin et al. 2024,
 *     arXiv 2401.04658): inter-block Q·KV and KV += K^T V, 2bD² each per
 *     block (4nD²), and the masked diagonal blocks (Q_i K_i^T (.) M) V_i,
 *     2b²D each, computed whole (4nbD);
 *   state: K^T V, 2nD²;  apply: Q·M, 2nD².
 * A scalar decay per head scales rows of Q and K (nD each) and, causal,
 * the diagonal blocks' mask (nb), and a state by the block decay (D²): a
 * few percent at D = 128, b = 64 (2nD + nb against 4nD² + 4nbD). */
static double lin_fwd_flops(const plan_op *op) {
  double n = lin_tokens(op), D = op->head_dim;
  double b = op->block ? op->block : LIN_DEFAULT_BLOCK;
  if (b > n) b = n;
  double f = 0;
  switch (op->kind) {
  case OP_LIN_INTRA:
    f = 4 * n * D * D + (op->causal ? 4 * n * b * D : 0);
    if (op->decay) f += 2 * n * D + (op->causal ? n * b : 0);
    break;
  case OP_LIN_STATE:
    f = 2 * n * D * D + (op->decay ? n * D + D * D : 0);
    break;
  case OP_LIN_APPLY:
    f = 2 * n * D * D + (op->decay ? n * D : 0);
    break;
  default:
    break;
  }
  return f * op->batch * op->heads;
}

/* Backward over forward FLOPs.  Causal intra: 2.5, the count of LASP's
 * backward kernels (lasp_naive.py: _bwd_diag_kernel does five b x b x D
 * products per block against the forward's two; _bwd_none_diag_kernel
 * five b x D x D products against two, recomputing the running state).
 * Full intra, state and apply: 2, the two products of each product's
 * gradient (state: dK = V dM^T, dV = K dM; apply: dQ = dO M^T, dM = Q^T dO;
 * the states themselves are cached from forward, as LASP-2 caches
 * M_{1:t-1}). */
static double lin_bwd_ratio(const plan_op *op) {
  return op->kind == OP_LIN_INTRA && op->causal ? 2.5 : 2.0;
}

/* GEMM and element-wise counts (below, with their models) */
static double gemm_flops(const plan_op *op);
static double gemm_bytes(const plan_op *op);
static double elemwise_bytes(const plan_op *op);

double compute_op_bytes(const plan_op *op) {
  if (op->kind == OP_GEMM) return gemm_bytes(op) * (op->backward ? 2 : 1);
  if (op->kind == OP_ELEMWISE) return elemwise_bytes(op);
  if (op->kind != OP_LIN_INTRA && op->kind != OP_LIN_STATE && op->kind != OP_LIN_APPLY) return 0;
  /* per batch and head: rows of n tokens x D elements, states D x D float32
   * (Z); each tensor read or written once */
  double n = lin_tokens(op), row = n * op->head_dim * op->elem_bytes;
  double Z = 4.0 * op->head_dim * op->head_dim, b = 0;
  switch (op->kind) {
  case OP_LIN_INTRA: b = op->backward ? 7 * row : 4 * row;         /* Q K V dO -> dQ dK dV; Q K V -> O */
    break;
  case OP_LIN_STATE: b = op->backward ? 4 * row + Z : 2 * row + Z; /* K V dM -> dK dV; K V -> M */
    break;
  default: /* dO Q M -> dQ dM; Q M -> O, or Q M O -> O where it adds into O */
    b = op->backward ? 3 * row + 2 * Z : (op->into ? 3 : 2) * row + Z;
    break;
  }
  return b * op->batch * op->heads;
}

static int lin_index(op_kind k) { return k == OP_LIN_INTRA ? 0 : k == OP_LIN_STATE ? 1 : 2; }

/* One measured linear kernel:
 * {"kind","batch","heads","head_dim","tokens","causal","block","decay","fwd_ms","bwd_ms"},
 * optionally with "gpu_fwd_ms" and "gpu_bwd_ms" (both): the GPU time alone
 * (scripts/calibrate --parts lingpu). */
static bool parse_lin_point(json_object *p, json_where w, compute_model *m, GError **err) {
  static const char *const keys[] = {"kind", "batch", "heads", "head_dim", "tokens", "causal",
                                     "block", "decay", "fwd_ms", "bwd_ms", "gpu_fwd_ms",
                                     "gpu_bwd_ms", NULL};
  if (!json_object_is_type(p, json_type_object)) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "%s: field '%s': expected an object",
                w.file, w.path);
    return false;
  }
  const char *kind;
  uint32_t b, h, d, n, block;
  double fwd, bwd, gfwd, gbwd;
  if (!json_check_keys(p, w, keys, err) || !json_get_string(p, w, "kind", true, NULL, &kind, err) ||
      !json_get_u32(p, w, "batch", false, 1, 1, &b, err) ||
      !json_get_u32(p, w, "heads", true, 0, 1, &h, err) ||
      !json_get_u32(p, w, "head_dim", true, 0, 1, &d, err) ||
      !json_get_u32(p, w, "tokens", true, 0, 1, &n, err) ||
      !json_get_u32(p, w, "block", false, LIN_DEFAULT_BLOCK, 1, &block, err) ||
      !json_get_double(p, w, "fwd_ms", true, 0, 0, &fwd, err) ||
      !json_get_double(p, w, "bwd_ms", false, 0, -1, &bwd, err) ||
      !json_get_double(p, w, "gpu_fwd_ms", false, 0, -1, &gfwd, err) ||
      !json_get_double(p, w, "gpu_bwd_ms", gfwd > 0, 0, 0, &gbwd, err))
    return false;
  op_kind k = !strcmp(kind, "intra") ? OP_LIN_INTRA : !strcmp(kind, "state") ? OP_LIN_STATE
            : !strcmp(kind, "apply") ? OP_LIN_APPLY : OP_KINDS;
  if (k == OP_KINDS) {
    g_autofree char *f = json_path_join(w.path, "kind");
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "%s: field '%s': expected \"intra\", \"state\" or \"apply\", got \"%s\"",
                w.file, f, kind);
    return false;
  }
  bool flags[2] = {false, false};
  static const char *const flag_keys[2] = {"causal", "decay"};
  for (int i = 0; i < 2; i++)
    if (!json_get_bool(p, w, flag_keys[i], &flags[i], err)) return false;
  plan_op op = {.kind = k, .causal = flags[0], .decay = flags[1], .batch = b, .heads = h,
                .head_dim = d, .block = block, .sq = n, .sk = n};
  compute_point pt = {0, 0, 0, lin_fwd_flops(&op), fwd * 1e-3, bwd * 1e-3, n};
  g_array_append_val(m->lin_points[lin_index(k)][flags[0]], pt);
  if (gfwd > 0) {
    compute_point gp = {0, 0, 0, pt.flops, gfwd * 1e-3, gbwd * 1e-3, n};
    g_array_append_val(m->lin_gpu_points[lin_index(k)][flags[0]], gp);
  }
  return true;
}

/* ---- GEMMs: measured products ---- */

static const char *const gemm_parts[GEMM_PARTS] = {"fwd", "dgrad", "wgrad"};

const char *compute_gemm_part_name(gemm_part p) { return p < GEMM_PARTS ? gemm_parts[p] : "?"; }

/* One measured product (scripts/calibrate --parts gemm, turned into
 * entries by scripts/calibrate/gemm_shapes.py --table):
 * {"m": tokens, "n": out features, "k": in features, "product": "fwd" |
 * "dgrad" | "wgrad", "ms": time, "dtype": the table's (gemm_table "bf16",
 * fp8_gemm_table "fp8", each the default of its table)}; m, n, k are the
 * forward layer's shape whichever product was timed (dgrad: M x N by
 * N x K; wgrad: K x M by M x N), all 2MNK FLOPs. */
static bool gemm_point(json_object *p, json_where w, const char *want, GArray *into,
                       GError **err) {
  static const char *const keys[] = {"m", "n", "k", "product", "ms", "dtype", NULL};
  if (!json_object_is_type(p, json_type_object))
    return json_fail(err, w, NULL, "expected an object");
  uint32_t gm, gn, gk;
  double ms;
  const char *part, *dtype;
  if (!json_check_keys(p, w, keys, err) || !json_get_u32(p, w, "m", true, 0, 1, &gm, err) ||
      !json_get_u32(p, w, "n", true, 0, 1, &gn, err) ||
      !json_get_u32(p, w, "k", true, 0, 1, &gk, err) ||
      !json_get_string(p, w, "product", true, NULL, &part, err) ||
      !json_get_string(p, w, "dtype", false, want, &dtype, err) ||
      !json_get_double(p, w, "ms", true, 0, JSON_POSITIVE, &ms, err))
    return false;
  int k = 0;
  while (k < GEMM_PARTS && strcmp(part, gemm_parts[k])) k++;
  if (k == GEMM_PARTS)
    return json_fail(err, w, "product", "expected \"fwd\", \"dgrad\" or \"wgrad\", got \"%s\"", part);
  /* one table prices one dtype: the times of another would be used as
   * this one's (fp8 GEMMs run about 1.8 times as fast as bf16's on H100:
   * calibration/h100x1-fp8gemm) */
  if (strcmp(dtype, want))
    return json_fail(err, w, "dtype", "expected \"%s\" (the dtype this table's GEMMs are "
                     "priced in), got \"%s\"", want, dtype);
  compute_point pt = {gn, gk, k, 2.0 * gm * gn * gk, ms * 1e-3, 0, gm};
  g_array_append_val(into, pt);
  return true;
}

static bool parse_gemm_point(json_object *p, json_where w, compute_model *m, GError **err) {
  return gemm_point(p, w, "bf16", m->gemm_points, err);
}

static bool parse_fp8_gemm_point(json_object *p, json_where w, compute_model *m, GError **err) {
  return gemm_point(p, w, "fp8", m->fp8_gemm_points, err);
}

typedef bool (*point_parser)(json_object *p, json_where w, compute_model *m, GError **err);

/* Every entry of the array `table` (at path tpath) through `one`. */
static bool parse_points(json_object *table, json_where w, const char *tpath,
                         point_parser one, compute_model *m, GError **err) {
  size_t n = json_object_array_length(table);
  for (size_t i = 0; i < n; i++) {
    g_autofree char *idx = g_strdup_printf("[%zu]", i);
    g_autofree char *ppath = json_path_join(tpath, idx);
    json_where pw = {w.file, ppath, w.doc};
    if (!one(json_object_array_get_idx(table, i), pw, m, err)) return false;
  }
  return true;
}

static bool parse_linear_table(json_object *obj, json_where w, compute_model *m, GError **err) {
  json_object *table = NULL;
  if (!json_get_typed(obj, w, "linear_table", false, json_type_array, &table, err)) return false;
  if (!table) return true;
  g_autofree char *tpath = json_path_join(w.path, "linear_table");
  if (!parse_points(table, w, tpath, parse_lin_point, m, err)) return false;
  for (int k = 0; k < 3; k++)
    for (int c = 0; c < 2; c++) {
      GArray *all = m->lin_points[k][c], *gpu = m->lin_gpu_points[k][c];
      tidy_points(all);
      tidy_points(gpu);
      if (gpu->len && gpu->len != all->len) {
        g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                    "%s: field '%s': expected gpu_fwd_ms and gpu_bwd_ms on every entry of a "
                    "kind and mask, or on none", w.file, tpath);
        return false;
      }
    }
  return true;
}

/* bwd_host_us and linear_host_us, after host_us (their default: a kernel
 * call's host cost, each). */
static bool parse_host_costs(json_object *obj, json_where w, compute_model *m, GError **err) {
  double us = m->host_s * 1e6, bwd_us;
  if (!json_get_double(obj, w, "bwd_host_us", false, us, -1, &bwd_us, err)) return false;
  m->bwd_host_s = bwd_us * 1e-6;
  json_object *lin = NULL;
  if (!json_get_typed(obj, w, "linear_host_us", false, json_type_object, &lin, err))
    return false;
  static const char *const keys[] = {"intra", "intra_bwd", "intra_causal", "intra_causal_bwd",
                                     "state", "state_bwd", "apply", "apply_bwd", NULL};
  g_autofree char *path = json_path_join(w.path, "linear_host_us");
  json_where lw = {w.file, path, w.doc};
  if (lin && !json_check_keys(lin, lw, keys, err)) return false;
  for (int k = 0; k < 4; k++)
    for (int b = 0; b < 2; b++) {
      double v = us;
      if (lin && !json_get_double(lin, lw, keys[2 * k + b], false, us, -1, &v, err)) return false;
      m->lin_host_s[k][b] = v * 1e-6;
    }
  return true;
}

/* compute.elementwise_gbps / elementwise_bwd_gbps: {"rmsnorm": GB/s, ...},
 * any subset of the element-wise kinds; the kinds left out keep 0 (the
 * fallback of elemwise_rate). */
static bool parse_elemwise_rates(json_object *obj, json_where w, const char *key, double *Bps,
                                 GError **err) {
  json_object *rates = NULL;
  if (!json_get_typed(obj, w, key, false, json_type_object, &rates, err)) return false;
  if (!rates) return true;
  const char *names[EW_KINDS + 1];
  for (int k = 0; k < EW_KINDS; k++) names[k] = compute_elemwise_name((compute_elemwise)k);
  names[EW_KINDS] = NULL;
  g_autofree char *path = json_path_join(w.path, key);
  json_where rw = {w.file, path, w.doc};
  if (!json_check_keys(rates, rw, names, err)) return false;
  for (int k = 0; k < EW_KINDS; k++) {
    double gbps = 0;
    if (!json_get_double(rates, rw, names[k], false, 0, 0, &gbps, err)) return false;
    Bps[k] = gbps * 1e9;
  }
  return true;
}

bool compute_model_parse(json_object *obj, json_where w, compute_model *m, GError **err) {
  static const char *const keys[] = {"model", "peak_tflops", "efficiency", "launch_us",
                                     "bwd_ratio", "merge_fixed_us", "merge_ns_per_kelem",
                                     "table", "source", "host_us", "merge_host_us", "copy_GBps",
                                     "copy_fixed_us", "copy_host_us", "linear_efficiency",
                                     "linear_table", "aspect_table", "table_scale",
                                     "bwd_host_us", "linear_host_us", "copy_mixed_GBps",
                                     "comm_slowdown", "table_from", "gemm_table",
                                     "gemm_efficiency", "kernel_model", "fp8_gemm_table",
                                     "elementwise_gbps", "elementwise_bwd_gbps", NULL};
  if (!json_check_keys(obj, w, keys, err)) return false;
  const char *model;
  double peak, launch_us, merge_fixed_us, merge_ns_per_kelem, host_us, merge_host_us;
  double copy_GBps = m->copy_Bps * 1e-9, copy_fixed_us = m->copy_fixed_s * 1e6,
         copy_host_us = m->copy_host_s * 1e6, copy_mixed_GBps;
  if (!json_get_string(obj, w, "model", true, NULL, &model, err)) return false;
  if (g_strcmp0(model, "roofline") && g_strcmp0(model, "table")) {
    return json_fail(err, w, "model", "expected \"roofline\" or \"table\", got \"%s\"", model);
  }
  m->table = strcmp(model, "table") == 0;
  const char *from = NULL;
  if (!json_get_string(obj, w, "table_from", false, NULL, &from, err)) return false;
  if (from && (!*from || !g_utf8_validate(from, -1, NULL) || strpbrk(from, "\t\r\n"))) {
    g_autofree char *f = json_path_join(w.path, "table_from");
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "%s: field '%s': expected the name of the GPU the table was measured on "
                "(non-empty, one line)", w.file, f);
    return false;
  }
  if (from) {
    g_free(m->table_from);
    m->table_from = g_strdup(from);
  }
  if (!json_get_double(obj, w, "peak_tflops", !m->table, 1000, 0, &peak, err) ||
      !json_get_double(obj, w, "efficiency", false, 1.0, 0, &m->efficiency, err) ||
      !json_get_double(obj, w, "launch_us", false, 0, -1, &launch_us, err) ||
      !json_get_double(obj, w, "bwd_ratio", false, m->bwd_ratio, 0, &m->bwd_ratio, err) ||
      !json_get_double(obj, w, "table_scale", false, m->table_scale, 0, &m->table_scale, err) ||
      !json_get_double(obj, w, "merge_fixed_us", false, 0, -1, &merge_fixed_us, err) ||
      !json_get_double(obj, w, "merge_ns_per_kelem", false, 0, -1, &merge_ns_per_kelem, err) ||
      !json_get_double(obj, w, "host_us", false, 0, -1, &host_us, err) ||
      !json_get_double(obj, w, "merge_host_us", false, 0, -1, &merge_host_us, err) ||
      !json_get_double(obj, w, "copy_GBps", false, copy_GBps, 0, &copy_GBps, err) ||
      !json_get_double(obj, w, "copy_fixed_us", false, copy_fixed_us, -1, &copy_fixed_us, err) ||
      !json_get_double(obj, w, "copy_host_us", false, copy_host_us, -1, &copy_host_us, err) ||
      !json_get_double(obj, w, "copy_mixed_GBps", false, copy_GBps, 0, &copy_mixed_GBps, err) ||
      !json_get_double(obj, w, "comm_slowdown", false, 0, -1, &m->comm_slowdown, err))
    return false;
  if (m->comm_slowdown >= 1) {
    return json_fail(err, w, "comm_slowdown", "expected a fraction in [0, 1), got %g",
                     m->comm_slowdown);
  }
  if (!parse_elemwise_rates(obj, w, "elementwise_gbps", m->ew_Bps[0], err) ||
      !parse_elemwise_rates(obj, w, "elementwise_bwd_gbps", m->ew_Bps[1], err))
    return false;
  m->copy_mixed_Bps = copy_mixed_GBps * 1e9;
  m->copy_Bps = copy_GBps * 1e9;
  m->copy_fixed_s = copy_fixed_us * 1e-6;
  m->copy_host_s = copy_host_us * 1e-6;
  /* efficiencies: json_get_double holds any "...efficiency" field to
   * 0.001..1 (json_unit_range) */
  if (!json_get_double(obj, w, "linear_efficiency", false, m->efficiency, 0,
                       &m->linear_efficiency, err) ||
      !json_get_double(obj, w, "gemm_efficiency", false, m->gemm_efficiency, 0,
                       &m->gemm_efficiency, err))
    return false;
  m->peak_flops = peak * 1e12;
  m->launch_s = launch_us * 1e-6;
  m->merge_fixed_s = merge_fixed_us * 1e-6;
  m->merge_s_per_elem = merge_ns_per_kelem * 1e-12;
  m->host_s = host_us * 1e-6;
  m->merge_host_s = merge_host_us * 1e-6;
  if (!parse_host_costs(obj, w, m, err)) return false;
  json_object *table = NULL;
  if (!json_get_typed(obj, w, "table", m->table, json_type_array, &table, err)) return false;
  if (table) {
    g_autofree char *tpath = json_path_join(w.path, "table");
    if (!parse_points(table, w, tpath, parse_point, m, err)) return false;
    if (m->table && m->points[0]->len + m->points[1]->len < 2) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "%s: field '%s': expected at least 2 measured kernels", w.file, tpath);
      return false;
    }
    for (int c = 0; c < 2; c++) tidy_points(m->points[c]);
  }
  json_object *aspects = NULL;
  if (!json_get_typed(obj, w, "aspect_table", false, json_type_array, &aspects, err)) return false;
  if (aspects) {
    g_autofree char *apath = json_path_join(w.path, "aspect_table");
    if (!parse_points(aspects, w, apath, parse_aspect_point, m, err)) return false;
    for (int c = 0; c < 2; c++) tidy_points(m->aspect_points[c]);
  }
  json_object *gemm = NULL;
  if (!json_get_typed(obj, w, "gemm_table", false, json_type_array, &gemm, err)) return false;
  if (gemm) {
    g_autofree char *gpath = json_path_join(w.path, "gemm_table");
    if (!parse_points(gemm, w, gpath, parse_gemm_point, m, err)) return false;
    tidy_points(m->gemm_points);
  }
  json_object *fp8 = NULL;
  if (!json_get_typed(obj, w, "fp8_gemm_table", false, json_type_array, &fp8, err)) return false;
  if (fp8) {
    g_autofree char *fpath = json_path_join(w.path, "fp8_gemm_table");
    if (!parse_points(fp8, w, fpath, parse_fp8_gemm_point, m, err)) return false;
    tidy_points(m->fp8_gemm_points);
  }
  json_object *mech = NULL;
  if (!json_get_typed(obj, w, "kernel_model", false, json_type_object, &mech, err)) return false;
  if (mech) {
    g_autofree char *kpath = json_path_join(w.path, "kernel_model");
    json_where wk = {w.file, kpath, w.doc};
    if (!kernel_model_parse(mech, wk, &m->mech, err)) return false;
  }
  return parse_linear_table(obj, w, m, err);
}

/* ---- lookups, and how far each is from measured data (compute.h) ---- */

/* One task's lookup as it goes: the worst step so far (lk_level) and the
 * dimensions it left the table in.  Every lookup function takes one (NULL:
 * not wanted) and marks what it actually did, so the classification is
 * the lookup's own and cannot drift from it. */
typedef enum { LK_UNPRICED = -1, LK_MEASURED, LK_INTERPOLATED, LK_EXTRAPOLATED, LK_ROOFLINE } lk_level;
typedef struct {
  lk_level level;
  unsigned beyond;
} lookup_acc;

static void mark(lookup_acc *k, lk_level level, unsigned beyond) {
  if (!k) return;
  if (level > k->level) k->level = level;
  if (level == LK_EXTRAPOLATED) k->beyond |= beyond;
}

/* FLOPs at a measured point: the same kernel's count, up to rounding. */
static bool at_point(double flops, double point) { return fabs(flops - point) <= 1e-9 * point; }

static double point_s(const compute_point *p, bool backward, double ratio, lookup_acc *k) {
  if (!backward) return p->fwd_s;
  if (p->bwd_s <= 0) mark(k, LK_EXTRAPOLATED, COMPUTE_BEYOND_BACKWARD);
  return p->bwd_s > 0 ? p->bwd_s : ratio * p->fwd_s;
}

/* Piecewise log-log interpolation over the n points of one aspect. */
static double class_s(const compute_point *p, guint n, double flops, bool backward, double ratio,
                      lookup_acc *k) {
  if (n == 1 || flops <= p[0].flops) {
    mark(k, at_point(flops, p[0].flops) ? LK_MEASURED : LK_EXTRAPOLATED, COMPUTE_BEYOND_TOKENS);
    double t0 = point_s(&p[0], backward, ratio, k);
    return n == 1 ? t0 * flops / p[0].flops : t0 * (1 + flops / p[0].flops) / 2;
  }
  if (flops >= p[n - 1].flops) {
    mark(k, at_point(flops, p[n - 1].flops) ? LK_MEASURED : LK_EXTRAPOLATED, COMPUTE_BEYOND_TOKENS);
    return point_s(&p[n - 1], backward, ratio, k) * flops / p[n - 1].flops;
  }
  guint i = 1;
  while (p[i].flops < flops) i++;
  mark(k, at_point(flops, p[i].flops) ? LK_MEASURED : LK_INTERPOLATED, 0);
  double x0 = log(p[i - 1].flops), x1 = log(p[i].flops);
  double y0 = log(point_s(&p[i - 1], backward, ratio, k)), y1 = log(point_s(&p[i], backward, ratio, k));
  return exp(y0 + (y1 - y0) * (log(flops) - x0) / (x1 - x0));
}

/* The points of one head dim and batch x heads: a run of a sorted table. */
typedef struct {
  const compute_point *p;
  guint n;
} shape_run;

static shape_run run_of(const GArray *pts, double head_dim, double bh) {
  const compute_point *p = (const compute_point *)pts->data;
  guint i = 0;
  while (i < pts->len && (p[i].head_dim != head_dim || p[i].bh != bh)) i++;
  guint j = i;
  while (j < pts->len && p[j].head_dim == head_dim && p[j].bh == bh) j++;
  return (shape_run){p + i, j - i};
}

static double lo_aspect(shape_run r) { return r.p[0].aspect; }
static double hi_aspect(shape_run r) { return r.p[r.n - 1].aspect; }
static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Within one run: interpolate between the two measured aspects around
 * `aspect` (the nearest beyond them). */
static double aspect_s(shape_run r, double flops, double aspect, bool backward, double ratio,
                       lookup_acc *k) {
  const compute_point *p = r.p;
  guint n = r.n, lo_start = 0, lo_n = 0, hi_start = 0, hi_n = 0;
  for (guint i = 0; i < n;) {
    guint j = i;
    while (j < n && p[j].aspect == p[i].aspect) j++;
    if (p[i].aspect <= aspect || lo_n == 0) { lo_start = i; lo_n = j - i; }
    if (p[i].aspect >= aspect && hi_n == 0) { hi_start = i; hi_n = j - i; }
    i = j;
  }
  if (hi_n == 0) { hi_start = lo_start; hi_n = lo_n; }
  double a0 = p[lo_start].aspect, a1 = p[hi_start].aspect;
  /* only the lookups whose times are used are made (and marked) */
  if (a1 <= a0 || aspect <= a0) return class_s(p + lo_start, lo_n, flops, backward, ratio, k);
  if (aspect >= a1) return class_s(p + hi_start, hi_n, flops, backward, ratio, k);
  mark(k, LK_INTERPOLATED, 0);
  double t0 = class_s(p + lo_start, lo_n, flops, backward, ratio, k);
  double t1 = class_s(p + hi_start, hi_n, flops, backward, ratio, k);
  return t0 + (t1 - t0) * (aspect - a0) / (a1 - a0);
}

/* The run of pts other than `self` whose aspects reach furthest beyond
 * `from` towards `to`, among those nearest to self's shape in log(D) +
 * log(B·H); n = 0 when none reaches beyond `from`. */
static shape_run ratio_run(const GArray *pts, shape_run self, double from, double to) {
  shape_run best = {NULL, 0};
  double best_reach = 0, best_dist = 0;
  const compute_point *p = (const compute_point *)pts->data;
  for (guint i = 0; i < pts->len;) {
    shape_run r = run_of(pts, p[i].head_dim, p[i].bh);
    i = (guint)(r.p - p) + r.n;
    if (r.p == self.p) continue;
    double reach = to > from ? hi_aspect(r) - from : from - lo_aspect(r);
    reach = fmin(reach, fabs(to - from));
    double dist = fabs(log(r.p[0].head_dim / self.p[0].head_dim)) +
                  fabs(log(r.p[0].bh / self.p[0].bh));
    if (reach <= 0 || (best.n && (reach < best_reach || (reach == best_reach && dist >= best_dist))))
      continue;
    best = r;
    best_reach = reach;
    best_dist = dist;
  }
  return best;
}

/* One measured (head dim, B·H) at any aspect: its own aspects where they
 * reach, beyond them the ratio the same aspect change costs in another run
 * of this table, else in the sibling GPU's aspect table. */
static double run_s(const compute_model *m, const GArray *pts, const GArray *ref, shape_run r,
                    double flops, double aspect, bool backward, lookup_acc *k) {
  double own = clamp(aspect, lo_aspect(r), hi_aspect(r));
  double t = aspect_s(r, flops, own, backward, m->bwd_ratio, k);
  if (own == aspect) return t;
  shape_run q = ratio_run(pts, r, own, aspect);
  if (q.n == 0) q = ratio_run(ref, r, own, aspect);
  if (q.n == 0) {
    mark(k, LK_EXTRAPOLATED, COMPUTE_BEYOND_ASPECT);
    return t;
  }
  double from = clamp(own, lo_aspect(q), hi_aspect(q)), to = clamp(aspect, lo_aspect(q), hi_aspect(q));
  /* the ratio as measured: held at the ends of the FLOPs every aspect of
   * q measures (beyond them it would compare extrapolations) */
  double f_lo = 0, f_hi = INFINITY;
  for (guint i = 0; i < q.n;) {
    guint j = i;
    while (j < q.n && q.p[j].aspect == q.p[i].aspect) j++;
    f_lo = fmax(f_lo, q.p[i].flops);
    f_hi = fmin(f_hi, q.p[j - 1].flops);
    i = j;
  }
  double f = f_lo <= f_hi ? clamp(flops, f_lo, f_hi) : flops;
  /* a ratio measured at this aspect and FLOPs is a borrowed measurement;
   * one held beyond them is a guess */
  mark(k, to == aspect && f_lo <= f_hi && f == flops ? LK_INTERPOLATED : LK_EXTRAPOLATED,
       COMPUTE_BEYOND_ASPECT);
  return t * aspect_s(q, f, to, backward, m->bwd_ratio, NULL) /
         aspect_s(q, f, from, backward, m->bwd_ratio, NULL);
}

/* The measured values of a shape variable around x (head dim, or B·H at
 * head dim `d` when d > 0): the nearest one on each side, the nearest
 * measured one for both beyond them. */
static void around(const GArray *pts, double d, double x, double *lo, double *hi) {
  const compute_point *p = (const compute_point *)pts->data;
  *lo = *hi = 0;
  for (guint i = 0; i < pts->len; i++) {
    if (d > 0 && p[i].head_dim != d) continue;
    double v = d > 0 ? p[i].bh : p[i].head_dim;
    if (v <= x && v > *lo) *lo = v;
    if (v >= x && (*hi == 0 || v < *hi)) *hi = v;
  }
  if (*lo == 0) *lo = *hi;
  if (*hi == 0) *hi = *lo;
}

/* log(time) linear in log(x) between x0 and x1 (t0 where they coincide). */
static double log_mix(double t0, double t1, double x0, double x1, double x) {
  return x1 == x0 ? t0 : exp(log(t0) + log(t1 / t0) * log(x / x0) / log(x1 / x0));
}

/* Marks a shape variable's lookup: at a measured value (lo = hi = x),
 * between two, or beyond them (the nearest stands in). */
static void mark_around(lookup_acc *k, double lo, double hi, double x, unsigned beyond) {
  mark(k, lo != hi ? LK_INTERPOLATED : lo == x ? LK_MEASURED : LK_EXTRAPOLATED, beyond);
}

/* One measured head dim: between its measured B·H around bh, log(time)
 * linear in log(B·H) at equal FLOPs; beyond them the nearest. */
static double dim_s(const compute_model *m, const GArray *pts, const GArray *ref, double flops,
                    double d, double bh, double aspect, bool backward, lookup_acc *k) {
  double lo, hi;
  around(pts, d, bh, &lo, &hi);
  mark_around(k, lo, hi, bh, COMPUTE_BEYOND_HEADS);
  double t0 = run_s(m, pts, ref, run_of(pts, d, lo), flops, aspect, backward, k);
  if (hi == lo) return t0;
  double t1 = run_s(m, pts, ref, run_of(pts, d, hi), flops, aspect, backward, k);
  return log_mix(t0, t1, lo, hi, bh);
}

/* Between the measured head dims around head_dim, log(time) linear in
 * log(D) at equal FLOPs; beyond them the nearest. */
static double table_s(const compute_model *m, const GArray *pts, const GArray *ref, double flops,
                      double bh, double head_dim, double aspect, bool backward, lookup_acc *k) {
  double lo, hi;
  around(pts, 0, head_dim, &lo, &hi);
  mark_around(k, lo, hi, head_dim, COMPUTE_BEYOND_HEAD_DIM);
  double t0 = dim_s(m, pts, ref, flops, lo, bh, aspect, backward, k);
  if (hi == lo) return t0;
  double t1 = dim_s(m, pts, ref, flops, hi, bh, aspect, backward, k);
  return log_mix(t0, t1, lo, hi, head_dim);
}

/* The kernels a mask is priced by: its own, else the other mask's. */
static int table_mask(const compute_model *m, bool causal) {
  return m->points[causal]->len ? causal : !causal;
}

static double attn_lookup(const compute_model *m, double flops, double batch_heads,
                          double head_dim, double sq, double sk, bool causal, bool backward,
                          lookup_acc *k) {
  if (flops <= 0) return 0;
  if (m->table) {
    int c = table_mask(m, causal);
    if (c != causal) mark(k, LK_EXTRAPOLATED, COMPUTE_BEYOND_MASK);
    const GArray *ref = m->aspect_points[c]->len ? m->aspect_points[c] : m->aspect_points[!c];
    lookup_acc own = {LK_UNPRICED, 0};
    double t = table_s(m, m->points[c], ref, flops / m->table_scale, batch_heads, head_dim,
                       log2(sk / sq), backward, &own);
    if (c != causal) own.level = LK_EXTRAPOLATED;
    /* beyond the table: the kernel's mechanisms, where the topology has them */
    if (m->mech.set && own.level == LK_EXTRAPOLATED)
      t = kernel_model_s(&m->mech, batch_heads, head_dim, sq, sk, causal, backward);
    mark(k, own.level, own.beyond);
    return t;
  }
  mark(k, LK_ROOFLINE, 0);
  double t = flops / (m->peak_flops * m->efficiency);
  return m->launch_s + (backward ? m->bwd_ratio * t : t);
}

double compute_attn_s(const compute_model *m, double flops, double batch_heads, double head_dim,
                      double sq, double sk, bool causal, bool backward) {
  return attn_lookup(m, flops, batch_heads, head_dim, sq, sk, causal, backward, NULL);
}

double compute_merge_s(const compute_model *m, double elems) {
  return m->merge_fixed_s + m->merge_s_per_elem * elems;
}

/* ---- per-kind models of compute tasks ---- */

double compute_op_flops(const plan_op *op) {
  if (op->kind == OP_LIN_INTRA || op->kind == OP_LIN_STATE || op->kind == OP_LIN_APPLY)
    return lin_fwd_flops(op) * (op->backward ? lin_bwd_ratio(op) : 1);
  /* backward: dgrad and wgrad, 2MNK each */
  if (op->kind == OP_GEMM) return gemm_flops(op) * (op->backward ? 2 : 1);
  if (op->kind != OP_ATTN) return 0;
  double pairs = op->causal ? op->pairs - op->sq / 2 : op->pairs;
  return 4.0 * op->batch * op->heads * op->head_dim * pairs;
}

/* The tasks one variable-length call is made of (plan.h call_parts). */
static double call_parts(const plan_op *op) {
  return op->call_parts > 1 ? op->call_parts : 1;
}

/* A part of a variable-length call (flash attention's varlen kernel over
 * cu_seqlens) costs its share of a call over as many documents of its
 * shape: one launch for the call, and the CTAs of all its documents packed
 * over the SMs (one grid of query blocks x documents x heads), which is
 * how the kernel over B equal documents times as the dense kernel over a
 * batch of B (calibration/h100x1-varlen: 64 x 2K tokens 8.4 ms forward,
 * the padded batch 7.2, 64 calls 11.2; 256 x 512: 3.6, 3.6 and 10.0). */
static double attn_s(const compute_model *m, const plan_op *op, lookup_acc *k) {
  double n = call_parts(op);
  return attn_lookup(m, n * compute_op_flops(op), n * op->batch * op->heads, op->head_dim,
                     op->sq, op->sk, op->causal, op->backward, k) / n;
}

/* merges and copies: lines fitted per topology, not classified (compute.h);
 * a part of a call its share of the call over all parts' rows */
static double merge_s(const compute_model *m, const plan_op *op, lookup_acc *k) {
  (void)k;
  double n = call_parts(op);
  return compute_merge_s(m, n * op->batch * op->sq * op->heads * op->head_dim) / n;
}

/* The ops a copy task stands for (plan_op.block), each a kernel. */
static double copy_ops(const plan_op *op) { return op->block ? op->block : 1; }

/* A mixed add (two dtypes) takes as long as a same-dtype copy of
 * compute_mixed_bytes of its bytes. */
static double copy_s(const compute_model *m, const plan_op *op, lookup_acc *k) {
  (void)k;
  double bytes = op->mixed ? op->bytes * compute_mixed_bytes(m, 1.0) : op->bytes;
  return bytes > 0 ? copy_ops(op) * m->copy_fixed_s + bytes / m->copy_Bps : 0;
}

double compute_mixed_bytes(const compute_model *m, double bytes) {
  return m->copy_mixed_Bps > 0 ? bytes * m->copy_Bps / m->copy_mixed_Bps : bytes;
}

/* The measured points of a linear kind and mask (the other mask's where
 * only it is measured): GPU times alone (gpu), or calls timed from their
 * issue on an idle GPU. */
static const GArray *lin_table(const compute_model *m, const plan_op *op, bool gpu) {
  GArray *const *set = gpu ? m->lin_gpu_points[lin_index(op->kind)]
                           : m->lin_points[lin_index(op->kind)];
  return set[op->causal]->len ? set[op->causal] : set[!op->causal];
}

static double lin_table_s(const GArray *pts, const plan_op *op, lookup_acc *k) {
  return class_s((const compute_point *)pts->data, pts->len, lin_fwd_flops(op), op->backward,
                 lin_bwd_ratio(op), k);
}

/* A table's apply writes a new output; one that adds into the output
 * (op.into) reads it as well, at the copy rate (calibration/h200x2-host:
 * lin_apply_into 68.0 us of GPU time at 8K tokens against lin_apply's
 * 45.7; the output is 67 MB, 15 us at copy_GBps 4378). */
static double into_s(const compute_model *m, const plan_op *op) {
  if (op->kind != OP_LIN_APPLY || op->backward || !op->into) return 0;
  return lin_tokens(op) * op->head_dim * op->elem_bytes * op->batch * op->heads / m->copy_Bps;
}

/* A measured table of this kind, looked up by the forward FLOPs of the
 * task's shape: the GPU time alone where the table has it, else the time
 * of a call; without a table the roofline. */
static double linear_s(const compute_model *m, const plan_op *op, lookup_acc *k) {
  double flops = compute_op_flops(op);
  if (flops <= 0) return 0;
  const GArray *gpu = lin_table(m, op, true), *all = lin_table(m, op, false);
  if (gpu->len || all->len) {
    const GArray *used = gpu->len ? gpu : all;
    int i = lin_index(op->kind);
    if (used != m->lin_gpu_points[i][op->causal] && used != m->lin_points[i][op->causal])
      mark(k, LK_EXTRAPOLATED, COMPUTE_BEYOND_MASK);
    return lin_table_s(used, op, k) + into_s(m, op);
  }
  mark(k, LK_ROOFLINE, 0);
  double t = flops / (m->peak_flops * m->linear_efficiency), mem = compute_op_bytes(op) / m->copy_Bps;
  return m->launch_s + (t > mem ? t : mem);
}

/* ---- GEMMs and element-wise ops (compute.h) ---- */

static double gemm_flops(const plan_op *op) { return 2.0 * op->gemm_m * op->gemm_n * op->gemm_k; }

/* The operands of one product, each read or written once: M x K, K x N and
 * M x N (dgrad writes the M x K, wgrad the K x N: the same three sizes). */
static double gemm_bytes(const plan_op *op) {
  double M = op->gemm_m, N = op->gemm_n, K = op->gemm_k;
  return (M * K + K * N + M * N) * op->elem_bytes;
}

/* The measured run of one product and N x K: its points in FLOPs order. */
static shape_run gemm_run(const GArray *pts, double n, double k, gemm_part part) {
  const compute_point *p = (const compute_point *)pts->data;
  guint i = 0;
  while (i < pts->len && (p[i].head_dim != n || p[i].bh != k || p[i].aspect != part)) i++;
  guint j = i;
  while (j < pts->len && p[j].head_dim == n && p[j].bh == k && p[j].aspect == part) j++;
  return (shape_run){p + i, j - i};
}

/* The run of `part` whose N x K is nearest to n x k in |log N| + |log K|
 * (the first of equals in table order); n = 0 when the part has none. */
static shape_run gemm_nearest(const GArray *pts, double n, double k, gemm_part part) {
  shape_run best = {NULL, 0};
  double best_d = INFINITY;
  const compute_point *p = (const compute_point *)pts->data;
  for (guint i = 0; i < pts->len;) {
    shape_run r = gemm_run(pts, p[i].head_dim, p[i].bh, (gemm_part)p[i].aspect);
    i = (guint)(r.p - p) + r.n;
    if (r.p[0].aspect != part) continue;
    double d = fabs(log(r.p[0].head_dim / n)) + fabs(log(r.p[0].bh / k));
    if (d < best_d) best = r, best_d = d;
  }
  return best;
}

static bool gemm_has_part(const GArray *pts, gemm_part part) {
  for (guint i = 0; i < pts->len; i++)
    if (g_array_index(pts, compute_point, i).aspect == part) return true;
  return false;
}

/* One product: its own measured shape, else the nearest measured shape at
 * equal FLOPs, else (a backward product never measured) the forward's;
 * without a table the roofline. */
static double gemm_part_s(const compute_model *m, const plan_op *op, gemm_part part,
                          lookup_acc *k) {
  double flops = gemm_flops(op);
  if (flops <= 0) return 0;
  /* an FP8 product from the FP8 table only: the bf16 one's times are
   * 1.4-2.3 times as long (calibration/h100x1-fp8gemm) */
  bool fp8 = op->fp8 & COMPUTE_FP8;
  const GArray *pts = fp8 ? m->fp8_gemm_points : m->gemm_points;
  if (pts->len) {
    gemm_part use = part;
    if (!gemm_has_part(pts, part)) {
      use = GEMM_FWD;
      if (!gemm_has_part(pts, use)) use = gemm_has_part(pts, GEMM_DGRAD) ? GEMM_DGRAD : GEMM_WGRAD;
      mark(k, LK_EXTRAPOLATED, COMPUTE_BEYOND_BACKWARD);
    }
    shape_run r = gemm_run(pts, op->gemm_n, op->gemm_k, use);
    if (!r.n) {
      r = gemm_nearest(pts, op->gemm_n, op->gemm_k, use);
      mark(k, LK_EXTRAPOLATED, COMPUTE_BEYOND_SHAPE);
    }
    return class_s(r.p, r.n, flops, false, 1, k);
  }
  mark(k, LK_ROOFLINE, 0);
  /* FP8's dense peak is twice bf16's on H100 (1979 vs 989 TFLOP/s, NVIDIA
   * H100 datasheet) */
  double peak = m->peak_flops * (fp8 ? 2 : 1);
  double t = flops / (peak * m->gemm_efficiency), mem = gemm_bytes(op) / m->copy_Bps;
  return m->launch_s + (t > mem ? t : mem);
}

/* TransformerEngine's casts around an FP8 GEMM (compute.h), as its
 * Linear and LayerNormLinear run them (TE 1.x, linear.py and
 * layernorm_linear.py: fp8_cast_transpose_fused of the input and of the
 * output gradient, fp8_transpose of a LayerNorm's FP8 output, the
 * weight's cast and transpose when is_first_microbatch): each reads its
 * tensor once and writes an FP8 copy and its transpose (1 byte each). */
double compute_fp8_cast_bytes(const plan_op *op) {
  if (op->kind != OP_GEMM || !(op->fp8 & COMPUTE_FP8)) return 0;
  double M = op->gemm_m, N = op->gemm_n, K = op->gemm_k, e = op->elem_bytes;
  bool norm = op->fp8 & COMPUTE_FP8_NORM_INPUT;
  if (op->backward) return M * N * (e + 2) + (norm ? M * K * 2 : 0);
  return (norm ? 0 : M * K * (e + 2)) + (op->fp8 & COMPUTE_FP8_CAST_WEIGHT ? N * K * (e + 2) : 0);
}

unsigned compute_fp8_cast_kernels(const plan_op *op) {
  if (op->kind != OP_GEMM || !(op->fp8 & COMPUTE_FP8)) return 0;
  bool norm = op->fp8 & COMPUTE_FP8_NORM_INPUT;
  if (op->backward) return 1 + norm;
  return !norm + !!(op->fp8 & COMPUTE_FP8_CAST_WEIGHT);
}

static double gemm_s(const compute_model *m, const plan_op *op, lookup_acc *k) {
  double cast = compute_fp8_cast_kernels(op) * m->copy_fixed_s +
                compute_fp8_cast_bytes(op) / m->copy_Bps;
  if (!op->backward) return gemm_part_s(m, op, GEMM_FWD, k) + cast;
  return gemm_part_s(m, op, GEMM_DGRAD, k) + gemm_part_s(m, op, GEMM_WGRAD, k) + cast;
}

/* What one element-wise op moves per element, in bytes of the activation
 * dtype (e) and of float32, its bytes per row and per column (weights)
 * besides, and the kernels it launches.  Fused: one kernel reading its
 * inputs and writing its outputs once, as TransformerEngine's and
 * Megatron's fused kernels do.  Unfused: plain PyTorch eager, every op of
 * the Hugging Face Llama code (transformers models/llama/modeling_llama.py)
 * and its autograd backward a kernel of its own:
 *  - RMSNorm forward (LlamaRMSNorm): x.to(float32) e+4, pow(2) 4+4,
 *    mean(-1) 4, x * rsqrt(var + eps) 4+4, .to(bf16) 4+e, weight * x e+e:
 *    4e + 28 per element, 6 full kernels and 2 per row (add eps, rsqrt;
 *    with mean's output, 20 bytes a row);
 *    backward, each op's gradient in reverse: weight mul (dx e+e; dweight
 *    mul 2e+e and row sum e), .to back to float32 e+4, the rsqrt mul (dx
 *    4+4; its dvar mul 8+4 and sum 4), mean's expand / n 4, pow's 2x 4+4
 *    and dy * 2x 8+4, the two gradients of x added 8+4, .to(bf16) 4+e:
 *    8e + 68, 13 kernels.  Fused (TE rmsnorm): forward reads x, writes y
 *    (2e) and 4 bytes of rstd per row; backward reads dy and x, writes dx
 *    (3e), reads rstd; a second kernel finishes dgamma.
 *  - RoPE on Q and K (apply_rotary_pos_emb): per tensor rotate_half's neg
 *    of one half e and cat 2e, q * cos 2e, rotate_half(q) * sin 2e, the add
 *    3e: 10e in 5 kernels; backward: the two muls 2e each, neg e, the two
 *    slices' zero-filled gradients e each and their copies e, the three
 *    gradients added 2 x 3e: 15e in 9 kernels.  cos and sin (T x D, e) read
 *    by each mul.  Fused (TE fused_rope, one call per tensor): 2e, and the
 *    T x D float32 angles.
 *  - SwiGLU per FFN output: silu(gate) 2e, x up 3e: 5e in 2 kernels;
 *    backward the mul's two gradients 3e each, silu_backward 3e: 9e in 3.
 *    Fused (Megatron bias_swiglu, TE swiglu): 3e forward (gate, up -> out),
 *    5e backward (dy, gate, up -> dgate, dup).
 *  - Residual add: 3e either way (one add kernel); backward the two
 *    gradients of the residual stream added, 3e.
 *  - Adam(W) per parameter: fused (Megatron's distributed optimizer,
 *    apex/TE FusedAdam multi-tensor apply): float32 main weight, main
 *    gradient, m, v read (16) and weight, m, v written (12), and the bf16
 *    weight copied out (e): 28 + e, one launch per tensor group.  Unfused
 *    (torch.optim.AdamW's single-tensor loop, torch/optim/adamw.py over
 *    float32 weights): weight decay mul_ 8, m lerp_ 12, v mul_ 8 and
 *    addcmul_ 12, sqrt 8, / bias correction 8, + eps 8, addcdiv_ 16: 80
 *    bytes in 8 kernels per tensor. */
typedef struct {
  double e, f32;       /* per element: bytes of the activation dtype, float32 bytes */
  double row_f32;      /* float32 bytes per row (RMSNorm's rstd) */
  double cols_e;       /* per column of a weight or table row read once (x width or x D) */
  unsigned kernels;    /* per op (optimizer: per tensor, unfused) */
} ew_cost;

static ew_cost ew_cost_of(const plan_op *op) {
  bool bwd = op->backward, u = op->unfused;
  switch ((compute_elemwise)op->elemwise) {
  case EW_RMSNORM:
    if (u) return bwd ? (ew_cost){8, 68, 20, 1, 13} : (ew_cost){4, 28, 20, 1, 8};
    return bwd ? (ew_cost){3, 0, 4, 1, 2} : (ew_cost){2, 0, 4, 1, 1};
  case EW_ROPE:
    if (u) return bwd ? (ew_cost){15, 0, 0, 0, 18} : (ew_cost){10, 0, 0, 0, 10};
    return (ew_cost){2, 0, 0, 0, 2};
  case EW_SWIGLU:
    if (u) return bwd ? (ew_cost){9, 0, 0, 0, 3} : (ew_cost){5, 0, 0, 0, 2};
    return bwd ? (ew_cost){5, 0, 0, 0, 1} : (ew_cost){3, 0, 0, 0, 1};
  case EW_RESIDUAL:
    return (ew_cost){3, 0, 0, 0, 1};
  case EW_OPTIMIZER:
    return u ? (ew_cost){0, 80, 0, 0, 8} : (ew_cost){1, 28, 0, 0, 1};
  case EW_CAST: /* read float32, write e: one kernel per tensor */
    return (ew_cost){1, 4, 0, 0, 1};
  default:
    return (ew_cost){0, 0, 0, 0, 0};
  }
}

static double elemwise_bytes(const plan_op *op) {
  ew_cost c = ew_cost_of(op);
  double rows = op->sq, n = rows * op->width, e = op->elem_bytes;
  double b = n * (c.e * e + c.f32) + rows * c.row_f32;
  switch ((compute_elemwise)op->elemwise) {
  case EW_RMSNORM: /* the weight, read once (and dgamma written, backward) */
    b += op->width * e * (op->backward ? 2 : 1);
    break;
  case EW_ROPE: /* the angles: float32 T x D fused; cos and sin (e) per mul unfused */
    b += op->unfused ? 4 * rows * op->head_dim * e : 2 * rows * op->head_dim * 4.0;
    break;
  default:
    break;
  }
  return b;
}

unsigned compute_elemwise_kernels(const plan_op *op) {
  if (op->kind != OP_ELEMWISE) return 0;
  unsigned k = ew_cost_of(op).kernels;
  /* unfused Adam runs its kernels per tensor; fused, one multi-tensor
   * launch per op */
  if ((op->elemwise == EW_OPTIMIZER && op->unfused) || op->elemwise == EW_CAST)
    k *= op->batch ? op->batch : 1;
  return k;
}

const char *compute_elemwise_name(compute_elemwise k) {
  static const char *const names[EW_KINDS] = {"rmsnorm", "rope", "swiglu", "residual",
                                              "optimizer", "cast"};
  return k < EW_KINDS ? names[k] : "?";
}

double compute_elemwise_Bps(const compute_model *m, compute_elemwise kind, bool backward) {
  if (kind >= EW_KINDS) return m->copy_Bps;
  if (backward && m->ew_Bps[1][kind] > 0) return m->ew_Bps[1][kind];
  return m->ew_Bps[0][kind] > 0 ? m->ew_Bps[0][kind] : m->copy_Bps;
}

/* Memory-bound: every byte at its kind's measured rate (elementwise_gbps:
 * bytes read + written per second, as elemwise_bytes counts them), else
 * the copy rate (copy_GBps, as scripts/calibrate's mem_ops count them),
 * and a copy's fixed cost per kernel.  Not classified (compute.h). */
static double elemwise_s(const compute_model *m, const plan_op *op, lookup_acc *k) {
  (void)k;
  double b = elemwise_bytes(op);
  double rate = compute_elemwise_Bps(m, (compute_elemwise)op->elemwise, op->backward);
  return b > 0 ? compute_elemwise_kernels(op) * m->copy_fixed_s + b / rate : 0;
}

/* Host: a kernel call's cost per GEMM product (a cuBLAS call as a flash
 * call), a copy's per element-wise kernel. */
static double gemm_host_s(const compute_model *m, const plan_op *op) {
  return op->backward ? 2 * m->host_s : m->host_s;
}
static double elemwise_host_s(const compute_model *m, const plan_op *op) {
  return compute_elemwise_kernels(op) * m->copy_host_s;
}

double compute_op_alone_s(const compute_model *m, const plan_op *op) {
  if (op->kind != OP_LIN_INTRA && op->kind != OP_LIN_STATE && op->kind != OP_LIN_APPLY) return 0;
  if (compute_op_flops(op) <= 0 || !lin_table(m, op, true)->len) return 0;
  return lin_table_s(lin_table(m, op, false), op, NULL);
}

/* Host time of each kind (calibration/h200x2-host): a flash call, forward
 * or backward (the backward call costs a host about 1.5x the forward's in
 * a pass: calibration/h200x2-hostline; the adds of its dQ, dK, dV into the
 * running gradients are copy tasks where the plan has them); a linear
 * task's function (lin_host_s), whose causal intra
 * kernel issues several times the ops of the others. */
static double attn_host_s(const compute_model *m, const plan_op *op) {
  return (op->backward ? m->bwd_host_s : m->host_s) / call_parts(op);
}
static double merge_host_s(const compute_model *m, const plan_op *op) {
  return m->merge_host_s / call_parts(op);
}
static double copy_host_s(const compute_model *m, const plan_op *op) {
  return copy_ops(op) * m->copy_host_s;
}
static double linear_host_s(const compute_model *m, const plan_op *op) {
  int k = op->kind == OP_LIN_INTRA ? (op->causal ? 1 : 0) : op->kind == OP_LIN_STATE ? 2 : 3;
  return m->lin_host_s[k][op->backward];
}

/* One entry per op_kind: adding a kind of work is adding a line here. */
static const struct {
  double (*time_s)(const compute_model *, const plan_op *, lookup_acc *);
  double (*host_s)(const compute_model *, const plan_op *);
} kinds[OP_KINDS] = {
    [OP_ATTN] = {attn_s, attn_host_s},
    [OP_MERGE] = {merge_s, merge_host_s},
    [OP_COPY] = {copy_s, copy_host_s},
    [OP_LIN_INTRA] = {linear_s, linear_host_s},
    [OP_LIN_STATE] = {linear_s, linear_host_s},
    [OP_LIN_APPLY] = {linear_s, linear_host_s},
    [OP_GEMM] = {gemm_s, gemm_host_s},
    [OP_ELEMWISE] = {elemwise_s, elemwise_host_s},
};

double compute_op_s(const compute_model *m, const plan_op *op) {
  g_assert(op->kind < OP_KINDS);
  return kinds[op->kind].time_s(m, op, NULL);
}

double compute_op_host_s(const compute_model *m, const plan_op *op) {
  g_assert(op->kind < OP_KINDS);
  return kinds[op->kind].host_s(m, op);
}

/* ---- confidence: a task's lookup folded into a run's (compute.h) ---- */

/* A table measured on another GPU (the attention table only: the linear
 * table is never scaled). */
static bool scaled_table(const compute_model *m) {
  return m->table && (m->table_scale != 1 || m->table_from);
}

void compute_lookup_merge(compute_lookup *acc, const compute_lookup *x) {
  bool scaled = acc->scaled || x->scaled;
  if (x->conf > acc->conf) *acc = *x;
  acc->scaled = scaled;
}

/* A task's finished lookup k folded into *how. */
static void fold(const compute_model *m, const plan_op *op, lookup_acc k, compute_lookup *how) {
  if (!how || k.level == LK_UNPRICED) return;
  bool scaled = op->kind == OP_ATTN && scaled_table(m);
  static const compute_conf conf[] = {
      [LK_MEASURED] = COMPUTE_CONF_MEASURED, [LK_INTERPOLATED] = COMPUTE_CONF_INTERPOLATED,
      [LK_EXTRAPOLATED] = COMPUTE_CONF_EXTRAPOLATED, [LK_ROOFLINE] = COMPUTE_CONF_ROOFLINE};
  compute_lookup x = {.conf = conf[k.level], .beyond = k.beyond, .scaled = scaled,
                      .kind = (uint8_t)op->kind, .causal = op->causal, .backward = op->backward,
                      .batch = op->batch, .heads = op->heads, .head_dim = op->head_dim,
                      .sq = op->sq, .sk = op->sk, .gemm_m = op->gemm_m,
                      .gemm_n = op->gemm_n, .gemm_k = op->gemm_k,
                      .fp8 = op->kind == OP_GEMM && (op->fp8 & COMPUTE_FP8)};
  /* a table of another GPU is never better than scaled */
  if (scaled && x.conf < COMPUTE_CONF_SCALED) x.conf = COMPUTE_CONF_SCALED;
  compute_lookup_merge(how, &x);
}

double compute_op_lookup(const compute_model *m, const plan_op *op, compute_lookup *how) {
  g_assert(op->kind < OP_KINDS);
  lookup_acc k = {LK_UNPRICED, 0};
  double t = kinds[op->kind].time_s(m, op, how ? &k : NULL);
  fold(m, op, k, how);
  return t;
}

double compute_gemm_part_s(const compute_model *m, const plan_op *op, gemm_part part,
                           compute_lookup *how) {
  g_assert(op->kind == OP_GEMM && part < GEMM_PARTS);
  lookup_acc k = {LK_UNPRICED, 0};
  double t = gemm_part_s(m, op, part, how ? &k : NULL);
  plan_op one = *op;
  one.backward = part != GEMM_FWD;
  fold(m, &one, k, how);
  return t;
}

char *compute_conf_label(const compute_model *m, const compute_lookup *l) {
  switch (l->conf) {
  case COMPUTE_CONF_NONE: return g_strdup("none");
  case COMPUTE_CONF_MEASURED: return g_strdup("measured");
  case COMPUTE_CONF_INTERPOLATED: return g_strdup("interpolated");
  case COMPUTE_CONF_SCALED:
    return m->table_from ? g_strdup_printf("scaled from %s", m->table_from) : g_strdup("scaled");
  case COMPUTE_CONF_EXTRAPOLATED: return g_strdup("extrapolated");
  case COMPUTE_CONF_ROOFLINE: return g_strdup("roofline");
  }
  return g_strdup("?");
}

/* "1K-64K" (or "64K" where lo = hi): a range of token counts. */
static void tokens_range(GString *s, double lo, double hi) {
  g_autofree char *a = size_format((uint64_t)lo), *b = size_format((uint64_t)hi);
  if (lo == hi) g_string_append(s, a);
  else g_string_append_printf(s, "%s-%s", a, b);
}

/* What a table holds: its batch x heads, head dims and tokens (attention),
 * or tokens (linear). */
static void table_holds(GString *s, const GArray *pts, bool attention) {
  double bh_lo = INFINITY, bh_hi = 0, d_lo = INFINITY, d_hi = 0, t_lo = INFINITY, t_hi = 0;
  for (guint i = 0; i < pts->len; i++) {
    const compute_point *p = &g_array_index(pts, compute_point, i);
    double sk = p->sq * exp2(p->aspect);
    bh_lo = fmin(bh_lo, p->bh), bh_hi = fmax(bh_hi, p->bh);
    d_lo = fmin(d_lo, p->head_dim), d_hi = fmax(d_hi, p->head_dim);
    t_lo = fmin(t_lo, fmin(p->sq, sk)), t_hi = fmax(t_hi, fmax(p->sq, sk));
  }
  if (!pts->len) return;
  if (attention) {
    g_string_append_printf(s, "%g", bh_lo);
    if (bh_hi != bh_lo) g_string_append_printf(s, "-%g", bh_hi);
    g_string_append_printf(s, " heads (batch x heads), head dim %g", d_lo);
    if (d_hi != d_lo) g_string_append_printf(s, "-%g", d_hi);
    g_string_append(s, ", ");
  }
  tokens_range(s, t_lo, t_hi);
  g_string_append(s, " tokens");
}

/* A GEMM's lookup: the product left the table in tokens, shape or
 * backward; what the table holds. */
static char *gemm_reason(const compute_model *m, const compute_lookup *l) {
  if (l->conf == COMPUTE_CONF_ROOFLINE)
    return g_strdup(l->fp8 ? "FP8 GEMMs priced by FLOPs / (2 x peak x gemm_efficiency) and "
                             "bytes / copy rate: the topology has no fp8_gemm_table"
                           : "GEMMs priced by FLOPs / (peak x gemm_efficiency) and bytes / "
                             "copy rate: the topology has no gemm_table");
  if (l->conf != COMPUTE_CONF_EXTRAPOLATED) return NULL;
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "%sGEMM %g x %g x %g (M x N x K, %s): beyond the %stable in",
                         l->fp8 ? "FP8 " : "", l->gemm_m, l->gemm_n, l->gemm_k,
                         l->backward ? "backward" : "forward", l->fp8 ? "fp8_gemm_" : "");
  static const struct { unsigned bit; const char *what; } dims[] = {
      {COMPUTE_BEYOND_TOKENS, "tokens"},
      {COMPUTE_BEYOND_SHAPE, "shape (N x K not measured: the nearest measured one's time at "
                             "equal FLOPs)"},
      {COMPUTE_BEYOND_BACKWARD, "product (not measured: another product's time at equal "
                                "FLOPs, the forward's for a backward one)"}};
  for (unsigned b = 0, n = 0; b < G_N_ELEMENTS(dims); b++)
    if (l->beyond & dims[b].bit) g_string_append_printf(s, "%s %s", n++ ? "," : "", dims[b].what);
  g_string_append(s, "; it holds N x K");
  const GArray *pts = l->fp8 ? m->fp8_gemm_points : m->gemm_points;
  double t_lo = INFINITY, t_hi = 0;
  for (guint i = 0, n = 0; i < pts->len; i++) {
    const compute_point *p = &g_array_index(pts, compute_point, i);
    t_lo = fmin(t_lo, p->sq), t_hi = fmax(t_hi, p->sq);
    if (i && p->head_dim == p[-1].head_dim && p->bh == p[-1].bh) continue;
    bool seen = false; /* each shape once, whatever its parts */
    for (guint j = 0; j < i && !seen; j++) {
      const compute_point *q = &g_array_index(pts, compute_point, j);
      seen = q->head_dim == p->head_dim && q->bh == p->bh;
    }
    if (!seen) g_string_append_printf(s, "%s %gx%g", n++ ? "," : "", p->head_dim, p->bh);
  }
  g_string_append(s, " at M ");
  tokens_range(s, t_lo, t_hi);
  return g_string_free(s, FALSE);
}

char *compute_lookup_reason(const compute_model *m, const compute_lookup *l) {
  /* a scaled table is the attention table, whatever kind of kernel the
   * row's worst lookup was (report.c says it for a row whose worst is a
   * GEMM too, where it gave no reason: "(null)") */
  if (l->conf == COMPUTE_CONF_SCALED)
    return g_strdup_printf("kernel times are those of a table measured on %s, at %.4g times "
                           "its speed when saturated (compute.table_scale)",
                           m->table_from ? m->table_from : "another GPU", m->table_scale);
  if (l->kind == OP_GEMM) return gemm_reason(m, l);
  bool attention = l->kind == OP_ATTN;
  if (l->conf == COMPUTE_CONF_ROOFLINE)
    return g_strdup(attention
                        ? "kernels priced by FLOPs / (peak x efficiency): the topology has no "
                          "measured kernel table"
                        : "linear-attention kernels priced by FLOPs / (peak x "
                          "linear_efficiency) and bytes / copy rate: the topology has no "
                          "linear_table");
  if (l->conf != COMPUTE_CONF_EXTRAPOLATED) return NULL;
  GString *s = g_string_new(NULL);
  plan_op op = {.kind = (op_kind)l->kind, .causal = l->causal};
  if (!attention) g_string_append_printf(s, "%s ", plan_op_name(op.kind));
  g_string_append(s, "kernels at ");
  if (l->batch != 1) g_string_append_printf(s, "batch %g x ", l->batch);
  g_string_append_printf(s, "%g head%s x ", l->heads, l->heads == 1 ? "" : "s");
  g_autofree char *q = size_format((uint64_t)l->sq), *kv = size_format((uint64_t)l->sk);
  if (l->sq == l->sk || !attention)
    g_string_append_printf(s, "%s tokens", op.kind == OP_LIN_STATE ? kv : q);
  else g_string_append_printf(s, "%s queries x %s keys", q, kv);
  g_string_append_printf(s, " (head dim %g, %s %s): beyond the table in", l->head_dim,
                         l->causal ? "causal" : "full", l->backward ? "backward" : "forward");
  static const char *const dims[] = {"tokens", "heads", "head dim", "aspect (sk/sq)", "mask",
                                     "backward (not measured: forward x bwd_ratio)"};
  for (unsigned b = 0, n = 0; b < G_N_ELEMENTS(dims); b++)
    if (l->beyond & (1u << b)) g_string_append_printf(s, "%s %s", n++ ? "," : "", dims[b]);
  g_string_append(s, "; it holds ");
  const GArray *pts = attention ? m->points[table_mask(m, l->causal)] : lin_table(m, &op, false);
  table_holds(s, pts, attention);
  if (l->scaled)
    g_string_append_printf(s, ", measured on %s", m->table_from ? m->table_from : "another GPU");
  /* attn_lookup: beyond the table the kernel's mechanisms price it */
  if (attention && m->mech.set)
    g_string_append_printf(s, "; priced by the kernel model (its CTAs over %g SMs: "
                           "compute.kernel_model)", m->mech.sms);
  return g_string_free(s, FALSE);
}

/* ---- a decoder layer's operands (compute.h) ---- */

const char *compute_layer_op_name(layer_op which) {
  static const char *const names[LAYER_OPS] = {"norm_attn", "qkv",    "rope",  "out_proj",
                                               "resid_attn", "norm_mlp", "fc1", "swiglu",
                                               "fc2",        "resid_mlp"};
  return which < LAYER_OPS ? names[which] : "?";
}

bool compute_layer_check(const layer_dims *d, GError **err) {
  const char *why = NULL;
  uint32_t of = 0;
  if (!d->hidden || !d->ffn) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "the layer needs the model's hidden and FFN sizes (a --model, or model.hidden "
                "and model.ffn)");
    return false;
  }
  if (!d->tp) why = "tp", of = 0;
  else if (d->heads % d->tp) why = "query heads", of = d->heads;
  else if (d->kv_heads % d->tp) why = "KV heads", of = d->kv_heads;
  else if (d->ffn % d->tp) why = "FFN size", of = d->ffn;
  else if (fmod(d->tokens, d->tp)) why = "tokens", of = 0;
  if (!why) return true;
  if (!d->tp)
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT, "a TP degree of 0: expected at least 1");
  else if (of)
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "TP %u does not divide the model's %u %s (Megatron splits them among the TP "
                "ranks)", d->tp, of, why);
  else
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "TP %u does not divide the %.0f tokens (sequence parallelism shards them among "
                "the TP ranks)", d->tp, d->tokens);
  return false;
}

/* norm_input: the GEMM reads a norm's output (QKV, FC1), which
 * TransformerEngine's LayerNormLinear writes in FP8 directly */
static plan_op layer_gemm(const layer_dims *d, double n, double k, bool backward,
                          bool norm_input) {
  uint8_t fp8 = d->fp8 ? COMPUTE_FP8 | (norm_input ? COMPUTE_FP8_NORM_INPUT : 0) : 0;
  return (plan_op){.kind = OP_GEMM, .backward = backward, .batch = 1,
                   .elem_bytes = d->elem_bytes, .gemm_m = d->tokens, .gemm_n = n, .gemm_k = k,
                   .fp8 = fp8};
}

static plan_op layer_elemwise(const layer_dims *d, compute_elemwise k, double rows,
                              double width, bool backward) {
  return (plan_op){.kind = OP_ELEMWISE, .backward = backward, .batch = 1,
                   .head_dim = d->head_dim, .elem_bytes = d->elem_bytes, .sq = rows,
                   .width = width, .elemwise = (uint8_t)k, .unfused = d->unfused};
}

plan_op compute_layer_op(const layer_dims *d, layer_op which, bool backward) {
  double tp = d->tp ? d->tp : 1, T = d->tokens, local = T / tp, h = d->hidden;
  double q = (double)d->heads * d->head_dim / tp, kv = (double)d->kv_heads * d->head_dim / tp;
  double f = d->ffn / tp;
  switch (which) {
  case LAYER_NORM_ATTN:
  case LAYER_NORM_MLP: return layer_elemwise(d, EW_RMSNORM, local, h, backward);
  case LAYER_QKV: return layer_gemm(d, q + 2 * kv, h, backward, true);
  case LAYER_ROPE: return layer_elemwise(d, EW_ROPE, T, q + kv, backward);
  case LAYER_OUT_PROJ: return layer_gemm(d, h, q, backward, false);
  case LAYER_RESID_ATTN:
  case LAYER_RESID_MLP: return layer_elemwise(d, EW_RESIDUAL, local, h, backward);
  case LAYER_FC1: return layer_gemm(d, 2 * f, h, backward, true);
  case LAYER_SWIGLU: return layer_elemwise(d, EW_SWIGLU, T, f, backward);
  case LAYER_FC2: return layer_gemm(d, h, f, backward, false);
  default: g_assert_not_reached();
  }
}

double compute_layer_params(const layer_dims *d) {
  double tp = d->tp ? d->tp : 1, h = d->hidden, D = d->head_dim;
  double qkv = h * ((double)d->heads + 2.0 * d->kv_heads) * D, out = (double)d->heads * D * h;
  double mlp = 3.0 * h * d->ffn;
  return (qkv + out + mlp) / tp + 2 * h;
}

plan_op compute_layer_cast_op(const layer_dims *d) {
  /* the GEMMs' weights (the norms' stay float32 under autocast): Megatron's
   * four fused tensors, or Hugging Face Llama's seven */
  plan_op op = layer_elemwise(d, EW_CAST, compute_layer_params(d) - 2.0 * d->hidden, 1, false);
  op.batch = d->unfused ? 7 : 4;
  return op;
}

plan_op compute_layer_optimizer_op(const layer_dims *d) {
  /* tensors per layer: Hugging Face Llama's q, k, v, o, gate, up, down and
   * two norms (9); Megatron's fused linear_qkv, linear_proj, linear_fc1,
   * linear_fc2 and two norms (6) */
  plan_op op = layer_elemwise(d, EW_OPTIMIZER, compute_layer_params(d), 1, false);
  op.batch = d->unfused ? 9 : 6;
  return op;
}
