#!/usr/bin/env python3
"""The figures of README.md: at which SM clock the kernel sweep timed its
kernels, from this directory's run (sweep/kernels-n1.jsonl with each
kernel's wall-clock spans, smi.csv sampled every 20 ms beside it,
chain.json) and ../h200x1-sweep-clocks (the same program on an H200),
against the committed sweeps ../h100x1-sweep and ../h200x1-sweep2:

  1. the clock over the sweep (each 30 s, and first minute against last);
  2. per kernel, the median SM clock, power and temperature during its
     forward's and its backward's timing (written to kernel-clocks.csv in
     each run's directory), summed by the kernel's time;
  3. the same kernels' time in this run over the committed sweep's;
  4. the mechanism test: within one shape family (head dim, B, H, mask,
     aspect) the time per FLOP of a kernel at 2L tokens over the same at L,
     and the same in cycles (time x the kernel's median SM clock): if the
     clock alone made long kernels slow, cycles per FLOP would line up;
  5. the 60 s chain of one causal 32K forward kernel: its time against its
     first kernel's, by how long the load has lasted, with the clock;
  6. where the sweep's forward kernels sit on the chain's time-against-clock
     curve: the slowdown the sweep's own clocks put in their times.

usage: python3 analyse.py            (prints the tables, writes kernel-clocks.csv)"""
import bisect
import csv
import datetime
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
CAL = os.path.dirname(HERE)
RUNS = (("H100", os.path.join(CAL, "h100x1-sweep-clocks"), os.path.join(CAL, "h100x1-sweep")),
        ("H200", os.path.join(CAL, "h200x1-sweep-clocks"), os.path.join(CAL, "h200x1-sweep2")))
BOOST_MHZ = 1980  # both GPUs' clocks.max.sm (meta.json)
TIME_BINS = ((0, 1), (1, 3), (3, 10), (10, 30), (30, 100), (100, 1e9))
KEY = ("B", "H", "Hk", "D", "sq", "sk", "causal")


# branch h26p-clock (commit ed82643, not landed), scripts/kernel_model.py
# POWER_CAP: a forward kernel's time factor after 0.1 s and after 0.8 s of
# load, from ../h100x1-chains (2.5 s chains); the H200's as 0.45 of the
# H100's excess.  Quoted to compare, not used as a model.
H26P = {"H100": (1.025, 1.047), "H200": (1.011, 1.021)}


def h26p_sweep_factor(gpu, r):
    """The factor h26p-clock took a sweep forward kernel to be timed at:
    the load its repeats had put on the GPU, (warm-ups + 2.5) x its time
    (its sweep_load_s), against the onsets 0.1 and 0.8 s."""
    warm = 1 if flops(r) > 2e12 else 2
    load_s = (warm + 2.5) * r["ms"] * 1e-3
    after, hot = H26P[gpu]
    return hot if load_s >= 0.8 else after if load_s >= 0.1 else 1.0


def factor_at(curve, mhz):
    """A forward kernel's time over its time at the boost clock, at SM
    clock mhz, read off the chain's measured curve (its first, uncapped
    kernel at the boost clock as 1): linear between measured clocks, held
    at the ends beyond them."""
    pts = sorted(curve.items())
    if mhz <= pts[0][0]:
        return pts[0][1]
    for (m0, f0), (m1, f1) in zip(pts, pts[1:]):
        if mhz <= m1:
            return f0 + (f1 - f0) * (mhz - m0) / (m1 - m0)
    return pts[-1][1]


def smi(path):
    """[(unix s, SM MHz, mem MHz, W, C, throttle reasons)] from nvidia-smi
    --format=csv,noheader,nounits; its timestamps are the host's UTC
    (meta.json: tz)."""
    rows = []
    for ln in open(path):
        p = [x.strip() for x in ln.split(",")]
        ts = datetime.datetime.strptime(p[0], "%Y/%m/%d %H:%M:%S.%f").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        rows.append((ts, int(p[1]), int(p[2]), float(p[3]), int(p[4]), int(p[5], 16)))
    return rows


def during(samples, times, a, b):
    """The samples inside [a, b]; a span shorter than the 20 ms sampling
    takes the sample nearest its middle."""
    i, j = bisect.bisect_left(times, a), bisect.bisect_right(times, b)
    if j > i:
        return samples[i:j]
    m = bisect.bisect_left(times, (a + b) / 2)
    near = min((k for k in (m - 1, m) if 0 <= k < len(samples)),
               key=lambda k: abs(times[k] - (a + b) / 2))
    return [samples[near]]


def load(path):
    return [json.loads(ln) for ln in open(path)]


