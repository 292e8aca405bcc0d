#!/bin/sh
# tasp-sim search: the pruned search answers what exhaustive simulation
# answers, its bounds are lower bounds, the answer is the same for any
# --jobs and for the merge of shards run with GNU parallel, exclusions
# carry their reasons, and bad input exits 2 naming the option.
# Usage: test_search.sh PATH/TO/tasp-sim
sim=$1
. "$(dirname "$0")/checks.sh"

# a small model (12 query heads: Ulysses cannot split them 8 ways, nor TP 8)
q="--model tests/data/search-model.json --topology h100x8 --seq 32K --sched ring,zigzag,ulysses,usp"

"$sim" search $q --csv "$tmp/p.csv" > "$tmp/p.txt" 2> "$tmp/p.err"
check "search exits 0 with a winner" "[ \$? -eq 0 ] && grep -q '^winner: ' $tmp/p.txt"
"$sim" search $q --exhaustive --csv "$tmp/x.csv" > "$tmp/x.txt" 2>/dev/null
check "the pruned search prints what exhaustive simulation prints" "cmp -s $tmp/p.txt $tmp/x.txt"
check "the pruned search pruned something" "grep -q ',pruned,' $tmp/p.csv"
check "exhaustive simulation prunes nothing" "! grep -q ',pruned,' $tmp/x.csv"

# many layers: each step replayed with 6 and 7 layers and extended
# (sim_run_step_repeating) gives the answer replaying every layer gives,
# every configuration's peak memory alike and its time within 0.5% (the
# pruning is off in both, so the same configurations are simulated)
sed 's/"count": 2/"count": 12/' tests/data/search-model.json > "$tmp/deep.json"
d="--model $tmp/deep.json --topology h100x8 --seq 32K --sched ring,zigzag,ulysses --exhaustive"
"$sim" search $d --csv "$tmp/d1.csv" > "$tmp/d1.txt" 2>&1
"$sim" search $d --whole-steps --csv "$tmp/d2.csv" > "$tmp/d2.txt" 2>&1
python3 - "$tmp/d1.csv" "$tmp/d2.csv" > "$tmp/deep" <<'EOF'
import csv, sys
a, b = ([r for r in csv.DictReader(open(f)) if r["status"] == "simulated"] for f in sys.argv[1:])
bi = {r["index"]: r for r in b}
print(len(a), len(a) == len(b),
      all(x["peak_mem_gib"] == bi[x["index"]]["peak_mem_gib"] for x in a),
      max(abs(float(x["step_s"]) / float(bi[x["index"]]["step_s"]) - 1) for x in a) < 5e-3)
EOF
check "a few layers extended: every configuration's memory alike, time within 0.5%" "grep -q '^[1-9][0-9]* True True True$' $tmp/deep"
check "a few layers extended: the answer every layer replayed gives" "cmp -s $tmp/d1.txt $tmp/d2.txt"
python3 - "$tmp/p.csv" "$tmp/x.csv" > "$tmp/bounds" <<'EOF'
import csv, sys
pruned = {r["index"]: r for r in csv.DictReader(open(sys.argv[1]))}
full = {r["index"]: r for r in csv.DictReader(open(sys.argv[2]))}
ran = [r for r in full.values() if r["status"] in ("simulated", "does not fit")]
# every simulated configuration: the step bound and the memory bound are
# lower bounds of what the simulation gave
print("time", sum(float(r["bound_s"]) > float(r["step_s"]) for r in ran), len(ran))
print("memory", sum(float(r["mem_bound_gib"]) > float(r["peak_mem_gib"]) for r in ran))
# every configuration the pruned search pruned was, simulated, no better
# than the K-th best and its method's best
top = int(next(iter(full.values()))["top"])
fits = sorted((float(r["tokens_per_s_per_gpu"]) for r in ran if r["status"] == "simulated"),
              reverse=True)
best = {}
for r in ran:
    if r["status"] == "simulated":
        best[r["scheduler"]] = max(best.get(r["scheduler"], 0), float(r["tokens_per_s_per_gpu"]))
wrong = [i for i, r in pruned.items() if r["status"] == "pruned" and
         (float(full[i]["tokens_per_s_per_gpu"]) >= fits[top - 1] or
          float(full[i]["tokens_per_s_per_gpu"]) >= best[r["scheduler"]])]
print("pruned", len(wrong), sum(r["status"] == "pruned" for r in pruned.values()))
print("same", sum(pruned[i]["status"] != full[i]["status"] and pruned[i]["status"] != "pruned"
                  for i in full))
EOF
check "every step bound is at most the simulated step" "grep -q '^time 0 [1-9]' $tmp/bounds"
check "every memory bound is at most the simulated peak" "grep -qx 'memory 0' $tmp/bounds"
check "no pruned configuration would have ranked or been its method's best" \
  "grep -q '^pruned 0 [1-9]' $tmp/bounds"
check "statuses differ only where pruned" "grep -qx 'same 0' $tmp/bounds"

