#!/usr/bin/env python3
"""sanity_sweep: invariants every correct tasp-sim output satisfies, checked
over a deterministic sample of configurations.

A wrong figure that looks plausible is the worst failure of a simulator whose
numbers are acted on unchecked.  This script runs the binary over a sample
(drawn from --seed, --size configurations) of schedulers, scopes, TP/SP/DP,
placements, ZeRO stages, recomputation, micro-batches, masks, passes,
lengths, bundled topologies and precision recipes, and checks

  per run     exit 0, or 2 with a message (never a crash); no "(null)",
              no nan or inf in the CSV;
  per row     the columns against each other and against the README's
              definitions (memory, fits, reserved within usable, time split,
              utilisations, tokens/s, MFU, speedups, baseline), and against
              the --links and --memory files;
  per group   the verdict line against the rows' figures, model FLOPs alike
              for every scheduler (softmax models), at SP 1 every figure
              alike for the methods that have nothing to split;
  relations   physics, symmetry and determinism between runs: more tokens
              never faster, smaller nor less compute, faster links or more
              GPU memory never slower, ZeRO 3 and full recomputation never larger, a second
              micro-batch never smaller nor faster, --no-comm saves at most
              the exposed time, --no-compute and --alone never slower,
              placements alike on one switch, --per-flow = bundled,
              --jobs 1 = --jobs 2, a row alone = the same row in a sweep,
              shards = the whole, a --set value with its unit = the bare
              value the unit says (at the model scope on whole steps),
              a few layers extended = every layer, and a second DP replica
              twice the model FLOPs (never a shorter step at ZeRO 0);
  spellings   TransformerEngine's p2p, a2a and a2a+p2p = the scheduler each
              runs, figure for figure; a scenario file = the same options
              on the command line (table and CSV, byte for byte); --csv -
              = --csv FILE; a --set sweep's rows for a value = that value
              alone; an output in a missing folder: exit 2 naming it,
              nothing on stdout, no other output written; --baseline
              changes speedup_vs_best and baseline only (the named
              scheduler's step over the row's), --links-summary and
              --strict (every row ran) not the CSV;
  search      the winner fits and is the best simulated row by the objective,
              bounds are lower bounds (a configuration excluded for memory
              does not fit, replayed whole), shards merged = the whole search, a
              simulated configuration (the winner half the time) = the main
              command's row for it, --jobs 1 = --jobs 2, and twice the GPU
              memory never excludes a configuration that fitted nor gives
              a worse best.

Each violation is printed with the command that shows it (build/tasp-sim
for the binary given).  Exit status 1 when any was found, 0 otherwise.
Standard library only.  --every-relation checks every relation of every
configuration (the CTest entry sanity_sweep: --seed 1 --size 6 --searches 2).

    scripts/sanity_sweep.py --binary build/tasp-sim --seed 1 --size 40
"""
import argparse
import csv
import io
import json
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile

# Bundled topologies: GPUs, and the --set key of the link a faster value of
# which must not slow a step (None: no single link rate to raise).
TOPOLOGIES = {
    "h100x8": (8, "generator.port_gbps"),
    "h100x8x2": (16, "generator.nic_gbps"),
    "h200x4": (4, "generator.port_gbps"),
    "h200x4-tool": (4, "generator.port_gbps"),
    "h200x2-tool": (2, "generator.port_gbps"),
    "mi300x8": (8, "generator.link_gbps"),
    "torus4x4": (16, "generator.link_gbps"),
    "l20x8-pcie": (8, None),
    "a100x8x8": (64, "generator.nic_gbps"),
}
SOFTMAX_SCHEDS = ["ring", "zigzag", "tasp", "tasp-mkm", "ulysses", "usp", "usp-zigzag",
                  "tokenring", "allgather", "stripe", "double-ring", "p2p", "all_gather",
                  "a2a", "a2a+p2p", "lasp2h"]
SOFTMAX_MODELS = ["llama3-8b", "llama2-7b", "tests/data/search-model.json"]
LINEAR_MODELS = ["linear-llama3-1b", "linear-llama3-1b-hybrid"]
PLACEMENTS = ["tp,sp,dp", "sp,tp,dp", "dp,tp,sp", "tp,dp,sp", "sp,dp,tp", "dp,sp,tp"]
CONFIDENCES = {"roofline", "extrapolated", "scaled from GPU", "scaled", "interpolated",
               "measured", "none"}
# Topologies with compute.fp8_gemm_table (--precision fp8 needs one).
FP8_TABLE = {"h100x8", "h100x8x2"}
# Topologies of one NVSwitch node, every GPU alike.
ONE_SWITCH = {"h100x8", "h200x4", "h200x4-tool", "h200x2-tool"}
# Topologies of nodes of 8 alike GPUs on one switch each, NICs across.
NODES_OF_8 = {"h100x8x2", "a100x8x8"}
# Columns a symmetry of the GPUs keeps.
SYMMETRIC_COLS = ["step_ms", "compute_ms", "comm_ms", "exposed_comm_ms", "imbalance_ms",
                  "peak_mem_gib", "peak_reserved_gib", "attention_ms", "mfu"]
# Schedulers that at SP 1 have nothing to split or move: each runs the one
# flash attention call over the whole sequence (ring, zigzag, stripe and
# TokenRing a ring of one GPU, Ulysses and USP an all-to-all of one, double
# ring one window of one; all-gather CP, its TransformerEngine spelling and
# LASP-2H still cut the sequence into chunks, priced as their calls).
# Softmax layers only: a linear Ring's backward zeroes and adds its dK/dV
# accumulator even on one GPU, as the measured program does (rotate.c
# linear_grad_steps: 0.95 ms of copies beside a 0.51 ms kernel at 16K).
SP1_PLAIN = {"ring", "zigzag", "stripe", "tokenring", "ulysses", "usp", "usp-zigzag",
             "double-ring", "p2p", "a2a", "a2a+p2p"}
MINOR = 0.10  # src/verdict.h VERDICT_MINOR: the verdict's "under 10% of the step"

# Printed precision of the CSV's columns (src/report.c): a comparison of two
# printed figures allows this much on each side.
EPS_MS = 2e-6      # step_ms and the other times: 6 decimals
EPS_GIB = 1.5e-4   # peak_mem_gib, peak_reserved_gib: 4 decimals
EPS_UTIL = 1.5e-4  # utilisations, mfu: 4 decimals


class Checker:
    """Runs the binary and collects violations, each with its command."""

    def __init__(self, binary, tmp, verbose, every=False):
        self.binary, self.tmp, self.verbose, self.every = binary, tmp, verbose, every
        self.violations = []
        self.runs = 0
        self.topo_cache = {}

    def chance(self, rng, p):
        """Whether to check a relation drawn with probability p (always with
        --every-relation; the draw is made either way, so the relations that
        follow see the same draws)."""
        return rng.random() < p or self.every

    def fail(self, cmd, what):
        line = f"VIOLATION: {what}\n  $ {cmd}"
        if line not in self.violations:
            self.violations.append(line)
            print(line, flush=True)

    def run(self, args):
        """(rc, stdout, stderr, command line) of the binary with args."""
        self.runs += 1
        cmd = [self.binary] + args
        p = subprocess.run(cmd, capture_output=True, text=True)
        line = "build/tasp-sim " + " ".join(shlex.quote(a) for a in args)
        if self.verbose:
            print(f"[{p.returncode}] {line}", file=sys.stderr)
        # a NULL string printed with %s: a message or note missing its text
        # (a scaled table's note beside a roofline GEMM said "(null)")
        if "(null)" in p.stdout or "(null)" in p.stderr:
            self.fail(line, "'(null)' in the output: " +
                      next(l for l in (p.stdout + p.stderr).splitlines() if "(null)" in l)[:160])
        return p.returncode, p.stdout, p.stderr, line

    def run_csv(self, args, extra=()):
        """Rows of the main command's CSV, the table, and the command, or None
        when the input is refused (exit 2: a clear refusal is no violation).
        extra: more outputs, (option, file name in the scratch folder)."""
        path = os.path.join(self.tmp, "out.csv")
        more = [a for o, f in extra for a in (o, os.path.join(self.tmp, f))]
        rc, out, err, line = self.run(args + ["--csv", path] + more)
        shown = line.replace(" --csv " + path, " --csv -").replace(self.tmp + "/", "")
        if rc == 2 and err.strip():
            if self.verbose:
                print(f"  refused: {err.strip().splitlines()[0]}", file=sys.stderr)
            return None, out, shown
        if rc != 0:
            self.fail(shown, f"exit status {rc} (not 0, nor 2 with a message): {err.strip()[-300:]}")
            return None, out, shown
        with open(path, newline="") as f:
            self.last_csv = f.read()
        rows = list(csv.DictReader(io.StringIO(self.last_csv)))
        # a figure that is not a number compares false with everything,
        # so every relation below would pass it silently
        for r in rows:
            odd = [k for k, v in r.items() if v and v.strip().lower().lstrip("+-") in ("nan", "inf", "infinity")]
            if odd:
                self.fail(shown, f"{r['scheduler']}: not a number in {odd}: {[r[k] for k in odd][:3]}")
        return rows, out, shown

    def usable_gib(self, topo):
        """(gpu_memory_gib, usable GiB) of a bundled topology, (None, None)
        where it gives no capacity."""
        if topo not in self.topo_cache:
            _, out, _, _ = self.run(["--topology", topo, "--dump-topology"])
            m = re.search(r"gpu_memory_gib ([0-9.]+).*\(usable ([0-9.]+) GiB", out)
            self.topo_cache[topo] = (float(m.group(1)), float(m.group(2))) if m else (None, None)
        return self.topo_cache[topo]


def num(row, key):
    v = row.get(key, "")
    return float(v) if v not in ("", None) else None


def ok_rows(rows):
    return [r for r in rows if r["status"] == "ok"]


# ---------------------------------------------------------------- sampling

def sample_config(rng):
    """One configuration of the main command, as a dict of its options."""
    topo = rng.choice(sorted(TOPOLOGIES))
    n_gpus = TOPOLOGIES[topo][0]
    scope = rng.choice(["attention", "attention", "layer", "model", "model"])
    c = {"topology": topo, "scope": scope, "seq": rng.choice(["4K", "8K", "16K"])}
    linear = rng.random() < 0.15
    if linear:
        c["model"] = rng.choice(LINEAR_MODELS)
        c["sched"] = "all"
    else:
        c["model"] = rng.choice(SOFTMAX_MODELS) if scope != "attention" or rng.random() < 0.5 else None
        c["sched"] = "all" if rng.random() < 0.2 else ",".join(
            sorted(rng.sample(SOFTMAX_SCHEDS[:-1], rng.randint(2, 4))))
    tp = rng.choice([t for t in (1, 1, 2, 4) if t <= n_gpus]) if scope != "attention" else 1
    dp = rng.choice([d for d in (1, 2) if tp * d <= n_gpus]) if scope == "model" else 1
    sps = [s for s in (1, 2, 4, 8) if tp * s * dp <= min(n_gpus, 16)] or [1]
    # SP 1 a third as often as the others: a row of it says what no method
    # has to do (n/a at the attention scope for most)
    c["sp"] = rng.choice(sps[1:] * 3 + sps[:1] if len(sps) > 1 else sps)
    if scope != "attention":
        c["tp"] = tp
        c["placement"] = rng.choice(PLACEMENTS)
        c["precision"] = rng.choice(["megatron", "megatron", "amp", "bf16"] +
                                    (["fp8"] if topo in FP8_TABLE else []))
    if scope == "model":
        c["dp"] = dp
        c["zero"] = rng.randint(0, 3)
        c["recompute"] = rng.choice(["none", "selective", "full"])
        c["micro-batches"] = rng.choice([1, 1, 2, 4])
        c["pass"] = "fwdbwd"
        if rng.random() < 0.15:
            c["whole-steps"] = True
    else:
        c["pass"] = rng.choice(["fwd", "bwd", "fwdbwd"])
    c["mask"] = rng.choice(["causal", "causal", "full"] + (["full,causal"] if scope == "attention" else []))
    if scope == "attention" and c["model"] is None and rng.random() < 0.3:
        c["docs"] = "uniform:min=1K,max=4K,seed=%d" % rng.randint(1, 9)
        c["sched"] = ",".join(sorted(rng.sample(["ring", "zigzag", "ulysses", "allgather", "usp"], 3)))
    return c


