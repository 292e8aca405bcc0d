#!/usr/bin/env python3
"""kernel_sweep.measure's optional wall-clock spans (calibrate.py
--kernel-wall-clock), with a stand-in torch and timer (no GPU): with the
flag each timed kernel's record holds fwd_wall and bwd_wall, the host's
time before and after its forward's and its backward's timed() call, in
that order; without it the records are exactly the records the flag adds
to (same keys, same values); unmeasured rows never get spans.
Usage: test_kernel_sweep.py"""
import types

from pycheck import Recorder, StepClock, check, finish, scripts_on_path  # noqa: E402
scripts_on_path("calibrate")
import kernel_sweep  # noqa: E402


fake_torch = types.SimpleNamespace(
    bfloat16="bf16",
    randn=lambda *shape, **kw: ("tensor", shape),
    randn_like=lambda t: t,
    cuda=types.SimpleNamespace(synchronize=lambda: None, empty_cache=lambda: None))


def run(wall_clock):
    clock = StepClock(1000.0)
    kernel_sweep.time = types.SimpleNamespace(time=clock.time)  # the module's own clock
    calls = []  # (which pass, the clock while timed() ran it)

    def timed(fn, iters, warm):
        which = fn()
        calls.append((which, clock.time()))
        return 2.0, 1.5, 3.0

    forward = lambda q, k, v, causal: "fwd"  # noqa: E731
    backward_of = lambda q, k, v, causal: (q, lambda do: "bwd")  # noqa: E731
    # 4 heads: the aspects sk = 2 sq, sq / 2 at 2K too; 0.02 TFLOP leaves the
    # full 4K kernel (34 GFLOP) unmeasured
    todo, skip = kernel_sweep.plan(16, 0.02, head_dims=(128,), shapes=((1, 4, 4),),
                                   lengths=(2048, 4096))
    out = Recorder()
    kernel_sweep.measure(out, "kernels-n1.jsonl", 1, todo, skip, 5, 1e9, timed, forward,
                         backward_of, fake_torch, wall_clock=wall_clock)
    return out.recs(), calls


with_rows, calls = run(True)
without_rows, _ = run(False)
timed_rows = [r for r in with_rows if "ms" in r]
check(f"every planned kernel timed ({len(timed_rows)} of {len(with_rows)}), one unmeasured",
      len(timed_rows) == 5 and len(with_rows) == 6 and len(calls) == 10)
check("the unmeasured kernel has no span",
      all("fwd_wall" not in r and "bwd_wall" not in r for r in with_rows if "ms" not in r))
ok = True
for i, r in enumerate(timed_rows):
    (fp, ft), (bp, bt) = calls[2 * i], calls[2 * i + 1]
    fw, bw = r.get("fwd_wall"), r.get("bwd_wall")
    ok &= (fp, bp) == ("fwd", "bwd") and fw is not None and bw is not None
    ok &= fw is not None and bw is not None and fw[0] < ft < fw[1] <= bw[0] < bt < bw[1]
check("fwd_wall brackets the forward's timed(), bwd_wall the backward's, in order", ok)
check("without the flag no record has a span",
      not any("fwd_wall" in r or "bwd_wall" in r for r in without_rows))
strip = [{k: v for k, v in r.items() if k not in ("fwd_wall", "bwd_wall")} for r in with_rows]
check("with the flag the records are otherwise the same", strip == without_rows)
check("the records without the flag keep the sweep's keys",
      set(without_rows[0]) == {"part", "n", "op", "B", "H", "Hk", "D", "sq", "sk", "causal", "ms",
                               "ms_min", "ms_max", "TFLOPs", "bwd_ms", "bwd_ms_min",
                               "bwd_ms_max", "bwd_TFLOPs"})
finish()
