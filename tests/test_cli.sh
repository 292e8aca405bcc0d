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

header='scheduler,topology,gpus,seq_len,batch,heads,kv_heads,head_dim,dtype,mask,pass,step_ms,compute_ms,comm_ms,exposed_comm_ms,speedup_vs_ring,max_link_util,mean_link_util,imbalance_ms,speedup_vs_best,baseline'

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
check "table lists every scheduler, a verdict per group and the links summary" \
  "grep -q ' tasp ' $tmp/table && [ \$(grep -c '=> ' $tmp/table) -eq 18 ] && grep -q '^links: mean utilisation ring' $tmp/table"
check "no links line where every channel is used evenly" "! grep -q 'links ring' $tmp/table"
check "a verdict names the winner, margins and reasons" \
  "grep -qF '=> allgather fastest (compute-bound: communication hidden); zigzag +1.5% (compute-bound: communication hidden), tasp +1.5% (compute-bound: communication hidden), ulysses +3.6% (compute-bound: communication hidden), usp +3.6% (compute-bound: communication hidden), tokenring +5.8% (compute-bound: communication hidden), ring +51.1% (load imbalance: busiest GPU computes 1.52x the mean)' $tmp/table"
"$sim" scenarios/h100x8.json --links-summary > "$tmp/table2"
check "--links-summary: a links line per row" "[ \$(grep -c '^ *links ' $tmp/table2) -eq 126 ]"
"$sim" scenarios/mi300x8.json --mask full --seq 16K > "$tmp/table3"
check "communication-bound reasons name the channel kind" \
  "grep -q 'ring +147.1% (communication-bound on xgmi: 61% of the step exposed)' $tmp/table3"
check "links lines where channels sit idle" "grep -q 'links ring .* 48 of 56 channels idle' $tmp/table3"

# Every CSV column pinned by a case whose figures are known by hand: on 4
# GPUs with 100 GB/s ports and no fixed costs, ring over GPUs 0 and 1 at
# 64K tokens moves one chunk of 2*32768*8*128*2 = 134217728 bytes each way:
# 1.342177 ms, every port among the two busy all the time.
"$sim" --topology tests/data/topo_pin.json --sp 2 --seq 64K --mask full --sched ring,zigzag \
  --no-compute --csv "$tmp/pin.csv" --links "$tmp/pin.links" --quiet
pin() { # column scheduler value: the named column of that scheduler's row
  python3 - "$tmp/pin.csv" "$1" "$2" "$3" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
r = [x for x in rows if x["scheduler"] == sys.argv[3]][0]
sys.exit(0 if r[sys.argv[2]] == sys.argv[4] else 1)
PY
}
check "CSV quotes a topology name with a comma and quotes (RFC 4180)" \
  "grep -q '^ring,\"pin, \"\"4 GPUs\"\"\",2,65536,' $tmp/pin.csv"
check "step_ms: one transfer" "pin step_ms ring 1.342177"
check "compute_ms: none" "pin compute_ms ring 0.000000"
check "comm_ms: the transfer in flight" "pin comm_ms ring 1.342177"
check "exposed_comm_ms: all of the step waits on the transfer" "pin exposed_comm_ms ring 1.342177"
check "imbalance_ms: no compute to wait on" "pin imbalance_ms ring 0.000000"
check "max_link_util: ports busy throughout" "pin max_link_util ring 1.0000"
check "mean_link_util over the channels among the point's GPUs (not all 8)" "pin mean_link_util ring 1.0000"
check "speedup_vs_ring" "pin speedup_vs_ring zigzag 1.0000"
check "speedup_vs_best and baseline name the fastest" "pin speedup_vs_best ring 1.0000 && pin baseline zigzag ring"
check "links report: 4 channels among GPUs 0 and 1, busy 1.342177 ms, utilisation 1" \
  "[ \$(grep -c '^ring,.*,134217728,1.342177,1.0000\$' $tmp/pin.links) -eq 4 ] && [ \$(grep -c '^ring,' $tmp/pin.links) -eq 4 ]"
