/* replay: simulate one measured link pattern (calibration/…/links-n*.jsonl)
 * as one communication group on a topology, for comparing measured and
 * predicted transfer times and for fitting a topology's link constants. */
#ifndef TASP_REPLAY_H
#define TASP_REPLAY_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "topology.h"

typedef struct {
  char pattern[32], api[32];
  uint32_t n;         /* GPUs taking part */
  double msg_bytes;
  double measured_s;
} replay_case;

/* Read every line of a links-n*.jsonl file; FALSE with a message on error. */
bool replay_read(const char *file, GArray *cases, GError **err);
/* Predicted seconds for one case; < 0 for a pattern we do not know. */
double replay_predict(const topology *t, const replay_case *c);

#endif
