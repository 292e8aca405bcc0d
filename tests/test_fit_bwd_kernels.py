#!/usr/bin/env python3
"""scripts/calibrate/fit.py --bwd-kernels: a table's backward entries that an
autograd step estimated, set from a profiled run's kernels: the estimate
less the step's other kernels where the step was GPU-bound, the kernels'
time where it was host-bound (fit.HOST_BOUND_STEP); other entries, the rest
of the file and a second run leave it as it is; a bad record exits 2 naming
the file, the record and the field, the topology untouched.

Usage: test_fit_bwd_kernels.py"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from pycheck import ROOT, check, finish, scripts_on_path  # noqa: E402

scripts_on_path("calibrate")
import fit  # noqa: E402

FIT = os.path.join(ROOT, "scripts", "calibrate", "fit.py")
CAL = os.path.join(ROOT, "calibration", "h200x2-tool")
SHAPE = dict(B=1, H=32, D=128)


def run(recs, topo):
    return subprocess.run([sys.executable, FIT, CAL, "--bwd-kernels", recs, "--out", topo],
                          capture_output=True, text=True)


def record(sq, sk, causal, bwd_gpu, other):
    return dict(SHAPE, sq=sq, sk=sk, causal=causal, bwd_gpu_ms=bwd_gpu, fwd_gpu_ms=0.1,
                fwd_bwd_gpu_ms=0.1 + bwd_gpu + other)


with tempfile.TemporaryDirectory() as tmp:
    topo = os.path.join(tmp, "t.json")
    shutil.copy(os.path.join(ROOT, "topologies", "h200x2-tool.json"), topo)
    before = json.load(open(topo))
    est = {(r["sq"], r["sk"], r["causal"]): r["bwd_ms_est"]
           for r in map(json.loads, open(os.path.join(CAL, "compute-n2.jsonl")))
           if r["op"] == "attn_fwd" and r.get("fwd_bwd_ms") is not None and r["B"] == 1
           and r["H"] == 32 and r["D"] == 128}
    # host-bound: the table's estimate 0.537 ms over kernels of 0.2 + 0.03;
    # GPU-bound: 1.411 over 1.35 + 0.05 (1.01x)
    recs = [record(1536, 1536, False, 0.2, 0.03), record(3072, 3072, False, 1.35, 0.05)]
    rpath = os.path.join(tmp, "r.jsonl")
    with open(rpath, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in recs))
    r = run(rpath, topo)
    check(f"fit.py --bwd-kernels converts the records (rc {r.returncode}: {r.stderr.strip()})",
          r.returncode == 0)
    after = json.load(open(topo))
    bwd = {(e["sq"], e["sk"], e["causal"]): e["bwd_ms"] for e in after["compute"]["table"]
           if (e["batch"], e["heads"], e["head_dim"]) == (1, 32, 128)}
    check("host-bound (over HOST_BOUND_STEP x kernels + other): the kernels' time",
          est[(1536, 1536, False)] / 0.23 > fit.HOST_BOUND_STEP and
          bwd[(1536, 1536, False)] == 0.2)
    check("GPU-bound: the estimate less the step's other kernels",
          abs(bwd[(3072, 3072, False)] - round(est[(3072, 3072, False)] - 0.05, 5)) < 1e-9)
    changed = [(a, b) for a, b in zip(before["compute"]["table"], after["compute"]["table"])
               if a != b]
    check("only those two entries change, and only their bwd_ms",
          len(changed) == 2 and all({k for k in a if a[k] != b[k]} == {"bwd_ms"}
                                    for a, b in changed))
    rest = dict(after, sources=after["sources"][1:])
    rest["compute"] = dict(after["compute"], table=before["compute"]["table"])
    old = dict(before, sources=[x for x in before["sources"]
                                if not x.startswith("compute.table bwd_ms")])
    check("the rest of the file is as it was, its source line (one) first",
          rest == old and after["sources"][0].startswith("compute.table bwd_ms at the 2 shapes"))
    text = open(topo).read()
    r = run(rpath, topo)
    check("a second run gives the same file", r.returncode == 0 and open(topo).read() == text)
    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(json.dumps(recs[0]) + "\n" + json.dumps({k: v for k, v in recs[1].items()
                                                        if k != "bwd_gpu_ms"}) + "\n")
    r = run(bad, topo)
    check(f"a record without bwd_gpu_ms exits 2 naming the file, record and field "
          f"({r.stderr.strip()})", r.returncode == 2 and bad in r.stderr and
          "record 2" in r.stderr and "bwd_gpu_ms" in r.stderr)
    check("... and leaves the topology as it was", open(topo).read() == text)
finish("test_fit_bwd_kernels: ")
