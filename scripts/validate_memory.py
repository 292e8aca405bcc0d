#!/usr/bin/env python3
"""Predicted peak memory per GPU against torch.cuda.max_memory_allocated and
max_memory_reserved.

Reads the calibration tool's memory records (calibrate.py --parts memory:
calibration/h200x2-mem/memory-n2.jsonl, the one-rank programs of
emulated/*/memory-n*-emulated.jsonl, calibration/h100x4-sp/memory-n4.jsonl,
run on that set's fitted topology: FILE_TOPOLOGY, and the small passes of
calibration/h200x2-snap-host/memory-n2.jsonl), runs tasp-sim at every record's shape
with `--memory -` and compares each measured rank's peak with the same
GPU's prediction (a record of both ranks: the larger of the two on each
side; a one-rank program of rank R of N: GPU R).

What is compared, allocated: tasp-sim's peak counts the layer's inputs and
what the method allocates.  A measured rank's peak also holds what the
process had allocated before the pass beyond the inputs (the cuBLAS
workspace, 32 MiB for the softmax programs, 64 MiB for the linear ones:
calibration/h200x2-mem/README.md); that residue, the least forward
allocated_before - inputs_bytes of the process's programs of one layer kind
(a program's own buffers made before the pass, LASP-2's gathered states,
are the pass's: residues()), is taken off each rank's peak first.
Reserved: tasp-sim replays the pass's allocations through a model of the
caching allocator starting empty, its inputs first (each in a segment of
its own, rounded up to 2 MiB).  The measured pass starts after
empty_cache() with the inputs' segments and the process's own (cuBLAS's
workspace, small-pool segments of tiny tensors) reserved: that residue,
the forward's reserved_before less the inputs' segments (Q and the packed
KV, (B, c, H, D) and (B, c, 2, H, D) bf16), is taken off each rank's peak
reserved.

    scripts/validate_memory.py [--sim build/tasp-sim] [--min-tokens 4096]
                               [--summary] [--max-median PCT] [--max-error PCT]
                               [--max-reserved-error PCT] [--set FIELD=VALUE]
                               [FILE.jsonl ...]

Prints one row per record (method, attention, mask, pass, N, tokens per
GPU, predicted and measured GiB and error, allocated then reserved), then
the median and largest |error| per method and overall; exits 1 when
--max-median, --max-error (allocated) or --max-reserved-error is exceeded
(the fidelity test's thresholds), 2 on bad input."""
import argparse
import csv
import glob
import io
import json
import re
import os
import statistics
import subprocess
import sys

GIB = 2.0 ** 30
# the GPU count of a record -> a bundled topology with that many GPUs (the
# plan's memory does not depend on the GPU; only on the SP degree)
TOPOLOGY = {("softmax", 2): "h200x2-tool", ("linear", 2): "h200x2-linear",
            ("softmax", 4): "h200x4-tool", ("linear", 4): "h200x4-tool",
            ("softmax", 8): "h100x8", ("linear", 8): "h100x8"}
DEFAULT_FILES = ["calibration/h200x2-mem/memory-n2.jsonl",
                 "calibration/h200x2-mem/emulated/e4/memory-n4-emulated.jsonl",
                 "calibration/h200x2-mem/emulated/e8/memory-n8-emulated.jsonl",
                 "calibration/h100x4-sp/memory-n4.jsonl",
                 "calibration/h200x2-snap-host/memory-n2.jsonl"]
# a record set measured on a machine with its own fitted topology: its
# runs use that topology (the allocator model reads comm.record_stream and
# kernel_blocks_comm from it)
FILE_TOPOLOGY = {"calibration/h100x4-sp/memory-n4.jsonl":
                 "calibration/h100x4-sp/h100x4-tool.json"}
# a record set of processes of its own (its residues its own; rows marked)
FILE_SET = {"calibration/h100x4-sp/memory-n4.jsonl": "h100x4-sp",
            "calibration/h200x2-snap-host/memory-n2.jsonl": "h200x2-snap-host"}


def measured_gib(r, residue):
    """Per measured rank, its peak less the process's residue (the cuBLAS
    workspace): what the forward pass of the same configuration held before
    it beyond its inputs.  Not the backward's own `allocated_before`, which
    holds what the forward kept for it (all-gather's gathered K and V, the
    log-sum-exp), as tasp-sim's backward inputs do."""
    return [(p - residue[i]) / GIB for i, p in enumerate(r["peak_allocated"])]


def measured_reserved_gib(r, residue):
    return [(p - residue[i]) / GIB for i, p in enumerate(r["peak_reserved"])]