def args_of(c):
    a = []
    for k, v in c.items():
        if v is None or v is False:
            continue
        a += [f"--{k}"] if v is True else [f"--{k}", str(v)]
    return a


# ---------------------------------------------------------------- row checks

def tokens_per_step(c, row):
    """Tokens a step of the row processes, all replicas and micro-batches."""
    batch = int(row["batch"])
    return batch * int(row["seq_len"]) * int(c.get("micro-batches", 1)) * int(c.get("dp", 1))


def check_row(ck, cmd, c, r, gpu_mem, usable):
    name = f"{r['scheduler']} (seq {r['seq_len']}, sp {r['gpus']}, {r['mask']}, {r['pass']})"
    step, comp, comm = num(r, "step_ms"), num(r, "compute_ms"), num(r, "comm_ms")
    exp, imb = num(r, "exposed_comm_ms"), num(r, "imbalance_ms")
    mem, res = num(r, "peak_mem_gib"), num(r, "peak_reserved_gib")
    bad = lambda what: ck.fail(cmd, f"{name}: {what}")
    if None in (step, comp, comm, exp, imb, mem):
        return bad("an ok row with an empty figure")
    if r["confidence"] not in CONFIDENCES and not r["confidence"].startswith("scaled from "):
        bad(f"confidence {r['confidence']!r} is not one of the README's grades")
    if min(step, comp, comm, exp, imb, mem) < 0:
        bad("a negative figure")
    # time: the step covers the busiest GPU's kernels, its idle split and
    # its communication (README: step = compute of the last GPU + imbalance
    # + exposed, so neither part passes the step)
    tol = EPS_MS + 1e-9 * step
    if comp > step + tol:
        bad(f"compute_ms {comp} > step_ms {step}")
    if comm > step + tol:
        bad(f"comm_ms {comm} > step_ms {step}")
    if exp + imb > step + 2 * tol:
        bad(f"exposed_comm_ms {exp} + imbalance_ms {imb} > step_ms {step}")
    if comp + imb + exp < step - 3 * tol - 1e-6 * step:
        bad(f"compute_ms {comp} + imbalance_ms {imb} + exposed_comm_ms {exp} < step_ms {step}: "
            "the busiest GPU computes less than the last one")
    att = num(r, "attention_ms")
    if att is not None:
        if c["scope"] == "attention" and abs(att - step) > tol:
            bad(f"attention scope: attention_ms {att} != step_ms {step}")
        if att > step + tol or att < -tol:
            bad(f"attention_ms {att} outside [0, step_ms {step}]")
    # links
    mx, mean = num(r, "max_link_util"), num(r, "mean_link_util")
    if mx is not None and not (-EPS_UTIL <= mean <= mx + EPS_UTIL and mx <= 1 + EPS_UTIL):
        bad(f"link utilisations mean {mean}, max {mx}: not 0 <= mean <= max <= 1")
    # memory
    if res is not None and res < mem - EPS_GIB:
        bad(f"peak_reserved_gib {res} < peak_mem_gib {mem}")
    if usable is not None:
        # allocated within the usable memory, and reserved too: a reserved
        # peak above it is a segment the allocator, having waited and
        # given back what it could, still needed (sim.c sim_fits: PyTorch
        # raises out-of-memory; l20x8-pcie, a2a SP 2 x DP 2, ZeRO 3, 4K:
        # 41.06 GiB allocated, 41.48 reserved, 41.38 usable)
        want = "yes" if mem <= usable + EPS_GIB and (res is None or res <= usable + EPS_GIB) else "no"
        near = abs(mem - usable) <= EPS_GIB or (res is not None and abs(res - usable) <= EPS_GIB)
        if not near and r["fits"] != want:
            bad(f"fits {r['fits']!r} with peak_mem_gib {mem}, peak_reserved_gib {res} and {usable} GiB usable")
        # the allocator model waits and gives segments back rather than pass
        # the usable memory (README, peak_reserved_gib): a row that fits
        # never reserves more, else PyTorch would raise out-of-memory
        if r["fits"] == "yes" and res is not None and res > usable + EPS_GIB:
            bad(f"fits, yet peak_reserved_gib {res} > {usable} GiB usable (of the GPU's {gpu_mem})")
    elif r["fits"] != "":
        bad(f"fits {r['fits']!r} on a topology that gives no capacity")
    # job and throughput
    job = int(r["job_gpus"])
    want_job = int(c.get("tp", 1)) * int(r["gpus"]) * int(c.get("dp", 1))
    if job != want_job:
        bad(f"job_gpus {job} != TP x SP x DP = {want_job}")
    tps = num(r, "tokens_per_s_per_gpu")
    if tps is not None and step > 0:
        want = tokens_per_step(c, r) / (step / 1e3 * job)
        # tokens/s printed to 0.1, step_ms to 6 decimals (a short step's
        # rounding is a visible share of it)
        if abs(tps - want) > 0.051 + want * (5.1e-7 / step + 1e-9):
            bad(f"tokens_per_s_per_gpu {tps} != tokens {tokens_per_step(c, r)} / "
                f"(step {step} ms x {job} GPUs) = {want:.1f}")
    mfu = num(r, "mfu")
    if mfu is not None and c.get("no-compute") is None and not (0 < mfu < 1):
        bad(f"mfu {mfu} outside (0, 1)")
    # extended (README): the figures of a few replayed layers extended, only
    # at the model scope and never where the whole step is asked for
    # (--whole-steps, --memory, --trace: check_config gives those only to
    # whole steps); an extended step has no reserved peak (sim.h), a whole
    # one has
    ext = r.get("extended")
    whole = c["scope"] != "model" or c.get("whole-steps")
    if ext not in ("yes", "no") or (whole and ext != "no"):
        bad(f"extended {ext!r} for a {'whole' if whole else 'model-scope'} step")
    elif (ext == "yes") != (res is None):
        bad(f"extended {ext!r} with peak_reserved_gib {r['peak_reserved_gib']!r}: an extended "
            "step has none, a whole one has")


def groups_of(rows):
    """Rows by point group (seq, SP, mask, pass, overrides), in first-seen order."""
    g = {}
    for r in rows:
        g.setdefault((r["seq_len"], r["gpus"], r["mask"], r["pass"], r["overrides"]), []).append(r)
    return list(g.values())


def check_group(ck, cmd, c, rows):
    ran = ok_rows(rows)
    fit = [r for r in ran if r["fits"] != "no"]
    key = f"group seq {rows[0]['seq_len']}, sp {rows[0]['gpus']}, {rows[0]['mask']}, {rows[0]['pass']}"
    for r in rows:
        if r["status"] != "ok" and any(r[k] for k in ("step_ms", "speedup_vs_best", "baseline")):
            ck.fail(cmd, f"{key}: n/a row {r['scheduler']} carries figures")
    if not fit:
        return
    best = min(fit, key=lambda r: float(r["step_ms"]))
    bstep = float(best["step_ms"])
    for r in ran:
        if r["baseline"] and "baseline" not in c:
            b = next((x for x in ran if x["scheduler"] == r["baseline"]), None)
            if b is None or b["fits"] == "no" or float(b["step_ms"]) > bstep + EPS_MS:
                ck.fail(cmd, f"{key}: {r['scheduler']}'s baseline {r['baseline']} is not the "
                             f"fastest row that fits ({best['scheduler']})")
        sb = num(r, "speedup_vs_best")
        if sb is not None and "baseline" not in c and float(r["step_ms"]) > 0:
            want = bstep / float(r["step_ms"])
            if abs(sb - want) > 1e-4 + 1e-6 * want:
                ck.fail(cmd, f"{key}: {r['scheduler']} speedup_vs_best {sb} != {want:.4f}")
        ring = next((x for x in ran if x["scheduler"] == "ring"), None)
        sr = num(r, "speedup_vs_ring")
        if ring and sr is not None and float(r["step_ms"]) > 0:
            want = float(ring["step_ms"]) / float(r["step_ms"])
            if abs(sr - want) > 1e-4 + 1e-6 * want:
                ck.fail(cmd, f"{key}: {r['scheduler']} speedup_vs_ring {sr} != {want:.4f}")
    # SP 1: the methods that have nothing to split run the same one kernel
    # over the whole sequence in the same layer, so every figure of their
    # rows is the same (a scheduler that at one GPU prices a block it
    # does not run, or moves or holds something, breaks it)
    softmax = c.get("model") not in LINEAR_MODELS and c.get("attention") != "linear"
    plain = [r for r in ran if softmax and r["gpus"] == "1" and r["scheduler"] in SP1_PLAIN]
    for r in plain[1:]:
        diff = [k for k in ("step_ms", "compute_ms", "comm_ms", "exposed_comm_ms",
                            "imbalance_ms", "attention_ms", "mfu")
                if r[k] != plain[0][k]]
        if diff:
            ck.fail(cmd, f"{key}: at SP 1 {r['scheduler']} and {plain[0]['scheduler']} run the "
                         f"same one kernel, yet differ in {diff}: "
                         f"{[(r[k], plain[0][k]) for k in diff[:3]]}")
    # model FLOPs (Megatron's definition: nominal, however the work is split)
    # are the same for every scheduler of the group: mfu x step x GPUs.  Not
    # checked for linear attention: its FLOPs are its kernels' (chunk
    # intra, state and apply products, compute.c lin_fwd_flops), which each
    # method decomposes its own way (LASP-2 4% above Ulysses at 4K)
    flops = [(float(r["mfu"]) * float(r["step_ms"]) * int(r["job_gpus"]), r) for r in ran
             if r["mfu"] and float(r["mfu"]) > 0]
    if len(flops) > 1 and c.get("model") not in LINEAR_MODELS:
        lo, hi = min(flops, key=lambda x: x[0]), max(flops, key=lambda x: x[0])
        rel = EPS_UTIL / float(lo[1]["mfu"]) + EPS_UTIL / float(hi[1]["mfu"]) + 1e-6
        if hi[0] > lo[0] * (1 + rel):
            ck.fail(cmd, f"{key}: model FLOPs (mfu x step x GPUs) differ between schedulers: "
                         f"{lo[1]['scheduler']} {lo[0]:.4g}, {hi[1]['scheduler']} {hi[0]:.4g}")


# ---------------------------------------------------------------- verdicts

def parse_paren(s, i):
    """(text inside the parenthesis that opens at s[i], index after it)."""
    depth, j = 0, i
    while j < len(s):
        depth += {"(": 1, ")": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1:j], j + 1
        j += 1
    raise ValueError("unbalanced parenthesis")


