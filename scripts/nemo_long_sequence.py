#!/usr/bin/env python3
"""NeMo's long-sequence table (Llama-2-7B on DGX-H100, FP8, context
parallelism from 32K to 1M tokens) beside tasp-sim's prediction of the
same configurations (docs/paper.md, "NeMo's long-sequence table").

usage: scripts/nemo_long_sequence.py [--sim build/tasp-sim] [--jobs N] [--commands]
       scripts/nemo_long_sequence.py --searched [DIR]

Reads docs/paper/nemo_long_sequence.csv (the published table, its source
in every row) and, for every row with context parallelism (CP > 1; NeMo's
rows below 32K have none and the 8K row uses pipeline parallelism, which
tasp-sim does not model), runs tasp-sim's whole training step of that
configuration: --scope model --model llama2-7b, TP / CP / DP as NeMo ran
them (placed TP innermost, then CP, then DP: Megatron's order), CP as
Megatron's p2p context parallelism with load-balanced (zigzag) chunks
(--sched zigzag), the global batch of the row (--global-batch-tokens:
GBS x seq, one sequence a micro-batch), Megatron's distributed optimizer
(--zero 1), no recomputation, the linear layers in FP8 (--precision fp8)
and, for the FP8 effect, in bf16 (--precision megatron).

tasp-sim simulates every GPU of the job and refuses plans over 1 GiB
(about 5 million tasks): NeMo's 512K and 1M rows (512 and 1,024 GPUs, 32
layers) are over it.  Such a row is simulated with its DP degree halved
until the plan fits, each replica keeping its micro-batches (the global
batch scaled by the same factor); its TFLOP/s per GPU are those of the
replicas simulated.  DP replicas run the same work and meet only in the
gradient reduction (overlapped with the last backward), so the step hardly
depends on DP: the table's last row checks it on the 256K row, DP 8
against DP 2.  The optimizer states are sharded over CP x DP (--zero 1),
so a reduced DP shows more memory per GPU than the real job holds.

TFLOP/s per GPU are counted as NeMo counts them (nemo/utils/flops_formulas.py
llama2, the same as Megatron-LM's num_floating_point_operations of that
time): per step GBS x s x L x h^2 x (12 + 12 g/a + 18 f/h + 12 s/h +
6 V/(L h)), i.e. 6 FLOPs per parameter of every linear layer and of the LM
head per token, and 12 s^2 h per layer and sequence for attention, the
full s x s square (a causal mask is not halved), over (step time x GPUs).
tasp-sim's own mfu column counts a causal attention half of that; the
table here uses NeMo's count for both sides.  The commands simulated
follow the table; --commands prints each row's command as NeMo ran it
(its own DP, which the 512K and 1M rows exceed tasp-sim's bound at), as a
markdown list.
Prints markdown; writes nothing.

--searched: for each row whose search was kept (DIR, default docs/search:
llama2-7b-*-<seq>-fp8.csv, `tasp-sim search ... --precision fp8 --csv`),
NVIDIA's layout and TFLOP/s beside the search's winner and the best of
zigzag (Megatron's p2p, what NeMo runs), in TFLOP/s per GPU as NeMo counts
them (the global batch is the row's in every configuration); reads the
CSVs only.
"""
import argparse
import concurrent.futures
import csv
import io
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "docs", "paper", "nemo_long_sequence.csv")
BUNDLED_NODES = (1, 2, 4, 8, 32)  # topologies/h100x8[xN].json


def nemo_flops(m, gbs, s):
    """Model FLOPs of one step as NeMo counts them (module doc)."""
    L, h, f, V = m["layers_total"], m["hidden"], m["ffn"], m["vocab"]
    g, a = m.get("kv_heads", m["heads"]), m["heads"]
    return gbs * s * L * h * h * (12 + 12 * g / a + 18 * f / h + 12 * s / h + 6 * V / (L * h))


def topology_args(gpus):
    nodes = gpus // 8
    if nodes in BUNDLED_NODES:
        return ["--topology", "h100x8" if nodes == 1 else f"h100x8x{nodes}"]
    return ["--topology", "h100x8x32", "--set", f"generator.nodes={nodes}"]


