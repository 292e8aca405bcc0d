/* exec_mem: live bytes of a plan's buffers per GPU over simulated time.
 *
 * Each buffer has a copy per GPU it lives on (one; every GPU for
 * PLAN_ALL), an instance here.  An instance's references are the uses of
 * tasks touching its GPU (a use naming one GPU touches that GPU's only);
 * it is allocated when the first of them is taken (inputs: at time 0) and
 * freed when the last is dropped, as PyTorch frees a tensor when its last
 * reference goes (and as torch.cuda.max_memory_allocated counts it: bytes
 * of live tensors).  A use holds its reference through its task, or only
 * at its start (dropped once the start's allocations are made), or only
 * at its end (taken after the task's other references are dropped):
 * plan_buf_when.  Kept instances are never freed.  The same allocations
 * and frees, in the same order, go through a model of the caching
 * allocator per GPU (exec_alloc.h), whose segments give the reserved
 * peak (torch.cuda.max_memory_reserved).
 * A group that the hardware holds back until kernels it runs beside have
 * ended (exec_dep_kept: kernel_blocks_comm) was still issued by the host
 * before them, and what it allocates (a receive buffer: ring_flash_attn's
 * `next_k, next_v = send_recv_kv(k, v)`) was made then: its writes at its
 * start are also taken at the start of each such kernel, on its GPU (a
 * write use added there; exec_mem_new's `held_back`).
 * With recordStream (comm.record_stream) a block a send or receive used is
 * cached again only at a request its host makes after the transfer's GPU
 * end, except a transfer the host issued before its GPU's first kernel
 * (memory-bound copies aside: they hold the GPU for microseconds), which
 * ran at once and is done when its block is freed
 * (calibration/h100x2-snap).  The host's clock there is its issue time
 * (exec_host) plus the cudaMallocs of the segments its GPU's allocator
 * made so far (host_lag: exec_alloc_segment_host_s), which the GPU does
 * not wait for; a transfer its hosts issued that late is done no earlier
 * than that plus its time (xfer_done): where the host is the slower of
 * the two, the GPU runs it late too.
 * Events are numbered so that the instances live at a GPU's peak are found
 * after the run without a snapshot at every new peak.
 * GPUs whose replays coincide (exec_mem_class.h: a full-mask lockstep
 * plan's are one class) are replayed once: a buffer of every GPU has an
 * instance per class, each class one allocator, and at the end every GPU
 * gets its class's figures; errors count once per GPU an instance stands
 * for.  A lockstep ring was n copies of every buffer replayed one by one,
 * n^2 allocator operations (a 2,048-GPU full-mask ring forward: 16.3 CPU
 * s, 0.6 s replayed by class). */
#include "exec_mem.h"

#include "exec_alloc.h"
#include "exec_mem_class.h"
#include "exec_queue.h"
#include "plan_buf.h"

#include <math.h>

#include <string.h>

enum { INST_NONE, INST_LIVE, INST_FREED };

/* A start held for its instant (exec_mem.starts) with its place in the
 * program's order (issue_key), taken as it starts: sorting by a key looked
 * up in the plan at every comparison read tasks all over it. */
typedef struct {
  uint64_t key;
  uint32_t task;
} held_start;

/* exec_mem.flags: a task's start is held in `starts` */
#define TASK_HELD 0x80u

/* exec_mem.flags' bit for a use that writes or reads at `when`
 * (plan_buf_when: 3 values) */
static unsigned phase_bit(bool write, unsigned when) { return 1u << (write * 3 + when); }

/* One instance's state, in one record of 24 bytes: the replay touches
 * several of its fields at each use, and a record per instance is one
 * cache line where an array per field was one each (a 1,024-GPU causal
 * ring forward has 3.7 M instances, replayed in an order no cache holds;
 * zigzag's 6.3 M).  The small fields share a word with the count of
 * references (a plan has fewer than INST_REFS_MAX uses). */
#define INST_REFS_BITS 28
#define INST_REFS_MAX ((1u << INST_REFS_BITS) - 1)
typedef struct {
  double sent_s;      /* when a send/receive using it ended, or -1 */
  uint32_t alloc_seq, free_seq; /* events of its allocation and free (m->seq) */
  uint32_t block;     /* its block in its GPU's allocator */
  uint32_t refs : INST_REFS_BITS; /* uses not yet ended */
  uint32_t state : 2;   /* INST_* */
  uint32_t written : 1; /* a writer has ended (inputs: true) */
  uint32_t writing : 1; /* a write of the task whose uses on_task is taking
                           now (listed in exec_mem.writing; a task may read
                           what it writes: an accumulator); a writer that
                           started in an earlier call has ended by its
                           task's or any later reader's next call, or the
                           read is an error either way */
} inst_rec;
G_STATIC_ASSERT(sizeof(inst_rec) == 24);

/* A GPU's (a class's) state, in one record: each request and free of
 * a GPU reads or writes most of it, and the replay comes to a GPU after
 * the others' (an array per field was a cold line each). */