"$sim" search $q --jobs 1 --csv "$tmp/j1.csv" > "$tmp/j1.txt" 2>/dev/null
"$sim" search $q --jobs 3 --csv "$tmp/j3.csv" > "$tmp/j3.txt" 2>/dev/null
check "--jobs 1 and 3 give the same table" "cmp -s $tmp/j1.txt $tmp/j3.txt && cmp -s $tmp/j1.txt $tmp/p.txt"
check "--jobs 1 and 3 give the same CSV" "cmp -s $tmp/j1.csv $tmp/j3.csv && cmp -s $tmp/j1.csv $tmp/p.csv"

# shards over GNU parallel, as a user spreads a search over machines
if command -v parallel >/dev/null 2>&1; then
  parallel -j 3 "'$sim' search $q --shard {}/3 --csv '$tmp/shard{}.csv' -q" ::: 0 1 2
  check "three shards ran" "[ \$? -eq 0 ] && [ -s $tmp/shard2.csv ]"
  "$sim" search --merge "$tmp/shard0.csv" "$tmp/shard1.csv" "$tmp/shard2.csv" \
    --csv "$tmp/m.csv" > "$tmp/m.txt"
  check "the merged shards print the one-machine answer" "cmp -s $tmp/m.txt $tmp/p.txt"
  check "the merged CSV holds every configuration once" \
    "[ \$(tail -n +2 $tmp/m.csv | cut -d, -f11 | sort -u | wc -l) -eq \$(tail -n +2 $tmp/p.csv | wc -l) ]"
else
  bad "GNU parallel is not installed (scripts/setup.sh installs it)"
fi
"$sim" search --merge "$tmp/shard0.csv" "$tmp/shard1.csv" > /dev/null 2> "$tmp/err"
check "a missing shard is refused" "[ \$? -eq 2 ] && grep -q 'a shard is missing' $tmp/err"
"$sim" search --merge "$tmp/shard0.csv" "$tmp/shard0.csv" "$tmp/shard1.csv" "$tmp/shard2.csv" \
  > /dev/null 2> "$tmp/err"
check "a shard given twice is refused" "[ \$? -eq 2 ] && grep -q 'same shard twice' $tmp/err"
"$sim" search --model tests/data/search-model.json --topology h100x8 --seq 16K \
  --sched ring --shard 0/2 --csv "$tmp/other.csv" -q 2>/dev/null
"$sim" search --merge "$tmp/other.csv" "$tmp/shard1.csv" > /dev/null 2> "$tmp/err"
check "shards of different searches are refused, naming the field" \
  "[ \$? -eq 2 ] && grep -q \"field 'seq_len'\" $tmp/err"
sed 's/,simulated,/,bogus,/' "$tmp/shard0.csv" > "$tmp/bogus.csv"
"$sim" search --merge "$tmp/bogus.csv" "$tmp/shard1.csv" "$tmp/shard2.csv" > /dev/null 2> "$tmp/err"
check "a bad status is refused, naming file, line and field" \
  "[ \$? -eq 2 ] && grep -q \"bogus.csv: line 2: field 'status'\" $tmp/err"

# what cannot run, with its reason and class
check "Ulysses at SP 8 excluded: 12 heads do not divide" \
  "grep -q '^  ulysses (method): .*12 query heads do not divide among a Ulysses degree of 8' $tmp/p.txt"
check "TP 8 excluded: the heads do not divide" "grep -q '^  no-sp (tp): .*TP 8 does not divide' $tmp/p.txt"
check "USP splits strictly inside SP, and only USP has one" \
  "! awk -F, 'NR > 1 && ((\$12 == \"usp\") != (\$15 > 0) || (\$15 > 0 && \$15 >= \$14))' $tmp/p.csv | grep -q . && grep -q ',usp,1,4,2,' $tmp/p.csv"
check "every excluded row has a class and a reason" \
  "! awk -F, 'NR > 1 && \$20 == \"excluded\" && (\$21 == \"\" || \$22 == \"\")' $tmp/p.csv | grep -q ."
# placement: one in a node; with two nodes of two GPUs each dimension
# innermost, and TP across the nodes slower than TP inside them
check "one node: the default placement alone" "! grep -q 'sp,tp,dp\\|dp,tp,sp' $tmp/p.csv"
"$sim" search --model tests/data/search-model.json --topology h100x8x2 --set generator.gpus_per_node=2 \
  --set generator.nodes=2 --seq 32K --sched zigzag --csv "$tmp/pl.csv" > /dev/null 2>&1
python3 - "$tmp/pl.csv" > "$tmp/pl" <<'EOF2'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("places", " ".join(sorted({r["placement"] for r in rows})))
step = {r["placement"]: float(r["step_s"]) for r in rows
        if r["scheduler"] == "zigzag" and (r["tp"], r["sp"], r["dp"], r["zero"], r["recompute"])
        == ("2", "2", "1", "0", "none") and r["status"] == "simulated"}
