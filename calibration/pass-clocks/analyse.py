#!/usr/bin/env python3
"""The figures of README.md: at which SM clock the validation passes (2 x
H200, h200x2/) and the decoder layer (1 x H100, h100x1-layer/) ran, from
each run's records (calibrate.py --pass-wall-clock: every timed record's
host wall-clock span, "wall", warm-ups and timed iterations together) and
nvidia-smi sampled every 20 ms beside it (smi.csv, the GPU's index first):

  1. the run as a whole: clock, power, temperature and the share of samples
     with the software power cap active (throttle reason 0x4), per GPU;
  2. per record, the median SM clock, power and temperature of the samples
     in its span (both GPUs' for a pass), and the cap share (written to
     record-clocks.csv in each run's directory);
  3. the records' times over the committed data set's (../h200x2-tool,
     ../h100x1-layer): is this run like the one the validation used?
  4. by pass kind and length, the clock, and for forward work where it sits
     between the boost clock and the 60 s chain's plateau: the chain's
     time-against-clock curve (../h100x1-sweep-clocks, ../h200x1-sweep-
     clocks: analyse.py there builds it) read at the clock;
  5. what pricing a pass's kernels with the sweep's tables means: the curve
     at the pass's clock over the curve at the clock the sweep timed a
     kernel of the pass's kernel length (the sweep's kernel-clocks.csv).

usage: python3 analyse.py     (prints the tables, writes record-clocks.csv)"""
import bisect
import contextlib
import csv
import datetime
import importlib.util
import io
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
CAL = os.path.dirname(HERE)
CAP_BIT = 0x4  # clocks_throttle_reasons.active: software power cap
# pass time bins (ms, the median iteration) and the sweep's kernel-time bins
PASS_BINS = ((0, 3), (3, 10), (10, 30), (30, 100), (100, 1e9))
SWEEP_BINS = ((0, 10), (10, 30), (30, 100), (100, 1e9))


