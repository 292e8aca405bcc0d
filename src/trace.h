/* trace: the Chrome trace of a run, written point by point as the points
 * finish (sim_opts.on_point), so that a sweep's trace is never held in
 * memory whole: each point's spans, transfers and rates are freed once
 * written, and at most --jobs points are running or waiting to be
 * written at once (sim.h).  Points come in point order, so the file is
 * the same for any --jobs. */
#ifndef TASP_TRACE_H
#define TASP_TRACE_H

#include <stdio.h>

#include "sim.h"

typedef struct trace_writer trace_writer;

/* Starts the trace on f (the caller keeps f). */
trace_writer *trace_writer_new(FILE *f);
/* One point, a process of the trace (hidden baselines and points that did
 * not run are skipped); its trace arrays are then freed.  The signature
 * of sim_opts.on_point. */
void trace_writer_point(sim_result *r, void *writer);
/* Ends the trace and frees the writer. */
void trace_writer_end(trace_writer *w);

#endif
