#!/bin/sh
# scripts/plot.py on a small CSV: the three PNGs exist and are not trivial.
# Skipped (77) where no python3 with matplotlib is found.
# Usage: test_plot.sh PATH/TO/tasp-sim
sim=$1
py=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import matplotlib' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "plot: skipped: matplotlib (python3-matplotlib) not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$sim" --topology h100x8 --seq 32K,128K --sp 4,8 --mask full,causal --csv "$tmp/r.csv" --quiet || exit 1
"$py" scripts/plot.py "$tmp/r.csv" --out "$tmp/png" > "$tmp/out" || exit 1
fail=0
for f in step_time speedup breakdown; do
  n=$(wc -c < "$tmp/png/$f.png" 2>/dev/null || echo 0)
  if [ "$n" -gt 20000 ] && head -c 8 "$tmp/png/$f.png" | grep -q PNG; then echo "ok: $f.png ($n bytes)"
  else echo "FAIL: $f.png missing or trivial ($n bytes)"; fail=1; fi
done
# n/a rows (Ulysses at SP 8 with 4 heads) have no figures: drawn around
"$sim" --topology h100x8 --seq 32K --sp 4,8 --heads 4 --kv-heads 4 --sched ring,ulysses \
  --csv "$tmp/na.csv" --quiet || exit 1
if grep -q ',n/a: ' "$tmp/na.csv" && "$py" scripts/plot.py "$tmp/na.csv" --out "$tmp/na" > /dev/null; then
  echo "ok: a CSV with n/a rows plots"
else echo "FAIL: a CSV with n/a rows does not plot"; fail=1; fi
exit $fail
