/* outputs: all-or-nothing writing of a run's output files, and stdout's
 * write errors. */
#include "outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A run has three outputs (--csv, --links, --trace); room for a few more. */
#define OUTPUTS_MAX 8
/* Bytes of the output's name kept in its temporary's: with ".tmp.XXXXXX"
 * well inside any file system's 255-byte name limit. */
#define TMP_PREFIX_MAX 128
/* How many symbolic links are followed, as the kernel's own limit
 * (Linux path_resolution(7): 40). */
#define LINKS_MAX 40

typedef struct {
  char *option, *path;
  char *target;  /* the file written: path with its links followed; NULL for "-" */
  char *tmp;     /* temporary name; NULL: written in place (stdout, a device) */
  FILE *f;       /* the open temporary, or a streamed output's file */
  bool streamed; /* written by the caller during the run (fn NULL) */
  output_fn fn;
} output;

struct outputs {
  GArray *items; /* output */
};

/* ---- temporaries a signal must remove ----
 * Read by the handler only; changed with every signal blocked. */
static const char *volatile pending[OUTPUTS_MAX];
static volatile sig_atomic_t n_pending;
static const int fatal_fixed[] = {
    SIGHUP,  SIGINT,  SIGQUIT, SIGABRT,   SIGPIPE, SIGALRM, SIGTERM, SIGUSR1,
    SIGUSR2, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,
#ifdef SIGPWR
    SIGPWR,
#endif
#ifdef SIGSTKFLT
    SIGSTKFLT,
#endif
};
/* The faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) are left
 * to the sanitizers and debuggers that report them. */
#define SIGS_MAX 128
static struct sigaction saved[SIGS_MAX];
static bool installed[SIGS_MAX];

static void on_signal(int sig) {
  for (sig_atomic_t i = 0; i < n_pending; i++) unlink(pending[i]);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  /* blocked until the handler returns, then ends the process with the
   * signal's own status */
  raise(sig);
}

static void handle(int sig) {
  if (sig <= 0 || sig >= SIGS_MAX || installed[sig]) return;
  struct sigaction old;
  if (sigaction(sig, NULL, &old) != 0) return;
  /* one ignored from the start (nohup, a background job) stays ignored;
   * one someone else handles is theirs */
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigfillset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0) return;
  saved[sig] = old;
  installed[sig] = true;
}

static void handlers_install(void) {
  for (size_t i = 0; i < G_N_ELEMENTS(fatal_fixed); i++) handle(fatal_fixed[i]);
  for (int s = SIGRTMIN; s <= SIGRTMAX; s++) handle(s);
}

static void handlers_restore(void) {
  for (int s = 1; s < SIGS_MAX; s++)
    if (installed[s]) {
      sigaction(s, &saved[s], NULL);
      installed[s] = false;
    }
}

static void block_all(sigset_t *old) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, old);
}

