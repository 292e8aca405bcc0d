#!/usr/bin/env python3
"""Compare measured whole passes (scripts/calibrate: passes-nN.jsonl) with
tasp-sim's predictions on a topology.

usage: scripts/validate_passes.py TOPOLOGY.json PASSES.jsonl [--sim build/tasp-sim]
           [--markdown] [--max-median PCT] [--min-tokens T]

Prints one row per measured pass (measured ms, predicted ms, error) and the
median |error|, over all passes and over those with communication.  With
--max-median the exit status is 1 when the median over all passes exceeds
PCT (a test uses this).  Passes timed without their communication are
predicted with --alone (each GPU runs its own work, waiting on no other).  With --min-tokens the figures also cover the
passes with at least T tokens per GPU alone ("from T tokens/GPU: median
... max ..."), the band the fidelity targets name.
"""
import argparse
import csv
import io
import json
import statistics
import subprocess
import sys


def measured_cycles(r):
    """The Hamiltonian cycles the measured TASP pass used: the record's
    tasp_cycles, or calibrate.py's choice (a ring and its reverse)."""
    if r.get("tasp_cycles"):
        return r["tasp_cycles"]
    ring = list(range(r["n"]))
    cycles = [ring, ring[:1] + ring[:0:-1]] if r["n"] > 2 else [ring]
    return ",".join("-".join(map(str, c)) for c in cycles)


def predict(sim, topo, rows):
    """{(sched, mask, seq, comm, pass): predicted ms} for the measured rows."""
    out = {}
    groups = {}
    for r in rows:
        groups.setdefault((r["mask"], r["comm"], r["n"], r["B"], r["H"], r["D"], r["pass"],
                           measured_cycles(r), r.get("attention", "softmax")),
                          set()).add((r["sched"], r["seq"]))
    for (mask, comm, n, B, H, D, pas, cycles, attention), pts in sorted(groups.items()):
        scheds = sorted({s for s, _ in pts})
        seqs = sorted({q for _, q in pts})
        args = [sim, "--topology", topo, "--sched", ",".join(scheds),
                "--seq", ",".join(map(str, seqs)), "--sp", str(n), "--batch", str(B),
                "--heads", str(H), "--kv-heads", str(H), "--head-dim", str(D),
                "--mask", mask, "--pass", pas, "--attention", attention, "--csv", "-", "--quiet",
                "--jobs", "1"]
        if "tasp" in scheds:  # the only scheduler that takes given cycles
            args += ["--tasp-cycles", cycles]
        if not comm:  # the program with its communication calls taken out
            args.append("--alone")
        res = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        for c in csv.DictReader(io.StringIO(res)):
            out[(c["scheduler"], mask, int(c["seq_len"]), comm, pas)] = float(c["step_ms"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("topology")
    ap.add_argument("passes")
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--max-median", type=float)
    ap.add_argument("--min-tokens", type=int)
    a = ap.parse_args()
    rows = [json.loads(line) for line in open(a.passes) if line.strip()]
    pred = predict(a.sim, a.topology, rows)
    errs, errs_comm, by_pass, errs_big = [], [], {}, []
    if a.markdown:
        print("| pass | schedule | mask | tokens/GPU | comm | measured ms | predicted ms | error |")
        print("|---|---|---|---:|---|---:|---:|---:|")
    else:
        print(f"{'pass':4} {'sched':7} {'mask':6} {'tok/GPU':>7} {'comm':5} {'measured':>10} "
              f"{'predicted':>10} {'error':>7}")
    for r in rows:
        p = pred[(r["sched"], r["mask"], r["seq"], r["comm"], r["pass"])]
        e = p / r["ms"] - 1
        errs.append(abs(e))
        if a.min_tokens is not None and r["tokens_per_gpu"] >= a.min_tokens:
            errs_big.append(abs(e))
        by_pass.setdefault(r["pass"], []).append(abs(e))
        if r["comm"]:
            errs_comm.append(abs(e))
        comm = "yes" if r["comm"] else "no"
        if a.markdown:
            print(f"| {r['pass']} | {r['sched']} | {r['mask']} | {r['tokens_per_gpu']} | {comm} | "
                  f"{r['ms']:.3f} | {p:.3f} | {100 * e:+.1f}% |")
        else:
            print(f"{r['pass']:4} {r['sched']:7} {r['mask']:6} {r['tokens_per_gpu']:7d} {comm:5} "
                  f"{r['ms']:10.3f} {p:10.3f} {100 * e:+6.1f}%")
    med, med_comm = 100 * statistics.median(errs), 100 * statistics.median(errs_comm)
    print(f"\nmedian |error|: {med:.2f}% over {len(errs)} passes, {med_comm:.2f}% over the "
          f"{len(errs_comm)} with communication; max {100 * max(errs):.1f}%")
    if errs_big:
        print(f"from {a.min_tokens} tokens/GPU: median {100 * statistics.median(errs_big):.2f}% "
              f"max {100 * max(errs_big):.1f}% over {len(errs_big)} passes")
    if len(by_pass) > 1:
        print("by pass: " + ", ".join(f"{k} {100 * statistics.median(v):.2f}% over {len(v)}"
                                      for k, v in sorted(by_pass.items())))
    if a.max_median is not None and med > a.max_median:
        print(f"validate: median |error| {med:.2f}% exceeds {a.max_median}%", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
