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
 *   called; no allocation fails here, so no cached segment is released
 *   to retry one).
 * One stream per GPU: blocks freed on one stream are reused by the next
 * request at once (the programs measured run their kernels on the
 * current stream; NCCL's use of a tensor is recorded on it). */
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

typedef struct exec_alloc exec_alloc;

exec_alloc *exec_alloc_new(void);
void exec_alloc_free(exec_alloc *a);
/* A tensor of `bytes` is allocated; returns its block (a handle for
 * exec_alloc_release; 0 for an empty tensor, which takes none). */
uint32_t exec_alloc_take(exec_alloc *a, uint64_t bytes);
/* Block `block` is freed (cached). */
void exec_alloc_release(exec_alloc *a, uint32_t block);
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