static void unblock(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* Called with signals blocked. */
static void pending_remove(const char *name) {
  for (sig_atomic_t i = 0; i < n_pending; i++)
    if (pending[i] == name) {
      pending[i] = pending[n_pending - 1];
      n_pending--;
      break;
    }
  if (n_pending == 0) handlers_restore();
}

/* ---- files and their identity ---- */

static void output_clear(gpointer p) {
  output *x = p;
  if (x->f && x->f != stdout) fclose(x->f);
  if (x->tmp) {
    sigset_t old;
    block_all(&old);
    g_unlink(x->tmp);
    pending_remove(x->tmp);
    unblock(&old);
  }
  g_free(x->option);
  g_free(x->path);
  g_free(x->target);
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

/* The file path writes: an existing regular file by its real name (every
 * link followed, so that the link stays and its target is replaced); a
 * device, FIFO or socket as named (/dev/stdout, written in place); a new
 * file by the name its dangling links lead to (a relative link is
 * relative to the link's directory).  NULL with errno where the links
 * cannot be followed (ELOOP past LINKS_MAX). */
static char *output_target(const char *path) {
  GStatBuf st;
  if (g_stat(path, &st) == 0) {
    if (!S_ISREG(st.st_mode)) return g_strdup(path);
    /* never the link's own name: renaming onto it would replace the link */
    char *real = realpath(path, NULL);
    if (!real) return NULL;
    char *out = g_strdup(real);
    free(real);
    return out;
  }
  char *cur = g_strdup(path);
  for (int i = 0; i <= LINKS_MAX; i++) {
    char *link = g_lstat(cur, &st) == 0 && S_ISLNK(st.st_mode) ? g_file_read_link(cur, NULL) : NULL;
    if (!link) return cur;
    char *next = link;
    if (!g_path_is_absolute(link)) {
      g_autofree char *dir = g_path_get_dirname(cur);
      next = g_build_filename(dir, link, NULL);
      g_free(link);
    }
    g_free(cur);
    cur = next;
  }
  g_free(cur);
  errno = ELOOP;
  return NULL;
}

typedef struct {
  bool known;
  dev_t dev;
  ino_t ino;
} file_id;

/* The file a target names (NULL: stdout's), where it exists. */
static file_id id_of(const char *target) {
  GStatBuf st;
  file_id id = {false, 0, 0};
  if (target ? g_stat(target, &st) == 0 : fstat(STDOUT_FILENO, &st) == 0)
    id = (file_id){true, st.st_dev, st.st_ino};
  return id;
}

static bool is_null_device(file_id id) {
  file_id n = id_of("/dev/null");
  return id.known && n.known && id.dev == n.dev && id.ino == n.ino;
}

/* One file under two names: the same canonical path, or the same device
 * and inode (links, "./x" and "x", /dev/stdout and "-").  /dev/null takes
 * any number of outputs. */
static bool same_file(const char *a, const char *b) {
  if (!a && !b) return true; /* at most one output to "-" */
  file_id ia = id_of(a), ib = id_of(b);
  if (is_null_device(ia) || is_null_device(ib)) return false;
  if (a && b) {
    g_autofree char *ca = g_canonicalize_filename(a, NULL);
    g_autofree char *cb = g_canonicalize_filename(b, NULL);
    if (!strcmp(ca, cb)) return true;
  }
  return ia.known && ib.known && ia.dev == ib.dev && ia.ino == ib.ino;
}

/* Whether target can be written, checked before any work: an existing
 * file (or device) writable, else a name the directory can take, in a
 * writable directory.  errno says why not. */
static bool writable(const char *target) {
  if (g_file_test(target, G_FILE_TEST_IS_DIR)) {
    errno = EISDIR;
    return false;
  }
  if (g_file_test(target, G_FILE_TEST_EXISTS)) return access(target, W_OK) == 0;
  g_autofree char *dir = g_path_get_dirname(target);
  g_autofree char *base = g_path_get_basename(target);
  long name_max = pathconf(dir, _PC_NAME_MAX);
  if (strlen(target) >= PATH_MAX || (name_max > 0 && strlen(base) > (size_t)name_max)) {
    errno = ENAMETOOLONG;
    return false;
  }
  return access(dir, W_OK | X_OK) == 0;
}

/* The temporary of x, created now next to its target, with the target's
 * permissions where it exists (else 0666 less the umask, as a new file
 * gets).  FALSE with errno set when it cannot be. */
static bool make_tmp(output *x) {
  g_autofree char *dir = g_path_get_dirname(x->target);
  g_autofree char *base = g_path_get_basename(x->target);
  size_t cut = MIN(strlen(base), (size_t)TMP_PREFIX_MAX);
  while (cut > 0 && ((unsigned char)base[cut] & 0xC0) == 0x80) cut--; /* whole UTF-8 characters */
  x->tmp = g_strdup_printf("%s/%.*s.tmp.XXXXXX", dir, (int)cut, base);
  sigset_t old;
  block_all(&old);
  if (n_pending >= OUTPUTS_MAX) {
    unblock(&old);
    g_clear_pointer(&x->tmp, g_free);
    errno = EMFILE;
    return false;
  }
  if (n_pending == 0) handlers_install();
  pending[n_pending] = x->tmp;
  int fd = g_mkstemp_full(x->tmp, O_RDWR | O_CLOEXEC, 0666);
  int e = errno;
  if (fd >= 0) n_pending++;
  else if (n_pending == 0) handlers_restore();
  unblock(&old);
  if (fd < 0) {
    g_clear_pointer(&x->tmp, g_free);
    errno = e;
    return false;
  }
  GStatBuf st;
  if (g_stat(x->target, &st) == 0) fchmod(fd, st.st_mode & 07777);
  x->f = fdopen(fd, "w");
  if (!x->f) {
    e = errno;
    close(fd);
    errno = e;
    return false;
  }
  return true;
}

bool outputs_add(outputs *o, const char *option, const char *path, output_fn fn,
                 GError **err) {
  if (!*path) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: option '%s': expected a file name or - (stdout), got an empty "
                "name", option);
    return false;
  }
  bool out = !strcmp(path, "-");
  g_autofree char *target = out ? NULL : output_target(path);
  if (!out && !target) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: option '%s': \"%s\" cannot be written (%s); expected a file or "
                "a link to one", option, path, g_strerror(errno));
    return false;
  }
  for (guint i = 0; i < o->items->len; i++) {
    const output *x = &g_array_index(o->items, output, i);
    if (same_file(x->target, target)) {
      g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                  "command line: option '%s': \"%s\" is also the output of '%s'%s; expected a "
                  "different file for each output", option, path, x->option,
                  !out && !x->target ? " (stdout)" : out && x->target ? " (it is stdout)" : "");
      return false;
    }
  }
  output x = {g_strdup(option), g_strdup(path), g_steal_pointer(&target), NULL, NULL, fn == NULL,
              fn};
  /* a regular file (or a new one) goes through a temporary; a device such
   * as /dev/null or a FIFO is written in place */
  bool ok = out || writable(x.target);
  if (ok && !out && (!g_file_test(x.target, G_FILE_TEST_EXISTS) ||
                     g_file_test(x.target, G_FILE_TEST_IS_REGULAR)))
    ok = make_tmp(&x);
  if (!ok) {
    int e = errno;
    g_autofree char *dir = g_path_get_dirname(x.target);
    g_set_error(err, TASP_ERROR, TASP_ERROR_INPUT,
                "command line: option '%s': \"%s\" cannot be written (%s); expected a file in "
                "an existing, writable directory (here %s)", option, path, g_strerror(e), dir);
    output_clear(&x);
    return false;
  }
  g_array_append_val(o->items, x);
  return true;
}

