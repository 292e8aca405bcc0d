/* exec_queue: how far a host may run ahead of its GPU.
 *
 * exec_host lets each host issue its tasks without waiting for its GPU
 * (PyTorch's stream semantics), but a CUDA stream holds only so many
 * launches: past EXEC_LAUNCH_QUEUE outstanding ones, the host's next launch
 * blocks until the oldest has ended.  Over a pass the host is a few
 * kernels ahead and this never binds; over a whole step of many layers and
 * micro-batches it is what keeps the host near its GPU, and the caching
 * allocator's recordStream blocks (exec_alloc.h), cached again only at a
 * request the host makes after their transfer is done, are reused once the
 * host is held back (without it a 32-layer step at 16 micro-batches was
 * replayed with every receive buffer pending to the end: 751 GiB reserved).
 * exec_mem takes the host's clock at a request as no earlier than the end
 * of the launch EXEC_LAUNCH_QUEUE before it on the GPU.  Only the timing of
 * memory moves: a host held back by its queue is still ahead of its GPU,
 * which does not wait for it. */
#ifndef TASP_EXEC_QUEUE_H
#define TASP_EXEC_QUEUE_H

#include "plan.h"

/* Launches a stream holds before the host blocks: calibration/h200x1-
 * launch-queue (one H200, CUDA 13.0, driver 580): 1,021 launches queued
 * behind a running kernel, the next one waits for it to end; each stream
 * its own.  A compute task is counted as one launch (most are one kernel;
 * those of several let the host run that much less far ahead). */
#define EXEC_LAUNCH_QUEUE 1022u

typedef struct exec_queue exec_queue;

/* The compute tasks of each GPU of p in the host's order (key: the
 * task's place in it); NULL where no GPU has more than EXEC_LAUNCH_QUEUE,
 * so the bound never binds. */
exec_queue *exec_queue_new(const plan *p, uint64_t (*key)(const plan *, uint32_t));
void exec_queue_free(exec_queue *q);
/* Task `task` ended at now_s (compute tasks are kept; others ignored). */
void exec_queue_ended(exec_queue *q, uint32_t task, double now_s);
/* The earliest time the host of GPU g can have issued `task` (on g), now
 * being when the GPU starts it: the end of the launch EXEC_LAUNCH_QUEUE
 * before it on g, now_s where that has not ended yet, 0 where there is
 * none. */
double exec_queue_host_floor(exec_queue *q, uint32_t g, uint32_t task, double now_s);

#endif
