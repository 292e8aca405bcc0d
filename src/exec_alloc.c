/* exec_alloc: the caching allocator's segments and blocks (exec_alloc.h).
 *
 * Blocks are records in one array (index 0 unused); a segment's blocks
 * are a doubly linked list in address order; each pool's free blocks are
 * a sorted array of (size, address), the order of the allocator's
 * BlockPool set, so a best fit is one binary search (lower bound).  A
 * GPU's pool holds few free blocks at once (tens), so inserting and
 * removing by moving the array's tail beats a balanced tree's nodes,
 * which were two fifths of a 2,048-GPU ring's run.
 * Segments get increasing addresses in the order they are made.  A block
 * merged into its neighbour is dead: no handle names it any more, and its
 * record is reused for the next block made (a list through `next`), so
 * the records are as many as the blocks there are at once, not as many as
 * were ever made (a 1,024-GPU causal ring makes thousands per GPU).
 * A block freed while a stream still uses it (exec_alloc_release_after:
 * recordStream) is pending: neither live nor in its pool until settled. */
#include "exec_alloc.h"

#include <math.h>

#include <glib.h>
#include <string.h>

#define NONE UINT32_MAX

/* 32 bytes, two to a cache line: a pending block's ready time is its
 * pending entry's alone (pending_ent), not kept here too. */
typedef struct {
  uint64_t addr, size;
  uint32_t prev, next; /* neighbours in the segment, NONE at its ends */
  bool small, live, dead;
  bool pending;        /* freed, not back in the cache: a stream's use is not done
                          (when: its pending_ent's ready_s) */
} block;
G_STATIC_ASSERT(sizeof(block) == 32);

/* A free block in its pool's sorted array. */
typedef struct {
  uint64_t size, addr;
  uint32_t id;
} free_ent;

typedef struct {
  free_ent *v;
  uint32_t n, cap;
} free_set;

typedef struct {
  double ready_s;
  uint32_t id;
} pending_ent;

/* The arrays are the struct's own (pointer, length, room), not GArrays:
 * a replay of 1,024 GPUs comes back to a GPU's allocator after the
 * others', its lines cold, and an array behind a header was one line
 * more to fetch at each request and free (the allocator model was 40% of
 * a causal 1,024-GPU ring forward). */
struct exec_alloc {
  block *blocks;       /* [0] unused (0: an empty tensor's handle) */
  uint32_t n_blocks, cap_blocks;
  uint32_t dead;       /* first dead record, NONE: none */
  uint32_t head, tail, cap_pending; /* a power of two, or 0 */
  pending_ent *pending; /* pending blocks, a ring: positions [head, tail)
                           (mod cap_pending), sorted by when they are ready,
                           then by id (pending_push) */
  free_set free[2];    /* per pool (0 large, 1 small): free blocks by (size, addr) */
  uint64_t next_addr, reserved, peak, allocated;
  uint64_t last_segment; /* exec_alloc_last_segment */
  uint64_t capacity;     /* bytes cudaMalloc can reserve; 0: no bound */
  double synced_s;       /* the host waited for every pending block until then */
  bool synced;           /* a request found the device full (exec_alloc_synced) */
};

static block *blk(const exec_alloc *a, uint32_t id) {
  return &a->blocks[id];
}

