/* plan_quotient: the plan of a symmetric job's representatives, taken
 * from the finished plan of every GPU (orbits.h says when replaying it is
 * exact).  The layer and model scopes build theirs directly (plan.h
 * plan_quotient while the builder runs, plan_append keeping the
 * representatives' part of the scheduler's plan by the same rules as
 * here); the attention scope takes a
 * scheduler's finished plan, lockstep tasks and patterns included, and
 * keeps what the representatives do. */
#ifndef TASP_PLAN_QUOTIENT_H
#define TASP_PLAN_QUOTIENT_H

#include "orbits.h"
#include "plan.h"

/* The representatives' plan of finished plan p (p's GPUs are o's first
 * p->n_gpus): every compute task of a representative (a lockstep task: a
 * copy per representative), every transfer leaving one (dst its
 * receiver's representative, plan_xfer_to the GPU it reaches), every
 * group, barrier included, that has one or none at all, the
 * representatives' buffers (one of every GPU becoming one per
 * representative) and the uses of what is kept.  A group's waits on
 * another GPU's tasks are dropped: the plan is invariant under o's
 * group, so that GPU's task
 * ends when its representative's image does, which the group also waits
 * for.  NULL where p is not of that form: a kept compute task waiting on
 * a dropped task, a group with transfers none of which leaves a
 * representative, a dropped issue place, recorded segments or phases. */
plan *plan_quotient_of(const plan *p, const orbits *o);

#endif
