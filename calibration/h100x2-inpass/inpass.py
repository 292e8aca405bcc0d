"""Why a communication call costs the host more inside a pass than alone,
and what a pass's host does after its last modelled call (issue 25).
    torchrun --standalone --nproc-per-node 2 inpass.py OUTDIR
Runs scripts/calibrate/calibrate.py's pass programs unchanged (ring full and
causal, zigzag and TASP causal: batch_isend_irecv; all-gather CP full and
causal: all_gather_into_tensor, reduce_scatter_tensor in the backward;
B = 1, 32 heads, head dim 128, bf16, real NCCL) at 1.5K-12K tokens per GPU,
forward and backward, in ONE session on one host.  Per case, after 3
warm-up passes:
- plain (8): unwrapped; host_ms until the pass returns, gpu_ms by CUDA
  events around it (calibrate.py's timed());
- inpass (8): each module call the plan prices (flash, flash_bwd, the
  out/lse update, the dK/dV fold, waits, and the communication calls) timed
  by perf_counter on entry and return (no synchronisation): `calls` lists
  [class, start_us, end_us] from the pass's start (outermost calls only),
  `pass_us` the pass's host time;
- prealloc (8): as inpass, with every buffer the program makes by
  torch.empty_like / torch.empty / calibrate.bf16 (the receive buffers,
  the all-gather output, the dK/dV accumulators sent) handed out from a pool
  made by an earlier pass, so the caching allocator serves none of them;
- alone: each communication call of the pass again with the same shapes
  and peers, on buffers made beforehand, host time around the call only:
  idle (GPU synchronised first), sleep (behind torch.cuda._sleep of the
  pass's GPU length), kernels (behind a 1 ms sleep and then the pass's own
  kernels: the same program without communication, so the compute stream
  holds the pass's queue of kernels), 10 each;
- profiled (1): a wrapped pass under torch.profiler with a record_function
  range per call: for each call, where in it the first kernel launch
  (cudaLaunchKernel*, cuLaunchKernel*) happens and how many it makes, and
  the pass's last launch before its return (`tail_from_last_launch_us`).
Then calibrate.py's own host part (measure_host: each op alone, this
session) into host-n2.jsonl.  (Session s1 ran an earlier version of this
file that differed in two points: its `alone` clock also covered building
the P2POp list, about 10-15 us, and its profiled ranges mixed the CPU
ranges with the profiler's GPU spans of the same names, so s1's launch
records are not used.)  Writes inpass-r{rank}.jsonl, launch-r{rank}.jsonl, host-n2.jsonl, env.json."""
import datetime, gc, json, os, statistics, sys, time
import torch
import torch.distributed as dist
from torch.profiler import profile, ProfilerActivity, record_function
sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "calibrate"))
import calibrate as C

SIZES = [1536, 3072, 6144, 12288]
SCHEDS = [("ring", False), ("ring", True), ("zigzag", True), ("tasp", True),
          ("allgather", False), ("allgather", True)]
COMM = ("batch_isend_irecv", "all_gather_into_tensor", "reduce_scatter_tensor")
ORIG = {k: getattr(dist, k) for k in COMM}
REAL_ALLOC = {"empty_like": torch.empty_like, "empty": torch.empty, "bf16": C.bf16}


class State:
    on = False
    prof = False
    t0 = 0.0
    depth = 0
    calls = []      # [class, start_us, end_us]
    comm_sig = []   # signatures of the communication calls, in order
    pool = None     # None: real allocation; list: capture; iterator: serve
    served = 0
    missed = 0


S = State()


def signature(name, a, k):
    if name == "batch_isend_irecv":
        return (name, [(op.op is dist.isend, tuple(op.tensor.shape), str(op.tensor.dtype),
                        op.peer) for op in a[0]])
    out, inp = a[0], a[1]
    return (name, [(tuple(out.shape), str(out.dtype)), (tuple(inp.shape), str(inp.dtype))])


def wrap(name, fn, comm=False):
    def w(*a, **k):
        if not S.on:
            return fn(*a, **k)
        if comm:
            S.comm_sig.append(signature(name, a, k))
        outer = S.depth == 0
        S.depth += 1
        rf = record_function("call:" + name) if (S.prof and outer) else None
        if rf:
            rf.__enter__()
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            t1 = time.perf_counter()
            if rf:
                rf.__exit__(None, None, None)
            S.depth -= 1
            if outer:
                S.calls.append([name, (t0 - S.t0) * 1e6, (t1 - S.t0) * 1e6])
    return w


