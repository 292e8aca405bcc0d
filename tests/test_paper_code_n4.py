#!/usr/bin/env python3
"""The paper's own programs measured at n = 4 (calibration/h100x4-tasp-code)
and their comparison with the model (scripts/paper_code_n4.py): the records
are complete, the scenario holds the measured batch-1 20-head points, the
model runs every measured point at its shape on the topology fitted to the
machine that ran them, and the table's figures are the records' own.

usage: tests/test_paper_code_n4.py build/tasp-sim
"""
import csv
import io
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import ROOT, check, finish  # noqa: E402
import paper_code_n4 as pc  # noqa: E402

sim = sys.argv[1]
PROGS = ("ring-full", "tasp-full", "zigzag-causal", "tasp-causal")

# every point of both runs: the four programs in each variant, and a cat record
runs = {}
for name, variants in zip(pc.RUNS, (("code", "nosync"), ("code", "nosync", "nocomm"))):
    passes, cat = pc.load(name)
    runs[name] = passes
    pts = pc.points(passes)
    check(len(pts) == 23, f"{name}: 23 measured points, got {len(pts)}")
    missing = [p + (g, v) for p in pts for g in PROGS for v in variants if p + (g, v) not in passes]
    check(not missing, f"{name}: every program and variant at every point, missing {missing[:3]}")
    check(set(cat) == set(pts), f"{name}: a torch.cat timing at every point")
    check(all(s % 3360 == 0 and s % (2 * 4 * 3) == 0 for s, _, _ in pts),
          f"{name}: every seq is k x 3360 and splits into 2 x n x (n-1) pieces")
    with open(os.path.join(pc.DATA, name)) as f:
        recs = [json.loads(x) for x in f]
    check(all(r["gpus"] == 4 and r["head_dim"] == 64 for r in recs if r["kind"] == "pass"),
          f"{name}: every pass on 4 GPUs at head dim 64")
check(pc.points(runs[pc.RUNS[0]]) == pc.points(runs[pc.RUNS[1]]), "both runs hold the same points")

# the scenario: the batch-1, 20-head points, on the topology the script uses
with open(os.path.join(ROOT, "scenarios", "paper-h200x4.json")) as f:
    s = json.load(f)
slice_ = sorted(p[0] for p in pc.points(runs[pc.RUNS[1]]) if p[1:] == (1, 20))
check(s["seq_len"] == slice_, f"paper-h200x4.json: seq_len is the measured batch-1 20-head "
      f"slice {slice_}, got {s['seq_len']}")
check(os.path.basename(s["topology"]) == os.path.basename(pc.TOPOLOGY) and s["sp"] == [4],
      "paper-h200x4.json: the topology paper_code_n4.py runs, SP 4")

out = subprocess.run([sim, os.path.join(ROOT, "scenarios", "paper-h200x4.json"), "--csv", "-",
                      "--quiet"], capture_output=True, text=True)
rows = list(csv.DictReader(io.StringIO(out.stdout))) if out.returncode == 0 else []
check(len(rows) == len(slice_) * 2 * 3 and all(r["topology"] == "h200x4-tool" and r["gpus"] == "4"
                                                for r in rows),
      f"paper-h200x4.json runs: every seq, both masks, three schedulers on h200x4-tool, "
      f"got {len(rows)} rows (exit {out.returncode})")

# the model runs every measured point, both masks, every scheduler
pts = pc.points(runs[pc.RUNS[1]])
model = pc.simulate(sim, pts)
want = {p + (sc, m) for p in pts for sc in ("ring", "zigzag", "tasp") for m in ("full", "causal")}
check(set(model) == want, f"the model ran exactly the {len(want)} measured (point, scheduler, "
      f"mask), got {len(model)}")

# the table quotes the records: one row worked by hand from the raw file
row = next(x for x in pc.passes_table(sim).splitlines() if x.startswith("| 3360 | 16 | 20 |"))
r1, r2 = (runs[n] for n in pc.RUNS)
p = (3360, 16, 20)
ring, tasp = r2[p + ("ring-full", "code")], r2[p + ("tasp-full", "code")]
check(f"| {ring:.2f} / {model[p + ('ring', 'full')]:.2f} |" in row,
      f"3360 x 16 x 20: Ring's measured and model ms in the row, got {row}")
sp1 = r1[p + ("ring-full", "code")] / r1[p + ("tasp-full", "code")]
check(f"{sp1:.2f}x, {ring / tasp:.2f}x / " in row,
      f"3360 x 16 x 20: TASP over Ring is Ring's time over TASP's in each run, got {row}")
alone = pc.simulate(sim, [p], alone=True)
cell = " / ".join(f"{r2[p + ('ring-full', v)]:.2f}" for v in ("code", "nosync", "nocomm"))
prow = next(x for x in pc.parts_table(sim).splitlines() if x.startswith("| 3360 | 16 | 20 |"))
check(f"| 3360 | 16 | 20 | {cell} / {alone[p + ('ring', 'full')]:.2f} |" in prow,
      f"3360 x 16 x 20: Ring with the code, without host sync, without communication, and "
      f"the model alone, in that order, got {prow}")

# the code's communication figure: the slowest GPU's mean comm_total_time,
# Ring's over TASP's, worked from the raw records of the last run
with open(os.path.join(pc.DATA, pc.RUNS[-1])) as f:
    recs = [json.loads(x) for x in f]
comm = {r["program"]: max(sum(x[1] for x in g) / len(g) for g in r["per_rank"]) for r in recs
        if r["kind"] == "pass" and r["variant"] == "code" and (r["seq"], r["batch"], r["heads"]) == p}
check(abs(pc.comm_times(pc.RUNS[-1])[p + ("ring-full",)] - comm["ring-full"]) < 1e-9,
      "comm_times: the slowest GPU's mean comm_total_time of the program as written")

finish("paper_code_n4")