def parse_verdict(line):
    """({scheduler: (margin % or None for a winner, reason)}, the schedulers
    named as not fitting, those named n/a); None for the first where the
    line names no winner."""
    unfit, na = set(), set()
    m = re.match(r"(.+?) (fastest|tie|only) \(", line)
    if not m:
        m = re.match(r"(no scheduler fits in memory|no scheduler can run this point)", line)
        if not m:
            raise ValueError(f"no winner nor 'no scheduler' at {line[:40]!r}")
        out, i = None, m.end()
    else:
        why, i = parse_paren(line, m.end() - 1)
        out = {n: (None, why) for n in re.split(r", | and ", m.group(1))}
    while i < len(line):
        sep = line[i:i + 2]
        if sep not in ("; ", ", "):
            raise ValueError(f"unparsed verdict text at {line[i:][:40]!r}")
        i += 2
        if line.startswith("n/a: ", i):
            na.update(line[i + 5:].split(", "))
            break
        m = re.match(r"(\S+) \(does not fit: ", line[i:])
        if m:
            _, i = parse_paren(line, i + len(m.group(1)) + 1)
            unfit.add(m.group(1))
            continue
        m = re.match(r"(\S+) \+([0-9.]+)% \(", line[i:]) if out is not None else None
        if not m:
            raise ValueError(f"unparsed verdict text at {line[i:][:40]!r}")
        why, i = parse_paren(line, i + m.end() - 1)
        out[m.group(1)] = (float(m.group(2)), why)
    return out, unfit, na


def check_verdict_reason(ck, cmd, r, why):
    step = float(r["step_ms"])
    if step <= 0:
        return
    e, i = float(r["exposed_comm_ms"]) / step, float(r["imbalance_ms"]) / step
    comp = float(r["compute_ms"]) / step
    bad = lambda what: ck.fail(cmd, f"verdict for {r['scheduler']} ({why}): {what}")
    slack = 1e-5
    if why.startswith("compute-bound"):
        if e >= MINOR + slack or i >= MINOR + slack:
            bad(f"exposed {e:.1%} or imbalance {i:.1%} of the step is not under {MINOR:.0%}")
    elif why.startswith("communication-bound") or why.startswith("host-bound"):
        if e < MINOR - slack:
            bad(f"exposed {e:.1%} of the step is under {MINOR:.0%}")
        if i > e + slack:
            bad(f"imbalance {i:.1%} > exposed {e:.1%}: the verdict names a smaller part")
        m = re.search(r"(\d+)% of the step exposed", why)
        if m and abs(int(m.group(1)) - 100 * e) > 0.5 + 1e-3:
            bad(f"says {m.group(1)}% exposed, the columns {100 * e:.2f}%")
    elif why.startswith("load imbalance") or why.startswith("serialized"):
        if max(i, comp) < e - slack:
            bad(f"imbalance {i:.1%} (or the busiest GPU's compute {comp:.1%}) < exposed {e:.1%}")
        m = re.search(r"serialized: (\d+)% of the step", why)
        if m and abs(int(m.group(1)) - 100 * i) > 0.5 + 1e-3:
            bad(f"says {m.group(1)}% waiting, imbalance_ms is {100 * i:.2f}% of the step")


def check_table_rows(ck, cmd, rows, table):
    """The table's rows against the CSV's, in the same order: the same
    schedulers and SP degrees, n/a where the status is, and every figure
    the CSV's within the table's printed precision (times 3 decimals,
    speedups 2, utilisations 0.1%, memory 0.1 GiB, '!' where it does not
    fit)."""
    trows = []
    for l in table.splitlines():
        t = l.split()
        if len(t) < 4 or l.startswith(("links", "mask", "tasp-sim", "note")) or t[0] in ("=>", "note:", "seq"):
            continue
        if not t[0].isdigit():  # a group's first row: its sequence length first
            t = t[1:]
        if len(t) >= 3 and t[0].isdigit() and (t[2] == "n/a:" or len(t) == 12):
            trows.append(t)
    if len(trows) != len(rows):
        return ck.fail(cmd, f"the table has {len(trows)} rows, the CSV {len(rows)}")
    cols = [("step_ms", 1, 5e-4), ("compute_ms", 1, 5e-4), ("comm_ms", 1, 5e-4),
            ("exposed_comm_ms", 1, 5e-4), ("imbalance_ms", 1, 5e-4),
            ("speedup_vs_best", 1, 5e-3), ("speedup_vs_ring", 1, 5e-3),
            ("max_link_util", 100, 0.05), ("mean_link_util", 100, 0.05), ("peak_mem_gib", 1, 0.05)]
    for t, r in zip(trows, rows):
        if t[0] != r["gpus"] or t[1] != r["scheduler"] or (t[2] == "n/a:") != (r["status"] != "ok"):
            return ck.fail(cmd, f"table row {' '.join(t[:3])} against the CSV's {r['scheduler']} "
                                f"sp {r['gpus']} ({r['status'][:40]})")
        if t[2] == "n/a:":
            if " ".join(t[2:]) != r["status"]:
                ck.fail(cmd, f"{r['scheduler']}: the table's reason differs from the CSV's status")
            continue
        for (col, scale, eps), text in zip(cols, t[2:]):
            if text == "-":
                if r[col] != "":
                    ck.fail(cmd, f"{r['scheduler']}: the table shows no {col}, the CSV {r[col]}")
                continue
            v = float(text.rstrip("x%G!"))
            if r[col] == "" or abs(v - float(r[col]) * scale) > eps * (1 + 1e-6) + 1e-9:
                ck.fail(cmd, f"{r['scheduler']} (sp {r['gpus']}): the table's {col} {text}, the CSV's {r[col]}")
        if t[11].endswith("!") != (r["fits"] == "no"):
            ck.fail(cmd, f"{r['scheduler']}: the table's mem {t[11]}, the CSV's fits {r['fits']!r}")


def check_links_summary(ck, cmd, rows, table):
    """The table's closing 'links: mean utilisation NAME X% (idle channels
    in A of B points), ...' against the rows: one entry per scheduler that
    ran a point, X the mean of its rows' mean_link_util, B its rows that
    ran."""
    line = next((l for l in table.splitlines() if l.startswith("links: mean utilisation")), None)
    ran = ok_rows(rows)
    if line is None:
        if ran:
            ck.fail(cmd, "no 'links: mean utilisation' line though rows ran")
        return
    body = line[len("links: mean utilisation"):]
    entries = re.findall(r"(?:^|,) (\S+) ([0-9.]+)% \(idle channels in (\d+) of (\d+) points\)", body)
    if ", ".join(f"{n} {u}% (idle channels in {a} of {b} points)" for n, u, a, b in entries) != body.strip():
        return ck.fail(cmd, f"links line not in its documented form: {line[:120]}")
    per = {}
    for r in ran:
        per.setdefault(r["scheduler"], []).append(float(r["mean_link_util"]))
    if len(entries) != len({e[0] for e in entries}) or set(per) != {e[0] for e in entries}:
        return ck.fail(cmd, f"links line names {[e[0] for e in entries]}, the schedulers that ran {sorted(per)}")
    for name, util, idle, n in entries:
        us = per[name]
        # each row's mean printed to 4 decimals, the line's to 0.1%
        if int(n) != len(us) or int(idle) > len(us) or \
                abs(float(util) - 100 * sum(us) / len(us)) > 0.05 + 100 * EPS_UTIL:
            ck.fail(cmd, f"links line: {name} {util}% in {n} points; its rows: "
                         f"{100 * sum(us) / len(us):.2f}% over {len(us)}")


def check_reason_figures(ck, cmd, r, why, first, links):
    """A reason's named figures against the rows and --links: 'compute-bound:
    R x the compute of W' names the group's fastest that fits (W, the
    first named) and its compute_ms over W's (more than 1.05: under it the
    compute is 'hidden'); 'communication-bound on KIND' names the kind of
    a channel of the row's largest utilisation in --links (links: rows of
    --links by point, or None)."""
    m = re.match(r"compute-bound: ([0-9.]+)x the compute of (\S+)$", why)
    if m:
        w = float(first["compute_ms"])
        want = float(r["compute_ms"]) / w if w > 0 else None
        if m.group(2) != first["scheduler"] or want is None or \
                abs(float(m.group(1)) - want) > 0.0051 + 2 * EPS_MS / w or want <= 1.05 - 1e-9:
            ck.fail(cmd, f"verdict for {r['scheduler']} ({why}): the fastest is {first['scheduler']}, "
                         f"the compute ratio {want}")
    m = re.match(r"communication-bound on (.+): \d+% of the step exposed$", why)
    if m and m.group(1) != "launch and issue costs" and links is not None:
        ch = links.get((r["scheduler"], r["seq_len"], r["gpus"], r["mask"], r["pass"], r["overrides"]))
        if ch:
            top = max(float(l["utilization"]) for l in ch)
            kinds = {l["kind"] for l in ch if float(l["utilization"]) >= top - EPS_UTIL}
            if m.group(1) not in kinds:
                ck.fail(cmd, f"verdict for {r['scheduler']} ({why}): the busiest channels in --links "
                             f"are of kind {sorted(kinds)}")


def check_verdicts(ck, cmd, c, rows, table, links=None):
    lines = [l.strip()[3:] for l in table.splitlines() if l.strip().startswith("=> ")]
    groups = groups_of(rows)
    if len(lines) != len(groups):
        return ck.fail(cmd, f"{len(lines)} verdict lines for {len(groups)} point groups")
    for line, g in zip(lines, groups):
        try:
            v, unfit, na = parse_verdict(line)
        except ValueError as err:
            ck.fail(cmd, f"verdict line not in its documented form ({err}): {line[:120]}")
            continue
        fit = [r for r in ok_rows(g) if r["fits"] != "no"]
        want_unfit = {r["scheduler"] for r in ok_rows(g) if r["fits"] == "no"}
        want_na = {r["scheduler"] for r in g if r["status"] != "ok"}
        if unfit != want_unfit or na != want_na:
            ck.fail(cmd, f"verdict names {sorted(unfit)} as not fitting and {sorted(na)} n/a; the rows: "
                         f"{sorted(want_unfit)} and {sorted(want_na)}")
        if v is None:
            if fit:
                ck.fail(cmd, f"verdict names no winner though {len(fit)} rows ran and fit: {line[:100]}")
            continue
        by = {r["scheduler"]: r for r in fit}
        if set(v) != set(by):
            ck.fail(cmd, f"verdict ranks {sorted(v)}, the rows that ran and fit are {sorted(by)}")
            continue
        first = min(fit, key=lambda r: float(r["step_ms"]))
        best = float(first["step_ms"])
        for s, (margin, why) in v.items():
            r = by[s]
            step = float(r["step_ms"])
            tied = step <= best * (1 + 5e-4)
            if (margin is None) != tied:
                ck.fail(cmd, f"verdict: {s} {'named' if margin is None else 'not named'} among the "
                             f"fastest at {step} ms (best {best} ms)")
            if margin is not None and best > 0 and abs(margin - 100 * (step / best - 1)) > 0.051:
                ck.fail(cmd, f"verdict: {s} +{margin}%, the rows say +{100 * (step / best - 1):.2f}%")
            # a tie gives one reason: the fastest row's (the first of the
            # fastest in row order), not each tied row's
            if margin is not None or r is first:
                check_verdict_reason(ck, cmd, r, why)
                check_reason_figures(ck, cmd, r, why, first, links)


# ---------------------------------------------------------------- relations

def by_sched(rows):
    return {(r["scheduler"], r["seq_len"], r["gpus"], r["mask"], r["pass"]): r for r in ok_rows(rows)}


def relate(ck, what, a_rows, b_rows, a_cmd, b_cmd, col, holds):
    """Every row ok in both runs: holds(a[col], b[col]), else a violation."""
    a, b = by_sched(a_rows), by_sched(b_rows)
    for k in sorted(set(a) & set(b)):
        x, y = num(a[k], col), num(b[k], col)
        if x is None or y is None:
            continue
        if not holds(x, y):
            ck.fail(f"{a_cmd}\n  $ {b_cmd}", f"{what}: {k[0]} {col} {x} vs {y}")


