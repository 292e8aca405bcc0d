"""How far the host runs ahead of its GPU: the launches a stream queues
before a launch blocks the host (the CUDA launch queue's depth).  The GPU
is held by torch.cuda._sleep (a spin of ~1 s); the host then launches
small kernels and times each launch; the first launch that takes longer
than 0.5 ms marks a full queue.  Kinds: an in-place add (1 kernel), a
small matmul, launches alternating on two streams (per stream or per
device?), and an add after a sleep on another stream (does a busy stream
fill the queue of an idle one?)."""
import json, os, sys, time
import torch

out = os.environ.get("OUT", ".")
dev = torch.device("cuda")
x = torch.zeros(1 << 10, device=dev)
a = torch.randn(64, 64, device=dev)
s2 = torch.cuda.Stream()
torch.cuda.synchronize()
# cycles for ~1.5 s
cyc = int(torch.cuda.get_device_properties(0).clock_rate * 1e3 * 1.5) if hasattr(torch.cuda.get_device_properties(0), "clock_rate") else int(2.5e9)

def trial(kind, n=8192):
    torch.cuda.synchronize()
    torch.cuda._sleep(cyc)
    ts = []
    for i in range(n):
        t0 = time.perf_counter()
        if kind == "add":
            x.add_(1.0)
        elif kind == "mm":
            torch.mm(a, a)
        elif kind == "two_streams":
            if i % 2:
                with torch.cuda.stream(s2):
                    x.add_(1.0)
            else:
                x.add_(1.0)
        elif kind == "other_stream":
            with torch.cuda.stream(s2):
                x.add_(1.0)
        ts.append(time.perf_counter() - t0)
    t_end = time.perf_counter()
    torch.cuda.synchronize()
    first = next((i for i, t in enumerate(ts) if t > 5e-4), None)
    return {"kind": kind, "launches": n, "first_blocked": first,
            "median_launch_us": sorted(ts)[n // 2] * 1e6,
            "max_launch_ms": max(ts) * 1e3,
            "blocked_launches": sum(t > 5e-4 for t in ts),
            "host_total_ms": sum(ts) * 1e3}

res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
       "cuda": torch.version.cuda, "sleep_cycles": cyc, "trials": []}
for kind in ["add", "add", "mm", "two_streams", "other_stream", "add"]:
    r = trial(kind)
    res["trials"].append(r)
    print(json.dumps(r), flush=True)
json.dump(res, open(os.path.join(out, "launch_queue.json"), "w"), indent=1)
