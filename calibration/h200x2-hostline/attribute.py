"""Per-class host time per call of the warm wrapped passes (hostline-r*.jsonl),
median over ranks, iterations and the given sizes, beside what
topologies/h200x2-tool.json charges for the same call; and per pass the
host time nothing in tasp-sim's plan stands for (the Python between the
wrapped calls, the dK/dV folds, the zeros/empty_like allocations).
    python3 attribute.py [TOKENS ...]   (default 3072 6144 12288)"""
import json
import statistics
import sys
from collections import defaultdict

sizes = [int(x) for x in sys.argv[1:]] or [3072, 6144, 12288]
per_call = defaultdict(list)
per_pass = defaultdict(list)
for rank in (0, 1):
    with open(f"hostline-r{rank}.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r["mode"] != "wrapped" or r["tokens_per_gpu"] not in sizes or r["pass"] == "fwdbwd":
                continue
            us, calls = r["class_us"], r["class_calls"]
            between = r["host_ms"] * 1e3 - sum(v for k, v in us.items() if k != "python_between")
            for k, n in calls.items():
                if n:
                    per_call[k].append(us[k] / n)
            p2p = sum(us.get(k, 0) for k in ("p2p_ops_build", "batch_isend_irecv", "wait"))
            per_call["p2p call (build + batch + its waits)"].append(p2p / calls["batch_isend_irecv"])
            key = (r["sched"], r["mask"], r["pass"])
            per_pass[key + ("python_between",)].append(between)
            per_pass[key + ("host_ms",)].append(r["host_ms"] * 1e3)
med = statistics.median
print("| class | host us per call (median, IQR) | calls |")
print("| --- | ---: | ---: |")
for k, v in sorted(per_call.items()):
    q = statistics.quantiles(v, n=4)
    print(f"| {k} | {med(v):.0f} ({q[0]:.0f}-{q[2]:.0f}) | {len(v)} |")
print()
print("| pass | host us (median) | of which between the wrapped calls |")
print("| --- | ---: | ---: |")
for k in sorted({k[:3] for k in per_pass}):
    print(f"| {' '.join(k)} | {med(per_pass[k + ('host_ms',)]):.0f} | "
          f"{med(per_pass[k + ('python_between',)]):.0f} |")
