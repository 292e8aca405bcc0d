#!/usr/bin/env python3
"""scripts/validate_passes.py predicts each measured pass with the scheduler
and options the measured program ran: USP records as usp (full) or
usp-zigzag (causal, a2a+p2p) with their Ulysses degree, double-ring records
with their inner ring, the other records as before.  Each prediction is
compared with tasp-sim run directly with the options spelled out, on shapes
where a wrong option would change the figure.
Usage: test_validate_passes.py PATH/TO/tasp-sim"""
import csv
import io
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import validate_passes  # noqa: E402

sim = sys.argv[1]
fails = 0


def check(name, cond):
    global fails
    print(("ok: " if cond else "FAIL: ") + name)
    fails += not cond


def direct(topo, sched, n, seq, mask, pas, extra=()):
    out = subprocess.run([sim, "--topology", topo, "--sched", sched, "--seq", str(seq),
                          "--sp", str(n), "--batch", "1", "--heads", "32", "--kv-heads", "32",
                          "--head-dim", "128", "--mask", mask, "--pass", pas, "--csv", "-",
                          "--quiet", "--jobs", "1", *extra],
                         check=True, capture_output=True, text=True).stdout
    return float(next(csv.DictReader(io.StringIO(out)))["step_ms"])


def record(sched, n, c, mask, pas="fwd", **extra):
    return {"part": "pass", "n": n, "sched": sched, "mask": mask, "pass": pas, "comm": True,
            "B": 1, "H": 32, "D": 128, "tokens_per_gpu": c, "seq": n * c, "ms": 1.0, **extra}


# USP on 8 GPUs of one node: the Ulysses degree and the ring's layout matter
usp = [record("usp", 8, 8192, "causal", usp_ulysses=2, usp_ring=4),
       record("usp", 8, 8192, "full", usp_ulysses=2, usp_ring=4),
       record("usp", 8, 8192, "causal", usp_ulysses=4, usp_ring=2),
       record("ring", 8, 8192, "causal")]
pred = validate_passes.predict(sim, "h100x8", usp)
got = [pred[validate_passes.row_key(r)] for r in usp]
want = [direct("h100x8", "usp-zigzag", 8, 65536, "causal", "fwd", ("--usp-ulysses", "2")),
        direct("h100x8", "usp", 8, 65536, "full", "fwd", ("--usp-ulysses", "2")),
        direct("h100x8", "usp-zigzag", 8, 65536, "causal", "fwd", ("--usp-ulysses", "4")),
        direct("h100x8", "ring", 8, 65536, "causal", "fwd")]
check("causal USP u2 is usp-zigzag with --usp-ulysses 2", got[0] == want[0])
check("full USP u2 is usp with --usp-ulysses 2", got[1] == want[1])
check("causal USP u4 is usp-zigzag with --usp-ulysses 4", got[2] == want[2])
check("a ring record is ring, unchanged", got[3] == want[3])
check("the shapes tell the options apart (u2 and u4 differ, usp-zigzag and usp differ)",
      want[0] != want[2] and want[0] != direct("h100x8", "usp", 8, 65536, "causal", "fwd",
                                               ("--usp-ulysses", "2")))
check("the ring's key is the record's (sched, mask, seq, comm, pass)",
      validate_passes.row_key(usp[3]) == ("ring", "causal", 65536, True, "fwd"))
check("rows name USP with its degree", validate_passes.label(usp[2]) == "usp u4")

# double ring across 2 nodes of 8: the inner ring's size decides which hops
# cross a NIC
dr = [record("double-ring", 16, 4096, "causal", pas="bwd", double_ring_inner=4),
      record("double-ring", 16, 4096, "causal", pas="bwd", double_ring_inner=8)]
pred = validate_passes.predict(sim, "h100x8x2", dr)
got = [pred[validate_passes.row_key(r)] for r in dr]
want = [direct("h100x8x2", "double-ring", 16, 65536, "causal", "bwd",
               ("--double-ring-inner", str(w))) for w in (4, 8)]
check("double ring inner 4 predicted with --double-ring-inner 4", got[0] == want[0])
check("double ring inner 8 predicted with --double-ring-inner 8", got[1] == want[1])
check("the inner sizes give different figures here", want[0] != want[1])
check("rows name the double ring with its inner size",
      validate_passes.label(dr[0]) == "double-ring w4")

print(f"{fails} failed")
sys.exit(1 if fails else 0)