bool outputs_check_input(const outputs *o, const char *file, const char *what, GError **err) {
  if (!file) return true;
  for (guint i = 0; i < o->items->len; i++) {
    const output *x = &g_array_index(o->items, output, i);
    if (x->target && same_file(x->target, file)) {
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
    if (!g_array_index(o->items, output, i).target) return true;
  return false;
}

/* Set once a lost write to stdout has been reported, so that
 * outputs_close_stdout does not report it again. */
static bool stdout_reported;

/* Flushes stdout; FALSE when something written to it was lost, with
 * why in *why. */
static bool stdout_ok(const char **why) {
  errno = 0;
  bool ok = fflush(stdout) == 0 && !ferror(stdout);
  *why = errno ? g_strerror(errno) : "an earlier write failed";
  return ok;
}

FILE *outputs_stream(outputs *o, const char *option, GError **err) {
  for (guint i = 0; i < o->items->len; i++) {
    output *x = &g_array_index(o->items, output, i);
    if (strcmp(x->option, option) || !x->streamed) continue;
    if (!x->target) return stdout;
    if (!x->f) x->f = g_fopen(x->target, "w");
    if (!x->f)
      g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot write: %s (option '%s')",
                  x->path, g_strerror(errno), x->option);
    return x->f;
  }
  g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "no streamed output of option '%s'", option);
  return NULL;
}