def flops(k):
    return 4.0 * k["B"] * k["H"] * k["D"] * k["sq"] * k["sk"] * (0.5 if k["causal"] else 1.0)


def bin_of(ms):
    for lo, hi in TIME_BINS:
        if lo <= ms < hi:
            return (lo, hi)


def bin_label(b):
    return f"{b[0]:g}+ ms" if b[1] > 1e6 else f"{b[0]:g}-{b[1]:g} ms"


def med(xs, fmt="{:.0f}"):
    return fmt.format(statistics.median(xs)) if xs else "-"


def kernel_clocks(name, run_dir):
    """Per timed kernel and pass: its time and the samples' median clock,
    power and temperature; written to kernel-clocks.csv."""
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    rows = smi(os.path.join(run_dir, "smi.csv"))
    times = [r[0] for r in rows]
    ks = [k for k in load(os.path.join(run_dir, "sweep", "kernels-n1.jsonl")) if "ms" in k]
    t_first = min(k["fwd_wall"][0] for k in ks)
    out = []
    for k in ks:
        for pas, ms, span in (("fwd", k["ms"], k["fwd_wall"]), ("bwd", k["bwd_ms"], k["bwd_wall"])):
            s = during(rows, times, *span)
            out.append(dict({x: k[x] for x in KEY}, pass_=pas, ms=ms, flop=flops(k) * (
                2.5 if pas == "bwd" else 1.0), t_s=span[0] - t_first,
                span_ms=1e3 * (span[1] - span[0]), samples=len(s),
                sm_mhz=statistics.median(r[1] for r in s),
                power_w=statistics.median(r[3] for r in s),
                temp_c=statistics.median(r[4] for r in s),
                capped=any(r[5] & 0x4 for r in s)))
    with open(os.path.join(run_dir, "kernel-clocks.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        cols = list(KEY) + ["pass", "ms", "t_s", "span_ms", "samples", "sm_mhz", "power_w",
                            "temp_c", "capped"]
        w.writerow(cols)
        for r in out:
            w.writerow([r[c] for c in KEY] + [r["pass_"], f"{r['ms']:.5f}", f"{r['t_s']:.3f}",
                                               f"{r['span_ms']:.1f}", r["samples"],
                                               f"{r['sm_mhz']:g}", f"{r['power_w']:.1f}",
                                               f"{r['temp_c']:g}", int(r["capped"])])
    return meta, rows, out, t_first


def over_sweep(name, rows, recs, t_first):
    """The clock each 30 s of the sweep, and its first minute against its last."""
    t_last = max(r["t_s"] for r in recs)
    print(f"\n{name}: the clock over the sweep ({len(recs) // 2} kernels timed in "
          f"{t_last:.0f} s; all 20 ms samples of each window)")
    print("| from s | SM MHz median | mean | power W median | temp C median | capped (0x4) |")
    print("|---:|---:|---:|---:|---:|---:|")
    t = 0.0
    while t < t_last:
        s = [r for r in rows if t_first + t <= r[0] < t_first + min(t + 30, t_last)]
        print(f"| {t:.0f} | {med([r[1] for r in s])} | {statistics.mean(r[1] for r in s):.0f} | "
              f"{med([r[3] for r in s])} | {med([r[4] for r in s])} | "
              f"{sum(1 for r in s if r[5] & 4) / len(s):.0%} |")
        t += 30
    print("| window | fwd kernels from 10 ms: SM MHz median | their temp C | bwd from 10 ms: SM MHz |")
    print("|---|---:|---:|---:|")
    for label, lo, hi in (("first minute", 0, 60), ("last minute", t_last - 60, t_last + 1)):
        f = [r for r in recs if r["pass_"] == "fwd" and r["ms"] >= 10 and lo <= r["t_s"] < hi]
        b = [r for r in recs if r["pass_"] == "bwd" and r["ms"] >= 10 and lo <= r["t_s"] < hi]
        print(f"| {label} ({len(f)} fwd, {len(b)} bwd) | {med([r['sm_mhz'] for r in f])} | "
              f"{med([r['temp_c'] for r in f])} | {med([r['sm_mhz'] for r in b])} |")


def by_time(name, recs):
    print(f"\n{name}: per kernel, the median of the samples during its timing, by its time")
    print("| pass | mask | kernel time | kernels | SM MHz (median of kernels) | 10th pct | "
          "power W | temp C | capped |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for pas in ("fwd", "bwd"):
        for causal in (False, True):
            for b in TIME_BINS:
                s = [r for r in recs if r["pass_"] == pas and r["causal"] == causal and
                     bin_of(r["ms"]) == b]
                if not s:
                    continue
                mh = sorted(r["sm_mhz"] for r in s)
                print(f"| {pas} | {'causal' if causal else 'full'} | {bin_label(b)} | {len(s)} | "
                      f"{med(mh)} | {mh[len(mh) // 10]:.0f} | {med([r['power_w'] for r in s])} | "
                      f"{med([r['temp_c'] for r in s])} | "
                      f"{sum(r['capped'] for r in s) / len(s):.0%} |")


def against_committed(name, run_dir, committed):
    """This run's time over the committed sweep's for the kernels both timed."""
    mine = {tuple(k[x] for x in KEY): k for k in load(os.path.join(run_dir, "sweep",
                                                                   "kernels-n1.jsonl"))
            if "ms" in k}
    theirs = {tuple(k[x] for x in KEY): k for k in load(os.path.join(committed,
                                                                     "kernels-n1.jsonl"))
              if "ms" in k}
    both = sorted(set(mine) & set(theirs), key=str)
    print(f"\n{name}: this run's time over {os.path.basename(committed)}'s, {len(both)} "
          "kernels both timed (median; by the committed kernel's time)")
    print("| kernel time | fwd full | fwd causal | bwd full | bwd causal |")
    print("|---|---:|---:|---:|---:|")
    for b in TIME_BINS:
        cells = []
        for field in ("ms", "bwd_ms"):
            for causal in (False, True):
                r = [mine[k][field] / theirs[k][field] for k in both
                     if k[6] == causal and bin_of(theirs[k][field]) == b]
                cells.append(f"{statistics.median(r):.3f} ({len(r)})" if r else "-")
        print(f"| {bin_label(b)} | " + " | ".join(cells) + " |")


def mechanism(name, recs, curve):
    """Time per FLOP and cycles per FLOP of a kernel at 2L over the same
    family's at L, both from 4K tokens (the kernel's rate saturated)."""
    fam = {}
    for r in recs:
        if r["sq"] >= 4096:
            fam[(r["pass_"], r["B"], r["H"], r["D"], r["causal"], r["sk"] / r["sq"], r["sq"])] = r
    print(f"\n{name}: the mechanism test, kernel at 2L over the same family's at L (from 4K "
          "tokens): time per FLOP, and cycles (time x SM clock) per FLOP; median by the "
          "longer kernel's time")
    print("| pass | longer kernel | pairs | its clock over the shorter's | time/FLOP ratio | "
          "cycles/FLOP ratio | time/FLOP at the boost clock by the chain's curve |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for pas in ("fwd", "bwd"):
        for b in TIME_BINS[2:]:
            tr, cr, fr, br = [], [], [], []
            for key, r2 in fam.items():
                r1 = fam.get(key[:-1] + (key[-1] // 2,))
                if key[0] != pas or r1 is None or bin_of(r2["ms"]) != b:
                    continue
                t = (r2["ms"] / r2["flop"]) / (r1["ms"] / r1["flop"])
                tr.append(t)
                fr.append(r2["sm_mhz"] / r1["sm_mhz"])
                cr.append(t * fr[-1])
                if pas == "fwd":  # the chain measured a forward kernel's curve only
                    br.append(t * factor_at(curve, r1["sm_mhz"]) / factor_at(curve, r2["sm_mhz"]))
            if tr:
                print(f"| {pas} | {bin_label(b)} | {len(tr)} | {med(fr, '{:.3f}')} | "
                      f"{med(tr, '{:.3f}')} | {med(cr, '{:.3f}')} | {med(br, '{:.3f}')} |")


def chain(name, run_dir, rows):
    c = json.load(open(os.path.join(run_dir, "chain.json")))["chain"]
    ks, w0 = c["kernels_start_ms_dur_ms"], c["start_wall_unix"]
    first = ks[0][1]
    print(f"\n{name}: chain of {len(ks)} forward kernels (B {c['B']}, H {c['H']}/{c['Hk']}, "
          f"D {c['D']}, {c['sq'] // 1024}K, {'causal' if c['causal'] else 'full'}) after "
          f"idle; first kernel {first:.2f} ms")
    print("| load lasted | kernels | median ms | over the first | SM MHz | power W | temp C |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    curve = []
    for lo, hi in ((0, 0.1), (0.1, 0.8), (0.8, 2.7), (2.7, 10), (10, 30), (30, 61)):
        sel = [d for s, d in ks if lo * 1e3 <= s < hi * 1e3]
        smp = [r for r in rows if w0 + lo <= r[0] < w0 + hi]
        m = statistics.median(sel)
        mhz = statistics.median(r[1] for r in smp) if smp else float("nan")
        curve.append((mhz, m / first))
        print(f"| {lo:g}-{hi:g} s | {len(sel)} | {m:.2f} | {m / first - 1:+.1%} | {mhz:.0f} | "
              f"{med([r[3] for r in smp])} | {med([r[4] for r in smp])} |")
    # the time factor against the clock, kernel by kernel: each kernel's
    # nearest sample (from 0.1 s, when the clock samples follow the load)
    times = [r[0] for r in rows]
    pts = {}
    for s, d in ks:
        if s >= 100:
            mhz = during(rows, times, w0 + s * 1e-3, w0 + (s + d) * 1e-3)
            pts.setdefault(round(statistics.median(r[1] for r in mhz) / 15) * 15, []).append(
                d / first)
    print("| SM MHz (kernel's samples) | kernels | time over the first kernel's |")
    print("|---:|---:|---:|")
    for mhz in sorted(pts):
        if len(pts[mhz]) >= 5:
            print(f"| {mhz} | {len(pts[mhz])} | {statistics.median(pts[mhz]):.3f} |")
    curve = {m: statistics.median(v) for m, v in pts.items() if len(v) >= 5}
    curve[BOOST_MHZ] = 1.0  # the first kernel, uncapped, is the reference
    return c, curve


def sweep_on_chain(name, recs, c, curve, committed):
    """The factor each sweep forward kernel's own clock put in its time
    (the chain's curve), against the factor h26p-clock assumed, by the
    kernel's time; and what a long forward priced at the chain's hot
    plateau would move by against h26p (hot factor over h26p's, times
    h26p's sweep factor over the measured one)."""
    hot = statistics.median(d / c["kernels_start_ms_dur_ms"][0][1]
                            for s, d in c["kernels_start_ms_dur_ms"] if s >= 10e3)
    print(f"\n{name}: forward kernels of the sweep at their own clock, read on the chain's curve "
          f"(the chain's plateau from 10 s: x{hot:.3f}; h26p-clock's hot factor "
          f"x{H26P[name][1]:.3f})")
    print("| kernel time | fwd kernels | SM MHz | factor at that clock (measured) | "
          "h26p's factor | a hot pass's long kernel against h26p's price |")
    print("|---|---:|---:|---:|---:|---:|")
    for b in TIME_BINS:
        f = [r for r in recs if r["pass_"] == "fwd" and bin_of(r["ms"]) == b]
        if not f:
            continue
        meas = [factor_at(curve, r["sm_mhz"]) for r in f]
        assumed = [h26p_sweep_factor(name, r) for r in f]
        move = [hot / H26P[name][1] * a / m for a, m in zip(assumed, meas)]
        print(f"| {bin_label(b)} | {len(f)} | {med([r['sm_mhz'] for r in f])} | "
              f"{med(meas, '{:.3f}')} | {med(assumed, '{:.3f}')} | "
              f"{statistics.median(move) - 1:+.1%} |")
    chain_kernel_in_sweep(name, recs, c, curve, committed)


def chain_kernel_in_sweep(name, recs, c, curve, committed):
    """The sweep's forward kernels of 10 ms and more at their median clock,
    and the slowdown the chain measured at that clock; the chain's kernel
    itself as the committed sweep timed it."""
    f = [r for r in recs if r["pass_"] == "fwd" and r["ms"] >= 10]
    mh = statistics.median(r["sm_mhz"] for r in f)
    near = min(curve, key=lambda m: abs(m - mh))
    hot = min(curve)
    print(f"\n{name}: sweep forward kernels from 10 ms: {len(f)}, their median SM clock "
          f"{mh:.0f} MHz (chain at {near} MHz: x{curve[near]:.3f}; the chain's hottest, "
          f"{hot} MHz: x{curve[hot]:.3f})")
    k = tuple(c[x] for x in KEY)
    for r in load(os.path.join(committed, "kernels-n1.jsonl")):
        if tuple(r[x] for x in KEY) == k and "ms" in r:
            first = c["kernels_start_ms_dur_ms"][0][1]
            print(f"  the chain's kernel in {os.path.basename(committed)}: {r['ms']:.2f} ms "
                  f"= x{r['ms'] / first:.3f} of the chain's first (cold) kernel")


def main():
    for name, run_dir, committed in RUNS:
        meta, rows, recs, t_first = kernel_clocks(name, run_dir)
        print(f"\n## {name}: {meta['device']}")
        over_sweep(name, rows, recs, t_first)
        by_time(name, recs)
        against_committed(name, run_dir, committed)
        c, curve = chain(name, run_dir, rows)
        mechanism(name, recs, curve)
        sweep_on_chain(name, recs, c, curve, committed)


if __name__ == "__main__":
    main()
