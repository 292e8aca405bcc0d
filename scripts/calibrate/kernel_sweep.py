#!/usr/bin/env python3
"""The flash-kernel sweep of the calibration tool (--parts kernels): which
attention kernels to time, bounded by memory and by device time, and the
loop that times them.  The plan is pure Python (no torch), so it can be
listed and checked on any machine:

    scripts/calibrate/kernel_sweep.py              # the default plan, one JSON line a kernel
    scripts/calibrate/kernel_sweep.py --summary    # how many kernels per axis value

Axes (not a cross product; every axis is covered at several values of the
others):
  head dim   64, 96, 128, 192, 256
  B x H      1, 2, 4, 8, 16, 32, 64, 128, 256 with batch 1 (query heads =
             KV heads up to 8, GQA with 8 KV heads from 32: the tables show
             GQA and MHA take the same time), and batch 4 at B x H 4, 16,
             64, 256 (1, 4, 16, 64 heads)
  length     1K .. 256K tokens (sq = sk), full and causal
  aspect     sk = 2 sq and sk = sq / 2 (the half blocks zigzag and TASP
             run), full mask, at head dims 64, 128, 256, B x H 1, 4, 32
and forward and backward of each.  A kernel is planned only while its
Q, K, V and O take at most --mem-gib (16 GiB) and its forward at most
--max-tflop nominal TFLOPs (a device-time bound: 20 TFLOP is about 60 ms
forward on an H100); the rest of the grid is listed as unmeasured with the
reason, never fitted.  Kernels are timed in a fixed shuffled order (seeded)
so that a run cut by its time budget loses a spread of shapes, not the
largest lengths; those cut are written as unmeasured ("budget").

Records (kernels-nN.jsonl): the compute sweep's fields (B, H, Hk, D, sq,
sk, causal, ms, bwd_ms, ...: CUDA-event time of one call from its host
issue, as calibrate.timed measures every kernel), or "unmeasured": why.
With wall_clock (calibrate.py --kernel-wall-clock) a timed kernel's record
also has fwd_wall and bwd_wall: the host's Unix time (s) when the forward's
and the backward's timing began (before their warm-up runs) and ended (the
GPU synchronised), so that clock, power and temperature samples taken beside
the sweep (nvidia-smi) can be matched to each kernel; without it the
records are as before.
"""
import argparse
import json
import random
import sys
import time

HEAD_DIMS = (64, 96, 128, 192, 256)
LENGTHS = tuple(1024 << i for i in range(9))  # 1K .. 256K
# (B, H, Hk): batch 1 over every B x H, batch 4 at four of them
SHAPES = ([(1, h, h if h <= 8 else 8) for h in (1, 2, 4, 8, 16, 32, 64, 128, 256)] +
          [(4, h, h if h <= 8 else 8) for h in (1, 4, 16, 64)])
ASPECT_DIMS = (64, 128, 256)
ASPECT_BH = (1, 4, 32)
ASPECT_LENGTHS = (2048, 8192, 32768)
GIB = 1 << 30


def flops(B, H, D, sq, sk, causal):
    """Nominal forward FLOPs (the sweeps' and tasp-sim's convention)."""
    return 4.0 * B * H * D * sq * sk * (0.5 if causal else 1.0)


def qkvo_bytes(B, H, Hk, D, sq, sk):
    """bf16 Q and O (sq x H) and K and V (sk x Hk)."""
    return 2 * B * D * (2 * sq * H + 2 * sk * Hk)


