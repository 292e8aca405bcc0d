/* size_rate: a connection's rate by message size (comm.flow_rate_by_size).
 *
 * One point-to-point transfer on the H200 pair moves faster the larger it
 * is: 305 GB/s at 64-128 MiB, 312 at 256 MiB, 359-362 from 512 MiB to
 * 2 GiB, once the model's fixed cost of a grouped send/receive is taken out
 * (calibration/h200x2-linfid/overlap-n2.jsonl, the hops timed alone;
 * docs/validation.md "A transfer's rate by its size").  One latency and
 * one bandwidth cannot follow that.  This module owns the table that can:
 * points of (message size in MiB, GB/s), read from a topology's comm section, and
 * the rate at any size, linear in log2(bytes) between two points and the
 * end points' rate beyond them.  The network model holds a flow to
 * min(its route's per-flow cap, this rate) (exec_comm.c); a topology without
 * the table is priced as before. */
#ifndef TASP_SIZE_RATE_H
#define TASP_SIZE_RATE_H

#include <glib.h>
#include <json-c/json.h>
#include <stdint.h>

#include "jsonio.h"

typedef struct {
  uint32_t n;       /* points; 0: no table (rate independent of size) */
  double *bytes;    /* strictly increasing, > 0 */
  double *rate_Bps; /* > 0 */
} size_rate;

/* Reads `key` of obj (optional): an array of at least one object
 * {"mib": M, "gbps": R}, M (MiB, 2^20 bytes) strictly increasing.  A missing key leaves an
 * empty table.  Bad input: a TASP_ERROR naming the file and the entry's
 * field, nothing kept. */
bool size_rate_parse(json_object *obj, json_where w, const char *key, size_rate *r,
                     GError **err);
void size_rate_clear(size_rate *r);
/* The table's rate for a message of `bytes` (B/s); 0 when there is no table. */
double size_rate_at(const size_rate *r, double bytes);
/* A flow's cap: the route's (0: none) held to the table's rate at `bytes`. */
double size_rate_cap(const size_rate *r, double route_cap_Bps, double bytes);

#endif
