#!/usr/bin/env python3
"""Plots of scripts/paper_study.py's CSV (needs matplotlib: on Debian,
apt install python3-matplotlib, then run with /usr/bin/python3).

usage: scripts/plot_paper.py [docs/paper/study.csv] [--out docs/paper]

Writes speedup_vs_ratio.png (TASP's whole-pass speedup against the
compute-to-communication ratio, one panel per platform) and
comm_speedup.png (communication-only speedup over Ring against sequence
length).
"""
import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PLATFORMS = ["H100 1x8", "H100 2x8", "H100 4x8", "MI300X 1x8"]
STYLE = {("tasp", "full"): ("tab:blue", "o", "TASP vs Ring, full"),
         ("tasp", "causal"): ("tab:orange", "s", "TASP vs Zigzag, causal"),
         ("tasp-mkm", "full"): ("tab:green", "^", "TASP-mkm vs Ring, full"),
         ("tasp-mkm", "causal"): ("tab:red", "v", "TASP-mkm vs Zigzag, causal")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default="docs/paper/study.csv")
    ap.add_argument("--out", default="docs/paper")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    for r in rows:
        for k in ("ratio", "speedup_vs_ring", "speedup_vs_zigzag", "comm_speedup_vs_ring"):
            r[k] = float(r[k])
        r["seq"] = int(r["seq"])

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharey=True)
    for ax, plat in zip(axes.flat, PLATFORMS):
        for (sched, mask), (color, marker, label) in STYLE.items():
            for shape, fill in (("paper", color), ("llama", "none")):
                pts = sorted((r for r in rows if (r["platform"], r["sched"], r["mask"],
                                                  r["shape"]) == (plat, sched, mask, shape)),
                             key=lambda r: r["seq"])  # the line follows the sequence length
                if not pts:
                    continue
                y = [r["speedup_vs_ring"] if mask == "full" else r["speedup_vs_zigzag"]
                     for r in pts]
                ax.plot([r["ratio"] for r in pts], y, color=color, marker=marker,
                        markerfacecolor=fill, linewidth=1,
                        label=f"{label} ({'paper shape' if shape == 'paper' else 'Llama'})")
        ax.axvline(1.5, color="grey", linestyle=":", linewidth=1)
        ax.axhline(1.0, color="black", linewidth=0.5)
        ax.set_xscale("log")
        ax.set_title(plat)
        ax.set_xlabel("Ring's compute / communication time")
        ax.set_ylabel("speedup")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[1].legend(fontsize=7, loc="upper right")
    fig.suptitle("tasp-sim: TASP's whole-pass speedup against the compute-to-communication "
                 "ratio\n(filled: batch 2, 16 heads, dim 64; hollow: Llama-3-8B; "
                 "dotted: ratio 1.5)")
    fig.tight_layout()
    os.makedirs(a.out, exist_ok=True)
    fig.savefig(os.path.join(a.out, "speedup_vs_ratio.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(8, 5))
    colors = dict(zip(PLATFORMS, ["tab:blue", "tab:orange", "tab:green", "tab:red"]))
    for plat in PLATFORMS:
        for sched, ls in (("tasp", "-"), ("tasp-mkm", "--")):
            pts = sorted((r for r in rows if (r["platform"], r["sched"], r["mask"], r["shape"]) ==
                          (plat, sched, "full", "paper")), key=lambda r: r["seq"])
            if pts:
                ax.plot([r["seq"] for r in pts], [r["comm_speedup_vs_ring"] for r in pts],
                        color=colors[plat], linestyle=ls, marker="o", markersize=3,
                        label=f"{plat} {sched}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("communication-only speedup over Ring")
    ax.set_title("tasp-sim: communication time, Ring / TASP (--no-compute; paper shape, full)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "comm_speedup.png"), dpi=110)
    print(f"plot_paper: wrote {a.out}/speedup_vs_ratio.png and {a.out}/comm_speedup.png")


if __name__ == "__main__":
    main()