def check_extension(ck, c, rows, rw, cmd, cw):
    """A few layers extended = every layer replayed (README: memory the
    same at ZeRO 0-1, times within 0.5%; at ZeRO 2-3 the row's note says
    its peak is not exact: gradients waiting for their reduce-scatters
    pile up beyond what the replayed layers show).  rows: the extended
    run's, rw: the same with --whole-steps."""
    a, b = by_sched(rows), by_sched(rw)
    exact_mem = int(c.get("zero", 0)) < 2
    for k in sorted(set(a) & set(b)):
        if exact_mem and abs(float(a[k]["peak_mem_gib"]) - float(b[k]["peak_mem_gib"])) > EPS_GIB:
            ck.fail(f"{cmd}\n  $ {cw}", f"{k[0]}: extended peak_mem_gib {a[k]['peak_mem_gib']} "
                                       f"!= whole step's {b[k]['peak_mem_gib']}")
        # on the torus a layer's time alternates as gradient and layer
        # traffic interleave on shared links (README: 1.0% seen), elsewhere
        # it repeats (0.5%)
        tol = 1.5e-2 if c["topology"].startswith("torus") else 5e-3
        x, y = float(a[k]["step_ms"]), float(b[k]["step_ms"])
        if abs(x / y - 1) > tol:
            ck.fail(f"{cmd}\n  $ {cw}", f"{k[0]}: extended step {x} ms, whole {y} ms: "
                                       f"more than {tol:.1%} apart")


def check_relations(ck, rng, c, rows):
    base = args_of(c)
    cmd = "build/tasp-sim " + " ".join(shlex.quote(a) for a in base)
    # relations between runs are the model's physics, not the extension's:
    # at the model scope they compare whole steps, the extension's own
    # error checked apart, extended against whole (extended steps on
    # mi300x8 made full recomputation 0.2% faster than none and a faster
    # NIC 0.03% slower on a100x8x8, where the whole steps keep both
    # relations)
    if c["scope"] == "model" and not c.get("whole-steps"):
        rw, _, cw = ck.run_csv(base + ["--whole-steps"])
        if not rw:
            return
        check_extension(ck, c, rows, rw, cmd, cw)
        c, rows = dict(c, **{"whole-steps": True}), rw
        base = args_of(c)
        cmd = "build/tasp-sim " + " ".join(shlex.quote(a) for a in base)
    # x (of the first run) at most / at least y (of the second), within the
    # printed precision
    le = lambda x, y: x <= y * (1 + 1e-9) + EPS_GIB
    ge = lambda x, y: y <= x * (1 + 1e-9) + EPS_GIB
    # determinism: --jobs 1 and --jobs 2 write the same bytes
    if ck.chance(rng, 0.3):
        outs = []
        for j in ("1", "2"):
            rc, out, _, line = ck.run(base + ["--jobs", j, "--csv", "-", "-q"])
            outs.append((rc, out, line))
        if outs[0][:2] != outs[1][:2]:
            ck.fail(f"{outs[0][2]}\n  $ {outs[1][2]}", "--jobs 1 and --jobs 2 differ")
    # shards: every point group in exactly one, the rows as the whole run's
    if ck.chance(rng, 0.3):
        rc, whole, _, wline = ck.run(base + ["--csv", "-", "-q"])
        parts = []
        for i in range(2):
            rci, out, _, sline = ck.run(base + ["--shard", f"{i}/2", "--csv", "-", "-q"])
            parts += out.splitlines()[1:] if rci == 0 else ["exit %d" % rci]
        if rc == 0 and sorted(parts) != sorted(whole.splitlines()[1:]):
            ck.fail(f"{wline}\n  $ {sline.replace('1/2', 'I/2')}",
                    "the shards' rows are not the whole run's rows")
    # a row alone gives the figures it has in the sweep (speedups to the
    # group's best and the baseline aside: they depend on the others)
    ran = ok_rows(rows)
    if ran and ck.chance(rng, 0.4) and "docs" not in c:
        r = rng.choice(ran)
        alone_c = dict(c, sched=r["scheduler"], seq=r["seq_len"], sp=r["gpus"], mask=r["mask"])
        alone_c["pass"] = r["pass"]
        alone, _, acmd = ck.run_csv(args_of(alone_c))
        if alone:
            skip = {"speedup_vs_best", "baseline"}
            a = alone[0]
            diff = [k for k in a if k not in skip and a[k] != r[k]]
            if diff:
                ck.fail(f"{cmd}\n  $ {acmd}", f"{r['scheduler']} alone differs from its row in the "
                                               f"sweep in {diff}: {[(a[k], r[k]) for k in diff[:3]]}")
    # more tokens per GPU: never a shorter step, never less memory.  Not the
    # memory under ZeRO 2-3: each layer's full gradient is freed when its
    # reduce-scatter ends, so how many are live at once depends on how fast
    # the backward runs beside the reduction (a longer backward overlaps
    # fewer: seen 1.089 GiB at 4K, 1.082 at 8K)
    mem_monotone = int(c.get("zero", 0)) < 2
    if ck.chance(rng, 0.4) and "docs" not in c:
        seq2 = {"4K": "8K", "8K": "16K", "16K": "32K"}[c["seq"]]
        rows2, _, cmd2 = ck.run_csv(args_of(dict(c, seq=seq2)))
        if rows2:
            a = {k[0]: v for k, v in by_sched(rows).items()}
            b = {k[0]: v for k, v in by_sched(rows2).items()}
            for s in sorted(set(a) & set(b)):
                if a[s]["mask"] != b[s]["mask"] or a[s]["pass"] != b[s]["pass"]:
                    continue
                # the busiest GPU's compute too: twice the tokens give
                # every GPU at least the work it had (kernels priced by a
                # table that interpolated upwards faster than the work
                # grows would break it)
                for col in ("step_ms", "compute_ms") + (("peak_mem_gib",) if mem_monotone else ()):
                    if float(b[s][col]) < float(a[s][col]) * (1 - 1e-9) - EPS_MS:
                        ck.fail(f"{cmd}\n  $ {cmd2}", f"twice the tokens, {s}'s {col} falls: "
                                                     f"{a[s][col]} -> {b[s][col]}")
    # a faster link never lengthens the step (one run sweeping the rate)
    key = TOPOLOGIES[c["topology"]][1]
    if key and ck.chance(rng, 0.4):
        rows3, _, cmd3 = ck.run_csv(base + ["--set", f"{key}=20,40,80,160"])
        if rows3:
            series = {}
            for r in ok_rows(rows3):
                series.setdefault((r["scheduler"], r["seq_len"], r["gpus"], r["mask"], r["pass"]),
                                  []).append(r)
            for k, rs in sorted(series.items()):
                for slow, fast in zip(rs, rs[1:]):
                    if float(fast["step_ms"]) > float(slow["step_ms"]) * (1 + 1e-6) + EPS_MS:
                        ck.fail(cmd3, f"{k[0]}: faster links, longer step: {slow['overrides']} "
                                      f"{slow['step_ms']} ms -> {fast['overrides']} {fast['step_ms']} ms")
    # a --set value with its unit is the value the unit says (README,
    # Units): a rate in Gb/s, Mb/s or MB/s is the same rate in GB/s (the
    # bare number's unit: bytes), a size in GB, MB, MiB or TiB the same
    # size in GiB; the topology the model then uses (--dump-topology: the
    # channels' capacities, the GPU memory) is the bare value's, the line
    # echoing the --set aside.  Every spelling against the bare number,
    # on the run's topology
    if ck.chance(rng, 0.25):
        rate = rng.choice([200, 400, 800, 1600, 3200])  # Gb/s: a multiple of 64 (whole GB/s)
        forms = [("gpu_memory_gib", ["80GB", "80000MB", "74.50580596923828125GiB"], "74.50580596923828125"),
                 ("gpu_memory_gib", ["81920MiB", "0.078125TiB", "80 GiB"], "80")]
        if key:
            forms.append((key, [f"{rate}Gb/s", f"{rate * 1000}Mb/s", f"{rate * 125}MB/s",
                                f"{rate // 8}GB/s", f"{rate} Gb/s"], "%g" % (rate / 8)))
        dump = lambda k, v: ck.run(["--topology", c["topology"], "--set", f"{k}={v}", "--dump-topology"])
        for k, texts, plain in forms:
            rb, ob, _, cb = dump(k, plain)
            for given in texts:
                ru, ou, _, cu = dump(k, given)
                keep = lambda out: [l for l in out.splitlines() if "with --set" not in l]
                if (ru, keep(ou)) != (rb, keep(ob)):
                    ck.fail(f"{cu}\n  $ {cb}", f"--set {k}={given} gives another topology than ={plain}: "
                                               f"{[l for l in keep(ou) if l not in keep(ob)][:2]}")
    # --no-comm saves at most the exposed time and never lengthens the step
    if ck.chance(rng, 0.3):
        rows4, _, cmd4 = ck.run_csv(base + ["--no-comm"])
        if rows4:
            a, b = by_sched(rows), by_sched(rows4)
            for k in sorted(set(a) & set(b)):
                s0, e0 = float(a[k]["step_ms"]), float(a[k]["exposed_comm_ms"])
                s1, e1 = float(b[k]["step_ms"]), float(b[k]["exposed_comm_ms"])
                if s1 > s0 * (1 + 1e-6) + EPS_MS:
                    ck.fail(f"{cmd}\n  $ {cmd4}", f"{k[0]}: --no-comm lengthens the step {s0} -> {s1}")
                if s1 - e1 > (s0 - e0) * (1 + 1e-6) + 3 * EPS_MS:
                    ck.fail(f"{cmd}\n  $ {cmd4}", f"{k[0]}: step less exposed grows under --no-comm: "
                                                 f"{s0 - e0:.6f} -> {s1 - e1:.6f}")
    # one NVSwitch node: every GPU alike, so where TP, SP and DP lie cannot
    # change a figure (a permutation of the GPUs is a symmetry); on nodes of
    # 8 behind NICs, the two innermost dimensions may swap where together
    # they fill a divisor of the node (the same GPUs per node, permuted)
    other = None
    if c["scope"] != "attention" and ck.chance(rng, 0.4):
        if c["topology"] in ONE_SWITCH:
            other = rng.choice([p for p in PLACEMENTS if p != c["placement"]])
        elif c["topology"] in NODES_OF_8:
            dims = c["placement"].split(",")
            deg = {"tp": int(c.get("tp", 1)), "sp": int(c["sp"]), "dp": int(c.get("dp", 1))}
            if 8 % (deg[dims[0]] * deg[dims[1]]) == 0:
                other = ",".join([dims[1], dims[0], dims[2]])
    if other:
        rp, _, cp = ck.run_csv(args_of(dict(c, placement=other)))
        if rp:
            a, b = by_sched(rows), by_sched(rp)
            for k in sorted(set(a) & set(b)):
                diff = [col for col in SYMMETRIC_COLS if a[k][col] != b[k][col]]
                if diff:
                    ck.fail(f"{cmd}\n  $ {cp}", f"{k[0]}: placement {c['placement']} vs {other} on one "
                                               f"switch changes {diff}: {[(a[k][d], b[k][d]) for d in diff[:3]]}")
    # more GPU memory: the same allocations, never a longer step (a full
    # device only makes the allocator wait)
    if ck.usable_gib(c["topology"])[0] and "gpu-memory" not in c and ck.chance(rng, 0.3):
        rm, _, cm = ck.run_csv(base + ["--set", "gpu_memory_gib=24,48,96,192"])
        if rm:
            series = {}
            for r in ok_rows(rm):
                series.setdefault((r["scheduler"], r["seq_len"], r["gpus"], r["mask"], r["pass"]),
                                  []).append(r)
            for k, rs in sorted(series.items()):
                for small, big in zip(rs, rs[1:]):
                    if small["peak_mem_gib"] != big["peak_mem_gib"]:
                        ck.fail(cm, f"{k[0]}: peak_mem_gib {small['peak_mem_gib']} with "
                                    f"{small['overrides']}, {big['peak_mem_gib']} with {big['overrides']}")
                    if float(big["step_ms"]) > float(small["step_ms"]) * (1 + 1e-9) + EPS_MS:
                        ck.fail(cm, f"{k[0]}: more GPU memory, longer step: {small['step_ms']} ms with "
                                    f"{small['overrides']}, {big['step_ms']} ms with {big['overrides']}")
    # --per-flow, the reference model (every flow solved on its own, no
    # replica or TP rank standing for another): the same answers
    jobs = int(c.get("tp", 1)) * int(c["sp"]) * int(c.get("dp", 1))
    if jobs <= 8 and ck.chance(rng, 0.25):
        rp, _, cpf = ck.run_csv(base + ["--per-flow"])
        if rp:
            a, b = by_sched(rows), by_sched(rp)
            for k in sorted(set(a) & set(b)):
                for col in SYMMETRIC_COLS:
                    x, y = num(a[k], col), num(b[k], col)
                    if (x is None) != (y is None) or (x is not None and abs(x - y) > 2e-6 + 1e-6 * abs(y)):
                        ck.fail(f"{cmd}\n  $ {cpf}", f"{k[0]}: --per-flow gives {col} {b[k][col]}, "
                                                     f"the bundled run {a[k][col]}")
                        break
    # --no-compute and --alone take work or waits away: never a longer
    # step.  Without compute, transfers the kernels kept apart may run at
    # once and share a link, delaying the one on the critical path (a
    # scheduling anomaly of fair sharing, not an error: mi300x8 ring SP 8,
    # Llama-2-7B's attention, 8K, causal backward: 285.821 ms against
    # 285.597, its busiest GPU's communication 283.741 against 283.517):
    # --no-compute is allowed 1% for it
    for what_if, slack in (("--no-compute", 1e-2), ("--alone", 1e-6)):
        if ck.chance(rng, 0.15):
            rw, _, cw = ck.run_csv(base + [what_if])
            if rw:
                relate(ck, f"{what_if} lengthens the step", rw, rows, cw, cmd, "step_ms",
                       lambda x, y, slack=slack: x <= y * (1 + slack) + EPS_MS)
    # a backward alone is given what the forward saved and frees each
    # tensor after its last reader (plan_buf_saved_input), as the backward
    # of forward and backward together frees the same ones, which also
    # holds the forward's output: the backward alone never holds more.
    # With the full mask and --no-comm, where the backward after a forward
    # starts every GPU as the backward alone does: elsewhere a causal
    # forward's imbalance staggers the GPUs' backward starts and transfers
    # in flight overlap otherwise (torus4x4, ring SP 4 at 4K, causal: three
    # float32 dK/dV buffers alone, two after the forward).  A layer's saved
    # activations held to the end broke it (layer scope, TP 2 x SP 4 at
    # 16K, full, --no-comm: ring 1.0471 GiB alone, 0.8674 both)
    if c["scope"] != "model" and "docs" not in c and ck.chance(rng, 0.3):
        rb, _, cb = ck.run_csv(args_of(dict(c, mask="full", **{"pass": "bwd,fwdbwd", "no-comm": True})))
        if rb:
            runs = {}
            for r in ok_rows(rb):
                runs[(r["scheduler"], r["seq_len"], r["gpus"], r["pass"])] = r
            for k in sorted(runs):
                both = runs.get(k[:3] + ("fwdbwd",))
                if k[3] == "bwd" and both and \
                        float(runs[k]["peak_mem_gib"]) > float(both["peak_mem_gib"]) + EPS_GIB:
                    ck.fail(cb, f"{k[0]} (seq {k[1]}, sp {k[2]}): the backward alone holds "
                                f"{runs[k]['peak_mem_gib']} GiB, forward and backward "
                                f"{both['peak_mem_gib']}")
    if c["scope"] == "model":
        sp_dp = int(c["sp"]) * int(c.get("dp", 1))
        # a second micro-batch adds work and keeps the first's gradients
        # (memory compared on whole steps at ZeRO 2-3, where the
        # extended peak is not exact: h200x4, Linear-Llama3-1B, TP 2 x SP
        # 2, ZeRO 2, 8K: one micro-batch 18.98 GiB extended, 10.19 whole,
        # two 13.29)
        if int(c.get("micro-batches", 1)) == 1 and ck.chance(rng, 0.3):
            whole2 = {"whole-steps": True} if int(c.get("zero", 0)) >= 2 else {}
            r2, _, c2 = ck.run_csv(args_of(dict(c, **{"micro-batches": 2}, **whole2)))
            r1, c1 = rows, cmd
            if whole2 and not c.get("whole-steps"):
                r1, _, c1 = ck.run_csv(args_of(dict(c, **whole2)))
            if r2 and r1:
                relate(ck, "two micro-batches hold less than one", r2, r1, c2, c1, "peak_mem_gib", ge)
                relate(ck, "two micro-batches are faster than one", r2, r1, c2, c1, "step_ms", ge)
        # ZeRO shards what it shards: stage 3 never holds more than stage 0.
        # The whole step's peaks: at ZeRO 2-3 an extended peak is not exact
        # (its note says so), high or low by the gradients waiting at 6 and
        # 7 layers (torus4x4 tokenring, 4K, DP 2: 55.65 GiB extended, 49.50
        # whole), so relations between memories compare whole steps there
        whole = [] if c.get("whole-steps") else ["whole-steps"]
        if sp_dp > 1 and ck.chance(rng, 0.5):
            r0, _, c0 = ck.run_csv(args_of(dict(c, zero=0)))
            r3, _, c3 = ck.run_csv(args_of(dict(c, zero=3, **{k: True for k in whole})))
            if r0 and r3:
                relate(ck, "ZeRO 3 holds more than ZeRO 0", r3, r0, c3, c0, "peak_mem_gib", le)
        # full recomputation keeps only each layer's input: never more memory
        if ck.chance(rng, 0.5):
            exact = {k: True for k in whole} if int(c.get("zero", 0)) >= 2 else {}
            rn, _, cn = ck.run_csv(args_of(dict(c, recompute="none", **exact)))
            rf, _, cf = ck.run_csv(args_of(dict(c, recompute="full", **exact)))
            if rn and rf:
                relate(ck, "full recomputation holds more than none", rf, rn, cf, cn,
                       "peak_mem_gib", le)
                relate(ck, "full recomputation is faster than none", rf, rn, cf, cn,
                       "step_ms", ge)


