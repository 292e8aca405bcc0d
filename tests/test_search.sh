#!/bin/sh
# tasp-sim search: the pruned search answers what exhaustive simulation
# answers, its bounds are lower bounds, the answer is the same for any
# --jobs and for the merge of shards run with GNU parallel, exclusions
# carry their reasons, and bad input exits 2 naming the option.
# Usage: test_search.sh PATH/TO/tasp-sim
sim=$1
. "$(dirname "$0")/checks.sh"

# a small model (12 query heads: Ulysses cannot split them 8 ways, nor TP 8);
# double ring brings its head-parallel degree (1 or 2 at SP 8) and inner ring
q="--model tests/data/search-model.json --topology h100x8 --seq 32K --sched ring,zigzag,ulysses,usp,double-ring"

"$sim" search $q --csv "$tmp/p.csv" > "$tmp/p.txt" 2> "$tmp/p.err"
check "search exits 0 with a winner" "[ \$? -eq 0 ] && grep -q '^winner: ' $tmp/p.txt"
"$sim" search $q --exhaustive --csv "$tmp/x.csv" > "$tmp/x.txt" 2>/dev/null
check "the pruned search prints what exhaustive simulation prints" "cmp -s $tmp/p.txt $tmp/x.txt"
check "the pruned search pruned something" "grep -q ',pruned,' $tmp/p.csv"
check "exhaustive simulation prunes nothing" "! grep -q ',pruned,' $tmp/x.csv"
# the head-parallel degree: double ring's rows (and only its) carry one,
# U = 2 at SP 8 with an inner ring of 2 over the 4 context ranks, and the
# degree reaches the scheduler (its step differs from U = 1's, same inner)
python3 - "$tmp/x.csv" > "$tmp/hp" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("only", all((r["scheduler"] == "double-ring") == (r["head_parallel"] != "0") for r in rows))
print("values", ",".join(sorted({f"{r['head_parallel']}x{r['split']}@{r['sp']}"
                                  for r in rows if r["scheduler"] == "double-ring"})))
def step(u):
    return {(r["tp"], r["zero"], r["recompute"]): r["step_s"] for r in rows
            if r["scheduler"] == "double-ring" and r["sp"] == "8" and r["split"] == "2"
            and r["head_parallel"] == u and r["status"] == "simulated"}
a, b = step("1"), step("2")
print("differ", len(b), len(b) > 0 and all(a[k] != b[k] for k in b))
EOF
check "only double ring has a head-parallel degree" "grep -qx 'only True' $tmp/hp"
check "double ring: U 1 with inner 2 (SP 4, 8) and 4 (SP 8), U 2 with inner 2 (SP 8)" \
  "grep -qx 'values 1x2@4,1x2@8,1x4@8,2x2@8' $tmp/hp"
check "double ring: the head-parallel degree reaches its plan" "grep -q '^differ [1-9][0-9]* True$' $tmp/hp"
check "the dimensions line counts the head-parallel degrees" \
  "grep -q \"head-parallel (double ring's Ulysses) 1,2;\" $tmp/p.txt"
# a split names what it splits by the scheduler's option (splits_heads):
# USP's Ulysses groups, double ring's inner ring
check "the margins name USP's split as Ulysses x ring, double ring's as inner x outer" \
  "grep -q 'its best: TP [0-9]* x SP [0-9]* (Ulysses [0-9]* x ring [0-9]*)' $tmp/p.txt && grep -q 'ahead of double-ring.*(inner ring [0-9]* x outer [0-9]*)' $tmp/p.txt && ! grep -q 'ahead of usp.*inner ring' $tmp/p.txt"

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

# the memory bound with what each layer's attention keeps for its backward
# (search_bound.h): at most the simulated peak of every configuration of
# 12-layer steps (extended from 6 and 7 layers) of seven schedulers (LASP-2
# on the model made linear), both recomputations, every ZeRO stage
sed 's/"softmax", "count": 2/"linear", "count": 12/' tests/data/search-model.json > "$tmp/lin.json"
m="--topology h100x8 --seq 32K --exhaustive"
"$sim" search --model "$tmp/deep.json" $m --sched ring,zigzag,ulysses,usp,allgather,tasp \
  --csv "$tmp/m1.csv" -q 2>/dev/null
