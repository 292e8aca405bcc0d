/* topo_defaults: the fixed costs a topology file may leave out, and what
 * they cost then.
 *
 * A hand-written file of a few lines (a generator, comm.launch_us, a
 * roofline) used to price every host issue, kernel launch and merge it did
 * not name at 0: a ring step of a 32K-token pass then cost its transfer
 * and its FLOPs alone, several times faster than any measured pass.  Each
 * absent cost is now the measured figure below, written into the file's
 * object before it is read (so the costs derived from it, p2p_host_us from
 * comm.host_us, linear_host_us from compute.host_us, follow it as they
 * follow a given value), listed by --dump-topology as a default and named
 * once in the table's notes.  A file that gives a cost keeps it (0 too).
 *
 * The figures are PyTorch 2.11 / NCCL 2.28 on H100 and H200 SXM, this
 * project's own measurements (calibration/).  Host costs come from the
 * faster of the measured hosts (calibration/h200x2-host/README.md says
 * another lent host took about 2x as long): a lower bound, not a guess. */
#include <string.h>

#include "topology.h"

/* comm.launch_us stays required: no file is without one today, and the
 * device cost of a group differs too much between fabrics (0 to 114 us in
 * the bundled files) for one figure to stand in for it. */
static const topo_default comm_host = {
    "comm.host_us", 54.3,
    "calibration/h200x2-host/host-n2.jsonl, op p2p_batch_wait with 2 ops (a ring step's "
    "send and receive): 54.3 us of host time to issue and wait one batch_isend_irecv"};
static const topo_default compute_host = {
    "compute.host_us", 33.5,
    "calibration/h200x2-host/host-n2.jsonl, op flash_fwd: host time of one flash-attention "
    "call, 25.5-47.6 us, median 33.5 us"};
/* only with compute.host_us absent too: a file that gives host_us has
 * always had it stand for the backward call as well */
static const topo_default compute_bwd_host = {
    "compute.bwd_host_us", 53.0,
    "calibration/h200x2-host/host-n2.jsonl, op flash_bwd: host time of one backward call, "
    "47.9-69.2 us, median 53.0 us"};
static const topo_default compute_launch = {
    "compute.launch_us", 51.0,
    "calibration/h100x1-tool/compute-n1.jsonl: a line through the three shortest forward "
    "kernels (1K-4K tokens, 32 heads, head dim 128, full mask) has a fixed part of 51 us "
    "(52-71 us at head dim 64 and causal)"};
static const topo_default merge_fixed = {
    "compute.merge_fixed_us", 24.0,
    "calibration/h100x1-tool/overhead-n1.jsonl, op merge (768 to 48K rows, 32 heads, head "
    "dim 128): least-squares line of its GPU time, 24 us fixed"};
static const topo_default merge_elem = {
    "compute.merge_ns_per_kelem", 15.0,
    "the same line: 14.9 ns per thousand output elements"};
static const topo_default merge_host = {
    "compute.merge_host_us", 90.0,
    "calibration/h200x2-host/host-n2.jsonl, op merge: host time of the log-sum-exp merge "
    "(7 small ops), 68-109 us, median 90 us"};

static void fill(json_object *obj, const topo_default *d, GPtrArray *used) {
  const char *key = strchr(d->field, '.') + 1;
  if (json_object_object_get_ex(obj, key, NULL)) return;
  json_object_object_add(obj, key, json_object_new_double(d->value));
  g_ptr_array_add(used, (gpointer)d);
}

void topo_fill_defaults(json_object *comm, json_object *compute, GPtrArray *used) {
  if (json_object_is_type(comm, json_type_object)) fill(comm, &comm_host, used);
  if (!json_object_is_type(compute, json_type_object)) return;
  bool no_host = !json_object_object_get_ex(compute, "host_us", NULL);
  fill(compute, &compute_host, used);
  if (no_host) fill(compute, &compute_bwd_host, used);
  /* a table's kernel times include their launch; a roofline's do not */
  json_object *model;
  if (json_object_object_get_ex(compute, "model", &model) &&
      json_object_is_type(model, json_type_string) &&
      !strcmp(json_object_get_string(model), "roofline"))
    fill(compute, &compute_launch, used);
  fill(compute, &merge_fixed, used);
  fill(compute, &merge_elem, used);
  fill(compute, &merge_host, used);
}

char *topo_defaults_note(const topology *t) {
  if (!t->defaults || !t->defaults->len) return NULL;
  GString *s = g_string_new(NULL);
  g_string_printf(s, "topology %s leaves out ", t->name);
  for (guint i = 0; i < t->defaults->len; i++) {
    const topo_default *d = t->defaults->pdata[i];
    g_string_append_printf(s, "%s%s", i ? ", " : "", d->field);
  }
  g_string_append(s, ": priced by measured H100/H200 defaults (--dump-topology lists them "
                     "with their sources)");
  return g_string_free(s, FALSE);
}
