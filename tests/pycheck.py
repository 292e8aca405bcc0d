"""What the Python tests share: the checkout's root (ROOT), putting one of
its script folders on the import path (scripts_on_path), a check that
prints ok/FAIL and counts the failures, the exit status from them
(finish), and the stand-ins the calibration scripts' tests give them
(StepClock, Recorder)."""
import os
import sys

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
