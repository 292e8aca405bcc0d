/* docs: the lengths of the documents packed into one sequence (--docs,
 * model.docs): a list, or a distribution drawn with a seed.
 *
 *   2K,59K,4K,63K                         the lengths, in order
 *   lognormal:mean=8K,sigma=1.0,seed=1     lengths exp(mu + sigma Z), mu =
 *                                          ln(mean) - sigma^2/2 (so that
 *                                          their mean is `mean`)
 *   uniform:min=1K,max=16K,seed=1          lengths uniform in [min, max]
 *   file:lengths.txt                       the lengths in a file, in order
 *                                          (commas, blanks or lines; '#'
 *                                          comments)
 *
 * A distribution draws lengths (GLib's Mersenne Twister from `seed`: the
 * same lengths on every machine and for any --jobs) until the sequence is
 * full, and cuts the last to what remains; `pad=P` rounds every length up
 * to a multiple of P (as TransformerEngine's THD format pads each
 * document to a multiple of 2 x the CP size). */
#ifndef TASP_DOCS_H
#define TASP_DOCS_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

/* The most documents a sequence may hold: every step of a ring runs a
 * kernel per document, so a plan grows with them. */
#define DOCS_MAX 65536u

typedef struct docs_spec docs_spec;

/* NULL with *why (owned) saying what was expected. */
docs_spec *docs_parse(const char *text, char **why);
void docs_spec_free(docs_spec *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(docs_spec, docs_spec_free)
/* The documents of a sequence of `seq` tokens (uint64 lengths adding up
 * to it); NULL with *why where a list does not add up to it or a pad does
 * not divide it, or more than DOCS_MAX are drawn. */
GArray *docs_for(const docs_spec *d, uint64_t seq, char **why);

#endif
