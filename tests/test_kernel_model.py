#!/usr/bin/env python3
"""scripts/kernel_model.py (which fits the kernel model) and src/kernel_model.c
(which prices kernels with it) are the same model: for kernels beyond the
H100 and H200 tables, head dims no sweep measured among them, tasp-sim's
price of one forward kernel equals the script's prediction from the
constants in the topology; the script's fit of a small synthetic sweep
recovers the constants that made it; its cross-validation predicts a
left-out family from none of that family's kernels, and a sibling GPU's
per-pair times in a constant ratio carry a left-out head dim exactly.
Usage: test_kernel_model.py PATH/TO/tasp-sim"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from checks import ROOT, check, finish  # noqa: E402  (puts scripts/ on the path)
from pycheck import kernel_price  # noqa: E402
import kernel_model as km  # noqa: E402

sim = sys.argv[1]


def constants(topo):
    return km.from_topology(os.path.join(ROOT, topo))


def priced(topo, B, H, D, L, causal):
    return kernel_price(sim, ["--topology", os.path.join(ROOT, topo), "--sched", "ring",
                              "--pass", "fwd", "--seq", str(L), "--heads", str(H),
                              "--kv-heads", str(H), "--head-dim", str(D), "--batch", str(B),
                              "--mask", "causal" if causal else "full"])


# beyond the tables: few heads, head dims 96-256, long, causal tails; and
# head dims the sweeps did not measure (80, 112, 160, 224, 48: between two
# tile configurations, within one, below all), priced by km.PAIR_RULE
shapes = [(1, 1, 128, 16384, True), (1, 2, 64, 8192, False), (1, 4, 256, 32768, True),
          (4, 1, 96, 4096, False), (1, 8, 192, 65536, True), (1, 16, 128, 131072, True),
          (2, 64, 256, 8192, False), (1, 1, 64, 262144, True),
          (1, 4, 80, 16384, True), (1, 8, 112, 32768, False), (1, 2, 160, 16384, False),
          (1, 4, 224, 65536, True), (1, 8, 48, 16384, False)]
for topo in ("topologies/h100x8.json", "topologies/h200x2-tool.json"):
    sms, c = constants(topo)
    worst = 0
    for B, H, D, L, causal in shapes:
        t, conf = priced(topo, B, H, D, L, causal)
        p = km.predict(c, B, H, D, L, L, causal, False, sms)
        worst = max(worst, abs(t / p - 1))
        if conf != "extrapolated":
            check(False, f"{topo}: {B}x{H} D{D} {L}: beyond the table")
    check(worst < 1e-4, f"{topo}: tasp-sim and kernel_model.py agree on {len(shapes)} kernels "
          f"(worst {100 * worst:.4f}%)")
    measured = {int(d) for d in c["tau_fwd"]}
    check(not {80, 112, 160, 224, 48} & measured, f"{topo}: the unmeasured head dims are so")

# a synthetic sweep from known constants: the fit finds them again
truth = {"u": 0.7, "theta": 0.04, "t_theta": 0.01, "t0_fwd": 30e-6, "t0_bwd": 50e-6,
         "tau_fwd": {"64": 100000.0, "128": 180000.0}, "tau_bwd": {"64": 280000.0, "128": 520000.0}}
data = []
for D in (64, 128):
    for bh in (1, 4, 32):
        for L in (4096, 16384, 65536):
            for causal in (False, True):
                for bwd in (False, True):
                    data.append((1, bh, D, L, L, causal, bwd,
                                 km.predict(truth, 1, bh, D, L, L, causal, bwd, 132)))
got = km.fit(data, 132, grid=[(u, 0.04, 0.01) for u in (0.6, 0.7, 0.8)])
check(got["u"] == 0.7, "fit recovers the lone CTA share")
check(abs(got["t0_fwd"] / 30e-6 - 1) < 0.02 and
      abs(got["t0_bwd"] / 50e-6 - 1) < 0.02, "fit recovers the fixed costs")
check(all(
    abs(got[k][d] / truth[k][d] - 1) < 0.01 for k in ("tau_fwd", "tau_bwd") for d in ("64", "128")), "fit recovers the per-pair times")

# the pricing rules between and beyond measured head dims, by hand: rate
# (FLOP rate linear in D within a tile configuration) and affine (a + b D)
t = {64: 100.0, 96: 120.0, 128: 150.0, 192: 250.0, 256: 330.0}
check(km.pair_fs_rate(t, 112) == 112 / (96 / 120 + (128 / 150 - 96 / 120) * 0.5), "rate: between")
check(km.pair_fs_rate(t, 80) == 80 / (96 / 120), "rate: the configuration's nearest beyond")
check(km.pair_fs_rate({64: 100.0, 256: 330.0}, 128) == 128 / (64 / 100 + (256 / 330 - 64 / 100) / 3),
      "rate: no dim of the configuration: all of them")
check(abs(km.pair_fs_affine(t, 112) - 135.0) < 1e-9, "affine: between")
check(abs(km.pair_fs_affine(t, 160) - 210.0) < 1e-9, "affine: the configuration's line beyond")
a = 120 - 96 * 30 / 32  # the intercept of the one configuration measured twice
check(abs(km.pair_fs_affine({64: 100.0, 96: 120.0, 128: 150.0, 192: 250.0}, 256) -
          (a + (250 - a) * 256 / 192)) < 1e-9, "affine: a lone dim's slope over the shared intercept")

# fit --sibling: the head dims only the sibling measured are added at the
# sibling's time times the ratio at the dims both measured (here 0.5 at 64,
# 0.6 at 128: 0.55 at 96); the dims both measured keep this GPU's times
own = {"tau_fwd": {"64": 50.0, "128": 120.0}, "tau_bwd": {"64": 150.0, "128": 360.0}}
other = {"tau_fwd": {"64": 100.0, "96": 140.0, "128": 200.0},
         "tau_bwd": {"64": 300.0, "96": 420.0, "128": 600.0}}
check(km.carry_dims(own, other) == [96], "fit --sibling: carries the dim only the sibling measured")
check(abs(own["tau_fwd"]["96"] - 140.0 * 0.55) < 1e-9 and abs(own["tau_bwd"]["96"] - 420.0 * 0.55) < 1e-9,
      "fit --sibling: the sibling's time times the interpolated ratio")
check(own["tau_fwd"]["64"] == 50.0 and own["tau_fwd"]["128"] == 120.0, "fit --sibling: own dims kept")

# cross-validation: a fold's prediction uses none of its family's kernels
# (their times multiplied by 3 move no prediction of the fold, and do move
# the other folds', which trained on them); a sibling GPU 3% slower at
# every head dim carries a left-out head dim's time exactly, where the
# FLOP-rate rule cannot (the truth's head dim 96 is off its line)
truth3 = dict(truth, tau_fwd={"64": 100000.0, "96": 150000.0, "128": 180000.0},
              tau_bwd={"64": 280000.0, "96": 430000.0, "128": 520000.0})
data3 = []
for D in (64, 96, 128):
    for bh in (1, 32):
        for L in (4096, 16384):
            for causal in (False, True):
                for bwd in (False, True):
                    data3.append((1, bh, D, L, L, causal, bwd,
                                  km.predict(truth3, 1, bh, D, L, L, causal, bwd, 132)))
sib = {k: {d: v * 1.03 for d, v in truth3[k].items()} for k in ("tau_fwd", "tau_bwd")}
small = [(0.7, 0.04, 0.01)]
fams = {f: km.FAMILIES[f] for f in ("D64", "D96", "D128", "BH1-8")}
def predictions(folds):
    """{family: {rule: [(shape, predicted s)]}}: the kernels' measured times left out"""
    return {f: {w: [(k[:7], p) for k, p in ps] for w, ps in by.items()} for f, by in folds.items()}


