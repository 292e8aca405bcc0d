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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import kernel_model as km  # noqa: E402

sim = sys.argv[1]
fails = 0


def check(name, cond):
    global fails
    print(("ok: " if cond else "FAIL: ") + name)
    fails += not cond


def constants(topo):
    k = json.load(open(os.path.join(ROOT, topo)))["compute"]["kernel_model"]
    return k["sms"], {"u": k["lone_cta_share"], "theta": k["sustained_slowdown"],
                      "t_theta": k["sustained_after_us"] * 1e-6,
                      "t0_fwd": k["fwd_fixed_us"] * 1e-6, "t0_bwd": k["bwd_fixed_us"] * 1e-6,
                      "tau_fwd": {str(p["head_dim"]): p["fwd_fs"] for p in k["pair_time"]},
                      "tau_bwd": {str(p["head_dim"]): p["bwd_fs"] for p in k["pair_time"]}}


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
            check(f"{topo}: {B}x{H} D{D} {L}: beyond the table", False)
    check(f"{topo}: tasp-sim and kernel_model.py agree on {len(shapes)} kernels "
          f"(worst {100 * worst:.4f}%)", worst < 1e-4)

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
check("fit recovers the lone CTA share", got["u"] == 0.7)
check("fit recovers the fixed costs", abs(got["t0_fwd"] / 30e-6 - 1) < 0.02 and
      abs(got["t0_bwd"] / 50e-6 - 1) < 0.02)
check("fit recovers the per-pair times", all(
    abs(got[k][d] / truth[k][d] - 1) < 0.01 for k in ("tau_fwd", "tau_bwd") for d in ("64", "128")))
print(f"kernel_model: {'FAILED' if fails else 'ok'}")
sys.exit(1 if fails else 0)