# ---------------------------------------------------------------- spellings

# TransformerEngine's cp_comm_type names that run an existing scheduler
# under their own name (README, "Sequence-parallel methods"): the same plan,
# so every figure of the row is the base scheduler's
ALIASES = {"p2p": "zigzag", "a2a": "ulysses", "a2a+p2p": "usp-zigzag"}
# columns that name the scheduler or depend on the rest of the group
GROUP_COLS = {"scheduler", "baseline", "speedup_vs_best"}


def check_aliases(ck, rng, c, rows, cmd):
    """An alias's rows are its base scheduler's, figure for figure: the
    aliases in the run against a run of their bases, or the bases in the run
    against a run of their aliases."""
    if c["sched"] == "all" or not ck.chance(rng, 0.4):
        return
    scheds = c["sched"].split(",")
    pairs = {a: b for a, b in ALIASES.items() if a in scheds}
    if not pairs:
        pairs = {b: a for a, b in ALIASES.items() if b in scheds}
    if not pairs:
        return
    other, _, ocmd = ck.run_csv(args_of(dict(c, sched=",".join(sorted(set(pairs.values()))))))
    if other is None:
        return
    key = lambda r, name: (name, r["seq_len"], r["gpus"], r["mask"], r["pass"], r["overrides"])
    theirs = {key(r, r["scheduler"]): r for r in other}
    for r in rows:
        if r["scheduler"] not in pairs:
            continue
        o = theirs.get(key(r, pairs[r["scheduler"]]))
        if o is None:
            ck.fail(f"{cmd}\n  $ {ocmd}", f"{r['scheduler']} (seq {r['seq_len']}, sp {r['gpus']}): "
                                           f"no row of {pairs[r['scheduler']]} for it")
            continue
        if (r["status"] == "ok") != (o["status"] == "ok"):
            ck.fail(f"{cmd}\n  $ {ocmd}", f"{r['scheduler']} status {r['status'][:60]!r}, "
                                           f"{o['scheduler']} {o['status'][:60]!r}")
            continue
        if r["status"] != "ok":
            continue
        diff = [k for k in r if k not in GROUP_COLS and r[k] != o[k]]
        if diff:
            ck.fail(f"{cmd}\n  $ {ocmd}", f"{r['scheduler']} (seq {r['seq_len']}, sp {r['gpus']}, {r['mask']}, "
                                           f"{r['pass']}) is not {o['scheduler']}'s row: "
                                           f"{[(k, r[k], o[k]) for k in diff[:3]]}")


def scenario_of(c, rng):
    """The configuration as a scenario file (README, "Scenario files"), and
    the options it leaves on the command line (those it has no key for).
    A model is named by a string or by {"preset": ...}, and no model
    sometimes by an object of the default's run fields ({"batch": 1}: a
    model object without heads once switched to 32 KV heads)."""
    sc = {"name": c["topology"], "topology": c["topology"], "seq_len": c["seq"], "sp": int(c["sp"]),
          "schedulers": "all" if c["sched"] == "all" else c["sched"].split(","),
          "mask": c["mask"].split(","), "pass": c["pass"]}
    model = c.get("model")
    if model is not None and os.path.exists(model):
        model = os.path.abspath(model)  # a scenario's model file is relative to the scenario
    if "docs" in c:
        sc["model"] = {"docs": c["docs"]} if model is None else {"preset": model, "docs": c["docs"]}
    elif model is not None:
        sc["model"] = model if rng.random() < 0.5 else {"preset": model}
    elif rng.random() < 0.5:
        sc["model"] = rng.choice([{"batch": 1}, {"dtype": "bf16"}, {"grad_dtype": "fp32"}])
    job = {k.replace("-", "_"): v for k, v in c.items()
           if k in ("scope", "tp", "dp", "zero", "recompute", "micro-batches", "placement", "precision")}
    if job:
        sc["job"] = job
    rest = {k: v for k, v in c.items() if k in ("whole-steps",)}
    return sc, rest


def check_scenario(ck, rng, c, csv_text, table, cmd):
    """A scenario file and the same options on the command line give the
    same bytes: the table and the CSV (the main run's, csv_text)."""
    if not ck.chance(rng, 0.25):
        return
    sc, rest = scenario_of(c, rng)
    path = os.path.join(ck.tmp, "scenario.json")
    with open(path, "w") as f:
        json.dump(sc, f)
    out_csv = os.path.join(ck.tmp, "scenario.csv")
    rc, out, err, line = ck.run([path] + args_of(rest) + ["--csv", out_csv])
    shown = line.replace(ck.tmp + "/", "") + "   # scenario.json: " + json.dumps(sc)
    if rc != 0:
        return ck.fail(f"{cmd}\n  $ {shown}", f"the command line runs, the same scenario file exits "
                                              f"{rc}: {err.strip()[-200:]}")
    with open(out_csv) as f:
        text = f.read()
    if text != csv_text:
        a, b = csv_text.splitlines(), text.splitlines()
        at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        ck.fail(f"{cmd}\n  $ {shown}", f"the scenario file's CSV differs from the command line's at line "
                                       f"{at + 1}: {(a[at:at + 1] or [''])[0][:100]!r} vs {(b[at:at + 1] or [''])[0][:100]!r}")
    if out != table:
        a, b = table.splitlines(), out.splitlines()
        at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        ck.fail(f"{cmd}\n  $ {shown}", f"the scenario file's table differs from the command line's at line "
                                       f"{at + 1}: {(a[at:at + 1] or [''])[0][:100]!r} vs {(b[at:at + 1] or [''])[0][:100]!r}")