# rates with their unit: a topology written from the README's words ("2
# nodes of 8 GPUs, 450 GB/s NVLink, 200 Gb/s NICs") predicts what the bundled
# equivalent does, and an unknown unit is refused naming the field
for t in "--topology tests/data/topo_readme_2x8.json" \
         "--topology h100x8x2 --set generator.port_gbps=450 --set generator.nic_gbps=25"; do
  "$sim" $t --sched ring,tasp --seq 128K --sp 16 --no-compute --csv - --quiet | cut -d, -f1,3,4,12
done > "$tmp/units"
check "\"200Gb/s\" and \"450GB/s\" mean 25 and 450 GB/s: the same prediction as the bundled file" \
  "[ \$(sort -u $tmp/units | wc -l) -eq 3 ] && grep -q '^ring,16,131072,20.49' $tmp/units"
sed 's/"450GB\/s"/"450 furlongs"/' tests/data/topo_readme_2x8.json > "$tmp/furlong.json"
"$sim" --topology "$tmp/furlong.json" --seq 128K --sp 16 2> "$tmp/furlong.err"
check "a rate with an unknown unit: exit 2 naming the field" \
  "[ \$? -eq 2 ] && grep -q \"field 'generator.port_gbps': expected a rate\" $tmp/furlong.err"
# mean_link_util is the mean of the links report's utilisation per point
"$sim" --topology mi300x8 --seq 32K --sp 8 --sched ring,tasp --csv "$tmp/mu.csv" --links "$tmp/mu.links" --quiet
check "mean and max utilisation agree with the links report (ring: 8 of 56 links)" \
  "python3 - $tmp/mu.csv $tmp/mu.links <<'PY'
import csv, sys
pts = {}
for l in csv.DictReader(open(sys.argv[2])):
    pts.setdefault(l['scheduler'], []).append(float(l['utilization']))
for r in csv.DictReader(open(sys.argv[1])):
    u = pts[r['scheduler']]
    assert abs(sum(u) / len(u) - float(r['mean_link_util'])) < 1e-3, r
    assert abs(max(u) - float(r['max_link_util'])) < 1e-3, r
assert len(pts['ring']) == 56
PY"
"$sim" scenarios/h100x8.json --csv - --baseline ring > "$tmp/base.csv"
check "--baseline ring: speedup_vs_best is speedup_vs_ring, baseline ring" \
  "python3 -c 'import csv,sys; r=list(csv.DictReader(open(\"$tmp/base.csv\"))); sys.exit(not all(x[\"speedup_vs_best\"]==x[\"speedup_vs_ring\"] and x[\"baseline\"]==\"ring\" for x in r))'"
"$sim" scenarios/h100x8.json --csv - --sched ring,tasp --baseline zigzag > "$tmp/base.csv"
check "--baseline zigzag runs zigzag hidden and compares with it" \
  "! grep -q '^zigzag' $tmp/base.csv && awk -F, 'NR>1 && \$21 != \"zigzag\" {exit 1}' $tmp/base.csv"
check "step = compute + exposed + imbalance where the busiest GPU finishes last (ring, causal)" \
  "awk -F, 'NR>1 && \$1==\"ring\" { d = \$12 - \$13 - \$15 - \$19; if (d < -1e-5 || d > 1e-5) exit 1 }' $tmp/a.csv"

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
  check "trace: transfers carry bytes, source and destination, with a flow arrow each" \
    "python3 - $tmp/t.json <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))['traceEvents']
x = [v for v in e if v['ph'] == 'X' and v['name'].startswith('send')]
s = [v for v in e if v['ph'] == 's']; f = [v for v in e if v['ph'] == 'f']
assert x and len(x) == len(s) == len(f)
assert all(v['args']['bytes'] > 0 and v['args']['src'] != v['args']['dst'] for v in x)
assert len({v['id'] for v in s}) == len(s) and {v['id'] for v in s} == {v['id'] for v in f}
PY"
  check "trace: spans on one compute track never overlap" \
    "python3 - $tmp/t.json <<'PY'
import json, sys
from decimal import Decimal
e = json.load(open(sys.argv[1]), parse_float=Decimal)['traceEvents']
tracks = {}
for v in e:
    if v['ph'] == 'X' and v['tid'] % 2 == 0 and not v['name'].startswith('send'):
        tracks.setdefault((v['pid'], v['tid']), []).append((v['ts'], v['ts'] + v['dur']))
