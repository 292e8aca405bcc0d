#!/usr/bin/env python3
"""scripts/nemo_long_sequence.py: NeMo's published table as recorded
(docs/paper/nemo_long_sequence.csv) is self-consistent, NeMo's FLOP count is
tasp-sim's model FLOPs plus the masked half of causal attention, and each
row's command is the configuration NeMo ran.
Usage: test_nemo_long_sequence.py PATH/TO/tasp-sim"""
import csv
import json
import os
import subprocess
import sys

from pycheck import ROOT, check, finish, scripts_on_path  # noqa: E402
scripts_on_path()
import nemo_long_sequence as nls  # noqa: E402

sim = sys.argv[1]


rows = list(csv.DictReader(open(nls.TABLE)))
check("the table: 9 rows, 4K to 1024K", [int(r["seq_k"]) for r in rows] ==
      [4, 8, 16, 32, 64, 128, 256, 512, 1024])
for r in rows:
    k = r["seq_k"]
    check(f"{k}K: GPUs = TP x PP x DP x CP",
          int(r["gpus"]) == int(r["tp"]) * int(r["pp"]) * int(r["dp"]) * int(r["cp"]))
    check(f"{k}K: 4M tokens a step (global batch x sequence)",
          int(r["global_batch"]) * int(k) * 1024 == 4 << 20)
    check(f"{k}K: the speedup column is with-CP over without-CP",
          abs(float(r["with_cp_tflops_per_gpu"]) / float(r["without_cp_tflops_per_gpu"]) -
              float(r["speedup"])) < 0.006)

m = json.load(open(os.path.join(ROOT, "models", "llama2-7b.json")))
m["layers_total"] = 32
L, h, f, V, s = 32, 4096, 11008, 32000, 8192
# NeMo's count by hand: 6 FLOPs per linear weight and token (QKV 3h^2 for
# MHA, out h^2, MLP 3hf, head hV), attention 12 s^2 h a layer
by_hand = 2 * s * (6 * (L * (4 * h * h + 3 * h * f) + h * V) + 12 * L * s * h)
check("nemo_flops: the closed form", abs(nls.nemo_flops(m, 2, s) / by_hand - 1) < 1e-12)

# tasp-sim's model FLOPs (mfu x peak x step x GPUs) count causal attention
# half: NeMo's count is theirs plus 6 s^2 h a layer and sequence
cmd = [sim, "--model", "llama2-7b", "--scope", "model", "--topology", "h100x8", "--tp", "2",
       "--sp", "2", "--dp", "2", "--seq", "8K", "--global-batch-tokens", "32K", "--sched",
       "zigzag", "--pass", "fwdbwd", "--zero", "1", "--precision", "fp8", "--csv", "-", "--quiet"]
p = subprocess.run(cmd, capture_output=True, text=True)
check("tasp-sim runs a small NeMo-like step (exit 0)", p.returncode == 0)
row = next(csv.DictReader(p.stdout.splitlines()))
gbs = 4
topo = json.load(open(os.path.join(ROOT, "topologies", "h100x8.json")))
peak = topo["compute"]["peak_tflops"] * 1e12
model = float(row["mfu"]) * peak * float(row["step_ms"]) / 1e3 * 8
check("NeMo's count = tasp-sim's model FLOPs + the masked half of attention",
      abs((model + gbs * 6 * L * s * s * h) / nls.nemo_flops(m, gbs, s) - 1) < 1e-3)

# the commands: NeMo's TP / CP / DP, zigzag (Megatron's p2p CP), FP8, the
# row's global batch, the topology of its GPUs
cmds = {r["seq_k"]: nls.command(r, "fp8") for r in rows}
c = cmds["256"]
check("256K: h100x8x32, TP 4, CP 8, DP 8, zigzag, fp8, 4M tokens",
      c[c.index("--topology") + 1] == "h100x8x32" and c[c.index("--tp") + 1] == "4" and
      c[c.index("--sp") + 1] == "8" and c[c.index("--dp") + 1] == "8" and
      c[c.index("--sched") + 1] == "zigzag" and c[c.index("--precision") + 1] == "fp8" and
      c[c.index("--global-batch-tokens") + 1] == "4M" and c[c.index("--seq") + 1] == "256K")
c = cmds["1024"]
check("1M: 128 nodes by --set generator.nodes, seq 1M",
      "generator.nodes=128" in c and c[c.index("--seq") + 1] == "1M")
c = nls.command(rows[-1], "fp8", 2)
check("1M at DP 2: half the GPUs and half the tokens, the micro-batches a replica kept",
      "generator.nodes=64" in c and c[c.index("--dp") + 1] == "2" and
      c[c.index("--global-batch-tokens") + 1] == "2M")
# --searched: a kept search's winner and zigzag's best (simulated rows
# only, however fast a pruned or unfitting row's figure), in NeMo's TFLOP/s
import tempfile  # noqa: E402
with tempfile.TemporaryDirectory() as d:
    cols = "scheduler,tp,sp,split,dp,zero,recompute,status,class,reason,step_s,tokens_per_s_per_gpu"
    with open(os.path.join(d, "llama2-7b-h100x8x8-64K-fp8.csv"), "w") as f:
        f.write(cols + "\n" + "\n".join([
            "ulysses,1,8,0,8,3,none,simulated,,,16.0,4000",
            "zigzag,2,4,0,8,1,none,simulated,,,17.0,3800",
            "zigzag,1,8,0,8,1,none,pruned,,,1.0,99999",
            "zigzag,4,2,0,8,1,none,pruned,,,1.0,99999",
            "usp-zigzag,1,8,2,8,1,none,does not fit,,,1.0,99999"]) + "\n")
    table = [r for r in rows if r["seq_k"] in ("32", "64")]
    out = nls.searched(m, table, d).splitlines()
    check("--searched: one row per kept search (64K only)", len(out) == 3 and "| 64K |" in out[2])
    f64 = nls.nemo_flops(m, 64, 65536)
    cells = [c.strip() for c in out[2].split("|")]
    check("--searched: NVIDIA's layout (TP 4 x CP 2 x DP 8 at 64K) found with its status",
          cells[5] == "pruned")
    check("--searched: the winner is the fastest simulated row, TFLOP/s = NeMo FLOPs / (step x GPUs)",
          cells[6].startswith("ulysses TP 1 x SP 8 x DP 8") and
          cells[7] == f"{f64 / (16.0 * 64) / 1e12:.0f}")
    check("--searched: zigzag's best among its simulated rows only",
          cells[8].startswith("zigzag TP 2 x SP 4") and cells[9] == f"{f64 / (17.0 * 64) / 1e12:.0f}")
finish("nemo_long_sequence: ")