typedef struct {
  double live, peak;       /* bytes allocated now, and the most so far */
  double host_lag;         /* host time its cudaMallocs took so far (exec_alloc_
                              segment_host_s): its host is that much behind host_s */
  uint32_t peak_seq;       /* the event at which its peak was reached */
  exec_alloc *alloc;       /* the caching allocator's segments (exec_alloc.h) */
  /* No later than the first time a settle does something: the least of
   * exec_alloc_release_after's answers since exec_alloc_next_ready was
   * last read (after a settle, or a new segment, whose synchronization
   * may have settled everything); INFINITY: nothing pending.  A request
   * that finds nothing to settle (most: the host runs ahead of the
   * transfers) then does not fetch the allocator's pending ring, a cold
   * line of one GPU's among 1,024 (settles were an eighth of a causal
   * 1,024-GPU ring forward).  Too early only costs a settle that does
   * nothing. */
  double next_ready;
} gpu_rec;

/* exec_alloc_settle(gr->alloc, t), skipped where it would do nothing. */
static void settle(gpu_rec *gr, double t) {
  if (gr->next_ready > t) return;
  exec_alloc_settle(gr->alloc, t);
  gr->next_ready = exec_alloc_next_ready(gr->alloc);
}

/* What the replay reads of a buffer at each of its uses: its first
 * instance, and the class of its GPU (PLAN_ALL: a buffer of every GPU).
 * The plan's record (plan_buf: bytes, name, keep) is read only where an
 * instance is allocated or freed: a use's reads of it and of an array of
 * first instances were a cold line each (a model step's replay at 1,024
 * GPUs: 64% of each_inst's time on those two loads). */
typedef struct {
  uint32_t inst, cls;
} buf_rec;

struct exec_mem {
  const plan *p;
  exec_result *r;
  bool trace;
  uint32_t n;              /* replays: classes of GPUs (exec_mem_class.h); every
                              "per GPU" array below is per class, and a GPU index
                              in this file's replay is a class's */
  uint32_t n_gpus;
  exec_mem_classes *cls;
  uint32_t *pat_off, *pat_cls; /* per pattern: its GPUs' classes, each once */
  buf_rec *bufs;           /* per buffer, and one past the last (.inst: the
                              instances' count) */
  inst_rec *inst;          /* per instance */
  const double *host_s;    /* per task: its host issue time; NULL: no recordStream */
  bool empty_cache_first;  /* topology comm.empty_cache_first */
  double *xfer_issue_s;    /* per task: a transfer's issue by its hosts, lag included */
  const double *start_s;   /* per task: when it started (GPU time; exec_graph's) */
  uint64_t *first_kernel; /* per GPU: the program-order place of its first compute
                              task other than a copy (issue_key; recordStream: a
                              transfer the host issues before it runs at once) */
  exec_queue *queue;       /* how far each host may be ahead of its GPU (NULL: any) */
  gpu_rec *g;              /* per GPU */
  uint32_t *use_off, *use_of; /* uses by task (CSR): indices into the plan's uses,
                                 then (from plan_buf_use_count) into `moved`;
                                 use_of NULL: the uses are in task order already,
                                 the i-th is use i (no index of 4 bytes a use) */
  GArray *moved;           /* plan_buf_use: a held-back group's writes, taken at
                              the kernels it waits for */
  uint32_t n_plan_uses;
  double *phase_peak;      /* per plan_phase and GPU, where the plan has phases; else NULL */
  int task_phase;          /* with phase_peak, while on_task takes a task's uses with
                              start_inst: its phase if a compute task, else -1 (looked
                              up once a task, not at each instance it starts) */
  uint8_t *gpu_phase;      /* per GPU, with phase_peak: the phase of the last compute
                              task that started using a buffer on it, the one its
                              allocations count in */
  uint32_t seq;            /* events so far (two per instance at most, and the
                              instances fit in memory: below 2^32) */
  uint32_t *gpus, *stamp;  /* scratch: a task's GPUs */
  uint32_t *writing;       /* the instances with inst_rec.writing set, cleared as
                              on_task returns: n_writing of them, room for
                              cap_writing (an array of the file's own: a push
                              per write use) */
  uint32_t n_writing, cap_writing;
  uint32_t stamp_now;
  /* Tasks started at the instant being replayed, not applied yet: at one
   * simulated instant every end of a task started earlier is applied
   * before the starts, and the starts in program order, so the peak does not
   * hang on the order in which simultaneous events happen to be replayed
   * (a lockstep plan and its expansion; test_mem t_lockstep_expand).  A
   * task that ends at the instant it started has its start applied first. */
  GArray *starts;          /* held_start */
  uint8_t *flags;          /* per task: TASK_HELD, and a phase_bit per kind of
                              use it has (on_task skips the calls that find none
                              of theirs: most tasks have no late uses) */
  double starts_at;
};

/* The classes of the GPUs task t touches, into m->gpus, each once;
 * returns how many. */
static uint32_t task_gpus(exec_mem *m, const plan_task *t) {
  m->stamp_now++; /* m->stamp marks the task's classes (each_inst) */
  const uint32_t *of = m->cls->of;
  if (t->kind == TASK_COMPUTE) {
    if (t->gpu != PLAN_ALL) {
      m->gpus[0] = of[t->gpu];
      m->stamp[of[t->gpu]] = m->stamp_now;
      return 1;
    }
    for (uint32_t g = 0; g < m->n; g++) m->gpus[g] = g, m->stamp[g] = m->stamp_now;
    return m->n;
  }
  const plan_pattern_info *pi = plan_task_pattern(m->p, t);
  if (pi) {
    uint32_t id = (uint32_t)(pi - &g_array_index(m->p->patterns, plan_pattern_info, 0));
    uint32_t k = m->pat_off[id + 1] - m->pat_off[id];
    memcpy(m->gpus, &m->pat_cls[m->pat_off[id]], k * sizeof(uint32_t));
    for (uint32_t i = 0; i < k; i++) m->stamp[m->gpus[i]] = m->stamp_now;
    return k;
  }
  uint32_t k = 0;
  for (uint32_t i = 0; i < t->n_xfer; i++) {
    const plan_xfer *x = &g_array_index(m->p->xfers, plan_xfer, t->xfer_off + i);
    uint32_t g2[2] = {of[x->src], of[x->dst]};
    for (int j = 0; j < 2; j++)
      if (m->stamp[g2[j]] != m->stamp_now) {
        m->stamp[g2[j]] = m->stamp_now;
        m->gpus[k++] = g2[j];
      }
  }
  return k;
}

