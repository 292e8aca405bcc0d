#!/usr/bin/env python3
"""A decoder layer predicted against the calibration tool's measured layer.

Reads `--parts layer` records (calibration/h100x1-layer/layer-n1.jsonl: a
Llama layer as plain PyTorch runs it on one GPU; calibration/h200x2-layer:
Ulysses SP 2 and one GPU), runs tasp-sim at each record's shape with
`--scope layer --elementwise unfused` (the measured program's element-wise
recipe; `--precision bf16`: the measured layer's weights and their .grad
are bf16) and compares `step_ms` with the measured `ms`, the attention
part (`attention_ms`) with the measured attention op alone, and
`peak_mem_gib` with the measured peak: `peak_allocated` less what was
allocated before the pass besides the weights and the input (the
process's residue: cuBLAS's workspace, earlier passes' cache).  One GPU's
records (sp 1) run the ring scheduler on one SP rank (no SP
communication), with `--tp` as measured (Megatron TP with sequence
parallelism); Ulysses records run `--sched ulysses --sp 2`.

    scripts/validate_layer.py TOPOLOGY LAYER_JSONL [--sim build/tasp-sim]
        [--min-tokens 8192] [--summary]
"""
import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measured_gib(rec):
    """The pass's peak as the model counts it: weights, input, and what the
    pass allocated beyond what was there before it."""
    base = rec["weights_bytes"] + rec["input_bytes"]
    return (rec["peak_allocated"] - rec["allocated_before"] + base) / 2**30


def predict(sim, topo, rec):
    """tasp-sim's row for one layer record: (step_ms, attention_ms, confidence, peak GiB)."""
    sp = rec["sp"] if rec["sp_kind"] == "ulysses" else 1
    sched = "ulysses" if sp > 1 else "ring"
    cmd = [sim, "--topology", topo, "--model", rec["model"], "--scope", "layer",
           "--elementwise", "unfused", "--sched", sched, "--sp", str(sp), "--tp", str(rec["tp"]),
           "--seq", str(rec["seq"]), "--mask", "causal" if rec["causal"] else "full",
           "--pass", rec["pass"], "--precision", "bf16", "--csv", "-", "--quiet"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    row = next(csv.DictReader(io.StringIO(out)))
    return (float(row["step_ms"]), float(row["attention_ms"]), row["confidence"],
            float(row["peak_mem_gib"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topology")
    ap.add_argument("records")
    ap.add_argument("--sim", default=os.path.join(ROOT, "build", "tasp-sim"))
    ap.add_argument("--min-tokens", type=int, default=8192,
                    help="the summary's points: from this many tokens per GPU")
    ap.add_argument("--summary", action="store_true", help="the summary lines only")
    a = ap.parse_args()
    recs = [json.loads(line) for line in open(a.records)]
    attn_op = {(r["model"], r["tokens_per_gpu"], r["pass"]): r["ms"] for r in recs
               if r["part"] == "layer_op" and r["op"] == "attention"}
    rows = []
    for r in recs:
        if r["part"] != "layer":
            continue
        step, attn, conf, mem = predict(a.sim, a.topology, r)
        err = step / r["ms"] - 1
        measured_attn = attn_op.get((r["model"], r["tokens_per_gpu"], r["pass"]))
        mem_err = mem / measured_gib(r) - 1 if "peak_allocated" in r else None
        rows.append((r, step, err, attn, measured_attn, conf, mem, mem_err))
    if not a.summary:
        print("| model | TP | SP | tokens/GPU | pass | predicted ms | measured ms | error | "
              "attention predicted / alone measured | confidence | predicted GiB | "
              "measured GiB | memory error |")
        print("|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|")
        for r, step, err, attn, ma, conf, mem, merr in rows:
            share = f"{attn:.2f} / {ma:.2f}" if ma is not None and r["sp"] == 1 and r["tp"] == 1 else f"{attn:.2f} / -"
            mcols = (f"{mem:.2f} | {measured_gib(r):.2f} | {100 * merr:+.1f}%" if merr is not None
                     else f"{mem:.2f} | - | -")
            print(f"| {r['model']} | {r['tp']} | {r['sp']} | {r['tokens_per_gpu'] // 1024}K | {r['pass']} | "
                  f"{step:.2f} | {r['ms']:.2f} | {100 * err:+.1f}% | {share} | {conf} | {mcols} |")
    sel = [abs(x[2]) for x in rows if x[0]["tokens_per_gpu"] >= a.min_tokens]
    alls = [abs(x[2]) for x in rows]
    mems = [abs(x[7]) for x in rows if x[7] is not None and x[0]["tokens_per_gpu"] >= a.min_tokens]
    if not alls:
        sys.exit("validate_layer: no layer records to compare")
    print(f"layer: median |error| {100 * statistics.median(alls):.1f}% over {len(alls)} points, "
          f"max {100 * max(alls):.1f}%")
    if sel:
        print(f"from {a.min_tokens} tokens/GPU: median {100 * statistics.median(sel):.1f}% "
              f"max {100 * max(sel):.1f}% over {len(sel)} points")
    if mems:
        print(f"memory from {a.min_tokens} tokens/GPU: median {100 * statistics.median(mems):.1f}% "
              f"max {100 * max(mems):.1f}% over {len(mems)} points")


if __name__ == "__main__":
    main()