for spans in tracks.values():
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
PY"
fi
"$sim" --version | grep -q '^tasp-sim [0-9]'
check "--version" "[ $? -eq 0 ]"
"$sim" --help > "$tmp/help"
check "--help lists options, schedulers with a line each, bundled topologies and examples" \
  "grep -q -- '--no-compute' $tmp/help && grep -q '^  tasp-mkm  *TASP over' $tmp/help && grep -q '^  mi300x8  *8 x AMD MI300X' $tmp/help && grep -q '^Examples:' $tmp/help"
"$sim" --list > "$tmp/list"
check "--list: every scheduler and every bundled topology" \
  "[ \$(grep -c '^  ' $tmp/list) -eq \$((12 + \$(ls topologies/*.json | wc -l))) ]"
"$sim" --topology h100x8x2 --dump-topology --set generator.nic_gbps=25 --set compute.table_scale=0.5 > "$tmp/dump"
check "--dump-topology: channels by kind with capacities, costs with defaults, compute model, --set applied" \
  "grep -q '^  nic  *32 channels, 25 GB/s each, latency 2.5 us' $tmp/dump && grep -q 'p2p_launch_us 15, p2p_msg_us 0' $tmp/dump && grep -q 'table of 28 full and 28 causal kernels, table_scale 0.5, aspect_table 27 kernels,' $tmp/dump"
"$sim" --topology h100x8x2 --sched ring --seq 128K --mask full --csv - > "$tmp/set0.csv"
"$sim" --topology h100x8x2 --sched ring --seq 128K --mask full --set generator.nic_gbps=23 --csv - > "$tmp/set1.csv"
check "--set generator.nic_gbps halves the NICs: the ring's transfers take twice as long" \
  "[ \$(paste -d, $tmp/set0.csv $tmp/set1.csv | awk -F, 'NR==2 {print (\$35 > 1.9 * \$14)}') -eq 1 ]"
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
expect_error "unknown topology" "option '--topology': \"nosuch\" is neither a file nor a bundled topology (--list shows them)" --topology nosuch
expect_error "a near topology name is suggested" "did you mean h100x8?" --topology h100x9
expect_error "a near scheduler name is suggested" "unknown scheduler \"zigzg\" (did you mean zigzag?)" \
  scenarios/h100x8.json --sched ring,zigzg
expect_error "--set on a missing object" "option '--set': \"foo.bar=1\": the topology has no object 'foo'" \
  --topology h100x8 --set foo.bar=1
expect_error "--alone with --no-compute leaves nothing" "option '--alone': --no-compute and no communication" \
  --topology h100x8 --alone --no-compute
expect_error "--set without a value" "option '--set': expected KEY=VALUE" --topology h100x8 --set comm.launch_us
# a --set sweep: one run per value, each row labelled with its value;
# halving the NIC rate (communication only) doubles the ring's time
"$sim" --topology h100x8x2 --set generator.nic_gbps=25,50 --set comm.launch_us=0,15 --sched ring \
  --seq 128K --sp 16 --no-compute --csv - --quiet > "$tmp/sweep.csv"
check "--set sweep: one row per combination, labelled, in order" \
  "[ \"\$(tail -n +2 $tmp/sweep.csv | cut -d, -f2 | tr '\\n' ' ')\" = 'h100x8x2[generator.nic_gbps=25;comm.launch_us=0] h100x8x2[generator.nic_gbps=25;comm.launch_us=15] h100x8x2[generator.nic_gbps=50;comm.launch_us=0] h100x8x2[generator.nic_gbps=50;comm.launch_us=15] ' ]"
check "--set sweep: each value is applied (NICs at half the rate: ring ~2x)" \
  "awk -F, 'NR == 2 {a = \$12} NR == 4 {b = \$12} END {exit !(a / b > 1.9 && a / b < 2.1)}' $tmp/sweep.csv"
"$sim" --topology h100x8x2 --set generator.nic_gbps=25,50 --sched ring --seq 128K --sp 16 > "$tmp/sweep.txt"
check "--set sweep: a table per value" "[ \$(grep -c '^tasp-sim .*h100x8x2\\[generator.nic_gbps=' $tmp/sweep.txt) -eq 2 ]"
expect_error "--set sweep: every value checked before anything runs" \
  "field 'generator.nic_gbps': expected 0.001 to 100000 GB/s" --topology h100x8x2 --set generator.nic_gbps=25,1e9
