#!/bin/bash
# Speed figures: the whole h100x8 sweep as a process (one thread, then one
# per core), then per point and single TASP points at 8, 64 and 256 GPUs,
# and the construction of K_n*'s Hamiltonian cycles at n = 256, 512 and
# 1,024 (tasp-bench); a scaling table of single points to 1,024 GPUs; a
# 10,000-point sweep.  Prints figures; asserts nothing.
# BENCH_PARTS: which parts run, of "process scaling table step sweep"
# (default all); the table's rows are chosen by BENCH_GPUS, BENCH_SCHEDS,
# BENCH_MASKS and BENCH_PASSES (below).  BENCH_BIN: the build directory
# whose tasp-sim and tasp-bench run (default build; another build's, for
# figures before a change).
set -e
cd "$(dirname "$0")/.."
TIMEFORMAT='%R s wall, %U s user'
bin=${BENCH_BIN:-build}
parts=" ${BENCH_PARTS:-process scaling table step sweep} "
part() { case "$parts" in *" $1 "*) return 0 ;; esac; return 1; }

if part process; then
for j in 1 0; do
  echo -n "process: tasp-sim scenarios/h100x8.json --jobs $j: "
  time $bin/tasp-sim scenarios/h100x8.json --jobs $j --csv /dev/null --quiet
done
$bin/tasp-bench scenarios/h100x8.json
fi

# Scaling: one forward point per process (peak memory is the process's),
# ring and tasp, one NVSwitch domain and nodes of 8 over NIC rails, about
# 1M tokens: N(N-1)*c so that tasp's N-1 pieces per chunk are even.
if part scaling; then
echo
echo "| sched      | topology  | mask   | pass   |  GPUs |    wall s |    cpu s |     events |       flows |  bundles |  solves | peak MB |   step ms |"
echo "|------------|-----------|--------|--------|-------|-----------|----------|------------|-------------|----------|---------|---------|-----------|"
for sched in ring tasp; do
  for n in 8 16 32 64 128 256 512 1024; do
    c=$(( (1048576 + n * (n - 1) / 2) / (n * (n - 1)) )); [ "$c" -lt 1 ] && c=1
    seq=$(( n * (n - 1) * c ))
    $bin/tasp-bench --row $sched h100x8 $n $seq full generator.gpus=$n
    [ "$n" -ge 16 ] && $bin/tasp-bench --row $sched h100x8x32 $n $seq full generator.nodes=$((n / 8))
  done
done
fi

# Every scheduler x full and causal x forward and forward+backward, one
# point per process on one NVSwitch domain of N GPUs (h100x8 with
# generator.gpus=N), 2,048 tokens per GPU; ulysses with N heads (its heads
# must divide among the GPUs; at most 1,024), lasp and lasp2 on linear
# attention; stripe, double-ring and TransformerEngine's all_gather (the
# methods round's schedulers; TE's p2p, a2a and a2a+p2p run zigzag's,
# ulysses' and usp-zigzag's plans under their names, so are not repeated).
# BENCH_GPUS lists the sizes (default 1024); BENCH_SCHEDS, BENCH_MASKS and
# BENCH_PASSES the rows (default every scheduler, both masks, both
# passes); a point that runs past BENCH_TIMEOUT seconds (default 300) or
# is refused shows as such.  BENCH_JOBS points run at once (default 1; on
# a machine of many cores: each point's CPU seconds and peak memory stay
# its own process's, its wall time may stretch where they share memory
# bandwidth).  Then the growth exponent of CPU time (the wall time of an
# unshared core) from the smallest size to each larger one, log(ratio) /
# log(GPU ratio), where both ran.
if part table; then
echo
echo "| sched      | topology  | mask   | pass   |  GPUs |    wall s |    cpu s |     events |       flows |  bundles |  solves | peak MB |   step ms |"
echo "|------------|-----------|--------|--------|-------|-----------|----------|------------|-------------|----------|---------|---------|-----------|"
out=$(mktemp -d)
rows=$(mktemp)
trap 'rm -rf "$out" "$rows"' EXIT
# one point: its row, or why it has none, into $out/<index>
point() {
  local i=$1 sched=$2 n=$3 mask=$4 pass=$5 extra=$6 rc=0 row why
  row=$(timeout "${BENCH_TIMEOUT:-300}" $bin/tasp-bench --row $sched h100x8 $n $((2048 * n)) \
        $mask generator.gpus=$n pass=$pass $extra 2>/dev/null) || rc=$?
  if [ "$rc" = 124 ]; then why="past ${BENCH_TIMEOUT:-300} s"; elif [ "$rc" != 0 ]; then why=refused; fi
  [ "$rc" = 0 ] || row=$(printf '| %-10s | %-9s | %-6s | %-6s | %5s | %9s |' $sched h100x8 $mask $pass $n "$why")
  echo "$row" > "$out/$i"
}
export -f point
export bin out BENCH_TIMEOUT
i=0
for n in ${BENCH_GPUS:-1024}; do
  for sched in ${BENCH_SCHEDS:-ring zigzag tasp tasp-mkm ulysses usp usp-zigzag tokenring allgather lasp lasp2 lasp2h stripe double-ring all_gather}; do
    extra=-
    case $sched in ulysses) extra="heads=$n" ;; lasp | lasp2) extra="attention=linear" ;; esac
    for mask in ${BENCH_MASKS:-full causal}; do
      for pass in ${BENCH_PASSES:-fwd fwdbwd}; do
        i=$((i + 1))
        echo "$i $sched $n $mask $pass $extra"
      done
    done
  done
