#!/usr/bin/env python3
"""The ring family's backward bookkeeping ops (calibrate.py RingPass.run_backward
and fold) at the tool tables' chunk lengths, one GPU, B = 1, 32 heads, head dim
128: GPU time of each op's kernels (torch.profiler), CUDA-event time from an
idle GPU and host time (perf_counter, no synchronise).  JSON lines on stdout.

  dq_first   bdq.to(float32, contiguous)                 (step 0's dQ)
  dq_add     dq += bdq (float32 += bf16)                 (later steps' dQ)
  fold_first zeros(kv f32) then new[:,:,0] += dk, new[:,:,1] += dv
  fold_new   empty_like(base), torch.add(base[:,:,0], dk, out=new[:,:,0]), same for v
  fold_inplace base[:,:,0] += dk, base[:,:,1] += dv       (zigzag)
  cast_dq    dq.to(bf16)                                 (pass end)
  cast_dkv   home.to(bf16) of the (B,c,2,H,D) float32 dK/dV (pass end)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "h100x1-bwd-small"))
from bwd_small import ev_time, gpu_time, host_time  # noqa: E402  (the same clocks)

B, H, D = 1, 32, 128
dev = "cuda"
for c in (768, 1536, 3072, 6144):
    bdq = torch.randn(B, c, H, D, dtype=torch.bfloat16, device=dev)
    dk, dv = torch.randn_like(bdq), torch.randn_like(bdq)
    dq = bdq.float()
    base = torch.randn(B, c, 2, H, D, dtype=torch.float32, device=dev)

    def dq_first():
        return bdq.to(torch.float32, memory_format=torch.contiguous_format)

    def dq_add():
        dq.add_(bdq)

    def fold_first():
        new = torch.zeros(base.shape, dtype=torch.float32, device=dev)
        new[:, :, 0] += dk
        new[:, :, 1] += dv
        return new

    def fold_new():
        new = torch.empty_like(base)
        torch.add(base[:, :, 0], dk, out=new[:, :, 0])
        torch.add(base[:, :, 1], dv, out=new[:, :, 1])
        return new

    def fold_inplace():
        base[:, :, 0] += dk
        base[:, :, 1] += dv

    def cast_dq():
        return dq.to(torch.bfloat16)

    def cast_dkv():
        return base.to(torch.bfloat16)

    for name, fn in [("dq_first", dq_first), ("dq_add", dq_add), ("fold_first", fold_first),
                     ("fold_new", fold_new), ("fold_inplace", fold_inplace),
                     ("cast_dq", cast_dq), ("cast_dkv", cast_dkv)]:
        ms = ev_time(fn)
        host = host_time(fn)
        g, span, calls, names = gpu_time(fn)
        print(json.dumps({"part": "bwd_fold", "op": name, "B": B, "H": H, "D": D, "c": c,
                          "ms": ms, "host_us": host, "gpu_ms": g, "span_ms": span,
                          "kernels": names}), flush=True)
