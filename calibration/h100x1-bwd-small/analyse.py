#!/usr/bin/env python3
"""What a kernel table's backward figure holds at small shapes: reads
bwd-small-n1.jsonl (bwd_small.py) and prints, per shape, the table's way
(est = autograd forward + backward step minus the forward call), the
backward call timed directly, and its kernels' GPU time, with the parts of
est beyond the backward kernels: the autograd step's other GPU work
(its kernels' time minus the forward's and the backward call's: the
gradient accumulation into .grad, the ones_like fill) and the GPU's idle
time inside the step (its kernels' span minus their sum: the GPU waiting
for the host's autograd work).  Beside it, the h200x2-tool table's bwd_ms at the same shape.

usage: python3 analyse.py [RECORDS] [TOPOLOGY]   (run from this directory)
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
recs = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "bwd-small-n1.jsonl")
topo = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "..", "topologies",
                                                          "h200x2-tool.json")
table = {(e["sq"], e["sk"], e["causal"]): e["bwd_ms"]
         for e in json.load(open(topo))["compute"]["table"]
         if (e["batch"], e["heads"], e["head_dim"]) == (1, 32, 128)}
print("| sq | sk | mask | est ms | direct ms | GPU ms | est / GPU | autograd's other GPU work us "
      "| GPU idle in the step us | backward call host us | h200x2-tool table bwd_ms | table / GPU |")
print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for line in open(recs):
    r = json.loads(line)
    other = r["fwd_bwd_gpu_ms"] - r["fwd_gpu_ms"] - r["bwd_gpu_ms"]
    wait = r["fwd_bwd_span_ms"] - r["fwd_bwd_gpu_ms"]
    t = table.get((r["sq"], r["sk"], r["causal"]))
    tcols = f"{t:.3f} | {t / r['bwd_gpu_ms']:.2f}" if t else "- | -"
    print(f"| {r['sq']} | {r['sk']} | {'causal' if r['causal'] else 'full'} | "
          f"{r['bwd_ms_est']:.3f} | {r['bwd_direct_ms']:.3f} | {r['bwd_gpu_ms']:.3f} | "
          f"{r['bwd_ms_est'] / r['bwd_gpu_ms']:.2f} | {1e3 * other:.0f} | {1e3 * wait:.0f} | "
          f"{r['bwd_host_us']:.0f} | {tcols} |")