def check_csv_stdout(ck, rng, c, csv_text, cmd):
    """--csv - writes to stdout the bytes --csv FILE writes (-q or not)."""
    if not ck.chance(rng, 0.2):
        return
    rc, out, _, line = ck.run(args_of(c) + ["--csv", "-"] + (["-q"] if rng.random() < 0.5 else []))
    if rc != 0 or out != csv_text:
        ck.fail(f"{cmd}\n  $ {line}", f"--csv - (exit {rc}) prints other bytes than --csv FILE holds "
                                      f"({len(out)} against {len(csv_text)} characters)")


def check_set_alone(ck, rng, c):
    """A --set sweep's rows for one value are that value's run alone, byte
    for byte (every swept topology is loaded before any runs: one must not
    leak into another's points)."""
    if not ck.chance(rng, 0.15):
        return
    key = TOPOLOGIES[c["topology"]][1] or "comm.launch_us"
    values = {"comm.launch_us": ["5", "20", "40"]}.get(key, ["25", "100", "400"])
    if key == TOPOLOGIES[c["topology"]][1] and rng.random() < 0.3:
        key, values = "gpu_memory_gib", ["24", "64", "160"]
    one = rng.choice(values)
    rc, out, _, line = ck.run(args_of(c) + ["--set", f"{key}={','.join(values)}", "--csv", "-", "-q"])
    rc1, out1, _, line1 = ck.run(args_of(c) + ["--set", f"{key}={one}", "--csv", "-", "-q"])
    if rc != rc1:
        return ck.fail(f"{line}\n  $ {line1}", f"the --set sweep exits {rc}, its value {one} alone {rc1}")
    if rc != 0:
        return
    mine = [l for l in out.splitlines()[1:] if f"{key}={one} " in l]
    alone = out1.splitlines()[1:]
    if mine != alone:
        diff = next(((a, b) for a, b in zip(mine, alone) if a != b), (len(mine), len(alone)))
        ck.fail(f"{line}\n  $ {line1}", f"the --set sweep's rows for {key}={one} are not the value's run alone: "
                                        f"{str(diff[0])[:120]!r} vs {str(diff[1])[:120]!r}")


def check_neutral_options(ck, rng, c, rows, csv_text, cmd):
    """Options that change one thing only: --baseline ring|zigzag changes
    speedup_vs_best and baseline alone (the named scheduler's step over the
    row's, empty where it did not run); --links-summary and, where every
    row ran, --strict leave the CSV as it is."""
    if "baseline" in c or not ck.chance(rng, 0.2):
        return
    base = rng.choice(["ring", "zigzag"])
    if c.get("model") in LINEAR_MODELS:
        base = "ring"  # zigzag runs no linear layer: --baseline zigzag is refused, naming it
    other, _, ocmd = ck.run_csv(args_of(c) + ["--baseline", base])
    if other is None:
        return ck.fail(f"{cmd}\n  $ {ocmd}", f"--baseline {base} refuses a run that runs without it")
    if len(other) != len(rows):
        return ck.fail(f"{cmd}\n  $ {ocmd}", f"--baseline {base}: {len(other)} rows, {len(rows)} without")
    groups = {}
    for r in other:
        groups.setdefault((r["seq_len"], r["gpus"], r["mask"], r["pass"], r["overrides"]), {})[r["scheduler"]] = r
    for a, b in zip(rows, other):
        diff = [k for k in a if k not in ("speedup_vs_best", "baseline") and a[k] != b[k]]
        if diff:
            ck.fail(f"{cmd}\n  $ {ocmd}", f"--baseline {base} changes {b['scheduler']}'s {diff[:3]}")
            break
        if b["status"] != "ok":
            continue
        ref = groups[(b["seq_len"], b["gpus"], b["mask"], b["pass"], b["overrides"])].get(base)
        # the baseline runs hidden where not asked for, as ring does (README)
        if ref is None or ref["status"] != "ok":
            if b["speedup_vs_best"] and ref is not None:
                ck.fail(f"{ocmd}", f"{b['scheduler']}: speedup_vs_best {b['speedup_vs_best']} though "
                                   f"{base} did not run the point")
            continue
        want = float(ref["step_ms"]) / float(b["step_ms"]) if float(b["step_ms"]) > 0 else None
        got = num(b, "speedup_vs_best")
        if b["baseline"] != base or (want is not None and got is not None and
                                     abs(got - want) > 1e-4 + 1e-6 * want):
            ck.fail(f"{ocmd}", f"{b['scheduler']}: --baseline {base} gives baseline {b['baseline']!r}, "
                               f"speedup_vs_best {b['speedup_vs_best']} (its step over the row's: {want})")
    extra = [["--links-summary"]] + ([["--strict"]] if all(r["status"] == "ok" for r in rows) else [])
    for opt in extra:
        rc, out, _, line = ck.run(args_of(c) + opt + ["--csv", "-", "-q"])
        if rc != 0 or out != csv_text:
            ck.fail(f"{cmd}\n  $ {line}", f"{opt[0]} changes the CSV (exit {rc})")


def check_unwritable(ck, rng, c):
    """An output that cannot be created (its folder missing) is refused up
    front: exit 2 naming its option, nothing on stdout, no other output
    file written (README: outputs land together or not at all)."""
    if not ck.chance(rng, 0.1):
        return
    outs = ["--csv", "--links", "--memory", "--trace"]
    bad = rng.choice(outs)
    folder = os.path.join(ck.tmp, "unwritable")
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))
    args = list(args_of(c))
    for o in outs:
        args += [o, os.path.join(folder, "missing", "x") if o == bad else os.path.join(folder, o[2:])]
    rc, out, err, line = ck.run(args)
    line = line.replace(ck.tmp + "/", "")
    left = sorted(os.listdir(folder))
    if rc != 2 or bad not in err or out or left:
        ck.fail(line, f"an output in a missing folder ({bad}): exit {rc}, stderr {err.strip()[:80]!r}, "
                      f"{len(out)} characters on stdout, files left {left}")


# ---------------------------------------------------------------- search

def sample_search(rng):
    topo = rng.choice(["h100x8", "h200x4", "h200x4-tool", "mi300x8"])
    c = {"topology": topo, "model": rng.choice(["tests/data/search-model.json", "llama3-8b"]),
         "seq": rng.choice(["8K", "16K"]),
         "sched": ",".join(sorted(rng.sample(SOFTMAX_SCHEDS[:-1], 2))),
         "objective": rng.choice(["tokens", "step"]), "top": rng.choice([3, 10])}
    if rng.random() < 0.3:
        c["gpus"] = 4
    if rng.random() < 0.3:
        c["precision"] = rng.choice(["amp", "bf16"])
    if rng.random() < 0.3:
        c["gpu-memory"] = rng.choice(["40", "24"])
    if rng.random() < 0.25:
        c["global-batch-tokens"] = rng.choice(["64K", "128K"])
    return c


def main_args_of_search_row(c, r):
    """The main command for one configuration of the search's CSV."""
    a = ["--model", c["model"], "--topology", c["topology"], "--seq", c["seq"],
         "--scope", "model", "--pass", "fwdbwd", "--mask", r["mask"], "--tp", r["tp"],
         "--sp", r["sp"], "--dp", r["dp"], "--zero", r["zero"], "--recompute", r["recompute"],
         "--micro-batches", r["micro_batches"], "--placement", r["placement"],
         "--precision", r["precision"]]
    sched = r["scheduler"]
    if sched == "no-sp":
        sched = "ring"
    a += ["--sched", sched]
    split, hp = int(r["split"]), int(r["head_parallel"])
    if sched in ("usp", "usp-zigzag", "a2a+p2p") and split:
        a += ["--usp-ulysses", str(split)]
    if sched == "double-ring":
        if split:
            a += ["--double-ring-inner", str(split)]
        if hp:
            a += ["--double-ring-ulysses", str(hp)]
    if "gpu-memory" in c:
        a += ["--set", "gpu_memory_gib=" + c["gpu-memory"]]
    return a


