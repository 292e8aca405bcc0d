#!/usr/bin/env python3
"""The flash-attention kernel model with mechanisms (src/kernel_model.c is
the same model in C; tests/test_kernel_model.py holds them together), and
its fit to a kernel sweep.

A FlashAttention-2 kernel (PyTorch's flash backend) runs as a grid of
thread blocks (CTAs) over the GPU's SMs:
  forward   B x H x ceil(sq / bm) CTAs, each one block of bm query rows
            walking the key blocks (bn keys) it sees: all ceil(sk / bn)
            under a full mask, up to the diagonal under a causal one
            (bottom-right aligned when sq != sk), so causal CTAs differ in
            length and are launched shortest first (blockIdx.x = query
            block): a causal kernel over few heads ends in a tail of long
            CTAs on few SMs.  When B x H x ceil(sq / 64) < 0.8 x 2 x SMs,
            the kernel splits the keys instead (split-KV: 64-row CTAs, each
            over a share of the key blocks, then a combine): the split
            count is the smallest whose wave efficiency (CTAs / slots over
            its ceiling) is within 85% of the best one.
  backward  B x H x ceil(sk / bn) CTAs, each one key block walking the
            query blocks that see it (causal: from the diagonal on, so
            launched longest first).
Block shapes per head dim, CTAs per SM and the split rule are the
kernel's own (FlashAttention-2, csrc/flash_attn/src/flash_fwd_launch_
template.h, flash_bwd_launch_template.h and flash_api.cpp's
num_splits_heuristic, as vendored by PyTorch); they are not fitted.

CTAs go to SMs as the hardware does: round-robin at launch, then each
freed slot takes the next CTA in launch order.  An SM holding k of its
`occ` CTAs runs at min(1, k u) of its full rate, shared equally (u: a lone
CTA's share of an SM that fits two; 1 where only one fits).  A CTA's
work is its (query, key) pairs plus a fixed `prologue` of tiles (loading
Q, writing O); the makespan in pairs times tau(D), the seconds one SM takes
per pair at full rate, plus a fixed t0 (host issue and launch, as the
sweep's CUDA-event time of one call includes them) is the kernel's time.

Constants per GPU:
  fitted (5)  t0_fwd, t0_bwd   fixed time of a forward / backward call (s)
              u                a lone CTA's share of an SM that fits two
              theta, t_theta   sustained-load slowdown: busy x (1 + theta
                               (1 - exp(-busy / t_theta)))
  measured    tau_fwd, tau_bwd seconds per (query, key) pair on one SM at
                               full rate, per head dim of the sweep (a
                               least-squares value per head dim; between and
                               beyond them the FLOP rate of the head dim's
                               own tile configuration; fit --sibling adds
                               the head dims only another sweep of the same
                               kernel measured, by sibling_fs)
(the prologue, 2 tiles, is held, not fitted).  A kernel timed in several
runs takes its lowest median.

    scripts/kernel_model.py fit SWEEP.jsonl [...] [--sibling SWEEP.jsonl ...] [--sms 132] [--write TOPOLOGY ...]
    scripts/kernel_model.py crossval SWEEP.jsonl [...] [--sibling SWEEP.jsonl ...]
                                   # leave out whole shape families
    scripts/kernel_model.py check SWEEP.jsonl [...] --topology TOPOLOGY   # its kernel_model
    scripts/kernel_model.py rules SWEEP.jsonl [...]   # each fitted per-pair time from the others
"""
import argparse
import heapq
import json
import math
import os
import statistics
import sys

PROLOGUE = 2.0  # tiles a CTA spends outside its key loop (load Q, write O)

# FlashAttention-2's tiles on sm80/sm90 without dropout (bm query rows x bn
# keys), warps, CTAs an SM holds (registers and shared memory), by head dim
# rounded up to 32 (the kernel's own rounding).
FWD_TILES = {32: (128, 128, 2), 64: (128, 128, 2), 96: (128, 64, 2), 128: (128, 64, 2),
             160: (128, 64, 1), 192: (128, 64, 1), 224: (128, 64, 1), 256: (128, 64, 1)}
BWD_TILES = {32: (128, 128, 1), 64: (128, 128, 1), 96: (64, 128, 1), 128: (64, 128, 1),
             160: (64, 64, 1), 192: (64, 64, 1), 224: (64, 64, 1), 256: (64, 64, 1)}


