#!/bin/sh
# scripts/plot.py on a small CSV, run as the README writes it
# (python3 scripts/plot.py): the three PNGs exist and are not trivial, also
# where the python3 on PATH lacks matplotlib (a pyenv or a venv, while
# Debian's python3-matplotlib serves /usr/bin/python3 only); where no
# interpreter has it, a message that says so.  Skipped (77) where neither
# python3 nor /usr/bin/python3 has matplotlib.
# Usage: test_plot.sh PATH/TO/tasp-sim
sim=$1
pass=0
fail=0
found=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import matplotlib' 2>/dev/null; then found=$p; break; fi
done
[ -n "$found" ] || { echo "plot: skipped: matplotlib (python3-matplotlib) not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
pngs() { # DIR LABEL: the three figures exist and are not trivial
  for f in step_time speedup breakdown; do
    n=$( (wc -c < "$1/$f.png") 2>/dev/null || echo 0)
    if [ "$n" -gt 20000 ] && head -c 8 "$1/$f.png" | grep -q PNG; then ok "$2: $f.png ($n bytes)"
    else bad "$2: $f.png missing or trivial ($n bytes)"; fi
  done
}
"$sim" --topology h100x8 --seq 32K,128K --sp 4,8 --mask full,causal --csv "$tmp/r.csv" --quiet || exit 1

python3 scripts/plot.py "$tmp/r.csv" --out "$tmp/png" > "$tmp/out" 2>&1 || cat "$tmp/out"
pngs "$tmp/png" "python3 on PATH"

# A python3 first on PATH that has no matplotlib (site-packages off, as a
# venv or pyenv without it), where /usr/bin/python3 has it: the README's
# command still draws.
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  mkdir "$tmp/bin"
  printf '#!/bin/bash\nexec -a "$0" /usr/bin/python3 -S "$@"\n' > "$tmp/bin/python3"
  chmod +x "$tmp/bin/python3"
  if PATH="$tmp/bin:$PATH" python3 -c 'import matplotlib' 2>/dev/null; then
    bad "the fake python3 has matplotlib"
  else
    PATH="$tmp/bin:$PATH" python3 scripts/plot.py "$tmp/r.csv" --out "$tmp/png2" > "$tmp/out" 2>&1 ||
      cat "$tmp/out"
    pngs "$tmp/png2" "python3 on PATH without matplotlib"
    # ...and where the interpreter it turns to lacks it too: a message
    # naming both, no traceback, exit 1
    TASP_PLOT_FIRST_PYTHON=/opt/other/python3 PATH="$tmp/bin:$PATH" \
      python3 scripts/plot.py "$tmp/r.csv" --out "$tmp/png3" > "$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 1 ] && grep -q 'matplotlib is not installed for /opt/other/python3 nor for .*bin/python3: run scripts/setup.sh' "$tmp/out" &&
       ! grep -q Traceback "$tmp/out" && [ ! -e "$tmp/png3" ]; then
      ok "no matplotlib anywhere: a message naming both interpreters, exit 1"
    else bad "no matplotlib anywhere: rc $rc, $(cat "$tmp/out")"; fi
  fi
fi

# Rows that did not run (no step time) are left out, not a crash
sed '3s/^\([^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,\)[^,]*/\1n\/a/' \
  "$tmp/r.csv" > "$tmp/na.csv"
if python3 scripts/plot.py "$tmp/na.csv" --out "$tmp/png4" > "$tmp/out" 2>&1 &&
   grep -q '1 rows without a step time left out' "$tmp/out"; then ok "a row without a step time is left out"
else bad "a row without a step time: $(cat "$tmp/out")"; fi

# Real n/a rows (Ulysses at SP 8 with 4 heads) have no figures: drawn around
"$sim" --topology h100x8 --seq 32K --sp 4,8 --heads 4 --kv-heads 4 --sched ring,ulysses \
  --csv "$tmp/na2.csv" --quiet || exit 1
if grep -q ',n/a: ' "$tmp/na2.csv" && python3 scripts/plot.py "$tmp/na2.csv" --out "$tmp/png5" > /dev/null 2>&1; then
  ok "a CSV with n/a rows plots"
else bad "a CSV with n/a rows does not plot"; fi

echo "plot: $pass passed, $fail failed"
[ $fail -eq 0 ]
