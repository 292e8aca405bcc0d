"""Does a chain of short flash kernels, as a pass issues them, reach the
power cap, after how long, and what does it cost in time?  Samples
nvidia-smi every 10 ms (SM clock, power, throttle reasons) in the
background while chains of PyTorch flash SDPA kernels (B=1, head dim 128,
bf16) run for CHAIN_S seconds each after IDLE_S seconds idle: forward or
backward, kernels of about 0.4-24 ms, issued back to back (gap 0: the
host runs ahead, as in a pass whose kernels outlast their host issue) or
each after the previous has ended plus a host gap (a host-bound pass).
Every kernel is timed by CUDA events (start and end relative to the
chain's first event), so a kernel's time is known against how long the
chain has run and against the clock samples around it."""
import json, os, subprocess, time
import torch
import torch.nn.functional as F

out = os.environ.get("OUT", ".")
CHAIN_S, IDLE_S = 2.5, 1.5
FIELDS = ["timestamp", "clocks.sm", "power.draw.instant", "power.draw", "temperature.gpu",
          "clocks_throttle_reasons.active"]
if subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader"],
                  capture_output=True).returncode != 0:
    FIELDS.remove("power.draw.instant")
smi = subprocess.Popen(
    ["nvidia-smi", "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits", "-lms", "10"],
    stdout=open(os.path.join(out, "smi.csv"), "w"), stderr=subprocess.DEVNULL)
info = subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,clocks.max.sm,driver_version",
                       "--format=csv,noheader"], capture_output=True, text=True).stdout
time.sleep(1.0)
t0 = time.time()
# (label, pass, heads, tokens, causal, host gap after each kernel ends in ms: None = back to back)
CHAINS = [
    ("fwd 6ms back to back", "fwd", 64, 8192, False, None),
    ("fwd 1.5ms back to back", "fwd", 16, 8192, False, None),
    ("fwd 1.5ms gap 0.3ms", "fwd", 16, 8192, False, 0.3),
    ("fwd 1.5ms gap 1.5ms", "fwd", 16, 8192, False, 1.5),
    ("fwd 0.4ms gap 0.1ms", "fwd", 4, 8192, False, 0.1),
    ("bwd 4.5ms back to back", "bwd", 16, 8192, False, None),
    ("bwd 4.5ms gap 0.5ms", "bwd", 16, 8192, False, 0.5),
    ("fwd 24ms back to back", "fwd", 64, 16384, False, None),
    ("fwd causal 12ms back to back", "fwd", 64, 16384, True, None),
    ("bwd 18ms back to back", "bwd", 64, 8192, False, None),
]
chains = []


def spin(ms):
    end = time.perf_counter() + ms * 1e-3
    while time.perf_counter() < end:
        pass


for label, pas, H, L, causal, gap in CHAINS:
    q = torch.randn(1, H, L, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn_like(q, requires_grad=True)
    v = torch.randn_like(q, requires_grad=True)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        do = torch.randn_like(o)
        if pas == "fwd":
            run = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        else:
            run = lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        run()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); run(); b.record(); torch.cuda.synchronize()
        est = a.elapsed_time(b)
        n = max(10, int(CHAIN_S * 1e3 / (est + (gap or 0) + 0.02)))
        time.sleep(IDLE_S)
        evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
               for _ in range(n)]
        torch.cuda.synchronize()
        start_wall = time.time() - t0
        for s, e in evs:
            s.record(); run(); e.record()
            if gap is not None:
                e.synchronize()
                spin(gap)
        torch.cuda.synchronize()
        end_wall = time.time() - t0
        first = evs[0][0]
        ks = [[round(first.elapsed_time(s), 4), round(s.elapsed_time(e), 4)] for s, e in evs]
    chains.append({"label": label, "pass": pas, "B": 1, "H": H, "D": 128, "tokens": L,
                   "causal": causal, "gap_ms": gap, "start_wall_s": start_wall,
                   "end_wall_s": end_wall, "kernels_start_ms_dur_ms": ks})
    print(label, n, "kernels", "first", ks[0][1], "last", ks[-1][1], "span", ks[-1][0], flush=True)
    del q, k, v, o, do
    torch.cuda.empty_cache()
time.sleep(0.5)
smi.terminate()
json.dump({"device": info.strip(), "torch": torch.__version__, "t0_unix": t0, "smi_fields": FIELDS,
           "chain_s": CHAIN_S, "idle_s": IDLE_S, "chains": chains},
          open(os.path.join(out, "chains.json"), "w"))
