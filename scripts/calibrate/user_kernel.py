"""A user's own attention kernel in the calibration tool's kernel sweep
(calibrate.py --parts kernels --kernel MODULE:FUNCTION).

The function's signature (what the sweep calls):

    out = function(q, k, v, causal)

  q        (B, sq, H, D)  bfloat16, CUDA; a (B, S, H, D) view, as a
                          sequence-parallel pass holds its chunk
  k, v     (B, sk, Hk, D) bfloat16; Hk divides H (GQA where Hk < H; the
                          sweep's --kernel-shapes choose Hk)
  causal   bool: the causal mask, bottom-right aligned where sq != sk
           (query i sees keys up to i + sk - sq), as flash attention does
  out      (B, sq, H, D), or a tuple whose first element is it (a kernel
           that also returns its log-sum-exp)

The softmax scale is the kernel's own choice (1/sqrt(D) is usual).  The
backward is whatever autograd runs for `out`: the sweep times
torch.autograd.grad(out, (q, k, v), dout) on a graph built once (the
forward is timed under torch.no_grad()).  A kernel with its own backward
makes it reachable through a torch.autograd.Function.

MODULE is an importable module name (a.b.c) or a path to a .py file.

Besides the sweep's records (kernels-nN.jsonl, each with "kernel":
MODULE:FUNCTION) the host time of issuing one call is measured at a few
lengths (kernel-host-nN.jsonl, in the format of overhead-nN.jsonl's
attn_fwd rows), which the converter (scripts/calibrate/fit.py
--user-kernel) takes off the timed kernels as it does for the bundled
tables, and writes as compute.host_us.
"""
import importlib
import importlib.util
import os
import sys


def refuse(msg):
    """A bad --kernel: the message on stderr, exit 2."""
    print(f"calibrate: {msg}", file=sys.stderr)
    raise SystemExit(2)


def load(spec):
    """The function MODULE:FUNCTION names; SystemExit (exit 2) with what is
    wrong where it cannot be had."""
    mod_name, sep, fn_name = spec.rpartition(":")
    if not sep or not mod_name or not fn_name:
        refuse(f"--kernel {spec!r}: expected MODULE:FUNCTION (a module name or a .py "
               "path, a colon, a function name)")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            loader = importlib.util.spec_from_file_location("user_kernel_module", mod_name)
            if loader is None:
                raise ImportError(f"no such file {mod_name}")
            mod = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
    except (ImportError, OSError, SyntaxError) as e:
        refuse(f"--kernel {spec!r}: cannot import {mod_name}: {e}")
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        refuse(f"--kernel {spec!r}: {mod_name} has no function {fn_name!r}")
    return fn


def output_of(result):
    """out of a call: the tensor, or a tuple's first element."""
    return result[0] if isinstance(result, (tuple, list)) else result


def wrap(fn, torch):
    """(forward, backward_of) for kernel_sweep.measure."""
    def forward(q, k, v, causal):
        with torch.no_grad():
            return output_of(fn(q, k, v, causal))

    def backward_of(q, k, v, causal):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        out = output_of(fn(*leaves, causal))
        if tuple(out.shape) != tuple(q.shape):
            raise RuntimeError(f"the kernel returned shape {tuple(out.shape)}, expected "
                               f"{tuple(q.shape)} (B, sq, H, D)")
        return out.detach(), lambda do: torch.autograd.grad(out, leaves, do, retain_graph=True)
    return forward, backward_of


def measure_host(out, name, n, fn, todo, host_us, torch, spec):
    """Host microseconds to issue one forward call (GPU kept busy: the pure
    issue cost, calibrate.host_us) at the shortest, a middle and the
    longest square length of the planned shape with the most kernels,
    rows as overhead-nN.jsonl's attn_fwd rows."""
    sq = [k for k in todo if k["sq"] == k["sk"] and not k["causal"]]
    if not sq:
        return
    key = lambda k: (k["B"], k["H"], k["Hk"], k["D"])  # noqa: E731
    counts = {}
    for k in sq:
        counts[key(k)] = counts.get(key(k), 0) + 1
    B, H, Hk, D = max(sorted(counts), key=lambda s: counts[s])
    lengths = sorted({k["sq"] for k in sq if key(k) == (B, H, Hk, D)})
    for L in sorted({lengths[0], lengths[len(lengths) // 2], lengths[-1]}):
        q = torch.randn(B, L, H, D, dtype=torch.bfloat16, device="cuda")
        kv = torch.randn(B, L, Hk, D, dtype=torch.bfloat16, device="cuda")
        with torch.no_grad():
            host, gpu = host_us(lambda: fn(q, kv, kv, False), True, reps=5)
        out.write(name, {"part": "overhead", "n": n, "op": "attn_fwd", "kernel": spec, "B": B,
                         "H": H, "Hk": Hk, "D": D, "sq": L, "sk": L, "host_us": host,
                         "gpu_us": gpu})
        q = kv = None
        torch.cuda.empty_cache()
