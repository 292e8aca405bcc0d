/* usp: Unified Sequence Parallelism (Fang and Zhao 2024, arXiv 2405.07719;
 * feifeibear/long-context-attention's LongContextAttention).
 *
 * The n GPUs form u x r: Ulysses groups of u consecutive GPUs (inside a
 * node, where the all-to-alls are cheap) and r = n / u ring groups across
 * them (GPU g is ring rank g / u; ring neighbours are u apart, so on
 * several nodes the ring crosses the NICs).  A pass is the Ulysses head
 * scatter inside each group, then Ring (usp) or Zigzag-Ring (usp-zigzag)
 * attention over the r ring ranks on the group's heads, then the head
 * gather.  After the scatter a GPU holds its Ulysses group's u·c tokens:
 * the ring chunk.  The degree u is `--usp-ulysses` (scenario key
 * `usp_ulysses`), by default the largest that fits in a node and divides
 * the heads (ulysses_default_degree).
 *
 * Packed documents (--docs): the Ulysses all-to-alls move tokens whatever
 * documents they hold; the ring part lays the documents out as ring's
 * varlen functions do over the r ring ranks (ring.c): usp-zigzag as
 * ms-swift's sequence parallelism runs it (modelscope/ms-swift,
 * swift/sequence_parallel/sequence_parallel.py: DistributedAttention's
 * all-to-all inside, zigzag_ring_flash_attn_varlen_func over the ring
 * group with the packed cu_seqlens: every document in 2r pieces, ring rank
 * a holding pieces a and 2r-1-a of each), usp with ring_flash_attn_
 * varlen_func in that place (ring rank a holding its 1/r of every
 * document).  yunchang's LongContextAttention itself takes no cu_seqlens:
 * usp's documents are that composition, not yunchang's code.  Documents
 * must cut into r (usp-zigzag: 2r) equal pieces. */
#include "ring.h"
#include "ulysses.h"
#include "usp_mem.h"

/* The most a Ulysses degree can be: the most GPUs a sequence may share
 * (scenario.h's SCENARIO_MAX_SP). */
const sched_opt usp_opt_ulysses = {
    .key = "usp_ulysses",
    .in_model = true,
    .type = SCHED_OPT_COUNT,
    .max = 16384,
    .splits_sp = true,
    .splits_heads = true,
    .default_num = ulysses_default_degree,
    .metavar = "N",
    .help = "USP's Ulysses degree (all-to-all groups inside it, ring across); default: the "
            "largest that fits in a node and divides the heads"};

static const sched_opt *const usp_opts[] = {&usp_opt_ulysses, &ulysses_opt_fused, NULL};

static uint32_t degree(const workload *w, const topology *t) {
  uint32_t u = sched_opt_num(w, &usp_opt_ulysses);
  return u ? u : ulysses_default_degree(w, t);
}

static bool check(const workload *w, const topology *t, bool zigzag, const char *who,
                  GError **err) {
  uint32_t u = degree(w, t);
  if (u == 0 || w->gpus % u != 0) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_SP,
                "%s: the Ulysses degree %u does not divide the SP degree %u (usp_ulysses)", who,
                u, w->gpus);
    return false;
  }
  if (!ulysses_check_heads(w, u, who, err)) return false;
  /* the documents are cut over the r ring ranks, not the n GPUs */
  workload ring = *w;
  ring.gpus = w->gpus / u;
  if (!sched_check_docs(zigzag ? &sched_usp_zigzag : &sched_usp, &ring, zigzag ? 2 : 1,
                        zigzag ? "usp-zigzag's ring part, zigzag_ring_flash_attn_varlen_func, "
                                 "cuts every document into 2 x its ring degree pieces"
                               : "usp's ring part, ring_flash_attn_varlen_func, gives every "
                                 "ring rank 1/r of every document", err))
    return false;
  return sched_check_divisible(w, zigzag ? 2 : 1,
                               zigzag ? "usp-zigzag cuts each ring chunk into two halves per GPU"
                                      : "usp gives every GPU an equal contiguous piece", err);
}

static plan *build(const workload *w, const topology *t, bool record_segs, bool zigzag) {
  uint32_t u = degree(w, t);
  ring_geom g = ring_geom_make(w, u, zigzag);
  ulysses_bufs held = {{0}, 0};
  struct usp_mem mem = {{{0}, 0}, 0};
  g.held = &held;
  g.mem = &mem;
  /* K and V are two tensors from the all-to-alls (Ulysses.to_heads, once
   * each) to the ring's buffers (ring_flash_attn's k, v; calibrate.py's
   * USP.attend and attend_bwd: nk, nv, dk, dv, ndk, ndv) */
  rotate_ops ops = {.prologue = usp_mem_prologue, .epilogue = usp_mem_epilogue, .kv_split = true};
  plan *p = ring_geom_build(&g, ops, record_segs);
  g_string_printf(p->note, "%s: Ulysses degree %u x ring degree %u", zigzag ? "usp-zigzag" : "usp",
                  u, g.ranks);
  return p;
}

/* Every Ulysses group's GPUs turned by one (GPU g to the next of its
 * group; with a block, the next of its block of the group): its GPUs hold
 * the same tokens and run the same ring steps with the same ring
 * neighbours' images on their own heads, and every pair of them
 * exchanges alike in the all-to-alls, so the turn maps the plan onto
 * itself (test_usp: t_causal_groups_coincide, t_orbits_equal_full).
 * Under a full mask the plan is lockstep already: one task for every GPU
 * costs less than a copy per group. */
static bool turn(const workload *w, const topology *t, uint32_t block, uint32_t *pi) {
  uint32_t u = degree(w, t), k = block ? block : u;
  if (!w->causal || u < 2 || w->gpus % u || k < 2 || u % k) return false;
  for (uint32_t g = 0; g < w->gpus; g++) pi[g] = g - g % k + (g % k + 1) % k;
  return true;
}

static bool usp_check(const workload *w, const topology *t, GError **err) {
  return check(w, t, false, "usp", err);
}
static bool uspz_check(const workload *w, const topology *t, GError **err) {
  return check(w, t, true, "usp-zigzag", err);
}
static plan *usp_build(const workload *w, const topology *t, bool record_segs) {
  return build(w, t, record_segs, false);
}
static plan *uspz_build(const workload *w, const topology *t, bool record_segs) {
  return build(w, t, record_segs, true);
}

const sched_ops sched_usp = {
    .name = "usp",
    .summary = "USP: Ulysses all-to-all inside a node x Ring across",
    .check = usp_check,
    .build = usp_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = usp_opts,
    .docs = true,
    .turn = turn,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h): a full mask
     * is lockstep, a few tasks a ring step; a causal one a kernel per GPU
     * and step, and a gather copy per GPU */
    .size = {0.5, 0, 4, 2.8, 0, 3.5, 0, 1.5, 1.5, 20, 1, 0, 0}};
const sched_ops sched_usp_zigzag = {
    .name = "usp-zigzag",
    .summary = "USP with Zigzag-Ring as its ring part (balanced causal)",
    .check = uspz_check,
    .build = uspz_build,
    .attention = SCHED_RUNS(ATTN_SOFTMAX),
    .opts = usp_opts,
    .docs = true,
    .turn = turn,
    /* t2c t2f t1c t1f x3 x2 x1 s2c s2f s1 xs2 xs1 (sched.h) */
    .size = {0.5, 0, 4, 2.8, 0, 3.5, 0, 1.5, 1.5, 20, 1, 0, 0}};
