/* topo_dump: the resolved topology as --dump-topology prints it: nodes
 * and where they come from, channels, caps, and every cost, with those the
 * file left out marked as defaults and their sources listed. */
#include <string.h>

#include "topology.h"

/* " (default)" after a value the file did not give, else "". */
static const char *dflt(const topology *t, const char *field) {
  for (guint i = 0; i < t->defaults->len; i++)
    if (!strcmp(((const topo_default *)t->defaults->pdata[i])->field, field)) return " (default)";
  return "";
}

static void dump_nodes(FILE *f, const topology *t) {
  uint32_t m = t->gpus_per_node, nodes = t->n_gpus / m;
  static const char *const how[] = {
      [TOPO_NODES_ONE] = "the generator's",
      [TOPO_NODES_GENERATOR] = "the generator's",
      [TOPO_NODES_DECLARED] = "declared by gpus_per_node",
      [TOPO_NODES_INFERRED] = ("read off the routes: GPUs joined by routes that cross no "
                               "network channel, kind nic, ib, roce, ...")};
  if (nodes == 1) fprintf(f, "nodes: one of %u GPUs (%s)\n", t->n_gpus, how[t->nodes_how]);
  else
    fprintf(f, "nodes: %u of %u GPUs, GPUs %u-%u, %u-%u%s (%s)\n", nodes, m, 0, m - 1, m,
            2 * m - 1, nodes > 2 ? ", ..." : "", how[t->nodes_how]);
  if (t->nics_per_node)
    fprintf(f, "nics: %u per node, each shared by %u consecutive GPUs (GPU i of a node sends "
            "and receives through NIC i / %u, as NCCL does with PXN off)\n", t->nics_per_node,
            m / t->nics_per_node, m / t->nics_per_node);
}

