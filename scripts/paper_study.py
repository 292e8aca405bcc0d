#!/usr/bin/env python3
"""The TASP paper's settings in tasp-sim: speedup of TASP over Ring and
Zigzag-Ring against the compute-to-communication ratio.

usage: scripts/paper_study.py [--sim build/tasp-sim] [--out docs/paper/study.csv]
       scripts/paper_study.py --grid [--sim build/tasp-sim] [--jobs N]
                              [--out docs/paper/grid.csv] [--doc docs/paper.md]
       scripts/paper_study.py --print summary|overlap|grid|lasp2-step|code-n4|code-n4-parts
                              [--sim build/tasp-sim]

--grid runs the paper's own benchmark grid instead (scripts/paper_grid.py:
every platform of the paper, batch x heads x sequence as its test scripts
sweep them) and writes its table into docs/paper.md between the
paper-grid markers (--doc '' leaves the doc alone).

--print prints one of the markdown tables of docs/paper.md and writes no
file: the commands of its generated blocks (scripts/docs_tables.py).
code-n4 and code-n4-parts: the paper's own programs measured at n = 4 beside
the model (scripts/paper_code_n4.py, calibration/h100x4-tasp-code).

Platforms: H100 nodes of 8 (1, 2 and 4 nodes; the multi-node ones also
with tasp-mkm, the (m-K_m-m)^u decomposition) and one MI300X node of 8.
Shapes: the paper's code (batch 2, 16 heads, head dim 64, MHA) and
Llama-3-8B (batch 1, 32 heads, 8 KV heads, head dim 128).  Sequences 4K to
1M, causal and full, forward.  Every point is simulated twice: whole
(compute and communication) and communication only (--no-compute, the
paper's communication-efficiency comparison).

The CSV has one row per point and scheduler; ratio is Ring's compute time
over its communication time at that point (> 1: compute could hide the
communication).  Prints the summary tables of docs/paper.md.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import tempfile

PLATFORMS = [
    ("H100 1x8", "h100x8", 8, "ring,zigzag,tasp"),
    ("H100 2x8", "h100x8x2", 16, "ring,zigzag,tasp,tasp-mkm"),
    ("H100 4x8", "h100x8x4", 32, "ring,zigzag,tasp,tasp-mkm"),
    ("MI300X 1x8", "mi300x8", 8, "ring,zigzag,tasp"),
]
SHAPES = [("paper", 2, 16, 16, 64), ("llama", 1, 32, 8, 128)]
SEQS = ",".join(f"{4 << i}K" for i in range(9))  # 4K .. 1M


def run(sim, topo, sp, scheds, shape, mask, comm_only):
    _, b, h, kv, d = shape
    args = [sim, "--topology", topo, "--sp", str(sp), "--sched", scheds, "--seq", SEQS,
            "--batch", str(b), "--heads", str(h), "--kv-heads", str(kv), "--head-dim", str(d),
            "--mask", mask, "--pass", "fwd", "--csv", "-", "--quiet"]
    if comm_only:
        args.append("--no-compute")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(out)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--out", default=None, help="CSV (default docs/paper/study.csv, "
                    "with --grid docs/paper/grid.csv)")
    ap.add_argument("--grid", action="store_true", help="the paper's own benchmark grid")
    ap.add_argument("--jobs", type=int, default=0, help="tasp-sim threads (default: one per CPU)")
    ap.add_argument("--doc", default="docs/paper.md", help="with --grid: doc to update")
    ap.add_argument("--print", choices=("summary", "overlap", "grid", "lasp2-step", "code-n4",
                                        "code-n4-parts"), dest="table",
                    help="print only this table of docs/paper.md; write nothing")
    a = ap.parse_args()
    if a.table in ("code-n4", "code-n4-parts"):
        import paper_code_n4
        paper_code_n4.main(["--sim", a.sim, "--table",
                            "passes" if a.table == "code-n4" else "parts"])
        return
    if a.table == "grid":
        import paper_grid
        rows = []
        for p in paper_grid.PLATFORMS:
            rows += paper_grid.speedups(p, paper_grid.run(a.sim, p, a.jobs)[0])
        print(paper_grid.table(rows))
        return
    if a.table == "overlap":
        no_overlap(a.sim)
        return
    if a.table == "lasp2-step":
        lasp2_step(a.sim)
        return
    if a.grid:
        import paper_grid
        paper_grid.main(a.sim, a.out or "docs/paper/grid.csv", a.doc, a.jobs)
        return
    a.out = a.out or "docs/paper/study.csv"
    rows = study(a.sim)
    if a.table == "summary":
        summary(rows)
        return
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    print(f"paper_study: {len(rows)} rows -> {a.out}\n")
    summary(rows)
    print()
    no_overlap(a.sim)


def study(sim):
    """One row per point and scheduler of every platform, shape and mask."""
    rows = []
    for label, topo, sp, scheds in PLATFORMS:
        for shape in SHAPES:
            for mask in ("causal", "full"):
                whole = run(sim, topo, sp, scheds, shape, mask, False)
                comm = run(sim, topo, sp, scheds, shape, mask, True)
                comm_ms = {(r["scheduler"], r["seq_len"]): float(r["step_ms"]) for r in comm}
                by = {(r["scheduler"], r["seq_len"]): r for r in whole}
                for r in whole:
                    ring = by[("ring", r["seq_len"])]
                    zig = by[("zigzag", r["seq_len"])]
                    step = float(r["step_ms"])
                    rows.append({
                        "platform": label, "topology": topo, "gpus": sp, "shape": shape[0],
                        "mask": mask, "seq": int(r["seq_len"]), "sched": r["scheduler"],
                        "step_ms": step,
                        "ratio": float(ring["compute_ms"]) / float(ring["comm_ms"]),
                        "speedup_vs_ring": float(ring["step_ms"]) / step,
                        "speedup_vs_zigzag": float(zig["step_ms"]) / step,
                        "comm_only_ms": comm_ms[(r["scheduler"], r["seq_len"])],
                        "comm_speedup_vs_ring":
                            comm_ms[("ring", r["seq_len"])] / comm_ms[(r["scheduler"],
                                                                       r["seq_len"])],
                    })
    return rows


def summary(rows):
    print("| platform | shape | mask | best vs Ring (seq, ratio) | best vs Zigzag (seq, ratio) "
          "| comm-only vs Ring (best) | largest ratio with >= 5% over Zigzag |")
    print("|---|---|---|---|---|---|---|")
    keys = sorted({(r["platform"], r["shape"], r["mask"]) for r in rows},
                  key=lambda k: ([p[0] for p in PLATFORMS].index(k[0]), k[1], k[2]))
    for plat, shape, mask in keys:
        for sched in ("tasp", "tasp-mkm"):
            pts = [r for r in rows if (r["platform"], r["shape"], r["mask"], r["sched"]) ==
                   (plat, shape, mask, sched)]
            if not pts:
                continue
            best = max(pts, key=lambda r: r["speedup_vs_ring"])
            bz = max(pts, key=lambda r: r["speedup_vs_zigzag"])
            bc = max(pts, key=lambda r: r["comm_speedup_vs_ring"])
            gain = [r["ratio"] for r in pts if r["speedup_vs_zigzag"] >= 1.05]
            edge = f"{max(gain):.2f}" if gain else "none"
            name = "" if sched == "tasp" else " (mkm)"
            print(f"| {plat}{name} | {shape} | {mask} | {best['speedup_vs_ring']:.2f}x "
                  f"({best['seq'] // 1024}K, {best['ratio']:.2f}) | "
                  f"{bz['speedup_vs_zigzag']:.2f}x ({bz['seq'] // 1024}K, {bz['ratio']:.2f}) | "
                  f"{bc['comm_speedup_vs_ring']:.2f}x ({bc['seq'] // 1024}K) | {edge} |")


# LASP-2 (arXiv 2502.07563), whole training step of Linear-Llama3-1B on 64
# A100: how much faster LASP-2 is than each method (Fig. 3, sec. 4.2), and
# LASP-2's step in seconds (Table 6: 245,353 tokens/s at 512K; 2048K, OOM
# there, extrapolated linearly from 512K and 1024K: about 2.84 s).
LASP2_FASTER_PCT = {(512, "lasp"): 7.3, (512, "ring"): 17.8,
                    (2048, "lasp"): 15.2, (2048, "ring"): 36.6}
LASP2_STEP_S = {512: 2.14, 2048: 2.84}


def lasp2_step(sim):
    """The paper's whole-step claims beside the model's: the model's
    attention difference (all 16 layers, scenarios/lasp2.json) added to
    the paper's LASP-2 step."""
    scen = os.path.join(os.path.dirname(__file__), "..", "scenarios", "lasp2.json")
    out = subprocess.run([sim, scen, "--seq", "512K,2M", "--csv", "-",
                          "--quiet"], check=True, capture_output=True, text=True).stdout
    ms = {(int(r["seq_len"]) >> 10, r["scheduler"]): float(r["step_ms"])
          for r in csv.DictReader(io.StringIO(out))}
    print("| seq | method | paper: LASP-2 faster by | paper: extra s per step "
          "| model: extra s per step | model: LASP-2 faster by |")
    print("|---|---|---:|---:|---:|---:|")
    for (seq, method), pct in LASP2_FASTER_PCT.items():
        step = LASP2_STEP_S[seq]
        extra = (ms[(seq, method)] - ms[(seq, "lasp2")]) / 1000
        print(f"| {seq}K | {method} | {pct:.1f}% | {step * pct / 100:.2f} | {extra:.2f} | "
              f"{100 * extra / step:.1f}% |")


