#!/usr/bin/env python3
"""Turn scripts/calibrate/calibrate.py's measurements into a topology file.

usage: scripts/calibrate/fit.py CALIBRATION_DIR --out topologies/NAME.json
           [--name NAME] [--replay build/tasp-replay] [--sim build/tasp-sim]
           [--kernels SWEEP.jsonl ...] [--aspects-from SWEEP.jsonl] [--compute-only]
       scripts/calibrate/fit.py --scale-from REFERENCE.json --out topologies/NAME.json
       scripts/calibrate/fit.py KERNEL_DIR --user-kernel --out topologies/NAME.json
       scripts/calibrate/fit.py --fp8-gemm FP8GEMM.jsonl --out topologies/NAME.json
       scripts/calibrate/fit.py --elementwise-from LAYER_JSONL --out topologies/NAME.json
       scripts/calibrate/fit.py CALIBRATION_DIR --bwd-kernels BWD_SMALL.jsonl --out topologies/NAME.json

--compute-only rewrites the kernel table of an existing --out topology and
leaves the rest of it (links, host costs) as it is; it needs only
compute-nN.jsonl and overhead-nN.jsonl.  --kernels adds the kernels of
shapes (head dim, batch x heads) the calibration's own sweep lacks from
another sweep of the same GPU and software (its host cost subtracted with this calibration's
overhead rows).  --aspects-from keeps a sweep of the same kernels on a GPU
of the same die as compute.aspect_table, for the aspects (sk/sq) the table
lacks (src/compute.h).  --user-kernel rewrites the kernel table of an existing --out topology from
a user kernel's sweep (calibrate.py --parts kernels --kernel MODULE:FUNCTION,
scripts/calibrate/user_kernel.py): the same table format and host-cost
subtraction as below, the flash-specific aspect_table and kernel_model
removed.  --elementwise-from sets compute.elementwise_gbps / elementwise_bwd_gbps of an existing --out
topology from a layer calibration's ops timed alone (elementwise_rates.py).
--bwd-kernels sets the backward of --out's kernel table, where
CALIBRATION_DIR estimated it from an autograd step (fwd_bwd_ms - ms), to
the backward call's kernels at the shapes a profiled run measured
(calibration/h200x1-bwd-small/bwd_small.py records): that estimate holds
the step's own gradient kernels (.grad accumulation), which a pass does not
run (its own gradient sums are plan tasks: src/sched/rotate.c), and where
the step is host-bound (up to 1.5K tokens on the H200 tool hosts) the
GPU's wait for the host; bwd_kernels() says how each is taken off.  --scale-from gives an uncalibrated GPU the kernel
table of REFERENCE.json scaled to its saturated rate: table_scale =
peak_tflops x efficiency of --out over the reference's saturated forward
rate; --out's compute.peak_tflops and efficiency must say where they come
from in its sources.  --fp8-gemm writes the FP8 products of an FP8 GEMM
sweep (scripts/calibrate/fp8_gemm.py's records, "dtype": "fp8") into
--out's compute.fp8_gemm_table (gemm_shapes.py's entries, which
--precision fp8 prices the linear layers from) and names the file in
compute.source; the rest of --out stays.

What comes from where (every constant is measured or fitted, none typed in):
- comm.host_us: host time of one grouped send/receive call
  (overhead-nN.jsonl, batch_p2p_ring).
- port capacity, per-flow cap, device launch costs: fitted to
  links-n*.jsonl by scripts/fit_links.py's coordinate descent.
- compute.table: every attention kernel of compute-nN.jsonl, with its
  batch, heads, KV heads and head dim (the table is indexed by head dim,
  aspect and FLOPs: src/compute.h).  A kernel timed alone includes the
  host time of issuing it (the GPU idles until the launch arrives), so the
  table holds ms minus the measured host cost of one call (the overhead
  row of the nearest length; a note names kernels outside the lengths the
  overhead rows measure); so does a backward timed alone (bwd_ms; where
  the backward is fwd_bwd_ms - ms the host time cancels).  The simulator
  adds host issue time on its own clock.
- compute.host_us / merge_host_us: host time per kernel / per merge
  (overhead-nN.jsonl), median over sizes.
- merge_fixed_us, merge_ns_per_kelem: least-squares line through the GPU
  time of a merge against its output elements (overhead-nN.jsonl).
- bwd_ratio: median backward/forward of kernels of 6K queries and more.
- comm.kernel_blocks_comm: whether a step's transfer waits for the step's
  attention kernels (no overlap) or runs beside them; where passes-nN.jsonl
  exists, the choice with the smaller median pass error is written.
"""
import argparse
import bisect
import glob
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import fit_links  # noqa: E402
import validate_passes  # noqa: E402


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def nearest(rows, sq):
    return min(rows, key=lambda r: abs(r["sq"] - sq))