def command(row, precision, dp=None):
    """The tasp-sim command of a row, at DP dp (default the row's) with
    the micro-batches of a replica kept."""
    s = int(row["seq_k"]) * 1024
    dp = dp or int(row["dp"])
    gbt = int(row["global_batch"]) * s * dp // int(row["dp"])
    gpus = int(row["gpus"]) * dp // int(row["dp"])
    seq = f"{row['seq_k']}K" if int(row["seq_k"]) < 1024 else f"{int(row['seq_k']) // 1024}M"
    return (["build/tasp-sim", "--model", "llama2-7b", "--scope", "model"] +
            topology_args(gpus) +
            ["--tp", row["tp"], "--sp", row["cp"], "--dp", str(dp), "--seq", seq,
             "--global-batch-tokens", f"{gbt // (1 << 20)}M" if gbt % (1 << 20) == 0 else str(gbt),
             "--sched", "zigzag", "--pass", "fwdbwd", "--zero", "1", "--precision", precision])


def command_list(rows, dps):
    """The markdown list of the FP8 commands, each at its DP simulated."""
    out = []
    for r, dp in zip(rows, dps):
        seq = f"{r['seq_k']}K" if int(r["seq_k"]) < 1024 else "1M"
        out.append(f"- {seq}: `{' '.join(command(r, 'fp8', dp))}`")
    return "\n".join(out)


def run(sim, row, precision, dp=None):
    """(DP simulated, tasp-sim's CSV row) of a NeMo row: at its own DP, or
    (a plan over tasp-sim's bound) DP halved until it fits."""
    dp = dp or int(row["dp"])
    while True:
        cmd = command(row, precision, dp)
        p = subprocess.run([sim] + cmd[1:] + ["--csv", "-", "--quiet"], cwd=ROOT,
                           capture_output=True, text=True)
        if p.returncode == 2 and "a plan of about" in p.stderr and dp % 2 == 0:
            dp //= 2
            continue
        if p.returncode != 0:
            sys.exit(f"nemo_long_sequence: {' '.join(cmd)}: exit {p.returncode}: "
                     f"{p.stderr.strip()}")
        return dp, next(csv.DictReader(io.StringIO(p.stdout)))


def best_simulated(rows, scheduler=None):
    """The simulated configuration with the most tokens/s per GPU (of one
    scheduler), or None."""
    ok = [r for r in rows if r["status"] == "simulated" and
          (scheduler is None or r["scheduler"] == scheduler)]
    return max(ok, key=lambda r: float(r["tokens_per_s_per_gpu"]), default=None)


def layout(r):
    """A search row's configuration, as the search's winner line words it."""
    split = f" (split {r['split']})" if r.get("split", "0") not in ("", "0") else ""
    return (f"{r['scheduler']} TP {r['tp']} x SP {r['sp']}{split} x DP {r['dp']}, "
            f"ZeRO {r['zero']}, recompute {r['recompute']}")