def check_search(ck, rng, c):
    args = ["search"] + args_of(c)
    path = os.path.join(ck.tmp, "search.csv")
    rc, out, err, cmd = ck.run(args + ["--csv", path])
    if rc == 2 and err.strip():
        return
    if rc != 0:
        return ck.fail(cmd, f"search exit status {rc}: {err.strip()[-300:]}")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    usable = float(rows[0]["usable_gib"]) if rows and rows[0]["usable_gib"] else None
    sim = [r for r in rows if r["status"] in ("simulated", "does not fit")]
    for r in sim:
        what = (f"{r['scheduler']} TP {r['tp']} SP {r['sp']} DP {r['dp']} ZeRO {r['zero']} "
                f"{r['recompute']} {r['placement']}")
        mem, step = float(r["peak_mem_gib"]), float(r["step_s"])
        # fits as the main command's row does: allocated and reserved
        # within the usable memory; the CSV gives no reserved peak, a
        # configuration refused for it says it in its reason ("does not
        # fit: reserved 38.8 GiB > 36.9 GiB usable" at 36.49 allocated:
        # mi300x8, double-ring SP 4 x DP 2, ZeRO 2, full recomputation)
        over = re.match(r"does not fit: reserved ([0-9.]+) GiB > ", r["reason"])
        reserved_over = over is not None and float(over.group(1)) > usable - 0.05 if usable else False
        if usable is not None and (r["status"] == "simulated") != (mem <= usable + 1e-9 and not reserved_over):
            ck.fail(cmd, f"search: {what} is '{r['status']}' with {mem:.4f} GiB of {usable} usable "
                         f"({r['reason'][:60]!r})")
        if r["bound_s"] and step < float(r["bound_s"]) * (1 - 1e-9):
            ck.fail(cmd, f"search: {what} simulated {step} s below its lower bound {r['bound_s']} s")
        if r["mem_bound_gib"] and mem < float(r["mem_bound_gib"]) * (1 - 1e-9):
            ck.fail(cmd, f"search: {what} peak {mem} GiB below its memory bound {r['mem_bound_gib']}")
        tps = float(r["tokens_per_s_per_gpu"])
        job = int(r["tp"]) * int(r["sp"]) * int(r["dp"])
        want = int(r["seq_len"]) * int(r["micro_batches"]) * int(r["dp"]) / (step * job)
        if abs(tps / want - 1) > 1e-9:
            ck.fail(cmd, f"search: {what} tokens_per_s_per_gpu {tps} != {want}")
    fit = [r for r in rows if r["status"] == "simulated"]
    m = re.search(r"^winner: (\S+), .*: ([0-9.]+) tokens/s per GPU, ([0-9.]+) s per step$", out, re.M)
    if fit:
        if c["objective"] == "tokens":
            best = max(fit, key=lambda r: float(r["tokens_per_s_per_gpu"]))
        else:
            best = min(fit, key=lambda r: float(r["step_s"]))
        if not m:
            ck.fail(cmd, "search: configurations fit, yet no 'winner:' line")
        elif (m.group(1) != best["scheduler"]
              or abs(float(m.group(2)) - float(best["tokens_per_s_per_gpu"])) > 0.051
              or abs(float(m.group(3)) - float(best["step_s"])) > 5.1e-5):
            ck.fail(cmd, f"search: winner {m.group(1)} at {m.group(2)} tokens/s, {m.group(3)} s; "
                         f"the best simulated that fits by '{c['objective']}' is {best['scheduler']} at "
                         f"{float(best['tokens_per_s_per_gpu']):.1f} tokens/s, {float(best['step_s']):.4f} s")
    elif m:
        ck.fail(cmd, "search: a winner though no configuration fits")
    # the ranked table: the top configurations that fit, best first by the
    # objective (as many as --top allows), each a simulated row of the CSV
    # with the figures printed (step to 4 decimals, tokens/s to 0.1, MFU to
    # 0.1%, memory to 0.1 GiB)
    table = re.findall(r"^ +(\d+)  (\S+) +(\d+) +(\d+) +(\S+) +(\d+) (\S+) +(\d) (\S+) +(\d+) +([0-9.]+) +"
                       r"([0-9.]+) +(\S+) +([0-9.]+)G  ", out, re.M)
    if len(table) != min(len(fit), int(c["top"])):
        ck.fail(cmd, f"search: {len(table)} ranked rows for {len(fit)} configurations that fit, --top {c['top']}")
    key = (lambda r: float(r["step_s"])) if c["objective"] == "step" else \
        (lambda r: -float(r["tokens_per_s_per_gpu"]))
    order = sorted(fit, key=key)
    def split_text(r):  # the 'spl' column: "-", "W", "UxW" or "Ux-" (search_out.c)
        hp, sp = int(r["head_parallel"]), int(r["split"])
        return f"{hp}x{sp if sp else '-'}" if hp > 1 else (str(sp) if sp else "-")
    for t, want in zip(table, order):
        same = [r for r in fit if (r["scheduler"], r["tp"], r["sp"], split_text(r), r["dp"], r["placement"],
                                   r["zero"], r["recompute"], r["micro_batches"]) == t[1:10]]
        ok = any(abs(float(t[10]) - float(r["step_s"])) <= 5.1e-5 and
                 abs(float(t[11]) - float(r["tokens_per_s_per_gpu"])) <= 0.051 and
                 abs(float(t[13]) - float(r["peak_mem_gib"])) <= 0.051 and
                 (t[12] == "-" or abs(float(t[12].rstrip("%")) - 100 * float(r["mfu"])) <= 0.051)
                 for r in same)
        in_order = any(abs(key(r) - key(want)) <= 1e-9 * abs(key(want)) for r in same)
        if not (ok and in_order):
            ck.fail(cmd, f"search: rank {t[0]} ({' '.join(t[1:10])}: {t[10]} s, {t[11]} tokens/s) is not "
                         f"the CSV's rank {t[0]} by '{c['objective']}' ({want['scheduler']}, "
                         f"{want['step_s']} s, {want['tokens_per_s_per_gpu']} tokens/s), or its figures differ")
    # each other method's line: its best simulated configuration that fits
    # by the objective, the winner's margin over it (step: its step over the
    # winner's; tokens: the winner's tokens/s over its), or, where none
    # fits, how many of its configurations did not fit and were excluded
    if fit and m:
        win = float(best["step_s"]) if c["objective"] == "step" else float(best["tokens_per_s_per_gpu"])
        for line in re.findall(r"^  ahead of (\S+) +by +([0-9.]+)% \(its best: .*, ([0-9.]+) tokens/s "
                               r"per GPU\)$", out, re.M):
            mine = [r for r in fit if r["scheduler"] == line[0]]
            if not mine:
                ck.fail(cmd, f"search: 'ahead of {line[0]}' though none of its configurations fits")
                continue
            if c["objective"] == "step":
                its = min(mine, key=lambda r: float(r["step_s"]))
                margin = float(its["step_s"]) / win - 1
            else:
                its = max(mine, key=lambda r: float(r["tokens_per_s_per_gpu"]))
                margin = win / float(its["tokens_per_s_per_gpu"]) - 1
            if abs(float(line[2]) - float(its["tokens_per_s_per_gpu"])) > 0.051 or \
                    abs(float(line[1]) - 100 * margin) > 0.051:
                ck.fail(cmd, f"search: ahead of {line[0]} by {line[1]}% at {line[2]} tokens/s; its best "
                             f"simulated that fits: {float(its['tokens_per_s_per_gpu']):.1f} tokens/s, "
                             f"a margin of {100 * margin:.2f}%")
    for line in re.findall(r"^  (\S+) +none runs and fits \((\d+) simulated do not fit, (\d+) excluded\)$",
                           out, re.M):
        mine = [r for r in rows if r["scheduler"] == line[0]]
        nofit = sum(r["status"] == "does not fit" for r in mine)
        excl = sum(r["status"] == "excluded" for r in mine)
        if any(r["status"] == "simulated" for r in mine) or (nofit, excl) != (int(line[1]), int(line[2])):
            ck.fail(cmd, f"search: {line[0]} 'none runs and fits ({line[1]} do not fit, {line[2]} excluded)'; "
                         f"the CSV: {nofit} do not fit, {excl} excluded, "
                         f"{sum(r['status'] == 'simulated' for r in mine)} fit")
    # more GPU memory never excludes more: the memory bound and a
    # simulated peak do not depend on the capacity, so a configuration
    # excluded for memory with twice the memory is excluded with the
    # memory given, and one that fits with it is not excluded nor short of
    # memory with twice; the best score (tokens/s per GPU, or the step)
    # never worse (an exact search: its answer is the exhaustive one's)
    if usable is not None and ck.chance(rng, 0.35):
        gm = float(c.get("gpu-memory", ck.usable_gib(c["topology"])[0] or 0))
        path2 = os.path.join(ck.tmp, "search2.csv")
        more = ["search"] + args_of({k: v for k, v in c.items() if k != "gpu-memory"})
        rc2, out2, _, cmd2 = ck.run(more + ["--gpu-memory", "%g" % (2 * gm), "--csv", path2])
        if rc2 == 0:
            with open(path2, newline="") as f:
                big = {r["index"]: r for r in csv.DictReader(f)}
            for r in rows:
                b = big.get(r["index"])
                if b is None:
                    continue
                what = f"{r['scheduler']} TP {r['tp']} SP {r['sp']} DP {r['dp']} ZeRO {r['zero']} {r['recompute']}"
                if b["status"] == "excluded" and b["class"] == "memory" and \
                        not (r["status"] == "excluded" and r["class"] == "memory"):
                    ck.fail(f"{cmd}\n  $ {cmd2}", f"search: {what} excluded for memory with {2 * gm:g} GiB, "
                                                   f"'{r['status']}' with {gm:g}")
                if r["status"] == "simulated" and (b["status"] == "does not fit" or
                                                   (b["status"] == "excluded" and b["class"] == "memory")):
                    ck.fail(f"{cmd}\n  $ {cmd2}", f"search: {what} fits with {gm:g} GiB, "
                                                   f"'{b['status']}' with {2 * gm:g}")
            fit2 = [r for r in big.values() if r["status"] == "simulated"]
            if fit and fit2:
                key2 = (lambda r: -float(r["step_s"])) if c["objective"] == "step" else \
                    (lambda r: float(r["tokens_per_s_per_gpu"]))
                a_best, b_best = max(map(key2, fit)), max(map(key2, fit2))
                if b_best < a_best - 1e-9 * abs(a_best):
                    ck.fail(f"{cmd}\n  $ {cmd2}", f"search: the best with {2 * gm:g} GiB ({abs(b_best):.6g}) "
                                                   f"is worse than with {gm:g} ({abs(a_best):.6g})")
            elif fit and not fit2:
                ck.fail(f"{cmd}\n  $ {cmd2}", f"search: nothing fits with {2 * gm:g} GiB, "
                                               f"{len(fit)} configurations with {gm:g}")
    # one thread or two: the same answer and CSV, byte for byte (the
    # search's simulations run on a pool; its ranking must not hang on
    # which finishes first)
    if ck.chance(rng, 0.3):
        outs = []
        for j in ("1", "2"):
            pj = os.path.join(ck.tmp, f"jobs{j}.csv")
            rcj, outj, _, cj = ck.run(args + ["--jobs", j, "--csv", pj])
            outs.append((rcj, outj, open(pj).read() if rcj == 0 else "", cj))
        if outs[0][:3] != outs[1][:3]:
            ck.fail(f"{outs[0][3]}\n  $ {outs[1][3]}", "search: --jobs 1 and --jobs 2 differ")
    # shards merged = the whole search, byte for byte
    if ck.chance(rng, 0.5):
        parts = []
        for i in range(2):
            p = os.path.join(ck.tmp, f"shard{i}.csv")
            ck.run(args + ["--shard", f"{i}/2", "--csv", p, "-q"])
            parts.append(p)
        rc2, merged, _, mcmd = ck.run(["search", "--merge"] + parts)
        if rc2 != 0 or merged != out:
            ck.fail(f"{cmd} --shard I/2 --csv sI.csv -q\n  $ build/tasp-sim search --merge s0.csv s1.csv",
                    "search: the shards' merge prints another answer than the whole search")
    # a configuration excluded for memory does not fit: the main command,
    # replaying its whole step (an extended peak at ZeRO 2-3 may be low),
    # holds at least its memory bound and more than the usable memory (a
    # bound too high would drop a configuration that fits, perhaps the
    # answer, and say nothing)
    excl = [r for r in rows if r["status"] == "excluded" and r["class"] == "memory"]
    if excl and ck.chance(rng, 0.5):
        r = rng.choice(excl)
        rows3, _, cmd3 = ck.run_csv(main_args_of_search_row(c, r) + ["--whole-steps"])
        if rows3 and ok_rows(rows3):
            m3 = ok_rows(rows3)[0]
            if float(m3["peak_mem_gib"]) < float(r["mem_bound_gib"]) * (1 - 1e-9) - EPS_GIB or \
                    m3["fits"] == "yes":
                ck.fail(f"{cmd}\n  $ {cmd3}", f"search excluded {r['scheduler']} (index {r['index']}) for "
                                               f"memory, bound {float(r['mem_bound_gib']):.4f} GiB; the main "
                                               f"command holds {m3['peak_mem_gib']} GiB, fits {m3['fits']!r}")
    # a simulated configuration is the main command's row for it; the
    # winner half the time (the answer a user acts on: its step, memory
    # and tokens/s are what the main command gives for it)
    if sim and ck.chance(rng, 0.7):
        r = best if fit and m and ck.chance(rng, 0.5) else rng.choice(sim)
        rows2, _, cmd2 = ck.run_csv(main_args_of_search_row(c, r))
        if rows2 is None or not ok_rows(rows2):
            ck.fail(f"{cmd}\n  $ {cmd2}", f"search simulated {r['scheduler']} index {r['index']}, "
                                          "the main command does not run it")
        else:
            m2 = ok_rows(rows2)[0]
            for sc, mc, scale, eps in (("step_s", "step_ms", 1e3, EPS_MS),
                                       ("peak_mem_gib", "peak_mem_gib", 1, EPS_GIB),
                                       ("mfu", "mfu", 1, EPS_UTIL),
                                       ("tokens_per_s_per_gpu", "tokens_per_s_per_gpu", 1, 0.051)):
                x, y = float(r[sc]) * scale, float(m2[mc])
                if abs(x - y) > eps + 1e-9 * abs(y):
                    ck.fail(f"{cmd}\n  $ {cmd2}", f"search's {r['scheduler']} (index {r['index']}) "
                                                  f"{sc} {r[sc]}, the main command's {mc} {m2[mc]}")


# ---------------------------------------------------------------- driver

