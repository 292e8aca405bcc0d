#!/usr/bin/env python3
"""Each method's best configuration in a `tasp-sim search --csv` file, with
the compute-alone lower bound the search pruned by (bound_s: every layer
op as compute prices it plus the method's attention plan on its busiest
GPU) and how far the simulated step lies above it: the share of the step
that communication, waits and imbalance beyond the busiest GPU's compute
add.  It tells apart a method that loses on compute (a higher bound: its
kernels are smaller or less balanced) from one that loses on what it
exposes (the same bound, a step further above it).

usage: scripts/search_best.py FILE.csv [--objective tokens|step] [--sim IGNORED]

Prints a markdown table, best method first: method, TP, SP, split, DP,
ZeRO, recompute, step_s, bound_s, step over bound, tokens/s per GPU (the
split after a head-parallel degree U: "UxW", as the search's table).
Only simulated configurations count (status "simulated"; a pruned one has
no step).  Bad input: a message naming the file and what was expected,
exit status 2.
"""
import argparse
import csv
import sys

NEEDED = ["scheduler", "tp", "sp", "split", "dp", "zero", "recompute", "status", "bound_s",
          "step_s", "tokens_per_s_per_gpu"]


def fail(msg):
    print(f"search_best: {msg}", file=sys.stderr)
    sys.exit(2)


def best_per_method(rows, objective):
    """{method: its best simulated row}; ties keep the first in file order."""
    best = {}
    for r in rows:
        if r["status"] != "simulated":
            continue
        key = (float(r["tokens_per_s_per_gpu"]) if objective == "tokens"
               else -float(r["step_s"]))
        m = r["scheduler"]
        if m not in best or key > best[m][0]:
            best[m] = (key, r)
    return [r for _, r in sorted(best.values(), key=lambda kr: -kr[0])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--objective", choices=["tokens", "step"], default="tokens")
    ap.add_argument("--sim", help="not used (scripts/docs_tables.py passes every script one)")
    a = ap.parse_args()
    try:
        with open(a.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{a.csv}: cannot read: {e.strerror}")
    missing = [c for c in NEEDED if not rows or c not in rows[0]]
    if missing:
        fail(f"{a.csv}: expected a tasp-sim search CSV with the columns {','.join(NEEDED)}; "
             f"{'no rows' if not rows else 'missing ' + ','.join(missing)}")
    try:
        best = best_per_method(rows, a.objective)
    except ValueError:
        fail(f"{a.csv}: a simulated row without a number in step_s or tokens_per_s_per_gpu")
    if not best:
        fail(f"{a.csv}: no simulated configuration")
    print("| method | tp | sp | split | dp | zero | recompute | step_s | bound_s "
          "| step over bound | tok/s/GPU |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for r in best:
        step, bound = float(r["step_s"]), float(r["bound_s"])
        split = r["split"] if r["split"] not in ("", "0") else "-"
        # a head-parallel degree U before the split (double ring's
        # Ulysses degree; CSVs from before it have no such column): "UxW"
        if r.get("head_parallel", "") not in ("", "0", "1"):
            split = f"{r['head_parallel']}x{split}"
        print(f"| {r['scheduler']} | {r['tp']} | {r['sp']} | {split} | {r['dp']} | {r['zero']} "
              f"| {r['recompute']} | {step:.2f} | {bound:.2f} | {step / bound - 1:.1%} "
              f"| {float(r['tokens_per_s_per_gpu']):.1f} |")


if __name__ == "__main__":
    main()
