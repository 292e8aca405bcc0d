#!/usr/bin/env python3
"""USP's Ulysses degree as measured and as tasp-sim predicts it: for every
setting of a measured table (heads, KV heads, head dim, batch, sequence),
every ring implementation and every Ulysses degree U of the SP group, the
measured iterations per second beside 1000 / step_ms of the matching
tasp-sim scheduler, and the best U of each.

usage: scripts/usp_degrees.py --measured FILE.csv --topology TOPO [--sp N]
                              [--set KEY=VALUE]... [--sim build/tasp-sim]

The measured CSV has the columns heads,kv_heads,head_dim,batch,seq,ring,
ulysses,iters_per_s (seq as tasp-sim reads it: 32K; ring one of basic,
zigzag, stripe: long-context-attention's ring_impl_type).  A row's
scheduler: U = 1 is the ring alone (basic: ring, zigzag: zigzag, stripe:
stripe); U = SP is Ulysses alone (ulysses, whatever the ring); in between
USP with that ring (basic: usp, zigzag: usp-zigzag; stripe has no USP
scheduler in tasp-sim: "-").  Every scheduler runs the forward pass with
the causal mask, as the benchmark did (benchmark_longctx.py: causal=True,
--fwd_only).

Prints a markdown table, one row per setting and ring: "measured /
predicted" iterations per second at each U, then the best U of each.
Bad input (a missing column, an unknown ring, a U that does not divide
SP, a failing tasp-sim): a message naming the file and what was expected,
exit status 2.
"""
import argparse
import csv
import os
import subprocess
import sys

COLUMNS = ["heads", "kv_heads", "head_dim", "batch", "seq", "ring", "ulysses", "iters_per_s"]
RINGS = {"basic": ("ring", "usp"), "zigzag": ("zigzag", "usp-zigzag"), "stripe": ("stripe", None)}


def fail(msg):
    print(f"usp_degrees: {msg}", file=sys.stderr)
    sys.exit(2)


def scheduler(ring, u, sp):
    """The tasp-sim scheduler of ring implementation `ring` at Ulysses degree u."""
    alone, usp = RINGS[ring]
    if u == 1:
        return alone
    if u == sp:
        return "ulysses"
    return usp


def read_measured(path, sp):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
            header = rows[0].keys() if rows else []
    except OSError as e:
        fail(f"{path}: cannot read: {e.strerror}")
    missing = [c for c in COLUMNS if c not in header]
    if not rows or missing:
        fail(f"{path}: expected the columns {','.join(COLUMNS)}; "
             f"{'no rows' if not rows else 'missing ' + ','.join(missing)}")
    out = []
    for i, r in enumerate(rows, start=2):
        try:
            setting = (int(r["heads"]), int(r["kv_heads"]), int(r["head_dim"]),
                       int(r["batch"]), r["seq"].strip())
            u, its = int(r["ulysses"]), float(r["iters_per_s"])
        except ValueError:
            fail(f"{path}:{i}: expected whole numbers for heads, kv_heads, head_dim, batch, "
                 f"ulysses and a number for iters_per_s")
        if r["ring"] not in RINGS:
            fail(f"{path}:{i}: field 'ring': expected one of {', '.join(RINGS)}, "
                 f"got {r['ring']!r}")
        if u < 1 or sp % u:
            fail(f"{path}:{i}: field 'ulysses': expected a divisor of SP {sp}, got {u}")
        out.append((setting, r["ring"], u, its))
    return out


def predict(sim, topo, sets, sp, setting, u, scheds):
    """{scheduler: step_ms} of one setting at Ulysses degree u."""
    heads, kv, dim, batch, seq = setting
    cmd = [sim, "--topology", topo, "--sp", str(sp), "--heads", str(heads),
           "--kv-heads", str(kv), "--head-dim", str(dim), "--batch", str(batch),
           "--seq", seq, "--mask", "causal", "--pass", "fwd", "--sched", ",".join(scheds),
           "--csv", "-", "-q", "--strict"]
    if 1 < u < sp:
        cmd += ["--usp-ulysses", str(u)]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)}: exit status {p.returncode}: {p.stderr.strip()}")
    return {r["scheduler"]: float(r["step_ms"]) for r in csv.DictReader(p.stdout.splitlines())}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", required=True)
    ap.add_argument("--topology", required=True)
    ap.add_argument("--sp", type=int, default=8)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--sim", default="build/tasp-sim")
    a = ap.parse_args()
    if a.sp < 1:
        fail(f"--sp: expected a positive number of GPUs, got {a.sp}")
    rows = read_measured(a.measured, a.sp)
    settings = list(dict.fromkeys(s for s, _, _, _ in rows))
    degrees = sorted({u for _, _, u, _ in rows}, reverse=True)
    measured = {(s, ring, u): its for s, ring, u, its in rows}
    predicted = {}
    for s in settings:
        for u in degrees:
            rings = [ring for ring in RINGS if (s, ring, u) in measured]
            scheds = sorted({scheduler(ring, u, a.sp) for ring in rings} - {None})
            if scheds:
                step = predict(a.sim, a.topology, a.set, a.sp, s, u, scheds)
                for ring in rings:
                    sch = scheduler(ring, u, a.sp)
                    if sch:
                        predicted[(s, ring, u)] = 1000.0 / step[sch]
    print("| heads/kv/dim | batch | seq | ring | "
          + " | ".join(f"U={u}" for u in degrees) + " | best U measured | best U predicted |")
    print("|---|---:|---|---|" + "---:|" * len(degrees) + "---:|---:|")
    for s in settings:
        for ring in RINGS:
            if not any((s, ring, u) in measured for u in degrees):
                continue
            cells = []
            for u in degrees:
                m = measured.get((s, ring, u))
                p = predicted.get((s, ring, u))
                cells.append(f"{'-' if m is None else f'{m:.3g}'} / "
                             f"{'-' if p is None else f'{p:.3g}'}")
            best_m = max((u for u in degrees if (s, ring, u) in measured),
                         key=lambda u: measured[(s, ring, u)])
            with_p = [u for u in degrees if (s, ring, u) in predicted]
            best_p = max(with_p, key=lambda u: predicted[(s, ring, u)]) if with_p else "-"
            heads, kv, dim, batch, seq = s
            print(f"| {heads}/{kv}/{dim} | {batch} | {seq} | {ring} | " + " | ".join(cells)
                  + f" | {best_m} | {best_p} |")


if __name__ == "__main__":
    main()
