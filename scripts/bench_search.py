#!/usr/bin/env python3
"""Benchmark of `tasp-sim search`: wall time, CPU time and peak memory of
whole searches; how many configurations were excluded before simulating
(per class), pruned (per bound) and simulated; and per dimension how many
were enumerated, excluded, pruned, simulated and, simulated, did not fit.

usage: scripts/bench_search.py [--sim build/tasp-sim] [--jobs N] [--csv FILE]... [QUESTION...]

A QUESTION is the search's arguments in one string; without any, the
questions below.  Each is run once (a search is minutes at most; its
figures vary with the machine's load, say so when quoting them), its CSV
read back for the counts.  A question whose search would simulate nothing
(everything excluded) is reported by its counts alone (`--count`).
"""
import argparse
import collections
import csv
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
QUESTIONS = [
    "--model llama3-8b --topology h100x8 --seq 128K",
    "--model llama3-70b --topology h100x8x4 --seq 256K",
    # 1,024 GPUs: enumeration, exclusion and bounds only; the whole search
    # (the same without --count) takes minutes of CPU: docs/search.md,
    # section 4, gives its figures
    "--model llama3-70b --topology h100x8x32 --set generator.nodes=128 --seq 1M --count",
]
DIMS = ["scheduler", "tp", "sp", "head_parallel", "split", "dp", "zero", "recompute", "placement",
        "precision"]


def run(sim, question, jobs):
    args = shlex.split(question)
    count = "--count" in args
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = os.path.join(tmp, "s.csv")
        cmd = [sim, "search"] + args + ["--jobs", str(jobs), "-q"]
        if not count:
            cmd += ["--csv", csv_path]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        out, err = proc.communicate()
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            sys.exit(f"bench_search: {' '.join(cmd)}: exit {proc.returncode}: {err.strip()}")
        rows = list(csv.DictReader(open(csv_path))) if not count else []
        return wall, out, err, rows


def summarize(rows):
    """Counts of one search's CSV rows: per status, per excluded class and
    pruning bound, and per dimension."""
    status = collections.Counter(r["status"] for r in rows)
    print("  " + ", ".join(f"{k} {status.get(k, 0)}" for k in
                           ("simulated", "does not fit", "pruned", "excluded")))
    # excluded by class (the reason's kind), pruned by the bound's words
    klass = collections.Counter(r["class"] for r in rows if r["status"] == "excluded")
    print("  excluded by class: " + ", ".join(f"{k} {v}" for k, v in sorted(klass.items())))
    # memory: on the bound's resident part alone, or only once the
    # attention's tensors kept for the backward join it (search_bound.h)
    kept = sum(r["status"] == "excluded" and "tensors kept for the backward" in r["reason"]
               for r in rows)
    print(f"  excluded for memory: {klass.get('memory', 0) - kept} on weights, gradients, states "
          f"and saved activations alone, {kept} with the attention's kept tensors")
    bound = collections.Counter(r["reason"].split(" alone take")[0]
                                for r in rows if r["status"] == "pruned")
    print("  pruned by bound: " + ", ".join(f"{k} {v}" for k, v in sorted(bound.items())))
    for d in DIMS:
        by = collections.defaultdict(collections.Counter)
        for r in rows:
            by[r[d]][r["status"]] += 1
        def key(v):
            return (0, int(v)) if v.isdigit() else (1, v)
        cells = []
        for v in sorted(by, key=key):
            c = by[v]
            cells.append(f"{v}: {sum(c.values())}/{c['excluded']}/{c['pruned']}/"
                         f"{c['simulated'] + c['does not fit']}/{c['does not fit']}")
        print(f"  {d} (enumerated/excluded/pruned/simulated/of which did not fit): " +
              "; ".join(cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "tasp-sim"))
    ap.add_argument("--jobs", type=int, default=0, help="threads (0: one per CPU)")
    ap.add_argument("--csv", action="append", default=[],
                    help="summarize this search CSV (search --csv) instead of running one")
    ap.add_argument("questions", nargs="*")
    a = ap.parse_args()
    for f in a.csv:
        print(f"$ {f}")
        with open(f) as fh:
            summarize(list(csv.DictReader(fh)))
        print()
    if a.csv and not a.questions:
        return
    for q in a.questions or QUESTIONS:
        before = os.times()
        wall, out, err, rows = run(a.sim, q, a.jobs)
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system -
                                                              before.children_system)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"$ tasp-sim search {q}")
        print(f"  wall {wall:.1f} s, CPU {cpu:.1f} s, peak RSS of the largest search so far "
              f"{peak:.0f} MiB")
        if not rows:
            for line in out.splitlines()[1:2]:
                print("  " + line)
            print()
            continue
        summarize(rows)
        for line in err.splitlines():
            print("  " + line)
        print()


if __name__ == "__main__":
    main()
