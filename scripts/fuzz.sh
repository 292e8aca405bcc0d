#!/bin/sh
# Builds the libFuzzer harnesses (tests/fuzz) with clang, ASan and UBSan
# into build-fuzz/ and runs each for SECONDS (default 60) from the seed
# corpus; fails on any crash, leak, timeout or sanitizer report.
#   scripts/fuzz.sh [SECONDS]
# New inputs go to a scratch copy of the corpus; a failing input is left in
# build-fuzz/ (crash-*, timeout-*, oom-*) to turn into a test case.
set -e
cd "$(dirname "$0")/.."
secs=${1:-60}
CC=clang cmake -S . -B build-fuzz -DTASP_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_scenario fuzz_topology fuzz_options >/dev/null
for h in scenario topology options; do
  work=$(mktemp -d)
  cp tests/fuzz/corpus/$h/* "$work/"
  echo "fuzz: $h for ${secs}s"
  (cd build-fuzz && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
     ./tests/fuzz/fuzz_$h -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 \
     -max_len=8192 -print_final_stats=0 "$work" > "fuzz_$h.log" 2>&1) || {
    tail -n 40 "build-fuzz/fuzz_$h.log"; rm -rf "$work"; echo "fuzz: $h FAILED"; exit 1; }
  grep -E '^Done [0-9]+ runs' "build-fuzz/fuzz_$h.log"
  rm -rf "$work"
done
echo "fuzz: all harnesses ran clean"