/* Each pattern's GPUs' classes, each once, in the order of their first
 * GPUs in it (task_gpus). */
static void pattern_classes(exec_mem *m) {
  const plan *p = m->p;
  uint32_t np = p->patterns ? p->patterns->len : 0, total = 0;
  m->pat_off = g_new0(uint32_t, np + 1);
  for (uint32_t id = 0; id < np; id++)
    total += g_array_index(p->patterns, plan_pattern_info, id).n_gpus;
  m->pat_cls = g_new(uint32_t, total ? total : 1);
  uint32_t k = 0;
  for (uint32_t id = 0; id < np; id++) {
    const plan_pattern_info *pi = &g_array_index(p->patterns, plan_pattern_info, id);
    m->stamp_now++;
    for (uint32_t i = 0; i < pi->n_gpus; i++) {
      uint32_t c = m->cls->of[g_array_index(p->pattern_gpus, uint32_t, pi->gpu_off + i)];
      if (m->stamp[c] != m->stamp_now) m->stamp[c] = m->stamp_now, m->pat_cls[k++] = c;
    }
    m->pat_off[id + 1] = k;
  }
}

/* The class an instance of buffer b lives in (i: its index among b's). */
static uint32_t inst_gpu(const exec_mem *m, uint32_t b, uint32_t i) {
  return m->bufs[b].cls == PLAN_ALL ? i : m->bufs[b].cls;
}

/* How many GPUs' instances an instance of buffer b in class c stands for
 * (a buffer of one GPU: that GPU's, and its class has no other: the
 * class hash holds its uses). */
static uint32_t inst_weight(const exec_mem *m, uint32_t b, uint32_t c) {
  return m->bufs[b].cls == PLAN_ALL ? m->cls->size[c] : 1;
}

/* Calls fn on each instance use u touches (task GPUs in m->gpus[0..k)). */
typedef void (*inst_fn)(exec_mem *m, const plan_buf_use *u, uint32_t inst, uint32_t gpu,
                        double now_s);

static const plan_buf_use *use_at(const exec_mem *m, uint32_t i) {
  return i < m->n_plan_uses ? plan_buf_use_at(m->p, i)
                            : &g_array_index(m->moved, plan_buf_use, i - m->n_plan_uses);
}

static void each_inst(exec_mem *m, const plan_buf_use *u, uint32_t k, inst_fn fn, double now) {
  buf_rec b = m->bufs[u->buf];
  if (b.cls != PLAN_ALL) {
    fn(m, u, b.inst, b.cls, now);
    return;
  }
  if (u->gpu != PLAN_ALL) {
    /* one GPU's copy, if the task touches that GPU (not a scan of the
     * task's GPUs: a pattern group has a use per GPU); its class's, by the
     * use naming the class's first GPU (the others' uses are alike, in
     * the same places: exec_mem_class.h) */
    uint32_t c = m->cls->of[u->gpu];
    if (m->cls->rep[c] == u->gpu && m->stamp[c] == m->stamp_now)
      fn(m, u, b.inst + c, c, now);
    return;
  }
  for (uint32_t i = 0; i < k; i++) fn(m, u, b.inst + m->gpus[i], m->gpus[i], now);
}

static void sample(exec_mem *m, uint32_t g, double now) {
  if (!m->trace) return;
  exec_mem_sample s = {g, now, m->g[g].live};
  g_array_append_val(m->r->mem, s);
}

/* task: whose request it is (UINT32_MAX: an input, made before the
 * pass); the host makes it at the task's issue, its cudaMallocs so far
 * late, but no earlier than its launch queue lets it (exec_queue.h) */
