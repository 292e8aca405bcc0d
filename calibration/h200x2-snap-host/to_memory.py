"""memory-n2.jsonl from the untraced passes of snapshots-r{0,1}.jsonl.gz, in
the calibration tool's memory record format (calibrate.py memory_records),
for scripts/validate_memory.py.
    python3 calibration/h200x2-snap-host/to_memory.py"""
import gzip, json, os

D = os.path.dirname(os.path.abspath(__file__))
recs = {}
for rank in (0, 1):
    with gzip.open(os.path.join(D, f"snapshots-r{rank}.jsonl.gz"), "rt") as f:
        for line in f:
            x = json.loads(line)
            if not x["traced"]:
                recs.setdefault((x["sched"], x["mask"], x["tokens_per_gpu"], x["pass"]), {})[rank] = x
B, H, Dh = 1, 32, 128
with open(os.path.join(D, "memory-n2.jsonl"), "w") as out:
    for (sched, mask, c, pas), by_rank in recs.items():
        x = B * c * H * Dh * 2
        inputs = {"fwd": 3 * x, "fwdbwd": 4 * x, "bwd": 5 * x + B * H * c * 4}[pas]
        rec = {"part": "memory", "attention": "softmax", "n": 2, "sched": sched, "mask": mask,
               "pass": pas, "comm": True, "comm_api": "batch_p2p", "B": B, "H": H, "D": Dh,
               "tokens_per_gpu": c, "seq": 2 * c, "inputs_bytes": inputs}
        for k in ("allocated_before", "peak_allocated", "reserved_before", "peak_reserved"):
            rec[k] = [by_rank[r][k] for r in (0, 1)]
        out.write(json.dumps(rec) + "\n")
