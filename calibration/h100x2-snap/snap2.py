"""Allocator traces of single passes with real NCCL on 2 GPUs: the
forward+backward passes whose reserved memory the model over-counts with
comm.record_stream, their backward-only controls, and host timing.
    torchrun --standalone --nproc-per-node 2 snap2.py OUTDIR
Per case and rank: every allocator event (action, address, bytes, stream,
host time_us, innermost calibrate.py frames), the pass's peaks, and when
the host finished issuing the pass (host_issue_ms, before the final
synchronize) against the GPU's time for the pass (gpu_ms, CUDA events)."""
import gc, json, os, sys, gzip, time
import torch
import torch.distributed as dist
sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "calibrate"))
import calibrate as C

CASES = [  # sched, causal, tokens per GPU, pass, attention
    ("zigzag", True, 65536, "fwdbwd", "softmax"),
    ("zigzag", True, 65536, "bwd", "softmax"),
    ("ring", False, 65536, "fwdbwd", "softmax"),
    ("ring", False, 65536, "bwd", "softmax"),
    ("usp-u1", False, 65536, "fwdbwd", "softmax"),
    ("tokenring", True, 65536, "fwdbwd", "softmax"),
    ("ring", False, 32768, "fwdbwd", "linear"),
    ("stripe", True, 65536, "bwd", "softmax"),
    ("usp-u2", False, 65536, "fwd", "softmax"),
    ("ring", False, 65536, "fwd", "softmax"),
]

def frames(fr):
    out = []
    for f in fr or []:
        fn = f.get("filename", "")
        if "calibrate" in fn or "snap2.py" in fn:
            out.append(f"{os.path.basename(fn)}:{f.get('line')}:{f.get('name')}")
        if len(out) == 3:
            break
    return out

def one(case, out):
    sched, causal, c, pas, att = case
    n, rank = dist.get_world_size(), dist.get_rank()
    C.LOCAL_COMM = False
    B, H, D = 1, 32, 128
    gc.collect(); torch.cuda.synchronize(); torch.cuda.empty_cache()
    p = C.make_program(sched, causal, n, rank, B, H, D, c, True, att)
    p.keep_saved = False
    dout = torch.randn_like(p.q) if pas != "fwd" else None
    if pas == "bwd":
        p.prepare_backward(dout)
    elif pas == "fwdbwd":
        p.dout = dout
    torch.cuda.synchronize(); gc.collect(); torch.cuda.empty_cache()
    dist.barrier()
    before, rb = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                             max_entries=200000)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    t0 = time.perf_counter()
    t0_us = time.time() * 1e6
    if pas == "fwd":
        p.run(); keep = None
    elif pas == "bwd":
        keep = p.run_backward()
    else:
        p.run()
        t_fwd = time.perf_counter()
        keep = p.run_backward()
    t1 = time.perf_counter()
    e1.record()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    rec = {"sched": sched, "mask": "causal" if causal else "full", "n": n, "rank": rank,
           "tokens_per_gpu": c, "pass": pas, "attention": att,
           "allocated_before": before, "reserved_before": rb,
           "peak_allocated": torch.cuda.max_memory_allocated(),
           "peak_reserved": torch.cuda.max_memory_reserved(),
           "allocated_after": torch.cuda.memory_allocated(),
           "host_issue_ms": (t1 - t0) * 1e3, "gpu_ms": e0.elapsed_time(e1),
           "host_fwd_ms": (t_fwd - t0) * 1e3 if pas == "fwdbwd" else None,
           "t0_us": t0_us, "comm": "nccl"}
    ev = []
    for tr in snap["device_traces"]:
        for e in tr:
            ev.append([e["action"], e["addr"], e["size"], e.get("stream", 0),
                       e.get("time_us"), frames(e.get("frames"))])
    rec["events"] = ev
    out.write(json.dumps(rec) + "\n")
    print(f"snap2: {sched} {rec['mask']} {att} r{rank} {c} {pas}: peak {rec['peak_allocated']/2**30:.3f} "
          f"alloc {rec['peak_reserved']/2**30:.3f} reserved, host {rec['host_issue_ms']:.1f} ms "
          f"gpu {rec['gpu_ms']:.1f} ms, {len(ev)} events", flush=True)
    del keep, p, dout

def main():
    outdir = sys.argv[1]
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    C.out32()
    x = torch.zeros(1024, device="cuda")
    dist.all_reduce(x)
    seen = set()
    for sched, causal, c, pas, att in CASES:  # warm-up at a small size
        if (sched, causal, att) in seen:
            continue
        seen.add((sched, causal, att))
        p = C.make_program(sched, causal, dist.get_world_size(), dist.get_rank(), 1, 32, 128,
                           2048, True, att)
        p.prepare_backward(torch.randn_like(p.q)); p.run_backward(); p = None
    torch.cuda.synchronize()
    with gzip.open(os.path.join(outdir, f"snapshots-r{dist.get_rank()}.jsonl.gz"), "wt") as out:
        for case in CASES:
            try:
                one(case, out)
            except Exception as e:  # noqa: BLE001
                print(f"snap2: {case} failed: {e}", flush=True)
            dist.barrier()
    if dist.get_rank() == 0:
        env = {"gpu": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
               "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_", "PYTORCH_"))}}
        with open(os.path.join(outdir, "env.json"), "w") as f:
            json.dump(env, f, indent=1)
    dist.destroy_process_group()

main()
