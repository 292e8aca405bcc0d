#!/usr/bin/env python3
"""scripts/search_best.py: each method's best simulated configuration of a
search CSV, best first, with its step's excess over the compute bound.

On a hand-made CSV: a pruned or excluded row never counts (however fast
its bound), the best of each method is the highest tokens/s per GPU (or the
shortest step with --objective step), methods are ordered best first,
"step over bound" is step_s / bound_s - 1; bad input exits 2 naming the
file.  On a real search (llama3-8b on h100x8 at 32K, --sched ring,ulysses,
--csv): the best per method agrees with the search's own "its best"
margins line for each method.

usage: tests/test_search_best.py build/tasp-sim
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import ROOT, check, finish  # noqa: E402

sim = os.path.abspath(sys.argv[1])
SCRIPT = os.path.join(ROOT, "scripts", "search_best.py")
HEAD = "scheduler,tp,sp,split,dp,zero,recompute,status,bound_s,step_s,tokens_per_s_per_gpu\n"


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, capture_output=True,
                          text=True)


def table(out):
    return [[c.strip() for c in l.strip().strip("|").split("|")] for l in out.splitlines()[2:]]


with tempfile.TemporaryDirectory() as tmp:
    f = os.path.join(tmp, "s.csv")
    with open(f, "w") as fh:
        fh.write(HEAD
                 + "ring,1,8,0,1,0,none,simulated,10,12,100\n"
                 + "ring,2,4,0,1,0,none,simulated,10,11,110\n"
                 + "ring,1,8,0,1,0,full,pruned,5,,\n"
                 + "ulysses,1,8,0,1,0,none,simulated,9,9.9,120\n"
                 + "ulysses,1,8,0,1,0,none,excluded,1,,\n"
                 + "usp,1,8,4,1,3,full,simulated,20,25,50\n")
    p = run(f)
    check(p.returncode == 0, f"runs: {p.stderr}")
    t = table(p.stdout)
    check([r[0] for r in t] == ["ulysses", "ring", "usp"],
          f"methods best first: {[r[0] for r in t]}")
    if len(t) == 3:
        check(t[1][1:3] == ["2", "4"], f"ring's best is TP 2 x SP 4 (110 > 100): {t[1]}")
        check(t[1][9] == "10.0%", f"ring: 11 / 10 - 1 = 10.0%: {t[1][9]}")
        check(t[0][9] == "10.0%" and t[0][7] == "9.90", f"ulysses 9.9 / 9: {t[0]}")
        check(t[2][3] == "4" and t[0][3] == "-", f"split shown, 0 as '-': {t[2][3]} {t[0][3]}")
        check(t[2][9] == "25.0%", f"usp: 25 / 20 - 1: {t[2][9]}")
    p = run(f, "--objective", "step")
    t = table(p.stdout)
    check(p.returncode == 0 and [r[0] for r in t] == ["ulysses", "ring", "usp"]
          and t[1][7] == "11.00", f"--objective step: shortest step per method: {t}")

    # a head-parallel degree (double ring's Ulysses degree) before the
    # split: "UxW"; 1 (none given) and 0 (none taken) show the split alone
    with open(f, "w") as fh:
        fh.write(HEAD.rstrip("\n") + ",head_parallel\n"
                 + "double-ring,1,8,2,1,0,none,simulated,10,12,100,2\n"
                 + "usp,1,8,4,1,0,none,simulated,10,12,90,0\n"
                 + "zigzag,1,8,0,1,0,none,simulated,10,12,80,0\n")
    t = table(run(f).stdout)
    check([r[3] for r in t] == ["2x2", "4", "-"], f"head-parallel degree shown UxW: {t}")
    with open(f, "w") as fh:
        fh.write("scheduler,tp,sp\nring,1,8\n")
    p = run(f)
    check(p.returncode == 2 and "s.csv" in p.stderr and "bound_s" in p.stderr,
          f"missing columns: exit 2 naming the file and a column: {p.returncode} {p.stderr}")
    with open(f, "w") as fh:
        fh.write(HEAD + "ring,1,8,0,1,0,none,pruned,5,,\n")
    p = run(f)
    check(p.returncode == 2 and "no simulated" in p.stderr, f"nothing simulated: {p.stderr}")
    p = run(os.path.join(tmp, "none.csv"))
    check(p.returncode == 2 and "none.csv" in p.stderr, f"missing file: {p.stderr}")

    # a real search: its margins line names each method's best
    csvf = os.path.join(tmp, "real.csv")
    s = subprocess.run([sim, "search", "--model", "llama3-8b", "--topology", "h100x8", "--seq",
                        "32K", "--sched", "ring,ulysses", "--jobs", "1", "--csv", csvf],
                       cwd=ROOT, capture_output=True, text=True)
    check(s.returncode == 0, f"search runs: {s.stderr}")
    p = run(csvf)
    check(p.returncode == 0, f"runs on a real search CSV: {p.stderr}")
    t = table(p.stdout)
    winner = [l for l in s.stdout.splitlines() if l.startswith("winner: ")]
    check(len(t) >= 2 and winner and winner[0].startswith(f"winner: {t[0][0]}, TP {t[0][1]} x "
                                                          f"SP {t[0][2]}"),
          f"the first row is the search's winner: {t[:1]} vs {winner}")
    for r in t[1:]:
        line = [l for l in s.stdout.splitlines() if l.strip().startswith(f"ahead of {r[0]} ")]
        check(line and f"its best: TP {r[1]} x SP {r[2]}" in line[0]
              and f"{r[10]} tokens/s per GPU" in line[0],
              f"{r[0]}: the search's own best: {line} vs {r}")

finish("search_best")