def searched(m, table, directory):
    """Markdown: per NeMo row with a kept FP8 search, NVIDIA's layout beside
    the search's winner and zigzag's best (module doc)."""
    out = ["| seq | GPUs | NVIDIA: TP x CP x DP | NeMo TFLOP/s/GPU | NVIDIA's layout in the search "
           "(zigzag, ZeRO 1) | search's winner | TFLOP/s/GPU | zigzag's best (p2p) | TFLOP/s/GPU |",
           "|---|---:|---|---:|---|---|---:|---|---:|"]
    for r in table:
        seq = f"{r['seq_k']}K" if int(r["seq_k"]) < 1024 else "1M"
        files = sorted(f for f in os.listdir(directory)
                       if f.startswith("llama2-7b-") and f.endswith(f"-{seq}-fp8.csv"))
        if not files:
            continue
        rows = list(csv.DictReader(open(os.path.join(directory, files[0]))))
        s, gbs, gpus = int(r["seq_k"]) * 1024, int(r["global_batch"]), int(r["gpus"])
        tf = lambda x: nemo_flops(m, gbs, s) / (float(x["step_s"]) * gpus) / 1e12
        win, zz = best_simulated(rows), best_simulated(rows, "zigzag")
        # NVIDIA's own configuration as the search saw it: Megatron's p2p
        # CP, the distributed optimizer (ZeRO 1), TP innermost
        nv = [x for x in rows if x["scheduler"] == "zigzag" and x["tp"] == r["tp"] and
              x["sp"] == r["cp"] and x["dp"] == r["dp"] and x["zero"] == "1" and
              x["recompute"] == "none" and x.get("placement", "tp,sp,dp") == "tp,sp,dp"]
        theirs = "not enumerated" if not nv else (
            f"{tf(nv[0]):.0f}" if nv[0]["status"] == "simulated" else
            nv[0]["status"] + (f" ({nv[0]['class']})" if nv[0].get("class") else ""))
        out.append(f"| {seq} | {gpus} | {r['tp']} x {r['cp']} x {r['dp']} | "
                   f"{float(r['with_cp_tflops_per_gpu']):g} | {theirs} | {layout(win)} | {tf(win):.0f} | "
                   + (f"{layout(zz)} | {tf(zz):.0f} |" if zz else "- | - |"))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--jobs", type=int, default=2, help="tasp-sim processes at once")
    ap.add_argument("--commands", action="store_true", help="print the commands only")
    ap.add_argument("--searched", nargs="?", const=os.path.join(ROOT, "docs", "search"),
                    metavar="DIR", help="the kept FP8 searches beside NeMo's layouts")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(TABLE)) if int(r["cp"]) > 1 and int(r["pp"]) == 1]
    m = json.load(open(os.path.join(ROOT, "models", "llama2-7b.json")))
    m["layers_total"] = sum(x.get("count", 1) for x in m["layers"])
    if a.searched:
        print(searched(m, rows, a.searched))
        return
    # the DP check: the 256K row again at DP 2
    check = [dict(r, check="2") for r in rows if r["seq_k"] == "256"]
    if a.commands:
        print(command_list(rows, [int(r["dp"]) for r in rows]))
        return
    jobs = [(r, p) for r in rows for p in ("fp8", "megatron")] + [(r, "fp8") for r in check]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(a.jobs, 1)) as ex:
        out = list(ex.map(lambda j: run(a.sim, j[0], j[1], int(j[0].get("check", 0))), jobs))
    got = {(id(r), p): o for (r, p), o in zip(jobs, out)}
    print("| seq | GPUs | TP x CP x DP | GBS | NeMo TFLOP/s/GPU | tasp-sim FP8 | ratio | "
          "tasp-sim bf16 | FP8 step s | attention | exposed comm | FP8, exposed comm hidden | "
          "NeMo's attention if the rest is as predicted | GiB/GPU | fits |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows + check:
        s = int(r["seq_k"]) * 1024
        gpus, gbs = int(r["gpus"]), int(r["global_batch"])
        dp, fp8 = got[(id(r), "fp8")]
        bf16 = got.get((id(r), "megatron"), (dp, None))[1]
        # the replicas simulated: TFLOP/s per GPU of their GPUs and sequences
        f = nemo_flops(m, gbs * dp // int(r["dp"]), s)
        sim_gpus = gpus * dp // int(r["dp"])
        t8 = float(fp8["step_ms"]) / 1e3
        tf8 = f / (t8 * sim_gpus) / 1e12
        tf16 = f"{f / (float(bf16['step_ms']) / 1e3 * sim_gpus) / 1e12:.0f}" if bf16 else "-"
        nemo = float(r["with_cp_tflops_per_gpu"])
        # NeMo's step (its FLOPs over its rate), less the predicted step's
        # part outside attention: the attention time NeMo's figure leaves,
        # as a speed relative to the predicted attention
        attn = float(fp8["attention_ms"]) / 1e3
        # the step were its exposed communication hidden (the upper bound of
        # overlapping it, which tasp-sim does not model for TP collectives)
        hidden = f / ((t8 - float(fp8["exposed_comm_ms"]) / 1e3) * sim_gpus) / 1e12
        left = f / (nemo * 1e12 * sim_gpus) - (t8 - attn)
        seq = f"{r['seq_k']}K" if int(r["seq_k"]) < 1024 else "1M"
        dps = r["dp"] if dp == int(r["dp"]) else f"{r['dp']} (DP {dp} simulated)"
        if "check" in r:
            seq += ", check"
        print(f"| {seq} | {gpus} | {r['tp']} x {r['cp']} x {dps} | {gbs} | {nemo:g} | "
              f"{tf8:.0f} | {tf8 / nemo:.2f} | {tf16} | {t8:.2f} | "
              f"{float(fp8['attention_ms']) / float(fp8['step_ms']):.0%} | "
              f"{float(fp8['exposed_comm_ms']) / float(fp8['step_ms']):.0%} | {hidden:.0f} | "
              f"{attn / left:.2f}x | "
              f"{float(fp8['peak_mem_gib']):.1f} | {fp8['fits']} |")
    print("\nThe commands simulated (`--precision megatron` for the bf16 column):\n")
    print(command_list(rows, [got[(id(r), "fp8")][0] for r in rows]))


if __name__ == "__main__":
    main()