expect_error "--set value checked like the file's" "field 'generator.port_gbps': expected 0.001 to 100000 GB/s" \
  --topology h100x8 --set generator.port_gbps=1e9
expect_error "--baseline checked" "option '--baseline': expected best, ring or zigzag" \
  scenarios/h100x8.json --baseline tasp
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

# Hostile input a fuzzing campaign found (issue 13).
expect_error "100000-GPU nvswitch refused before allocating" \
  "topo_huge_nvswitch.json: field 'generator.gpus': 100000 GPUs" --topology tests/bad/topo_huge_nvswitch.json
expect_error "64x64x64 torus refused" "field 'generator.dims'" --topology tests/bad/topo_huge_torus.json
expect_error "65536-GPU multi_node refused" "field 'generator.nodes'" --topology tests/bad/topo_huge_multi_node.json
expect_error "5000-GPU full mesh refused" "field 'generator.gpus': 5000 GPUs with 25000000 channels" \
  --topology tests/bad/topo_huge_mesh.json
expect_error "explicit 70000 GPUs refused" "topo_huge_explicit.json: field 'gpus': 70000 GPUs" \
  --topology tests/bad/topo_huge_explicit.json
expect_error "the whole file is checked before tables are built" "field 'compute.efficiency'" \
  --topology tests/bad/topo_huge_mesh_bad_compute.json
expect_error "input size capped" "/dev/zero: larger than 64 MiB" /dev/zero
expect_error "topology size capped" "/dev/zero: larger than 64 MiB" --topology /dev/zero
expect_error "--jobs capped" "option '--jobs': expected a whole number from 0 (one per CPU) to 256" \
  scenarios/h100x8.json --jobs 100000
expect_error "negative latency" "field 'generator.latency_us': expected a number >= 0, got -0.5" \
  --topology tests/bad/topo_neg_latency.json
expect_error "negative flow cap" "field 'comm.flow_cap_gbps': expected a number >= 0, got -0.5" \
  --topology tests/bad/topo_neg_flow_cap.json
expect_error "port_gbps 1e300" "field 'generator.port_gbps': expected 0.001 to 100000 GB/s, got 1e+300" \
  --topology tests/bad/topo_inf_port.json
expect_error "tiny peak" "field 'compute.peak_tflops': expected 0.001 to 1e+07 TFLOP/s" \
  --topology tests/bad/topo_tiny_peak.json
expect_error "tiny efficiency" "field 'compute.efficiency': expected 0.001 to 1" \
  --topology tests/bad/topo_tiny_efficiency.json
expect_error "duplicate topology key" "topo_dup_key.json: line 4: field 'generator.gpus' is given twice" \
  --topology tests/bad/topo_dup_key.json
expect_error "duplicate scenario key" "scen_dup_key.json: line 5: field 'seq_len' is given twice" \
  tests/bad/scen_dup_key.json
expect_error "an SP fault is blamed on the SP (file)" "scen_tasp_sp1.json: field 'sp': tasp" \
  tests/bad/scen_tasp_sp1.json
expect_error "an SP fault is blamed on --sp" "option '--sp': tasp at seq_len 1K, SP 1" \
  --topology h100x8 --sched tasp --sp 1 --seq 1K
expect_error "a topology fault is blamed on --topology" "option '--topology': tasp at seq_len 3K, SP 3" \
  --topology torus4x4 --sched tasp --sp 3 --seq 3K
expect_error "--tasp-cycles with no tasp" "option '--tasp-cycles': only scheduler tasp uses" \
  --topology h200x4 --sched ring,zigzag,tasp-mkm --sp 4 --seq 8K --tasp-cycles 0-1-2-3
expect_error "tasp_cycles in a file with no tasp" "scen_cycles_unused.json: field 'tasp_cycles'" \
  tests/bad/scen_cycles_unused.json
expect_error "--csv and --links on one file" "option '--links': \"$tmp/out.csv\" is also the output of '--csv'" \
  scenarios/h100x8.json --links "$tmp/out.csv"
expect_error "--links and --trace on one file under two names" "is also the output of '--links'" \
  scenarios/h100x8.json --links "$tmp/x.json" --trace "$tmp/../$(basename "$tmp")/x.json"
