/* engine: the simulated clock and the event heap.
 *
 * Time inside the engine is a double in seconds.  Events are ordered by
 * (time, insertion sequence): two events at the same time run in the order
 * they were scheduled, so the same inputs always replay the same way.  The
 * engine knows nothing of networks or attention; an event is a callback. */
#ifndef TASP_ENGINE_H
#define TASP_ENGINE_H

#include <stdint.h>

typedef void (*engine_fn)(void *ctx, uint64_t arg);

typedef struct engine engine;

engine *engine_new(void);
void engine_free(engine *e);

/* Schedule fn(ctx, arg) at absolute time t_s (clamped to now if earlier). */
void engine_at(engine *e, double t_s, engine_fn fn, void *ctx, uint64_t arg);
/* Current simulated time in seconds. */
double engine_now(const engine *e);
/* Run until the heap is empty. */
void engine_run(engine *e);
/* Events executed so far (for events-per-second figures). */
uint64_t engine_events(const engine *e);
/* Events waiting in the heap. */
uint64_t engine_pending(const engine *e);

#endif
