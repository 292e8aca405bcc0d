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

With --write OUT (the experiment in docs/validation.md, not a topology
to ship: the kernels are the H100's), writes TOPOLOGY with the bwd_ms of
its B = 1, 32-head, head dim 128 entries of sq, sk <= --max-tokens set to
these kernels' GPU time (--with-other: plus the autograd step's other
kernels, i.e. the estimate without the GPU's idle time).

usage: python3 analyse.py [--records R] [--topology T] [--write OUT
           [--max-tokens N] [--with-other]]
"""
import argparse
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--records", default=os.path.join(here, "bwd-small-n1.jsonl"))
ap.add_argument("--topology", default=os.path.join(here, "..", "..", "topologies",
                                                   "h200x2-tool.json"))
ap.add_argument("--write", metavar="OUT")
ap.add_argument("--max-tokens", type=int, default=1536)
ap.add_argument("--with-other", action="store_true")
a = ap.parse_args()
recs, topo = a.records, a.topology
shape = (1, 32, 128)
topology = json.load(open(topo))
table = {(e["sq"], e["sk"], e["causal"]): e["bwd_ms"] for e in topology["compute"]["table"]
         if (e["batch"], e["heads"], e["head_dim"]) == shape}
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
if a.write:
    gpu = {}
    for line in open(recs):
        r = json.loads(line)
        t = r["fwd_bwd_gpu_ms"] - r["fwd_gpu_ms"] if a.with_other else r["bwd_gpu_ms"]
        gpu[(r["sq"], r["sk"], r["causal"])] = t
    n = 0
    for e in topology["compute"]["table"]:
        k = (e["sq"], e["sk"], e["causal"])
        if ((e["batch"], e["heads"], e["head_dim"]) == shape and k in gpu
                and max(e["sq"], e["sk"]) <= a.max_tokens):
            e["bwd_ms"] = round(gpu[k], 5)
            n += 1
    with open(a.write, "w") as f:
        json.dump(topology, f, indent=1)
    print(f"\n{a.write}: {n} backward entries replaced")
