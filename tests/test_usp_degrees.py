#!/usr/bin/env python3
"""scripts/usp_degrees.py and the PCIe box it runs on (topologies/l20x8-pcie.json).

The topology loads and has the shape its sources describe: 8 GPUs, each
with its own PCIe channel per direction, GPUs of one socket (0-3, 4-7)
routed through their two PCIe channels, GPUs of different sockets through
the one inter-socket channel of that direction as well (checked on the
per-channel bytes of an all-to-all, which every pair crosses).

The script puts each measured row beside the scheduler that runs the same
program (U = 1 the ring alone, U = SP Ulysses, between USP with that
ring) and 1000 / step_ms of a direct tasp-sim run of it; the measured
figures come through unchanged; the best U is the fastest; bad input is
refused with exit status 2 naming the file.

usage: tests/test_usp_degrees.py build/tasp-sim
"""
import csv
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import ROOT, check, finish  # noqa: E402
import usp_degrees  # noqa: E402

sim = os.path.abspath(sys.argv[1])
TOPO = "topologies/l20x8-pcie.json"
SCRIPT = os.path.join(ROOT, "scripts", "usp_degrees.py")


def tasp(*args):
    p = subprocess.run([sim, "--topology", TOPO, *args, "--csv", "-", "-q"], cwd=ROOT,
                       capture_output=True, text=True)
    check(p.returncode == 0, f"tasp-sim {' '.join(args)} runs: {p.stderr.strip()}")
    return list(csv.DictReader(p.stdout.splitlines()))


def links(*args):
    p = subprocess.run([sim, "--topology", TOPO, *args, "-q", "--links", "-"], cwd=ROOT,
                       capture_output=True, text=True)
    check(p.returncode == 0, f"tasp-sim --links {' '.join(args)} runs: {p.stderr.strip()}")
    return list(csv.DictReader(p.stdout.splitlines()))


def script(*args):
    return subprocess.run([sys.executable, SCRIPT, "--sim", sim, *args], cwd=ROOT,
                          capture_output=True, text=True)


# --- the topology: channels and which pairs cross the sockets
d = subprocess.run([sim, "--topology", TOPO, "--dump-topology"], cwd=ROOT,
                   capture_output=True, text=True)
check(d.returncode == 0, f"{TOPO} loads: {d.stderr.strip()}")
check("8 GPUs" in d.stdout, f"{TOPO}: 8 GPUs")
check(any(l.split()[:3] == ["pcie", "16", "channels,"] for l in d.stdout.splitlines()),
      f"{TOPO}: 16 PCIe channels, one per GPU and direction")
check(any(l.split()[:3] == ["socket_link", "2", "channels,"] for l in d.stdout.splitlines()),
      f"{TOPO}: 2 inter-socket channels, one per direction")

# Ulysses over all 8: every GPU sends the same bytes to each of the 7 others,
# so each socket link carries 4 x 4 of the 8 x 7 pair transfers (16/56 of the
# total) and each GPU's tx channel 7 of them (7/56)
rows = links("--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--seq", "8K",
             "--sched", "ulysses")
by = {}
for r in rows:
    by[r["channel"]] = by.get(r["channel"], 0.0) + float(r["bytes"])
total = sum(v for k, v in by.items() if k.endswith(".pcie.tx"))
check(total > 0, "ulysses moves bytes over the PCIe channels")
if total > 0:
    for s in ("socket0->socket1", "socket1->socket0"):
        check(abs(by.get(s, 0) / total - 16 / 56) < 1e-9,
              f"{s} carries 16/56 of an all-to-all's bytes, got {by.get(s, 0) / total:.6f}")
    check(abs(by.get("gpu0.pcie.tx", 0) / total - 1 / 8) < 1e-9,
          "gpu0's tx channel carries 1/8 of them")
    check(abs(by.get("gpu5.pcie.rx", 0) / total - 1 / 8) < 1e-9,
          "gpu5's rx channel carries 1/8 of them")
# a ring inside one socket (SP 4 on GPUs 0-3) never crosses it
rows = links("--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--seq", "8K",
             "--sched", "ring", "--sp", "4")
cross = sum(float(r["bytes"]) for r in rows if r["channel"].startswith("socket"))
inside = sum(float(r["bytes"]) for r in rows if r["channel"] == "gpu0.pcie.tx")
check(inside > 0 and cross == 0, f"a ring on GPUs 0-3 stays in socket 0 (crossing {cross})")

# --- the scheduler of each measured program
check(usp_degrees.scheduler("basic", 1, 8) == "ring", "basic at U=1 is ring")
check(usp_degrees.scheduler("zigzag", 1, 8) == "zigzag", "zigzag at U=1 is zigzag")
check(usp_degrees.scheduler("stripe", 1, 8) == "stripe", "stripe at U=1 is stripe")
check(usp_degrees.scheduler("basic", 8, 8) == "ulysses", "U=SP is ulysses")
check(usp_degrees.scheduler("zigzag", 8, 8) == "ulysses", "U=SP is ulysses, whatever the ring")
check(usp_degrees.scheduler("basic", 2, 8) == "usp", "basic at U=2 is usp")
check(usp_degrees.scheduler("zigzag", 4, 8) == "usp-zigzag", "zigzag at U=4 is usp-zigzag")
check(usp_degrees.scheduler("stripe", 2, 8) is None, "stripe at U=2 has no scheduler")

