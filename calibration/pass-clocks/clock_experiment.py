#!/usr/bin/env python3
"""An experiment, not the model: the H200 kernel model refitted at the boost
clock and passes priced at the clock they ran at, against main's model
with its fitted sustained slowdown, on the 2 x H200 pass data sets.

1. The sweeps topologies/h200x2-tool.json is fitted on
   (../h200x1-sweep/compute-n1.jsonl, sibling ../h200x1-sweep2) with every
   forward kernel divided by the factor its clock put in its time: the
   60 s chain's time-against-clock curve (../h100x1-sweep-clocks/analyse.py)
   at the kernel's measured clock (../h200x1-sweep-clocks/kernel-clocks.csv,
   sweep2's grid rerun; a kernel not rerun, and every kernel of the first
   sweep that shape does not match, at its forward-time bin's median).
   Backward kernels are left as timed (their time does not follow the
   clock: ../h100x1-chains).
2. scripts/kernel_model.py's fit with the sustained slowdown held at 0
   (no clock constant fitted; the 3 other constants and the per-pair times
   fitted as main fits them), head dims carried from the sibling as main.
3. scripts/validate_passes.py with that model (a copy of the topology in
   a temporary directory), and each forward pass's prediction times the
   factor of the clock it ran at: the rerun's measured clock for the same
   record (h200x2/record-clocks.csv), else, by the predicted pass time,
   the rerun's median factor for forward passes of that length
   (pass-length rule, from this directory's analysis: under 10 ms x1.000,
   10-30 ms x1.008, 30-100 ms x1.042, 100+ ms x1.050).  Backward passes
   unchanged.  A last variant divides that factor by the one the sweep's
   kernels of the pass's kernel length (its predicted time over n) were
   timed at: what a kernel table timed like the sweep, which the tool
   topologies price most passes from (their rows do not move with the
   refit), already holds.

With --crossval, kernel_model.py's leave-out cross-validation on the
read-back sweeps, with main's grid (its fitted slowdown) and with the
slowdown held at 0: errors against the read-back times, i.e. each forward
kernel priced at the clock it was timed at.

usage: python3 clock_experiment.py [--sim build/tasp-sim] [--crossval]"""
import argparse
import csv
import importlib.util
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CAL = os.path.dirname(HERE)
ROOT = os.path.dirname(CAL)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import kernel_model as km  # noqa: E402

spec = importlib.util.spec_from_file_location("pass_clocks", os.path.join(HERE, "analyse.py"))
PC = importlib.util.module_from_spec(spec)
spec.loader.exec_module(PC)

# the pass-length rule: the rerun's median factor for forward passes by
# pass time (analysis.txt, "where the records ran", comm and no comm)
RULE = ((10, 1.000), (30, 1.008), (100, 1.042), (1e12, 1.050))


def rule_factor(ms):
    return next(f for hi, f in RULE if ms < hi)


def corrected(path, curve, by_shape, by_bin, out_dir):
    """The sweep with each forward kernel's time read back to the boost
    clock; written to out_dir, returned as its path."""
    out = os.path.join(out_dir, os.path.basename(os.path.dirname(path)) + ".jsonl")
    n = m = 0
    with open(out, "w") as f:
        for ln in open(path):
            r = json.loads(ln)
            if r.get("op") in ("attn", "attn_fwd") and r.get("ms"):
                k = tuple(str(r[x]) for x in ("B", "H", "Hk", "D", "sq", "sk", "causal"))
                if k in by_shape:
                    fac = PC.SC.factor_at(curve, by_shape[k])
                    m += 1
                else:
                    fac = next(v for (lo, hi), v in by_bin.items() if lo <= r["ms"] < hi)
                n += 1
                r["ms"] = r["ms"] / fac
            f.write(json.dumps(r) + "\n")
    print(f"{os.path.relpath(path, ROOT)}: {n} forward kernels read back to the boost clock, "
          f"{m} at their own measured clock", file=sys.stderr)
    return out


def validate(sim, topo, passes):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "validate_passes.py"),
                          "--sim", sim, topo, passes], capture_output=True, text=True,
                         check=True).stdout
    rows = []
    for ln in out.splitlines():
        p = ln.split()
        if len(p) >= 8 and p[0] in ("fwd", "bwd") and p[-1].endswith("%"):
            rows.append(dict(pas=p[0], sched=p[1], mask=p[2], tok=int(p[3]), comm=p[4] == "yes",
                             measured=float(p[-3]), predicted=float(p[-2])))
    return rows