def no_overlap(sim):
    """TASP over Ring (paper shape, full mask) with the ideal overlap of the
    bundled topologies and with none (kernel_blocks_comm, as measured on
    H200 with PyTorch flash attention and NCCL)."""
    seqs = [16, 32, 64, 128, 256, 512]
    print("| platform | sched | overlap | " + " | ".join(f"{s}K" for s in seqs) + " |")
    print("|---|---|---|" + "---:|" * len(seqs))
    for label, topo, sp, scheds in PLATFORMS[1:]:
        with open(os.path.join(os.path.dirname(__file__), "..", "topologies", topo + ".json")) as f:
            t = json.load(f)
        for blocks in (False, True):
            t["comm"]["kernel_blocks_comm"] = blocks
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump(t, f)
            try:
                out = subprocess.run(
                    [sim, "--topology", f.name, "--sp", str(sp), "--sched", scheds,
                     "--seq", ",".join(f"{s}K" for s in seqs), "--batch", "2", "--heads", "16",
                     "--kv-heads", "16", "--head-dim", "64", "--mask", "full", "--csv", "-",
                     "--quiet"], check=True, capture_output=True, text=True).stdout
            finally:
                os.unlink(f.name)
            res = list(csv.DictReader(io.StringIO(out)))
            for sched in scheds.split(",")[2:]:
                sp_ = [float(r["speedup_vs_ring"]) for r in res if r["scheduler"] == sched]
                print(f"| {label} | {sched} | {'none' if blocks else 'ideal'} | " +
                      " | ".join(f"{x:.2f}x" for x in sp_) + " |")


if __name__ == "__main__":
    main()
