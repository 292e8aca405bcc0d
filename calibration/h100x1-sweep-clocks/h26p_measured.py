#!/usr/bin/env python3
"""An experiment, not a model: branch h26p-clock's kernel model (commit
ed82643, not landed) fitted and cross-validated twice on the same sweep,
with its own clock factors (POWER_CAP: a sweep forward kernel x1.0, x1.025
or x1.047 on the H100 by the load its repeats put on the GPU; x1.011,
x1.021 on the H200; a pass x1.047 / x1.021) and with the measured ones of
this directory and ../h200x1-sweep-clocks: each sweep forward kernel at the
factor the 60 s chain's time-against-clock curve gives at the SM clock
measured during it (a kernel this run did not time: the median factor of
the measured forward kernels of its time bin), a pass at the chain's
plateau (x1.074 H100, x1.048 H200).  Backward x1 in both.  Nothing is
refitted to the clocks: the factors are read, the rates fitted as h26p
fits them.

usage: git archive ed82643 | tar -x -C H26P
       python3 h26p_measured.py H26P [h100|h200]"""
import bisect
import importlib.util
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import analyse  # noqa: E402  (its chain curve and per-kernel clocks)

H26P, GPU = sys.argv[1], sys.argv[2]
RUN, SWEEPS = {"h100": (("H100", "h100x1-sweep-clocks"),
                        ["h100x1-sweep/kernels-n1.jsonl", "h100x1-sweep/repeat/kernels-n1.jsonl"]),
               "h200": (("H200", "h200x1-sweep-clocks"),
                        ["h200x1-sweep2/kernels-n1.jsonl"])}[GPU]
spec = importlib.util.spec_from_file_location("km", os.path.join(H26P, "scripts",
                                                                   "kernel_model.py"))
km = importlib.util.module_from_spec(spec)
spec.loader.exec_module(km)


def measured_factors():
    """(shape -> forward factor at its measured clock, [(bin upper ms,
    median factor)] for shapes not timed, the chain's plateau)."""
    name, d = RUN
    run_dir = os.path.join(analyse.CAL, d)
    _, rows, recs, _ = analyse.kernel_clocks(name, run_dir)
    c, curve = analyse.chain(name, run_dir, rows)
    ks = c["kernels_start_ms_dur_ms"]
    plateau = statistics.median(dur / ks[0][1] for s, dur in ks if s >= 10e3)
    by_shape, by_bin = {}, {}
    for r in recs:
        if r["pass_"] != "fwd":
            continue
        f = analyse.factor_at(curve, r["sm_mhz"])
        by_shape[(r["B"], r["H"], r["D"], r["sq"], r["sk"], r["causal"])] = f
        by_bin.setdefault(analyse.bin_of(r["ms"]), []).append(f)
    bins = sorted((hi, statistics.median(v)) for (lo, hi), v in by_bin.items())
    return by_shape, bins, plateau


def run(label):
    data = km.load([os.path.join(analyse.CAL, p) for p in SWEEPS])
    c = km.fit(data, 132, km.POWER_CAP[GPU])
    errs = km.errors(c, data, 132)
    print(f"{label}: fit {km.summary(errs)}")
    long_fwd = [x for x in errs if not x[0][6] and x[0][3] >= 32768 and x[0][0] * x[0][1] >= 16]
    print("  forward from 32K tokens at B x H >= 16, median error by head dim: " +
          ", ".join(f"{d} {100 * statistics.median([e for k, e in long_fwd if k[2] == d]):+.1f}%"
                    for d in sorted({k[2] for k, _ in long_fwd})))
    for causal in (False, True):
        for lo, hi in ((0, 10), (10, 30), (30, 100), (100, 1e9)):
            sel = [e for k, e in errs if not k[6] and k[5] == causal and lo <= k[7] * 1e3 < hi]
            if sel:
                print(f"  fwd {'causal' if causal else 'full'} {lo}-{hi:g} ms: {len(sel)} "
                      f"kernels, median error {100 * statistics.median(sel):+.1f}%")
    allerr = []
    for fam, sel in km.FAMILIES.items():
        if fam == "B1":
            continue
        train = [k for k in data if not sel(k)]
        test = [k for k in data if sel(k)]
        allerr += km.errors(km.fit(train, 132, km.POWER_CAP[GPU]), test, 132)
    print(f"  crossval all folds: {km.summary(allerr)}")


run("h26p-clock as committed")
by_shape, bins, plateau = measured_factors()


def sweep_load_s(k, t):  # the kernel itself, for clock_factor to look up
    return (tuple(k[:6]), t)


def clock_factor(c, bwd, load=None):
    if bwd:
        return 1.0
    if load is None:
        return plateau
    shape, t = load
    if shape in by_shape:
        return by_shape[shape]
    i = bisect.bisect_right([hi for hi, _ in bins], t * 1e3)
    return bins[min(i, len(bins) - 1)][1]


km.sweep_load_s, km.clock_factor = sweep_load_s, clock_factor
km.POWER_CAP[GPU]["fwd_hot"] = plateau
print(f"measured: {len(by_shape)} forward kernels at their own clock, plateau x{plateau:.3f}")
run("h26p-clock with the measured clocks")