def check_links(ck, cmd, rows, path):
    """The --links CSV against the rows: per point the channels' largest and
    mean utilisation are max_link_util and mean_link_util, and each channel's
    utilisation is its bytes over capacity x step."""
    with open(path, newline="") as f:
        links = list(csv.DictReader(f))
    per = {}
    for l in links:
        per.setdefault((l["scheduler"], l["seq_len"], l["gpus"], l["mask"], l["pass"],
                        l["overrides"]), []).append(l)
    for r in ok_rows(rows):
        k = (r["scheduler"], r["seq_len"], r["gpus"], r["mask"], r["pass"], r["overrides"])
        ch = per.get(k)
        if not ch:
            continue
        u = [float(l["utilization"]) for l in ch]
        mx, mean = float(r["max_link_util"]), float(r["mean_link_util"])
        if abs(max(u) - mx) > EPS_UTIL or abs(sum(u) / len(u) - mean) > EPS_UTIL:
            ck.fail(cmd, f"{r['scheduler']}: --links utilisations max {max(u):.4f} mean "
                         f"{sum(u) / len(u):.4f}, the row max {mx} mean {mean}")
        step_s = float(r["step_ms"]) / 1e3
        for l in ch:
            if step_s <= 0:
                break
            want = float(l["bytes"]) / (float(l["capacity_gbps"]) * 1e9 * step_s)
            if abs(want - float(l["utilization"])) > EPS_UTIL + 1e-3 * want:
                ck.fail(cmd, f"{r['scheduler']}: channel {l['channel']} utilization {l['utilization']}, "
                             f"its bytes over capacity x step {want:.4f}")
                break
            if float(l["busy_ms"]) > float(r["step_ms"]) * (1 + 1e-6) + EPS_MS:
                ck.fail(cmd, f"{r['scheduler']}: channel {l['channel']} busy {l['busy_ms']} ms "
                             f"in a step of {r['step_ms']} ms")
                break


def check_memory_file(ck, cmd, rows, path):
    """The --memory file against the rows (where both replay the same step):
    each point's largest GPU total is peak_mem_gib, its largest reserved
    peak_reserved_gib."""
    blocks, cur = [], None
    with open(path) as f:
        for line in f:
            if re.match(r"\S+ seq \S+ sp \d+ .*: peak ", line):
                cur = {"alloc": [], "res": []}
                blocks.append(cur)
            m = re.match(r"  GPU \d+: ([0-9.]+) GiB(?: \(reserved ([0-9.]+) GiB\))?", line)
            if m and cur is not None:
                cur["alloc"].append(float(m.group(1)))
                if m.group(2):
                    cur["res"].append(float(m.group(2)))
    ran = ok_rows(rows)
    if len(blocks) != len(ran):
        return ck.fail(cmd, f"--memory has {len(blocks)} points, the CSV {len(ran)} that ran")
    for r, b in zip(ran, blocks):
        if b["alloc"] and abs(max(b["alloc"]) - float(r["peak_mem_gib"])) > 6e-4:
            ck.fail(cmd, f"{r['scheduler']}: --memory's peak {max(b['alloc'])} GiB, "
                         f"peak_mem_gib {r['peak_mem_gib']}")
        if b["res"] and r["peak_reserved_gib"] and \
                abs(max(b["res"]) - float(r["peak_reserved_gib"])) > 6e-4:
            ck.fail(cmd, f"{r['scheduler']}: --memory's reserved {max(b['res'])} GiB, "
                         f"peak_reserved_gib {r['peak_reserved_gib']}")


def check_trace(ck, cmd, rows, path, times=True):
    """The --trace file against the rows (where both replay the same step):
    a process per point that ran, in row order, named by its scheduler,
    each track id named once; per point (times: not where the attention
    scope's model has several layers, of which the trace shows one of each
    kind, README "Layers") the busiest GPU's compute track covers
    compute_ms, the busiest communication track comm_ms (the union of its
    spans: groups in flight together count once), and the last span ends
    at step_ms."""
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    procs = [(e["pid"], e["args"]["name"]) for e in ev if e.get("ph") == "M" and e["name"] == "process_name"]
    named = [(e["pid"], e["tid"]) for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"]
    if len(named) != len(set(named)):
        ck.fail(cmd, "--trace names a track id twice (one track drawn as two GPUs' or a GPU's and "
                     "its transfers)")
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = {}
    for e in ev:
        if e.get("ph") == "X":
            spans.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))

    def union(s):
        tot, cur = 0.0, None
        for a, b in sorted(s):
            if cur is None or a > cur[1]:
                tot += cur[1] - cur[0] if cur else 0
                cur = [a, b]
            else:
                cur[1] = max(cur[1], b)
        return tot + (cur[1] - cur[0] if cur else 0)
    ran = ok_rows(rows)
    if len(procs) != len(ran):
        return ck.fail(cmd, f"--trace has {len(procs)} points, the CSV {len(ran)} that ran")
    for (pid, name), r in zip(procs, ran):
        if not name.startswith(r["scheduler"] + " "):
            return ck.fail(cmd, f"--trace's point {name!r} where the CSV has {r['scheduler']}")
        if not times:
            continue
        mine = {k: v for k, v in spans.items() if k[0] == pid}
        got = {kind: max((union(v) for k, v in mine.items() if threads[k].endswith(" " + kind)), default=0) / 1e3
               for kind in ("compute", "comm")}
        end = max((b for v in mine.values() for _, b in v), default=0) / 1e3
        # its memory counters (GiB a GPU, README "Memory per GPU") peak at peak_mem_gib
        mem = [v for e in ev if e.get("ph") == "C" and e["pid"] == pid and e["name"].endswith(" memory")
               for v in e["args"].values()]
        if mem and abs(max(mem) - float(r["peak_mem_gib"])) > 2 * EPS_GIB:
            ck.fail(cmd, f"{name}: --trace's memory counters peak at {max(mem)} GiB, "
                         f"peak_mem_gib {r['peak_mem_gib']}")
        # spans are rounded to the microsecond per end (README, --trace)
        for what, x, col in (("compute track", got["compute"], "compute_ms"),
                             ("communication track", got["comm"], "comm_ms"), ("last span's end", end, "step_ms")):
            y = float(r[col])
            if abs(x - y) > 2e-3 + 1e-6 * y:
                ck.fail(cmd, f"{name}: --trace's {what} {x:.6f} ms, {col} {r[col]}")


def check_replicas(ck, rng, c, rows):
    """A second data-parallel replica (model scope, DP 1 -> 2): the same
    layers on twice the GPUs, so the step's model FLOPs (mfu x step x job
    GPUs) are exactly twice DP 1's, however the job is simulated (its
    replicas one simulation with a multiplicity: layer_orbits).  Where the
    replica is laid out after the first (placement ending in dp: each
    replica's TP x SP GPUs those of DP 1) and ZeRO 0 (nothing sharded: the
    optimizer's work per GPU the same), the step only gains the gradients'
    all-reduce and its traffic: never shorter."""
    n_gpus = TOPOLOGIES[c["topology"]][0]
    if c["scope"] != "model" or int(c.get("dp", 1)) != 1 or \
            2 * int(c.get("tp", 1)) * int(c["sp"]) > n_gpus or not ck.chance(rng, 0.4):
        return
    base = args_of(c)
    cmd = "build/tasp-sim " + " ".join(shlex.quote(a) for a in base)
    rows2, _, cmd2 = ck.run_csv(args_of(dict(c, dp=2)))
    if not rows2:
        return
    a, b = by_sched(rows), by_sched(rows2)
    # the extension's own error (check_extension) where steps are extended
    tol = 1e-9 if c.get("whole-steps") else 1.5e-2
    later = c.get("placement", "tp,sp,dp").endswith("dp") and int(c.get("zero", 0)) == 0
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if not (x["mfu"] and y["mfu"]) or float(x["mfu"]) <= 0 or float(y["mfu"]) <= 0:
            continue
        f1 = float(x["mfu"]) * float(x["step_ms"]) * int(x["job_gpus"])
        f2 = float(y["mfu"]) * float(y["step_ms"]) * int(y["job_gpus"])
        rel = EPS_UTIL / float(x["mfu"]) + EPS_UTIL / float(y["mfu"]) + 1e-6
        if abs(f2 / (2 * f1) - 1) > rel:
            ck.fail(f"{cmd}\n  $ {cmd2}", f"DP 2: {k[0]}'s model FLOPs (mfu x step x GPUs) "
                                          f"{f2:.5g}, not twice DP 1's {f1:.5g}")
        if later and float(y["step_ms"]) < float(x["step_ms"]) * (1 - tol) - EPS_MS:
            ck.fail(f"{cmd}\n  $ {cmd2}", f"DP 2 at ZeRO 0, its replica after the first: "
                                          f"{k[0]}'s step {y['step_ms']} ms shorter than DP 1's "
                                          f"{x['step_ms']}")


def check_config(ck, rng, c):
    # --memory replays a model scope's whole step (README), so it is read
    # only where the CSV replays the same
    same_step = c["scope"] != "model" or c.get("whole-steps")
    # (and --trace, a third of the time: a trace is the largest output)
    traced = same_step and ck.chance(rng, 0.3)
    extra = [("--links", "links.csv")] + ([("--memory", "memory.txt")] if same_step else []) + \
        ([("--trace", "trace.json")] if traced else [])
    rows, table, cmd = ck.run_csv(args_of(c), extra)
    if rows is None:
        return False
    check_links(ck, cmd, rows, os.path.join(ck.tmp, "links.csv"))
    if same_step:
        check_memory_file(ck, cmd, rows, os.path.join(ck.tmp, "memory.txt"))
    if traced:
        check_trace(ck, cmd, rows, os.path.join(ck.tmp, "trace.json"),
                    times=c["scope"] != "attention" or c.get("model") is None)
    gpu_mem, usable = ck.usable_gib(c["topology"])
    if "gpu-memory" in c:
        gpu_mem = usable = None
    for r in ok_rows(rows):
        check_row(ck, cmd, c, r, gpu_mem, usable)
    for g in groups_of(rows):
        check_group(ck, cmd, c, g)
    with open(os.path.join(ck.tmp, "links.csv"), newline="") as f:
        links = {}
        for l in csv.DictReader(f):
            links.setdefault((l["scheduler"], l["seq_len"], l["gpus"], l["mask"], l["pass"],
                              l["overrides"]), []).append(l)
    check_verdicts(ck, cmd, c, rows, table, links)
    check_links_summary(ck, cmd, rows, table)
    check_table_rows(ck, cmd, rows, table)
    csv_text = ck.last_csv
    check_relations(ck, rng, c, rows)
    # (drawn after the relations, so that a seed's relations are those it
    # drew before these checks were added)
    check_aliases(ck, rng, c, rows, cmd)
    check_scenario(ck, rng, c, csv_text, table, cmd)
    check_csv_stdout(ck, rng, c, csv_text, cmd)
    check_set_alone(ck, rng, c)
    check_neutral_options(ck, rng, c, rows, csv_text, cmd)
    check_unwritable(ck, rng, c)
    # (drawn last: the seeds' earlier draws stay as they were)
    check_replicas(ck, rng, c, rows)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/tasp-sim", help="the tasp-sim binary")
    ap.add_argument("--seed", type=int, default=1, help="the sample's seed")
    ap.add_argument("--size", type=int, default=20, help="configurations of the main command")
    ap.add_argument("--searches", type=int, default=None,
                    help="search configurations (default: a fifth of --size)")
    ap.add_argument("--every-relation", action="store_true",
                    help="check every relation of every configuration (default: each drawn)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every command run")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n_search = a.size // 5 if a.searches is None else a.searches
    with tempfile.TemporaryDirectory(prefix="sanity_sweep.") as tmp:
        ck = Checker(os.path.abspath(a.binary), tmp, a.verbose, a.every_relation)
        ran = 0
        # the relations draw from their own generator per configuration, so
        # a seed's configurations are the same with --every-relation
        for i in range(a.size):
            ran += check_config(ck, random.Random(f"{a.seed}:{i}"), sample_config(rng))
        for i in range(n_search):
            check_search(ck, random.Random(f"{a.seed}:search:{i}"), sample_search(rng))
    print(f"sanity_sweep: seed {a.seed}: {a.size} configurations ({ran} ran, the rest refused "
          f"with exit 2), {n_search} searches, {ck.runs} runs: {len(ck.violations)} violations")
    return 1 if ck.violations else 0


if __name__ == "__main__":
    sys.exit(main())
