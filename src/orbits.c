/* orbits: the classes of a symmetric job, the quotient network, and the
 * expansion of a representatives' result (orbits.h says why it is exact). */
#include "orbits.h"

#include <glib.h>
#include <string.h>

/* A switched topology's NIC of GPU g, numbered over the whole topology. */
static uint32_t nic_of(const topology *t, uint32_t g) {
  uint32_t per = t->gpus_per_node;
  return g / per * t->switched.nics + topo_nic_for_gpu(g % per, per, t->switched.nics);
}

/* A topology whose routes are the switched generators' structure (the
 * only ones orbits_automorphism can check). */
static bool switched(const topology *t) {
  /* topo_gen.c: each GPU's port pair (2g, 2g + 1), then each NIC's */
  return t->switched.on && (t->switched.nics == 0 || t->switched.nic0 == 2 * t->n_gpus) &&
         t->channels->len == 2 * t->n_gpus + 2 * (t->n_gpus / t->gpus_per_node) * t->switched.nics;
}

/* Whether GPU permutation pi keeps a switched topology's routes: GPUs of
 * one node go to one node (routes inside a node stay inside one, with its
 * caps), GPUs of one NIC to one NIC, each map one-to-one. */
bool orbits_automorphism(const topology *t, const uint32_t *pi) {
  uint32_t n = t->n_gpus, per = t->gpus_per_node, nics = t->switched.nics;
  if (!switched(t)) return false;
  if (nics == 0) return true;  /* one NVSwitch domain: every GPU alike */
  uint32_t nodes = n / per, units[2] = {nodes, nodes * nics};
  bool ok = true;
  for (int level = 0; level < 2 && ok; level++) {
    g_autofree uint32_t *to = g_new(uint32_t, units[level]);
    g_autofree uint8_t *hit = g_new0(uint8_t, units[level]);
    memset(to, 0xff, units[level] * sizeof *to);
    for (uint32_t g = 0; g < n && ok; g++) {
      uint32_t a = level ? nic_of(t, g) : g / per, b = level ? nic_of(t, pi[g]) : pi[g] / per;
      if (to[a] == UINT32_MAX) {
        ok = !hit[b];
        to[a] = b;
        hit[b] = 1;
      } else {
        ok = to[a] == b;
      }
    }
  }
  return ok;
}

/* The channel pi maps channel c to: a GPU's NVSwitch port goes with its
 * GPU, a NIC with the GPUs it serves. */
static uint32_t chan_image(const topology *t, const uint32_t *pi, uint32_t c) {
  uint32_t n = t->n_gpus;
  if (c < 2 * n) return 2 * pi[c / 2] + c % 2;
  uint32_t k = (c - t->switched.nic0) / 2, nics = t->switched.nics, per = t->gpus_per_node;
  uint32_t owner = k / nics * per + k % nics * (per / nics);
  return t->switched.nic0 + 2 * nic_of(t, pi[owner]) + (c - t->switched.nic0) % 2;
}

/* Orbits of n points under the generators' images (img(gen, x)): each
 * point's least orbit member into rep, its orbit's size into size. */
typedef uint32_t (*image_fn)(const topology *t, const uint32_t *pi, uint32_t x);

static uint32_t gpu_image(const topology *t, const uint32_t *pi, uint32_t g) {
  (void)t;
  return pi[g];
}

static void orbits_of(const topology *t, const uint32_t *const *gens, uint32_t n_gens,
                      uint32_t n, image_fn img, uint32_t *rep, uint32_t *size) {
  memset(rep, 0xff, n * sizeof *rep);
  GArray *orbit = g_array_new(FALSE, FALSE, sizeof(uint32_t));
  for (uint32_t x = 0; x < n; x++) {
    if (rep[x] != UINT32_MAX) continue;
    g_array_set_size(orbit, 0);
    g_array_append_val(orbit, x);
    rep[x] = x;  /* x is the least unvisited point: its orbit's least */
    for (guint i = 0; i < orbit->len; i++)
      for (uint32_t k = 0; k < n_gens; k++) {
        uint32_t y = img(t, gens[k], g_array_index(orbit, uint32_t, i));
        if (rep[y] != UINT32_MAX) continue;
        rep[y] = x;
        g_array_append_val(orbit, y);
      }
    for (guint i = 0; i < orbit->len; i++) size[g_array_index(orbit, uint32_t, i)] = orbit->len;
  }
  g_array_free(orbit, TRUE);
}

static bool commute(const uint32_t *a, const uint32_t *b, uint32_t n) {
  for (uint32_t g = 0; g < n; g++)
    if (a[b[g]] != b[a[g]]) return false;
  return true;
}

/* A permutation's order: the least common multiple of its cycles. */
static uint64_t perm_order(const uint32_t *pi, uint32_t n) {
  g_autofree uint8_t *seen = g_new0(uint8_t, n);
  uint64_t order = 1;
  for (uint32_t g = 0; g < n && order <= n; g++) {
    uint64_t len = 0;
    for (uint32_t x = g; !seen[x]; x = pi[x]) seen[x] = 1, len++;
    if (!len) continue;
    uint64_t a = order, b = len;
    while (b) { uint64_t r = a % b; a = b; b = r; }
    order = order / a * len;
  }
  return order;
}

