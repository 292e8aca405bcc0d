#!/usr/bin/env python3
"""The TASP paper's own benchmark grid: its definition, its expansion into
simulator runs, and the per-platform, per-mask speedup table of
docs/paper.md ("The paper's own grid").

usage: scripts/paper_study.py --grid [--sim build/tasp-sim] [--jobs N]
       [--out docs/paper/grid.csv] [--doc docs/paper.md]

The grid is the one infinigence/HamiltonAttention's test scripts sweep
(*/test_hamilton_attention.py, `if __name__ == "__main__"`):

- seqlen = k x basic_len, k in {1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96,
  128}; basic_len 3360 on H100-1 and MI300X-1, 3840 on H100-2, 7936 on
  H100-4 (multiples of n(n-1) and of the (m-K_m-m)^u chunking);
- batch in the same thirteen values, a point kept only when
  seqlen x batch <= max_len = 10,000,000;
- nheads 20, 4 or 12 (the list pairs them with d = 128, 512, 192, but
  prof_perform sets d = 64 whatever it is given), MHA, bf16, forward;
- full mask by default (causal = False); the causal variant compares
  K_n-TASP with Zigzag-Ring. H100-2 and H100-4 run with two_nodes = True:
  the (m-K_m-m)^u decomposition (tasp-sim's tasp-mkm), which the scripts
  only allow with the full mask.

A scenario file holds one batch and one head count, so each platform's
scenarios/paper-*.json carries the sequence sweep, mask, pass, SP degree
and schedulers, and this module applies the batch and head axes and the
token cap through tasp-sim's --batch, --heads, --kv-heads and --seq.
"""
import csv
import io
import json
import os
import statistics
import subprocess
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# infinigence/HamiltonAttention, */test_hamilton_attention.py: seqlens, bs,
# nheads_d, max_len (identical in the four scripts)
KS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
BATCHES = KS
HEADS = (20, 4, 12)
HEAD_DIM = 64  # prof_perform: d = 64
MAX_TOKENS = 10_000_000


class Platform:
    def __init__(self, label, scenario, topology, gpus, unit, paper_tasp):
        self.label = label          # as in the paper's code directories
        self.scenario = scenario    # scenarios/<name>.json
        self.topology = topology
        self.gpus = gpus
        self.unit = unit            # basic_len of its test script
        self.paper_tasp = paper_tasp  # mask -> the scheduler the code runs as TASP


PLATFORMS = (
    Platform("H100-1", "paper-h100x8", "h100x8", 8, 3360, {"full": "tasp", "causal": "tasp"}),
    Platform("H100-2", "paper-h100x8x2", "h100x8x2", 16, 3840,
             {"full": "tasp-mkm", "causal": "tasp"}),
    Platform("H100-4", "paper-h100x8x4", "h100x8x4", 32, 7936,
             {"full": "tasp-mkm", "causal": "tasp"}),
    Platform("MI300X-1", "paper-mi300x8", "mi300x8", 8, 3360, {"full": "tasp", "causal": "tasp"}),
)

# What the paper reports, average and maximum whole-pass speedup of TASP
# over the mask's baseline (Ring for full, Zigzag-Ring for causal), as
# given by a public digest of arXiv 2509.26541 ("193: TASP - Topology-Aware
# Multi-Ring AllGather via Hamiltonian Decomposition", 2026-02-15); the
# paper's own tables could not be read here.  None: not reported.  Multi-node
# figures are averages for the full mask, per decomposition.
PAPER = {
    ("H100-1", "full", "tasp"): (1.05, 2.31),
    ("H100-1", "causal", "tasp"): (1.08, 2.25),
    ("MI300X-1", "full", "tasp"): (1.57, 3.58),
    ("MI300X-1", "causal", "tasp"): (1.68, 3.58),
    ("H100-2", "full", "tasp"): (1.43, None),
    ("H100-2", "full", "tasp-mkm"): (1.20, None),
    ("H100-4", "full", "tasp"): (1.27, None),
    ("H100-4", "full", "tasp-mkm"): (1.20, None),
}

MASKS = ("full", "causal")
# the generated block of docs/paper.md (scripts/docs_tables.py regenerates it
# too, and writes it as write_doc does: the command, then the table)
COMMAND = "python3 scripts/paper_study.py --print grid"
BEGIN, END = f"<!-- generated: {COMMAND} -->", "<!-- end -->"


def points(unit):
    """The grid's (seq, batch, heads) points for a platform, in the
    scripts' loop order (k, batch, heads; largest first)."""
    out = []
    for k in sorted(KS, reverse=True):
        for b in sorted(BATCHES, reverse=True):
            for h in HEADS:
                if k * unit * b <= MAX_TOKENS:
                    out.append((k * unit, b, h))
    return out


def load_scenario(p):
    path = os.path.join(ROOT, "scenarios", p.scenario + ".json")
    with open(path) as f:
        s = json.load(f)
    return path, s


def check_scenario(p):
    """The scenario file must hold what the grid assumes; a clear error
    otherwise (the run would silently simulate another grid)."""
    path, s = load_scenario(p)
    want = {
        "seq_len": [k * p.unit for k in KS],
        "sp": [p.gpus],
        "pass": "fwd",
        "mask": list(MASKS),
        "topology": f"../topologies/{p.topology}.json",
    }
    m = s.get("model", {})
    for key, v in want.items():
        if s.get(key) != v:
            raise SystemExit(f"{path}: field '{key}': expected {v!r}, got {s.get(key)!r}")
    for key, v in (("head_dim", HEAD_DIM), ("dtype", "bf16")):
        if m.get(key) != v:
            raise SystemExit(f"{path}: field 'model.{key}': expected {v!r}, got {m.get(key)!r}")
    if m.get("kv_heads") != m.get("heads"):
        raise SystemExit(f"{path}: field 'model.kv_heads': expected MHA (= model.heads)")
    for sched in set(p.paper_tasp.values()) | {"ring", "zigzag"}:
        if sched not in s.get("schedulers", []):
            raise SystemExit(f"{path}: field 'schedulers': expected {sched} among them")
    return path, s


