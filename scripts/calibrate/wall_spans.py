"""Host wall-clock spans of the passes' and the layer's timings
(calibrate.py --pass-wall-clock), to match clock samples (nvidia-smi's SM
clock, power, temperature) taken beside a run against each record.

This module owns the pairing of a timer call with the record it produced.
WallSpans wraps the tool's writer and its timer: each call of the wrapped
timer notes the host's Unix time (s) before and after it (warm-up and timed
iterations together: the GPU's load over that span is what set its clock);
each record written with a time ("ms") takes the oldest span not yet
written as "wall": [start, end].  The passes part writes a record right
after each timing; the layer part times an op's forward and its backward,
then writes them in that order; both pair first in, first out.  Records
without "ms" (memory, headroom) pass through unchanged, and a record has
no span when no timing preceded it.  A timing that raises drops the spans
not yet written: the caller writes none of that batch's records.
"""
import collections
import time

FIELD = "wall"


class WallSpans:
    """A writer (write(name, rec)) that adds each timing's span to the
    record of that timing; timer(fn) wraps a timer with the same
    signature."""

    def __init__(self, out, clock=time.time):
        self.out, self.clock = out, clock
        self.pending = collections.deque()

    def timer(self, timed):
        def spanned(*args, **kw):
            start = self.clock()
            try:
                result = timed(*args, **kw)
            except BaseException:
                # the records of the timings since the last write will not
                # be written (the layer part skips a size out of memory):
                # their spans must not pair with the next records
                self.pending.clear()
                raise
            self.pending.append([start, self.clock()])
            return result
        return spanned

    def write(self, name, rec):
        if "ms" in rec and self.pending:
            rec = dict(rec, **{FIELD: self.pending.popleft()})
        self.out.write(name, rec)
