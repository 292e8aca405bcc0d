/* outputs: all-or-nothing writing of a run's output files. */
#include "outputs.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  char *option, *path;
  char *tmp;    /* temporary name; NULL: written in place (stdout, a device) */
  output_fn fn;
} output;

struct outputs {
  GArray *items; /* output */
};

static void output_clear(gpointer p) {
  output *x = p;
  g_free(x->option);
  g_free(x->path);
  g_free(x->tmp);
}

outputs *outputs_new(void) {
  outputs *o = g_new0(outputs, 1);
  o->items = g_array_new(FALSE, TRUE, sizeof(output));
  g_array_set_clear_func(o->items, output_clear);
  return o;
}

void outputs_free(outputs *o) {
  if (!o) return;
  g_array_free(o->items, TRUE);
  g_free(o);
}

/* One file under two names: the same canonical path, or, where both
 * exist, the same device and inode (links, "./x" and "x"). */
static bool same_file(const char *a, const char *b) {
  g_autofree char *ca = g_canonicalize_filename(a, NULL);
  g_autofree char *cb = g_canonicalize_filename(b, NULL);
  if (!strcmp(ca, cb)) return true;
  GStatBuf sa, sb;
  return g_stat(a, &sa) == 0 && g_stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

/* Whether path can be written, checked before any work: an existing file
 * (or device) writable, else a new file in a writable directory.  errno
 * says why not. */
static bool writable(const char *path) {
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    errno = EISDIR;
    return false;
  }
  if (g_file_test(path, G_FILE_TEST_EXISTS)) return access(path, W_OK) == 0;
  g_autofree char *dir = g_path_get_dirname(path);
  return access(dir, W_OK | X_OK) == 0;
}

bool outputs_add(outputs *o, const char *option, const char *path, output_fn fn,
                 GError **err) {
  bool out = !strcmp(path, "-");
  for (guint i = 0; i < o->items->len; i++) {
    const output *x = &g_array_index(o->items, output, i);
    bool clash = out ? !strcmp(x->path, "-") : strcmp(x->path, "-") && same_file(x->path, path);
    if (clash) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "command line: option '%s': \"%s\" is also the output of '%s'; expected a "
                  "different file for each output", option, path, x->option);
      return false;
    }
  }
  if (!out && !writable(path)) {
    int e = errno;
    g_autofree char *dir = g_path_get_dirname(path);
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: option '%s': \"%s\" cannot be written (%s); expected a file in "
                "an existing, writable directory (here %s)", option, path, g_strerror(e), dir);
    return false;
  }
  output x = {g_strdup(option), g_strdup(path), NULL, fn};
  g_array_append_val(o->items, x);
  return true;
}

bool outputs_check_input(const outputs *o, const char *file, const char *what, GError **err) {
  if (!file) return true;
  for (guint i = 0; i < o->items->len; i++) {
    const output *x = &g_array_index(o->items, output, i);
    if (strcmp(x->path, "-") && same_file(x->path, file)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "command line: option '%s': \"%s\" is the %s; expected an output file that "
                  "is not an input", x->option, x->path, what);
      return false;
    }
  }
  return true;
}

bool outputs_to_stdout(const outputs *o) {
  for (guint i = 0; i < o->items->len; i++)
    if (!strcmp(g_array_index(o->items, output, i).path, "-")) return true;
  return false;
}

/* Temporaries to remove if a signal ends the process while writing.  Set
 * up before the first temporary is opened; read by the handler only. */
static char *volatile *pending;
static volatile sig_atomic_t n_pending;

static void on_signal(int sig) {
  for (sig_atomic_t i = 0; i < n_pending; i++) unlink(pending[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

static bool write_one(const output *x, const char *target, const report_ctx *c) {
  FILE *f = g_fopen(target, "w");
  if (!f) return false;
  x->fn(f, c);
  bool ok = !ferror(f);
  return fclose(f) == 0 && ok;
}

bool outputs_write(outputs *o, const report_ctx *c, GError **err) {
  guint n = o->items->len;
  g_autofree char **tmps = g_new0(char *, n + 1);
  guint nt = 0;
  /* a regular file (or a new one) goes through a temporary; a device such
   * as /dev/null is written in place */
  for (guint i = 0; i < n; i++) {
    output *x = &g_array_index(o->items, output, i);
    if (!strcmp(x->path, "-")) continue;
    if (!g_file_test(x->path, G_FILE_TEST_EXISTS) || g_file_test(x->path, G_FILE_TEST_IS_REGULAR)) {
      x->tmp = g_strdup_printf("%s.tmp.%d", x->path, (int)getpid());
      tmps[nt++] = x->tmp;
    }
  }
  struct sigaction sa = {0}, old_int, old_term;
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  pending = tmps;
  n_pending = (sig_atomic_t)nt;
  /* a signal the process was started ignoring (nohup, a background job)
   * stays ignored */
  sigaction(SIGINT, NULL, &old_int);
  sigaction(SIGTERM, NULL, &old_term);
  if (old_int.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, NULL);
  if (old_term.sa_handler != SIG_IGN) sigaction(SIGTERM, &sa, NULL);
  bool ok = true;
  const output *failed = NULL;
  int e = 0;
  for (guint i = 0; i < n && ok; i++) {
    const output *x = &g_array_index(o->items, output, i);
    if (strcmp(x->path, "-") && !write_one(x, x->tmp ? x->tmp : x->path, c)) {
      ok = false;
      failed = x;
      e = errno;
    }
  }
  for (guint i = 0; i < n && ok; i++) {
    const output *x = &g_array_index(o->items, output, i);
    if (x->tmp && g_rename(x->tmp, x->path) != 0) {
      ok = false;
      failed = x;
      e = errno;
    }
  }
  if (!ok)
    for (guint i = 0; i < nt; i++) g_unlink(tmps[i]);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  n_pending = 0;
  pending = NULL;
  if (!ok) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot write: %s (option '%s'); no output "
                "was written", failed->path, g_strerror(e), failed->option);
    return false;
  }
  for (guint i = 0; i < n; i++) {
    const output *x = &g_array_index(o->items, output, i);
    if (!strcmp(x->path, "-")) {
      x->fn(stdout, c);
      fflush(stdout);
    }
  }
  return true;
}
