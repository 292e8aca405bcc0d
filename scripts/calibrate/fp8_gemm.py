#!/usr/bin/env python3
"""FP8 GEMM sweep on one H100 (tasp-sim issue 21): the linear layers of a
decoder layer (scripts/calibrate/gemm_shapes.py's sweep) timed as
Transformer Engine runs them under its FP8 recipe, each beside bf16 of the
same shape in the same process.

FP8 operands as TE's Linear hands them to cuBLASLt (both K-contiguous, the
only layout the H100 FP8 tensor cores take: A row-major, B column-major):
  fwd    Y  = X W^T    X e4m3 (M x K),  W e4m3 (N x K) [TE's FP8 weight]
  dgrad  dX = dY W     dY e5m2 (M x N), W^T e4m3 (K x N) [TE's transposed FP8 weight]
  wgrad  dW = dY^T X   dY^T e5m2 (N x M), X^T e4m3 (K x M) [TE's cast-transpose outputs]
per-tensor scales (delayed scaling), bf16 out; fwd with fast accumulation,
dgrad and wgrad with split accumulation (TE's defaults _2X_ACC_FPROP False,
_2X_ACC_DGRAD/WGRAD True).  bf16: torch F.linear / dY @ W / dY^T @ X as
calibrate.py measure_gemm times them.  CUDA events, median of ITERS timed
calls after 2 warm-up calls, each call timed alone.
"""
import json, os, statistics, sys, time
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "calibrate"))
import gemm_shapes  # noqa: E402

OUT = os.environ["OUT"]
ITERS = 7
BUDGET_S = float(os.environ.get("BUDGET_S", "290"))
t0 = time.time()
dev = torch.device("cuda")
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


def timed(fn):
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(ITERS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts), min(ts), max(ts)


def bf16(r, c):
    return torch.randn(r, c, device=dev, dtype=torch.bfloat16)


def f8(r, c, dt):
    return (torch.randn(r, c, device=dev, dtype=torch.bfloat16) * 0.5).to(dt)


one = torch.ones((), device=dev, dtype=torch.float32)

env = {"torch": torch.__version__, "cuda": torch.version.cuda,
       "device": torch.cuda.get_device_name(0),
       "total_memory": torch.cuda.get_device_properties(0).total_memory,
       "cublaslt": str(torch.backends.cuda.preferred_blas_library()) if hasattr(torch.backends.cuda, "preferred_blas_library") else None}
try:
    import subprocess
    env["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
except Exception as e:  # noqa: BLE001
    env["nvidia_smi"] = repr(e)
json.dump(env, open(os.path.join(OUT, "env-n1.json"), "w"), indent=1)

# a correctness check of the layouts: fp8 fwd against bf16 of the same values
x8, w8 = f8(256, 512, E4), f8(384, 512, E4)
ref = x8.to(torch.bfloat16).float() @ w8.to(torch.bfloat16).float().t()
got = torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True).float()
check = {"part": "check", "max_abs_err": (got - ref).abs().max().item(), "ref_max": ref.abs().max().item()}
print(check, flush=True)

f = open(os.path.join(OUT, "fp8gemm-n1.jsonl"), "w")
f.write(json.dumps(check) + "\n")
models = ["llama2-7b", "llama3-8b", "llama3-70b"]
done = 0
stopped = None
for model in models:
    for s in gemm_shapes.sweep([model], [1, 2, 4, 8], [gemm_shapes.tokens(t) for t in "4K,8K,16K,32K,64K".split(",")]):
        if time.time() - t0 > BUDGET_S:
            stopped = f"budget at {model} {s}"
            break
        M, N, K, prod = s["m"], s["n"], s["k"], s["product"]
        # bf16, as calibrate.py measure_gemm
        if prod == "fwd":
            x, w = bf16(M, K), bf16(N, K); fb = lambda: F.linear(x, w)  # noqa: E731
        elif prod == "dgrad":
            dy, w = bf16(M, N), bf16(N, K); fb = lambda: dy @ w  # noqa: E731
        else:
            dy, x = bf16(M, N), bf16(M, K); fb = lambda: dy.t() @ x  # noqa: E731
        with torch.no_grad():
            rb = timed(fb)
        fb = x = w = dy = None
        # fp8, as TE runs the product
        if prod == "fwd":
            a, bt, fa, dts, acc = f8(M, K, E4), f8(N, K, E4), True, ("e4m3", "e4m3"), True
        elif prod == "dgrad":
            a, bt, fa, dts = f8(M, N, E5), f8(K, N, E4), False, ("e5m2", "e4m3")
        else:
            a, bt, fa, dts = f8(N, M, E5), f8(K, M, E4), False, ("e5m2", "e4m3")
        ff = lambda: torch._scaled_mm(a, bt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fa)  # noqa: E731
        with torch.no_grad():
            r8 = timed(ff)
        ff = a = bt = None
        torch.cuda.empty_cache()
        fl = gemm_shapes.flops(s)
        base = {"part": "gemm", "n": 1, "model": model, "tp": s["tp"], "layer": s["layer"],
                "product": prod, "M": M, "N": N, "K": K}
        f.write(json.dumps({**base, "dtype": "bf16", "ms": rb[0], "ms_min": rb[1], "ms_max": rb[2],
                            "TFLOPs": fl / rb[0] / 1e9}) + "\n")
        f.write(json.dumps({**base, "dtype": "fp8", "a": dts[0], "b": dts[1], "fast_accum": fa,
                            "ms": r8[0], "ms_min": r8[1], "ms_max": r8[2],
                            "TFLOPs": fl / r8[0] / 1e9, "speedup_vs_bf16": rb[0] / r8[0]}) + "\n")
        f.flush()
        done += 1
    if stopped:
        break
f.close()
print(f"{done} shapes in {time.time() - t0:.0f} s; stopped: {stopped}", flush=True)
