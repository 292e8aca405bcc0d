/* exec_alloc: PyTorch's CUDA caching allocator, for reserved memory.
 *
 * torch.cuda.max_memory_reserved counts the segments the caching
 * allocator holds from the device, not the bytes of live tensors
 * (max_memory_allocated): blocks are rounded up, come from segments
 * larger than the request, stay cached when freed, and a freed block a
 * later, larger request cannot use leaves the segment reserved beside a
 * new one (fragmentation).  exec_mem replays the plan's allocations and
 * frees on one GPU, in simulated order, through one allocator of this
 * module; its largest reserved total is the GPU's peak reserved.
 *
 * The rules, from c10/cuda/CUDACachingAllocator.cpp (PyTorch 2.x, the
 * default configuration: no expandable segments, no max_split_size, no
 * roundup_power2_divisions; the allocator calibration/h200x2-mem ran):
 * - a request is rounded up to a multiple of kMinBlockSize, 512 B
 *   (round_size);
 * - requests of at most kSmallSize, 1 MiB, come from the small pool,
 *   whose segments are kSmallBuffer, 2 MiB; larger ones from the large
 *   pool, whose segments are kLargeBuffer, 20 MiB, for requests below
 *   kMinLargeAlloc, 10 MiB, else the request rounded up to kRoundLarge,
 *   2 MiB (get_allocation_size);
 * - a request takes the smallest cached free block of its pool that
 *   holds it, the lowest address among equals (get_free_block, the
 *   pool's set ordered by size then address), else a new segment
 *   (alloc_block: cudaMalloc);
 * - the block is split when what remains is at least kMinBlockSize
 *   (small pool) or more than kSmallSize (large pool) (should_split); the
 *   remainder stays a free block of the segment;
 * - a freed block stays cached and merges with its free neighbours in
 *   the same segment (free_block, try_merge_blocks);
 * - nothing is returned to the device during a pass (empty_cache is not
 *   called), unless a segment would take the reserved bytes past what
 *   the device has (exec_alloc_set_capacity): then the allocator waits
 *   for every pending block, caches them, gives every whole free segment
 *   back, and makes the segment (release_cached_blocks; where it still
 *   does not fit, PyTorch raises out-of-memory, which the allocated peak
 *   against the usable memory reports: `fits`).
 * One stream per GPU: blocks freed on one stream are reused by the next
 * request at once (the programs measured run their kernels on the
 * current stream), except a block another stream used: ProcessGroupNCCL
 * records a send's and a receive's tensor on its NCCL stream
 * (recordStream), and the allocator gives the freed block back to the
 * cache only once the events it recorded at the free have completed
 * (insert_events, process_events at each later malloc): the host, ahead
 * of the GPU, frees it and allocates again before the GPU has done the
 * transfer (calibration/h200x2-snap: `free_requested` without
 * `free_completed`; ring's backward at 64K tokens per GPU reserves 16.05
 * GiB with NCCL, 14.05 with local copies). exec_alloc_release_after and
 * exec_alloc_settle.
 * Whether the transfer is done when the host asks hinges on the host's
 * clock, and a new segment costs the host a cudaMalloc (alloc_block), which
 * the GPU does not wait for: the host falls behind by that much
 * (exec_alloc_segment_host_s).  A pass that starts from an empty cache, as
 * the calibration tool's memory part measures (and a job's first step),
 * makes every segment it holds: where the kernels are short the host's
 * cudaMallocs hold it back until the transfers are done, and their blocks
 * are reused (calibration/h200x2-snap-host: zigzag forward+backward at 6K
 * tokens per GPU on 2 H200 is issued in 3.5-3.8 ms of host time, 2.1 ms of
 * it before its 9 new segments, for 10.3 ms of GPU time). */