folds = km.crossval(data3, 132, sibling=sib, grid=small, families=fams)
base = predictions(folds)
check(set(base["D96"]) == {"rate", "affine", "sibling"} and set(base["BH1-8"]) == {"all"},
      "head-dim folds by every rule and the sibling; shape folds once")
for fam in ("D96", "BH1-8"):
    moved = [k[:7] + (k[7] * 3 if fams[fam](k) else k[7],) for k in data3]
    again = predictions(km.crossval(moved, 132, sibling=sib, grid=small, families=fams))
    check(again[fam] == base[fam], f"leave out {fam}: predicted from none of its kernels")
    check(again["D64"] != base["D64"], f"leave out D64: moves with {fam}'s kernels, which it used")
worst = max(abs(e) for _, e in km.fold_errors(folds["D96"]["sibling"]))
check(worst < 0.002, f"a constant-ratio sibling carries the left-out head dim (worst {worst:.4f})")
check(max(abs(e) for _, e in km.fold_errors(folds["D96"]["rate"])) > 0.05,
      "the FLOP-rate rule misses the truth's head dim 96 (the sibling's check is not trivial)")
# bad input: exit 2 naming the file (and line), the topology untouched
with tempfile.TemporaryDirectory() as tmp:
    topo_copy = os.path.join(tmp, "t.json")
    shutil.copy(os.path.join(ROOT, "topologies", "h200x2-tool.json"), topo_copy)
    before = open(topo_copy).read()
    for body, where in (('{"op": "attn", "B": 1, "ms": 1.0}\n', "bad.jsonl:1:"),
                        ('{"op": "attn"}\n', "bad.jsonl: expected timed forward and backward")):
        bad = os.path.join(tmp, "bad.jsonl")
        open(bad, "w").write(body)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "kernel_model.py"), "fit",
                            os.path.join(ROOT, "calibration", "h200x1-sweep", "compute-n1.jsonl"),
                            "--sibling", bad, "--write", topo_copy], capture_output=True, text=True)
        check(r.returncode == 2 and where in r.stderr and "Traceback" not in r.stderr,
              f"a bad sibling sweep: exit 2 naming {where} (got {r.returncode}: {r.stderr.strip()})")
    check(open(topo_copy).read() == before, "a bad sweep writes nothing")

