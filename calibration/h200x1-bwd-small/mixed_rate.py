#!/usr/bin/env python3
"""The rate of the ring backward's float32 += bf16 adds on the H200 of
fold-n1.jsonl: dQ's add (one kernel, 10 bytes read and written an element:
float32 read and written, bf16 read) and the dK/dV adds (fold_new,
fold_inplace: two kernels over twice the elements), least squares through
the origin of (GPU time - kernels x FIXED_US) against those bytes, as
compute.c prices a mixed copy task (copy_fixed_us a kernel, then bytes at
copy_mixed_GBps).  FIXED_US: the tool topologies' copy_fixed_us (5, the
default).  Prints the rate and each op's error at it.

usage: python3 mixed_rate.py [FIXED_US]"""
import json
import os
import sys

FIXED_US = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
ROW = 32 * 128  # heads x head dim of the records
pts = []
for line in open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fold-n1.jsonl")):
    r = json.loads(line)
    elems = r["c"] * ROW
    if r["op"] == "dq_add":
        pts.append((r["op"], r["c"], 10.0 * elems, 1, r["gpu_ms"] * 1e-3))
    elif r["op"] in ("fold_new", "fold_inplace"):
        pts.append((r["op"], r["c"], 20.0 * elems, 2, r["gpu_ms"] * 1e-3))
fixed = FIXED_US * 1e-6
rate = sum(b * b for _, _, b, _, _ in pts) / sum(b * (t - k * fixed) for _, _, b, k, t in pts)
print(f"copy_mixed_GBps {rate / 1e9:.0f} at copy_fixed_us {FIXED_US:g}")
for op, c, b, k, t in pts:
    print(f"  {op:12} {c:5d} tokens: measured {1e6 * t:6.1f} us, priced "
          f"{1e6 * (k * fixed + b / rate):6.1f} us")
