"""The host's timeline of calibrate.py's ring, zigzag and TASP passes on 2 GPUs:
what each operation class costs the Python thread that issues the pass.
    torchrun --standalone --nproc-per-node 2 hostline.py OUTDIR
The programs are scripts/calibrate/calibrate.py's, imported and run
unchanged (B = 1, 32 heads, head dim 128, bf16, real NCCL); only module
functions are wrapped with a perf_counter clock that keeps each class's
exclusive time (a wrapped call inside another is taken out of the outer).
Per case (schedule, mask, tokens per GPU, pass), after 3 warm-up passes:
- plain: 8 passes unwrapped; host_ms = until the pass's last call returned,
  gpu_ms = CUDA events around it (the pass as calibrate.py's timed() sees it);
- busy: 8 passes unwrapped behind ~20 ms of torch.cuda._sleep, so the host
  never waits for the GPU: the pure issue cost;
- wrapped: 8 passes with the class clock (warm allocator cache);
- cold: 3 wrapped passes each after gc + empty_cache (every segment is a
  new cudaMalloc, as the memory part's clean pass);
- profiled: 1 warm and 1 cold pass under torch.profiler (CPU and CUDA
  activities, record_shapes and with_stack off): per-op self CPU time,
  CUDA runtime calls (cudaLaunchKernel, cudaMalloc, ...) among them.
Writes hostline-r{rank}.jsonl and profile-r{rank}.jsonl."""
import datetime, gc, json, os, sys, time
from collections import defaultdict
import torch
import torch.distributed as dist
from torch.profiler import profile, ProfilerActivity
sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "calibrate"))
import calibrate as C

SIZES = [1536, 3072, 6144, 12288]
SCHEDS = [("ring", False), ("ring", True), ("zigzag", True), ("tasp", True)]
PASSES = ["fwd", "bwd", "fwdbwd"]


class Clock:
    def __init__(self):
        self.on = False
        self.reset()

    def reset(self):
        self.stack, self.excl, self.cnt = [], defaultdict(float), defaultdict(int)
        self.t0 = time.perf_counter()


CLK = Clock()


def wrap(name, fn):
    def w(*a, **k):
        if not CLK.on:
            return fn(*a, **k)
        t0 = time.perf_counter()
        CLK.stack.append([0.0])
        try:
            return fn(*a, **k)
        finally:
            d = time.perf_counter() - t0
            child = CLK.stack.pop()[0]
            CLK.excl[name] += d - child
            CLK.cnt[name] += 1
            if CLK.stack:
                CLK.stack[-1][0] += d
    return w


C.flash = wrap("attn_fwd", C.flash)
C.flash_bwd = wrap("attn_bwd", C.flash_bwd)
C.update_out_lse = wrap("merge", C.update_out_lse)
C.wait_all = wrap("wait", C.wait_all)
C.Pass.keys = wrap("keys_view_or_cat", C.Pass.keys)
C.Pass.exchange = wrap("p2p_ops_build", C.Pass.exchange)
C.Pass.fold = wrap("fold_dkv", C.Pass.fold)
dist.batch_isend_irecv = wrap("batch_isend_irecv", dist.batch_isend_irecv)
torch.empty_like = wrap("empty_like", torch.empty_like)
torch.zeros = wrap("zeros", torch.zeros)


def runner(p, pas):
    if pas == "fwd":
        return p.run
    if pas == "bwd":
        return p.run_backward
    return lambda: (p.run(), p.run_backward())


def one_pass(fn, busy=False, cold=False, wrapped=False):
    if cold:
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    dist.barrier()
    torch.cuda.synchronize()
    seg0 = torch.cuda.memory_stats().get("segment.all.allocated", 0)
    if busy:
        torch.cuda._sleep(40_000_000)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    if wrapped:
        CLK.reset()
        CLK.on = True
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    CLK.on = False
    b.record()
    torch.cuda.synchronize()
    seg = torch.cuda.memory_stats().get("segment.all.allocated", 0) - seg0
    rec = {"host_ms": (t1 - t0) * 1e3, "gpu_ms": a.elapsed_time(b), "new_segments": seg}
    if wrapped:
        rec["class_us"] = {k: v * 1e6 for k, v in CLK.excl.items()}
        rec["class_calls"] = dict(CLK.cnt)
        rec["class_us"]["python_between"] = (t1 - t0 - sum(CLK.excl.values())) * 1e6
    return rec


def ka_rows(prof):
    rows = []
    for e in prof.key_averages():
        rows.append({"op": e.key, "count": e.count,
                     "self_cpu_us": getattr(e, "self_cpu_time_total", 0.0),
                     "cpu_us": getattr(e, "cpu_time_total", 0.0),
                     "self_device_us": getattr(e, "self_device_time_total",
                                               getattr(e, "self_cuda_time_total", 0.0))})
    return rows


def main():
    outdir = sys.argv[1]
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60),
                            device_id=torch.device("cuda", local))
    n, rank = dist.get_world_size(), dist.get_rank()
    C.out32()
    os.makedirs(outdir, exist_ok=True)
    fh = open(os.path.join(outdir, f"hostline-r{rank}.jsonl"), "w")
    fp = open(os.path.join(outdir, f"profile-r{rank}.jsonl"), "w")
    if rank == 0:
        with open(os.path.join(outdir, "env.json"), "w") as f:
            json.dump({"gpu": torch.cuda.get_device_properties(0).name, "gpus": n,
                       "torch": torch.__version__,
                       "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "python": sys.version}, f)
    for c in SIZES:
        for sched, causal in SCHEDS:
            gc.collect()
            torch.cuda.empty_cache()
            p = C.make_pass(sched, causal, n, rank, 1, 32, 128, c, True)
            p.prepare_backward(torch.randn_like(p.q))
            for pas in PASSES:
                fn = runner(p, pas)
                key = {"sched": sched, "mask": "causal" if causal else "full",
                       "tokens_per_gpu": c, "pass": pas, "rank": rank, "n": n,
                       "B": 1, "H": 32, "D": 128}
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                for mode, kw, reps in [("plain", {}, 8), ("busy", {"busy": True}, 8),
                                       ("wrapped", {"wrapped": True}, 8),
                                       ("cold", {"cold": True, "wrapped": True}, 3)]:
                    for i in range(reps):
                        r = one_pass(fn, **kw)
                        fh.write(json.dumps({**key, "mode": mode, "iter": i, **r}) + "\n")
                    fh.flush()
                for mode in ("warm", "cold"):
                    if mode == "cold":
                        gc.collect(); torch.cuda.synchronize(); torch.cuda.empty_cache()
                    dist.barrier()
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                 record_shapes=False, with_stack=False) as prof:
                        t0 = time.perf_counter()
                        fn()
                        t1 = time.perf_counter()
                        torch.cuda.synchronize()
                    fp.write(json.dumps({**key, "mode": mode, "host_ms": (t1 - t0) * 1e3,
                                         "ops": ka_rows(prof)}) + "\n")
                    fp.flush()
                    if rank == 0 and c in (3072, 6144) and sched in ("zigzag", "ring"):
                        prof.export_chrome_trace(os.path.join(
                            outdir, f"trace-{sched}-{key['mask']}-{c}-{pas}-{mode}-r0.json"))
                fn = None
            p = None
            if rank == 0:
                print(f"hostline: {c} {sched} {causal} done {time.strftime('%X')}", flush=True)
    fh.close(); fp.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
