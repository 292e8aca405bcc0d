#!/bin/bash
# Speed figures: the whole h100x8 sweep as a process (one thread, then one
# per core), then per point and single TASP points at 8, 64 and 256 GPUs,
# and the construction of K_n*'s Hamiltonian cycles at n = 256, 512 and
# 1,024 (tasp-bench); a scaling table of single points to 1,024 GPUs; a
# 10,000-point sweep.  Prints figures; asserts nothing.
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
    c=$(( (1048576 + n * (n - 1) / 2) / (n * (n - 1)) )); [ "$c" -lt 1 ] && c=1
    seq=$(( n * (n - 1) * c ))
    build/tasp-bench --row $sched h100x8 $n $seq full generator.gpus=$n
    [ "$n" -ge 16 ] && build/tasp-bench --row $sched h100x8x32 $n $seq full generator.nodes=$((n / 8))
  done
done

# A 10,368-point sweep with backward passes on h100x8x4 (4 nodes of 8 over
# NIC rails): 9 schedulers x full and causal x SP 8/16/32 x 16 sequence
# lengths x 12 NIC speeds, one thread per core.
echo
echo -n "sweep: h100x8x4, fwdbwd, 10,368 points, --jobs 0 ($(nproc) cores): "
time build/tasp-sim scenarios/h100x8x4.json --pass fwdbwd --mask full,causal --sp 8,16,32 \
  --seq 32K,48K,64K,96K,128K,192K,256K,384K,512K,768K,1M,1536K,2M,3M,4M,6M \
  --set generator.nic_gbps=25,50,100,150,200,250,300,400,500,600,800,1000 \
  --jobs 0 --csv /dev/null --quiet