print("tp-inside-faster", step["tp,sp,dp"] < step["sp,tp,dp"])
# TP 1 x SP 1 x DP 4: one placement only (the others place the GPUs alike)
print("alike", sum(r["tp"] == "1" and r["sp"] == "1" and r["zero"] == "0" and
                  r["recompute"] == "none" for r in rows))
EOF2
check "two nodes: every dimension innermost" "grep -qx 'places dp,tp,sp sp,tp,dp tp,sp,dp' $tmp/pl"
check "two nodes: TP inside a node is faster than across" "grep -qx 'tp-inside-faster True' $tmp/pl"
check "placements that place GPUs alike counted once" "grep -qx 'alike 1' $tmp/pl"

# memory: a 4 GiB GPU holds none of the states, so everything is excluded
"$sim" search $q --gpu-memory 4GiB > "$tmp/small.txt" 2>/dev/null
check "--gpu-memory: nothing fits 4 GiB, said with the closest" \
  "grep -q '^no configuration runs and fits' $tmp/small.txt && grep -q 'the closest: does not fit' $tmp/small.txt"
# a global batch: 4 sequences of 32K; DP 8 cannot hold them, DP 2 runs 2 micro-batches
"$sim" search $q --global-batch-tokens 128K --csv "$tmp/g.csv" > "$tmp/g.txt" 2>/dev/null
check "--global-batch-tokens: DP 8 excluded for the batch" \
  "grep -q 'DP 8 does not divide the 4 sequences of the global batch' $tmp/g.csv"
check "--global-batch-tokens: DP 2 runs 2 micro-batches" \
  "! awk -F, 'NR > 1 && \$16 == 2 && \$19 != 2' $tmp/g.csv | grep -q . && awk -F, 'NR > 1 && \$16 == 2' $tmp/g.csv | grep -q ."
check "--objective step ranks by step time" \
  "'$sim' search $q --objective step 2>/dev/null | grep -q 'ranked by step time'"

# the same question from a scenario file (its "search" object and
# schedulers) prints the same answer; an option overrides the file
cat > "$tmp/q.json" <<'EOF2'
{"topology": "h100x8", "model": "tests/data/search-model.json", "seq_len": "32K",
 "schedulers": ["zigzag", "ulysses"], "search": {"gpus": 4, "top": 3, "global_batch_tokens": "128K"}}
EOF2
"$sim" search "$tmp/q.json" > "$tmp/qf.txt" 2>/dev/null
"$sim" search --topology h100x8 --model tests/data/search-model.json --seq 32K --sched zigzag,ulysses \
  --gpus 4 --top 3 --global-batch-tokens 128K > "$tmp/qc.txt" 2>/dev/null
check "a scenario file's search object asks what the options ask" "cmp -s $tmp/qf.txt $tmp/qc.txt && grep -q '4 GPUs' $tmp/qf.txt"
"$sim" search "$tmp/q.json" --gpus 2 2>/dev/null | head -1 > "$tmp/q2.txt"
check "--gpus overrides the file's search.gpus" "grep -q ', 2 GPUs,' $tmp/q2.txt"
sed 's/"top": 3/"tops": 3/' "$tmp/q.json" > "$tmp/qbad.json"
"$sim" search "$tmp/qbad.json" > /dev/null 2> "$tmp/err"
check "an unknown search field names the file and field" "[ \$? -eq 2 ] && grep -q \"qbad.json: field 'search.tops'\" $tmp/err"
sed 's/"128K"/"100K"/' "$tmp/q.json" > "$tmp/qgbt.json"
"$sim" search "$tmp/qgbt.json" > /dev/null 2> "$tmp/err"
check "a global batch of no whole sequences names the file's field" \
  "[ \$? -eq 2 ] && grep -q \"field 'search.global_batch_tokens': expected whole sequences\" $tmp/err"

check "search --help names its options" \
  "'$sim' search --help | grep -q -- '--global-batch-tokens' && '$sim' --help | grep -q 'tasp-sim search'"

# bad input: exit 2, naming the option
for case in "--top 0|--top" "--objective fast|--objective" "--seq 16K,32K|--seq" \
            "--gpus 9|--gpus" "--global-batch-tokens 40K|--global-batch-tokens" \
            "--sched ring,nope|--sched" "--shard 2/2|--shard" "--mask both|--mask" \
            "--jobs -1|--jobs"; do
  args=${case%|*}
  opt=${case#*|}
  "$sim" search $q $args > /dev/null 2> "$tmp/err"
  check "search $args: exit 2 naming $opt" "[ \$? -eq 2 ] && grep -q -- \"option '$opt'\" $tmp/err"
done
"$sim" search --merge --model llama3-8b "$tmp/shard0.csv" > /dev/null 2> "$tmp/err"
check "--merge with a question's option: exit 2" "[ \$? -eq 2 ] && grep -q \"option '--merge'\" $tmp/err"
"$sim" search $q --csv "$tmp/none/x.csv" > /dev/null 2> "$tmp/err"
check "an output that cannot be written is refused before the search" \
  "[ \$? -eq 2 ] && grep -q \"option '--csv'\" $tmp/err"

checks_done search
