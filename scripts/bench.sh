#!/bin/bash
# Speed figures: the whole h100x8 sweep as a process (one thread, then one
# per core), then per point and single TASP points at 8, 64 and 256 GPUs,
# and the construction of K_n*'s Hamiltonian cycles at n = 256, 512 and
# 1,024 (tasp-bench).  Prints figures; asserts nothing.
set -e
cd "$(dirname "$0")/.."
TIMEFORMAT='%R s wall, %U s user'
for j in 1 0; do
  echo -n "process: tasp-sim scenarios/h100x8.json --jobs $j: "
  time build/tasp-sim scenarios/h100x8.json --jobs $j --csv /dev/null --quiet
done
build/tasp-bench scenarios/h100x8.json

# Scaling: one forward point per process (peak memory is the process's),
# ring and tasp, one NVSwitch domain and nodes of 8 over NIC rails, about
# 1M tokens: N(N-1)*c so that tasp's N-1 pieces per chunk are even.
echo
echo "| sched  | topology  |  GPUs |    wall s |     events |       flows |  bundles |  solves | peak MB |   step ms |"
echo "|--------|-----------|-------|-----------|------------|-------------|----------|---------|---------|-----------|"
for sched in ring tasp; do
  for n in 8 16 32 64 128 256 512 1024; do
    # tasp's plan holds n(n-1)^2 transfers (4 GB at 512): not run past 256
    [ "$sched" = tasp ] && [ "$n" -gt 256 ] && continue
    c=$(( (1048576 + n * (n - 1) / 2) / (n * (n - 1)) )); [ "$c" -lt 1 ] && c=1
    seq=$(( n * (n - 1) * c ))
    build/tasp-bench --row $sched h100x8 $n $seq full generator.gpus=$n
    [ "$n" -ge 16 ] && build/tasp-bench --row $sched h100x8x32 $n $seq full generator.nodes=$((n / 8))
  done
done
