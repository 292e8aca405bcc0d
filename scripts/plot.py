#!/usr/bin/env python3
"""Plots of a tasp-sim CSV (build/tasp-sim ... --csv out.csv):

  step_time.png  step time against sequence length, a line per scheduler,
                 a panel per SP degree and mask (and pass, if several)
  speedup.png    speedup over ring as a heatmap of sequence length x SP
                 degree, a panel per scheduler (and mask and pass)
  breakdown.png  per point, a bar per scheduler split into compute (of the
                 GPU that finishes last), exposed communication and load
                 imbalance, which add up to the step time

Usage: python3 scripts/plot.py CSV [--out DIR]   (DIR defaults to the CSV's)
       python3 scripts/plot.py --check              (exit 0 when it can draw)
Needs matplotlib (Debian: python3-matplotlib, which scripts/setup.sh
installs).  Debian's package serves /usr/bin/python3 only; where the
python3 that runs this script is another one (a pyenv, a venv) without
matplotlib, the script runs itself again under /usr/bin/python3.
Rows that did not run (no number in step_ms) are left out of the plots."""
import argparse
import csv
import os
import sys

# the interpreter Debian's python3-matplotlib installs for (scripts/setup.sh)
SYSTEM_PYTHON = "/usr/bin/python3"
# set on the second run: the interpreter that lacked matplotlib first
REEXEC = "TASP_PLOT_FIRST_PYTHON"


def import_matplotlib():
    """matplotlib's pyplot on the Agg backend; where this interpreter has
    no matplotlib, the same command again under SYSTEM_PYTHON, once."""
    try:
        import matplotlib
    except ImportError:
        first = os.environ.get(REEXEC)
        # by path, not by the binary: a venv's python3 is a link to the
        # system's binary, without its packages
        if first is None and os.path.isfile(SYSTEM_PYTHON) and sys.executable != SYSTEM_PYTHON:
            env = dict(os.environ, **{REEXEC: sys.executable})
            os.execve(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:],
                      env)
        tried = [first] if first else []
        tried.append(sys.executable)
        sys.exit(f"plot.py: matplotlib is not installed for {' nor for '.join(tried)}: "
                 f"run scripts/setup.sh (Debian: apt-get install python3-matplotlib, for "
                 f"{SYSTEM_PYTHON}) or pip install matplotlib for the python3 you run")
    matplotlib.use("Agg")
    import matplotlib.pyplot
    return matplotlib.pyplot


plt = None  # pyplot, once main() has found it


def fmt_seq(n):
    n = int(n)
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def ordered(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def panels(n):
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(5 * cols, 8), 3.8 * rows + 0.6), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def step_time(rows, out):
    keys = ordered((r["gpus"], r["mask"], r["pass"]) for r in rows)
    passes = {k[2] for k in keys}
    fig, axes = panels(len(keys))
    for ax, (sp, mask, pas) in zip(axes, keys):
        sub = [r for r in rows if (r["gpus"], r["mask"], r["pass"]) == (sp, mask, pas)]
        for s in ordered(r["scheduler"] for r in sub):
            pts = sorted((int(r["seq_len"]), float(r["step_ms"])) for r in sub if r["scheduler"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        seqs = sorted({int(r["seq_len"]) for r in sub})
        ax.set_xticks(seqs)
        ax.set_xticklabels([fmt_seq(q) for q in seqs])
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel("step time (ms)")
        ax.set_title(f"SP {sp}, {mask}" + (f", {pas}" if len(passes) > 1 else ""))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"{rows[0]['topology']}: step time per scheduler")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "step_time.png"), dpi=110)
    plt.close(fig)