/* Writes (unless streamed) and closes x's file; FALSE with errno. */
static bool write_file(output *x, const report_ctx *c) {
  if (!x->f) x->f = g_fopen(x->target, "w");
  if (!x->f) return false;
  if (!x->streamed) x->fn(x->f, c);
  errno = 0;
  bool ok = fflush(x->f) == 0 && !ferror(x->f);
  int e = errno ? errno : EIO;
  ok = fclose(x->f) == 0 && ok;
  if (!ok && errno) e = errno;
  x->f = NULL;
  errno = e;
  return ok;
}

bool outputs_write(outputs *o, const report_ctx *c, GError **err) {
  guint n = o->items->len;
  /* what went to stdout before (the table) is part of the run's output */
  const char *why;
  if (!stdout_ok(&why)) {
    /* the table, or an output streamed to "-" during the run */
    const char *option = NULL;
    for (guint i = 0; i < n; i++) {
      const output *x = &g_array_index(o->items, output, i);
      if (!x->target && x->streamed) option = x->option;
    }
    g_autofree char *what = option ? g_strdup_printf("option '%s'", option)
                                   : g_strdup("the table");
    stdout_reported = true;
    g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "stdout: cannot write: %s (%s); no output was "
                "written", why, what);
    return false;
  }
  bool ok = true;
  const output *failed = NULL;
  int e = 0;
  for (guint i = 0; i < n && ok; i++) {
    output *x = &g_array_index(o->items, output, i);
    if (x->target && !write_file(x, c)) {
      ok = false;
      failed = x;
      e = errno;
    }
  }
  /* all renamed or, a signal arriving meanwhile, all temporaries removed */
  sigset_t old;
  block_all(&old);
  for (guint i = 0; i < n && ok; i++) {
    output *x = &g_array_index(o->items, output, i);
    if (x->tmp && g_rename(x->tmp, x->target) != 0) {
      ok = false;
      failed = x;
      e = errno;
    }
  }
  for (guint i = 0; i < n; i++) {
    output *x = &g_array_index(o->items, output, i);
    if (!x->tmp) continue;
    if (!ok) g_unlink(x->tmp);
    pending_remove(x->tmp);
    g_clear_pointer(&x->tmp, g_free);
  }
  unblock(&old);
  if (!ok) {
    g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "%s: cannot write: %s (option '%s'); no output "
                "was written", failed->path, g_strerror(e), failed->option);
    return false;
  }
  for (guint i = 0; i < n; i++) {
    const output *x = &g_array_index(o->items, output, i);
    if (x->target) continue;
    if (!x->streamed) x->fn(stdout, c);
    if (!stdout_ok(&why)) {
      stdout_reported = true;
      g_set_error(err, TASP_ERROR, TASP_ERROR_IO, "stdout: cannot write: %s (option '%s')", why,
                  x->option);
      return false;
    }
  }
  return true;
}

int outputs_fail(const GError *err, int status) {
  fprintf(stderr, "tasp-sim: error: %s\n", err->message);
  return status;
}

void outputs_close_stdout(void) {
  const char *why;
  bool ok = stdout_ok(&why);
  /* a stdout closed from the start (>&-) with nothing written to it is
   * not an error; anything else fclose reports is */
  if (fclose(stdout) != 0 && errno != EBADF && ok) {
    ok = false;
    why = g_strerror(errno);
  }
  if (ok) return;
  if (!stdout_reported) fprintf(stderr, "tasp-sim: error: stdout: cannot write: %s\n", why);
  _exit(1);
}