/* The first entry of f not before (size, addr). */
static uint32_t lower_bound(const free_set *f, uint64_t size, uint64_t addr) {
  uint32_t lo = 0, hi = f->n;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    const free_ent *e = &f->v[mid];
    if (e->size < size || (e->size == size && e->addr < addr)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void free_insert(exec_alloc *a, uint32_t id) {
  const block *b = blk(a, id);
  free_set *f = &a->free[b->small];
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 16;
    f->v = g_renew(free_ent, f->v, f->cap);
  }
  uint32_t i = lower_bound(f, b->size, b->addr);
  memmove(&f->v[i + 1], &f->v[i], (f->n - i) * sizeof *f->v);
  f->v[i] = (free_ent){b->size, b->addr, id};
  f->n++;
}

/* Where block id is in its pool's free set (its size and address as when
 * it entered: callers look before they resize). */
static uint32_t free_index(const exec_alloc *a, uint32_t id) {
  const block *b = blk(a, id);
  const free_set *f = &a->free[b->small];
  uint32_t i = lower_bound(f, b->size, b->addr);
  g_assert(i < f->n && f->v[i].id == id);
  return i;
}

/* Entry i leaves pool `small`'s free set. */
static void free_remove_at(exec_alloc *a, bool small, uint32_t i) {
  free_set *f = &a->free[small];
  memmove(&f->v[i], &f->v[i + 1], (f->n - i - 1) * sizeof *f->v);
  f->n--;
}

/* Block id leaves its pool's free set. */
static void free_remove(exec_alloc *a, uint32_t id) {
  free_remove_at(a, blk(a, id)->small, free_index(a, id));
}

/* Entry i of block id's pool leaves and block id (resized since, same
 * pool) enters: the set is as free_remove_at then free_insert leave it,
 * with one search and only the entries between the two places moved (a
 * best fit split, a block merged into its free neighbour: the allocator
 * model's free-set work was a fifth of a causal 1,024-GPU replay). */
static void free_replace(exec_alloc *a, uint32_t i, uint32_t id) {
  const block *b = blk(a, id);
  free_set *f = &a->free[b->small];
  uint32_t j = lower_bound(f, b->size, b->addr); /* entry i still counted */
  if (j > i) {
    j--; /* entry i, before it, leaves */
    memmove(&f->v[i], &f->v[i + 1], (j - i) * sizeof *f->v);
  } else {
    memmove(&f->v[j + 1], &f->v[j], (i - j) * sizeof *f->v);
  }
  f->v[j] = (free_ent){b->size, b->addr, id};
}

exec_alloc *exec_alloc_new(void) {
  exec_alloc *a = g_new0(exec_alloc, 1);
  a->cap_blocks = 16;
  a->blocks = g_new0(block, a->cap_blocks);
  a->n_blocks = 1;
  a->dead = NONE;
  return a;
}

void exec_alloc_free(exec_alloc *a) {
  if (!a) return;
  for (int i = 0; i < 2; i++) g_free(a->free[i].v);
  g_free(a->pending);
  g_free(a->blocks);
  g_free(a);
}

uint64_t exec_alloc_round(uint64_t bytes) {
  if (bytes < ALLOC_MIN_BLOCK) return ALLOC_MIN_BLOCK;
  return (bytes + ALLOC_MIN_BLOCK - 1) / ALLOC_MIN_BLOCK * ALLOC_MIN_BLOCK;
}

uint64_t exec_alloc_segment_size(uint64_t rounded) {
  if (rounded <= ALLOC_SMALL_SIZE) return ALLOC_SMALL_BUFFER;
  if (rounded < ALLOC_MIN_LARGE_ALLOC) return ALLOC_LARGE_BUFFER;
  return (rounded + ALLOC_ROUND_LARGE - 1) / ALLOC_ROUND_LARGE * ALLOC_ROUND_LARGE;
}

static uint32_t add_block(exec_alloc *a, block b) {
  uint32_t id = a->dead;
  if (id != NONE) {
    a->dead = blk(a, id)->next;
    *blk(a, id) = b;
    return id;
  }
  if (a->n_blocks == a->cap_blocks) {
    a->cap_blocks *= 2;
    a->blocks = g_renew(block, a->blocks, a->cap_blocks);
  }
  a->blocks[a->n_blocks] = b;
  return a->n_blocks++;
}

/* The smallest free block of the pool holding `size`, lowest address
 * among equals, and its place in the pool's free set (*at); NONE if none. */
static uint32_t best_fit(exec_alloc *a, bool small, uint64_t size, uint32_t *at) {
  const free_set *f = &a->free[small];
  uint32_t i = lower_bound(f, size, 0);
  *at = i;
  return i < f->n ? f->v[i].id : NONE;
}

static void release_cached(exec_alloc *a);

uint32_t exec_alloc_take(exec_alloc *a, uint64_t bytes) {
  if (bytes == 0) return 0; /* an empty tensor has no storage (no block) */
  uint64_t size = exec_alloc_round(bytes);
  bool small = size <= ALLOC_SMALL_SIZE;
  uint32_t at;
  uint32_t id = best_fit(a, small, size, &at);
  a->last_segment = 0;
  bool listed = id != NONE; /* entry `at` of the free set until replaced */
  if (id == NONE) { /* a new segment */
    uint64_t seg = exec_alloc_segment_size(size);
    if (a->capacity && a->reserved + seg > a->capacity) release_cached(a);
    id = add_block(a, (block){a->next_addr, seg, NONE, NONE, small, false, false, false});
    a->next_addr += seg;
    a->reserved += seg;
    a->last_segment = seg;
    if (a->reserved > a->peak) a->peak = a->reserved;
  }
  block *b = blk(a, id);
  uint64_t rest = b->size - size;
  if (small ? rest >= ALLOC_MIN_BLOCK : rest > ALLOC_SMALL_SIZE) {
    block r = {b->addr + size, rest, id, b->next, small, false, false, false};
    uint32_t rid = add_block(a, r);
    b = blk(a, id); /* the array may have moved */
    if (r.next != NONE) blk(a, r.next)->prev = rid;
    b->next = rid;
    b->size = size;
    /* the remainder takes the taken block's place in the free set */
    if (listed) free_replace(a, at, rid);
    else free_insert(a, rid);
  } else if (listed) {
    free_remove_at(a, small, at);
  }
  b->live = true;
  a->allocated += b->size;
  return id;
}

/* Block `from` (free, not in the tree) is absorbed into its free
 * neighbour `into`, which precedes it. */
static void merge(exec_alloc *a, uint32_t into, uint32_t from) {
  block *p = blk(a, into), *q = blk(a, from);
  p->size += q->size;
  p->next = q->next;
  if (q->next != NONE) blk(a, q->next)->prev = into;
  q->dead = true;
  q->next = a->dead;
  a->dead = from;
}

/* Whether block id is a free block of the cache (in its pool's set). */
static bool cached(const exec_alloc *a, uint32_t id) {
  const block *b = blk(a, id);
  return !b->live && !b->pending;
}

/* Block id (neither live nor pending) goes back to the cache, merged with
 * its free neighbours (free_block). */
static void cache_block(exec_alloc *a, uint32_t id) {
  block *b = blk(a, id);
  uint32_t next = b->next, prev = b->prev;
  if (next != NONE && cached(a, next)) {
    free_remove(a, next);
    merge(a, id, next);
  }
  if (prev != NONE && cached(a, prev)) {
    /* the merged block takes prev's place in the free set */
    uint32_t at = free_index(a, prev);
    merge(a, prev, id);
    free_replace(a, at, prev);
    return;
  }
  free_insert(a, id);
}

void exec_alloc_release(exec_alloc *a, uint32_t id) {
  if (id == 0) return; /* an empty tensor's */
  block *b = blk(a, id);
  g_assert(id > 0 && id < a->n_blocks && b->live && !b->dead);
  b->live = false;
  a->allocated -= b->size;
  cache_block(a, id);
}

/* Pending blocks in a ring sorted by (ready_s, id), the key kept in the
 * entry, taken from the front.  Blocks are freed nearly in the order
 * their transfers end (a 1,024-GPU causal ring forward: 595 of a million
 * out of order, each behind at most 4), so an insertion from the back
 * moves almost nothing, and a settle reads the entries in order: the
 * binary heap it replaces, a line per level of a sift, and the settles
 * popping it were 7% of that replay's time. */
static bool ready_before(const pending_ent *x, const pending_ent *y) {
  return x->ready_s != y->ready_s ? x->ready_s < y->ready_s : x->id < y->id;
}

static void pending_push(exec_alloc *a, pending_ent e) {
  uint32_t mask = a->cap_pending - 1;
  if (a->tail - a->head == a->cap_pending) { /* full: twice the room, in order */
    uint32_t n = a->cap_pending, cap = n ? 2 * n : 16;
    pending_ent *v = g_new(pending_ent, cap);
    for (uint32_t i = 0; i < n; i++) v[i] = a->pending[(a->head + i) & mask];
    g_free(a->pending);
    a->pending = v;
    a->cap_pending = cap;
    a->head = 0;
    a->tail = n;
    mask = cap - 1;
  }
  /* from the back, moving up the few entries ready after it */
  uint32_t j = a->tail;
  for (; j != a->head && ready_before(&e, &a->pending[(j - 1) & mask]); j--)
    a->pending[j & mask] = a->pending[(j - 1) & mask];
  a->pending[j & mask] = e;
  a->tail++;
}

double exec_alloc_release_after(exec_alloc *a, uint32_t id, double ready_s) {
  if (id == 0) return INFINITY; /* nothing pending */
  block *b = blk(a, id);
  g_assert(id > 0 && id < a->n_blocks && b->live && !b->dead);
  b->live = false;
  a->allocated -= b->size;
  b->pending = true;
  pending_push(a, (pending_ent){ready_s, id});
  return ready_s <= a->synced_s ? -INFINITY : ready_s; /* exec_alloc_settle's test */
}

/* The pending block ready first, taken off. */
static pending_ent pending_pop(exec_alloc *a) {
  return a->pending[a->head++ & (a->cap_pending - 1)];
}

/* The pending block ready first, or NULL. */
static const pending_ent *pending_first(const exec_alloc *a) {
  return a->head != a->tail ? &a->pending[a->head & (a->cap_pending - 1)] : NULL;
}

void exec_alloc_settle(exec_alloc *a, double now_s) {
  /* a host that synchronized is no earlier than what it waited for */
  if (now_s < a->synced_s) now_s = a->synced_s;
  /* in the order they became ready (then by id), as a sort would give */
  while (pending_first(a) && pending_first(a)->ready_s <= now_s) {
    uint32_t id = pending_pop(a).id;
    blk(a, id)->pending = false;
    cache_block(a, id);
  }
}

/* cudaMalloc found the device full (malloc: alloc_block failed, and
 * release_available_cached_blocks does nothing without max_split_size):
 * release_cached_blocks waits for every pending block's events
 * (synchronize_and_free_events: the host stops until the last is done),
 * caches them, and gives every free segment that is whole back to the
 * device (release_blocks: neither split part of a segment); alloc_block is
 * then tried again (c10/cuda/CUDACachingAllocator.cpp). */
static void release_cached(exec_alloc *a) {
  a->synced = true;
  while (pending_first(a)) {
    pending_ent e = pending_pop(a);
    uint32_t id = e.id;
    if (e.ready_s > a->synced_s) a->synced_s = e.ready_s;
    blk(a, id)->pending = false;
    cache_block(a, id);
  }
  for (int pool = 0; pool < 2; pool++) {
    free_set *f = &a->free[pool];
    uint32_t kept = 0;
    for (uint32_t i = 0; i < f->n; i++) {
      uint32_t id = f->v[i].id;
      block *b = blk(a, id);
      if (b->prev != NONE || b->next != NONE) {
        f->v[kept++] = f->v[i];
        continue;
      }
      a->reserved -= b->size;
      b->dead = true;
      b->next = a->dead;
      a->dead = id;
    }
    f->n = kept;
  }
}

void exec_alloc_set_capacity(exec_alloc *a, uint64_t bytes) { a->capacity = bytes; }
double exec_alloc_next_ready(const exec_alloc *a) {
  return pending_first(a) ? pending_first(a)->ready_s : INFINITY;
}
bool exec_alloc_synced(const exec_alloc *a) { return a->synced; }

uint64_t exec_alloc_last_segment(const exec_alloc *a) { return a->last_segment; }

double exec_alloc_segment_host_s(uint64_t bytes, bool after_empty) {
  double gib = (double)bytes / (double)(1u << 30);
  if (after_empty) return ALLOC_FIRST_SEGMENT_HOST_S + ALLOC_FIRST_SEGMENT_HOST_S_PER_GIB * gib;
  return ALLOC_SEGMENT_HOST_S + ALLOC_SEGMENT_HOST_S_PER_GIB * gib;
}

uint64_t exec_alloc_reserved(const exec_alloc *a) { return a->reserved; }
uint64_t exec_alloc_peak_reserved(const exec_alloc *a) { return a->peak; }
uint64_t exec_alloc_allocated(const exec_alloc *a) { return a->allocated; }
uint32_t exec_alloc_records(const exec_alloc *a) { return a->n_blocks - 1; }
