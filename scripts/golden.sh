#!/bin/sh
# Predicted speedups of the reference scenarios against the committed
# golden CSV (tests/golden/speedups.csv).
#   scripts/golden.sh [TASP_SIM]           check; exit 1 with the rows that moved
#   scripts/golden.sh --update [TASP_SIM]  rewrite the golden file
# Tolerance: a speedup may move by 2% (relative) before the check fails.
set -e
cd "$(dirname "$0")/.."
update=0
if [ "$1" = "--update" ]; then update=1; shift; fi
sim=${1:-build/tasp-sim}
golden=tests/golden/speedups.csv
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for s in scenarios/h100x8.json scenarios/mi300x8.json scenarios/h100x8x4.json \
         scenarios/lasp2.json scenarios/lasp2-sp16.json scenarios/lasp2h.json; do
  "$sim" "$s" --csv - | tail -n +2 | cut -d, -f1-11,16
done > "$tmp"
if [ $update -eq 1 ]; then
  { echo "scheduler,topology,gpus,seq_len,batch,heads,kv_heads,head_dim,dtype,mask,pass,speedup_vs_ring"; cat "$tmp"; } > "$golden"
  echo "golden: wrote $(wc -l < "$tmp") rows to $golden"
  exit 0
fi
tail -n +2 "$golden" | awk -F, -v tol=0.02 '
  NR == FNR { key = $1; for (i = 2; i <= 11; i++) key = key "," $i; now[key] = $12; next }
  {
    key = $1; for (i = 2; i <= 11; i++) key = key "," $i
    if (!(key in now)) { printf "missing now: %s (golden %s)\n", key, $12; bad++; next }
    d = now[key] - $12; if (d < 0) d = -d
    if (d > tol * $12) { printf "moved: %s golden %s now %s\n", key, $12, now[key]; bad++ }
    n++; delete now[key]
  }
  END {
    for (k in now) { printf "new row, not in golden: %s\n", k; bad++ }
    printf "golden: %d passed, %d failed\n", n - bad + 0, bad + 0
    exit bad > 0
  }' "$tmp" -
