#!/bin/bash
# The TASP paper's own H100-1 forward programs at n = 4 on one node (README.md).
# Expects hamilton_attention.py (infinigence/HamiltonAttention, H100-1/,
# commit 8660690; not part of this project) beside this script.
# Results in $OUT/h27p.tgz; the torchrun is bounded so the tar is always made.
set -u
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/h27p
mkdir -p "$R"
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(el)s] $*" | tee -a "$R/log.txt"; }
finish() { log "done"; cd "$OUT" && tar czf h27p.tgz h27p && rm -rf h27p; }
trap finish EXIT
nvidia-smi > "$R/nvidia-smi.txt" 2>&1
nvidia-smi topo -m > "$R/topology.txt" 2>&1
env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM|PYTORCH_)' > "$R/env.txt"
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.device_count())" >> "$R/log.txt" 2>&1
python3 -c "import flash_attn; print('flash_attn', flash_attn.__version__)" >> "$R/log.txt" 2>&1 || log "no flash_attn: the SDPA flash adapter runs the kernels"
log "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
# k:batch:heads (seq = k x 3360), small to large; the budget stops before the largest if time runs short
P=1:1:20,1:4:20,1:16:20,1:64:20,1:128:20,1:1:4,1:32:4,2:1:20,2:16:20,2:64:20,2:8:12
P=$P,4:1:20,4:8:20,4:32:20,4:1:4,8:1:20,8:8:20,8:4:12,16:1:20,16:4:20,16:1:4,32:1:20,64:1:20
timeout -k 10 ${BENCH_S:-400} python3 -m torch.distributed.run --standalone --nproc-per-node 4 \
  "$D/paper_code_bench.py" --out "$R" --points "$P" --warm 20 --iters 30 \
  --budget-s ${BUDGET_S:-300} > "$R/bench.log" 2>&1
log "bench rc $?"
grep -v "^W1\|Warning\|warn(" "$R/bench.log" | tail -40