static void alloc(exec_mem *m, uint32_t inst, uint32_t g, double bytes, double now,
                  uint32_t task) {
  inst_rec *in = &m->inst[inst];
  gpu_rec *gr = &m->g[g];
  in->state = INST_LIVE;
  bool hosted = m->host_s && task != UINT32_MAX;
  if (hosted) {
    double host = m->host_s[task] + gr->host_lag;
    settle(gr, host);
    /* the queue's floor is at most now: asked only where a block it
     * could settle is pending (next_ready is exact here: lowered only by
     * blocks pending, read back after each settle) */
    if (m->queue && gr->next_ready <= now) {
      double floor = exec_queue_host_floor(m->queue, m->cls->rep[g], task, now);
      if (floor > host) settle(gr, floor);
    }
  }
  in->block = exec_alloc_take(gr->alloc, (uint64_t)ceil(bytes));
  /* a new segment is a cudaMalloc on the host's time (exec_alloc.h) */
  uint64_t seg = exec_alloc_last_segment(gr->alloc);
  if (seg) gr->next_ready = exec_alloc_next_ready(gr->alloc); /* a device found full
                                                                  synchronizes, settling
                                                                  every pending block */
  /* the pass's first segment on g (none has cost its host yet), after
   * empty_cache() */
  if (hosted && seg)
    gr->host_lag += exec_alloc_segment_host_s(seg, m->empty_cache_first && gr->host_lag == 0);
  g_assert(m->seq < UINT32_MAX - 1);
  in->alloc_seq = ++m->seq;
  gr->live += bytes;
  if (gr->live > gr->peak) {
    gr->peak = gr->live;
    gr->peak_seq = m->seq;
  }
  /* by where the GPU is, not by the phase of the task asking: a host
   * running ahead issues a later layer's transfers, and allocates their
   * receive buffers, while its GPU is still in an earlier phase (h200x4,
   * Linear-Llama3-1B, TP 2 x SP 2, ZeRO 2: at 7 layers the first layer's
   * backward KV receive buffers came at the forward's peak, and the
   * backward's end, extended from that, made the step 18.98 GiB for
   * 10.19 replayed whole) */
  if (m->phase_peak) {
    double *at = &m->phase_peak[(size_t)m->gpu_phase[g] * m->n + g];
    if (gr->live > *at) *at = gr->live;
  }
  sample(m, g, now);
}

static void count_ref(exec_mem *m, const plan_buf_use *u, uint32_t inst, uint32_t g,
                      double now) {
  (void)u; (void)g; (void)now;
  g_assert(m->inst[inst].refs < INST_REFS_MAX);
  m->inst[inst].refs++;
}

/* The writes at its start of each group held back by kernels it overlaps
 * (held_back(task, i, ctx): its i-th predecessor, an overlap edge, is
 * kept), as uses of those kernels, into m->moved. */
static void move_held_writes(exec_mem *m, exec_held_fn held_back, const void *ctx) {
  const plan *p = m->p;
  m->moved = g_array_new(FALSE, FALSE, sizeof(plan_buf_use));
  uint32_t nu = plan_buf_use_count(p);
  if (!held_back) return;
  for (uint32_t i = 0; i < nu; i++) {
    const plan_buf_use *u = plan_buf_use_at(p, i);
    /* the use's own fields first: a task record per use, read for reads
     * too, was a pass over the plan's tasks for each of its uses */
    if (!u->write || u->when == PLAN_BUF_LATE) continue;
    const plan_task *t = plan_task_at(p, u->task);
    if (t->kind != TASK_COMM || !t->n_overlap) continue;
    for (uint32_t d = t->n_dep - t->n_overlap; d < t->n_dep; d++) {
      if (!held_back(t, d, ctx)) continue;
      plan_buf_use v = *u;
      v.task = p->deps[t->dep_off + d];
      v.when = PLAN_BUF_DURING;
      g_array_append_val(m->moved, v);
    }
  }
}

/* A task's place in the program's (host's) order: a group the host issues
 * at an earlier task's place (plan_issue_at) comes just before that task:
 * (place, in place after early), ties by id. */
static uint64_t issue_key(const plan *p, uint32_t task) {
  uint32_t h = plan_task_at(p, task)->host_at;
  return (uint64_t)(h == PLAN_IN_PLACE ? task : h) << 1 | (h == PLAN_IN_PLACE);
}

/* Per GPU, the program-order place of its first compute task other than a
 * copy (UINT64_MAX: none), for recordStream (m->first_kernel). */
static uint64_t *first_kernels(const plan *p) {
  uint64_t *fk = g_new(uint64_t, p->n_gpus), all = UINT64_MAX;
  for (uint32_t g = 0; g < p->n_gpus; g++) fk[g] = UINT64_MAX;
  for (guint i = 0; i < p->tasks->len; i++) {
    const plan_task *t = plan_task_at(p, i);
    /* a copy (OP_COPY: layout changes, torch.cat) is memory-bound and
     * short: USP's ring transfer after its Ulysses all-to-all and
     * layout copies runs as early (calibration/h100x2-snap: USP u = 1's
     * first ring receive buffer `free_completed` 1 ms after its free;
     * calibration/h100x4-sp USP 2 x 2 forward+backward +15% -> 9.1%) */
    if (t->kind != TASK_COMPUTE || t->op.kind == OP_COPY) continue;
    uint64_t k = issue_key(p, i);
    uint64_t *at = t->gpu == PLAN_ALL ? &all : &fk[t->gpu]; /* lockstep: every GPU's */
    if (k < *at) *at = k;
  }
  for (uint32_t g = 0; g < p->n_gpus; g++)
    if (all < fk[g]) fk[g] = all;
  return fk;
}

static const plan_buf_use *use_cb(const void *m, uint32_t i) { return use_at(m, i); }

/* The i-th use in task order. */
static const plan_buf_use *task_use(const exec_mem *m, uint32_t i) {
  return use_at(m, m->use_of ? m->use_of[i] : i);
}

/* The uses by task (CSR: m->use_off, m->use_of).  Schedulers add a
 * task's uses as they add it, so the uses are nearly always in task
 * order: then no index is made. */
