/* exec_mem: live bytes per GPU through a replay (exec.h's memory fields),
 * and the caching allocator's reserved bytes for the same allocations
 * (exec_alloc.h).  exec calls exec_mem_start and exec_mem_end as tasks
 * start and end; the rules (allocated when the first reference is taken,
 * freed when the last is dropped, unless kept; references taken at a
 * task's start, through it, or at its end) are plan_buf.h's. */
#ifndef TASP_EXEC_MEM_H
#define TASP_EXEC_MEM_H

#include "exec.h"

typedef struct exec_mem exec_mem;

/* Whether group t's i-th predecessor, an overlap edge (plan_overlap),
 * holds it back: it waits for that kernel in this replay. */
typedef bool (*exec_held_fn)(const plan_task *t, uint32_t i, const void *ctx);

/* Tracking of p's buffers into r (its gpu_peak_bytes made here); the
 * layer's inputs are live from time 0.  trace: record exec_mem_sample.
 * start_s: per task, when it started (the replay's; read at its end).
 * GPUs whose replays coincide (exec_mem_class.h: a lockstep plan's) are
 * replayed once and r's per-GPU figures copied to each; `per_gpu` (or
 * trace, or a plan without lockstep tasks): every GPU replayed itself.
 * held_back (NULL: none is): a group held back by a kernel makes its
 * allocations at that kernel's start (the host issued it before).
 * host_issue_s (NULL: none): per task, when its host issues it; then a
 * block a send/receive used is cached again only at the first request
 * its host makes after the transfer is done, the host's clock behind
 * host_issue_s by the cudaMallocs of the segments made so far
 * (exec_alloc.h), and no earlier than its launch queue lets it
 * (exec_queue.h).  capacity_bytes: what each GPU's allocator may reserve
 * before it must synchronize and give cached segments back (0: no bound;
 * exec_alloc_set_capacity).  empty_cache_first: the pass starts after
 * torch.cuda.empty_cache() (its first cudaMalloc on a GPU costs its host
 * more: exec_alloc_segment_host_s). */
exec_mem *exec_mem_new(const plan *p, exec_result *r, bool trace, exec_held_fn held_back,
                       const void *ctx, const double *host_issue_s, const double *start_s,
                       bool per_gpu, uint64_t capacity_bytes, bool empty_cache_first);
void exec_mem_start(exec_mem *m, uint32_t task, double now_s);
void exec_mem_end(exec_mem *m, uint32_t task, double now_s);
/* The run is over: fills r's peak fields and frees m. */
void exec_mem_finish(exec_mem *m);

/* For exec_result_add_layers: per GPU, the larger peak of acc and r
 * (layers run one after another and free what they allocate); trace
 * samples shifted by shown_s as exec_result_add_layers' spans. */
void exec_mem_add_layers(exec_result *acc, const exec_result *r, double shown_s);
void exec_mem_result_free(exec_result *r);

#endif
