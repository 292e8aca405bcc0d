#!/usr/bin/env python3
"""The figures of README.md from chains.json and smi.csv (this directory)
and ../h100x1-clocks, ../h200x1-clocks: per chain, its kernels' median
time by how long the chain had run, against its first 50 ms, with the SM
clock, instant power and throttle reasons sampled in each window; then the
forward's clock drop under the cap on each GPU in the clocks program (runs
1-5 of the 64K and 128K forward kernels), whose ratio carries the H100's
time excess to the H200.  usage: python3 analyse.py"""
import datetime
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
WINDOWS = ((0, 50), (100, 200), (200, 400), (400, 800), (800, 1600), (1600, 2700))


def smi_rows(path, t0, clock_col=1, power_col=2, reason_col=5):
    rows = []
    for ln in open(path):
        p = [x.strip() for x in ln.split(",")]
        try:
            ts = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").replace(
                tzinfo=datetime.timezone.utc).timestamp()
        except ValueError:
            continue
        rows.append((ts - t0, int(p[clock_col]), float(p[power_col]), p[reason_col]))
    return rows


def chains():
    d = json.load(open(os.path.join(HERE, "chains.json")))
    smi = smi_rows(os.path.join(HERE, "smi.csv"), d["t0_unix"])
    print(d["device"])
    print("| chain | duty | " + " | ".join(f"{a}-{b} ms" for a, b in WINDOWS[1:]) +
          " | SM MHz from 800 ms | capped (0x4) |")
    print("|---|---:|" + "---:|" * (len(WINDOWS) - 1) + "---:|---|")
    for c in d["chains"]:
        ks, w0 = c["kernels_start_ms_dur_ms"], c["start_wall_s"]
        span = ks[-1][0] + ks[-1][1]
        duty = sum(k[1] for k in ks) / span
        base = statistics.median([k[1] for k in ks if k[0] < 50])
        cells = []
        for lo, hi in WINDOWS[1:]:
            sel = [k[1] for k in ks if lo <= k[0] < hi]
            cells.append(f"{100 * (statistics.median(sel) / base - 1):+.1f}%" if sel else "-")
        late = [x for x in smi if w0 + 0.8 <= x[0] <= c["end_wall_s"]]
        capped = any(int(x[3], 16) & 0x4 for x in smi if w0 <= x[0] <= c["end_wall_s"])
        print(f"| {c['label']} | {duty:.2f} | " + " | ".join(cells) +
              f" | {statistics.median([x[1] for x in late]):.0f} | {'yes' if capped else 'no'} |")


def clock_drop(gpu):
    d = json.load(open(os.path.join(HERE, "..", f"{gpu}-clocks", "kernels.json")))
    smi = smi_rows(os.path.join(HERE, "..", f"{gpu}-clocks", "smi.csv"), d["t0_unix"],
                   power_col=3)
    drops = []
    for r in d["records"]:
        if r["pass"] == "fwd" and r["tokens"] >= 65536 and r["iter"] >= 1:
            s = [x[1] for x in smi if r["start_s"] <= x[0] <= r["end_s"]]
            drops.append(1980 - statistics.mean(s))
    return statistics.mean(drops)


chains()
h100, h200 = clock_drop("h100x1"), clock_drop("h200x1")
print(f"forward clock drop under the cap, clocks program, 64K-128K runs 1-5: "
      f"H100 {h100:.0f} MHz, H200 {h200:.0f} MHz, ratio {h200 / h100:.2f}")
