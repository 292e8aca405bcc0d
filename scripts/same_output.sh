#!/bin/sh
# Byte-identical outputs across a change that must keep behaviour: a broad
# sweep (every scheduler, both masks, every pass, several SP degrees and
# sequence lengths, bundled topologies of every kind, the what-if options,
# links and traces) run with one binary and recorded, then run again with
# another and compared byte for byte.
#   scripts/same_output.sh record DIR [TASP_SIM]   write the outputs into DIR
#   scripts/same_output.sh check DIR [TASP_SIM]    compare with DIR; exit 1 on any difference
#   scripts/same_output.sh columns DIR [TASP_SIM]  the same, but a CSV (a file
#       starting "scheduler,") may have new columns appended: every recorded
#       column keeps its name, place and every row's value
# Record with the binary before the change (e.g. a build of the parent
# commit), check with the one after.
set -e
cd "$(dirname "$0")/.."
mode=$1 dir=$2 sim=${3:-build/tasp-sim}
case "$mode" in record | check | columns) ;; *) echo "usage: $0 record|check|columns DIR [TASP_SIM]" >&2; exit 2 ;; esac
[ -n "$dir" ] || { echo "$0: DIR expected" >&2; exit 2; }
out=$dir
if [ "$mode" != record ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
mkdir -p "$out"
n=0
# run NAME ARGS...: stdout (table or CSV) into NAME.out, stderr and status kept
run() {
  name=$1; shift
  n=$((n + 1))
  rc=0
  "$sim" "$@" > "$out/$name.out" 2> "$out/$name.err" || rc=$?
  echo "$rc" > "$out/$name.rc"
}
sweep="--sched all --mask full,causal --pass fwd,bwd,fwdbwd --jobs 2"
for topo in h100x8 mi300x8 h200x2-tool h200x2-linear h200x4-tool; do
  run "$topo" --topology "$topo" $sweep --seq 8K,128K,1M --csv -
  run "$topo-linear" --topology "$topo" $sweep --attention linear --seq 8K,128K --csv -
done
run h100x8-sp --topology h100x8 $sweep --seq 32K,256K --sp 2,4 --csv -
run h100x8x4 --topology h100x8x4 $sweep --seq 128K,1M --sp 8,16,32 --csv -
for topo in h200x4 h100x8x2; do
  run "$topo" --topology "$topo" $sweep --seq 64K,1M --csv -
done
run torus4x4x4 --topology torus4x4x4 --sched all --mask full,causal --pass fwd,fwdbwd --seq 1M --sp 16,64 --jobs 2 --csv -
run gb200nvl72 --topology gb200nvl72 --sched all --mask full,causal --pass fwd,fwdbwd --seq 72K --sp 8,72 --jobs 2 --csv -
run a100x8x8 --topology a100x8x8 --sched all --mask full,causal --pass fwd,fwdbwd --seq 1M --sp 16,64 --jobs 2 --csv -
run torus4x4 --topology torus4x4 $sweep --seq 64K,512K --csv -
run torus4x4-linear --topology torus4x4 $sweep --attention linear --seq 64K --csv -
for w in --no-comm --alone --no-compute --per-flow; do
  for topo in h100x8 h200x2-tool h200x4-tool torus4x4; do
    run "$topo$w" --topology "$topo" $sweep --seq 32K,512K $w --csv -
    run "$topo$w-linear" --topology "$topo" $sweep --attention linear --seq 32K $w --csv -
  done
done
run h100x8x4-per-flow --topology h100x8x4 --sched all --mask full,causal --pass fwdbwd --seq 256K --sp 32 --per-flow --jobs 2 --csv -
run alone-nocomm --topology h200x2-linear $sweep --attention linear --seq 16K --alone --no-comm --csv -
run usp-ulysses --topology h100x8x4 --sched usp,usp-zigzag --usp-ulysses 4 --mask full,causal --pass fwdbwd --seq 256K --sp 16 --csv -
run fused --topology h100x8 --sched ulysses,usp --ulysses-fused --pass fwd,bwd --seq 128K --csv -
run grad-bf16 --topology h200x4-tool --sched all --grad-dtype bf16 --mask full,causal --pass bwd --seq 64K --csv -
run table --topology h100x8 --seq 128K,1M --mask full,causal --pass fwdbwd
run table-tool --topology h200x4-tool --sched all --seq 128K --pass fwdbwd
for s in scenarios/*.json; do
  b=$(basename "$s" .json)
  run "scenario-$b" "$s" --jobs 2 --csv -
done
# links and traces of a few points
i=0
for pt in "h100x8 ring 1M fwdbwd causal" "h200x4-tool zigzag 128K fwdbwd causal" \
          "h200x2-linear ring 16K bwd causal --attention=linear" "torus4x4 tasp 256K fwd full" \
          "h100x8x4 usp 1M fwdbwd causal" "h200x2-tool tokenring 64K fwdbwd causal" \
          "mi300x8 allgather 256K bwd causal" "h200x2-linear lasp2 32K fwdbwd causal --attention=linear"; do
  set -- $pt
  i=$((i + 1))
  extra=${6:-}
  run "point$i" --topology "$1" --sched "$2" --seq "$3" --pass "$4" --mask "$5" $extra \
      --links "$out/point$i.links.csv" --trace "$out/point$i.trace.json" --csv -
  run "point$i-perflow" --topology "$1" --sched "$2" --seq "$3" --pass "$4" --mask "$5" $extra \
      --per-flow --links "$out/point$i-perflow.links.csv" --csv -
done
if [ "$mode" = record ]; then
  echo "same_output: recorded $n runs in $dir"
  exit 0
fi
# columns: a CSV with appended columns compares on the recorded ones only,
# then every file must be byte-identical (traces and links name nothing of
# the output folder; the table prints no paths)
if [ "$mode" = columns ]; then
  python3 - "$dir" "$out" <<'PY'
import csv, io, os, sys
old_dir, new_dir = sys.argv[1], sys.argv[2]
for name in os.listdir(old_dir):
    if not name.endswith(".out"):
        continue
    old, new = (open(os.path.join(d, name), newline="").read() for d in (old_dir, new_dir))
    if not old.startswith("scheduler,") or not new.startswith("scheduler,"):
        continue
    ro, rn = list(csv.reader(io.StringIO(old))), list(csv.reader(io.StringIO(new)))
    if len(ro) == len(rn) and all(b[:len(a)] == a for a, b in zip(ro, rn)):
        open(os.path.join(new_dir, name), "w", newline="").write(old)  # same on its columns
PY
fi
if diff -r "$dir" "$out" > "$out.diff" 2>&1; then
  if [ "$mode" = columns ]; then how="on their recorded columns"; else how="byte for byte"; fi
  echo "same_output: $n runs identical to $dir, $how"
  rm -f "$out.diff"
else
  head -50 "$out.diff"
  echo "same_output: outputs differ from $dir (above)"
  rm -f "$out.diff"
  exit 1
fi
