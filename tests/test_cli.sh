#!/bin/sh
# The command line as users and CI meet it: the CSV contract, determinism,
# shards, and bad input (exit status 2, a message naming file and field,
# no output file written).  Usage: test_cli.sh PATH/TO/tasp-sim
sim=$1
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

header='scheduler,topology,gpus,seq_len,batch,heads,kv_heads,head_dim,dtype,mask,pass,step_ms,compute_ms,comm_ms,exposed_comm_ms,speedup_vs_ring,max_link_util,mean_link_util'

"$sim" scenarios/h100x8.json --csv - > "$tmp/a.csv"
check "CSV exits 0" "[ $? -eq 0 ]"
check "CSV header is design.md's" "[ \"\$(head -n 1 $tmp/a.csv)\" = '$header' ]"
check "one row per point (6 seq x 3 SP x 7 schedulers)" "[ \$(wc -l < $tmp/a.csv) -eq 127 ]"
"$sim" scenarios/h100x8.json --csv - > "$tmp/b.csv"
check "two runs give identical bytes" "cmp -s $tmp/a.csv $tmp/b.csv"
"$sim" scenarios/h100x8.json --csv - --jobs 1 > "$tmp/c.csv"
check "one thread gives the same bytes as many" "cmp -s $tmp/a.csv $tmp/c.csv"
check "ring rows have speedup 1" "[ \$(grep -c '^ring,.*,1.0000,' $tmp/a.csv) -eq 18 ]"

"$sim" scenarios/h100x8.json --shard 0/2 --csv "$tmp/s0.csv" --quiet
"$sim" scenarios/h100x8.json --shard 1/2 --csv "$tmp/s1.csv" --quiet
(tail -n +2 "$tmp/s0.csv"; tail -n +2 "$tmp/s1.csv") | sort > "$tmp/shards"
tail -n +2 "$tmp/a.csv" | sort > "$tmp/whole"
check "shards concatenate into the whole sweep" "cmp -s $tmp/shards $tmp/whole"

"$sim" scenarios/h100x8.json > "$tmp/table"
check "table lists every scheduler and the links line" \
  "grep -q ' tasp ' $tmp/table && grep -q 'links ring' $tmp/table && grep -q 'busiest' $tmp/table"

# On MI300X's mesh a ring uses 8 of 56 links; TASP all of them.
"$sim" --topology mi300x8 --seq 32K --sp 8 --sched ring,tasp --heads 32 --kv-heads 32 \
  --links "$tmp/links.csv" --csv "$tmp/mi.csv" --quiet
check "ring leaves 48 of 56 mesh links idle" \
  "[ \$(grep -c '^ring,.*,0.0000\$' $tmp/links.csv) -eq 48 ]"
check "tasp leaves none idle" "[ \$(grep -c '^tasp,.*,0.0000\$' $tmp/links.csv) -eq 0 ]"
check "tasp beats ring on the mesh at 32K over 8 GPUs" \
  "awk -F, '\$1==\"tasp\" && \$16 > 1.5 {f=1} END {exit !f}' $tmp/mi.csv"

"$sim" --topology h100x8 --seq 64K --sp 4 --trace "$tmp/t.json" --quiet
check "trace written" "[ -s $tmp/t.json ]"
if command -v python3 >/dev/null; then
  check "trace is JSON with spans and counters" \
    "python3 -c 'import json,sys; e=json.load(open(\"$tmp/t.json\"))[\"traceEvents\"]; sys.exit(not (any(x[\"ph\"]==\"X\" for x in e) and any(x[\"ph\"]==\"C\" for x in e)))'"
fi
"$sim" --version | grep -q '^tasp-sim [0-9]'
check "--version" "[ $? -eq 0 ]"
"$sim" --help | grep -q -- '--no-compute'
check "--help lists options" "[ $? -eq 0 ]"
"$sim" --topology h100x8 --seq 128K --sp 8 --no-compute --csv - | tail -n 1 | grep -q '^tasp,.*,0.000000,'
check "--no-compute leaves compute at zero" "[ $? -eq 0 ]"

