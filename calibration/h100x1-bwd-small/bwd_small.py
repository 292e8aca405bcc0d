#!/usr/bin/env python3
"""The backward flash kernel at the small shapes of a kernel table, timed
three ways on one GPU (B = 1, 32 heads, head dim 128, bf16), to see what a
table's bwd_ms holds there:

  est     calibrate.py's measure_compute figure: an autograd forward +
          backward step (scaled_dot_product_attention, flash backend,
          o.backward(ones)) timed by CUDA events, minus the forward call
          timed alone (fwd); the h200x2-tool / h200x4-tool tables' bwd_ms
  direct  the backward call alone (aten's flash backward), CUDA events, as
          calibrate.py's compute sweep times it
  gpu     the GPU time of the backward call's kernels alone (torch.profiler:
          the sum of its kernels' durations, and the span from its first
          kernel's start to its last one's end)

and the host time of each (perf_counter around the call, no synchronise):
the forward call, the backward call, and the autograd step's backward
(o.backward) alone.  One record per shape, JSON lines, on stdout.

usage: python3 bwd_small.py [MAX_TOKENS]   (default 6144; calibrate.py's
       compute_shapes: sq 768.. MAX, sk in sq/2, sq, 2 sq, causal at sq = sk)
"""
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts", "calibrate"))
import calibrate  # noqa: E402  (flash, flash_bwd, compute_shapes)

ITERS, WARM = 25, 5
B, H, D = 1, 32, 128


def ev_time(fn):
    """Median ms of fn() by CUDA events, each from an idle GPU (synchronised)."""
    for _ in range(WARM):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(ITERS):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def host_time(fn, before=None):
    """Median us of the host's time in fn() (no synchronise inside), from an
    idle GPU; before() runs first, untimed."""
    ts = []
    for _ in range(ITERS):
        if before:
            before()
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e6)
        torch.cuda.synchronize()
    return statistics.median(ts)


def gpu_time(fn):
    """(median sum of kernel durations, median span) in ms of fn()'s kernels,
    by torch.profiler; calls are 3 ms apart so each is its own cluster."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(WARM):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(ITERS):
            fn()
            torch.cuda.synchronize()
            time.sleep(0.003)
    ks = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0:
            ks.append((e.time_range.start, e.time_range.end, e.name))
    ks.sort()
    groups, cur = [], []
    for k in ks:
        if cur and k[0] - max(c[1] for c in cur) > 1500:
            groups.append(cur)
            cur = []
        cur.append(k)
    if cur:
        groups.append(cur)
    sums = [sum(e - s for s, e, _ in g) / 1e3 for g in groups]
    spans = [(max(e for _, e, _ in g) - g[0][0]) / 1e3 for g in groups]
    names = sorted({n[:60] for _, _, n in groups[-1]}) if groups else []
    return statistics.median(sums), statistics.median(spans), len(groups), names


def main():
    max_tokens = int(sys.argv[1]) if len(sys.argv) > 1 else 6144
    dev = "cuda"
    for sq, sk, causal in calibrate.compute_shapes(max_tokens):
        q = torch.randn(B, sq, H, D, dtype=torch.bfloat16, device=dev, requires_grad=True)
        k = torch.randn(B, sk, H, D, dtype=torch.bfloat16, device=dev, requires_grad=True)
        v = torch.randn_like(k, requires_grad=True)
        with torch.no_grad():
            fwd = ev_time(lambda: calibrate.flash(q, k, v, causal))
            fwd_host = host_time(lambda: calibrate.flash(q, k, v, causal))
            fwd_gpu, fwd_span, _, _ = gpu_time(lambda: calibrate.flash(q, k, v, causal))

        def fwd_bwd():
            o = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
            o.backward(torch.ones_like(o))
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            fb = ev_time(fwd_bwd)
            fb_host = host_time(fwd_bwd)
            fb_gpu, fb_span, _, _ = gpu_time(fwd_bwd)
            # the autograd backward alone: its host time from the call to return
            held = {}

            def make_o():
                held["o"] = torch.nn.functional.scaled_dot_product_attention(
                    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
                held["g"] = torch.ones_like(held["o"])
            autograd_bwd_host = host_time(lambda: held["o"].backward(held["g"]), before=make_o)
        with torch.no_grad():
            o, lse = calibrate.flash(q, k, v, causal)
            do = torch.randn_like(o)
            direct = ev_time(lambda: calibrate.flash_bwd(do, q, k, v, o, lse, causal))
            bwd_host = host_time(lambda: calibrate.flash_bwd(do, q, k, v, o, lse, causal))
            bwd_gpu, bwd_span, ngroups, names = gpu_time(
                lambda: calibrate.flash_bwd(do, q, k, v, o, lse, causal))
        print(json.dumps({
            "part": "bwd_small", "B": B, "H": H, "D": D, "sq": sq, "sk": sk, "causal": causal,
            "fwd_ms": fwd, "fwd_host_us": fwd_host, "fwd_gpu_ms": fwd_gpu, "fwd_span_ms": fwd_span,
            "fwd_bwd_ms": fb, "bwd_ms_est": fb - fwd, "fwd_bwd_host_us": fb_host,
            "fwd_bwd_gpu_ms": fb_gpu, "fwd_bwd_span_ms": fb_span,
            "autograd_bwd_host_us": autograd_bwd_host,
            "bwd_direct_ms": direct, "bwd_host_us": bwd_host, "bwd_gpu_ms": bwd_gpu,
            "bwd_span_ms": bwd_span, "profiled_calls": ngroups, "bwd_kernels": names}),
            flush=True)
        del q, k, v, o, lse, do
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
