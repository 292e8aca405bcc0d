/* layers: the attention kinds of a model's layers.
 *
 * A model is one attention layer (the default), or a mix such as
 * LASP-2H's 1/4 hybrid Linear-Llama3: 12 linear and 4 softmax layers.
 * Layers of one kind behave the same under a scheduler and run one after
 * the other (a layer's forward needs the previous layer's output), so a
 * point simulates each kind once and its times are the sum over the
 * model's layers (sim.c). */
#ifndef TASP_LAYERS_H
#define TASP_LAYERS_H

#include <stdbool.h>

#include "workload.h"

/* "softmax", "linear" */
const char *attn_name(attn_kind k);
/* The kind named by `name`; false when it names none. */
bool attn_parse(const char *name, attn_kind *out);

/* Layers of kind k in w's model (w->layers, or one layer of w->attention
 * where no mix is set). */
uint32_t layers_count(const workload *w, attn_kind k);
/* Layers in all. */
uint32_t layers_total(const workload *w);
/* w for one layer of kind k. */
workload layers_one(const workload *w, attn_kind k);
/* "16 linear", "12 linear + 4 softmax"; owned by the caller. */
char *layers_text(const workload *w);

#endif