# Bad input: exit 2, one message naming file and field, nothing written.
expect_error() { # name, expected text, args...
  name=$1; want=$2; shift 2
  rm -f "$tmp/out.csv"
  "$sim" "$@" --csv "$tmp/out.csv" > "$tmp/stdout" 2> "$tmp/stderr"
  rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$want" "$tmp/stderr" && [ ! -e "$tmp/out.csv" ] \
     && [ ! -s "$tmp/stdout" ] && [ "$(ls "$tmp" | grep -c 'out.csv')" -eq 0 ]; then
    ok "$name"
  else
    bad "$name (rc $rc): $(cat "$tmp/stderr")"
  fi
}
expect_error "malformed scenario JSON" "tests/bad/scen_syntax.json: line 3: malformed JSON" tests/bad/scen_syntax.json
expect_error "missing scenario file" "tests/bad/none.json: cannot read" tests/bad/none.json
expect_error "unknown scheduler" "field 'schedulers': unknown scheduler" tests/bad/scen_sched.json
expect_error "SP beyond topology" "field 'sp': SP degree 16 exceeds" tests/bad/scen_sp.json
expect_error "indivisible sequence" "not divisible" tests/bad/scen_indivisible.json
expect_error "mistyped field" "field 'model.heads'" tests/bad/scen_heads.json
expect_error "bad topology file" "tests/bad/topo_neg_port.json: field 'generator.port_gbps'" --topology tests/bad/topo_neg_port.json
expect_error "unknown topology" "nosuch: cannot read" --topology nosuch
expect_error "bad --seq" "option '--seq'" scenarios/h100x8.json --seq 12Q
expect_error "zero --sp" "option '--sp'" scenarios/h100x8.json --sp 0
expect_error "bad --mask" "option '--mask': expected full or causal" scenarios/h100x8.json --mask diagonal
expect_error "bad --shard" "option '--shard'" scenarios/h100x8.json --shard 3/2
expect_error "bad --grad-dtype" "option '--grad-dtype': expected fp32, bf16 or fp16" scenarios/h100x8.json --grad-dtype int8
expect_error "unknown option" "Unknown option" scenarios/h100x8.json --frobnicate
expect_error "tasp chunk too short" "too short" --topology h100x8 --sched tasp --sp 8 --seq 48 --mask full
expect_error "--tasp-cycles not a permutation" "is not an order of the 4 GPUs" \
  --topology h200x4 --sched tasp --sp 4 --seq 6K --tasp-cycles 0-1-2,0-3-2-1
expect_error "--tasp-cycles sharing an edge" "edge 3 -> 0 is used twice" \
  --topology h200x4 --sched tasp --sp 4 --seq 6K --tasp-cycles 0-1-2-3,0-2-1-3

# Linear-attention layers: only the schedulers that run them, and back.
expect_error "softmax-only scheduler on linear layers" \
  "option '--sched': tasp does not run linear-attention layers" \
  --topology h100x8 --attention linear --sched tasp --seq 32K
expect_error "linear-only scheduler on softmax layers" \
  "option '--sched': lasp2 does not run softmax-attention layers" --topology h100x8 --sched lasp2 --seq 32K
expect_error "bad --attention" "option '--attention': expected softmax or linear" \
  --topology h100x8 --attention cosine --seq 32K
for pp in fwd bwd fwdbwd; do
  "$sim" --topology h100x8x4 --attention linear --sched lasp,lasp2,lasp2h,ring,ulysses --sp 32 \
    --heads 32 --kv-heads 32 --seq 1M --pass $pp --csv - > "$tmp/lin.csv"
  check "linear layers, pass $pp: LASP-2 beats LASP beats Ring (causal, 4 nodes)" \
    "awk -F, '\$1==\"lasp\" {l=\$12} \$1==\"lasp2\" {l2=\$12} \$1==\"ring\" {r=\$12} END {exit !(l2 < l && l < r)}' $tmp/lin.csv"
done
"$sim" --topology h100x8 --attention linear --sched lasp2 --seq 64K > "$tmp/lin.txt"
check "the table says the layers are linear" "grep -q '^layers: 1 linear' $tmp/lin.txt"

# Given cycles: the measured program's labelling (ring and reverse) needs
# two kernels on GPUs 1 and 2 at odd steps, tasp-sim's own one: slower.
"$sim" --topology h200x4 --sched tasp --sp 4 --seq 6K --heads 32 --kv-heads 32 --csv - \
  --tasp-cycles 0-1-2-3,0-3-2-1 > "$tmp/given.csv"
"$sim" --topology h200x4 --sched tasp --sp 4 --seq 6K --tasp-cycles 0-1-2-3,0-3-2-1 > "$tmp/given.txt"
"$sim" --topology h200x4 --sched tasp --sp 4 --seq 6K --heads 32 --kv-heads 32 --csv - \
  > "$tmp/own.csv"
check "--tasp-cycles is used and said" \
  "grep -q 'cycles given by tasp_cycles' $tmp/given.txt && awk -F, 'NR==2 {g=\$12} END {exit !(g > 0)}' $tmp/given.csv"
check "the ring-and-reverse labelling is slower under a causal mask" \
  "[ \$(paste -d, $tmp/given.csv $tmp/own.csv | awk -F, 'NR==2 {print (\$12 > \$30)}') -eq 1 ]"

echo "cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
