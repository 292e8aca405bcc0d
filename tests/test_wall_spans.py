#!/usr/bin/env python3
"""wall_spans.WallSpans (calibrate.py --pass-wall-clock), with a stand-in
clock and writer (no GPU): each timed record gets the span of its own
timing, [before, after] the timer call, paired first in, first out in the
order the passes part (time, write) and the layer part (time forward, time
backward, write both) use; records without a time and records with no
timing before them pass through unchanged; the span is the only key added;
a timing that raises drops the spans not yet written, so the next records
pair with their own timings.
Usage: test_wall_spans.py"""

from pycheck import Recorder, StepClock, check, finish, scripts_on_path  # noqa: E402
scripts_on_path("calibrate")
import wall_spans  # noqa: E402


clock = StepClock(100.0)
out = Recorder()
spans = wall_spans.WallSpans(out, clock)
seen = []  # the clock's reading inside each timer call, in order


def timed(fn, iters, warm):
    seen.append(clock())
    return fn(), iters, warm


timer = spans.timer(timed)

# passes: a memory record (no time), then time and write, twice
spans.write("memory-n2.jsonl", {"part": "memory", "peak": 1})
r1 = timer(lambda: 1.5, 7, 2)
spans.write("passes-n2.jsonl", {"part": "pass", "ms": r1[0]})
r2 = timer(lambda: 2.5, 7, 2)
spans.write("passes-n2.jsonl", {"part": "pass", "ms": r2[0]})
# layer op: forward and backward timed, then both written
timer(lambda: 3.0, 5, 2)
timer(lambda: 4.0, 5, 2)
spans.write("layer-n1.jsonl", {"part": "layer_op", "pass": "fwd", "ms": 3.0})
spans.write("layer-n1.jsonl", {"part": "layer_op", "pass": "fwdbwd", "ms": 4.0})
# a record with a time but no timing before it
spans.write("layer-n1.jsonl", {"part": "layer", "ms": 9.0})

check("the timer's result and arguments pass through", r1 == (1.5, 7, 2) and r2 == (2.5, 7, 2))
rows = out.recs()
check("the record without a time is unchanged", rows[0] == {"part": "memory", "peak": 1})
timed_rows = rows[1:5]
ok = len(seen) == 4
for rec, t in zip(timed_rows, seen):
    w = rec.get("wall")
    ok &= w is not None and w[0] < t < w[1]
check("each timed record's span brackets its own timer call, in order", ok)
check("spans do not overlap and follow each other",
      all(a["wall"][1] < b["wall"][0] for a, b in zip(timed_rows, timed_rows[1:])))
check("the span is the only key added",
      [{k: v for k, v in r.items() if k != "wall"} for r in timed_rows]
      == [{"part": "pass", "ms": 1.5}, {"part": "pass", "ms": 2.5},
          {"part": "layer_op", "pass": "fwd", "ms": 3.0},
          {"part": "layer_op", "pass": "fwdbwd", "ms": 4.0}])
check("a timed record with no timing before it gets no span", "wall" not in rows[5])
check("file names pass through",
      [n for n, _ in out.rows] == ["memory-n2.jsonl"] + ["passes-n2.jsonl"] * 2
      + ["layer-n1.jsonl"] * 3)

# out of memory in a backward's timing: the forward's span is dropped
out2 = Recorder()
spans2 = wall_spans.WallSpans(out2, StepClock(100.0))
t2 = spans2.timer(lambda fn, i, w: fn())


def oom():
    raise MemoryError("out of memory")


t2(lambda: 1.0, 5, 2)  # clock 101-102
raised = False
try:
    t2(oom, 5, 2)
except MemoryError:
    raised = True
t2(lambda: 2.0, 5, 2)  # clock 104-105 (103: the failed call's start)
spans2.write("layer-n1.jsonl", {"ms": 2.0})
spans2.write("layer-n1.jsonl", {"ms": 5.0})
w_next = out2.rows[0][1].get("wall")
check("a timing that raises re-raises", raised)
check("after it the next record pairs with its own timing, not the orphaned forward's",
      w_next == [104.0, 105.0] and "wall" not in out2.rows[1][1])
finish()
