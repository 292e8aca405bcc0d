"""What the Python tests share: the checkout's root (ROOT), putting one of
its script folders on the import path (scripts_on_path), a check that
prints ok/FAIL and counts the failures, the exit status from them
(finish), the stand-ins the calibration scripts' tests give them
(StepClock, Recorder), and one kernel's price read back from tasp-sim
(kernel_price)."""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
fails = 0


def scripts_on_path(*parts):
    """ROOT/scripts/<parts> first on the import path."""
    sys.path.insert(0, os.path.join(ROOT, "scripts", *parts))


def check(name, cond):
    global fails
    print(("ok: " if cond else "FAIL: ") + name)
    fails += not cond


def finish(label=None):
    """Exit 1 if a check failed, else 0; with label, a count line first."""
    if label is not None:
        print(f"{label}{fails} failed")
    sys.exit(1 if fails else 0)


class StepClock:
    """time.time() stand-in: each reading one second after the last, from
    `start`; called, or as .time() (a time module's place)."""

    def __init__(self, start):
        self.now = start

    def __call__(self):
        self.now += 1.0
        return self.now

    time = __call__


class Recorder:
    """The calibration scripts' writer: rows (file name, record) in order."""

    def __init__(self):
        self.rows = []

    def write(self, name, rec):
        self.rows.append((name, rec))

    def recs(self):
        return [rec for _, rec in self.rows]


def kernel_price(sim, args):
    """(seconds, confidence) of the attention kernels of a one-GPU point
    (tasp-sim with args, --sp 1): the sum of their trace spans, without the
    pass's copies (its gradient sums and output casts: src/sched/rotate.c),
    and the point's confidence column."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        out = subprocess.run([sim, "--sp", "1", *args, "--csv", "-", "--quiet",
                              "--trace", trace], check=True, capture_output=True,
                             text=True).stdout
        d = json.load(open(trace))
    events = d["traceEvents"] if isinstance(d, dict) else d
    us = sum(e["dur"] for e in events if e.get("ph") == "X" and e["name"].startswith("attn"))
    return us * 1e-6, next(csv.DictReader(io.StringIO(out)))["confidence"]