# the sweep's plan (scripts/calibrate/kernel_sweep.py): bounded, and every
# axis value at several values of the others; the rest listed unmeasured
sys.path.insert(0, os.path.join(ROOT, "scripts", "calibrate"))
import kernel_sweep as ks  # noqa: E402

todo, skip = ks.plan()
keys = [tuple(sorted(k.items())) for k in todo]
check(len(set(keys)) == len(keys), "each kernel planned once")
check(all(
    ks.qkvo_bytes(k["B"], k["H"], k["Hk"], k["D"], k["sq"], k["sk"]) <= 16 * ks.GIB and
    ks.flops(k["B"], k["H"], k["D"], k["sq"], k["sk"], k["causal"]) <= 20e12 for k in todo), "every planned kernel within 16 GiB and 20 TFLOP")
check(len(todo) + len(skip) == len(ks.grid()) and all(k["unmeasured"] for k in skip),
      "every kernel of the grid planned or unmeasured with a reason")
for axis, values in (("D", ks.HEAD_DIMS), ("sq", ks.LENGTHS)):
    got = {k[axis] for k in todo}
    check(set(values) <= got, f"every {axis} planned")
check({k["B"] * k["H"] for k in todo} ==
      {1, 2, 4, 8, 16, 32, 64, 128, 256} and any(k["B"] == 4 for k in todo), "B x H 1-256 and batch 4 planned")
check(any(k["sk"] > k["sq"] for k in todo) and
      any(k["sk"] < k["sq"] for k in todo), "non-square kernels both ways")
check([k["sq"] for k in todo] != sorted(k["sq"] for k in todo),
      "the order is shuffled, not by length")
finish("test_kernel_model")
