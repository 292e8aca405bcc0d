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
