#!/bin/bash
# h23v: stripe, double ring (inner 2), a2a+p2p (USP, Ulysses 2 x zigzag ring 2)
# and their parts (ring, zigzag, ulysses) on 4 GPUs, forward and backward.
# Results in $OUT/h23v.tgz; each torchrun is bounded so the tar is always made.
set -u
D=$(cd "$(dirname "$0")" && pwd)
R=$OUT/h23v
mkdir -p "$R"
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( $1 - $(el) )); }
log() { echo "[$(el)s] $*" | tee -a "$R/log.txt"; }
finish() { log "done"; cd "$OUT" && tar czf h23v.tgz h23v && rm -rf h23v; }
trap finish EXIT
nvidia-smi -L > "$R/gpus.txt" 2>&1
nvidia-smi topo -m > "$R/topology.txt" 2>&1
env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM|PYTORCH_)' > "$R/env.txt"
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.device_count())" >> "$R/log.txt" 2>&1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
log "gpu: $GPU"
TR="python3 -m torch.distributed.run --standalone --nproc-per-node 4"
CAL="$D/calibrate.py"
COMMON="--parts passes --backward --skip-failed --usp-ulysses 2 --double-ring-inner 2 --schedules stripe,double-ring,zigzag,usp,ring,ulysses"
P1_END=265
if echo "$GPU" | grep -q H100; then
  log "H100: links, compute, overhead first (a topology can be fitted)"
  timeout -k 10 150 $TR "$CAL" --out "$R/lc" --parts links,compute,overhead --max-tokens 24576 > "$R/lc.log" 2>&1
  log "links/compute/overhead rc $?"
  P1_END=420
fi
timeout -k 10 $(left $P1_END) $TR "$CAL" --out "$R/p1" $COMMON --pass-tokens 3072,6144,12288,24576 > "$R/p1.log" 2>&1
log "passes 3K-24K rc $?"
grep -v "^W1\|Warning" "$R/p1.log" | tail -8
T=$(left 450)
if [ "$T" -gt 60 ]; then
  timeout -k 10 "$T" $TR "$CAL" --out "$R/p2" $COMMON --pass-tokens 49152 --iters 3 --check-tokens 3072 > "$R/p2.log" 2>&1
  log "passes 48K rc $?"
  grep -v "^W1\|Warning" "$R/p2.log" | tail -8
fi
wc -l "$R"/*/passes-n4.jsonl
