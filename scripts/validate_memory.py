#!/usr/bin/env python3
"""Predicted peak memory per GPU against torch.cuda.max_memory_allocated.

Reads the calibration tool's memory records (calibrate.py --parts memory:
calibration/h200x2-mem/memory-n2.jsonl, and the one-rank programs of
emulated/*/memory-n*-emulated.jsonl), runs tasp-sim at every record's shape
and compares `peak_mem_gib` with the measured peak of the busiest rank.

What is compared: tasp-sim's peak counts the layer's inputs and what the
method allocates.  A measured rank's peak also holds what the process had
allocated before the pass beyond the inputs (the cuBLAS workspace, 32 MiB
for the softmax programs, 64 MiB for the linear ones:
calibration/h200x2-mem/README.md); that residue, allocated_before -
inputs_bytes, is taken off each rank's peak first.

    scripts/validate_memory.py [--sim build/tasp-sim] [--min-tokens 4096]
                               [--summary] [--max-median PCT] [--max-error PCT]
                               [FILE.jsonl ...]

Prints one row per record (method, attention, mask, pass, N, tokens per
GPU, predicted, measured GiB, error), then the median and largest |error|
per method and overall; exits 1 when --max-median or --max-error is
exceeded (the fidelity test's thresholds), 2 on bad input."""
import argparse
import csv
import glob
import io
import json
import os
import statistics
import subprocess
import sys

GIB = 2.0 ** 30
# the GPU count of a record -> a bundled topology with that many GPUs (the
# plan's memory does not depend on the GPU; only on the SP degree)
TOPOLOGY = {("softmax", 2): "h200x2-tool", ("linear", 2): "h200x2-linear",
            ("softmax", 4): "h200x4-tool", ("linear", 4): "h200x4-tool",
            ("softmax", 8): "h100x8", ("linear", 8): "h100x8"}
DEFAULT_FILES = ["calibration/h200x2-mem/memory-n2.jsonl",
                 "calibration/h200x2-mem/emulated/e4/memory-n4-emulated.jsonl",
                 "calibration/h200x2-mem/emulated/e8/memory-n8-emulated.jsonl"]


def measured_gib(r, residue):
    """The busiest rank's peak less the process's residue (the cuBLAS
    workspace): what the forward pass of the same configuration held before
    it beyond its inputs.  Not the backward's own `allocated_before`, which
    holds what the forward kept for it (all-gather's gathered K and V, the
    log-sum-exp), as tasp-sim's backward inputs do."""
    return max(p - residue for p in r["peak_allocated"]) / GIB


def residues(recs):
    """Per configuration less its pass: the forward's allocated_before -
    inputs_bytes, its largest over ranks."""
    out = {}
    for r in recs:
        if r["pass"] == "fwd":
            out[config(r)] = max(b - r["inputs_bytes"] for b in r["allocated_before"])
    return out


def config(r):
    return tuple(r.get(k) for k in ("attention", "sched", "usp_ulysses", "mask", "n",
                                    "tokens_per_gpu"))


def records(files):
    """The records, one per configuration: a one-rank program's records
    (emulated_rank) of one configuration are its ranks, joined into one."""
    out = {}
    for f in files:
        try:
            with open(f) as fh:
                for line in fh:
                    r = json.loads(line)
                    if r.get("part") != "memory" or not r.get("comm", True):
                        continue
                    key = tuple(r.get(k) for k in ("attention", "sched", "usp_ulysses", "mask",
                                                   "pass", "n", "tokens_per_gpu"))
                    if key in out:
                        for k in ("peak_allocated", "allocated_before"):
                            out[key][k] = out[key][k] + r[k]
                    else:
                        out[key] = dict(r)
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"validate_memory: {f}: {e}")
    return list(out.values())


def predict(sim, r):
    n, att = r["n"], r["attention"]
    topo = TOPOLOGY.get((att, n))
    if topo is None:
        return None
    cmd = [sim, "--topology", topo, "--sched", r["sched"], "--seq", str(r["seq"]), "--sp", str(n),
           "--heads", str(r["H"]), "--kv-heads", str(r["H"]), "--head-dim", str(r["D"]),
           "--batch", str(r["B"]), "--mask", r["mask"], "--pass", r["pass"], "--csv", "-",
           "--quiet", "--attention", att]
    if r["sched"] == "usp":
        cmd += ["--usp-ulysses", str(r["usp_ulysses"])]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"validate_memory: {' '.join(cmd)}: {p.stderr.strip()}")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    return float(rows[0]["peak_mem_gib"]) if rows and rows[0].get("peak_mem_gib") else None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--min-tokens", type=int, default=4096)
    ap.add_argument("--summary", action="store_true", help="the per-method table only")
    ap.add_argument("--max-median", type=float, help="percent: fail above this median |error|")
    ap.add_argument("--max-error", type=float, help="percent: fail above this largest |error|")
    a = ap.parse_args()
    files = a.files or [f for f in DEFAULT_FILES if os.path.exists(f)]
    if not files:
        sys.exit("validate_memory: no memory records found")
    rows, by = [], {}
    recs = records(files)
    res = residues(recs)
    for r in recs:
        if r["tokens_per_gpu"] < a.min_tokens:
            continue
        pred = predict(a.sim, r)
        if pred is None:
            continue
        if config(r) not in res:
            continue
        meas = measured_gib(r, res[config(r)])
        err = 100 * (pred - meas) / meas
        name = r["sched"] + (f"-{r['usp_ulysses']}x{r['usp_ring']}" if r["sched"] == "usp" else "")
        name += "" if r["attention"] == "softmax" else " (linear)"
        rows.append((name, r["mask"], r["pass"], r["n"], r["tokens_per_gpu"], pred, meas, err))
        by.setdefault(name, []).append(abs(err))
    if not a.summary:
        print("| method | mask | pass | N | tokens/GPU | predicted GiB | measured GiB | error |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for m, mask, ps, n, t, p, x, e in rows:
            print(f"| {m} | {mask} | {ps} | {n} | {t // 1024}K | {p:.2f} | {x:.2f} | {e:+.1f}% |")
        print()
    print("| method | points | median abs error | max abs error |")
    print("|---|---:|---:|---:|")
    for m in by:
        print(f"| {m} | {len(by[m])} | {statistics.median(by[m]):.1f}% | {max(by[m]):.1f}% |")
    allerr = [abs(r[-1]) for r in rows]
    med, mx = statistics.median(allerr), max(allerr)
    print(f"| all | {len(allerr)} | {med:.1f}% | {mx:.1f}% |")
    bad = (a.max_median is not None and med > a.max_median) or \
          (a.max_error is not None and mx > a.max_error)
    if bad:
        print(f"validate_memory: median {med:.1f}% / max {mx:.1f}% beyond "
              f"{a.max_median}% / {a.max_error}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
