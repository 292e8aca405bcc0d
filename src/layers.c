/* layers: attention kinds and layer mixes. */
#include "layers.h"

#include <glib.h>
#include <string.h>

static const char *const names[ATTN_KINDS] = {"softmax", "linear"};

const char *attn_name(attn_kind k) { return k < ATTN_KINDS ? names[k] : "?"; }

bool attn_parse(const char *name, attn_kind *out) {
  for (int k = 0; k < ATTN_KINDS; k++)
    if (!strcmp(name, names[k])) {
      *out = (attn_kind)k;
      return true;
    }
  return false;
}

static bool mixed(const workload *w) {
  for (int k = 0; k < ATTN_KINDS; k++)
    if (w->layers[k]) return true;
  return false;
}

uint32_t layers_count(const workload *w, attn_kind k) {
  if (!mixed(w)) return w->attention == k;
  return w->layers[k];
}

uint32_t layers_total(const workload *w) {
  uint32_t n = 0;
  for (int k = 0; k < ATTN_KINDS; k++) n += layers_count(w, (attn_kind)k);
  return n;
}

workload layers_one(const workload *w, attn_kind k) {
  workload one = *w;
  one.attention = k;
  memset(one.layers, 0, sizeof one.layers);
  return one;
}

char *layers_text(const workload *w) {
  GString *s = g_string_new(NULL);
  /* linear first: hybrid models are named by their linear share */
  static const attn_kind order[ATTN_KINDS] = {ATTN_LINEAR, ATTN_SOFTMAX};
  for (int i = 0; i < ATTN_KINDS; i++) {
    uint32_t n = layers_count(w, order[i]);
    if (n) g_string_append_printf(s, "%s%u %s", s->len ? " + " : "", n, attn_name(order[i]));
  }
  return g_string_free(s, FALSE);
}
