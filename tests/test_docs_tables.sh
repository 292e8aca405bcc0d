#!/bin/sh
# The predicted results quoted in README.md and docs/*.md are what the
# binary prints now: every generated block (scripts/docs_tables.py) is
# compared with its command's output.  Then the mechanism itself, on copies:
# a stale figure inside a block fails --check naming the block, --update
# restores it and a second --update changes nothing.
# Usage: test_docs_tables.sh PATH/TO/tasp-sim PATH/TO/tasp-replay [SKIP]
# SKIP: a regex of commands left out of the first check (tests/
# CMakeLists.txt says which, and why)
sim=$1
replay=$2
skip=$3
. "$(dirname "$0")/checks.sh"
dt() { python3 scripts/docs_tables.py --sim "$sim" --replay "$replay" "$@"; }

dt --check ${skip:+--skip "$skip"} > "$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
check "README.md and docs/*.md hold what their commands print now" "[ $rc -eq 0 ]"
check "README.md has generated blocks of results" \
  "[ \$(grep -c '^<!-- generated: build/tasp-sim ' README.md) -ge 6 ]"

# The README's h100x8 32K-1M table as it stood before it was generated (its
# figures had drifted from the binary's) fails the check.
cmd='build/tasp-sim scenarios/h100x8.json --sp 8 --seq 32K,128K,1M --sched ring,zigzag,tasp --csv - | scripts/docs_tables.py --columns seq_len:seq,scheduler,step_ms:.2f,compute_ms:.2f,comm_ms:.2f,speedup_vs_ring:.2fx'
{
  echo "<!-- generated: $cmd -->"
  echo '| seq | ring ms | zigzag ms | tasp ms | zigzag vs ring | tasp vs ring |'
  echo '| --- | --- | --- | --- | --- | --- |'
  echo '| 32K | 8.08 | 5.30 | 6.47 | 1.52x | 1.25x |'
  echo '<!-- end -->'
} > "$tmp/old.md"
dt --check "$tmp/old.md" > "$tmp/out" 2>&1
rc=$?
check "a drifted table fails --check (exit 1) with a diff" \
  "[ $rc -eq 1 ] && grep -q 'old.md:1: the block differs' $tmp/out && grep -q '^-| 32K | 8.08 ' $tmp/out"

# One figure changed inside a generated block: named, fixed by --update,
# and --update is idempotent (a block of one cheap command: the mechanism
# is the same for every block).
printf '<!-- generated: %s -->\n<!-- end -->\n' \
  'build/tasp-sim --topology h100x8 --sp 2 --seq 4K,8K --sched ring --mask full --csv - | scripts/docs_tables.py --columns seq_len:seq,scheduler,step_ms:.3f' \
  > "$tmp/one.md"
dt --update "$tmp/one.md" > /dev/null 2>&1
cp "$tmp/one.md" "$tmp/good.md"
sed 's/^| 4K | ring | \([0-9]\)/| 4K | ring | 9\1/' "$tmp/good.md" > "$tmp/one.md"
check "the copy differs from the generated block" "! cmp -s $tmp/good.md $tmp/one.md"
dt --check "$tmp/one.md" > "$tmp/out" 2>&1
rc=$?
check "a changed figure fails --check, naming the block's command" \
  "[ $rc -eq 1 ] && grep -q 'one.md:[0-9]*: the block differs' $tmp/out && grep -q '^  build/tasp-sim ' $tmp/out"
dt --update "$tmp/one.md" > /dev/null 2>&1
check "--update restores the block" "cmp -s $tmp/good.md $tmp/one.md"
dt --update "$tmp/one.md" > "$tmp/out" 2>&1
check "a second --update changes nothing" "cmp -s $tmp/good.md $tmp/one.md && [ ! -s $tmp/out ]"

# Text hand-written inside a block is replaced whole.
printf '<!-- generated: %s -->\nhand-written\n<!-- end -->\n' \
  'build/tasp-sim --topology h100x8 --sp 2 --seq 4K --sched ring --mask full' > "$tmp/hand.md"
dt --update "$tmp/hand.md" > /dev/null 2>&1
check "--update replaces a block whole, with its command shown" \
  "! grep -q hand-written $tmp/hand.md && grep -q '^\$ build/tasp-sim --topology h100x8' $tmp/hand.md && grep -q '^<!-- end -->' $tmp/hand.md"

# Malformed markers and failing commands: exit 2 naming file and line.
printf 'x\n<!-- generated: build/tasp-sim --topology h100x8 -->\nno end\n' > "$tmp/open.md"
dt --check "$tmp/open.md" > "$tmp/out" 2>&1
rc=$?
check "a block without its end marker: exit 2 naming the line" \
  "[ $rc -eq 2 ] && grep -q 'open.md:2: block has no <!-- end -->' $tmp/out"
printf '<!-- generated: build/tasp-sim --topology nosuch -->\n<!-- end -->\n' > "$tmp/fail.md"
dt --check "$tmp/fail.md" > "$tmp/out" 2>&1
rc=$?
check "a failing command: exit 2 naming the block and the binary's message" \
  "[ $rc -eq 2 ] && grep -q 'fail.md:1: build/tasp-sim --topology nosuch: exit status 2' $tmp/out"
printf '<!-- generated: rm -rf / -->\n<!-- end -->\n' > "$tmp/other.md"
dt --check "$tmp/other.md" > "$tmp/out" 2>&1
rc=$?
check "a command other than the project's binaries and scripts is refused" "[ $rc -eq 2 ]"

# The filter: columns by name, formats, text kept where not a number.
printf 'a,b,seq_len\n1.23456,n/a,131072\n2,x,1048576\n' |
  python3 scripts/docs_tables.py --columns seq_len:seq,a:.2fx,b:.1f > "$tmp/cols"
check "--columns: named columns, formats, n/a kept" \
  "[ \"\$(sed -n 3p $tmp/cols)\" = '| 128K | 1.23x | n/a |' ] && [ \"\$(sed -n 4p $tmp/cols)\" = '| 1M | 2.00x | x |' ]"

checks_done docs_tables
