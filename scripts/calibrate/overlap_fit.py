#!/usr/bin/env python3
"""Constants of a topology's compute model from calibrate.py's lingpu and
overlap parts (stdlib only).

usage: scripts/calibrate/overlap_fit.py DIR   (DIR holds lingpu-n1.jsonl, overlap-n2.jsonl)

comm_slowdown: per overlap record, the hop and the kernel started together;
the one that ends first ran slowed all along, the other slowed until then
and at full speed after.  The kernel's speed while the hop runs is
  kernel outlasts hop:  (K - (bk - bh)) / bh      hop outlasts kernel:  K / bk
(K the kernel alone, bh / bk the ends of hop and kernel together);
comm_slowdown is 1 minus the median over records.  The hop's own speed
under a kernel is printed too (tasp-sim does not model it).
copy_GBps, copy_fixed_us: least squares of GPU time on bytes over the
same-dtype memory-bound steps (zero_, float32 + float32, bf16 + bf16);
copy_mixed_GBps: the same over float32 += bf16.
"""
import json
import os
import statistics
import sys


def main():
    d = sys.argv[1]
    rows = [json.loads(x) for x in open(os.path.join(d, "overlap-n2.jsonl"))]
    kern, hop = [], []
    for r in rows:
        H, K, bh, bk = r["hop_ms"], r["kernel_ms"], r["both_hop_ms"], r["both_kernel_ms"]
        if bk > bh:
            kern.append((K - (bk - bh)) / bh)
            hop.append(H / bh)
        else:
            kern.append(K / bk)
            hop.append((H - (bh - bk)) / bk)
    print(f"kernel speed under a hop: median {statistics.median(kern):.3f} "
          f"(min {min(kern):.2f}, max {max(kern):.2f}, {len(kern)} records): "
          f"comm_slowdown {1 - statistics.median(kern):.2f}")
    print(f"hop speed under a kernel: median {statistics.median(hop):.3f} "
          f"(min {min(hop):.2f}, max {max(hop):.2f})")
    mem = [json.loads(x) for x in open(os.path.join(d, "lingpu-n1.jsonl"))]
    mem = [r for r in mem if r.get("part") == "mem"]
    for label, rs in (("copy", [r for r in mem if r["op"] != "acc_add_bf16"]),
                      ("copy_mixed", [r for r in mem if r["op"] == "acc_add_bf16"])):
        slope, icpt = statistics.linear_regression([r["bytes"] for r in rs],
                                                   [r["gpu_ms"] * 1e-3 for r in rs])
        print(f"{label}_GBps {1 / slope / 1e9:.0f} (fixed {icpt * 1e6:.1f} us, {len(rs)} records)")


if __name__ == "__main__":
    main()