void topo_dump(FILE *f, const topology *t) {
  fprintf(f, "topology %s (%s): %u GPUs, %u per node\n", t->name, t->file ? t->file : "-",
          t->n_gpus, t->gpus_per_node);
  if (t->overrides) fprintf(f, "  with --set %s\n", t->overrides);
  if (t->description && *t->description)
    fprintf(f, t->overrides ? "  the file's description, before --set: %s\n" : "  %s\n",
            t->description);
  dump_nodes(f, t);
  fputs("channels by kind:\n", f);
  g_autoptr(GPtrArray) kinds = g_ptr_array_new();
  for (guint c = 0; c < t->channels->len; c++) {
    const char *k = topo_chan(t, c)->kind;
    bool seen = false;
    for (guint i = 0; i < kinds->len && !seen; i++) seen = !strcmp(kinds->pdata[i], k);
    if (!seen) g_ptr_array_add(kinds, (gpointer)k);
  }
  for (guint i = 0; i < kinds->len; i++) {
    unsigned n = 0;
    double cap_lo = 0, cap_hi = 0, lat_lo = 0, lat_hi = 0;
    for (guint c = 0; c < t->channels->len; c++) {
      const topo_channel *ch = topo_chan(t, c);
      if (strcmp(ch->kind, kinds->pdata[i])) continue;
      if (!n++ || ch->cap_Bps < cap_lo) cap_lo = ch->cap_Bps;
      if (n == 1 || ch->cap_Bps > cap_hi) cap_hi = ch->cap_Bps;
      if (n == 1 || ch->latency_s < lat_lo) lat_lo = ch->latency_s;
      if (n == 1 || ch->latency_s > lat_hi) lat_hi = ch->latency_s;
    }
    fprintf(f, "  %-16s %5u channels, %g", (char *)kinds->pdata[i], n, cap_lo * 1e-9);
    if (cap_hi > cap_lo) fprintf(f, "-%g", cap_hi * 1e-9);
    fprintf(f, " GB/s each, latency %g", lat_lo * 1e6);
    if (lat_hi > lat_lo) fprintf(f, "-%g", lat_hi * 1e6);
    fputs(" us\n", f);
  }
  /* per-flow caps: the distinct values over all routes */
  double caps[4];
  unsigned nc = 0;
  bool more = false;
  size_t pairs = (size_t)t->n_gpus * t->n_gpus;
  for (size_t p = 0; p < pairs; p++) {
    if (p / t->n_gpus == p % t->n_gpus) continue;
    bool seen = false;
    double cap = topo_route_cap(t, (uint32_t)(p / t->n_gpus), (uint32_t)(p % t->n_gpus));
    for (unsigned i = 0; i < nc; i++) seen |= caps[i] == cap;
    if (seen) continue;
    if (nc < 4) caps[nc++] = cap;
    else more = true;
  }
  fputs("per-flow caps on routes (GB/s, 0 = none):", f);
  for (unsigned i = 0; i < nc; i++) fprintf(f, " %g", caps[i] * 1e-9);
  fputs(more ? " ...\n" : "\n", f);
  fprintf(f, "comm: launch_us %g, p2p_launch_us %g, p2p_msg_us %g, host_us %g%s, "
          "p2p_host_us %g, p2p_op_host_us %g, kernel_blocks_comm %s\n", t->launch_s * 1e6,
          t->p2p_launch_s * 1e6, t->p2p_msg_s * 1e6, t->comm_host_s * 1e6,
          dflt(t, "comm.host_us"), t->p2p_host_s * 1e6, t->p2p_op_host_s * 1e6,
          t->kernel_blocks_comm ? "true" : "false");
  if (t->flow_rate.n) {
    fputs("comm: flow_rate_by_size (a point-to-point flow's rate, GB/s, by its MiB):", f);
    for (uint32_t i = 0; i < t->flow_rate.n; i++)
      fprintf(f, " %g:%g", t->flow_rate.bytes[i] / 1048576.0, t->flow_rate.rate_Bps[i] * 1e-9);
    fputc('\n', f);
  }
  if (t->memory_gib > 0)
    fprintf(f, "memory: gpu_memory_gib %g, gpu_memory_headroom_gib %g (usable %g GiB per GPU)\n",
            t->memory_gib, t->memory_headroom_gib, topo_usable_gib(t));
  else
    fputs("memory: not given (gpu_memory_gib): fit not judged\n", f);
  const compute_model *m = &t->compute;
  if (m->table)
    fprintf(f, "compute: table of %u full and %u causal kernels, table_scale %g, aspect_table "
            "%u kernels, bwd_ratio %g (where no backward is measured)\n", m->points[0]->len,
            m->points[1]->len, m->table_scale, m->aspect_points[0]->len + m->aspect_points[1]->len,
            m->bwd_ratio);
  else
    fprintf(f, "compute: roofline, peak_tflops %g, efficiency %g, launch_us %g%s, bwd_ratio %g\n",
            m->peak_flops * 1e-12, m->efficiency, m->launch_s * 1e6,
            dflt(t, "compute.launch_us"), m->bwd_ratio);
  if (m->mech.set)
    fprintf(f, "  kernel_model (beyond the table): %g SMs, lone CTA share %g, fixed %g/%g us "
            "(fwd/bwd), sustained slowdown %g after %g us, per-pair times at %u head dims\n",
            m->mech.sms, m->mech.lone_share, m->mech.fixed_s[0] * 1e6, m->mech.fixed_s[1] * 1e6,
            m->mech.slowdown, m->mech.after_s * 1e6, m->mech.n_dims);
  fprintf(f, "  host_us %g%s per kernel (backward %g%s); linear host_us intra %g/%g, causal intra "
          "%g/%g, state %g/%g, apply %g/%g (fwd/bwd)\n", m->host_s * 1e6,
          dflt(t, "compute.host_us"), m->bwd_host_s * 1e6, dflt(t, "compute.bwd_host_us"),
          m->lin_host_s[0][0] * 1e6, m->lin_host_s[0][1] * 1e6, m->lin_host_s[1][0] * 1e6,
          m->lin_host_s[1][1] * 1e6, m->lin_host_s[2][0] * 1e6, m->lin_host_s[2][1] * 1e6,
          m->lin_host_s[3][0] * 1e6, m->lin_host_s[3][1] * 1e6);
  fprintf(f, "  merge: merge_fixed_us %g%s, merge_ns_per_kelem %g%s, merge_host_us %g%s\n",
          m->merge_fixed_s * 1e6, dflt(t, "compute.merge_fixed_us"), m->merge_s_per_elem * 1e12,
          dflt(t, "compute.merge_ns_per_kelem"), m->merge_host_s * 1e6,
          dflt(t, "compute.merge_host_us"));
  fprintf(f, "  element-wise GB/s (fwd/bwd; compute.elementwise_gbps, elementwise_bwd_gbps, "
             "else copy_GBps %g):", m->copy_Bps * 1e-9);
  for (int k = 0; k < EW_KINDS; k++)
    fprintf(f, " %s %g/%g", compute_elemwise_name((compute_elemwise)k),
            compute_elemwise_Bps(m, (compute_elemwise)k, false) * 1e-9,
            compute_elemwise_Bps(m, (compute_elemwise)k, true) * 1e-9);
  fputc('\n', f);
  if (t->defaults->len) {
    fputs("defaults: costs the file leaves out, as measured (see README, Topology files)\n", f);
    for (guint i = 0; i < t->defaults->len; i++) {
      const topo_default *d = t->defaults->pdata[i];
      fprintf(f, "  %s %g: %s\n", d->field, d->value, d->source);
    }
  }
}
