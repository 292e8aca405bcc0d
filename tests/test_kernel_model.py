#!/usr/bin/env python3
"""scripts/kernel_model.py (which fits the kernel model) and src/kernel_model.c
(which prices kernels with it) are the same model: for kernels beyond the
H100 and H200 tables, tasp-sim's price of one forward kernel equals the
script's prediction from the constants in the topology, and the script's
fit of a small synthetic sweep recovers the constants that made it.
Usage: test_kernel_model.py PATH/TO/tasp-sim"""
import csv
import io
import json
import os
import subprocess
import sys

from checks import ROOT, check, finish  # noqa: E402  (puts scripts/ on the path)
import kernel_model as km  # noqa: E402

sim = sys.argv[1]


def constants(topo):
    return km.from_topology(os.path.join(ROOT, topo))


def priced(topo, B, H, D, L, causal):
    out = subprocess.run([sim, "--topology", os.path.join(ROOT, topo), "--sp", "1", "--sched",
                          "ring", "--pass", "fwd", "--seq", str(L), "--heads", str(H),
                          "--kv-heads", str(H), "--head-dim", str(D), "--batch", str(B),
                          "--mask", "causal" if causal else "full", "--csv", "-", "--quiet"],
                         check=True, capture_output=True, text=True).stdout
    row = next(csv.DictReader(io.StringIO(out)))
    return float(row["compute_ms"]) * 1e-3, row["confidence"]


# beyond the tables: few heads, head dims 96-256, long, causal tails
shapes = [(1, 1, 128, 16384, True), (1, 2, 64, 8192, False), (1, 4, 256, 32768, True),
          (4, 1, 96, 4096, False), (1, 8, 192, 65536, True), (1, 16, 128, 131072, True),
          (2, 64, 256, 8192, False), (1, 1, 64, 262144, True)]
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