#ifndef TASP_EXEC_ALLOC_H
#define TASP_EXEC_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#define ALLOC_MIN_BLOCK 512u                     /* kMinBlockSize */
#define ALLOC_SMALL_SIZE (1u << 20)              /* kSmallSize */
#define ALLOC_SMALL_BUFFER (2u << 20)            /* kSmallBuffer */
#define ALLOC_LARGE_BUFFER (20u << 20)           /* kLargeBuffer */
#define ALLOC_MIN_LARGE_ALLOC (10u << 20)        /* kMinLargeAlloc */
#define ALLOC_ROUND_LARGE (2u << 20)             /* kRoundLarge */
/* Host time of the cudaMalloc behind a new segment (alloc_block), which
 * the GPU does not wait for: a fixed part and one per GiB.  The fixed
 * part is what each new segment after a pass's first adds to its host
 * time against the same pass with a warm cache (calibration/h200x2-
 * hostline, 2 H200, calibrate.py's ring, zigzag and TASP passes run from
 * an emptied cache: median 180-240 us a segment from 1.5K to 6K tokens per
 * GPU); the allocator's own traces, which time only the gap before each
 * `segment_alloc`, give 0.10-0.13 ms for 2-96 MiB (calibration/h200x2-
 * snap-host) and the part per GiB (0.15 ms at 192 MiB, 0.20 at 384 MiB;
 * calibration/h100x2-snap 0.2-0.45 ms at 0.5-1 GiB).
 * The first cudaMalloc after torch.cuda.empty_cache() waits for the
 * driver to finish releasing what was emptied (topology
 * comm.empty_cache_first): +290 / +380 / +660 us for the 48 / 96 / 192
 * MiB receive buffer that is a pass's first segment at 3K / 6K / 12K
 * tokens per GPU (h200x2-hostline), 0.167 ms + 2.63 ms per GiB (their
 * line); 0.3-1.1 ms in h200x2-snap-host's malloc-r*.jsonl. */
#define ALLOC_SEGMENT_HOST_S 200e-6
#define ALLOC_SEGMENT_HOST_S_PER_GIB 250e-6
#define ALLOC_FIRST_SEGMENT_HOST_S 167e-6
#define ALLOC_FIRST_SEGMENT_HOST_S_PER_GIB 2.63e-3

typedef struct exec_alloc exec_alloc;

exec_alloc *exec_alloc_new(void);
void exec_alloc_free(exec_alloc *a);
/* A tensor of `bytes` is allocated; returns its block (a handle for
 * exec_alloc_release; 0 for an empty tensor, which takes none). */
uint32_t exec_alloc_take(exec_alloc *a, uint64_t bytes);
/* Bytes of the segment the last exec_alloc_take made (cudaMalloc); 0 if it
 * took a cached block. */
uint64_t exec_alloc_last_segment(const exec_alloc *a);
/* Host time of the cudaMalloc of a new segment of `bytes`; after_empty:
 * the first since torch.cuda.empty_cache(). */
double exec_alloc_segment_host_s(uint64_t bytes, bool after_empty);
/* Block `block` is freed (cached). */
void exec_alloc_release(exec_alloc *a, uint32_t block);
/* Block `block` is freed while another stream's use of it ends only at
 * ready_s: cached by the first exec_alloc_settle at or after ready_s.
 * Returns from when a settle caches it: ready_s, or -INFINITY where the
 * host has already waited past ready_s (a synchronization: any settle
 * does); a caller that keeps the least of these (and exec_alloc_next_ready
 * after each settle or new segment) knows which settles do nothing. */
double exec_alloc_release_after(exec_alloc *a, uint32_t block, double ready_s);
/* A request is about to be made at `now_s` (process_events): pending
 * blocks whose use has ended by then are cached, earliest first. */
void exec_alloc_settle(exec_alloc *a, double now_s);
/* Bytes the device lets the allocator reserve (0: no bound). */
void exec_alloc_set_capacity(exec_alloc *a, uint64_t bytes);
/* When the first pending block is done (INFINITY: none is pending). */
double exec_alloc_next_ready(const exec_alloc *a);
/* Whether a request found the device full and synchronized (tests). */
bool exec_alloc_synced(const exec_alloc *a);
/* Bytes of the segments held now, and the most held so far. */
uint64_t exec_alloc_reserved(const exec_alloc *a);
uint64_t exec_alloc_peak_reserved(const exec_alloc *a);
/* Bytes of live blocks, rounded as allocated (torch.cuda.memory_allocated). */
uint64_t exec_alloc_allocated(const exec_alloc *a);
/* Block records held (live, cached and dead-awaiting-reuse): bounded by
 * the blocks there are at once (tests). */
uint32_t exec_alloc_records(const exec_alloc *a);

/* round_size and get_allocation_size, for tests. */
uint64_t exec_alloc_round(uint64_t bytes);
uint64_t exec_alloc_segment_size(uint64_t rounded);

#endif
