#!/usr/bin/env python3
"""Packed-document kernels as tasp-sim prices them against the varlen
records (calibration/h100x1-varlen/varlen.jsonl, scripts/varlen_bench.py).

Each record is one GPU's flash attention over a packed sequence: one call
over cu_seqlens (varlen), one call per document (perdoc), forward and
backward.  tasp-sim prices the same kernels as Ulysses on one GPU
(`--sp 1 --sched ulysses --docs LIST`: after its all-to-all, here none,
the kernel over each document): its compute_ms, the kernel time, against
the measured times.  Prints one line per record and pass, and the median
and largest absolute error against each way of calling.

    scripts/varlen_check.py [--sim build/tasp-sim] [--topology h100x8]
        [--records calibration/h100x1-varlen/varlen.jsonl]
"""
import argparse
import csv
import io
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def priced(sim, topology, rec, p):
    cmd = [sim, "--topology", topology, "--sched", "ulysses", "--sp", "1",
           "--seq", str(rec["total"]), "--mask", "causal" if rec["causal"] else "full",
           "--pass", p, "--csv", "-", "-q"]
    if rec["n_docs"] > 1:
        cmd += ["--docs", ",".join(str(d) for d in rec["docs"])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    row = next(csv.DictReader(io.StringIO(out)))
    return float(row["compute_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "tasp-sim"))
    ap.add_argument("--topology", default="h100x8")
    ap.add_argument("--records", default=os.path.join(ROOT, "calibration", "h100x1-varlen",
                                                      "varlen.jsonl"))
    a = ap.parse_args()
    errs = {"varlen": [], "perdoc": []}
    print(f"{'list':<22} {'docs':>4} {'mask':<6} {'pass':<4} {'sim_ms':>9} {'varlen_ms':>9} "
          f"{'err':>7} {'perdoc_ms':>9} {'err':>7}")
    for line in open(a.records):
        rec = json.loads(line)
        if "list" not in rec or rec["list"] == "probe":
            continue
        for p in ("fwd", "bwd"):
            sim = priced(a.sim, a.topology, rec, p)
            cells = []
            for how in ("varlen", "perdoc"):
                key = f"{how}_{p}_s"
                if key not in rec:
                    cells.append(f"{'':>9} {'':>7}")
                    continue
                ms = rec[key] * 1e3
                e = sim / ms - 1
                if rec["n_docs"] > 1:
                    errs[how].append(abs(e))
                cells.append(f"{ms:9.3f} {e:+7.1%}")
            print(f"{rec['list']:<22} {rec['n_docs']:>4} {'causal' if rec['causal'] else 'full':<6} "
                  f"{p:<4} {sim:9.3f} " + " ".join(cells))
    for how, e in errs.items():
        if e:
            print(f"against {how} (packed lists, {len(e)} kernels): median |error| "
                  f"{statistics.median(e):.1%}, largest {max(e):.1%}")


if __name__ == "__main__":
    main()
