/* trace: the timeline as Chrome trace JSON (opens in Perfetto and
 * chrome://tracing).  One process per sweep point; per GPU a compute track
 * and a communication track; one counter track per channel that carried
 * traffic, with its rate in GB/s; per GPU a track of the transfers it sends
 * (bytes, source, destination), each with a flow arrow to its receiver. */
#include <math.h>
#include <string.h>

#include "trace.h"

#include "layer.h"
#include "plan.h"
#include "report.h"
#include "sizes.h"

struct trace_writer {
  FILE *f;
  bool first;     /* no event written yet */
  guint pid;      /* the next point's process id */
  unsigned flow;  /* flow ids are unique in the whole trace */
};

/* "attn fwd", "merge", "p2p", "all_to_all grads", ... */
static const char *span_name(const exec_span *s, char buf[32]) {
  const char *what = s->comm ? plan_api_name(s->kind) : plan_op_name(s->kind);
  const char *dir = s->comm ? (s->backward ? " grads" : "")
                            : s->kind == OP_ATTN || s->kind >= OP_LIN_INTRA
                                  ? (s->backward ? " bwd" : " fwd") : "";
  g_snprintf(buf, 32, "%s%s", what, dir);
  return buf;
}

/* A string as a JSON string literal (quotes, backslashes and control
 * characters escaped by json-c). */
static void json_str(FILE *f, const char *s) {
  json_object *o = json_object_new_string(s);
  fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), f);
  json_object_put(o);
}

/* Microseconds with 3 decimals, from whole nanoseconds: a span's start
 * and end are rounded, not its start and length, so spans that touch in
 * the simulation touch in the trace and never overlap by rounding. */
static long long ns(double t_s) { return llround(t_s * 1e9); }
static void us(FILE *f, long long v) { fprintf(f, "%lld.%03lld", v / 1000, v % 1000); }

trace_writer *trace_writer_new(FILE *f) {
  trace_writer *w = g_new0(trace_writer, 1);
  w->f = f;
  w->first = true;
  fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
  return w;
}

void trace_writer_end(trace_writer *w) {
  fputs("\n]}\n", w->f);
  g_free(w);
}

void trace_writer_point(sim_result *r, void *writer) {
  trace_writer *w = writer;
  if (!r || !r->r || r->pt.hidden) return; /* a point that did not run has no timeline */
  FILE *f = w->f;
  guint p = w->pid++;
  const topology *t = r->topo;
#define SEP() do { if (!w->first) fputs(",\n", f); w->first = false; } while (0)
  g_autofree char *seq = size_format(r->pt.w.seq_len);
  SEP();
  g_autofree char *pname = g_strdup_printf("%s seq %s sp %u %s %s", r->pt.sched->name, seq,
                                           r->pt.w.gpus, r->pt.w.causal ? "causal" : "full",
                                           pass_name(r->pt.w.pass));
  fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":", p);
  json_str(f, pname);
  fputs("}}", f);
  /* every GPU of the job: its compute and communication tracks 2g and
   * 2g + 1, its transfers after all of those (the job's GPUs, TP x SP x DP
   * at the layer and model scopes, not the SP degree: tracks of the
   * transfers and of other GPUs would share ids) */
  uint32_t n = layer_job_gpus(&r->pt.w);
  for (uint32_t g = 0; g < n; g++) {
    for (int k = 0; k < 2; k++) {
      SEP();
      fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":"
              "{\"name\":\"GPU %u %s\"}}", p, 2 * g + k, g, k ? "comm" : "compute");
    }
    SEP();
    fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":"
            "{\"name\":\"GPU %u transfers\"}}", p, 2 * n + g, g);
  }
  if (!r->r->spans) return;
  for (guint i = 0; i < r->r->spans->len; i++) {
    const exec_span *s = &g_array_index(r->r->spans, exec_span, i);
    char name[32];
    SEP();
    long long a = ns(s->t0_s), b = ns(s->t1_s);
    fprintf(f, "{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", span_name(s, name), p,
            2 * s->gpu + s->comm);
    us(f, a);
    fputs(",\"dur\":", f);
    us(f, b - a);
    fprintf(f, ",\"args\":{\"step\":%u}}", s->step);
  }
  /* each transfer: a slice on a per-GPU send track carrying its bytes,
   * source and destination, and a flow arrow to the receiver's track */
  for (guint i = 0; i < r->r->xfers->len; i++) {
    const exec_xfer *x = &g_array_index(r->r->xfers, exec_xfer, i);
    long long a = ns(x->t0_s), b = ns(x->t1_s);
    uint32_t tid_send = 2 * n + x->src, tid_recv = 2 * n + x->dst;
    SEP();
    fprintf(f, "{\"ph\":\"X\",\"name\":\"send %u->%u\",\"pid\":%u,\"tid\":%u,\"ts\":", x->src,
            x->dst, p, tid_send);
    us(f, a);
    fputs(",\"dur\":", f);
    us(f, b - a);
    fprintf(f, ",\"args\":{\"bytes\":%.0f,\"src\":%u,\"dst\":%u,\"step\":%u}}", x->bytes,
            x->src, x->dst, x->step);
    SEP();
    fprintf(f, "{\"ph\":\"s\",\"name\":\"transfer\",\"cat\":\"xfer\",\"id\":%u,\"pid\":%u,"
            "\"tid\":%u,\"ts\":", w->flow, p, tid_send);
    us(f, a);
    fputs("}", f);
    SEP();
    fprintf(f, "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"transfer\",\"cat\":\"xfer\",\"id\":%u,"
            "\"pid\":%u,\"tid\":%u,\"ts\":", w->flow++, p, tid_recv);
    us(f, b);
    fputs("}", f);
  }
  for (guint i = 0; i < r->r->rates->len; i++) {
    const exec_rate *x = &g_array_index(r->r->rates, exec_rate, i);
    SEP();
    fputs("{\"ph\":\"C\",\"name\":", f);
    json_str(f, topo_chan(t, x->chan)->name);
    fprintf(f, ",\"pid\":%u,\"ts\":", p);
    us(f, ns(x->t_s));
    fprintf(f, ",\"args\":{\"GB/s\":%.3f}}", x->rate_Bps * 1e-9);
  }
  /* live bytes of each GPU (exec_mem): a counter track per GPU */
  for (guint i = 0; r->r->mem && i < r->r->mem->len; i++) {
    const exec_mem_sample *x = &g_array_index(r->r->mem, exec_mem_sample, i);
    SEP();
    fprintf(f, "{\"ph\":\"C\",\"name\":\"GPU %u memory\",\"pid\":%u,\"ts\":", x->gpu, p);
    us(f, ns(x->t_s));
    fprintf(f, ",\"args\":{\"GiB\":%.4f}}", x->bytes / 1073741824.0);
  }
#undef SEP
  /* written: the point's timeline is not needed again */
  g_array_free(r->r->spans, TRUE);
  g_array_free(r->r->rates, TRUE);
  g_array_free(r->r->xfers, TRUE);
  if (r->r->mem) g_array_free(r->r->mem, TRUE);
  r->r->spans = r->r->rates = r->r->xfers = r->r->mem = NULL;
}

void report_trace(FILE *f, const report_ctx *c) {
  trace_writer *w = trace_writer_new(f);
  for (guint p = 0; p < c->results->len; p++) trace_writer_point(c->results->pdata[p], w);
  trace_writer_end(w);
}
