/* testutil: a CUnit runner shared by the test programs. */
#ifndef TASP_TESTUTIL_H
#define TASP_TESTUTIL_H

#include <CUnit/Basic.h>
#include <glib.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "exec.h"
#include "orbits.h"
#include "plan.h"
#include "topology.h"

typedef struct {
  const char *name;
  void (*fn)(void);
} test_case;

/* Runs the cases as one suite; returns the process exit status. */
int test_run(const char *suite, const test_case *cases);

/* n GPUs on one switch (NVSwitch-like): each GPU a send and a receive
 * port of bw_Bps with chan_lat_s each, a route src tx -> dst rx. */
topology *test_switch(uint32_t n, double bw_Bps, double chan_lat_s);

/* Every figure of two results of one configuration within 1e-9 (a run
 * against its replay by orbits: step and its split, FLOPs, per GPU busy,
 * finish, idle and memory peaks, per channel bytes and busy time, the
 * memory errors and what is live at the peak), as CUnit assertions. */
void check_same_result(const exec_result *full, const exec_result *q);
/* The same for plan `full` replayed whole and its representatives' plan
 * `q` replayed by orbits o (plan_quotient.h), both on t. */
void check_same_replay(const plan *full, const plan *q, const topology *t, const orbits *o);

#define TEST(fn) {#fn, fn}
#define CU_ASSERT_CLOSE(a, b, rel) \
  CU_ASSERT(fabs((a) - (b)) <= (rel) * fmax(fabs(a), fabs(b)) + 1e-300)

#endif
