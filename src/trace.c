/* trace: the timeline as Chrome trace JSON (opens in Perfetto and
 * chrome://tracing).  One process per sweep point; per GPU a compute track
 * and a communication track; one counter track per channel that carried
 * traffic, with its rate in GB/s. */
#include <string.h>

#include "plan.h"
#include "report.h"
#include "sizes.h"

/* "attn fwd", "merge", "p2p", "all_to_all grads", ... */
static const char *span_name(const exec_span *s, char buf[32]) {
  const char *what = s->comm ? plan_api_name(s->kind) : plan_op_name(s->kind);
  const char *dir = s->comm ? (s->backward ? " grads" : "")
                            : s->kind == OP_ATTN || s->kind >= OP_LIN_INTRA
                                  ? (s->backward ? " bwd" : " fwd") : "";
  g_snprintf(buf, 32, "%s%s", what, dir);
  return buf;
}

void report_trace(FILE *f, const report_ctx *c) {
  const topology *t = c->s->topo;
  fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
  bool first = true;
#define SEP() do { if (!first) fputs(",\n", f); first = false; } while (0)
  for (guint p = 0; p < c->results->len; p++) {
    const sim_result *r = c->results->pdata[p];
    g_autofree char *seq = size_format(r->pt.w.seq_len);
    SEP();
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":"
            "\"%s seq %s sp %u %s %s\"}}", p, r->pt.sched->name, seq, r->pt.w.gpus,
            r->pt.w.causal ? "causal" : "full", pass_name(r->pt.w.pass));
    for (uint32_t g = 0; g < r->pt.w.gpus; g++) {
      for (int k = 0; k < 2; k++) {
        SEP();
        fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":"
                "{\"name\":\"GPU %u %s\"}}", p, 2 * g + k, g, k ? "comm" : "compute");
      }
    }
    if (!r->r->spans) continue;
    for (guint i = 0; i < r->r->spans->len; i++) {
      const exec_span *s = &g_array_index(r->r->spans, exec_span, i);
      char name[32];
      SEP();
      fprintf(f, "{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
              "\"args\":{\"step\":%u}}", span_name(s, name), p, 2 * s->gpu + s->comm, s->t0_s * 1e6,
              (s->t1_s - s->t0_s) * 1e6, s->step);
    }
    for (guint i = 0; i < r->r->rates->len; i++) {
      const exec_rate *x = &g_array_index(r->r->rates, exec_rate, i);
      SEP();
      fprintf(f, "{\"ph\":\"C\",\"name\":\"%s\",\"pid\":%u,\"ts\":%.3f,\"args\":{\"GB/s\":%.3f}}",
              topo_chan(t, x->chan)->name, p, x->t_s * 1e6, x->rate_Bps * 1e-9);
    }
  }
#undef SEP
  fputs("\n]}\n", f);
}