C.flash = wrap("flash", C.flash)
C.flash_bwd = wrap("flash_bwd", C.flash_bwd)
C.update_out_lse = wrap("merge", C.update_out_lse)
C.wait_all = wrap("wait", C.wait_all)
C.Pass.fold = wrap("fold_dkv", C.Pass.fold)
for _k in COMM:
    setattr(dist, _k, wrap(_k, ORIG[_k], comm=True))


def pooled(kind):
    real = REAL_ALLOC[kind]

    def f(*a, **k):
        if S.pool is None:
            return real(*a, **k)
        if isinstance(S.pool, list):
            t = real(*a, **k)
            S.pool.append(t)
            return t
        t = next(S.pool, None)
        if t is None:
            S.missed += 1
            return real(*a, **k)
        S.served += 1
        return t
    return f


torch.empty_like = pooled("empty_like")
torch.empty = pooled("empty")
C.bf16 = pooled("bf16")


def runner(p, pas):
    return p.run if pas == "fwd" else p.run_backward


def one_pass(fn, wrapped=False, prof=False):
    dist.barrier()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    S.calls, S.comm_sig, S.depth = [], [], 0
    S.on, S.prof = wrapped, prof
    S.t0 = t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    S.on = S.prof = False
    b.record()
    torch.cuda.synchronize()
    rec = {"host_ms": (t1 - t0) * 1e3, "gpu_ms": a.elapsed_time(b)}
    if wrapped:
        rec["pass_us"] = (t1 - t0) * 1e6
        rec["calls"] = [[n, round(s, 2), round(e, 2)] for n, s, e in S.calls]
    return rec


def sleep_cycles_per_ms():
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    torch.cuda._sleep(20_000_000)
    b.record()
    torch.cuda.synchronize()
    return 20_000_000 / a.elapsed_time(b)


def replay_bufs(sig):
    name, parts = sig
    if name == "batch_isend_irecv":
        return [(s, torch.randn(shape, device="cuda").to(getattr(torch, dt.split(".")[1])), peer)
                for s, shape, dt, peer in parts]
    return [torch.zeros(shape, dtype=getattr(torch, dt.split(".")[1]), device="cuda")
            for shape, dt in parts]


def call_args(sig, bufs):
    """The call's arguments (the P2POp list built here, outside the clock,
    as the pass builds it before the call)."""
    if sig[0] == "batch_isend_irecv":
        return ([dist.P2POp(dist.isend if s else dist.irecv, t, peer) for s, t, peer in bufs],), {}
    return (bufs[0], bufs[1]), {"async_op": True}


def issue(sig, bufs, args=None):
    """The call alone (original function); returns the works to wait on."""
    a, k = args or call_args(sig, bufs)
    w = ORIG[sig[0]](*a, **k)
    return w if sig[0] == "batch_isend_irecv" else [w]


def alone(sig, bufs, backlog):
    """Host microseconds of one call with the GPU idle or behind a backlog."""
    dist.barrier()
    torch.cuda.synchronize()
    args = call_args(sig, bufs)
    if backlog is not None:
        backlog()
    t0 = time.perf_counter()
    works = issue(sig, bufs, args)
    t1 = time.perf_counter()
    for w in works:
        w.wait()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6


LAUNCH = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
          "cudaLaunchCooperativeKernel", "cudaMemcpyAsync", "cudaMemsetAsync")


def launch_points(prof, path):
    """Per outermost wrapped call: duration, offset of its first launch,
    launch count; and the pass's last launch before its end."""
    prof.export_chrome_trace(path)
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    os.remove(path)
    # the CPU ranges only (the profiler also writes each range's GPU span,
    # category gpu_user_annotation, under the same name)
    ranges = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
              and str(e.get("name", "")).startswith("call:")]
    launches = sorted(e["ts"] for e in ev if e.get("ph") == "X" and
                      any(str(e.get("name", "")).startswith(x) for x in LAUNCH))
    whole = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"
             and e.get("name") == "pass"]
    tail = None
    if whole and launches:
        end = whole[0]["ts"] + whole[0]["dur"]
        tail = end - max(t for t in launches if t <= end)
    out = []
    for r in sorted(ranges, key=lambda e: e["ts"]):
        lo, hi = r["ts"], r["ts"] + r["dur"]
        inside = [t for t in launches if lo <= t <= hi]
        out.append({"call": r["name"][5:], "ts_us": r["ts"], "dur_us": r["dur"],
                    "first_launch_us": (inside[0] - lo) if inside else None,
                    "last_launch_us": (inside[-1] - lo) if inside else None,
                    "launches": len(inside)})
    return out, launches, tail