def rounded_dim(D):
    return min(256, max(32, 32 * math.ceil(D / 32)))


def split_bn(D):
    """Key block of the split-KV kernel."""
    return 256 if D <= 64 else 128 if D <= 128 else 64


def num_splits(ctas64, sms, n_blocks):
    """FlashAttention-2's split count: 1 when the 64-row blocks almost fill
    the SMs' two slots each; else the fewest splits whose wave efficiency is
    within 85% of the best (a split count that changes no split's length
    is not eligible)."""
    slots = 2 * sms
    if ctas64 >= 0.8 * slots:
        return 1
    most = min(128, slots, n_blocks)
    eff = {}
    for s in range(1, most + 1):
        if s > 1 and math.ceil(n_blocks / s) == math.ceil(n_blocks / (s - 1)):
            continue
        waves = ctas64 * s / slots
        eff[s] = waves / math.ceil(waves)
    best = max(eff.values())
    for s in sorted(eff):
        if eff[s] >= 0.85 * best:
            return s
    return 1


def fwd_grid(B, H, D, sq, sk, causal, sms):
    """(CTA works in pairs, in launch order as (count, work) runs; occ)."""
    Dr = rounded_dim(D)
    bm, bn, occ = FWD_TILES[Dr]
    nsplit = num_splits(B * H * math.ceil(sq / 64), sms, math.ceil(sk / split_bn(D)))
    if nsplit > 1:
        bm, bn, occ = 64, split_bn(D), 2
    nk = math.ceil(sk / bn)
    per = math.ceil(nk / nsplit)
    runs = []  # one head's CTAs; the grid repeats it B x H times
    for s in range(nsplit):
        lo, hi = s * per, min(nk, (s + 1) * per)
        for m in range(math.ceil(sq / bm)):
            n_hi = hi
            if causal:
                last = (m + 1) * bm - 1 + sk - sq  # the block's last row's last key
                n_hi = min(hi, max(0, last // bn + 1) if last >= 0 else 0)
            it = max(0, n_hi - lo)
            runs.append((it + PROLOGUE) * bm * bn)
    # launch order: query block fastest, then split, then batch and head
    return runs, B * H, occ


def bwd_grid(B, H, D, sq, sk, causal, sms):
    Dr = rounded_dim(D)
    bm, bn, occ = BWD_TILES[Dr]
    nq = math.ceil(sq / bm)
    runs = []
    for n in range(math.ceil(sk / bn)):
        start = 0
        if causal:
            first_row = n * bn - (sk - sq)  # the first query row that sees key block n
            start = min(nq, max(0, first_row) // bm)
        runs.append((nq - start + PROLOGUE) * bm * bn)
    return runs, B * H, occ


def makespan(one_head, heads, occ, u, sms, max_sim=2048):
    """Pairs-time (SM full rate 1 pair per unit) of the grid `heads` copies
    of one_head in order over `sms` SMs of `occ` slots, processor sharing
    at min(1, k u) per SM.  Beyond max_sim CTAs the first ones are taken as
    a fluid at the full rate of every SM (they keep all SMs busy)."""
    n = len(one_head) * heads
    if occ == 1:
        u = 1.0
    if n > max_sim:
        keep_heads = max(1, math.ceil(max_sim / len(one_head)))
        keep_heads = min(keep_heads, heads)
        prefix = sum(one_head) * (heads - keep_heads) / sms
        heads = keep_heads
    else:
        prefix = 0.0
    works = one_head * heads
    n = len(works)
    # per SM: list of remaining works, last update time
    rem = [[] for _ in range(sms)]
    last = [0.0] * sms
    nxt = 0
    heap = []

    def rate(k):
        return min(1.0, k * u) / k

    for slot in range(occ):
        for s in range(sms):
            if nxt < n:
                rem[s].append(works[nxt])
                nxt += 1
    for s in range(sms):
        if rem[s]:
            heapq.heappush(heap, (min(rem[s]) / rate(len(rem[s])), s))
    t = 0.0
    while heap:
        t, s = heapq.heappop(heap)
        r = rate(len(rem[s]))
        done = (t - last[s]) * r
        last[s] = t
        rs = [w - done for w in rem[s]]
        i = min(range(len(rs)), key=lambda j: rs[j])
        rs.pop(i)
        if nxt < n:
            rs.append(works[nxt])
            nxt += 1
        rem[s] = rs
        if rs:
            heapq.heappush(heap, (t + min(rs) / rate(len(rs)), s))
    return prefix + t


def tile_group(D):
    """FlashAttention-2's kernel configuration by head dim (forward and
    backward alike): 64 and under one tile, 65-128 another, above 128 the
    8-warp kernels."""
    return 0 if D <= 64 else 1 if D <= 128 else 2


# How a head dim the sweep did not measure is priced from those it did
# (PAIR_RULE is the one the topologies and src/kernel_model.c use;
# `crossval` compares them on whole left-out head dims):
#   "rate"    the FLOP rate (D / time) of the measured head dims of D's own
#             tile configuration, linear in D between them, the nearest
#             one's beyond; else of all of them;
#   "affine"  the per-pair time a + b D of D's tile configuration: a the
#             part of a pair's time that does not grow with D (the
#             softmax's exp, max and rescale of a score), b D the GEMMs'
#             (QK^T and PV, forward; five GEMMs backward).  Through the
#             configuration's measured dims where it has two; with one, its
#             b from it and a from the configurations that have two (their
#             lines' intercepts, averaged), else from a line through all
#             measured dims; with none, the same from the nearest dim.
PAIR_RULES = ("rate", "affine")
PAIR_RULE = "rate"


def line(points):
    """Least-squares (intercept, slope) through [(D, time)], 2 or more."""
    n = len(points)
    mx = sum(d for d, _ in points) / n
    my = sum(t for _, t in points) / n
    sxx = sum((d - mx) ** 2 for d, _ in points)
    b = sum((d - mx) * (t - my) for d, t in points) / sxx
    return my - b * mx, b


def clamped(v, D):
    """{head dim: value} at D: linear between the two measured dims around
    it, the nearest one's beyond them."""
    ds = sorted(v)
    if D <= ds[0]:
        return v[ds[0]]
    if D >= ds[-1]:
        return v[ds[-1]]
    hi = next(d for d in ds if d >= D)
    lo = max(d for d in ds if d <= D)
    return v[lo] if hi == lo else v[lo] + (v[hi] - v[lo]) * (D - lo) / (hi - lo)


def pair_fs_rate(t, D):
    same = [d for d in t if tile_group(d) == tile_group(D)]
    return D / clamped({d: d / t[d] for d in (same or t)}, D)


def intercept(t):
    """The D-independent part of a pair's time: the mean intercept of the
    tile configurations measured at two head dims or more, else of a line
    through all measured dims (0 with one)."""
    groups = {}
    for d in sorted(t):
        groups.setdefault(tile_group(d), []).append((d, t[d]))
    lines = [line(p)[0] for _, p in sorted(groups.items()) if len(p) >= 2]
    if lines:
        return sum(lines) / len(lines)
    return line(sorted(t.items()))[0] if len(t) >= 2 else 0.0


def pair_fs_affine(t, D):
    if D in t:
        return t[D]
    same = sorted(d for d in t if tile_group(d) == tile_group(D))
    if len(same) >= 2:
        hi = next((d for d in same if d > D), same[-1])
        if hi == same[0]:
            hi = same[1]
        lo = same[same.index(hi) - 1]
        return t[lo] + (t[hi] - t[lo]) * (D - lo) / (hi - lo)
    # one measured dim of D's configuration, else the nearest (the lower
    # on a tie): its slope over the shared intercept
    d1 = same[0] if same else min(sorted(t), key=lambda d: abs(d - D))
    a = intercept(t)
    return a + (t[d1] - a) * D / d1


def pair_fs(t, D, rule=None):
    """Femtoseconds per pair at head dim D from {measured head dim: fs}."""
    rule = rule or PAIR_RULE
    return pair_fs_affine(t, D) if rule == "affine" else pair_fs_rate(t, D)


def sibling_fs(t, sib, D, rule=None):
    """The per-pair time at D carried from a sibling sweep of the same
    kernel binary (the other GPU of the same die: the H100's and H200's
    per-pair times stand in a near-constant ratio; or another run on this
    GPU): the sibling's time at D (priced by `rule` where it did not
    measure D) times this GPU's ratio to it at the dims both measured,
    linear in D between them, the nearest one's beyond.  A dim this GPU
    measured keeps its own time."""
    if D in t:
        return t[D]
    both = sorted(d for d in t if d in sib)
    if not both:
        return pair_fs(t, D, rule)
    q = clamped({d: t[d] / sib[d] for d in both}, D)
    return (sib[D] if D in sib else pair_fs(sib, D, rule)) * q


def carry_dims(c, sib):
    """Add to c's per-pair times the head dims the sibling's constants
    measured and c's did not (sibling_fs); returns them."""
    carried = sorted(int(d) for d in sib["tau_fwd"] if d not in c["tau_fwd"])
    for name in ("tau_fwd", "tau_bwd"):
        own = {int(k): v for k, v in c[name].items()}
        other = {int(k): v for k, v in sib[name].items()}
        for d in carried:
            c[name][str(d)] = sibling_fs(own, other, d)
    return carried


def tau(c, D, bwd):
    """Seconds per (query, key) pair on one SM at its full rate at head dim
    D, from the times measured per head dim (c["tau_fwd"], c["tau_bwd"]:
    {D: fs}): by c["rule"] (PAIR_RULE when absent) or, where c has a
    "sibling" ({"tau_fwd": .., "tau_bwd": ..} of the sibling GPU), carried
    from it."""
    name = "tau_bwd" if bwd else "tau_fwd"
    t = {int(k): v for k, v in c[name].items()}
    if c.get("sibling"):
        sib = {int(k): v for k, v in c["sibling"][name].items()}
        return sibling_fs(t, sib, D, c.get("rule")) * 1e-15
    return pair_fs(t, D, c.get("rule")) * 1e-15


def predict(c, B, H, D, sq, sk, causal, bwd, sms, cache=None):
    key = (B * H, D, sq, sk, causal, bwd, c["u"], sms)
    if cache is not None and key in cache:
        m = cache[key]
    else:
        grid = bwd_grid if bwd else fwd_grid
        runs, heads, occ = grid(1, B * H, D, sq, sk, causal, sms)
        m = makespan(runs, heads, occ, c["u"], sms)
        if cache is not None:
            cache[key] = m
    busy = tau(c, D, bwd) * m
    return (c["t0_bwd"] if bwd else c["t0_fwd"]) + busy * sustained(c, busy)


def sustained(c, busy):
    """A kernel busy for `busy` seconds at the SMs' full rate runs slower by
    up to `theta` as it lasts beyond `t_theta` (the clock the power limit
    holds under sustained load; short kernels run at the boost clock)."""
    return 1 + c["theta"] * (1 - math.exp(-busy / c["t_theta"]))


# ------------------------------------------------------------------ data

def load(paths):
    """Square and non-square kernels of the sweeps: (B, H, D, sq, sk,
    causal, bwd, seconds).  A kernel timed in several runs (a repeat run
    of the same sweep) takes the lowest median: repeats of short kernels
    differ by up to 3.5x (calibration/h100x1-sweep/README.md), the slower
    run having been disturbed."""
    best = {}
    for p in paths:
        try:
            lines = open(p).read().splitlines()
        except OSError as e:
            raise BadInput(f"{p}: cannot read the sweep: {e.strerror}")
        for n, line in enumerate(lines, 1):
            try:
                r = json.loads(line)
                if r.get("op") not in ("attn", "attn_fwd") or "ms" not in r:
                    continue
                k = (r["B"], r["H"], r["D"], r["sq"], r["sk"], r["causal"])
                times = ((False, float(r["ms"])), (True, float(r.get("bwd_ms") or 0)))
            except (ValueError, TypeError, AttributeError, KeyError) as e:
                raise BadInput(f"{p}:{n}: expected a kernel record (a JSON object with op, B, H, "
                               f"D, sq, sk, causal, ms and bwd_ms): {e}")
            for bwd, t in times:
                if t:
                    best[k + (bwd,)] = min(best.get(k + (bwd,), 1e9), t * 1e-3)
    return [k + (t,) for k, t in sorted(best.items())]


class BadInput(Exception):
    """A sweep that cannot be read (main exits 2 with its message)."""


def solve(A, y):
    """Least squares by the normal equations (a few unknowns)."""
    n = len(A[0])
    M = [[sum(r[i] * r[j] for r in A) for j in range(n)] for i in range(n)]
    v = [sum(r[i] * t for r, t in zip(A, y)) for i in range(n)]
    for i in range(n):
        p = max(range(i, n), key=lambda r: abs(M[r][i]))
        M[i], M[p], v[i], v[p] = M[p], M[i], v[p], v[i]
        for r in range(n):
            if r != i and M[i][i]:
                f = M[r][i] / M[i][i]
                M[r] = [x - f * z for x, z in zip(M[r], M[i])]
                v[r] -= f * v[i]
    return [v[i] / M[i][i] for i in range(n)]


GRID = [(u, th, tt) for u in (0.6, 0.7, 0.8, 0.9) for th in (0.0, 0.04, 0.08, 0.12)
        for tt in (0.005, 0.01, 0.02, 0.04)]


def fit(data, sms, min_tokens=2048, grid=GRID):
    """Constants minimising the squared relative error of kernels from
    min_tokens: u, theta, t_theta by a grid; given them, forward and
    backward each linear least squares in t0 and tau per measured head dim
    (the derating taken at the measured time, which keeps it linear)."""
    use = [k for k in data if k[3] >= min_tokens]
    dims = sorted({k[2] for k in use})
    best = None
    for u, th, tt in grid:
        c = {"u": u, "theta": th, "t_theta": tt}
        for bwd in (False, True):
            rows = [(k, makespan_of(k, u, sms) * sustained(c, k[7])) for k in use if k[6] == bwd]
            A = [[1 / k[7]] + [m * 1e-15 / k[7] if k[2] == d else 0.0 for d in dims]
                 for k, m in rows]
            x = solve(A, [1.0] * len(A))
            c["t0_bwd" if bwd else "t0_fwd"] = x[0]
            c["tau_bwd" if bwd else "tau_fwd"] = {str(d): v for d, v in zip(dims, x[1:])}
        err = [abs(predict(c, *k[:7], sms, _CACHE) / k[7] - 1) for k in use]
        # the median, and the mean for the tails (the long kernels long
        # contexts run are few in a sweep)
        score = statistics.median(err) + statistics.mean(err)
        if best is None or score < best[0]:
            best = (score, c)
    return best[1]


_CACHE = {}


def makespan_of(k, u, sms):
    B, H, D, sq, sk, causal, bwd = k[:7]
    key = (B * H, D, sq, sk, causal, bwd, u, sms)
    if key not in _CACHE:
        grid = bwd_grid if bwd else fwd_grid
        runs, heads, occ = grid(1, B * H, D, sq, sk, causal, sms)
        _CACHE[key] = makespan(runs, heads, occ, u, sms)
    return _CACHE[key]


def errors(c, data, sms, min_tokens=4096):
    return [(k, predict(c, *k[:7], sms, _CACHE) / k[7] - 1) for k in data if k[3] >= min_tokens]


FAMILIES = {
    "D64": lambda k: k[2] == 64, "D96": lambda k: k[2] == 96, "D128": lambda k: k[2] == 128,
    "D192": lambda k: k[2] == 192, "D256": lambda k: k[2] == 256,
    "BH1-8": lambda k: k[0] * k[1] <= 8, "BH16-32": lambda k: 16 <= k[0] * k[1] <= 32,
    "BH64-256": lambda k: k[0] * k[1] >= 64, "B4": lambda k: k[0] == 4,
    "B1": lambda k: k[0] == 1,
}


def head_dim_fold(fam):
    return fam.startswith("D")


def crossval(data, sms, rules=PAIR_RULES, sibling=None, grid=GRID, families=None):
    """Leave out each shape family in turn, refit on the rest and predict
    it: {family: {rule: [(kernel, predicted seconds)]}}.  A fold's fit sees
    none of its family's kernels; the rule that prices a head dim the fit
    did not measure matters only where a whole head dim is left out, so
    those folds are predicted by every rule (and, with `sibling`, the
    sibling GPU's constants {"tau_fwd", "tau_bwd"} fitted on its own sweep,
    as "sibling"), the shape folds once (as "all")."""
    out = {}
    for fam, sel in (families or FAMILIES).items():
        if fam == "B1":
            continue
        train = [k for k in data if not sel(k)]
        test = [k for k in data if sel(k)]
        if not test or not train:
            continue
        c = fit(train, sms, grid=grid)
        ways = {}
        if head_dim_fold(fam):
            for r in rules:
                ways[r] = dict(c, rule=r)
            if sibling:
                ways["sibling"] = dict(c, sibling=sibling)
        else:
            ways["all"] = c
        out[fam] = {w: [(k, predict(cw, *k[:7], sms, _CACHE)) for k in test]
                    for w, cw in ways.items()}
    return out


def fold_errors(preds, min_tokens=4096):
    return [(k, p / k[7] - 1) for k, p in preds if k[3] >= min_tokens]


def median_pct(errs):
    return f"{100 * statistics.median(abs(e) for _, e in errs):.1f}%" if errs else "-"


def summary(errs):
    a = [abs(e) for _, e in errs]
    if not a:
        return "no kernels"
    within = sum(x <= 0.10 for x in a)
    return (f"{len(a)} kernels: median |error| {100 * statistics.median(a):.1f}%, "
            f"max {100 * max(a):.1f}%, {within} within 10%")


def topology_object(c, sms, source):
    """The constants as a topology's compute.kernel_model (src/kernel_model.h)."""
    dims = sorted(int(d) for d in c["tau_fwd"])
    return {"source": source, "sms": sms, "lone_cta_share": c["u"],
            "sustained_slowdown": c["theta"], "sustained_after_us": round(c["t_theta"] * 1e6, 1),
            "fwd_fixed_us": round(c["t0_fwd"] * 1e6, 2),
            "bwd_fixed_us": round(c["t0_bwd"] * 1e6, 2),
            "pair_time": [{"head_dim": d, "fwd_fs": round(c["tau_fwd"][str(d)], 1),
                           "bwd_fs": round(c["tau_bwd"][str(d)], 1)} for d in dims]}


def from_topology(path):
    """(SMs, constants) of a topology's compute.kernel_model."""
    k = json.load(open(path))["compute"]["kernel_model"]
    return k["sms"], {"u": k["lone_cta_share"], "theta": k["sustained_slowdown"],
                      "t_theta": k["sustained_after_us"] * 1e-6,
                      "t0_fwd": k["fwd_fixed_us"] * 1e-6, "t0_bwd": k["bwd_fixed_us"] * 1e-6,
                      "tau_fwd": {str(p["head_dim"]): p["fwd_fs"] for p in k["pair_time"]},
                      "tau_bwd": {str(p["head_dim"]): p["bwd_fs"] for p in k["pair_time"]}}


def write_topology(path, obj):
    """Put obj as compute.kernel_model into a topology file, leaving the
    rest of its text as it is (replacing a kernel_model already there)."""
    text = open(path).read()
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith('"kernel_model": {')),
                 None)
    at = next(i for i, ln in enumerate(lines) if ln.strip() == '"compute": {')
    pad = " " * (len(lines[at]) - len(lines[at].lstrip()) + 2)
    at += 1
    if start is not None:  # in its place among compute's keys
        end = next(i for i in range(start, len(lines)) if lines[i].endswith("]},"))
        del lines[start:end + 1]
        at = start
    body = [f'{pad}"kernel_model": {{"source": {json.dumps(obj["source"])},']
    body.append(pad + "  " + ", ".join(f'"{k}": {json.dumps(obj[k])}' for k in
                                       ("sms", "lone_cta_share", "sustained_slowdown",
                                        "sustained_after_us", "fwd_fixed_us", "bwd_fixed_us"))
                + ",")
    body.append(pad + '  "pair_time": [')
    body += [f"{pad}    {json.dumps(p)}," for p in obj["pair_time"]]
    body[-1] = body[-1].rstrip(",")
    body.append(pad + "  ]},")
    lines[at:at] = body
    text = "\n".join(lines)
    json.loads(text)  # still one JSON document
    with open(path + ".tmp", "w") as f:  # whole or not at all
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("fit", "crossval", "check", "rules"))
    ap.add_argument("sweeps", nargs="+")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--topology", help="check: the topology whose compute.kernel_model to use")
    ap.add_argument("--min-tokens", type=int, default=4096)
    ap.add_argument("--sibling", nargs="+", metavar="SWEEP",
                    help="another sweep of the same kernel binary (the sibling GPU's, or "
                         "another run on this GPU): crossval also prices a left-out head dim "
                         "from its measurement there; fit adds the head dims it measured and "
                         "the sweeps did not")
    ap.add_argument("--write", nargs="*", default=[],
                    help="fit: put the constants into these topology files")
    a = ap.parse_args()
    try:
        data = load(a.sweeps)
        sibling_data = load(a.sibling) if a.sibling else None
    except BadInput as e:
        print(f"kernel_model.py: {e}", file=sys.stderr)
        sys.exit(2)
    for paths, got in ((a.sweeps, data), (a.sibling, sibling_data)):
        if got is not None and a.what != "check" and not all(
                any(k[3] >= 2048 and k[6] == bwd for k in got) for bwd in (False, True)):
            print(f"kernel_model.py: {' '.join(paths)}: expected timed forward and backward "
                  "kernels (records with ms and bwd_ms) from 2048 tokens to fit, found none",
                  file=sys.stderr)
            sys.exit(2)
    if a.what == "fit":
        c = fit(data, a.sms)
        command = " ".join(["scripts/kernel_model.py fit"] + a.sweeps +
                           (["--sibling"] + a.sibling if a.sibling else []))
        src = (command + ": 5 constants fitted (fixed fwd/bwd, lone CTA share, sustained "
               "slowdown and onset), per-pair time per measured head dim")
        if a.sibling:
            carried = carry_dims(c, fit(sibling_data, a.sms))
            src += ("; head dims " + ", ".join(map(str, carried)) + " carried from the sibling "
                    "sweep (its per-pair time there times this one's ratio to it at the head "
                    "dims both measured)")
        obj = topology_object(c, a.sms, src)
        print(json.dumps(obj))
        for t in a.write:
            write_topology(t, obj)
        errs = errors(c, data, a.sms, a.min_tokens)
        print("all:", summary(errs), file=sys.stderr)
        for bwd in (False, True):
            for causal in (False, True):
                print(f"  {'bwd' if bwd else 'fwd'} {'causal' if causal else 'full'}:",
                      summary([x for x in errs if x[0][6] == bwd and x[0][5] == causal]),
                      file=sys.stderr)
        for fam, sel in FAMILIES.items():
            print(f"  {fam}:", summary([x for x in errs if sel(x[0])]), file=sys.stderr)
    elif a.what == "crossval":
        sib = None
        if a.sibling:
            cs = fit(sibling_data, a.sms)
            sib = {"tau_fwd": cs["tau_fwd"], "tau_bwd": cs["tau_bwd"]}
            print("sibling (fitted on " + " ".join(a.sibling) + "): its measured per-pair time "
                  "at a left-out head dim, which is not this GPU's data")
        ways = list(PAIR_RULES) + (["sibling"] if sib else [])
        folds = crossval(data, a.sms, sibling=sib)
        total = {w: [] for w in ways}
        for fam, by in folds.items():
            for w, preds in by.items():
                errs = fold_errors(preds, a.min_tokens)
                print(f"leave out {fam}" + ("" if w == "all" else f" [{w}]") + f": {summary(errs)}"
                      + ("" if w == "all" else " (" + ", ".join(
                          f"{p} {median_pct([x for x in errs if x[0][6] == b])}"
                          for p, b in (("fwd", False), ("bwd", True))) + ")"))
                for t in (ways if w == "all" else [w]):
                    total[t] += errs
        for w in ways:
            print(f"all folds [{w}]:", summary(total[w]))
    elif a.what == "rules":
        # the per-pair times alone, without a refit: each measured head dim's
        # time priced by each rule from the other dims, against its own
        c = fit(data, a.sms)
        for name in ("tau_fwd", "tau_bwd"):
            t = {int(k): v for k, v in c[name].items()}
            for D in sorted(t):
                rest = {d: v for d, v in t.items() if d != D}
                print(f"{name[4:]} head dim {D}: " + ", ".join(
                    f"{r} {100 * (pair_fs(rest, D, r) / t[D] - 1):+.1f}%" for r in PAIR_RULES))
    else:
        if not a.topology:
            ap.error("check: --topology TOPOLOGY expected")
        sms, c = from_topology(a.topology)
        print(summary(errors(c, data, sms, a.min_tokens)))


if __name__ == "__main__":
    main()