orbits *orbits_new(const topology *t, const uint32_t *const *gens, uint32_t n_gens) {
  uint32_t n = t->n_gpus, nc = t->channels->len;
  for (uint32_t k = 0; k < n_gens; k++) {
    if (!orbits_automorphism(t, gens[k])) return NULL;
    for (uint32_t j = 0; j < k; j++)
      if (!commute(gens[j], gens[k], n)) return NULL;
  }
  orbits *o = g_new0(orbits, 1);
  o->n_gpus = n;
  o->n_chan = nc;
  o->turn = 1;
  o->rep = g_new(uint32_t, n);
  o->chan_rep = g_new(uint32_t, nc);
  o->chan_stab = g_new(uint32_t, nc);
  g_autofree uint32_t *size = g_new(uint32_t, MAX(n, nc));
  orbits_of(t, gens, n_gens, n, gpu_image, o->rep, size);
  for (uint32_t g = 0; g < n; g++) {
    if (size[g] == 1) continue;
    if (!o->mult) o->mult = size[g];
    if (size[g] != o->mult) goto refuse;
  }
  if (o->mult < 2) goto refuse;
  {
    /* commuting generators: |G| <= the product of their orders, and
     * |G| >= a class's size; equal, every class is a free orbit */
    uint64_t order = 1;
    for (uint32_t k = 0; k < n_gens && order <= o->mult; k++) order *= perm_order(gens[k], n);
    if (order != o->mult) goto refuse;
  }
  orbits_of(t, gens, n_gens, nc, chan_image, o->chan_rep, size);
  for (uint32_t c = 0; c < nc; c++) {
    const topo_channel *a = topo_chan(t, c), *b = topo_chan(t, o->chan_rep[c]);
    if (o->mult % size[c] || a->cap_Bps != b->cap_Bps || a->latency_s != b->latency_s)
      goto refuse;
    o->chan_stab[c] = o->mult / size[c];
  }
  return o;
refuse:
  orbits_free(o);
  return NULL;
}

void orbits_free(orbits *o) {
  if (!o) return;
  g_free(o->rep);
  g_free(o->chan_rep);
  g_free(o->chan_stab);
  g_free(o);
}

void orbits_caps(const orbits *o, const topology *t, double *caps) {
  for (uint32_t c = 0; c < o->n_chan; c++) caps[c] = topo_chan(t, c)->cap_Bps / o->chan_stab[c];
}

void orbits_route(const orbits *o, uint32_t *route, uint32_t n) {
  for (uint32_t h = 0; h < n; h++) route[h] = o->chan_rep[route[h]];
}

static void per_gpu(const orbits *o, uint32_t n, double *a) {
  if (!a) return;
  for (uint32_t g = 0; g < n; g++) a[g] = a[o->rep[g]];
}

/* The buffers at each GPU's peak: its representative's, GPU by GPU. */
static void expand_live(const orbits *o, exec_result *r) {
  if (!r->peak_live || !r->peak_live->len) return;
  GArray *in = r->peak_live;
  g_autofree uint32_t *first = g_new(uint32_t, r->n_gpus);
  memset(first, 0xff, r->n_gpus * sizeof *first);
  for (guint i = in->len; i-- > 0;) first[g_array_index(in, exec_mem_live, i).gpu] = i;
  GArray *out = g_array_new(FALSE, FALSE, sizeof(exec_mem_live));
  for (uint32_t g = 0; g < r->n_gpus; g++) {
    uint32_t rg = o->rep[g];
    for (guint i = first[rg]; i != UINT32_MAX && i < in->len; i++) {
      exec_mem_live l = g_array_index(in, exec_mem_live, i);
      if (l.gpu != rg) break;
      l.gpu = g;
      g_array_append_val(out, l);
    }
  }
  g_array_free(in, TRUE);
  r->peak_live = out;
}

void orbits_expand(const orbits *o, exec_result *r) {
  /* the result's GPUs are the job's, the first of the topology's */
  g_assert(!r->spans && r->n_gpus <= o->n_gpus && r->n_chan == o->n_chan);
  double *per[] = {r->gpu_compute_s, r->gpu_comm_s, r->gpu_finish_s, r->gpu_imbalance_s,
                   r->gpu_peak_bytes, r->gpu_peak_reserved_bytes};
  for (size_t i = 0; i < G_N_ELEMENTS(per); i++) per_gpu(o, r->n_gpus, per[i]);
  for (int ph = 0; r->gpu_peak_phase_bytes && ph < PLAN_PHASES; ph++)
    per_gpu(o, r->n_gpus, r->gpu_peak_phase_bytes + (size_t)ph * r->n_gpus);
  /* non-canonical channels first: they read their canonical's replayed
   * bytes before it is scaled */
  for (int canonical = 0; canonical < 2; canonical++)
    for (uint32_t c = 0; c < o->n_chan; c++) {
      uint32_t k = o->chan_rep[c];
      if ((k == c) != canonical) continue;
      r->chan_bytes[c] = r->chan_bytes[k] * o->chan_stab[c];
      r->chan_busy_s[c] = r->chan_busy_s[k];
    }
  r->flops *= o->mult;
  r->mem_errors *= o->mult;
  expand_live(o, r);
}
