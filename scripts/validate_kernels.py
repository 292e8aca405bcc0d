#!/usr/bin/env python3
"""Forward flash kernels predicted against a compute sweep's measurements.

Reads the calibration tool's compute sweep (`--parts compute
--compute-heads ...`, e.g. calibration/h200x1-sweep/compute-n1.jsonl) or
kernel sweep (`--parts kernels`, calibration/h100x1-sweep: its square
kernels; the non-square ones need a pass that runs them alone): square
kernels over heads, head dims, batches and lengths, many beyond the
kernel tables' shapes) and predicts each forward kernel as tasp-sim prices
it: one GPU's ring pass (`--sp 1 --sched ring --pass fwd`, a single kernel;
its compute_ms, the kernel's own price, which like the sweep's CUDA-event
time includes its launch; the pass's step_ms adds the pass's host issue),
grouped by shape family so that a family the tables do not hold shows as
one line.  A measure of where the kernel model is blind, not a fit.

    scripts/validate_kernels.py TOPOLOGY SWEEP_JSONL [--sim build/tasp-sim]
        [--min-tokens 4096]
"""
import argparse
import csv
import io
import json
import os
import statistics
import subprocess
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def family(r):
    """The shape family a record belongs to (the tables hold 32-64 heads
    per GPU, head dim 64-128, batch 1)."""
    bh = r["B"] * r["H"]
    return (f"B x H {bh:>3} ({r['B']} x {r['H']}/{r['Hk']})", r["D"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topology")
    ap.add_argument("sweep")
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "tasp-sim"))
    ap.add_argument("--min-tokens", type=int, default=4096)
    a = ap.parse_args()
    recs = [json.loads(line) for line in open(a.sweep)]
    recs = [r for r in recs if r.get("op") in ("attn_fwd", "attn") and "ms" in r and
            r["sq"] == r["sk"] and r["sq"] >= a.min_tokens]
    errs = defaultdict(list)
    allerr = []
    for r in recs:
        cmd = [a.sim, "--topology", a.topology, "--sp", "1", "--sched", "ring", "--pass", "fwd",
               "--seq", str(r["sq"]), "--heads", str(r["H"]), "--kv-heads", str(r["Hk"]),
               "--head-dim", str(r["D"]), "--batch", str(r["B"]),
               "--mask", "causal" if r["causal"] else "full", "--csv", "-", "--quiet"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        row = next(csv.DictReader(io.StringIO(out)))
        e = float(row["compute_ms"]) / r["ms"] - 1
        errs[family(r) + (row["confidence"],)].append(e)
        allerr.append(abs(e))
    print("| batch x heads (B x H/Hk) | head dim | confidence | kernels | median error | "
          "range |")
    print("|---|---:|---|---:|---:|---:|")
    for k in sorted(errs):
        v = errs[k]
        print(f"| {k[0]} | {k[1]} | {k[2]} | {len(v)} | {100 * statistics.median(v):+.1f}% | "
              f"{100 * min(v):+.1f}% .. {100 * max(v):+.1f}% |")
    print(f"all: median |error| {100 * statistics.median(allerr):.1f}% over {len(allerr)} "
          f"kernels from {a.min_tokens} tokens, max {100 * max(allerr):.1f}%")


if __name__ == "__main__":
    main()