"$sim" search --model "$tmp/lin.json" $m --sched lasp2 --csv "$tmp/m2.csv" -q 2>/dev/null
"$sim" search --model "$tmp/deep.json" $m --gpu-memory 100GiB --sched ring --csv - -q 2>/dev/null |
  python3 -c 'import csv, sys; print(100 - float(next(csv.DictReader(sys.stdin))["usable_gib"]))' \
  > "$tmp/m-headroom"
python3 - "$tmp/m1.csv" "$tmp/m2.csv" "$(cat $tmp/m-headroom)" > "$tmp/mem" <<'EOF'
import csv, sys
rows = [r for f in sys.argv[1:3] for r in csv.DictReader(open(f))]
ran = [r for r in rows if r["status"] in ("simulated", "does not fit")]
print("over", sum(float(r["mem_bound_gib"]) > float(r["peak_mem_gib"]) for r in ran), len(ran),
      " ".join(sorted({r["scheduler"] + "/" + r["recompute"] + "/" + r["zero"] for r in ran
                       if r["scheduler"] == "lasp2"})))
# a GPU memory just below the largest bound among configurations without
# recomputation (the attention's kept bytes are then part of it)
x = max((r for r in ran if r["recompute"] == "none" and r["scheduler"] != "lasp2"),
        key=lambda r: float(r["mem_bound_gib"]))
print("usable", x["index"], f"{float(x['mem_bound_gib']) - 1e-4 + float(sys.argv[3]):.6f}")
EOF
check "memory bound with the attention's kept bytes: at most every simulated peak (12 layers; lasp2 at every ZeRO stage, both recomputations)" \
  "grep -q '^over 0 [1-9][0-9]* lasp2/full/0 lasp2/full/1 lasp2/full/2 lasp2/full/3 lasp2/none/0 lasp2/none/1 lasp2/none/2 lasp2/none/3$' $tmp/mem"
set -- $(grep '^usable' "$tmp/mem")
"$sim" search --model "$tmp/deep.json" $m --sched ring,zigzag,ulysses,usp,allgather,tasp \
  --gpu-memory "${3}GiB" --csv "$tmp/m3.csv" -q 2>/dev/null
python3 - "$tmp/m1.csv" "$tmp/m3.csv" "$2" > "$tmp/mem3" <<'EOF'
import csv, sys
free, tight = ({r["index"]: r for r in csv.DictReader(open(f))} for f in sys.argv[1:3])
kept = [i for i, r in tight.items() if "tensors kept for the backward" in r["reason"]]
usable = float(next(iter(tight.values()))["usable_gib"])
print("excluded", tight[sys.argv[3]]["status"], tight[sys.argv[3]]["class"], sys.argv[3] in kept)
print("none-fit", len(kept), sum(float(free[i]["peak_mem_gib"]) <= usable for i in kept))
EOF
check "a GPU memory below one configuration's bound excludes it for what its attention keeps" \
  "grep -qx 'excluded excluded memory True' $tmp/mem3"