sed 's#"../topologies/h100x8.json"#"h100x8"#' scenarios/h100x8.json > "$tmp/scen.json"
cp "$tmp/scen.json" "$tmp/scen.orig"
expect_error "--links naming the scenario file" "is the scenario file" "$tmp/scen.json" --links "$tmp/scen.json"
check "... which is left as it was" "cmp -s $tmp/scen.orig $tmp/scen.json"
expect_error "--trace naming the topology file" "is the topology file" \
  --topology tests/data/topo_one_gpu.json --sched ring --trace tests/data/topo_one_gpu.json

"$sim" --topology tests/data/topo_one_gpu.json --seq 1K --sched ring,zigzag --csv - > "$tmp/one.csv"
check "a 1-GPU topology runs (no route to offset)" \
  "[ \$? -eq 0 ] && [ \$(wc -l < $tmp/one.csv) -eq 3 ]"

# An output that cannot be written is refused before any work (exit 2).
expect_error "--trace into a missing directory" \
  "option '--trace': \"$tmp/nodir/t.json\" cannot be written" --topology h100x8 --seq 32K \
  --sp 4 --trace "$tmp/nodir/t.json"
expect_error "--links naming a directory" "option '--links': \"$tmp\" cannot be written" \
  --topology h100x8 --seq 32K --sp 4 --links "$tmp"
# All outputs land together or none: a --trace failing as it is written
# (a full device) leaves no --csv.
rm -f "$tmp/all.csv" "$tmp/all.links"
"$sim" --topology h100x8 --seq 32K --sp 4 --csv "$tmp/all.csv" --links "$tmp/all.links" \
  --trace /dev/full --quiet 2> "$tmp/stderr"
check "a failing later output: exit 1, named, earlier outputs not written" \
  "[ \$? -eq 1 ] && grep -q '/dev/full: cannot write' $tmp/stderr && [ ! -e $tmp/all.csv ] && [ ! -e $tmp/all.links ] && [ -z \"\$(ls $tmp | grep tmp\\\\.)\" ]"
# SIGINT while writing: the trace goes to a FIFO nobody reads, so the run
# blocks there after writing the CSV's temporary; the signal must remove it.
mkdir "$tmp/sig" && mkfifo "$tmp/sig/fifo"
# (a background job of a script starts with SIGINT ignored: restore it)
for sig in INT TERM; do
  env --default-signal=INT "$sim" --topology h100x8 --seq 32K --sp 4 --csv "$tmp/sig/r.csv" \
    --trace "$tmp/sig/fifo" --quiet &
  pid=$!
  i=0; while [ $i -lt 100 ] && ! ls "$tmp/sig" | grep -q 'r.csv.tmp'; do sleep 0.05; i=$((i + 1)); done
  check "the CSV temporary exists while the trace blocks ($sig)" "ls $tmp/sig | grep -q 'r.csv.tmp'"
  kill -$sig $pid
  i=0; while [ $i -lt 100 ] && kill -0 $pid 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
  kill -KILL $pid 2>/dev/null && bad "SIG$sig ends the run"
  wait $pid
  check "SIG$sig removes the temporaries and writes nothing" "[ \"\$(ls $tmp/sig)\" = fifo ]"
  rm -f "$tmp/sig/r.csv"*
done
ulimit -c 0 2>/dev/null # (SIGQUIT below dumps no core)
# Output that is lost is an error.  A write to stdout that fails (a full
# disk here) is exit 1 with a message, whatever printed it.
for args in "--csv -" "" "--links -" "--dump-topology" "--list" "--help" "--trace -"; do
  "$sim" --topology h100x8 --seq 32K --sp 2 $args > /dev/full 2> "$tmp/stderr"
  check "stdout on a full disk ($args): exit 1, said" \
    "[ \$? -eq 1 ] && grep -q 'tasp-sim: error: stdout: cannot write' $tmp/stderr"
done
"$sim" --topology h100x8 --seq 32K --sp 2 --csv "$tmp/full.csv" > /dev/full 2> "$tmp/stderr"
check "a lost table fails the run before any file is placed" \
  "[ \$? -eq 1 ] && grep -q 'stdout: cannot write: .* (the table); no output was written' $tmp/stderr && [ ! -e $tmp/full.csv ] && [ -z \"\$(ls $tmp | grep 'full.csv')\" ]"
