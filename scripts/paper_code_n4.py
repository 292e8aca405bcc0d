#!/usr/bin/env python3
"""The TASP paper's own forward programs, measured at n = 4 on one NVSwitch
node (calibration/h100x4-tasp-code), beside tasp-sim's prediction of the
same points on the topology fitted to that machine.

usage: scripts/paper_code_n4.py [--sim build/tasp-sim] [--table passes|parts]
       (also: scripts/paper_study.py --print code-n4 | code-n4-parts)

passes: per point, the measured pass (the median over 30 timed passes of
the slowest GPU's CUDA-event time, as the paper's script times it) and the
model's step_ms, for Ring and TASP (full mask) and Zigzag-Ring and TASP
(causal), and TASP's speedup over its baseline in both runs and in the
model.  parts: what each mechanism of the code costs, measured by taking it
out of the same program (README of the calibration folder), beside the
model's pass without communication (--alone: each GPU's program with its
communication calls taken out).

Both runs came on 4 x H200 (the call asked for H100s), so the model runs on
topologies/h200x4-tool.json, fitted to 4 H200 of the same kind of host; the
scenario scenarios/paper-h200x4.json holds the batch-1, 20-head slice.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = os.path.join(ROOT, "calibration", "h100x4-tasp-code")
RUNS = ("paper-code-n4-run1.jsonl", "paper-code-n4-run2.jsonl")
TOPOLOGY = os.path.join(ROOT, "topologies", "h200x4-tool.json")
# the 4 x H100 node the calls asked for: its links, kernels and overheads
# measured and fitted in calibration/h100x4-sp (the model's view of H100)
TOPOLOGY_H100 = os.path.join(ROOT, "calibration", "h100x4-sp", "h100x4-tool.json")
# measured program -> (model scheduler, mask)
PROGRAMS = {"ring-full": ("ring", "full"), "tasp-full": ("tasp", "full"),
            "zigzag-causal": ("zigzag", "causal"), "tasp-causal": ("tasp", "causal")}


def load(name):
    """{(seq, batch, heads, program, variant): ms} and {(seq, batch, heads): cat ms}
    of one run; ms is the median over timed passes of the slowest GPU."""
    passes, cat = {}, {}
    with open(os.path.join(DATA, name)) as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] == "pass" and "ms_median_slowest" in r:
                passes[(r["seq"], r["batch"], r["heads"], r["program"], r["variant"])] = \
                    r["ms_median_slowest"]
            elif r["kind"] == "cat":
                cat[(r["seq"], r["batch"], r["heads"])] = max(r["ms_per_pass_per_rank"])
    return passes, cat


def comm_times(name):
    """{(seq, batch, heads, program): ms} of the programs as written: the
    communication time their own per-step events measure (comm_total_time,
    the paper's communication figure), the slowest GPU's mean."""
    res = {}
    with open(os.path.join(DATA, name)) as f:
        for line in f:
            r = json.loads(line)
            if r["kind"] == "pass" and r["variant"] == "code" and "per_rank" in r:
                res[(r["seq"], r["batch"], r["heads"], r["program"])] = max(
                    sum(x[1] for x in g) / len(g) for g in r["per_rank"])
    return res


def points(passes):
    """The measured (seq, batch, heads), 20 heads first, then by size."""
    return sorted({k[:3] for k in passes}, key=lambda p: (p[2] != 20, p[0] * p[1] * p[2], p[0]))


def simulate(sim, pts, alone=False, topology=TOPOLOGY):
    """{(seq, batch, heads, scheduler, mask): step_ms} from tasp-sim, one
    call per (batch, heads)."""
    res = {}
    for b, h in sorted({(p[1], p[2]) for p in pts}):
        seqs = sorted({p[0] for p in pts if p[1:] == (b, h)})
        args = [sim, "--topology", topology, "--sp", "4", "--sched", "ring,zigzag,tasp",
                "--seq", ",".join(map(str, seqs)), "--batch", str(b), "--heads", str(h),
                "--kv-heads", str(h), "--head-dim", "64", "--mask", "full,causal",
                "--pass", "fwd", "--csv", "-", "--quiet", "--jobs", "1"]
        if alone:
            args.append("--alone")
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        for r in csv.DictReader(io.StringIO(out)):
            key = (int(r["seq_len"]), int(r["batch"]), int(r["heads"]), r["scheduler"], r["mask"])
            res[key] = float(r["step_ms"])
    return res


def passes_table(sim):
    runs = [load(n)[0] for n in RUNS]
    last = runs[-1]
    pts = points(last)
    model = simulate(sim, pts)
    out = ["| seq | batch | heads | Ring full ms: measured / model | TASP full ms | "
           "TASP over Ring: run 1, run 2 / model | Zigzag causal ms | TASP causal ms | "
           "TASP over Zigzag: run 1, run 2 / model |",
           "|---:|---:|---:|---|---|---|---|---|---|"]
    err = {p: [] for p in PROGRAMS}
    sp = {"full": ([], []), "causal": ([], [])}
    for p in pts:
        cells = []
        for prog in PROGRAMS:
            m = model[p + PROGRAMS[prog]]
            cells.append(f"{last[p + (prog, 'code')]:.2f} / {m:.2f}")
            err[prog].append(m / last[p + (prog, "code")] - 1)
        for mask, base in (("full", "ring"), ("causal", "zigzag")):
            meas = [r[p + (f"{base}-{mask}", "code")] / r[p + (f"tasp-{mask}", "code")]
                    for r in runs]
            mod = model[p + (base, mask)] / model[p + ("tasp", mask)]
            sp[mask][0].append(sum(meas) / len(meas))
            sp[mask][1].append(mod)
            cells.append(", ".join(f"{x:.2f}x" for x in meas) + f" / {mod:.2f}x")
        cells = cells[:2] + [cells[4]] + cells[2:4] + [cells[5]]
        out.append(f"| {p[0]} | {p[1]} | {p[2]} | " + " | ".join(cells) + " |")
    out.append("")
    for mask, base in (("full", "Ring"), ("causal", "Zigzag")):
        m, s = sp[mask]
        out.append(f"- TASP over {base} ({mask}), mean over the {len(m)} points: measured "
                   f"{sum(m) / len(m):.2f}x (both runs' mean), model {sum(s) / len(s):.2f}x; "
                   f"largest measured {max(m):.2f}x, model {max(s):.2f}x.")
    h100 = simulate(sim, pts, topology=TOPOLOGY_H100)
    for mask, base in (("full", "ring"), ("causal", "zigzag")):
        s = [h100[p + (base, mask)] / h100[p + ("tasp", mask)] for p in pts]
        out.append(f"- The model on 4 x H100 (calibration/h100x4-sp/h100x4-tool.json), "
                   f"TASP over {base.capitalize()} ({mask}): mean {sum(s) / len(s):.2f}x, "
                   f"largest {max(s):.2f}x.")
    for prog, e in err.items():
        big = [x for p, x in zip(pts, e) if min_ms(last, p, prog) >= 5]
        out.append(f"- {prog}: model / measured - 1, median {median(e):+.1%}"
                   f" (passes of 5 ms or more: {median(big):+.1%}, {len(big)} points)")
    return "\n".join(out)


def min_ms(passes, p, prog):
    return passes[p + (prog, "code")]


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if xs else float("nan")


def parts_table(sim):
    passes, cat = load(RUNS[-1])
    pts = points(passes)
    alone = simulate(sim, pts, alone=True)
    out = ["| seq | batch | heads | Ring full ms: code / no host sync / no comm / model alone | "
           "TASP full ms: code / no host sync / no comm / model alone | TASP's torch.cat ms per pass |",
           "|---:|---:|---:|---|---|---:|"]
    sync = []
    for p in pts:
        cells = []
        for prog in ("ring-full", "tasp-full"):
            v = [passes[p + (prog, x)] for x in ("code", "nosync", "nocomm")]
            sync.append(v[0] - v[1])
            cells.append(" / ".join(f"{x:.2f}" for x in v) +
                         f" / {alone[p + PROGRAMS[prog]]:.2f}")
        out.append(f"| {p[0]} | {p[1]} | {p[2]} | {cells[0]} | {cells[1]} | {cat[p]:.2f} |")
    out.append("")
    comm = comm_times(RUNS[-1])
    for mask, base in (("full", "ring"), ("causal", "zigzag")):
        r = [comm[p + (f"{base}-{mask}",)] / comm[p + (f"tasp-{mask}",)] for p in pts]
        out.append(f"- Communication time as the code's own events measure it "
                   f"(comm_total_time), {base.capitalize()} over TASP ({mask}): "
                   f"{min(r):.2f}-{max(r):.2f}x, mean {sum(r) / len(r):.2f}x.")
    out.append(f"- Host synchronize (code less no host sync, Ring and TASP, all points): "
               f"median {median(sync) * 1e3:+.0f} us, range {min(sync) * 1e3:+.0f} to "
               f"{max(sync) * 1e3:+.0f} us per pass.")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--table", choices=("passes", "parts"), default="passes")
    a = ap.parse_args(argv)
    print(passes_table(a.sim) if a.table == "passes" else parts_table(a.sim))


if __name__ == "__main__":
    sys.exit(main())