def segment(nbytes):
    """The caching allocator's segment for one request of nbytes (above
    10 MiB: rounded up to 2 MiB; exec_alloc.h)."""
    mb2 = 2 << 20
    if nbytes <= 1 << 20:
        return mb2
    if nbytes < 10 << 20:
        return 20 << 20
    return -(-nbytes // mb2) * mb2


def residues(recs):
    """Per configuration less its pass, per rank: the process's own bytes
    before a pass, allocated and reserved.  A forward's allocated_before -
    inputs_bytes, and its reserved_before less the segments of its inputs
    (Q and the packed KV), hold the process's residue (cuBLAS's workspace)
    and also what the program allocated in its constructor and uses in the
    pass: LASP-2's gathered-states buffer (calibrate.py Lasp2.glob, n float32
    states: 16 MiB at n = 8), LASP's received prefix and suffix states.
    Those belong to the pass (the model declares them), so the residue of a
    process is the least over its programs of one layer kind (Ring on linear
    layers and the softmax rings allocate nothing before the pass): per
    (attention, n, one-rank program or not) and rank.  What a program made
    before the pass that the pass never touches is residue too (idle()).
    The forward's are each pass's: the backward's and forward+backward's
    allocated_before also hold what the forward kept for them."""
    own = {}
    for r in recs:
        if r["pass"] == "fwd":
            x = r["B"] * r["tokens_per_gpu"] * r["H"] * r["D"] * 2
            inputs = segment(x) + segment(2 * x)
            own[config(r)] = ([b - r["inputs_bytes"] for b in r["allocated_before"]],
                              [b - inputs for b in r["reserved_before"]], process(r))
    least = {}
    for alloc, res, proc in own.values():
        if proc in least:
            a0, r0 = least[proc]
            least[proc] = ([min(a, b) for a, b in zip(a0, alloc)], [min(a, b) for a, b in zip(r0, res)])
        else:
            least[proc] = (alloc, res)
    out = {c: least[proc] for c, (_, _, proc) in own.items()}
    # a configuration measured without its forward (a record set of some
    # passes only): its process's least
    for r in recs:
        if config(r) not in out and process(r) in least:
            out[config(r)] = least[process(r)]
    return out


def idle(r):
    """Bytes a program allocated before pass r that the pass never uses:
    calibrate.py Lasp.__init__ makes `suf`, the backward's dM receive
    buffer (one float32 B x H x D x D state), which a forward leaves alone
    (LASP's own code makes it in its backward)."""
    if r["attention"] == "linear" and r["sched"] == "lasp" and r["pass"] == "fwd":
        return 4 * r["B"] * r["H"] * r["D"] * r["D"]
    return 0


def process(r):
    """The process whose residue a record carries: its layer kind, group
    size and, for a one-rank program, the rank it played."""
    return (r["attention"], r["n"], tuple(r["gpus"]) if "emulated_rank" in r else None,
            r.get("topology"), r.get("set"))


def config(r):
    return tuple(r.get(k) for k in ("attention", "sched", "usp_ulysses", "mask", "n",
                                    "tokens_per_gpu", "topology", "set"))


def records(files):
    """The records, one per configuration: a one-rank program's records
    (emulated_rank) of one configuration are its ranks, joined into one;
    `gpus` names the GPU of each rank list entry."""
    out = {}
    for f in files:
        try:
            with open(f) as fh:
                for line in fh:
                    r = json.loads(line)
                    if r.get("part") != "memory" or not r.get("comm", True):
                        continue
                    r["topology"] = FILE_TOPOLOGY.get(os.path.normpath(f))
                    r["set"] = FILE_SET.get(os.path.normpath(f))
                    key = tuple(r.get(k) for k in ("attention", "sched", "usp_ulysses", "mask",
                                                   "pass", "n", "tokens_per_gpu", "topology",
                                                   "set"))
                    gpus = ([r["emulated_rank"]] if "emulated_rank" in r
                            else list(range(len(r["peak_allocated"]))))
                    if key in out:
                        for k in ("peak_allocated", "allocated_before", "peak_reserved",
                                  "reserved_before"):
                            out[key][k] = out[key][k] + r[k]
                        out[key]["gpus"] = out[key]["gpus"] + gpus
                    else:
                        out[key] = dict(r)
                        out[key]["gpus"] = gpus
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"validate_memory: {f}: {e}")
    return list(out.values())


GPU_LINE = re.compile(r"^  GPU (\d+): ([0-9.]+) GiB \(reserved ([0-9.]+) GiB\):")


