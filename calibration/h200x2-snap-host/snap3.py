"""Host time of the caching allocator's cudaMalloc, and allocator traces of
small passes with real NCCL on 2 GPUs, where the host is not far ahead of
the GPU.
    torchrun --standalone --nproc-per-node 2 snap3.py OUTDIR
- malloc-r{rank}.jsonl: per size, the host time of torch.empty when the
  caching allocator must make a new segment (cudaMalloc; the cache emptied
  and the device synchronized first), the same request served from the
  cache, and a new segment while the GPU is busy with queued kernels
  (whether cudaMalloc waits for the GPU).
- snapshots-r{rank}.jsonl.gz: per case, as calibration/h100x2-snap's
  snap2.py (calibrate.py's programs unchanged, the cache emptied before the
  pass, as its memory part measures), but the history recorded without
  stacks (context=None: the host's own pace, not the trace's), with the
  peaks of an untraced run of the same case first, host and GPU times of
  the pass and of its forward (forward+backward), and every allocator
  event [action, address, bytes, stream, time_us]."""
import gc, json, os, sys, gzip, time
import torch
import torch.distributed as dist
sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "calibrate"))
import calibrate as C

SIZES_MIB = [2, 20, 48, 96, 192, 384, 768, 1536, 3072]
CASES = [(s, True, c, pas) for c in (3072, 6144, 12288)
         for s in ("zigzag",) for pas in ("fwd", "bwd", "fwdbwd")]
CASES += [("ring", False, c, "fwdbwd") for c in (3072, 6144, 12288)]


def malloc_times(out):
    rows = []
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for mib in SIZES_MIB:
        nb = mib << 20
        for rep in range(5):
            gc.collect(); torch.cuda.synchronize(); torch.cuda.empty_cache()
            t0 = time.perf_counter(); x = torch.empty(nb, dtype=torch.uint8, device="cuda")
            t1 = time.perf_counter()
            del x
            t2 = time.perf_counter(); y = torch.empty(nb, dtype=torch.uint8, device="cuda")
            t3 = time.perf_counter()
            del y
            torch.cuda.synchronize(); torch.cuda.empty_cache()
            for _ in range(40):  # about 40 x 1 ms of queued GPU work
                big @ big
            t4 = time.perf_counter(); z = torch.empty(nb, dtype=torch.uint8, device="cuda")
            t5 = time.perf_counter()
            e = torch.cuda.Event(); e.record(); busy = not e.query()
            del z
            torch.cuda.synchronize()
            rows.append({"mib": mib, "rep": rep, "new_segment_us": (t1 - t0) * 1e6,
                         "cached_us": (t3 - t2) * 1e6, "new_segment_gpu_busy_us": (t5 - t4) * 1e6,
                         "gpu_still_busy_after": busy})
    for r in rows:
        out.write(json.dumps(r) + "\n")
    del big


def run_pass(p, pas, marks):
    if pas == "fwd":
        p.run(); return None
    if pas == "bwd":
        return p.run_backward()
    p.run()
    marks.append(time.perf_counter())
    em = torch.cuda.Event(enable_timing=True); em.record(); marks.append(em)
    return p.run_backward()


def one(case, out, traced):
    sched, causal, c, pas = case
    n, rank = dist.get_world_size(), dist.get_rank()
    gc.collect(); torch.cuda.synchronize(); torch.cuda.empty_cache()
    p = C.make_program(sched, causal, n, rank, 1, 32, 128, c, True, "softmax")
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
    if traced:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                 max_entries=200000)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    t0 = time.perf_counter(); t0_us = time.time() * 1e6
    marks = []
    keep = run_pass(p, pas, marks)
    t1 = time.perf_counter()
    e1.record()
    torch.cuda.synchronize()
    rec = {"sched": sched, "mask": "causal" if causal else "full", "n": n, "rank": rank,
           "tokens_per_gpu": c, "pass": pas, "traced": traced,
           "allocated_before": before, "reserved_before": rb,
           "peak_allocated": torch.cuda.max_memory_allocated(),
           "peak_reserved": torch.cuda.max_memory_reserved(),
           "host_issue_ms": (t1 - t0) * 1e3, "gpu_ms": e0.elapsed_time(e1),
           "host_fwd_ms": (marks[0] - t0) * 1e3 if marks else None,
           "gpu_fwd_ms": e0.elapsed_time(marks[1]) if marks else None, "t0_us": t0_us}
    if traced:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        rec["events"] = [[e["action"], e["addr"], e["size"], e.get("stream", 0), e.get("time_us")]
                         for tr in snap["device_traces"] for e in tr]
    out.write(json.dumps(rec) + "\n")
    print(f"snap3: {sched} {rec['mask']} r{rank} {c} {pas} traced={traced}: "
          f"{rec['peak_allocated']/2**30:.3f} alloc {rec['peak_reserved']/2**30:.3f} reserved, "
          f"host {rec['host_issue_ms']:.2f} ms (fwd {rec['host_fwd_ms']}) gpu {rec['gpu_ms']:.2f} ms "
          f"(fwd {rec['gpu_fwd_ms']})", flush=True)
    del keep, p, dout


def main():
    outdir = sys.argv[1]
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    C.out32()
    x = torch.zeros(1024, device="cuda")
    dist.all_reduce(x)
    rank = dist.get_rank()
    for sched, causal in (("zigzag", True), ("ring", False)):  # warm-up
        p = C.make_program(sched, causal, dist.get_world_size(), rank, 1, 32, 128, 2048, True,
                           "softmax")
        p.prepare_backward(torch.randn_like(p.q)); p.run_backward(); p = None
    torch.cuda.synchronize()
    with open(os.path.join(outdir, f"malloc-r{rank}.jsonl"), "w") as out:
        malloc_times(out)
    dist.barrier()
    with gzip.open(os.path.join(outdir, f"snapshots-r{rank}.jsonl.gz"), "wt") as out:
        for case in CASES:
            for traced in (False, True):
                try:
                    one(case, out, traced)
                except Exception as e:  # noqa: BLE001
                    print(f"snap3: {case} failed: {e}", flush=True)
                dist.barrier()
    if rank == 0:
        env = {"gpu": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
               "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_", "PYTORCH_"))}}
        with open(os.path.join(outdir, "env.json"), "w") as f:
            json.dump(env, f, indent=1)
    dist.destroy_process_group()


main()
