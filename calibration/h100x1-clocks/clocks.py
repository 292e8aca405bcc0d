"""Does a long flash-attention kernel slow down as it runs, and is it the
clock?  Samples nvidia-smi (SM clock, power, temperature, throttle
reasons) every 20 ms in the background while timing, by CUDA events,
long causal and full forward and backward kernels (PyTorch's flash SDPA,
B=1, H=64, D=128, bf16) of 16K-128K tokens, each shape run 6 times back
to back after a 2 s idle: a slowdown within a kernel shows as a longer
time for longer kernels per FLOP, one across kernels as later repeats
slower; the clock samples say whether the SM clock fell."""
import json, os, subprocess, sys, time
import torch
import torch.nn.functional as F

out = os.environ.get("OUT", ".")
smi = subprocess.Popen(
    ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
     "clocks_throttle_reasons.active", "--format=csv,noheader,nounits", "-lms", "20"],
    stdout=open(os.path.join(out, "smi.csv"), "w"), stderr=subprocess.DEVNULL)
time.sleep(1.0)
dev = "cuda"
recs = []
t0 = time.time()
for causal in (True, False):
    for L in (16384, 32768, 65536, 131072):
        q = torch.randn(1, 64, L, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn_like(q, requires_grad=True)
        v = torch.randn_like(q, requires_grad=True)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # warm
            do = torch.randn_like(o)
            torch.autograd.grad(o, (q, k, v), do)
            torch.cuda.synchronize()
            time.sleep(2.0)
            for pas in ("fwd", "bwd"):
                for it in range(6):
                    if pas == "bwd":
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    wall = time.time() - t0
                    s.record()
                    if pas == "fwd":
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    else:
                        torch.autograd.grad(o, (q, k, v), do)
                    e.record()
                    torch.cuda.synchronize()
                    r = {"causal": causal, "tokens": L, "pass": pas, "iter": it,
                         "start_s": wall, "end_s": time.time() - t0, "ms": s.elapsed_time(e)}
                    recs.append(r)
                    print(json.dumps(r), flush=True)
                time.sleep(2.0)
        del q, k, v, o, do
        torch.cuda.empty_cache()
time.sleep(0.5)
smi.terminate()
json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "t0_unix": t0,
           "records": recs}, open(os.path.join(out, "kernels.json"), "w"), indent=1)