static void uses_by_task(exec_mem *m, uint32_t nu) {
  guint nt = m->p->tasks->len;
  m->use_off = g_new0(uint32_t, nt + 1);
  bool sorted = true;
  for (uint32_t i = 0; i < nu; i++) {
    uint32_t t = use_at(m, i)->task;
    m->use_off[t + 1]++;
    sorted &= i == 0 || use_at(m, i - 1)->task <= t;
  }
  for (guint t = 0; t < nt; t++) m->use_off[t + 1] += m->use_off[t];
  if (sorted) return;
  m->use_of = g_new(uint32_t, nu ? nu : 1);
  g_autofree uint32_t *fill = g_memdup2(m->use_off, (nt + 1) * sizeof(uint32_t));
  for (uint32_t i = 0; i < nu; i++) m->use_of[fill[use_at(m, i)->task]++] = i;
}

exec_mem *exec_mem_new(const plan *p, exec_result *r, bool trace, exec_held_fn held_back,
                       const void *ctx, const double *host_issue_s, const double *start_s,
                       bool per_gpu, uint64_t capacity_bytes, bool empty_cache_first) {
  exec_mem *m = g_new0(exec_mem, 1);
  m->p = p;
  m->host_s = host_issue_s;
  m->start_s = start_s;
  if (host_issue_s) m->queue = exec_queue_new(p, issue_key);
  move_held_writes(m, held_back, ctx);
  m->n_plan_uses = plan_buf_use_count(p);
  uint32_t nb = plan_buf_count(p), nu = m->n_plan_uses + m->moved->len;
  uint32_t ng = p->n_gpus;
  uses_by_task(m, nu);
  g_autofree uint64_t *fk = host_issue_s ? first_kernels(p) : NULL;
  /* only a lockstep plan has GPUs alike (a per-GPU task is its GPU's
   * alone); a trace lists every GPU's changes in the order they happen,
   * which the replay GPU by GPU gives */
  m->cls = exec_mem_classes_new(p, m->use_off, m->use_of, use_cb, m, fk,
                                per_gpu || trace || !p->has_lockstep);
  uint32_t n = m->cls->n;
  guint nt = p->tasks->len;
  m->r = r;
  m->trace = trace;
  m->n = n;
  m->n_gpus = ng;
  if (fk) {
    m->first_kernel = g_new(uint64_t, n);
    for (uint32_t c = 0; c < n; c++) m->first_kernel[c] = fk[m->cls->rep[c]];
  }
  m->starts = g_array_new(FALSE, FALSE, sizeof(held_start));
  m->flags = g_new0(uint8_t, nt);
  if (!r->gpu_peak_bytes) r->gpu_peak_bytes = g_new0(double, ng);
  if (!r->gpu_peak_reserved_bytes) r->gpu_peak_reserved_bytes = g_new0(double, ng);
  if (p->phases && !r->gpu_peak_phase_bytes)
    r->gpu_peak_phase_bytes = g_new0(double, (size_t)PLAN_PHASES * ng);
  if (trace && !r->mem) r->mem = g_array_new(FALSE, FALSE, sizeof(exec_mem_sample));
  m->bufs = g_new(buf_rec, nb + 1);
  uint32_t ni = 0;
  for (uint32_t b = 0; b < nb; b++) {
    uint32_t gpu = plan_buf_at(p, b)->gpu;
    m->bufs[b] = (buf_rec){ni, gpu == PLAN_ALL ? PLAN_ALL : m->cls->of[gpu]};
    ni += gpu == PLAN_ALL ? n : 1;
  }
  m->bufs[nb] = (buf_rec){ni, PLAN_ALL};
  m->inst = g_new0(inst_rec, ni);
  for (uint32_t i = 0; i < ni; i++) m->inst[i].sent_s = -1;
  m->g = g_new0(gpu_rec, n);
  m->empty_cache_first = empty_cache_first;
  m->xfer_issue_s = g_new0(double, nt);
  for (uint32_t g = 0; g < n; g++) {
    m->g[g].alloc = exec_alloc_new();
    m->g[g].next_ready = INFINITY;
    exec_alloc_set_capacity(m->g[g].alloc, capacity_bytes);
  }
  if (p->phases) {
    m->phase_peak = g_new0(double, (size_t)PLAN_PHASES * n);
    m->gpu_phase = g_new0(uint8_t, n);
  }
  m->gpus = g_new(uint32_t, n);
  m->stamp = g_new0(uint32_t, n);
  pattern_classes(m);
  /* the task's GPUs once per task, not per use */
  for (guint t = 0; t < nt; t++) {
    if (m->use_off[t] == m->use_off[t + 1]) continue;
    uint32_t k = task_gpus(m, plan_task_at(p, t));
    for (uint32_t i = m->use_off[t]; i < m->use_off[t + 1]; i++) {
      const plan_buf_use *u = task_use(m, i);
      m->flags[t] |= (uint8_t)phase_bit(u->write, u->when);
      each_inst(m, u, k, count_ref, 0);
    }
  }
  for (uint32_t b = 0; b < nb; b++) {
    const plan_buf *pb = plan_buf_at(p, b);
    for (uint32_t i = m->bufs[b].inst; i < m->bufs[b + 1].inst; i++) {
      uint32_t g = inst_gpu(m, b, i - m->bufs[b].inst);
      if (pb->input) {
        m->inst[i].written = true;
        alloc(m, i, g, pb->bytes, 0, UINT32_MAX);
      } else if (m->inst[i].refs == 0) {
        r->mem_errors += inst_weight(m, b, g); /* declared, never used */
      }
    }
  }
  return m;
}