def line_fit(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def kernel_table(compute, overhead, path):
    """Table entries of a kernel sweep, host issue time taken off (module
    doc); notes for kernels whose host cost comes from beyond the lengths
    the overhead rows measure."""
    kern_host = [r for r in overhead if r["op"] == "attn_fwd"]
    lo, hi = min(r["sq"] for r in kern_host), max(r["sq"] for r in kern_host)
    table, far = [], set()
    for r in compute:
        if r["op"] != "attn_fwd":
            continue
        if not lo <= r["sq"] <= hi:
            far.add(r["sq"])
        host_ms = nearest(kern_host, r["sq"])["host_us"] * 1e-3
        fwd = max(r["ms"] - host_ms, 0.5 * r["ms"])
        if r.get("bwd_ms") is not None and r.get("fwd_bwd_ms") is None:
            bwd = max(r["bwd_ms"] - host_ms, 0.5 * r["bwd_ms"])
        else:
            bwd = r["bwd_ms_est"]
        e = {"batch": r["B"], "heads": r["H"]}
        if "Hk" in r:
            e["kv_heads"] = r["Hk"]
        e.update({"head_dim": r["D"], "sq": r["sq"], "sk": r["sk"], "causal": r["causal"],
                  "fwd_ms": round(fwd, 5), "bwd_ms": round(max(bwd, fwd), 5)})
        table.append(e)
    for sq in sorted(far):
        print(f"fit: note: {path}: kernels of sq={sq}: host cost extrapolated from the overhead "
              f"row at sq={nearest(kern_host, sq)['sq']} (overhead rows measure sq {lo}..{hi})")
    return table


def flops(e):
    f = 4.0 * e["batch"] * e["heads"] * e["sq"] * e["sk"] * e["head_dim"]
    return f / 2 if e["causal"] else f


def aspect(e):
    return math.log2(e["sk"] / e["sq"])


def loglog(xs, ys, x):
    """Piecewise log-log interpolation through ascending xs (None outside)."""
    if not xs[0] <= x <= xs[-1]:
        return None
    i = min(max(bisect.bisect_left(xs, x), 1), len(xs) - 1)
    w = math.log(x / xs[i - 1]) / math.log(xs[i] / xs[i - 1]) if xs[i] > xs[i - 1] else 0
    return ys[i - 1] * (ys[i] / ys[i - 1]) ** w


def describe_table(table, what):
    """What the table measures, and notes on what the simulator models
    beyond it (src/compute.h)."""
    for causal in (False, True):
        rows = [e for e in table if e["causal"] == causal]
        if not rows:
            continue
        mask = "causal" if causal else "full"
        dims = sorted({e["head_dim"] for e in rows})
        for d in dims:
            at = [e for e in rows if e["head_dim"] == d]
            asp = sorted({aspect(e) for e in at})
            bh = sorted({e["batch"] * e["heads"] for e in at})
            fl = [flops(e) for e in at]
            big = [e for e in at if aspect(e) == 0 and flops(e) >= 0.5 * max(fl)]
            rate = statistics.median(flops(e) / e["fwd_ms"] * 1e-9 for e in big) if big else 0
            print(f"fit: {what}: {mask} D={d}: {len(at)} kernels, aspects "
                  f"{', '.join(f'{a:+g}' for a in asp)}, B*H {'/'.join(map(str, bh))}, "
                  f"{min(fl):.3g}..{max(fl):.3g} FLOPs; saturated forward {rate:.0f} TFLOP/s")
            if len(asp) == 1:
                print(f"fit: note: {what}: {mask} D={d} measures aspect {asp[0]:+g} alone: other "
                      "aspects take the ratio measured at another shape or in aspect_table")
        bhs = sorted({e["batch"] * e["heads"] for e in rows})
        print(f"fit: note: {what}: {mask} kernels of head dims outside {dims[0]}..{dims[-1]} "
              f"or B*H outside {bhs[0]}..{bhs[-1]} are priced on the nearest measured curve at "
              "equal FLOPs, and beyond the largest FLOPs of a curve at its last rate")


def compare(rows, key, what, label, reverse=False):
    """Kernel times of each value of key(e) against the curve of its first
    value (the largest with reverse) at equal FLOPs, forward and backward,
    where the FLOPs fall inside that curve."""
    vals = sorted({key(e) for e in rows}, reverse=reverse)
    if len(vals) < 2:
        return
    base = sorted((flops(e), e["fwd_ms"], e["bwd_ms"]) for e in rows if key(e) == vals[0])
    xs = [b[0] for b in base]
    for v in vals[1:]:
        errs = []
        for e in rows:
            if key(e) != v:
                continue
            for k, col in ((1, "fwd_ms"), (2, "bwd_ms")):
                t = loglog(xs, [b[k] for b in base], flops(e))
                if t is not None:
                    errs.append(e[col] / t - 1)
        if errs:
            print(f"fit: {what}: {label} {v} against {vals[0]} at equal FLOPs: time "
                  f"{100 * statistics.median(errs):+.1f}% median, {100 * min(errs):+.1f}% to "
                  f"{100 * max(errs):+.1f}% over {len(errs)} kernel times")


def shape_effects(table, what):
    """How far each shape variable moves a kernel's time at equal FLOPs in
    one sweep: what the table must be indexed by (src/compute.h)."""
    for causal in (False, True):
        mask = "causal" if causal else "full"
        rows = [e for e in table if e["causal"] == causal and aspect(e) == 0]
        for d in sorted({e["head_dim"] for e in rows}):
            for bh in sorted({e["batch"] * e["heads"] for e in rows}):
                compare([e for e in rows if e["head_dim"] == d and e["batch"] * e["heads"] == bh],
                        lambda e: e.get("kv_heads", e["heads"]), what,
                        f"{mask} D={d} B*H={bh}: KV heads")
        for d in sorted({e["head_dim"] for e in rows}):
            compare([e for e in rows if e["head_dim"] == d], lambda e: e["batch"] * e["heads"],
                    what, f"{mask} D={d}: B*H")
        for bh in sorted({e["batch"] * e["heads"] for e in rows}):
            compare([e for e in rows if e["batch"] * e["heads"] == bh],
                    lambda e: e["head_dim"], what, f"{mask} B*H={bh}: head dim", reverse=True)


def compute_section(compute, overhead, what, extra=(), aspects=None):
    merges = [r for r in overhead if r["op"] == "merge"]
    kern_host = [r for r in overhead if r["op"] == "attn_fwd"]
    table = kernel_table(compute, overhead, what)
    shape_effects(table, what)
    # backward/forward where none is measured: this calibration's own kernels
    ratios = [e["bwd_ms"] / e["fwd_ms"] for e in table if e["sq"] >= 6144]
    sources = [f"{what}: compute-n*.jsonl and overhead-n*.jsonl"]
    def shape(e):
        return e["head_dim"], e["batch"] * e["heads"]
    own = {shape(e) for e in table}
    for path in extra:
        sweep = kernel_table(read_jsonl(path), overhead, path)
        shape_effects(sweep, path)
        more = [e for e in sweep if shape(e) not in own]
        if more:
            table += more
            shapes = ", ".join(f"D={d} B*H={bh}" for d, bh in sorted({shape(e) for e in more}))
            sources.append(f"{shapes} from {path} (host cost as {what})")
    kelems = [r["B"] * r["sq"] * r["H"] * r["D"] / 1e3 for r in merges]
    fixed_us, us_per_kelem = line_fit(kelems, [r["gpu_us"] for r in merges])
    describe_table(table, what)
    sec = {
        "model": "table",
        "source": "; ".join(sources) + ", by scripts/calibrate/fit.py",
        "host_us": round(statistics.median(r["host_us"] for r in kern_host), 1),
        "merge_host_us": round(statistics.median(r["host_us"] for r in merges), 1),
        "merge_fixed_us": round(max(fixed_us, 0.0), 1),
        "merge_ns_per_kelem": round(us_per_kelem * 1e3, 2),
        "bwd_ratio": round(statistics.median(ratios), 3),
        "table": table,
    }
    if aspects:
        adir = os.path.dirname(aspects)
        aover = read_jsonl(sorted(glob.glob(f"{adir}/overhead-n*.jsonl"))[-1])
        sec["aspect_table"] = kernel_table(read_jsonl(aspects), aover, aspects)
        sec["source"] += (f"; aspect_table: {aspects} (same kernels on a GPU of the same die, "
                          "for the ratio of a non-square kernel's time to a square one's)")
    return sec


def saturated_tflops(table):
    """Forward rate of the reference's largest square full kernels of its
    largest head dim (the rate a long chunk reaches)."""
    d = max(e["head_dim"] for e in table)
    sq = [e for e in table if e["head_dim"] == d and not e["causal"] and e["sq"] == e["sk"]]
    big = [e for e in sq if flops(e) >= 0.5 * max(flops(x) for x in sq)]
    return statistics.median(flops(e) / e["fwd_ms"] * 1e-9 for e in big)


def file_indent(path):
    """The indent of an existing JSON file's first key (fit.py writes 1)."""
    try:
        with open(path) as f:
            f.readline()
            line = f.readline()
        return max(len(line) - len(line.lstrip(" ")), 1)
    except OSError:
        return 1


def dump(topo, path, indent=1):
    """JSON at the given indent, one kernel per line in the tables."""
    keys = ("table", "aspect_table", "gemm_table", "fp8_gemm_table")
    comp = topo.get("compute", {})
    held = {k: comp.pop(k) for k in keys if k in comp}
    for k in held:
        comp[k] = f"@@{k}@@"
    text = json.dumps(topo, indent=indent)
    for k, rows in held.items():
        body = ",\n".join(" " * 3 * indent + json.dumps(e) for e in rows)
        text = text.replace(f'"@@{k}@@"', "[\n" + body + "\n" + " " * 2 * indent + "]")
        comp[k] = rows
    tmp = path + ".tmp.json"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def scale_from(ref_path, out):
    """--scale-from: the reference's kernel table, run table_scale times
    faster (module doc)."""
    ref = json.load(open(ref_path))["compute"]
    topo = json.load(open(out))
    c = topo["compute"]
    rate = saturated_tflops(ref["table"])
    k = c["peak_tflops"] * c.get("efficiency", 1.0) / rate
    c["model"] = "table"
    c["table_scale"] = round(k, 4)
    # the GPU the table was measured on, for tasp-sim's confidence column
    # ("scaled from ..."): the file's own name for it where it has one, else
    # the reference's, else the reference topology's name
    c["table_from"] = c.get("table_from") or ref.get("table_from") or \
        json.load(open(ref_path)).get("name", ref_path)
    c["table"] = ref["table"]
    if "aspect_table" in ref:
        c["aspect_table"] = ref["aspect_table"]
    c["source"] = (f"kernel table of {ref_path} ({ref.get('source', '')}), table_scale "
                   f"{c['peak_tflops']:g} x {c.get('efficiency', 1.0):g} / {rate:.0f}")
    line = (f"compute.table: not measured on this GPU: the kernel table measured for "
            f"{ref_path}, its times as a function of FLOPs, head dim and aspect, run "
            f"{k:.3f}x faster (table_scale = peak_tflops {c['peak_tflops']:g} x efficiency "
            f"{c.get('efficiency', 1.0):g} over the reference's saturated forward rate of "
            f"{rate:.0f} TFLOP/s); the fixed costs of small kernels stay the reference's")
    topo["sources"] = [s for s in topo.get("sources", []) if not s.startswith("compute.table:")]
    topo["sources"].append(line)
    print(f"fit: note: {out}: kernels extrapolated from {ref_path}: table_scale {k:.3f}")
    dump(topo, out, file_indent(out))
    print(f"fit: wrote {out}")


def fp8_gemm(records_path, out):
    """--fp8-gemm: compute.fp8_gemm_table of --out from an FP8 GEMM sweep
    (module doc)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gemm_shapes
    try:
        recs = read_jsonl(records_path)
        topo = json.load(open(out))
    except (OSError, ValueError) as e:
        print(f"fit: --fp8-gemm: {e}", file=sys.stderr)
        sys.exit(2)
    rows = gemm_shapes.table(recs, "fp8")
    if not rows:
        print(f"fit: {records_path}: no FP8 GEMM record (\"part\": \"gemm\", \"dtype\": "
              "\"fp8\"; scripts/calibrate/fp8_gemm.py writes them)", file=sys.stderr)
        sys.exit(2)
    c = topo.setdefault("compute", {})
    old_source = c.get("source", "")
    fresh = "fp8_gemm_table" not in c
    c["fp8_gemm_table"] = rows
    shapes = len({(e["n"], e["k"]) for e in rows})
    mark = "; fp8_gemm_table: "
    c["source"] = (old_source.split(mark)[0] + mark +
                   f"{records_path} ({len(rows)} FP8 products of {shapes} layer shapes), by "
                   "scripts/calibrate/fit.py --fp8-gemm")
    if not (fresh and append_last(out, topo, old_source)):
        dump(topo, out, file_indent(out))
    print(f"fit: wrote {out} ({len(rows)} FP8 GEMM products)")


def append_last(path, topo, old_source):
    """Where "compute" is the file's last object and fp8_gemm_table is
    new: the table added at its end and its source rewritten in place, the
    rest of the file's text (its hand layout) untouched; False where that
    text would not read back as topo (then the caller dumps the whole)."""
    text = open(path).read()
    c = topo["compute"]
    tail = "\n  }\n}\n"
    if list(topo)[-1] != "compute" or not text.endswith(tail) or \
            text.count(json.dumps(old_source)) != 1:
        return False
    body = ",\n".join("      " + json.dumps(e) for e in c["fp8_gemm_table"])
    new = (text[:-len(tail)] + ',\n    "fp8_gemm_table": [\n' + body + "\n    ]" + tail)
    new = new.replace(json.dumps(old_source), json.dumps(c["source"]))
    if json.loads(new) != topo:
        return False
    tmp = path + ".tmp.json"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, path)
    return True


def user_kernel(d, out, name=None):
    """--user-kernel: the kernel table of --out from a user kernel's sweep
    (calibrate.py --parts kernels --kernel MODULE:FUNCTION): its measured
    kernels (kernels-nN.jsonl, op "attn") through kernel_table as the
    bundled tables go, host cost from kernel-host-nN.jsonl.  The rest of
    --out stays; its aspect_table and kernel_model go, being PyTorch flash's
    (a lookup beyond the user's table is then priced on the table's nearest
    curve and says `extrapolated`)."""
    sweeps = sorted(glob.glob(f"{d}/kernels-n*.jsonl"))
    hosts = sorted(glob.glob(f"{d}/kernel-host-n*.jsonl"))
    if not (sweeps and hosts):
        print(f"fit: {d}: --user-kernel needs kernels-nN.jsonl and kernel-host-nN.jsonl "
              "(calibrate.py --parts kernels --kernel MODULE:FUNCTION writes them)",
              file=sys.stderr)
        sys.exit(2)
    rows = read_jsonl(sweeps[-1])
    overhead = read_jsonl(hosts[-1])
    need = ("B", "H", "D", "sq", "sk", "causal", "ms", "bwd_ms")
    timed = []
    for i, r in enumerate(rows, 1):
        if "unmeasured" in r:
            continue
        missing = [k for k in need if k not in r]
        if missing or not (r["ms"] > 0 and r["bwd_ms"] > 0):
            print(f"fit: {sweeps[-1]}:{i}: a measured kernel needs {', '.join(need)} with "
                  f"positive times (missing: {', '.join(missing) or 'none'})", file=sys.stderr)
            sys.exit(2)
        timed.append(dict(r, op="attn_fwd"))
    if not timed or not any(r.get("op") == "attn_fwd" and "host_us" in r for r in overhead):
        print(f"fit: {d}: no measured kernel in {sweeps[-1]} or no attn_fwd host row in "
              f"{hosts[-1]}", file=sys.stderr)
        sys.exit(2)
    kernels = sorted({r["kernel"] for r in timed if "kernel" in r})
    what = ", ".join(kernels) or "the kernel"
    try:
        topo = json.load(open(out))
    except (OSError, ValueError) as e:
        print(f"fit: --out {out}: cannot read the topology to rewrite: {e}", file=sys.stderr)
        sys.exit(2)
    table = kernel_table(timed, overhead, sweeps[-1])
    describe_table(table, sweeps[-1])
    topo["name"] = name or os.path.splitext(os.path.basename(out))[0]
    topo["description"] = (topo.get("description", "").split("; kernels: ")[0] +
                           f"; kernels: {what}")
    c = topo.setdefault("compute", {})
    c["model"] = "table"
    for k in ("aspect_table", "kernel_model", "table_scale", "table_from"):
        c.pop(k, None)
    c["table"] = table
    ratios = [e["bwd_ms"] / e["fwd_ms"] for e in table if e["sq"] >= 6144] or \
        [e["bwd_ms"] / e["fwd_ms"] for e in table]
    c["bwd_ratio"] = round(statistics.median(ratios), 3)
    host = statistics.median(r["host_us"] for r in overhead if r.get("op") == "attn_fwd")
    c["source"] = (f"{what}: {sweeps[-1]} (host cost of a call {hosts[-1]}, taken off each "
                   "kernel), by scripts/calibrate/fit.py --user-kernel")
    topo["sources"] = [x for x in topo.get("sources", []) if not x.startswith("compute.table:")]
    topo["sources"].append(f"compute.table: {what} timed by scripts/calibrate/calibrate.py "
                           f"--parts kernels --kernel, {d}; aspect_table and kernel_model "
                           "(PyTorch flash's) removed")
    print(f"fit: note: {what}: measured host cost of one call {host:.0f} us (median); the "
          f"topology's compute.host_us ({c.get('host_us', 'unset')}) is kept")
    dump(topo, out, file_indent(out))
    print(f"fit: wrote {out} ({len(table)} kernels of {what})")


def elementwise_from(layer_jsonl, out):
    """Write compute.elementwise_gbps of --out from the ops a layer
    calibration timed alone, forward (elementwise_rates.py: bytes tasp-sim
    counts over the measured time less the kernels' fixed cost, medians
    from 8K tokens), with a source naming the records.  The backward's
    rates are printed, not written: they come from forward+backward less
    forward of an op whose timing loop also adds into its inputs' .grad
    (a byte count assumed, not seen apart in those records), and they
    exceed the forward's by up to 1.7x for the same access pattern (RoPE),
    so the backward kernels keep the forward's rate (compute.h)."""
    import elementwise_rates
    topo = json.load(open(out))
    c = topo.setdefault("compute", {})
    fixed_us = c.get("copy_fixed_us", 5.0)
    res, s = elementwise_rates.rates(read_jsonl(layer_jsonl), fixed_us * 1e-6)
    if not res["fwd"]:
        print(f"fit: {layer_jsonl}: no one-GPU layer_op records of the element-wise ops "
              "(rmsnorm, rope, swiglu, residual_add) from 8K tokens", file=sys.stderr)
        sys.exit(2)
    c["elementwise_gbps"] = res["fwd"]
    c.pop("elementwise_bwd_gbps", None)
    n = min(len(v) for (kind, pas), v in s.items() if pas == "fwd")
    note = (f"compute.elementwise_gbps: each op alone, forward "
            f"({layer_jsonl}, part layer_op, from 8K tokens, {n} records a kind): "
            f"the bytes tasp-sim counts over the measured time less {fixed_us:g} us a kernel, "
            f"median (scripts/calibrate/elementwise_rates.py)")
    topo["sources"] = [note] + [x for x in topo.get("sources", [])
                                if not x.startswith("compute.elementwise_gbps")]
    # edit the text in place (hand-formatted files stay as they are): the
    # old lines of these fields go, new ones open "compute" and "sources"
    lines = [x for x in open(out).read().split("\n")
             if not x.lstrip().startswith(('"elementwise_gbps"', '"elementwise_bwd_gbps"',
                                           '"compute.elementwise_gbps'))]
    ind = " " * file_indent(out)
    for i, x in enumerate(lines):
        if x.startswith(ind + '"compute": {') or x.startswith(ind + '"sources": ['):
            if x.rstrip().endswith(("{", "[")):
                new = ([f'{ind * 2}"elementwise_gbps": {json.dumps(res["fwd"], sort_keys=True)},']
                       if '"compute"' in x else [f"{ind * 2}{json.dumps(note)},"])
                lines[i + 1:i + 1] = new
    text = "\n".join(lines)
    if json.loads(text) != topo:
        print(f"fit: {out}: cannot place the element-wise rates in its text (\"compute\" "
              "and \"sources\" must open on lines of their own); left as it was",
              file=sys.stderr)
        sys.exit(2)
    with open(out, "w") as f:
        f.write(text)
    print(f"fit: wrote {out} (element-wise forward rates only): {res['fwd']}; backward "
          f"(not written): {res['bwd']}")


# An autograd step (calibrate.py measure_compute) whose backward estimate
# (fwd_bwd_ms - ms) exceeds the backward's kernels plus the step's other
# kernels by more than this was host-bound: on the H200 tool tables the
# GPU-bound shapes sit at 1.01-1.07 of them (their kernels run back to back,
# 2-4% slower than under the profiler's rests) and the host-bound ones at
# 1.27-4.96 (calibration/h200x1-bwd-small/README.md); 1.15 lies in the gap.
HOST_BOUND_STEP = 1.15


def bwd_kernels(d, records_path, out):
    """--bwd-kernels: the backward of --out's table entries that
    CALIBRATION_DIR's compute-nN.jsonl estimated from an autograd step, at
    the shapes records_path profiled, as the backward call's kernels
    (module doc): the estimate less the step's other kernels (the .grad
    accumulation, the ones_like; fwd_bwd_gpu_ms - fwd_gpu_ms - bwd_gpu_ms)
    where the step was GPU-bound, the profiled kernels' time where it was
    host-bound (HOST_BOUND_STEP).  The table's lines are edited in place (one
    entry a line, fit.py's dump) and a source line added; the rest of the
    file's text stays, and a second run gives the same file."""
    computes = sorted(glob.glob(f"{d}/compute-n*.jsonl"))
    try:
        recs = read_jsonl(records_path)
        est = {(r["B"], r["H"], r["D"], r["sq"], r["sk"], r["causal"]): r["bwd_ms_est"]
               for r in (read_jsonl(computes[-1]) if computes else [])
               if r.get("op") == "attn_fwd" and r.get("fwd_bwd_ms") is not None}
        topo = json.load(open(out))
    except (OSError, ValueError, KeyError) as e:
        print(f"fit: --bwd-kernels: {e}", file=sys.stderr)
        sys.exit(2)
    if not est:
        print(f"fit: {d}: no compute-nN.jsonl kernel with a backward estimated from an "
              "autograd step (fwd_bwd_ms)", file=sys.stderr)
        sys.exit(2)
    need = ("B", "H", "D", "sq", "sk", "causal", "bwd_gpu_ms", "fwd_gpu_ms", "fwd_bwd_gpu_ms")
    new = {}
    for i, r in enumerate(recs):
        missing = [k for k in need if not isinstance(r.get(k), (int, float))]
        if missing or not r["bwd_gpu_ms"] > 0:
            print(f"fit: {records_path}: record {i + 1}: expected numbers {', '.join(need)} "
                  f"with bwd_gpu_ms > 0 (bwd_small.py's records); missing or bad: "
                  f"{', '.join(missing) or 'bwd_gpu_ms'}", file=sys.stderr)
            sys.exit(2)
        k = (r["B"], r["H"], r["D"], r["sq"], r["sk"], r["causal"])
        if k not in est:
            continue
        other = max(r["fwd_bwd_gpu_ms"] - r["fwd_gpu_ms"] - r["bwd_gpu_ms"], 0.0)
        ratio = est[k] / (r["bwd_gpu_ms"] + other)
        host_bound = ratio > HOST_BOUND_STEP
        new[k] = r["bwd_gpu_ms"] if host_bound else est[k] - other
        print(f"fit: sq {k[3]} sk {k[4]} {'causal' if k[5] else 'full'}: estimate "
              f"{est[k]:.3f} ms = {ratio:.2f} x kernels + other kernels: "
              f"{'host-bound, the kernels' if host_bound else 'the estimate less the other kernels'}"
              f" {new[k]:.3f} ms")
    text = open(out).read()
    n = 0
    for e in topo.get("compute", {}).get("table", []):
        k = (e["batch"], e["heads"], e["head_dim"], e["sq"], e["sk"], e["causal"])
        if k not in new:
            continue
        old = json.dumps(e)
        e["bwd_ms"] = round(new[k], 5)
        if text.count(old) != 1:
            print(f"fit: {out}: table entry {old} is not on a line of its own; left as it was",
                  file=sys.stderr)
            sys.exit(2)
        text = text.replace(old, json.dumps(e))
        n += 1
    if not n:
        print(f"fit: {out}: no table entry at a shape of both {records_path} and {d}",
              file=sys.stderr)
        sys.exit(2)
    note = (f"compute.table bwd_ms at the {n} shapes of {records_path}: the backward call's "
            f"kernels, not {computes[-1]}'s autograd step less the forward: that estimate less "
            f"the step's other kernels, or where the step was host-bound (over "
            f"{HOST_BOUND_STEP} x the kernels and other kernels) the kernels' GPU time "
            f"(torch.profiler), by scripts/calibrate/fit.py --bwd-kernels")
    topo["sources"] = [note] + [x for x in topo.get("sources", [])
                                if not x.startswith("compute.table bwd_ms")]
    lines = [x for x in text.split("\n") if not x.lstrip().startswith('"compute.table bwd_ms')]
    ind = " " * file_indent(out)
    for i, x in enumerate(lines):
        if x.startswith(ind + '"sources": [') and x.rstrip().endswith("["):
            lines[i + 1:i + 1] = [f"{ind * 2}{json.dumps(note)},"]
            break
    text = "\n".join(lines)
    if json.loads(text) != topo:
        print(f"fit: {out}: cannot place the note in its text (\"sources\" must open on a "
              "line of its own); left as it was", file=sys.stderr)
        sys.exit(2)
    tmp = out + ".tmp.json"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)
    print(f"fit: wrote {out} ({n} backward entries from {records_path})")

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("calibration", nargs="?")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernels", nargs="+", default=[])
    ap.add_argument("--aspects-from")
    ap.add_argument("--compute-only", action="store_true")
    ap.add_argument("--scale-from")
    ap.add_argument("--name")
    ap.add_argument("--replay", default="build/tasp-replay")
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--user-kernel", action="store_true")
    ap.add_argument("--fp8-gemm", metavar="JSONL")
    ap.add_argument("--elementwise-from", metavar="LAYER_JSONL")
    ap.add_argument("--bwd-kernels", metavar="BWD_SMALL_JSONL")
    a = ap.parse_args()
    if a.bwd_kernels:
        if not a.calibration:
            ap.error("--bwd-kernels needs CALIBRATION_DIR (its compute-nN.jsonl)")
        bwd_kernels(a.calibration, a.bwd_kernels, a.out)
        return
    if a.fp8_gemm:
        fp8_gemm(a.fp8_gemm, a.out)
        return
    if a.elementwise_from:
        elementwise_from(a.elementwise_from, a.out)
        return
    if a.user_kernel:
        if not a.calibration:
            ap.error("--user-kernel needs CALIBRATION_DIR")
        user_kernel(a.calibration, a.out, a.name)
        return
    if a.scale_from:
        scale_from(a.scale_from, a.out)
        return
    if not a.calibration:
        ap.error("CALIBRATION_DIR is needed unless --scale-from is given")
    d = a.calibration
    if a.compute_only:
        computes = sorted(glob.glob(f"{d}/compute-n*.jsonl"))
        overheads = sorted(glob.glob(f"{d}/overhead-n*.jsonl"))
        if not (computes and overheads):
            sys.exit(f"fit: {d} needs compute-n*.jsonl and overhead-n*.jsonl")
        topo = json.load(open(a.out))
        new = compute_section(read_jsonl(computes[-1]), read_jsonl(overheads[-1]), d,
                              a.kernels, a.aspects_from)
        c = topo.setdefault("compute", {})
        c["model"] = "table"
        for k in ("source", "table", "aspect_table"):
            c.pop(k, None)
            if k in new:
                c[k] = new[k]
        topo["sources"] = [s for s in topo.get("sources", [])
                           if not s.startswith("compute.table:")]
        topo["sources"].append(f"compute.table: {new['source']}")
        dump(topo, a.out, file_indent(a.out))
        print(f"fit: wrote {a.out} (compute table only)")
        return
    envs = sorted(glob.glob(f"{d}/env-n*.json"), key=lambda p: json.load(open(p))["gpus"])
    computes = sorted(glob.glob(f"{d}/compute-n*.jsonl"))
    overheads = sorted(glob.glob(f"{d}/overhead-n*.jsonl"))
    links = sorted(glob.glob(f"{d}/links-n*.jsonl"))
    if not (envs and computes and overheads and links):
        sys.exit(f"fit: {d} needs env-n*.json, compute-n*.jsonl, overhead-n*.jsonl and "
                 "links-n*.jsonl (scripts/calibrate/calibrate.py writes them)")
    env = json.load(open(envs[-1]))
    n = env["gpus"]
    overhead = read_jsonl(overheads[-1])
    p2p_host = [r["host_us"] for r in overhead if r["op"] == "batch_p2p_ring"]
    name = a.name or os.path.splitext(os.path.basename(a.out))[0]
    topo = {
        "name": name,
        "description": f"{n} x {env['gpu']} on NVSwitch, fitted to {d} "
                       f"(PyTorch {env['torch']}, NCCL {env['nccl']})",
        "sources": [f"comm.host_us: host time of one batch_isend_irecv call, "
                    f"{overheads[-1]}"],
        "generator": {"kind": "nvswitch", "gpus": n, "port_gbps": 300.0, "latency_us": 3},
        "comm": {"host_us": round(p2p_host[0], 1) if p2p_host else 0.0, "launch_us": 0},
        "compute": compute_section(read_jsonl(computes[-1]), overhead, d, a.kernels,
                                   a.aspects_from),
    }
    tmp = a.out + ".tmp.json"
    with open(tmp, "w") as f:
        json.dump(topo, f)
    try:
        p, big, every = fit_links.fit(a.replay, tmp, links, topo["comm"]["host_us"])
    finally:
        os.unlink(tmp)
    fit_links.apply(topo, p, big, every, f"{d}/links-n*.jsonl")
    print("fit: " + fit_links.describe(p, big, every))
    passes = sorted(glob.glob(f"{d}/passes-n*.jsonl"))
    if passes:
        rows = read_jsonl(passes[-1])
        medians = {}
        for blocks in (False, True):
            topo["comm"]["kernel_blocks_comm"] = blocks
            with open(tmp, "w") as f:
                json.dump(topo, f)
            try:
                pred = validate_passes.predict(a.sim, tmp, rows)
            finally:
                os.unlink(tmp)
            medians[blocks] = statistics.median(
                abs(pred[(r["sched"], r["mask"], r["seq"], r["comm"], r["pass"])] / r["ms"] - 1)
                for r in rows)
            print(f"fit: kernel_blocks_comm {str(blocks).lower()}: median pass |error| "
                  f"{100 * medians[blocks]:.2f}%")
        topo["comm"]["kernel_blocks_comm"] = medians[True] < medians[False]
        topo["sources"].append(
            f"comm.kernel_blocks_comm: the choice with the smaller median |error| over "
            f"{passes[-1]} ({100 * min(medians.values()):.2f}% against "
            f"{100 * max(medians.values()):.2f}%)")
    dump(topo, a.out)
    print(f"fit: wrote {a.out}")


if __name__ == "__main__":
    main()
