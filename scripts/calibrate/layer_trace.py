"""Where a decoder layer's peak memory comes from, op by op (one GPU).

    OUT=DIR python3 scripts/calibrate/layer_trace.py [NAME.jsonl]

Runs scripts/calibrate/layer.py's Layer (the program behind
calibration/h100x1-layer) for Llama-3-8B and -70B on one GPU and records, for a clean
fwd and a clean fwd+bwd pass: every aten op in order with the bytes it
allocated and memory_allocated() after it (a TorchDispatchMode, which the
autograd engine carries into the backward), the live blocks at the peak
(torch.cuda.memory._record_memory_history: size, and the layer.py line that
allocated it in the forward), and what autograd saved (saved_tensors_hooks:
storage, bytes, shape, dtype).
"""
import json, os, sys, traceback
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
from torch.utils._python_dispatch import TorchDispatchMode
import layer as LY
import gemm_shapes

OUT = os.environ.get("OUT", "/tmp")
G = 2 ** 30


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.rows = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = torch.cuda.memory_allocated()
        out = func(*args, **(kwargs or {}))
        after = torch.cuda.memory_allocated()
        outs = out if isinstance(out, (tuple, list)) else [out]
        shapes = [list(o.shape) for o in outs if isinstance(o, torch.Tensor)]
        self.rows.append({"op": str(func), "delta": after - before, "after": after,
                          "max": torch.cuda.max_memory_allocated(), "shapes": shapes[:3]})
        return out


def run(model, c, pas, out, sp):
    m = gemm_shapes.load_model(model)
    L = LY.Layer(m, 1, sp, "ulysses" if sp > 1 else "tp", c)
    x = LY.bf16(c, m["hidden"], grad=True)
    dy = LY.bf16(c, m["hidden"]) if pas != "fwd" else None
    # warm: cuBLAS workspace, flash's first call
    y = L.forward(x)
    if dy is not None:
        y.backward(dy)
    del y
    for p in L.params:
        p.grad = None
    x.grad = None
    LY._clear()
    saved = {}

    def pack(t):
        try:
            s = t.untyped_storage()
            key = s.data_ptr()
            if key not in saved:
                saved[key] = {"bytes": s.nbytes(), "shape": list(t.shape), "dtype": str(t.dtype)}
        except Exception:
            pass
        return t

    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=200000)
    log = OpLog()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with log:
            y = L.forward(x)
            if dy is not None:
                y.backward(dy)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    peak = torch.cuda.max_memory_allocated()
    after = torch.cuda.memory_allocated()
    # replay the trace: the live blocks at the moment allocated bytes peaked
    live, cur, best, best_live = {}, 0, -1, None
    tr = snap["device_traces"][0] if snap.get("device_traces") else []
    for ev in tr:
        a = ev.get("action")
        if a == "alloc":
            fr = [f"{os.path.basename(f['filename'])}:{f['line']}:{f['name']}"
                  for f in ev.get("frames", []) if "layer.py" in f.get("filename", "")
                  or "trace.py" in f.get("filename", "")]
            live[ev["addr"]] = (ev["size"], fr[:3])
            cur += ev["size"]
            if cur > best:
                best, best_live = cur, dict(live)
        elif a == "free_requested":
            if ev["addr"] in live:
                cur -= live.pop(ev["addr"])[0]
    blocks = sorted(([s, fr] for s, fr in (best_live or {}).values()), key=lambda r: -r[0])
    rec = {"model": model, "tokens": c, "pass": pas, "sp": sp, "before": before, "peak": peak,
           "after": after, "weights": L.weights_bytes(),
           "trace_peak_over_start": best, "live_at_peak": [b for b in blocks if b[0] > 2 ** 20],
           "live_small_bytes": sum(b[0] for b in blocks if b[0] <= 2 ** 20),
           "saved": sorted(saved.values(), key=lambda r: -r["bytes"]), "ops": log.rows}
    if out:
        out.write(json.dumps(rec) + "\n")
        out.flush()
    print(model, c, pas, "peak over before GiB", round((peak - before) / G, 3),
          "after", round((after - before) / G, 3), "ops", len(log.rows), flush=True)
    del y, x, dy
    for p in L.params:
        p.grad = None
    LY._clear()


def main():
    """One GPU; under torchrun with 2 or more, Ulysses SP over them (rank 0
    writes its records)."""
    name = sys.argv[1] if len(sys.argv) > 1 else "memtrace.jsonl"
    sp, rank = 1, 0
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        import torch.distributed as dist
        rank = int(os.environ["RANK"])
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
        sp = dist.get_world_size()
    out = open(os.path.join(OUT, name), "w") if rank == 0 else None
    for model, c in (("llama3-8b", 16384), ("llama3-8b", 65536), ("llama3-70b", 16384),
                     ("llama3-70b", 65536)):
        for pas in ("fwd", "fwdbwd"):
            try:
                run(model, c, pas, out, sp)
            except Exception:
                traceback.print_exc()
    if out:
        out.close()
    print(torch.__version__, torch.cuda.get_device_name(0))


if __name__ == "__main__":
    main()