static void start_inst(exec_mem *m, const plan_buf_use *u, uint32_t inst, uint32_t g,
                       double now) {
  inst_rec *in = &m->inst[inst];
  if (m->phase_peak && m->task_phase >= 0) m->gpu_phase[g] = (uint8_t)m->task_phase;
  if (u->write && !in->writing) {
    in->writing = 1;
    if (m->n_writing == m->cap_writing) {
      m->cap_writing = m->cap_writing ? 2 * m->cap_writing : 64;
      m->writing = g_renew(uint32_t, m->writing, m->cap_writing);
    }
    m->writing[m->n_writing++] = inst;
  } else if (!u->write && !in->written && !in->writing)
    m->r->mem_errors += inst_weight(m, u->buf, g); /* read before anything wrote it */
  if (in->state == INST_FREED)
    m->r->mem_errors += inst_weight(m, u->buf, g); /* cannot happen: refs held */
  if (in->state == INST_NONE)
    alloc(m, inst, g, plan_buf_at(m->p, u->buf)->bytes, now, u->task);
}

/* When transfer `task`, ending at `now` in the replay, is done: the
 * replay's GPUs start it once every host has issued it at host_s, but
 * hosts that fell behind by their cudaMallocs (host_lag) issue it later,
 * and a GPU that waits for its host does it that much later too. */
static double xfer_done(const exec_mem *m, uint32_t task, double now) {
  double late = m->xfer_issue_s[task] + (now - m->start_s[task]);
  return late > now ? late : now;
}

static void end_inst(exec_mem *m, const plan_buf_use *u, uint32_t inst, uint32_t g,
                     double now) {
  inst_rec *in = &m->inst[inst];
  if (u->write) in->written = true;
  const plan_task *t = plan_task_at(m->p, u->task);
  /* the last send/receive using a block decides when its free completes
   * (recordStream); one the host issued before its GPU's first kernel
   * started at once on the idle GPU and is done before the host, which
   * issues the pass's kernels and their Python between, frees the block
   * (calibration/h100x2-snap: the forward's first receive buffer,
   * `free_requested` then `free_completed` at the next request, 3.4 ms of
   * host time into the pass; every later transfer's block stays pending
   * through the pass): freed at once */
  if (t->kind == TASK_COMM && t->api == COMM_P2P)
    in->sent_s = m->host_s && issue_key(m->p, u->task) < m->first_kernel[g] ? -1
                                                                              : xfer_done(m, u->task, now);
  g_assert(in->refs > 0);
  if (--in->refs > 0) return;
  const plan_buf *b = plan_buf_at(m->p, u->buf);
  if (b->keep) return;
  in->state = INST_FREED;
  if (m->host_s && in->sent_s >= 0) {
    double due = exec_alloc_release_after(m->g[g].alloc, in->block, in->sent_s);
    if (due < m->g[g].next_ready) m->g[g].next_ready = due;
  } else {
    exec_alloc_release(m->g[g].alloc, in->block);
  }
  in->free_seq = ++m->seq;
  m->g[g].live -= b->bytes;
  sample(m, g, now);
}

/* fn on every instance task uses in the phases of mask (bits:
 * plan_buf_when), its writes first (start_inst: what a task writes it may
 * read) */
static void on_task(exec_mem *m, uint32_t task, double now, inst_fn fn, unsigned mask) {
  unsigned has = m->flags[task];
  if (!(has & (mask | mask << 3))) return; /* no use of these phases */
  const plan_task *t = plan_task_at(m->p, task);
  uint32_t k = task_gpus(m, t);
  if (m->phase_peak && fn == start_inst)
    m->task_phase = t->kind == TASK_COMPUTE ? (int)plan_task_phase(m->p, task) : -1;
  for (int writes = 1; writes >= 0; writes--)
    for (uint32_t i = m->use_off[task]; (has >> (writes * 3)) & mask && i < m->use_off[task + 1]; i++) {
      const plan_buf_use *u = task_use(m, i);
      if (u->write == (bool)writes && (mask >> u->when & 1u)) each_inst(m, u, k, fn, now);
    }
  for (uint32_t i = 0; i < m->n_writing; i++) m->inst[m->writing[i]].writing = 0;
  m->n_writing = 0;
}

#define PHASE(w) (1u << (w))

/* The task's references are taken (its writes allocated); those it
 * holds only at its start are dropped. */
static void apply_start(exec_mem *m, uint32_t task, double now_s) {
  on_task(m, task, now_s, start_inst, PHASE(PLAN_BUF_DURING) | PHASE(PLAN_BUF_EARLY));
  on_task(m, task, now_s, end_inst, PHASE(PLAN_BUF_EARLY));
  const plan_task *t = plan_task_at(m->p, task);
  if (m->host_s && t->kind == TASK_COMM && t->api == COMM_P2P) {
    /* issued after its receive buffers are made, by the latest of its hosts */
    uint32_t k = task_gpus(m, t);
    double lag = 0;
    for (uint32_t i = 0; i < k; i++)
      if (m->g[m->gpus[i]].host_lag > lag) lag = m->g[m->gpus[i]].host_lag;
    m->xfer_issue_s[task] = m->host_s[task] + lag;
  }
}

/* Program order: a group the host issues at an earlier task's place
 * (plan_issue_at) comes just before that task (issue_key), then by id. */
static gint by_issue_order(gconstpointer a, gconstpointer b) {
  const held_start *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return (x->task > y->task) - (x->task < y->task);
}

