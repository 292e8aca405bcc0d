"""What the Python tests share: the checkout's root (ROOT), putting one of
its script folders on the import path (scripts_on_path), a check that
prints ok/FAIL and counts the failures, and the exit status from them
(finish)."""
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
