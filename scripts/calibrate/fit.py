#!/usr/bin/env python3
"""Turn scripts/calibrate/calibrate.py's measurements into a topology file.

usage: scripts/calibrate/fit.py CALIBRATION_DIR --out topologies/NAME.json
           [--name NAME] [--replay build/tasp-replay] [--sim build/tasp-sim]

What comes from where (every constant is measured or fitted, none typed in):
- comm.host_us: host time of one grouped send/receive call
  (overhead-nN.jsonl, batch_p2p_ring).
- port capacity, per-flow cap, device launch costs: fitted to
  links-n*.jsonl by scripts/fit_links.py's coordinate descent.
- compute.table: every attention kernel of compute-nN.jsonl.  A kernel
  timed alone includes the host time of issuing it (the GPU idles until
  the launch arrives), so the table holds ms minus the measured host cost
  of one call; the simulator adds host issue time on its own clock.
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
import glob
import json
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


def compute_section(compute, overhead, what):
    kern_host = [r for r in overhead if r["op"] == "attn_fwd"]
    merges = [r for r in overhead if r["op"] == "merge"]
    table, ratios = [], []
    for r in compute:
        if r["op"] != "attn_fwd":
            continue
        host_ms = nearest(kern_host, r["sq"])["host_us"] * 1e-3
        fwd = max(r["ms"] - host_ms, 0.5 * r["ms"])
        bwd = max(r["bwd_ms_est"], fwd)
        if r["sq"] >= 6144:
            ratios.append(bwd / fwd)
        table.append({"batch": r["B"], "heads": r["H"], "head_dim": r["D"], "sq": r["sq"],
                      "sk": r["sk"], "causal": r["causal"], "fwd_ms": round(fwd, 5),
                      "bwd_ms": round(bwd, 5)})
    kelems = [r["B"] * r["sq"] * r["H"] * r["D"] / 1e3 for r in merges]
    fixed_us, us_per_kelem = line_fit(kelems, [r["gpu_us"] for r in merges])
    return {
        "model": "table",
        "source": f"{what}: compute-n*.jsonl and overhead-n*.jsonl, by scripts/calibrate/fit.py",
        "host_us": round(statistics.median(r["host_us"] for r in kern_host), 1),
        "merge_host_us": round(statistics.median(r["host_us"] for r in merges), 1),
        "merge_fixed_us": round(max(fixed_us, 0.0), 1),
        "merge_ns_per_kelem": round(us_per_kelem * 1e3, 2),
        "bwd_ratio": round(statistics.median(ratios), 3),
        "table": table,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("calibration")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name")
    ap.add_argument("--replay", default="build/tasp-replay")
    ap.add_argument("--sim", default="build/tasp-sim")
    a = ap.parse_args()
    d = a.calibration
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
        "compute": compute_section(read_jsonl(computes[-1]), overhead, d),
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
    with open(tmp, "w") as f:
        json.dump(topo, f, indent=1)
        f.write("\n")
    os.replace(tmp, a.out)
    print(f"fit: wrote {a.out}")


if __name__ == "__main__":
    main()