"$sim" --topology h100x8 --seq 32K --sp 2 --csv "" > "$tmp/stdout" 2> "$tmp/stderr"
check "--csv \"\": exit 2 naming the option" \
  "[ \$? -eq 2 ] && grep -qF \"option '--csv': expected a file name or - (stdout), got an empty name\" $tmp/stderr"
# A link is written through: its target gets the output, the link stays.
mkdir "$tmp/lnk" && echo old > "$tmp/lnk/target.csv" && ln -s target.csv "$tmp/lnk/link.csv"
ln -s new.csv "$tmp/lnk/dangling.csv"
"$sim" --topology h100x8 --seq 32K --sp 2 --csv "$tmp/lnk/link.csv" --links "$tmp/lnk/dangling.csv" --quiet
check "an output through a symlink replaces its target, the link stays" \
  "[ -L $tmp/lnk/link.csv ] && head -n 1 $tmp/lnk/target.csv | grep -q '^scheduler,' && [ -L $tmp/lnk/dangling.csv ] && [ -s $tmp/lnk/new.csv ] && [ \$(ls $tmp/lnk | wc -l) -eq 4 ]"
# Two outputs on one file, stdout included, are refused before the run.
# (a link of our own to stdout, as /dev/stdout is: a binary that replaced
# links with files would otherwise replace /dev/stdout itself)
ln -s /proc/self/fd/1 "$tmp/lnk/stdout"
"$sim" --topology h100x8 --seq 32K --sp 2 --csv "$tmp/lnk/stdout" --links - > "$tmp/stdout" 2> "$tmp/stderr"
check "--csv /dev/stdout --links -: one file, refused" \
  "[ \$? -eq 2 ] && grep -qF \"option '--links': \\\"-\\\" is also the output of '--csv' (it is stdout)\" $tmp/stderr && [ ! -s $tmp/stdout ]"
"$sim" --topology h100x8 --seq 32K --sp 2 --csv "$tmp/same.csv" --links - > "$tmp/same.csv" 2> "$tmp/stderr"
check "--links - into the --csv file: refused" "[ \$? -eq 2 ] && grep -q 'is also the output' $tmp/stderr"
"$sim" --topology h100x8 --seq 32K --sp 2 --csv /dev/null --links /dev/null --quiet
check "/dev/null takes any number of outputs" "[ \$? -eq 0 ]"
# A name as long as the file system allows has a temporary; a longer one
# is refused before the run.
long=$(printf '%0250d' 0)
"$sim" --topology h100x8 --seq 32K --sp 2 --csv "$tmp/lnk/$long" --quiet
check "a 250-character output name is written" "[ \$? -eq 0 ] && [ -s $tmp/lnk/$long ]"
"$sim" --topology h100x8 --seq 32K --sp 2 --csv "$tmp/lnk/${long}123456" --quiet 2> "$tmp/stderr"
check "a 256-character one is refused up front, naming the option" \
  "[ \$? -eq 2 ] && grep -qF \"option '--csv'\" $tmp/stderr && grep -q 'File name too long' $tmp/stderr"
check "... and leaves no temporary" "[ -z \"\$(ls $tmp/lnk | grep 'tmp\\.')\" ]"
# Every terminating signal removes the temporaries and ends the run with
# its own status (the trace's FIFO holds the run with its CSV temporary
# made): hang-up, quit, user signals, a timer, a closed pipe.
# (signal numbers as Linux has them)
for pair in HUP:1 QUIT:3 USR1:10 USR2:12 ALRM:14 PIPE:13; do
  sig=${pair%:*}
  # (a background job starts with SIGINT and SIGQUIT ignored: restore them)
  env --default-signal=INT,QUIT "$sim" --topology h100x8 --seq 32K --sp 4 --csv "$tmp/sig/r.csv" --trace "$tmp/sig/fifo" --quiet &
  pid=$!
  i=0; while [ $i -lt 100 ] && ! ls "$tmp/sig" | grep -q 'r.csv.tmp'; do sleep 0.05; i=$((i + 1)); done
  kill -$sig $pid
  i=0; while [ $i -lt 100 ] && kill -0 $pid 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
  kill -KILL $pid 2>/dev/null && bad "SIG$sig ends the run"
  wait $pid
  st=$?
  check "SIG$sig: temporaries removed, the signal's exit status" \
    "[ \"\$(ls $tmp/sig)\" = fifo ] && [ $st -eq $((128 + ${pair#*:})) ]"
  rm -f "$tmp/sig/r.csv"*
