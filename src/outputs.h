/* outputs: the files one run writes (CSV, links report, trace), written
 * together: every file goes to a temporary name first and only when all
 * are complete are they renamed into place, so a run leaves either all of
 * its outputs or none.  A SIGINT or SIGTERM while writing removes the
 * temporaries.  Two outputs naming one file, or an output naming an input
 * file, are refused before anything runs. */
#ifndef TASP_OUTPUTS_H
#define TASP_OUTPUTS_H

#include <glib.h>
#include <stdbool.h>

#include "report.h"

typedef void (*output_fn)(FILE *f, const report_ctx *c);
typedef struct outputs outputs;

outputs *outputs_new(void);
void outputs_free(outputs *o);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(outputs, outputs_free)

/* An output of `option` to `path` ("-": stdout, at most one).  FALSE with
 * an error naming both options when it is the file of an earlier one, or
 * naming the option when the path cannot be written (checked now, before
 * the run's work). */
bool outputs_add(outputs *o, const char *option, const char *path, output_fn fn,
                 GError **err);
/* FALSE with an error when some output would overwrite input `file`
 * (`what`: "scenario file", "topology file"). */
bool outputs_check_input(const outputs *o, const char *file, const char *what, GError **err);
/* Whether some output goes to stdout. */
bool outputs_to_stdout(const outputs *o);
/* Write them all (files first, all renamed at the end; stdout last). */
bool outputs_write(outputs *o, const report_ctx *c, GError **err);

#endif
