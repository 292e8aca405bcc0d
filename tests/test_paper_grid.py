#!/usr/bin/env python3
"""The paper's own grid (scripts/paper_grid.py, scenarios/paper-*.json)
expands to exactly the grid HamiltonAttention's test scripts define, and
tasp-sim runs every point of it at the shape asked for.

usage: tests/test_paper_grid.py build/tasp-sim

Counts, worked by hand from the scripts' loops (k and batch in {1, 2, 4, 6,
8, 12, 16, 24, 32, 48, 64, 96, 128}, k x unit x batch <= 10M, 3 head
counts).  unit 3360: k x batch <= 2976, so k = 1..16 allow all 13 batches,
k = 24, 32, 48, 64, 96, 128 allow 12, 11, 10, 9, 8, 7: 148 pairs.  unit
3840 (k x batch <= 2604): the same 148.  unit 7936 (k x batch <= 1260):
k = 1..8 allow 13, k = 12..128 allow 12, 11, 10, 9, 8, 7, 6, 5: 133.
Times 3 head counts: 444, 444, 399.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import ROOT, check, finish  # noqa: E402
import paper_grid  # noqa: E402


EXPECTED = {"H100-1": 444, "H100-2": 444, "H100-4": 399, "MI300X-1": 444}
UNITS = {"H100-1": 3360, "H100-2": 3840, "H100-4": 7936, "MI300X-1": 3360}
TOPOLOGIES = {"H100-1": ("h100x8", 8), "H100-2": ("h100x8x2", 16),
              "H100-4": ("h100x8x4", 32), "MI300X-1": ("mi300x8", 8)}
KS = [1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]

check([p.label for p in paper_grid.PLATFORMS] == list(EXPECTED),
      "the platforms are the paper's four: H100-1, H100-2, H100-4, MI300X-1")
for p in paper_grid.PLATFORMS:
    pts = paper_grid.points(p.unit)
    check(p.unit == UNITS[p.label], f"{p.label}: basic_len {UNITS[p.label]}, got {p.unit}")
    check((p.topology, p.gpus) == TOPOLOGIES[p.label],
          f"{p.label}: topology and SP {TOPOLOGIES[p.label]}, got {(p.topology, p.gpus)}")
    check(len(pts) == EXPECTED[p.label],
          f"{p.label}: {EXPECTED[p.label]} grid points, got {len(pts)}")
    check(len(set(pts)) == len(pts), f"{p.label}: no point twice")
    check(all(s % p.unit == 0 and s // p.unit in KS for s, _, _ in pts),
          f"{p.label}: every seq is k x {p.unit} with k in the scripts' list")
    check(all(s * b <= 10_000_000 for s, b, _ in pts), f"{p.label}: seq x batch <= 10M")
    check({h for _, _, h in pts} == {20, 4, 12}, f"{p.label}: heads 20, 4 and 12")
    # complete: every (k, batch, heads) under the cap is there
    want = {(k * p.unit, b, h) for k in KS for b in KS for h in (20, 4, 12)
            if k * p.unit * b <= 10_000_000}
    check(set(pts) == want, f"{p.label}: the points are all those under the cap")
    check(p.paper_tasp["full"] == ("tasp-mkm" if p.gpus > 8 else "tasp"),
          f"{p.label}: the code's full-mask TASP is (m-K_m-m)^u across nodes only")

    path, s = paper_grid.check_scenario(p)
    m = s["model"]
    check(m["head_dim"] == 64 and m["kv_heads"] == m["heads"] and m["dtype"] == "bf16",
          f"{path}: head dim 64, MHA, bf16")
    check(s["seq_len"] == [k * p.unit for k in KS], f"{path}: seq_len is k x {p.unit}")

# a scenario that drifted from the grid is refused, naming file and field
bad = paper_grid.Platform("X", "paper-mi300x8", "mi300x8", 8, 3840, {"full": "tasp",
                                                                   "causal": "tasp"})
try:
    paper_grid.check_scenario(bad)
    check(False, "a scenario whose seq_len is not k x unit is refused")
except SystemExit as e:
    check("paper-mi300x8.json: field 'seq_len'" in str(e),
          f"the refusal names the file and the field, got: {e}")

# tasp-sim runs exactly the grid: every point, both masks, every scheduler,
# at the batch, heads and KV heads asked for
sim = sys.argv[1]
p = next(x for x in paper_grid.PLATFORMS if x.label == "H100-2")
rows, _ = paper_grid.run(sim, p)
got = {(int(r["seq_len"]), int(r["batch"]), int(r["heads"]), r["mask"], r["scheduler"])
       for r in rows}
scheds = ("ring", "zigzag", "tasp", "tasp-mkm")
want = {pt + (mask, sc) for pt in paper_grid.points(p.unit) for mask in ("full", "causal")
        for sc in scheds}
check(len(rows) == len(want) and got == want,
      f"H100-2: tasp-sim ran {len(rows)} rows, expected exactly the {len(want)} of the grid")
check(all(r["kv_heads"] == r["heads"] and r["head_dim"] == "64" and r["gpus"] == "16"
          and r["pass"] == "fwd" for r in rows), "H100-2: rows are MHA, head dim 64, SP 16, fwd")
sp = paper_grid.speedups(p, rows)
check(all(abs(r["speedup_vs_ring"] - 1) < 1e-9 for r in sp if r["sched"] == "ring"),
      "ring's speedup over itself is 1")
# the full mask's Zigzag is Ring (same chunks), so the two speedups agree
check(all(abs(r["speedup_vs_ring"] - r["speedup_vs_zigzag"]) < 1e-6
          for r in sp if r["mask"] == "full"), "full mask: vs Ring == vs Zigzag")
t = paper_grid.table(sp)
check("| H100-2 | full | tasp-mkm (code's) | 444 |" in t,
      "the table marks the code's TASP and counts the grid's points")

finish("paper grid")
