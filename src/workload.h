/* workload: one attention layer to simulate (one sweep point, less the
 * scheduler and topology). */
#ifndef TASP_WORKLOAD_H
#define TASP_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { PASS_FWD, PASS_BWD, PASS_FWDBWD } pass_kind;

typedef struct {
  uint32_t gpus;       /* SP degree N */
  uint64_t seq_len;    /* S, tokens of the whole sequence */
  uint32_t batch, heads, kv_heads, head_dim;
  uint32_t elem_bytes; /* 2 for bf16/fp16, 4 for fp32 */
  uint32_t grad_bytes; /* per element of the dK/dV accumulators backward moves
                          (4: float32, as ring_flash_attn); 0: elem_bytes */
  const char *dtype;
  bool causal;
  pass_kind pass;
  /* TASP's cycles as given by the user ("0-1-2-3,0-3-2-1"), NULL: found by
   * tasp-sim.  To reproduce a particular implementation's labelling. */
  const char *tasp_cycles;
  /* USP's Ulysses degree (0: the scheduler's default) and whether Ulysses
   * moves Q, K and V in one fused all-to-all instead of three calls. */
  uint32_t ulysses;
  bool ulysses_fused;
} workload;

/* Bytes of K and V for `tokens` tokens: 2·B·tokens·Hkv·D·e. */
static inline double workload_kv_bytes(const workload *w, double tokens) {
  return 2.0 * w->batch * tokens * w->kv_heads * w->head_dim * w->elem_bytes;
}

#endif