done | xargs -P "${BENCH_JOBS:-1}" -L 1 bash -c 'point "$1" "$2" "$3" "$4" "$5" "${6#-}"' _
for f in $(ls "$out" | sort -n); do cat "$out/$f"; done | tee "$rows"
awk -F'|' '{ gsub(/ /, ""); k = $2 " " $4 " " $5; n = $6 + 0; w = $8;
             if (w !~ /^[0-9.]+$/) next;
             if (!(k in n0)) { n0[k] = n; w0[k] = w; keys[++nk] = k }
             else if (n > n0[k] && w0[k] > 0 && w > 0)
               growth[k] = growth[k] sprintf("  %d->%d: N^%.2f", n0[k], n, log(w / w0[k]) / log(n / n0[k])) }
           END { for (i = 1; i <= nk; i++) if (keys[i] in growth) print "growth " keys[i] ":" growth[keys[i]] }' "$rows"
fi

# Whole training steps (--scope model) of Llama-3-70B at 1M tokens on
# nodes of 8 over NIC rails: 1,024 GPUs (TP 8 x SP 64 x DP 2) and 16,384
# (TP 8 x SP 64 x DP 32), zigzag context parallelism, ZeRO 1.  Identical
# replicas and TP ranks are one simulation with a multiplicity
# (layer_orbits): the 16,384-GPU job costs about what its 64-GPU SP group does.
if part step; then
echo
for dp in 2 32; do
  echo -n "step: llama3-70b TP 8 x SP 64 x DP $dp ($((512 * dp)) GPUs), 1M tokens: "
  /usr/bin/time -f "%e s wall, %U s user, %M KB peak" $bin/tasp-sim --topology h100x8x32 \
    --set generator.nodes=$((64 * dp)) --model llama3-70b --scope model --sched zigzag \
    --seq 1M --sp 64 --tp 8 --dp $dp --zero 1 --pass fwdbwd --csv /dev/null --quiet
done
fi

# A 10,368-point sweep with backward passes on h100x8x4 (4 nodes of 8 over
# NIC rails): 9 schedulers x full and causal x SP 8/16/32 x 16 sequence
# lengths x 12 NIC speeds, one thread per core.
if part sweep; then
echo
echo -n "sweep: h100x8x4, fwdbwd, 10,368 points, --jobs 0 ($(nproc) cores): "
time $bin/tasp-sim scenarios/h100x8x4.json --pass fwdbwd --mask full,causal --sp 8,16,32 \
  --seq 32K,48K,64K,96K,128K,192K,256K,384K,512K,768K,1M,1536K,2M,3M,4M,6M \
  --set generator.nic_gbps=25,50,100,150,200,250,300,400,500,600,800,1000 \
  --jobs 0 --csv /dev/null --quiet
fi