check "what the attention's kept bytes exclude would not have fit" "grep -q '^none-fit [1-9][0-9]* 0$' $tmp/mem3"
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
"$sim" search $q --jobs 2 --csv "$tmp/j2.csv" > "$tmp/j2.txt" 2>/dev/null
check "--jobs 1 and 2 give the same table" "cmp -s $tmp/j1.txt $tmp/j2.txt && cmp -s $tmp/j1.txt $tmp/p.txt"
check "--jobs 1 and 2 give the same CSV" "cmp -s $tmp/j1.csv $tmp/j2.csv && cmp -s $tmp/j1.csv $tmp/p.csv"
# the machine does not decide what a search simulates: under a memory
# budget where the main command refuses the ring's SP 8 step (1.8e3 tasks
# past 1 MiB), the search's plan cap is still its own (search.h)
TASP_MEMORY_BUDGET=1M "$sim" search $q --csv "$tmp/b1m.csv" -q 2>/dev/null
TASP_MEMORY_BUDGET=1M "$sim" --topology h100x8 --scope model --model tests/data/search-model.json --seq 32K --sched ring --sp 8 -q --csv /dev/null 2>/dev/null
check "a search's answer does not depend on the memory budget (the main command's point is refused under it)" \
  "[ \$? -eq 2 ] && cmp -s $tmp/b1m.csv $tmp/p.csv"

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
# a CSV made before head_parallel and precision were appended (its last
# two columns cut; the kept CSVs of docs/search/ are such) merges as a
# search without head-parallel degrees in the default recipe
"$sim" search --model tests/data/search-model.json --topology h100x8 --seq 16K --sched zigzag \
  --csv "$tmp/new.csv" > "$tmp/new.txt" 2>/dev/null
python3 - "$tmp/new.csv" "$tmp/old.csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n").writerows(r[:-2] for r in rows)
EOF
"$sim" search --merge "$tmp/old.csv" --csv "$tmp/old-merged.csv" > "$tmp/old.txt"
check "a CSV without the head_parallel and precision columns merges to the same answer" \
  "[ \$? -eq 0 ] && cmp -s $tmp/new.txt $tmp/old.txt && cmp -s $tmp/new.csv $tmp/old-merged.csv"

# what cannot run, with its reason and class
check "Ulysses at SP 8 excluded: 12 heads do not divide" \
  "grep -q '^  ulysses (method): .*12 query heads do not divide among a Ulysses degree of 8' $tmp/p.txt"
check "TP 8 excluded: the heads do not divide" "grep -q '^  no-sp (tp): .*TP 8 does not divide' $tmp/p.txt"
check "USP and double ring split strictly inside SP, and only they have a split" \
  "! awk -F, 'NR > 1 && ((\$12 == \"usp\" || \$12 == \"double-ring\") != (\$15 > 0) || (\$15 > 0 && \$15 >= \$14))' $tmp/p.csv | grep -q . && grep -q ',usp,1,4,2,' $tmp/p.csv"
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
# the step bound's TP waits priced per placement (a TP group across the two
# nodes over the NIC): below every simulated step, TP across nodes among them
"$sim" search --model tests/data/search-model.json --topology h100x8x2 --set generator.gpus_per_node=2 \
  --set generator.nodes=2 --seq 32K --sched zigzag,ulysses --exhaustive --csv "$tmp/plx.csv" > /dev/null 2>&1
python3 - "$tmp/plx.csv" > "$tmp/plx" <<'EOF2'
import csv, sys
ran = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] in ("simulated", "does not fit")]
across = [r for r in ran if r["tp"] == "2" and r["placement"] != "tp,sp,dp" and r["sp"] == "2"]
print("bounds", sum(float(r["bound_s"]) > float(r["step_s"]) for r in ran), len(ran), len(across))
EOF2
check "two nodes: every step bound at most the simulated step, TP across the nodes included" \
  "grep -q '^bounds 0 [1-9][0-9]* [1-9]' $tmp/plx"

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

# double ring's head-parallel degree where the heads cannot take it: 3 KV
# heads neither divide among 2 GPUs nor replicate evenly to them, so U 2
# is excluded by the scheduler's own check, with its reason, and U 1 runs
sed 's/"kv_heads": 4/"kv_heads": 3/' tests/data/search-model.json > "$tmp/kv3.json"
"$sim" search --model "$tmp/kv3.json" --topology h100x8 --seq 32K --sched double-ring \
  --csv "$tmp/kv3.csv" > "$tmp/kv3.txt" 2>/dev/null
check "double ring U 2 with 3 KV heads: excluded with the scheduler's reason" \
  "grep -q \"^  double-ring (method): .*3 KV heads neither divide among a Ulysses degree of 2\" $tmp/kv3.txt"
