/* report: what a run prints — the table a person reads, the CSV of
 * design.md, the per-channel link report, the Chrome/Perfetto trace
 * (outputs.c writes them to files). */
#ifndef TASP_REPORT_H
#define TASP_REPORT_H

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>

#include "scenario.h"
#include "sim.h"

typedef struct {
  const scenario *s;
  GPtrArray *results;  /* sim_result *, in point order */
} report_ctx;

void report_table(FILE *f, const report_ctx *c);
void report_csv(FILE *f, const report_ctx *c);
void report_links(FILE *f, const report_ctx *c);
void report_trace(FILE *f, const report_ctx *c);

#endif
