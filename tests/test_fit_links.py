#!/usr/bin/env python3
"""scripts/fit_links.py's --hops: overlap records (calibrate.py part
overlap) become the links records the replay fits, one per hop size with
the median hop time, and a bad record is refused with exit 2.

usage: tests/test_fit_links.py build/tasp-replay
"""
import io
import json
import os
import subprocess
import sys
import contextlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import ROOT, check, finish  # noqa: E402
import fit_links  # noqa: E402


def overlap(b, ms, kernel="k"):
    return json.dumps({"part": "overlap", "n": 2, "hop": "kv_bf16", "hop_bytes": b,
                       "kernel": kernel, "hop_ms": ms, "kernel_ms": 1.0})


MiB = 2**20
lines = [overlap(256 * MiB, 1.0), overlap(64 * MiB, 0.5), overlap(256 * MiB, 3.0),
         json.dumps({"part": "links", "msg_bytes": 4, "ms": 9.0}), "",
         overlap(256 * MiB, 1.5), overlap(64 * MiB, 0.3), overlap(64 * MiB, 0.35)]
recs = fit_links.hop_records(lines, "x.jsonl")
check([r["msg_bytes"] for r in recs] == [64 * MiB, 256 * MiB],
      "one record per hop size, ascending; other parts skipped")
check([r["ms"] for r in recs] == [0.35, 1.5], "the median (not the mean) hop time of each size")
check(all(r["pattern"] == "pair_bi" and r["api"] == "batch_p2p" and r["n"] == 2
          and r["part"] == "links" for r in recs),
      "a hop is one batch_isend_irecv each way between two GPUs")
check(abs(recs[1]["egress_GBps"] - 256 * MiB / 1.5e6) < 1e-9, "egress rate of the median")
check((recs[1]["ms_min"], recs[1]["ms_max"]) == (1.0, 3.0), "spread kept")

err = io.StringIO()
with contextlib.redirect_stderr(err):
    try:
        fit_links.hop_records([overlap(64 * MiB, 0.5), '{"part": "overlap", "hop_bytes": 8}'],
                              "bad.jsonl")
        code = 0
    except SystemExit as e:
        code = e.code
check(code == 2, "a record without hop_ms exits 2")
check("bad.jsonl line 2" in err.getvalue() and "'hop_ms'" in err.getvalue(),
      "the error names the file, line and field")

# --hops naming a file without overlap records (here a links file): exit 2
# before any fitting, naming the option
r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "fit_links.py"),
                    os.path.join(ROOT, "topologies", "h200x2-tool.json"),
                    os.path.join(ROOT, "calibration", "h200x2-tool"), "--hops",
                    os.path.join(ROOT, "calibration", "h200x2-tool", "links-n2.jsonl")],
                   capture_output=True, text=True)
check(r.returncode == 2 and "--hops" in r.stderr and "overlap" in r.stderr,
      "--hops without overlap records exits 2 naming the option")

# the replay reads the records written: it prices both sizes, and the
# parser of its rows gets them back in bytes
replay = sys.argv[1] if len(sys.argv) > 1 else "build/tasp-replay"
# (a topology without comm.flow_rate_by_size: its table would hold the
# 256 MiB hop to 280 GB/s whatever the cap)
topo = os.path.join(ROOT, "topologies", "h200x2-tool.json")
path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fit_links_test.{os.getpid()}.jsonl")
with open(path, "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in recs)
try:
    p = {"port": 280.0, "cap": 280.0}
    rows = fit_links.size_errors(replay, topo, path, p, 30)
    check([r[0] for r in rows] == [64 * MiB, 256 * MiB], "replayed sizes read back in bytes")
    check([r[1] for r in rows] == [0.35, 1.5], "replayed measured times are the medians")
    # bandwidth bound at 256 MiB: a faster port must predict less time
    fast = fit_links.size_errors(replay, topo, path, {"port": 560.0, "cap": 560.0}, 30)
    check(fast[1][2] < rows[1][2], "the parameters reach the replay")
except subprocess.CalledProcessError as e:
    check(False, f"replay failed: {e}")
finally:
    os.unlink(path)

# --size-rates: from the links' largest message (256 MiB) up, the links'
# rate times each hop's rate over the 256 MiB hop's, a hop's rate its bytes
# over its time less the fixed cost; smaller hops are left out
hops = [{"msg_bytes": 64 * MiB, "ms": 0.5}, {"msg_bytes": 256 * MiB, "ms": 1.1},
        {"msg_bytes": 512 * MiB, "ms": 1.6}]
fixed = {64 * MiB: 0.1, 256 * MiB: 0.1, 512 * MiB: 0.1}
pts = fit_links.size_rates(hops, fixed, 280.0, 256 * MiB)
check([p["mib"] for p in pts] == [256, 512], "points from the anchor size up")
check(pts[0]["gbps"] == 280.0, "the anchor keeps the links' rate")
check(pts[1]["gbps"] == round(280.0 * (512 / 1.5) / (256 / 1.0), 1),
      "a larger hop: the links' rate times its rate over the anchor's, fixed cost out")
try:
    fit_links.size_rates(hops, fixed, 280.0, 128 * MiB)
    check(False, "an anchor size with no hop is refused")
except ValueError as e:
    check("128 MiB" in str(e), "an anchor size with no hop is refused, naming the size")
r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "fit_links.py"),
                    os.path.join(ROOT, "topologies", "h200x2-tool.json"),
                    os.path.join(ROOT, "calibration", "h200x2-tool"), "--size-rates"],
                   capture_output=True, text=True)
check(r.returncode == 2 and "--size-rates needs --hops" in r.stderr,
      "--size-rates without --hops exits 2")

finish("fit_links")