def summary(label, rows, key):
    def med(sel):
        e = [abs(key(r)) for r in rows if sel(r)]
        return f"{100 * statistics.median(e):.2f}% ({len(e)})" if e else "-"
    print(f"| {label} | {med(lambda r: True)} | {med(lambda r: r['tok'] >= 3072)} | "
          f"{med(lambda r: r['pas'] == 'fwd' and r['tok'] >= 3072)} | "
          f"{med(lambda r: r['pas'] == 'bwd' and r['tok'] >= 3072)} | "
          f"{med(lambda r: r['pas'] == 'fwd' and r['tok'] >= 3072 and r['measured'] >= 30)} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "tasp-sim"))
    ap.add_argument("--crossval", action="store_true",
                    help="also leave out whole shape families (minutes)")
    a = ap.parse_args()
    curve, plateau, d = PC.chain_curve("H200")
    rows = list(csv.DictReader(open(os.path.join(d, "kernel-clocks.csv"))))
    by_shape = {tuple(r[x] for x in ("B", "H", "Hk", "D", "sq", "sk", "causal")):
                float(r["sm_mhz"]) for r in rows if r["pass"] == "fwd"}
    bins = ((0, 1), (1, 3), (3, 10), (10, 30), (30, 100), (100, 1e12))
    by_bin = {}
    for r in rows:
        if r["pass"] == "fwd":
            b = next(b for b in bins if b[0] <= float(r["ms"]) < b[1])
            by_bin.setdefault(b, []).append(PC.SC.factor_at(curve, float(r["sm_mhz"])))
    by_bin = {b: statistics.median(v) for b, v in by_bin.items()}
    sweep_f = PC.sweep_factors(curve, d)
    tmp = tempfile.mkdtemp(prefix="clock-experiment-")
    try:
        main_sweep = corrected(os.path.join(CAL, "h200x1-sweep", "compute-n1.jsonl"), curve,
                               by_shape, by_bin, tmp)
        sib_sweep = corrected(os.path.join(CAL, "h200x1-sweep2", "kernels-n1.jsonl"), curve,
                              by_shape, by_bin, tmp)
        grid = [(u, 0.0, 0.01) for u in (0.6, 0.7, 0.8, 0.9)]
        sms = 132
        c = km.fit(km.load([main_sweep]), sms, grid=grid)
        carried = km.carry_dims(c, km.fit(km.load([sib_sweep]), sms, grid=grid))
        obj = km.topology_object(c, sms, "clock experiment (calibration/pass-clocks/"
                                 "clock_experiment.py): fitted at the boost clock, no slowdown; "
                                 f"head dims {carried} carried")
        print("boost-clock fit: " + json.dumps({k: obj[k] for k in (
            "lone_cta_share", "sustained_slowdown", "fwd_fixed_us", "bwd_fixed_us")}))
        measured = {}
        for r in csv.DictReader(open(os.path.join(HERE, "h200x2", "record-clocks.csv"))):
            measured[(r["sched"], r["mask"], r["pass"], r["comm"] == "True",
                      int(r["tokens_per_gpu"]))] = PC.SC.factor_at(curve, float(r["sm_mhz"]))
        print("| data set, model | all passes | from 3K tokens/GPU | forward from 3K | "
              "backward from 3K | forward from 3K, 30 ms and longer |")
        print("|---|---:|---:|---:|---:|---:|")
        for n, passes, topo_name in ((2, "h200x2-tool/passes-n2.jsonl", "h200x2-tool.json"),
                                     (2, "h200x2-sp/passes-n2.jsonl", "h200x2-tool.json"),
                                     (4, "h200x4-tool/passes-n4.jsonl", "h200x4-tool.json")):
            topo = os.path.join(ROOT, "topologies", topo_name)
            if not os.path.exists(os.path.join(CAL, passes)):
                continue
            base = validate(a.sim, topo, os.path.join(CAL, passes))
            exp_topo = os.path.join(tmp, topo_name)
            shutil.copy(topo, exp_topo)
            km.write_topology(exp_topo, obj)
            boost = validate(a.sim, exp_topo, os.path.join(CAL, passes))
            for r in boost:
                k = (r["sched"], r["mask"], r["pas"], r["comm"], r["tok"])
                f = 1.0
                if r["pas"] == "fwd":
                    f = measured.get(k) if n == 2 and k in measured else \
                        rule_factor(r["predicted"])
                r["priced"] = r["predicted"] * f
                # the same over the clock the sweep timed a kernel of the
                # pass's kernel length at (a table timed like the sweep)
                kms = r["predicted"] / n
                r["over_table"] = r["priced"] / (next(
                    v for (lo, hi), v in sweep_f.items() if lo <= kms < hi)
                    if r["pas"] == "fwd" else 1.0)
            summary(f"{passes}, main", base, lambda r: r["predicted"] / r["measured"] - 1)
            summary(f"{passes}, boost-clock fit, no pass clock", boost,
                    lambda r: r["predicted"] / r["measured"] - 1)
            summary(f"{passes}, boost-clock fit, pass at its clock", boost,
                    lambda r: r["priced"] / r["measured"] - 1)
            summary(f"{passes}, boost-clock fit, pass at its clock over the sweep's", boost,
                    lambda r: r["over_table"] / r["measured"] - 1)
        if a.crossval:  # leave whole shape families out, as kernel_model.py crossval
            for path in (main_sweep, sib_sweep):
                for label, g in (("main's grid (fitted slowdown)", km.GRID),
                                 ("slowdown held at 0", grid)):
                    data = km.load([path])
                    tot = []
                    for fam, by in km.crossval(data, sms, grid=g).items():
                        for w, preds in by.items():
                            if w in ("all", km.PAIR_RULES[0]):
                                tot += km.fold_errors(preds)
                    print(f"crossval, forward kernels at their measured clock, "
                          f"{os.path.basename(path)}, {label}: all folds {km.summary(tot)}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