def sweep_clocks_module():
    """../h100x1-sweep-clocks/analyse.py (the chain's curve, factor_at)."""
    spec = importlib.util.spec_from_file_location(
        "sweep_clocks_analyse", os.path.join(CAL, "h100x1-sweep-clocks", "analyse.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SC = sweep_clocks_module()


def smi(path):
    """{gpu index: [(unix s, SM MHz, mem MHz, W, C, throttle reasons)]}; the
    timestamps are the host's UTC (meta.json: tz)."""
    by = {}
    for ln in open(path):
        p = [x.strip() for x in ln.split(",")]
        if len(p) < 7 or not p[2].isdigit():
            continue  # a line cut when the sampler was stopped
        ts = datetime.datetime.strptime(p[1], "%Y/%m/%d %H:%M:%S.%f").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        by.setdefault(int(p[0]), []).append(
            (ts, int(p[2]), int(p[3]), float(p[4]), int(p[5]), int(p[6], 16)))
    return by


def chain_curve(gpu):
    """The 60 s chain's forward time factor against the SM clock (1 at the
    boost clock) and its plateau (the factor at its hottest clock)."""
    d = os.path.join(CAL, "h100x1-sweep-clocks" if gpu == "H100" else "h200x1-sweep-clocks")
    with contextlib.redirect_stdout(io.StringIO()):
        _, curve = SC.chain(gpu, d, SC.smi(os.path.join(d, "smi.csv")))
    chain = json.load(open(os.path.join(d, "chain.json")))["chain"]
    ks = chain["kernels_start_ms_dur_ms"]
    first = ks[0][1]
    plateau = statistics.median(dur for s, dur in ks if s >= 10e3) / first
    return curve, plateau, d


def sweep_factors(curve, d):
    """The curve's factor at the clock the sweep timed its forward kernels
    at, median per kernel-time bin (kernel-clocks.csv)."""
    out = {}
    for r in csv.DictReader(open(os.path.join(d, "kernel-clocks.csv"))):
        if r["pass"] != "fwd":
            continue
        ms = float(r["ms"])
        b = next(b for b in SWEEP_BINS if b[0] <= ms < b[1])
        out.setdefault(b, []).append(SC.factor_at(curve, float(r["sm_mhz"])))
    return {b: statistics.median(v) for b, v in out.items()}


def label(b):
    return f"{b[0]:g}+ ms" if b[1] > 1e6 else f"{b[0]:g}-{b[1]:g} ms"


def med(xs, fmt="{:.0f}"):
    return fmt.format(statistics.median(xs)) if xs else "-"


def record_clocks(run_dir, rec_file, iters, key_fields):
    """Per timed record: its samples' median clock, power, temperature and
    cap share over every GPU of the run; written to record-clocks.csv."""
    by = smi(os.path.join(run_dir, "smi.csv"))
    times = {g: [r[0] for r in rows] for g, rows in by.items()}
    recs = [json.loads(ln) for ln in open(os.path.join(run_dir, "run", rec_file))]
    recs = [r for r in recs if "wall" in r]
    for r in recs:
        if r.get("part") == "layer":  # the whole layer, beside its ops
            r.setdefault("op", "layer")
    t0 = min(r["wall"][0] for r in recs)
    for r in recs:
        a, b = r["wall"]
        smp = [s for g in by for s in SC.during(by[g], times[g], a, b)]
        per_gpu = [statistics.median(s[1] for s in SC.during(by[g], times[g], a, b))
                   for g in sorted(by)]
        r.update(t_s=a - t0, span_ms=(b - a) * 1e3, samples=len(smp),
                 sm_mhz=statistics.median(s[1] for s in smp),
                 sm_mhz_gpus=per_gpu,
                 power_w=statistics.median(s[3] for s in smp),
                 temp_c=statistics.median(s[4] for s in smp),
                 capped=sum(1 for s in smp if s[5] & CAP_BIT) / len(smp),
                 # the GPU's share of the span spent on the timed work
                 # (warm-ups and timed iterations at the median time)
                 busy=min(1.0, (iters + 2) * r["ms"] / ((b - a) * 1e3)))
    cols = key_fields + ["ms", "t_s", "span_ms", "busy", "samples", "sm_mhz", "power_w",
                         "temp_c", "capped"]
    with open(os.path.join(run_dir, "record-clocks.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols + ["sm_mhz_gpus"])
        for r in recs:
            w.writerow([round(r[c], 4) if isinstance(r[c], float) else r[c] for c in cols]
                       + ["/".join(f"{m:.0f}" for m in r["sm_mhz_gpus"])])
    return by, recs


def overview(name, by, meta):
    a, b = meta["run_start_unix"], meta["run_end_unix"]
    print(f"\n{name}: the run as a whole ({b - a:.0f} s), per GPU")
    print("| GPU | SM MHz median (min) | power W median (max) | temp C first 20 s / last 20 s "
          "| capped |")
    print("|---|---:|---:|---:|---:|")
    for g in sorted(by):
        s = [x for x in by[g] if a <= x[0] <= b]
        first = [x[4] for x in s if x[0] < a + 20]
        last = [x[4] for x in s if x[0] > b - 20]
        print(f"| {g} | {med([x[1] for x in s])} ({min(x[1] for x in s)}) | "
              f"{med([x[3] for x in s])} ({max(x[3] for x in s):.0f}) | "
              f"{med(first)} / {med(last)} | "
              f"{sum(1 for x in s if x[5] & CAP_BIT) / len(s):.0%} |")


def against_committed(name, recs, committed, key):
    """This run's time over the committed record's with the same key."""
    old = {}
    for ln in open(committed):
        r = json.loads(ln)
        old[key(r)] = r["ms"]
    ratios = {}
    for r in recs:
        k = key(r)
        if k in old:
            ratios.setdefault((r["pass"], r.get("tokens_per_gpu")), []).append(r["ms"] / old[k])
    print(f"\n{name}: time over the committed record's ({os.path.relpath(committed, CAL)}), "
          "median (min-max)")
    print("| pass | tokens per GPU | records | this run / committed |")
    print("|---|---:|---:|---:|")
    allr = []
    for (pas, c), v in sorted(ratios.items()):
        allr += v
        print(f"| {pas} | {c} | {len(v)} | {statistics.median(v):.3f} "
              f"({min(v):.3f}-{max(v):.3f}) |")
    print(f"all {len(allr)}: median {statistics.median(allr):.3f}")


def where(name, recs, curve, plateau, sweep_f, kernels_of, kind_of):
    """By kind and length: clock, cap share, and for forward work the
    curve's factor at that clock, its place between the boost clock (0)
    and the plateau (1), and over the sweep's factor for kernels of the
    pass's kernel length."""
    print(f"\n{name}: where the records ran (the chain's plateau: x{plateau:.3f}; "
          "place: 0 at the boost clock, 1 at the plateau; over the sweep: the curve at the "
          "record's clock over the curve at the clock the sweep timed kernels of this "
          "record's kernel length)")
    print("| kind | record time | records | busy | SM MHz | power W | temp C | capped | "
          "factor on the curve | place | over the sweep |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    groups = {}
    for r in recs:
        b = next(b for b in PASS_BINS if b[0] <= r["ms"] < b[1])
        groups.setdefault((kind_of(r), b), []).append(r)
    for (kind, b), rs in sorted(groups.items()):
        f = [SC.factor_at(curve, r["sm_mhz"]) for r in rs]
        fwd = kind.startswith("fwd ") or kind == "fwd"
        over = []
        for r, fr in zip(rs, f):
            kms = kernels_of(r)
            sb = next(s for s in SWEEP_BINS if s[0] <= kms < s[1])
            over.append(fr / sweep_f[sb])
        print(f"| {kind} | {label(b)} | {len(rs)} | {med([r['busy'] for r in rs], '{:.0%}')} | "
              f"{med([r['sm_mhz'] for r in rs])} | {med([r['power_w'] for r in rs])} | "
              f"{med([r['temp_c'] for r in rs])} | "
              f"{statistics.mean(r['capped'] for r in rs):.0%} | "
              + (f"x{statistics.median(f):.3f} | {(statistics.median(f) - 1) / (plateau - 1):.2f} | "
                 f"x{statistics.median(over):.3f} |" if fwd else "- | - | - |"))


def model_error_by_clock(recs, curve, sweep_f, path):
    """The kernel model's signed error on the committed passes (a saved
    scripts/validate_passes.py output) by the clock this run's same pass ran
    at: if the clock the sweep's table was not timed at is what the model
    misses, the error falls with the factor over the sweep."""
    if not os.path.exists(path):
        return
    err = {}
    for ln in open(path):
        p = ln.split()
        if len(p) == 8 and p[0] in ("fwd", "bwd") and p[7].endswith("%"):
            err[(p[1], p[2], p[0], p[4] == "yes", int(p[3]))] = float(p[7][:-1])
    print(f"\n2 x H200: the model's signed error on the committed passes "
          f"({os.path.relpath(path, HERE)}), by this run's clock for the same pass "
          "(from 6K tokens per GPU)")
    print("| pass | over the sweep (this run's clock) | passes | SM MHz | median error | "
          "errors |")
    print("|---|---|---:|---:|---:|---|")
    groups = {}
    for r in recs:
        k = (r["sched"], r["mask"], r["pass"], r["comm"], r["tokens_per_gpu"])
        if k not in err or r["tokens_per_gpu"] < 6144:
            continue
        kms = r["ms"] / r["n"]
        sb = next(s for s in SWEEP_BINS if s[0] <= kms < s[1])
        over = SC.factor_at(curve, r["sm_mhz"]) / sweep_f[sb]
        band = "x1.000-1.010" if over < 1.010 else "x1.010-1.030" if over < 1.030 else "x1.030+"
        groups.setdefault((r["pass"], band), []).append((err[k], r["sm_mhz"]))
    for (pas, band), v in sorted(groups.items()):
        e = sorted(x for x, _ in v)
        print(f"| {pas} | {band} | {len(v)} | {statistics.median(m for _, m in v):.0f} | "
              f"{statistics.median(e):+.1f}% | {' '.join(f'{x:+.1f}' for x in e)} |")


def layer_error_by_clock(recs, curve, path):
    """The layer model's signed error on the committed layer records (a
    saved scripts/validate_layer.py output) beside this run's clock for the
    same layer pass."""
    if not os.path.exists(path):
        return
    err = {}
    for ln in open(path):
        p = [x.strip() for x in ln.strip().strip("|").split("|")]
        if len(p) > 8 and p[7].endswith("%") and p[3].endswith("K"):
            err[(p[0], int(p[3][:-1]) * 1024, p[4])] = float(p[7][:-1])
    print(f"\n1 x H100: the layer model's signed error on the committed layer "
          f"({os.path.relpath(path, HERE)}) beside this run's clock for the same layer pass")
    print("| model | tokens | pass | error | SM MHz | capped | factor on the curve |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in recs:
        k = (r["model"], r["tokens_per_gpu"], r["pass"])
        if r["part"] == "layer" and k in err:
            print(f"| {k[0]} | {k[1]} | {k[2]} | {err[k]:+.1f}% | {r['sm_mhz']:.0f} | "
                  f"{r['capped']:.0%} | x{SC.factor_at(curve, r['sm_mhz']):.3f} |")


def open_run(gpu, folder, title):
    """A run's folder and metadata, its GPU's chain curve and plateau and
    the sweep's factors on it, with the section's header printed."""
    curve, plateau, d = chain_curve(gpu)
    sweep_f = sweep_factors(curve, d)
    run_dir = os.path.join(HERE, folder)
    meta = json.load(open(os.path.join(run_dir, "meta.json")))
    print(f"{title}: {'; '.join(meta['device'])}")
    print(f"the sweep's forward kernels on the {gpu} chain's curve, by kernel time: " +
          ", ".join(f"{label(b)} x{f:.3f}" for b, f in sorted(sweep_f.items())))
    return curve, plateau, sweep_f, run_dir, meta


def main():
    # 2 x H200: the passes
    curve, plateau, sweep_f, run_dir, meta = open_run("H200", "h200x2", "## 2 x H200 passes")
    keys = ["sched", "mask", "pass", "comm", "tokens_per_gpu"]
    by, recs = record_clocks(run_dir, "passes-n2.jsonl", 7, keys)
    overview("2 x H200", by, meta)
    against_committed("2 x H200", recs, os.path.join(CAL, "h200x2-tool", "passes-n2.jsonl"),
                      lambda r: tuple(r[k] for k in keys))
    # a pass of n = 2 runs its work as n steps of one c x c kernel each
    # (causal: halves of it); its kernel length is about its time over n
    where("2 x H200", recs, curve, plateau, sweep_f, lambda r: r["ms"] / r["n"],
          lambda r: f"{r['pass']} {'comm' if r['comm'] else 'no comm'}")
    model_error_by_clock(recs, curve, sweep_f, os.path.join(run_dir, "validate-h200x2-tool.txt"))

    # 1 x H100: the layer
    curve, plateau, sweep_f, run_dir, meta = open_run("H100", "h100x1-layer",
                                                      "\n## 1 x H100 layer")
    keys = ["model", "part", "op", "pass", "tokens_per_gpu"]
    by, recs = record_clocks(run_dir, "layer-n1.jsonl", 5, keys)
    overview("1 x H100", by, meta)
    against_committed("1 x H100", recs, os.path.join(CAL, "h100x1-layer", "layer-n1.jsonl"),
                      lambda r: (r["model"], r["part"], r.get("op", "layer"), r["pass"],
                                 r["tokens_per_gpu"]))
    # the layer's attention kernel is one of its ops; the layer as a whole
    # and each op are priced here at their own length
    where("1 x H100", recs, curve, plateau, sweep_f, lambda r: r["ms"],
          lambda r: f"{r['pass']} {'layer' if r['part'] == 'layer' else 'op'}")
    layer_error_by_clock(recs, curve, os.path.join(run_dir, "validate-h100x1-layer.txt"))
    att = [r for r in recs if r["op"] in ("attention", "layer")]
    print("\n1 x H100: the whole layer and its attention op, record by record")
    print("| model | tokens | what | pass | ms | SM MHz | capped | factor on the curve |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    for r in att:
        print(f"| {r['model']} | {r['tokens_per_gpu']} | {r['op']} | {r['pass']} | "
              f"{r['ms']:.1f} | {r['sm_mhz']:.0f} | {r['capped']:.0%} | "
              f"x{SC.factor_at(curve, r['sm_mhz']):.3f} |")


if __name__ == "__main__":
    main()
