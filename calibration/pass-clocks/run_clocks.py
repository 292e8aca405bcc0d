"""At which SM clock do the validation passes (and the layer) run?  Runs one
part of the calibration tool (calibrate.py's passes, or its layer part) with
--pass-wall-clock, so each timed record holds the host's wall-clock span of
its timing, while nvidia-smi samples every GPU of the run (-i) every 20 ms:
SM and memory clocks, power, temperature and throttle reasons, the fields of
../h100x1-sweep-clocks/sweep_clocks.py with the GPU's index first.

usage (the calibration tool's directory as CALIB, results under $OUT):
    python3 run_clocks.py CALIB GPUS LIMIT_S -- CALIBRATE_ARGS...
runs `torchrun --nproc-per-node GPUS CALIB/calibrate.py --out $OUT/run
--pass-wall-clock CALIBRATE_ARGS` (ended after LIMIT_S seconds, the records
written so far kept) and writes $OUT/smi.csv, $OUT/run/ (the tool's
output), $OUT/log.txt (its output) and $OUT/meta.json (device, command,
wall-clock reference times)."""
import json
import os
import subprocess
import sys
import time

CALIB, GPUS, LIMIT_S = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
args = sys.argv[sys.argv.index("--") + 1:]
out = os.environ.get("OUT", ".")
FIELDS = ("index,timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
          "clocks_throttle_reasons.active")
ids = ",".join(str(i) for i in range(GPUS))
info = subprocess.run(["nvidia-smi", "-i", ids, "--query-gpu=index,name,power.limit,clocks.max.sm,"
                       "clocks.max.mem,driver_version", "--format=csv,noheader"],
                      capture_output=True, text=True).stdout.strip().splitlines()
smi = subprocess.Popen(["nvidia-smi", "-i", ids, "--query-gpu=" + FIELDS,
                        "--format=csv,noheader,nounits", "-lms", "20"],
                       stdout=open(os.path.join(out, "smi.csv"), "w"), stderr=subprocess.DEVNULL)
meta = {"device": info, "smi_fields": FIELDS.split(","), "limit_s": LIMIT_S,
        "t0_unix": time.time(), "t0_local": time.strftime("%Y/%m/%d %H:%M:%S"),
        "tz": time.strftime("%Z")}
time.sleep(2.0)  # idle samples before the run
cmd = ["timeout", f"{LIMIT_S:g}", sys.executable, "-m", "torch.distributed.run", "--standalone",
       "--nproc-per-node", str(GPUS), os.path.join(CALIB, "calibrate.py"),
       "--out", os.path.join(out, "run"), "--pass-wall-clock", *args]
meta["cmd"] = cmd
meta["run_start_unix"] = time.time()
with open(os.path.join(out, "log.txt"), "w") as log:
    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
meta["run_end_unix"] = time.time()
meta["run_rc"] = rc
time.sleep(2.0)  # idle samples after it
smi.terminate()
json.dump(meta, open(os.path.join(out, "meta.json"), "w"), indent=1)
print("run rc", rc, "in", round(meta["run_end_unix"] - meta["run_start_unix"]), "s", flush=True)