def grid(head_dims=HEAD_DIMS, shapes=SHAPES, lengths=LENGTHS):
    """Every kernel of the sweep's design, in a fixed order; head_dims,
    shapes ((B, H, Hk) triples) and lengths narrow it (--kernel-head-dims,
    --kernel-shapes, --kernel-lengths: a user's kernel calibrated at the
    shapes their model runs)."""
    out = []
    for D in head_dims:
        for B, H, Hk in shapes:
            for L in lengths:
                for causal in (False, True):
                    out.append(dict(B=B, H=H, Hk=Hk, D=D, sq=L, sk=L, causal=causal))
    for D in ASPECT_DIMS:
        if D not in head_dims:
            continue
        for B, H, Hk in shapes:
            if B != 1 or H not in ASPECT_BH:
                continue
            for L in ASPECT_LENGTHS:
                if L not in lengths:
                    continue
                for sk in (2 * L, L // 2):
                    out.append(dict(B=B, H=H, Hk=Hk, D=D, sq=L, sk=sk, causal=False))
    return out


def plan(mem_gib=16.0, max_tflop=20.0, seed=25, head_dims=HEAD_DIMS, shapes=SHAPES,
         lengths=LENGTHS):
    """(to time, in order; unmeasurable with the reason)."""
    todo, skip = [], []
    for k in grid(head_dims, shapes, lengths):
        if qkvo_bytes(k["B"], k["H"], k["Hk"], k["D"], k["sq"], k["sk"]) > mem_gib * GIB:
            skip.append(dict(k, unmeasured=f"Q, K, V, O over {mem_gib:g} GiB"))
        elif flops(k["B"], k["H"], k["D"], k["sq"], k["sk"], k["causal"]) > max_tflop * 1e12:
            skip.append(dict(k, unmeasured=f"forward over {max_tflop:g} TFLOP (device time)"))
        else:
            todo.append(k)
    random.Random(seed).shuffle(todo)
    return todo, skip


def flash_backward(flash, flash_bwd):
    """backward_of for PyTorch's flash kernels called directly: the forward's
    output and log-sum-exp feed the backward kernel."""
    def backward_of(q, k, v, causal):
        o, lse = flash(q, k, v, causal)
        return o, lambda do: flash_bwd(do, q, k, v, o, lse, causal)
    return backward_of


def measure(out, name, n, todo, skip, iters, budget_s, timed, forward, backward_of, torch,
            extra=None, wall_clock=False):
    """Time each planned kernel's forward (forward(q, k, v, causal)) and
    backward (backward_of(q, k, v, causal) -> (out, run(dout))) with
    timed(fn, iters, warmup) -> median, min, max ms; stop starting new ones
    after budget_s.  Writes every kernel of the grid (each record with the
    fields of extra): measured, or unmeasured with why; with wall_clock, a
    measured record also holds fwd_wall and bwd_wall ([start, end] Unix s
    of each timed() call: see the module's docstring)."""
    extra = extra or {}
    t0 = time.time()
    for i, k in enumerate(todo):
        if time.time() - t0 > budget_s:
            for rest in todo[i:]:
                out.write(name, dict(part="kernels", n=n, op="attn", **extra,
                                     **rest, unmeasured=f"time budget ({budget_s:g} s)"))
            print(f"calibrate: kernel sweep stopped at its {budget_s:g} s budget, "
                  f"{i} of {len(todo)} timed", flush=True)
            break
        B, H, Hk, D, sq, sk, causal = (k[x] for x in ("B", "H", "Hk", "D", "sq", "sk", "causal"))
        q = kk = v = o = run_bwd = do = None
        try:
            q = torch.randn(B, sq, H, D, dtype=torch.bfloat16, device="cuda")
            kk = torch.randn(B, sk, Hk, D, dtype=torch.bfloat16, device="cuda")
            v = torch.randn_like(kk)
            fl = flops(B, H, D, sq, sk, causal)
            warm = 1 if fl > 2e12 else 2
            fwd_wall = [time.time()]
            ms, lo, hi = timed(lambda: forward(q, kk, v, causal), iters, warm)
            fwd_wall.append(time.time())
            o, run_bwd = backward_of(q, kk, v, causal)
            do = torch.randn_like(o)
            if wall_clock:  # the backward's span starts with the GPU idle
                torch.cuda.synchronize()
            bwd_wall = [time.time()]
            bms, blo, bhi = timed(lambda: run_bwd(do), iters, warm)
            bwd_wall.append(time.time())
        except RuntimeError as e:  # a shape the kernel refuses, or memory
            o = run_bwd = None
            out.write(name, dict(part="kernels", n=n, op="attn", **extra, **k,
                                 unmeasured=f"failed: {str(e).splitlines()[0][:200]}"))
            q = kk = v = do = None
            torch.cuda.empty_cache()
            continue
        rec = dict(part="kernels", n=n, op="attn", **extra, **k, ms=ms, ms_min=lo, ms_max=hi,
                   TFLOPs=fl / ms / 1e9, bwd_ms=bms, bwd_ms_min=blo, bwd_ms_max=bhi,
                   bwd_TFLOPs=2.5 * fl / bms / 1e9)
        if wall_clock:
            rec.update(fwd_wall=fwd_wall, bwd_wall=bwd_wall)
        out.write(name, rec)
        q = kk = v = o = run_bwd = do = None
        if (i + 1) % 50 == 0:
            torch.cuda.empty_cache()
            print(f"calibrate: kernel sweep {i + 1} of {len(todo)} at "
                  f"{time.time() - t0:.0f} s", flush=True)
    for k in skip:
        out.write(name, dict(part="kernels", n=n, op="attn", **extra, **k))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mem-gib", type=float, default=16.0)
    ap.add_argument("--max-tflop", type=float, default=20.0)
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    todo, skip = plan(a.mem_gib, a.max_tflop)
    if not a.summary:
        for k in todo + skip:
            print(json.dumps(k))
        return
    total = sum(flops(k["B"], k["H"], k["D"], k["sq"], k["sk"], k["causal"]) for k in todo)
    print(f"{len(todo)} kernels to time, {len(skip)} unmeasurable; "
          f"{total / 1e12:.0f} TFLOP forward in all")
    for axis in ("D", "sq", "causal"):
        c = {}
        for k in todo:
            c[k[axis]] = c.get(k[axis], 0) + 1
        print(axis, dict(sorted(c.items())))
    c = {}
    for k in todo:
        c[k["B"] * k["H"]] = c.get(k["B"] * k["H"], 0) + 1
    print("B x H", dict(sorted(c.items())))


if __name__ == "__main__":
    sys.exit(main())