def run(sim, p, jobs=0):
    """Simulate the platform's whole grid: one tasp-sim call per (batch,
    heads), over the sequences the token cap leaves.  Returns the CSV rows
    of tasp-sim and the wall time in seconds."""
    path, _ = check_scenario(p)
    by_shape = {}
    for seq, b, h in points(p.unit):
        by_shape.setdefault((b, h), []).append(seq)
    rows = []
    t0 = time.monotonic()
    for (b, h), seqs in sorted(by_shape.items()):
        args = [sim, path, "--batch", str(b), "--heads", str(h), "--kv-heads", str(h),
                "--seq", ",".join(str(x) for x in sorted(seqs)), "--csv", "-", "--quiet"]
        if jobs:
            args += ["--jobs", str(jobs)]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        rows += list(csv.DictReader(io.StringIO(out)))
    return rows, time.monotonic() - t0


def speedups(p, rows):
    """Per point and scheduler: speedup over Ring and over Zigzag, and
    Ring's compute-to-communication ratio."""
    key = lambda r: (int(r["seq_len"]), int(r["batch"]), int(r["heads"]), r["mask"])
    base = {}
    for r in rows:
        if r["scheduler"] in ("ring", "zigzag"):
            base[key(r) + (r["scheduler"],)] = r
    out = []
    for r in rows:
        ring, zig = base[key(r) + ("ring",)], base[key(r) + ("zigzag",)]
        step = float(r["step_ms"])
        out.append({
            "platform": p.label, "topology": p.topology, "gpus": p.gpus,
            "mask": r["mask"], "seq": int(r["seq_len"]), "batch": int(r["batch"]),
            "heads": int(r["heads"]), "sched": r["scheduler"], "step_ms": step,
            "ratio": float(ring["compute_ms"]) / float(ring["comm_ms"]),
            "speedup_vs_ring": float(ring["step_ms"]) / step,
            "speedup_vs_zigzag": float(zig["step_ms"]) / step,
        })
    return out


def fmt_paper(v):
    if v is None:
        return "-"
    avg, mx = v
    return f"{avg:.2f}x / {mx:.2f}x" if mx else f"{avg:.2f}x / -"


def table(rows):
    """Markdown: per platform, mask and TASP variant, the average (mean over
    the grid's points) and maximum speedup over Ring and over Zigzag, next to
    the paper's figures."""
    lines = [
        "| platform | mask | TASP | points | vs Ring avg / max | vs Zigzag avg / max "
        "| max at (seq, batch, heads) | ratio < 1 | paper avg / max (baseline) |",
        "|---|---|---|---:|---|---|---|---:|---|",
    ]
    for p in PLATFORMS:
        for mask in MASKS:
            scheds = [s for s in ("tasp", "tasp-mkm") if any(
                r["platform"] == p.label and r["sched"] == s for r in rows)]
            for sched in scheds:
                pts = [r for r in rows if (r["platform"], r["mask"], r["sched"]) ==
                       (p.label, mask, sched)]
                if not pts:
                    continue
                ring = [r["speedup_vs_ring"] for r in pts]
                zig = [r["speedup_vs_zigzag"] for r in pts]
                base = "Ring" if mask == "full" else "Zigzag"
                best = max(pts, key=lambda r: r["speedup_vs_ring" if mask == "full"
                                                else "speedup_vs_zigzag"])
                low = sum(r["ratio"] < 1 for r in pts)
                ran = " (code's)" if p.paper_tasp[mask] == sched else ""
                paper = PAPER.get((p.label, mask, sched))
                lines.append(
                    f"| {p.label} | {mask} | {sched}{ran} | {len(pts)} | "
                    f"{statistics.fmean(ring):.2f}x / {max(ring):.2f}x | "
                    f"{statistics.fmean(zig):.2f}x / {max(zig):.2f}x | "
                    f"{best['seq']}, {best['batch']}, {best['heads']} | "
                    f"{low} | {fmt_paper(paper)}{' (' + base + ')' if paper else ''} |")
    return "\n".join(lines)


def write_doc(doc, text):
    """Put the table between the markers of docs/paper.md."""
    with open(doc) as f:
        body = f.read()
    if BEGIN not in body or END not in body:
        raise SystemExit(f"{doc}: expected the markers {BEGIN} and {END}")
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(doc, "w") as f:
        f.write(head + BEGIN + "\n`" + COMMAND + "`\n\n" + text + "\n" + END + tail)


def main(sim, out, doc, jobs):
    rows = []
    for p in PLATFORMS:
        got, wall = run(sim, p, jobs)
        n = len(points(p.unit))
        print(f"paper_grid: {p.label}: {n} shapes x {len(MASKS)} masks, {len(got)} rows, "
              f"simulated in {wall:.2f} s")
        rows += speedups(p, got)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})
    text = table(rows)
    print(f"paper_grid: {len(rows)} rows -> {out}\n\n{text}")
    if doc:
        write_doc(doc, text)
        print(f"\npaper_grid: table written into {doc}")