/* The starts held for the instant starts_at, in the order the program
 * issues them (by_issue_order; they mostly start in it already). */
static void flush_starts(exec_mem *m) {
  const held_start *v = (const held_start *)m->starts->data;
  for (guint i = 1; i < m->starts->len; i++)
    if (by_issue_order(&v[i - 1], &v[i]) > 0) {
      g_array_sort(m->starts, by_issue_order);
      break;
    }
  for (guint i = 0; i < m->starts->len; i++) {
    uint32_t task = g_array_index(m->starts, held_start, i).task;
    m->flags[task] &= (uint8_t)~TASK_HELD;
    apply_start(m, task, m->starts_at);
  }
  g_array_set_size(m->starts, 0);
}

void exec_mem_start(exec_mem *m, uint32_t task, double now_s) {
  if (m->starts->len && now_s != m->starts_at) flush_starts(m);
  m->starts_at = now_s;
  m->flags[task] |= TASK_HELD;
  held_start h = {issue_key(m->p, task), task};
  g_array_append_val(m->starts, h);
}

/* The task's references drop, then its late uses happen (and, unless
 * kept or used later, end at once). */
void exec_mem_end(exec_mem *m, uint32_t task, double now_s) {
  if (m->starts->len && (now_s != m->starts_at || m->flags[task] & TASK_HELD)) flush_starts(m);
  on_task(m, task, now_s, end_inst, PHASE(PLAN_BUF_DURING));
  on_task(m, task, now_s, start_inst, PHASE(PLAN_BUF_LATE));
  on_task(m, task, now_s, end_inst, PHASE(PLAN_BUF_LATE));
  exec_queue_ended(m->queue, task, now_s);
}

static gint by_gpu_bytes(gconstpointer a, gconstpointer b) {
  const exec_mem_live *x = a, *y = b;
  if (x->gpu != y->gpu) return x->gpu < y->gpu ? -1 : 1;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return strcmp(x->name, y->name);
}