python3 - "$tmp/kv3.csv" > "$tmp/kv3" <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["scheduler"] == "double-ring"]
print("u2", {r["status"] + "/" + r["class"] for r in rows if r["head_parallel"] == "2"})
print("u1", any(r["status"] == "simulated" for r in rows if r["head_parallel"] == "1"))
EOF
check "double ring U 2 with 3 KV heads: every such row excluded, U 1 simulated" \
  "grep -qx \"u2 {'excluded/method'}\" $tmp/kv3 && grep -qx 'u1 True' $tmp/kv3"

# --precision: every configuration in the recipe.  FP8 keeps an FP8 copy
# of every GEMM weight beside the bf16 one (TransformerEngine), so each
# configuration's memory bound grows, and its GEMMs take the FP8 table's
# times; a memory between a configuration's two peaks keeps it in the
# default recipe and drops it in FP8.  12 layers make the copies count.
f="--model $tmp/deep.json --topology h100x8 --seq 32K --sched zigzag --gpus 2 --exhaustive"
"$sim" search $f --csv "$tmp/mg.csv" > "$tmp/mg.txt" 2>/dev/null
"$sim" search $f --precision fp8 --csv "$tmp/f8.csv" > "$tmp/f8.txt" 2>/dev/null
"$sim" search $f --gpu-memory 100GiB --csv - -q 2>/dev/null | python3 -c '
import csv, sys
print(100 - float(next(csv.DictReader(sys.stdin))["usable_gib"]))' > "$tmp/headroom"
python3 - "$tmp/mg.csv" "$tmp/f8.csv" "$(cat $tmp/headroom)" > "$tmp/prec" <<'EOF'
import csv, sys
mg, f8 = ({r["index"]: r for r in csv.DictReader(open(f))} for f in sys.argv[1:3])
both = [i for i in mg if mg[i]["status"] == f8[i]["status"] == "simulated"]
print("recipe", {r["precision"] for r in mg.values()}, {r["precision"] for r in f8.values()})
print("memory", len(both) > 0 and all(float(f8[i]["mem_bound_gib"]) > float(mg[i]["mem_bound_gib"])
                                      and float(f8[i]["peak_mem_gib"]) > float(mg[i]["peak_mem_gib"])
                                      for i in both))
print("time", all(f8[i]["step_s"] != mg[i]["step_s"] for i in both))
# the configuration whose FP8 copies add the most: a memory halfway
x = max(both, key=lambda i: float(f8[i]["peak_mem_gib"]) - float(mg[i]["peak_mem_gib"]))
half = (float(f8[x]["peak_mem_gib"]) + float(mg[x]["peak_mem_gib"])) / 2
print("pick", x, round(float(f8[x]["peak_mem_gib"]) - float(mg[x]["peak_mem_gib"]), 3),
      f"{half + float(sys.argv[3]):.4f}")
EOF
check "--precision fp8: every row says its recipe" \
  "grep -qx \"recipe {'megatron'} {'fp8'}\" $tmp/prec && grep -q 'tokens causal, one sequence per DP replica, precision fp8; ranked' $tmp/f8.txt && ! grep -q precision $tmp/mg.txt"
check "--precision fp8: every configuration's memory bound and peak grow" "grep -qx 'memory True' $tmp/prec"
check "--precision fp8: every configuration's step moves" "grep -qx 'time True' $tmp/prec"
set -- $(grep '^pick' "$tmp/prec")
"$sim" search $f --gpu-memory "$4" --csv "$tmp/mg2.csv" -q 2>/dev/null
"$sim" search $f --gpu-memory "$4" --precision fp8 --csv "$tmp/f82.csv" -q 2>/dev/null
python3 - "$tmp/mg2.csv" "$tmp/f82.csv" "$2" > "$tmp/prec2" <<'EOF'
import csv, sys
mg, f8 = ({r["index"]: r for r in csv.DictReader(open(f))} for f in sys.argv[1:3])
x = sys.argv[3]
print("fits", mg[x]["status"], "|", f8[x]["status"], f8[x]["class"])
EOF
check "--precision fp8: a configuration that fits in the default recipe does not in FP8 ($3 GiB more)" \
  "grep -Eqx 'fits simulated \\| (excluded|does not fit) memory' $tmp/prec2"
