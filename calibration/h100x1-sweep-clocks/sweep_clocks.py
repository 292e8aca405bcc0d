"""At which SM clock did the kernel sweep time its kernels?  Runs the
calibration tool's flash-kernel sweep (calibrate.py --parts kernels, the
command of ../h100x1-sweep/README.md with a smaller --compute-budget and
--kernel-wall-clock, so each kernel's record holds the host's wall-clock
span of its forward and backward timing) while nvidia-smi samples the SM
and memory clocks, power, temperature and throttle reasons every 20 ms
beside it; then, after IDLE_S idle, a chain of one long forward kernel of
the sweep's grid issued back to back for CHAIN_S seconds (a minutes-long
load, against the 2.5 s chains of ../h100x1-chains), each timed by CUDA
events, sampled the same way.

usage (the calibration tool's directory as CALIB, results under $OUT):
    python3 sweep_clocks.py CALIB BUDGET_S
writes $OUT/smi.csv, $OUT/sweep/ (the sweep's kernels-n1.jsonl,
env-n1.json, headroom-n1.jsonl), $OUT/log.txt (the sweep's output),
$OUT/meta.json (device, command, wall-clock reference times) and
$OUT/chain.json (meta's fields and the chain's kernels)."""
import json
import math
import os
import subprocess
import sys
import time

CALIB, BUDGET_S = sys.argv[1], float(sys.argv[2])
out = os.environ.get("OUT", ".")
IDLE_S, CHAIN_S = 10.0, 60.0
# the chain's kernel: a long causal forward of the sweep's own grid (B = 1,
# 64 query heads over 8 KV heads, head dim 128, 32K tokens: 17.6 nominal
# TFLOP, about 55 ms on an H100)
CHAIN = dict(B=1, H=64, Hk=8, D=128, sq=32768, sk=32768, causal=True)
FIELDS = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"

info = subprocess.run(["nvidia-smi", "--query-gpu=name,power.limit,clocks.max.sm,"
                       "clocks.max.mem,driver_version", "--format=csv,noheader"],
                      capture_output=True, text=True).stdout.strip()
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=" + FIELDS, "--format=csv,noheader,nounits",
                        "-lms", "20"],
                       stdout=open(os.path.join(out, "smi.csv"), "w"), stderr=subprocess.DEVNULL)
meta = {"device": info, "smi_fields": FIELDS.split(","), "budget_s": BUDGET_S,
        "idle_s": IDLE_S, "chain_s": CHAIN_S, "t0_unix": time.time(),
        "t0_local": time.strftime("%Y/%m/%d %H:%M:%S"), "tz": time.strftime("%Z")}
time.sleep(2.0)  # idle samples before the sweep
cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", os.path.join(CALIB, "calibrate.py"),
       "--out", os.path.join(out, "sweep"), "--parts", "kernels", "--iters", "5",
       "--compute-budget", f"{BUDGET_S:g}", "--kernel-max-tflop", "40", "--kernel-wall-clock"]
meta["sweep_cmd"] = cmd
meta["sweep_start_unix"] = time.time()
with open(os.path.join(out, "log.txt"), "w") as log:
    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
meta["sweep_end_unix"] = time.time()
meta["sweep_rc"] = rc
json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
print("sweep rc", rc, "in", round(meta["sweep_end_unix"] - meta["sweep_start_unix"]), "s",
      flush=True)

sys.path.insert(0, CALIB)
import torch  # noqa: E402
import calibrate  # noqa: E402  (the sweep's own flash call)

c = CHAIN
q = torch.randn(c["B"], c["sq"], c["H"], c["D"], dtype=torch.bfloat16, device="cuda")
k = torch.randn(c["B"], c["sk"], c["Hk"], c["D"], dtype=torch.bfloat16, device="cuda")
v = torch.randn_like(k)
run = lambda: calibrate.flash(q, k, v, c["causal"])  # noqa: E731
run()
torch.cuda.synchronize()
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record(); run(); b.record(); torch.cuda.synchronize()
n = max(10, math.ceil(CHAIN_S * 1e3 / a.elapsed_time(b)))
evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
       for _ in range(n)]
time.sleep(IDLE_S)
torch.cuda.synchronize()
start_wall = time.time()  # the GPU is idle: the first event runs at once
for s, e in evs:
    s.record(); run(); e.record()
torch.cuda.synchronize()
end_wall = time.time()
first = evs[0][0]
ks = [[round(first.elapsed_time(s), 4), round(s.elapsed_time(e), 4)] for s, e in evs]
time.sleep(1.0)
smi.terminate()
meta["torch"] = torch.__version__
json.dump(dict(meta, chain=dict(c, start_wall_unix=start_wall, end_wall_unix=end_wall,
                                kernels_start_ms_dur_ms=ks)),
          open(os.path.join(out, "chain.json"), "w"))
print("chain", n, "kernels, first", ks[0][1], "ms, last", ks[-1][1], "ms", flush=True)
