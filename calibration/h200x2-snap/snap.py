"""Allocator traces (torch.cuda.memory._record_memory_history) of single
passes of calibrate.py's one-rank programs (--emulate-ranks semantics: the
communication is local copies into the program's own buffers), to explain
the memory model's largest residual errors.  One process, one GPU, run as
    torchrun --standalone --nproc-per-node 1 snap.py OUTDIR
Per case: every allocator event of the pass (alloc, free_requested,
free_completed, segment_alloc, segment_free) with size, address, stream and
the innermost calibrate.py frames; plus the pass's peak allocated/reserved."""
import gc, json, os, sys, gzip
import torch
import torch.distributed as dist
sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "calibrate"))
import calibrate as C

CASES = [  # sched, causal, n, rank, tokens per GPU, pass, attention
    ("ring", False, 2, 0, 16384, "bwd", "softmax"),
    ("ring", False, 2, 0, 65536, "bwd", "softmax"),
    ("ring", True, 2, 0, 65536, "bwd", "softmax"),
    ("ring", True, 2, 1, 65536, "bwd", "softmax"),
    ("tasp", True, 2, 1, 65536, "bwd", "softmax"),
    ("ring", False, 4, 3, 65536, "bwd", "softmax"),
    ("ring", False, 2, 0, 65536, "fwdbwd", "softmax"),
    ("lasp2", False, 8, 7, 4096, "fwd", "linear"),
    ("lasp2", False, 8, 7, 16384, "fwd", "linear"),
]

def frames(fr):
    out = []
    for f in fr or []:
        fn = f.get("filename", "")
        if "calibrate" in fn or "snap.py" in fn:
            out.append(f"{os.path.basename(fn)}:{f.get('line')}:{f.get('name')}")
        if len(out) == 3:
            break
    return out

REAL = [("ring", False, 2, None, 65536, "bwd", "softmax"),
        ("ring", True, 2, None, 65536, "bwd", "softmax"),
        ("tasp", True, 2, None, 65536, "bwd", "softmax")]

def one(case, out):
    sched, causal, n, rank, c, pas, att = case
    if rank is None:  # real NCCL ranks
        C.LOCAL_COMM = False
        rank = dist.get_rank()
    else:
        C.LOCAL_COMM = (n, rank)
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
    before, rb = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                             max_entries=200000)
    if pas == "fwd":
        p.run(); keep = None
    elif pas == "bwd":
        keep = p.run_backward()
    else:
        p.run(); keep = p.run_backward()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    rec = {"sched": sched, "mask": "causal" if causal else "full", "n": n, "rank": rank,
           "tokens_per_gpu": c, "pass": pas, "attention": att,
           "allocated_before": before, "reserved_before": rb,
           "peak_allocated": torch.cuda.max_memory_allocated(),
           "peak_reserved": torch.cuda.max_memory_reserved(),
           "allocated_after": torch.cuda.memory_allocated(),
           "comm": "nccl" if not C.LOCAL_COMM else "local copies"}
    ev = []
    for tr in snap["device_traces"]:
        for e in tr:
            ev.append([e["action"], e["addr"], e["size"], e.get("stream", 0), frames(e.get("frames"))])
    rec["events"] = ev
    rec["segments_end"] = [[s["address"], s["total_size"], s["allocated_size"], s["segment_type"]]
                           for s in snap["segments"]]
    out.write(json.dumps(rec) + "\n")
    print(f"snap: {sched} {rec['mask']} n{n} r{rank} {c} {pas}: peak {rec['peak_allocated']/2**30:.3f} "
          f"alloc {rec['peak_reserved']/2**30:.3f} reserved, {len(ev)} events", flush=True)
    del keep, p, dout

def main():
    outdir, mode = sys.argv[1], sys.argv[2]
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    C.out32()
    if mode == "real":
        cases = REAL
        x = torch.zeros(1024, device="cuda")
        dist.all_reduce(x)
        for sched, causal, n, _, c, pas, att in REAL:
            C.LOCAL_COMM = False
            p = C.make_program(sched, causal, n, dist.get_rank(), 1, 32, 128, 2048, True, att)
            p.prepare_backward(torch.randn_like(p.q)); p.run_backward(); p = None
        with gzip.open(os.path.join(outdir, f"snapshots-real-r{dist.get_rank()}.jsonl.gz"), "wt") as out:
            for case in cases:
                try:
                    one(case, out)
                except Exception as e:  # noqa: BLE001
                    print(f"snap: {case} failed: {e}", flush=True)
                dist.barrier()
        dist.destroy_process_group()
        return
    # warm every program up once at a small size (kernels, library workspaces)
    seen = set()
    for sched, causal, n, rank, c, pas, att in CASES:
        if (sched, causal, n, att) in seen:
            continue
        seen.add((sched, causal, n, att))
        C.LOCAL_COMM = (n, rank)
        p = C.make_program(sched, causal, n, rank, 1, 32, 128, 2048, True, att)
        p.prepare_backward(torch.randn_like(p.q)); p.run_backward(); p = None
    with gzip.open(os.path.join(outdir, "snapshots.jsonl.gz"), "wt") as out:
        for case in CASES:
            try:
                one(case, out)
            except Exception as e:  # noqa: BLE001
                print(f"snap: {case} failed: {e}", flush=True)
    env = {"gpu": torch.cuda.get_device_properties(0).name, "torch": torch.__version__,
           "cuda": torch.version.cuda}
    with open(os.path.join(outdir, "env.json"), "w") as f:
        json.dump(env, f)
    dist.destroy_process_group()

main()
