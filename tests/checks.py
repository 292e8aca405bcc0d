"""Checks for the Python tests: the scripts/ folder importable, a check
that records a failure, and the exit status once all are done."""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def finish(name):
    """Prints how many checks failed and exits 1 if any did."""
    print(f"{name}: {len(failures)} failed")
    sys.exit(1 if failures else 0)