def main():
    outdir = sys.argv[1]
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120),
                            device_id=torch.device("cuda", local))
    n, rank = dist.get_world_size(), dist.get_rank()
    C.out32()
    os.makedirs(outdir, exist_ok=True)
    fh = open(os.path.join(outdir, f"inpass-r{rank}.jsonl"), "w")
    fl = open(os.path.join(outdir, f"launch-r{rank}.jsonl"), "w")
    cpm = sleep_cycles_per_ms()
    if rank == 0:
        with open(os.path.join(outdir, "env.json"), "w") as f:
            json.dump({"gpu": torch.cuda.get_device_properties(0).name, "gpus": n,
                       "torch": torch.__version__,
                       "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "python": sys.version, "sleep_cycles_per_ms": cpm,
                       "cpu": open("/proc/cpuinfo").read().split("model name")[1]
                       .split("\n")[0].strip(" :\t")}, f)
    for c in SIZES:
        for sched, causal in SCHEDS:
            gc.collect()
            torch.cuda.empty_cache()
            p = C.make_pass(sched, causal, n, rank, 1, 32, 128, c, True)
            p.prepare_backward(torch.randn_like(p.q))
            quiet = C.make_pass(sched, causal, n, rank, 1, 32, 128, c, False)
            quiet.prepare_backward(torch.randn_like(quiet.q))
            for pas in ("fwd", "bwd"):
                fn = runner(p, pas)
                key = {"sched": sched, "mask": "causal" if causal else "full",
                       "tokens_per_gpu": c, "pass": pas, "rank": rank, "n": n,
                       "B": 1, "H": 32, "D": 128}
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                gpu = []
                for mode, kw in [("plain", {}), ("inpass", {"wrapped": True})]:
                    for i in range(8):
                        r = one_pass(fn, **kw)
                        gpu.append(r["gpu_ms"])
                        fh.write(json.dumps({**key, "mode": mode, "iter": i, **r}) + "\n")
                # the pass's communication calls, as the last inpass pass made them
                S.on = True
                S.calls, S.comm_sig = [], []
                dist.barrier()
                fn()
                S.on = False
                sigs = list(S.comm_sig)
                torch.cuda.synchronize()
                # prealloc: capture a pass's buffers, then serve them in order
                S.pool = []
                dist.barrier()
                fn()
                torch.cuda.synchronize()
                pool = S.pool
                for i in range(8):
                    S.pool, S.served, S.missed = iter(pool), 0, 0
                    r = one_pass(fn, wrapped=True)
                    S.pool = None
                    fh.write(json.dumps({**key, "mode": "prealloc", "iter": i,
                                         "served": S.served, "missed": S.missed, **r}) + "\n")
                S.pool = None
                del pool
                # each communication call alone
                ms = statistics.median(gpu)
                qfn = runner(quiet, pas)
                backlogs = {"idle": None,
                            "sleep": lambda: torch.cuda._sleep(int(ms * cpm)),
                            "kernels": lambda: (torch.cuda._sleep(int(cpm)), qfn())}
                for j, sig in enumerate(sigs):
                    bufs = replay_bufs(sig)
                    for w in issue(sig, bufs):
                        w.wait()
                    for mode, bl in backlogs.items():
                        us = [alone(sig, bufs, bl) for _ in range(10)]
                        fh.write(json.dumps({**key, "mode": "alone_" + mode, "call_index": j,
                                             "call": sig[0], "ops": len(sig[1]),
                                             "host_us": us}) + "\n")
                    del bufs
                fh.flush()
                # profiled: the launch points
                for it in range(2):
                    dist.barrier()
                    torch.cuda.synchronize()
                    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                 record_shapes=False, with_stack=False) as prof:
                        S.calls, S.comm_sig, S.depth = [], [], 0
                        S.on, S.prof = True, True
                        with record_function("pass"):
                            fn()
                        S.on = S.prof = False
                        torch.cuda.synchronize()
                    if it == 0:
                        continue  # the profiler's own first pass warms it
                    calls, launches, tail = launch_points(prof, f"/tmp/inpass-trace-{rank}.json")
                    fl.write(json.dumps({**key, "calls": calls, "launches": len(launches),
                                         "tail_from_last_launch_us": tail}) + "\n")
                fl.flush()
                fn = qfn = None
            p = quiet = None
            if rank == 0:
                print(f"inpass: {c} {sched} {causal} done {time.strftime('%X')}", flush=True)
    fh.close()
    fl.close()
    # this session's isolated host costs (calibrate.py's own host part)
    try:
        C.measure_host(C.Out(outdir, rank), n, rank, 1, 32, 128)
    except Exception as e:  # noqa: BLE001 -- the pass records above stand alone
        print(f"inpass: host part failed: {e}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
