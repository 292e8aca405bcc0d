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

from checks import ROOT, check, finish  # noqa: E402  (puts scripts/ on the path)
import validate_passes  # noqa: E402

sim = sys.argv[1]


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
check(got[0] == want[0], "causal USP u2 is usp-zigzag with --usp-ulysses 2")
check(got[1] == want[1], "full USP u2 is usp with --usp-ulysses 2")
check(got[2] == want[2], "causal USP u4 is usp-zigzag with --usp-ulysses 4")
check(got[3] == want[3], "a ring record is ring, unchanged")
check(want[0] != want[2] and want[0] != direct("h100x8", "usp", 8, 65536, "causal", "fwd",
                                               ("--usp-ulysses", "2")),
      "the shapes tell the options apart (u2 and u4 differ, usp-zigzag and usp differ)")
check(validate_passes.row_key(usp[3]) == ("ring", "causal", 65536, True, "fwd"),
      "the ring's key is the record's (sched, mask, seq, comm, pass)")
check(validate_passes.label(usp[2]) == "usp u4", "rows name USP with its degree")

# double ring across 2 nodes of 8: the inner ring's size decides which hops
# cross a NIC
dr = [record("double-ring", 16, 4096, "causal", pas="bwd", double_ring_inner=4),
      record("double-ring", 16, 4096, "causal", pas="bwd", double_ring_inner=8)]
pred = validate_passes.predict(sim, "h100x8x2", dr)
got = [pred[validate_passes.row_key(r)] for r in dr]
want = [direct("h100x8x2", "double-ring", 16, 65536, "causal", "bwd",
               ("--double-ring-inner", str(w))) for w in (4, 8)]
check(got[0] == want[0], "double ring inner 4 predicted with --double-ring-inner 4")
check(got[1] == want[1], "double ring inner 8 predicted with --double-ring-inner 8")
check(want[0] != want[1], "the inner sizes give different figures here")
check(validate_passes.label(dr[0]) == "double-ring w4",
      "rows name the double ring with its inner size")

# --tokens: the rows of one chunk length summarised overall and by pass
line = validate_passes.band_line(1536, [("bwd", 0.10), ("fwd", 0.20), ("bwd", 0.30),
                                        ("fwd", 0.02), ("bwd", 0.05)])
check(line == "at 1536 tokens/GPU: median 10.00% max 30.0% over 5 passes; "
              "bwd 10.00% over 3, fwd 11.00% over 2", f"--tokens summary line: {line}")
check(validate_passes.band_line(2048, []) is None, "--tokens with no such rows: no line")

finish("test_validate_passes")