# the scenario key the main command reads (job.precision) asks the same
cat > "$tmp/p8.json" <<EOF2
{"topology": "h100x8", "model": "$tmp/deep.json", "seq_len": "32K", "schedulers": ["zigzag"],
 "job": {"precision": "fp8"}, "search": {"gpus": 2}}
EOF2
"$sim" search "$tmp/p8.json" --exhaustive > "$tmp/p8.txt" 2>/dev/null
check "a scenario file's job.precision asks what --precision asks" "cmp -s $tmp/p8.txt $tmp/f8.txt"
"$sim" search --model tests/data/search-model.json --topology l20x8-pcie --seq 32K --precision fp8 \
  > /dev/null 2> "$tmp/err"
check "--precision fp8 on a topology without FP8 GEMM times: exit 2 naming the field" \
  "[ \$? -eq 2 ] && grep -q \"option '--precision': fp8 needs .*compute.fp8_gemm_table\" $tmp/err"
"$sim" search --merge "$tmp/f8.csv" "$tmp/mg.csv" > /dev/null 2> "$tmp/err"
check "shards of different recipes are refused, naming the field" \
  "[ \$? -eq 2 ] && grep -q \"field 'precision'\" $tmp/err"

check "search --help names its options" \
  "'$sim' search --help | grep -q -- '--global-batch-tokens' && '$sim' --help | grep -q 'tasp-sim search'"

# bad input: exit 2, naming the option
for case in "--top 0|--top" "--objective fast|--objective" "--seq 16K,32K|--seq" \
            "--gpus 9|--gpus" "--global-batch-tokens 40K|--global-batch-tokens" \
            "--sched ring,nope|--sched" "--shard 2/2|--shard" "--mask both|--mask" \
            "--jobs -1|--jobs" "--precision fp16|--precision" "--gpu-memory 80G|--gpu-memory" \
            "--set gpu_memory_gib=40 --gpu-memory 80|--set" \
            "--set comm.launch_us=10 --set comm.launch_us=20|--set"; do
  args=${case%|*}
  opt=${case#*|}
  "$sim" search $q $args > /dev/null 2> "$tmp/err"
  check "search $args: exit 2 naming $opt" "[ \$? -eq 2 ] && grep -q -- \"option '$opt'\" $tmp/err"
done
"$sim" search $q --set comm.launch_us=10 --set comm.launch_us=20 > /dev/null 2> "$tmp/err"
check "a key given twice to a search is not pointed to a comma list, which it refuses" \
  "grep -q \"key 'comm.launch_us' is set twice; expected each key once\" $tmp/err && ! grep -q 'comma list' $tmp/err"
"$sim" search $q --set comm.launch_us=10,20 > /dev/null 2> "$tmp/err"
check "a list of --set values (a sweep of the main command's) is refused as one value per key" \
  "[ \$? -eq 2 ] && grep -q \"option '--set': comm.launch_us: 2 values; a search takes one value per key\" $tmp/err"
"$sim" search --merge --model llama3-8b "$tmp/shard0.csv" > /dev/null 2> "$tmp/err"
check "--merge with a question's option: exit 2" "[ \$? -eq 2 ] && grep -q \"option '--merge'\" $tmp/err"
"$sim" search --merge --precision fp8 "$tmp/shard0.csv" > /dev/null 2> "$tmp/err"
check "--merge with --precision (the shards' recipe is theirs): exit 2" \
  "[ \$? -eq 2 ] && grep -q \"option '--merge'\" $tmp/err"
"$sim" search $q --csv "$tmp/none/x.csv" > /dev/null 2> "$tmp/err"
check "an output that cannot be written is refused before the search" \
  "[ \$? -eq 2 ] && grep -q \"option '--csv'\" $tmp/err"

checks_done search
