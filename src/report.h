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
  bool links_summary;  /* table: a links line for every row, not only telling ones */
} report_ctx;

void report_table(FILE *f, const report_ctx *c);
void report_csv(FILE *f, const report_ctx *c);
/* A CSV field per RFC 4180: quoted (quotes doubled) when it holds a comma,
 * a quote or a line break. */
void report_csv_str(FILE *f, const char *s);
void report_links(FILE *f, const report_ctx *c);
void report_trace(FILE *f, const report_ctx *c);
/* --memory: per point and GPU, the peak and the buffers live at it,
 * largest first ("gathered k, v 24.0 GiB"). */
void report_memory(FILE *f, const report_ctx *c);
/* The schedulers' notes, each once, in row order (stderr when no table). */
void report_notes(FILE *f, const report_ctx *c);

#endif
