"""hostline-r*.jsonl's plain passes (unwrapped, warm cache, timed as
calibrate.py's timed(): CUDA events around the pass, the slower rank's
time, median over the iterations) as calibrate.py's pass records, for
scripts/validate_passes.py:  python3 to_passes.py > passes-n2.jsonl"""
import json
import statistics
from collections import defaultdict

by = defaultdict(dict)
for rank in (0, 1):
    with open(f"hostline-r{rank}.jsonl") as f:
        for line in f:
            r = json.loads(line)
            if r["mode"] == "plain":
                key = (r["tokens_per_gpu"], r["sched"], r["mask"], r["pass"])
                by[key].setdefault(r["iter"], []).append(r["gpu_ms"])
for (c, sched, mask, pas), its in sorted(by.items(), key=lambda kv: kv[0]):
    times = [max(v) for v in its.values() if len(v) == 2]
    print(json.dumps({"part": "pass", "n": 2, "sched": sched, "mask": mask, "pass": pas,
                      "comm": True, "comm_api": "batch_p2p",
                      "tasp_cycles": "0-1" if sched == "tasp" else None,
                      "B": 1, "H": 32, "D": 128, "tokens_per_gpu": c, "seq": 2 * c,
                      "ms": statistics.median(times), "ms_min": min(times),
                      "ms_max": max(times)}))