done
# A file size limit (SIGXFSZ) while writing: nothing half-written is left.
(ulimit -f 1; exec "$sim" scenarios/h100x8.json --csv "$tmp/sig/big.csv" --quiet) 2> /dev/null
check "SIGXFSZ: status 153, no temporary left" "[ \$? -eq 153 ] && [ \"\$(ls $tmp/sig)\" = fifo ]"
# Memory is checked before it is taken: a point over the budget is refused,
# blaming what sets its SP (or --trace), with the estimate; nothing written.
TASP_MEMORY_BUDGET=16M "$sim" --topology h100x8x32 --sched ring --sp 256 --seq 1M \
  --csv "$tmp/mem.csv" > "$tmp/stdout" 2> "$tmp/stderr"
check "a point over the memory budget: exit 2, --sp blamed with the estimate" \
  "[ \$? -eq 2 ] && grep -q \"option '--sp': ring at SP 256 (seq_len 1M, causal mask, fwd) needs about 0.0 GiB .* over the memory budget of 0.0 GiB\" $tmp/stderr && [ ! -s $tmp/stdout ] && [ -z \"\$(ls $tmp | grep mem.csv)\" ]"
TASP_MEMORY_BUDGET=32M "$sim" --topology h100x8x32 --sched ring --sp 256 --seq 1M \
  --trace "$tmp/mem.json" > "$tmp/stdout" 2> "$tmp/stderr"
check "... its trace over it: --trace blamed" \
  "[ \$? -eq 2 ] && grep -q \"option '--trace': ring at SP 256 .* with its trace\" $tmp/stderr && [ -z \"\$(ls $tmp | grep mem.json)\" ]"
TASP_MEMORY_BUDGET=32M "$sim" --topology h100x8x32 --sched ring --sp 256 --seq 1M --csv /dev/null \
  --quiet
check "... and without the trace it runs" "[ \$? -eq 0 ]"
TASP_MEMORY_BUDGET=1K "$sim" scenarios/h100x8.json > /dev/null 2> "$tmp/stderr"
check "an SP from the scenario file blames the file's field" \
  "[ \$? -eq 2 ] && grep -q \"^tasp-sim: error: scenarios/h100x8.json: field 'sp': \" $tmp/stderr"
# The trace is written as points finish, in point order: the same bytes
# for any thread count, each point a process.
"$sim" scenarios/h100x8.json --seq 32K,64K --trace "$tmp/t1.json" --jobs 1 --quiet
"$sim" scenarios/h100x8.json --seq 32K,64K --trace "$tmp/t3.json" --jobs 3 --quiet
check "a streamed trace: the same bytes for --jobs 1 and 3" "cmp -s $tmp/t1.json $tmp/t3.json"
if command -v python3 >/dev/null; then
  check "... valid JSON with a process per point (2 seq x 3 SP x 7 schedulers)" \
    "python3 -c \"import json,sys; e=json.load(open('$tmp/t1.json'))['traceEvents']; sys.exit(len([x for x in e if x.get('name') == 'process_name']) != 42)\""
fi
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
  "[ \$(paste -d, $tmp/given.csv $tmp/own.csv | awk -F, 'NR==2 {print (\$12 > \$33)}') -eq 1 ]"

# --no-comm keeps LASP's chain (a GPU waits for the state it needs);
# --alone, the program without its communication calls, does not wait
"$sim" --topology h100x8 --attention linear --sched lasp --seq 64K --sp 8 --mask causal \
  --no-comm --csv - --quiet > "$tmp/free.csv"
"$sim" --topology h100x8 --attention linear --sched lasp --seq 64K --sp 8 --mask causal \
  --alone --csv - --quiet > "$tmp/alone.csv"
check "--alone: no wait on the chain (imbalance 0, faster than --no-comm)" \
  "paste -d, $tmp/free.csv $tmp/alone.csv | awk -F, 'NR == 2 {exit !(\$40 == 0 && \$19 > 0 && \$33 < \$12)}'"

echo "cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