static gint by_gpu_name(gconstpointer a, gconstpointer b) {
  const exec_mem_live *x = a, *y = b;
  if (x->gpu != y->gpu) return x->gpu < y->gpu ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Each class's entries in `live` (sorted by class) given to each of its
 * GPUs, into out. */
static void expand_live(const exec_mem *m, const GArray *live, GArray *out) {
  g_autofree uint32_t *off = g_new0(uint32_t, m->n + 1);
  for (guint i = 0; i < live->len; i++) off[g_array_index(live, exec_mem_live, i).gpu + 1]++;
  for (uint32_t c = 0; c < m->n; c++) off[c + 1] += off[c];
  for (uint32_t g = 0; g < m->n_gpus; g++) {
    uint32_t c = m->cls->of[g];
    for (uint32_t i = off[c]; i < off[c + 1]; i++) {
      exec_mem_live l = g_array_index(live, exec_mem_live, i);
      l.gpu = g;
      g_array_append_val(out, l);
    }
  }
}

/* The instances live on each GPU at its peak, summed by name, into r:
 * one pass over the instances, then sorted and merged (per class, then
 * given to its GPUs). */
static void peak_live(exec_mem *m) {
  const plan *p = m->p;
  bool classes = m->n < m->n_gpus;
  GArray *out = classes ? g_array_new(FALSE, FALSE, sizeof(exec_mem_live)) : m->r->peak_live;
  for (uint32_t b = 0; b < plan_buf_count(p); b++) {
    const plan_buf *pb = plan_buf_at(p, b);
    for (uint32_t i = m->bufs[b].inst; i < m->bufs[b + 1].inst; i++) {
      uint32_t g = inst_gpu(m, b, i - m->bufs[b].inst);
      uint32_t at = m->g[g].peak_seq;
      const inst_rec *in = &m->inst[i];
      if (in->state == INST_NONE || in->alloc_seq > at) continue;
      if (in->state == INST_FREED && in->free_seq <= at) continue;
      /* a buffer of one GPU is touched by it alone, so its class is it */
      g_assert(pb->gpu == PLAN_ALL || m->cls->size[g] == 1);
      exec_mem_live l = {g, 1, plan_buf_name(p, pb), pb->bytes};
      g_array_append_val(out, l);
    }
  }
  g_array_sort(out, by_gpu_name);
  guint k = 0;
  for (guint i = 0; i < out->len; i++) {
    exec_mem_live *l = &g_array_index(out, exec_mem_live, i);
    exec_mem_live *last = k ? &g_array_index(out, exec_mem_live, k - 1) : NULL;
    if (last && last->gpu == l->gpu && !strcmp(last->name, l->name)) {
      last->count++;
      last->bytes += l->bytes;
    } else {
      g_array_index(out, exec_mem_live, k++) = *l;
    }
  }
  g_array_set_size(out, k);
  if (!classes) return;
  expand_live(m, out, m->r->peak_live);
  g_array_free(out, TRUE);
}

void exec_mem_finish(exec_mem *m) {
  flush_starts(m);
  exec_result *r = m->r;
  const plan *p = m->p;
  for (uint32_t b = 0; b < plan_buf_count(p); b++)
    for (uint32_t i = m->bufs[b].inst; i < m->bufs[b + 1].inst; i++)
      if (m->inst[i].state == INST_LIVE && !plan_buf_at(p, b)->keep) {
        r->mem_errors += inst_weight(m, b, inst_gpu(m, b, i - m->bufs[b].inst));
      }
  if (!r->peak_live) r->peak_live = g_array_new(FALSE, FALSE, sizeof(exec_mem_live));
  g_array_set_size(r->peak_live, 0);
  r->peak_bytes = 0;
  r->peak_gpu = 0;
  r->peak_reserved_bytes = 0;
  /* each GPU its class's figures */
  for (uint32_t g = 0; g < m->n_gpus; g++) {
    uint32_t c = m->cls->of[g];
    r->gpu_peak_bytes[g] = m->g[c].peak;
    for (int ph = 0; m->phase_peak && ph < PLAN_PHASES; ph++)
      r->gpu_peak_phase_bytes[(size_t)ph * m->n_gpus + g] = m->phase_peak[(size_t)ph * m->n + c];
    r->gpu_peak_reserved_bytes[g] = (double)exec_alloc_peak_reserved(m->g[c].alloc);
    if (r->gpu_peak_reserved_bytes[g] > r->peak_reserved_bytes)
      r->peak_reserved_bytes = r->gpu_peak_reserved_bytes[g];
    if (m->g[c].peak > r->peak_bytes) {
      r->peak_bytes = m->g[c].peak;
      r->peak_gpu = g;
    }
  }
  for (uint32_t c = 0; c < m->n; c++) exec_alloc_free(m->g[c].alloc);
  peak_live(m);
  g_array_sort(r->peak_live, by_gpu_bytes);
  g_free(m->bufs); g_free(m->inst); g_free(m->g); g_free(m->phase_peak);
  g_free(m->gpu_phase); g_free(m->gpus); g_free(m->first_kernel);
  exec_queue_free(m->queue);
  g_free(m->xfer_issue_s);
  g_free(m->stamp); g_free(m->use_off); g_free(m->use_of); g_free(m->pat_off); g_free(m->pat_cls);
  exec_mem_classes_free(m->cls);
  g_array_free(m->moved, TRUE);
  g_array_free(m->starts, TRUE);
  g_free(m->writing);
  g_free(m->flags);
  g_free(m);
}

void exec_mem_add_layers(exec_result *acc, const exec_result *r, double shown_s) {
  if (!r->gpu_peak_bytes) return;
  uint32_t n = acc->n_gpus;
  if (!acc->gpu_peak_bytes) acc->gpu_peak_bytes = g_new0(double, n);
  if (!acc->gpu_peak_reserved_bytes) acc->gpu_peak_reserved_bytes = g_new0(double, n);
  /* layers run one after another, each replayed from an empty cache: the
   * larger of their peaks reserved (a lower bound where a later layer's
   * requests could not reuse what an earlier one left cached) */
  for (uint32_t g = 0; g < n; g++) {
    if (r->gpu_peak_reserved_bytes && r->gpu_peak_reserved_bytes[g] > acc->gpu_peak_reserved_bytes[g])
      acc->gpu_peak_reserved_bytes[g] = r->gpu_peak_reserved_bytes[g];
    if (acc->gpu_peak_reserved_bytes[g] > acc->peak_reserved_bytes)
      acc->peak_reserved_bytes = acc->gpu_peak_reserved_bytes[g];
  }
  if (!acc->peak_live) acc->peak_live = g_array_new(FALSE, FALSE, sizeof(exec_mem_live));
  g_autofree bool *take = g_new0(bool, n);
  for (uint32_t g = 0; g < n; g++) take[g] = r->gpu_peak_bytes[g] > acc->gpu_peak_bytes[g];
  GArray *live = g_array_new(FALSE, FALSE, sizeof(exec_mem_live));
  for (guint i = 0; i < acc->peak_live->len; i++) {
    exec_mem_live l = g_array_index(acc->peak_live, exec_mem_live, i);
    if (!take[l.gpu]) g_array_append_val(live, l);
  }
  for (guint i = 0; r->peak_live && i < r->peak_live->len; i++) {
    exec_mem_live l = g_array_index(r->peak_live, exec_mem_live, i);
    if (take[l.gpu]) g_array_append_val(live, l);
  }
  g_array_sort(live, by_gpu_bytes);
  g_array_free(acc->peak_live, TRUE);
  acc->peak_live = live;
  for (uint32_t g = 0; g < n; g++)
    if (take[g]) acc->gpu_peak_bytes[g] = r->gpu_peak_bytes[g];
  for (uint32_t g = 0; g < n; g++)
    if (acc->gpu_peak_bytes[g] > acc->peak_bytes) {
      acc->peak_bytes = acc->gpu_peak_bytes[g];
      acc->peak_gpu = g;
    }
  acc->mem_errors += r->mem_errors;
  if (!r->mem || !acc->spans) return; /* acc keeps no trace */
  if (!acc->mem) acc->mem = g_array_new(FALSE, FALSE, sizeof(exec_mem_sample));
  for (guint i = 0; i < r->mem->len; i++) {
    exec_mem_sample x = g_array_index(r->mem, exec_mem_sample, i);
    x.t_s += shown_s;
    g_array_append_val(acc->mem, x);
  }
}

void exec_mem_result_free(exec_result *r) {
  g_free(r->gpu_peak_bytes);
  g_free(r->gpu_peak_reserved_bytes);
  g_free(r->gpu_peak_phase_bytes);
  if (r->peak_live) g_array_free(r->peak_live, TRUE);
  if (r->mem) g_array_free(r->mem, TRUE);
}