def speedup(rows, out):
    keys = ordered((r["scheduler"], r["mask"], r["pass"]) for r in rows if r["scheduler"] != "ring")
    if not keys:
        return
    fig, axes = panels(len(keys))
    for ax, (s, mask, pas) in zip(axes, keys):
        sub = [r for r in rows if (r["scheduler"], r["mask"], r["pass"]) == (s, mask, pas)]
        seqs = sorted({int(r["seq_len"]) for r in sub})
        sps = sorted({int(r["gpus"]) for r in sub})
        grid = [[float("nan")] * len(seqs) for _ in sps]
        for r in sub:
            grid[sps.index(int(r["gpus"]))][seqs.index(int(r["seq_len"]))] = float(r["speedup_vs_ring"] or "nan")
        im = ax.imshow(grid, cmap="RdYlGn", vmin=0.5, vmax=2.0, aspect="auto", origin="lower")
        for i in range(len(sps)):
            for j in range(len(seqs)):
                if grid[i][j] == grid[i][j]:
                    ax.text(j, i, f"{grid[i][j]:.2f}x", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(seqs)))
        ax.set_xticklabels([fmt_seq(q) for q in seqs])
        ax.set_yticks(range(len(sps)))
        ax.set_yticklabels([str(p) for p in sps])
        ax.set_xlabel("sequence length")
        ax.set_ylabel("SP degree")
        ax.set_title(f"{s} vs ring, {mask}, {pas}")
        fig.colorbar(im, ax=ax, label="speedup over ring")
    fig.suptitle(f"{rows[0]['topology']}: speedup over ring (green: faster)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "speedup.png"), dpi=110)
    plt.close(fig)


def breakdown(rows, out):
    keys = ordered((r["gpus"], r["mask"], r["pass"]) for r in rows)
    passes = {k[2] for k in keys}
    scheds = ordered(r["scheduler"] for r in rows)
    colors = ["#4c72b0", "#dd8452", "#c44e52"]
    names = ["compute (GPU finishing last)", "exposed communication", "load imbalance"]
    fig, axes = panels(len(keys))
    width = 0.8 / len(scheds)
    for ax, key in zip(axes, keys):
        sub = [r for r in rows if (r["gpus"], r["mask"], r["pass"]) == key]
        seqs = sorted({int(r["seq_len"]) for r in sub})
        for g, q in enumerate(seqs):
            grp = [r for r in sub if int(r["seq_len"]) == q]
            best = min(float(r["step_ms"]) for r in grp) or 1.0
            for k, sname in enumerate(scheds):
                r = [x for x in grp if x["scheduler"] == sname]
                if not r:
                    continue
                r = r[0]
                step, exp, imb = float(r["step_ms"]), float(r["exposed_comm_ms"]), float(r["imbalance_ms"])
                x = g + (k - (len(scheds) - 1) / 2) * width
                bottom = 0.0
                for c, v in enumerate((step - exp - imb, exp, imb)):
                    ax.bar(x, v / best, width * 0.9, bottom=bottom, color=colors[c])
                    bottom += v / best
                ax.text(x, bottom + 0.02, sname, rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(seqs)))
        ax.set_xticklabels([fmt_seq(q) for q in seqs])
        ax.set_xlabel("sequence length")
        ax.set_ylabel("step time / fastest of the point")
        top = max(float(r["step_ms"]) / min(float(x["step_ms"]) for x in sub
                                              if x["seq_len"] == r["seq_len"]) for r in sub)
        ax.set_ylim(0, top * 1.35)
        ax.set_title(f"SP {key[0]}, {key[1]}" + (f", {key[2]}" if len(passes) > 1 else ""))
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors]
    fig.legend(handles, names, loc="lower center", ncol=3, fontsize=9)
    fig.suptitle(f"{rows[0]['topology']}: where the step time goes (1 = the point's fastest)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(os.path.join(out, "breakdown.png"), dpi=110)
    plt.close(fig)


def number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def main():
    global plt
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="?")
    ap.add_argument("--out", help="directory for the PNGs (default: the CSV's)")
    ap.add_argument("--check", action="store_true", help="exit 0 when matplotlib is found")
    a = ap.parse_args()
    if not a.check and not a.csv:
        ap.error("expected a CSV file")
    plt = import_matplotlib()
    if a.check:
        print(f"plot.py: matplotlib {plt.matplotlib.__version__} for {sys.executable}")
        return
    with open(a.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"{a.csv}: no rows")
    need = {"scheduler", "seq_len", "gpus", "mask", "pass", "step_ms", "exposed_comm_ms",
            "imbalance_ms", "speedup_vs_ring"}
    missing = need - set(rows[0])
    if missing:
        sys.exit(f"{a.csv}: missing columns {', '.join(sorted(missing))} (a tasp-sim --csv file?)")
    # n/a rows (a scheduler that cannot run the point) have no figures to draw
    ran = [r for r in rows if number(r["step_ms"])]
    if len(ran) < len(rows):
        print(f"plot.py: {len(rows) - len(ran)} rows without a step time left out", file=sys.stderr)
    rows = ran
    if not rows:
        sys.exit(f"{a.csv}: no row has a step time")
    out = a.out or os.path.dirname(os.path.abspath(a.csv))
    os.makedirs(out, exist_ok=True)
    step_time(rows, out)
    speedup(rows, out)
    breakdown(rows, out)
    for n in ("step_time.png", "speedup.png", "breakdown.png"):
        p = os.path.join(out, n)
        if os.path.exists(p):
            print(p)


if __name__ == "__main__":
    main()