def predict(sim, r, sets=()):
    """Per GPU of the point: (peak allocated, peak reserved) GiB, from the
    --memory report; None where no bundled topology has r's GPU count."""
    n, att = r["n"], r["attention"]
    topo = r.get("topology") or TOPOLOGY.get((att, n))
    if topo is None:
        return None
    sched = r["sched"]
    if sched == "usp" and r["mask"] == "causal":
        # the calibration tool's USP runs zigzag_ring_flash_attn under a
        # causal mask (calibrate.py USP): tasp-sim's usp-zigzag
        sched = "usp-zigzag"
    cmd = [sim, "--topology", topo, "--sched", sched, "--seq", str(r["seq"]), "--sp", str(n),
           "--heads", str(r["H"]), "--kv-heads", str(r["H"]), "--head-dim", str(r["D"]),
           "--batch", str(r["B"]), "--mask", r["mask"], "--pass", r["pass"], "--csv", os.devnull,
           "--quiet", "--attention", att, "--memory", "-"]
    if r["sched"] == "usp":
        cmd += ["--usp-ulysses", str(r["usp_ulysses"])]
    if r["sched"] == "double-ring":
        # the measured program's window (calibrate.py --double-ring-inner)
        cmd += ["--double-ring-inner", str(r["double_ring_inner"])]
    # one rank's program: its communication is local copies, which no
    # NCCL stream records (exec_alloc.h)
    if "emulated_rank" in r:
        sets = [s for s in sets if not s.startswith("comm.record_stream=")]
        sets.append("comm.record_stream=false")
    # every record's pass starts right after torch.cuda.empty_cache()
    # (calibrate.py pass_memory), whose first cudaMalloc waits for the
    # driver's release (exec_alloc.h); a --set given wins
    if not any(s.startswith("comm.empty_cache_first=") for s in sets):
        sets = list(sets) + ["comm.empty_cache_first=true"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"validate_memory: {' '.join(cmd)}: {p.stderr.strip()}")
    gpus = {}
    for line in p.stdout.splitlines():
        m = GPU_LINE.match(line)
        if m:
            gpus[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    if len(gpus) != n:
        sys.exit(f"validate_memory: {' '.join(cmd)}: expected {n} GPU lines in --memory")
    return gpus


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--min-tokens", type=int, default=4096)
    ap.add_argument("--summary", action="store_true", help="the per-method table only")
    ap.add_argument("--max-median", type=float, help="percent: fail above this median |error|")
    ap.add_argument("--max-error", type=float, help="percent: fail above this largest |error|")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                    help="a topology field for every run (tasp-sim --set), e.g. "
                         "comm.record_stream=true; one-rank programs keep "
                         "comm.record_stream=false")
    ap.add_argument("--max-reserved-error", type=float,
                    help="percent: fail above this largest |error| of peak reserved")
    a = ap.parse_args()
    files = a.files or [f for f in DEFAULT_FILES if os.path.exists(f)]
    if not files:
        sys.exit("validate_memory: no memory records found")
    rows, by, byr = [], {}, {}
    recs = records(files)
    res = residues(recs)
    for r in recs:
        if r["tokens_per_gpu"] < a.min_tokens or config(r) not in res:
            continue
        pred = predict(a.sim, r, a.set)
        if pred is None:
            continue
        alloc_res, reserved_res = res[config(r)]
        meas = measured_gib(r, [a + idle(r) for a in alloc_res])
        # reserved: an idle buffer below 10 MiB shares its 20 MiB segment
        # with the program's others (LASP's `suf` with `pre`), which the
        # pass uses: the segment stays the pass's
        meas_r = measured_reserved_gib(r, reserved_res)
        # the busiest of the measured ranks, on each side
        p, x = max(pred[g][0] for g in r["gpus"]), max(meas)
        pr, xr = max(pred[g][1] for g in r["gpus"]), max(meas_r)
        err, err_r = 100 * (p - x) / x, 100 * (pr - xr) / xr
        name = r["sched"] + (f"-{r['usp_ulysses']}x{r['usp_ring']}" if r["sched"] == "usp" else "")
        name += "" if r["attention"] == "softmax" else " (linear)"
        name += f" [{r['set']}]" if r["set"] else ""
        rows.append((name, r["mask"], r["pass"], r["n"], r["tokens_per_gpu"], p, x, err,
                     pr, xr, err_r))
        by.setdefault(name, []).append(abs(err))
        byr.setdefault(name, []).append(abs(err_r))
    if not rows:
        sys.exit("validate_memory: no record to compare")
    if not a.summary:
        print("| method | mask | pass | N | tokens/GPU | predicted GiB | measured GiB | error "
              "| predicted reserved | measured reserved | error |")
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for m, mask, ps, n, t, p, x, e, pr, xr, er in rows:
            print(f"| {m} | {mask} | {ps} | {n} | {t // 1024}K | {p:.2f} | {x:.2f} | {e:+.1f}% "
                  f"| {pr:.2f} | {xr:.2f} | {er:+.1f}% |")
        print()
    print("| method | points | median abs error | max abs error | reserved: median | max |")
    print("|---|---:|---:|---:|---:|---:|")
    for m in by:
        print(f"| {m} | {len(by[m])} | {statistics.median(by[m]):.1f}% | {max(by[m]):.1f}% "
              f"| {statistics.median(byr[m]):.1f}% | {max(byr[m]):.1f}% |")
    allerr = [abs(r[7]) for r in rows]
    allres = [abs(r[10]) for r in rows]
    med, mx = statistics.median(allerr), max(allerr)
    medr, mxr = statistics.median(allres), max(allres)
    print(f"| all | {len(allerr)} | {med:.1f}% | {mx:.1f}% | {medr:.1f}% | {mxr:.1f}% |")
    bad = (a.max_median is not None and med > a.max_median) or \
          (a.max_error is not None and mx > a.max_error) or \
          (a.max_reserved_error is not None and mxr > a.max_reserved_error)
    if bad:
        print(f"validate_memory: allocated median {med:.1f}% / max {mx:.1f}%, reserved max "
              f"{mxr:.1f}% beyond {a.max_median}% / {a.max_error}% / {a.max_reserved_error}%",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
