/* outputs: the files one run writes (CSV, links report, trace), written
 * together, and the checks on stdout.
 *
 * Every regular (or new) file goes to a temporary first, created in the
 * file's own directory when the output is added, before the run's work,
 * so that a name that cannot be created is refused up front; only when
 * all outputs are complete are the temporaries renamed into place, so a
 * run leaves either all of its files or none.  Temporaries are named
 * "<name>.tmp.XXXXXX" with the name cut to 128 bytes, so a file name as
 * long as the system allows still has a temporary.  Devices and FIFOs
 * (/dev/null, a pipe) are written in place.
 *
 * A symbolic link is written through: the file it finally points to (or
 * would create, for a dangling link) is replaced, the link stays.
 *
 * From the first temporary to the last rename, every catchable signal
 * whose default action ends the process (SIGHUP, SIGINT, SIGTERM,
 * SIGQUIT, SIGPIPE, SIGXFSZ, SIGXCPU, SIGALRM, SIGUSR1, SIGUSR2, SIGABRT,
 * real-time signals, ...) removes the temporaries (unlink only: async-
 * signal-safe) and is raised again, so the exit status still says which
 * signal ended the run.  Signals the process was started ignoring (nohup)
 * stay ignored.
 *
 * Refused before anything runs (exit 2, naming the option): an empty
 * name; two outputs on one file (the same name, or the same device and
 * inode, with "-" standing for whatever stdout is: "--csv /dev/stdout
 * --links -" is refused, /dev/null excepted); an output naming an input
 * file; a name the system cannot create. */
#ifndef TASP_OUTPUTS_H
#define TASP_OUTPUTS_H

#include <glib.h>
#include <stdbool.h>
#include <stdio.h>

#include "report.h"

typedef void (*output_fn)(FILE *f, const report_ctx *c);
typedef struct outputs outputs;

outputs *outputs_new(void);
/* Removes every temporary not renamed into place. */
void outputs_free(outputs *o);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(outputs, outputs_free)

/* An output of `option` to `path` ("-": stdout, at most one).  FALSE with
 * an error naming the option when the path is empty, cannot be written or
 * created, or is the file of an earlier output (both options named).
 * fn NULL: the output is streamed by the caller (outputs_stream). */
bool outputs_add(outputs *o, const char *option, const char *path, output_fn fn,
                 GError **err);
/* FALSE with an error when some output would overwrite input `file`
 * (`what`: "scenario file", "topology file"). */
bool outputs_check_input(const outputs *o, const char *file, const char *what, GError **err);
/* Whether some output goes to stdout. */
bool outputs_to_stdout(const outputs *o);
/* The open file a streamed output (added with fn NULL) is written to
 * during the run; outputs_write checks and places it with the others.
 * NULL with an error when it cannot be opened. */
FILE *outputs_stream(outputs *o, const char *option, GError **err);
/* Write them all (files first, all renamed at the end; stdout last).
 * FALSE, and no file placed, when one fails or when stdout already failed
 * (the table); FALSE too when writing stdout fails. */
bool outputs_write(outputs *o, const report_ctx *c, GError **err);

/* For atexit(): when anything written to stdout was lost (a full disk,
 * a closed pipe's EPIPE), says so on stderr and ends with status 1
 * instead of the 0 the run would have returned. */
void outputs_close_stdout(void);

/* Says err on stderr as every command of tasp-sim does ("tasp-sim:
 * error: ...") and returns status, for main functions to return. */
int outputs_fail(const GError *err, int status);

#endif