# --- the table, against direct runs
with tempfile.TemporaryDirectory() as tmp:
    m = os.path.join(tmp, "m.csv")
    with open(m, "w") as f:
        f.write("heads,kv_heads,head_dim,batch,seq,ring,ulysses,iters_per_s\n"
                "32,8,128,1,8K,basic,2,11.5\n32,8,128,1,8K,basic,1,22.25\n"
                "32,8,128,1,8K,zigzag,2,33\n32,8,128,1,8K,zigzag,8,44\n"
                "32,8,128,1,8K,stripe,2,55\n")
    p = script("--measured", m, "--topology", TOPO)
    check(p.returncode == 0, f"usp_degrees.py runs: {p.stderr.strip()}")
    table = {}
    for line in p.stdout.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        table[cells[3]] = cells
    check(p.stdout.splitlines()[0].split("|")[5:9] == [" U=8 ", " U=2 ", " U=1 ", " best U measured "],
          f"columns U=8, U=2, U=1 (the measured degrees, largest first): {p.stdout.splitlines()[:1]}")

    def pred(sched, u):
        extra = ["--usp-ulysses", str(u)] if 1 < u < 8 else []
        r = tasp("--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--batch", "1",
                 "--seq", "8K", "--mask", "causal", "--pass", "fwd", "--sched", sched, *extra)
        return f"{1000 / float(r[0]['step_ms']):.3g}"

    basic, zig, stripe = table.get("basic"), table.get("zigzag"), table.get("stripe")
    check(basic is not None and zig is not None and stripe is not None,
          f"a row per ring: {sorted(table)}")
    if basic and zig and stripe:
        check(basic[4] == "- / -", f"basic has no U=8 measurement: {basic[4]}")
        check(basic[5] == f"11.5 / {pred('usp', 2)}", f"basic U=2 is usp at U=2: {basic[5]}")
        check(basic[6] == f"22.2 / {pred('ring', 1)}", f"basic U=1 is ring: {basic[6]}")
        check(basic[7] == "1", f"basic's best measured U is 1 (22.25 > 11.5): {basic[7]}")
        check(zig[4] == f"44 / {pred('ulysses', 8)}", f"zigzag U=8 is ulysses: {zig[4]}")
        check(zig[5] == f"33 / {pred('usp-zigzag', 2)}", f"zigzag U=2 is usp-zigzag: {zig[5]}")
        check(zig[7] == "8", f"zigzag's best measured U is 8: {zig[7]}")
        p8, p2 = float(pred("ulysses", 8)), float(pred("usp-zigzag", 2))
        check(zig[8] == ("8" if p8 > p2 else "2"), f"zigzag's best predicted U: {zig[8]}")
        check(stripe[5] == "55 / -", f"stripe at U=2: measured, no scheduler: {stripe[5]}")

    # bad input: exit 2, naming the file and what was expected
    bad = os.path.join(tmp, "bad.csv")
    with open(bad, "w") as f:
        f.write("heads,kv_heads,head_dim,batch,seq,ring,iters_per_s\n32,8,128,1,8K,basic,1\n")
    p = script("--measured", bad, "--topology", TOPO)
    check(p.returncode == 2 and "bad.csv" in p.stderr and "ulysses" in p.stderr,
          f"a missing column: exit 2 naming the file and column: {p.returncode} {p.stderr}")
    with open(bad, "w") as f:
        f.write("heads,kv_heads,head_dim,batch,seq,ring,ulysses,iters_per_s\n"
                "32,8,128,1,8K,spiral,2,1\n")
    p = script("--measured", bad, "--topology", TOPO)
    check(p.returncode == 2 and "bad.csv:2" in p.stderr and "'ring'" in p.stderr,
          f"an unknown ring: exit 2 naming the line: {p.returncode} {p.stderr}")
    with open(bad, "w") as f:
        f.write("heads,kv_heads,head_dim,batch,seq,ring,ulysses,iters_per_s\n"
                "32,8,128,1,8K,basic,3,1\n")
    p = script("--measured", bad, "--topology", TOPO)
    check(p.returncode == 2 and "divisor of SP 8" in p.stderr,
          f"U=3 on 8 GPUs: exit 2: {p.returncode} {p.stderr}")
    p = script("--measured", os.path.join(tmp, "none.csv"), "--topology", TOPO)
    check(p.returncode == 2 and "none.csv" in p.stderr, f"a missing file: exit 2: {p.stderr}")
    p = script("--measured", m, "--topology", "topologies/no-such.json")
    check(p.returncode == 2 and "tasp-sim" in p.stderr, f"a failing tasp-sim: exit 2: {p.stderr}")

finish("usp_degrees")
