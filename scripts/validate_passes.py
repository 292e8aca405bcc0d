#!/usr/bin/env python3
"""Compare measured whole passes (scripts/calibrate: passes-nN.jsonl) with
tasp-sim's predictions on a topology.

usage: scripts/validate_passes.py TOPOLOGY.json PASSES.jsonl [--sim build/tasp-sim]
           [--markdown] [--max-median PCT] [--min-tokens T]

Prints one row per measured pass (measured ms, predicted ms, error) and the
median |error|, over all passes and over those with communication.  With
--max-median the exit status is 1 when the median over all passes exceeds
PCT (a test uses this).  --by-sched adds each schedule's and mask's median
and largest |error| (from --min-tokens where given).

Records of USP ("sched": "usp", the tool's Ulysses all-to-all around
ring_flash_attn's ring, zigzag ring under a causal mask) are predicted as
tasp-sim's usp (full) or usp-zigzag (causal, TransformerEngine's a2a+p2p)
with --usp-ulysses of the record; double-ring records with their
--double-ring-inner.  Passes timed without their communication are
predicted with --alone (each GPU runs its own work, waiting on no other).  With --min-tokens the figures also cover the
passes with at least T tokens per GPU alone ("from T tokens/GPU: median
... max ..."), the band the fidelity targets name.
"""
import argparse
import csv
import io
import json
import statistics
import subprocess
import sys


def measured_cycles(r):
    """The Hamiltonian cycles the measured TASP pass used: the record's
    tasp_cycles, or calibrate.py's choice (a ring and its reverse)."""
    if r.get("tasp_cycles"):
        return r["tasp_cycles"]
    ring = list(range(r["n"]))
    cycles = [ring, ring[:1] + ring[:0:-1]] if r["n"] > 2 else [ring]
    return ",".join("-".join(map(str, c)) for c in cycles)


def sim_sched(r):
    """tasp-sim's scheduler for a measured pass, and the options that set it
    up as the program ran: USP's Ulysses degree, the double ring's inner
    ring."""
    if r["sched"] == "usp":
        return ("usp-zigzag" if r["mask"] == "causal" else "usp",
                ("--usp-ulysses", str(r["usp_ulysses"])))
    if r["sched"] == "double-ring":
        return "double-ring", ("--double-ring-inner", str(r["double_ring_inner"]))
    return r["sched"], ()


def row_key(r):
    """A measured pass's key in predict's answer: (sched, mask, seq, comm,
    pass), and the scheduler's options where it has any."""
    return (r["sched"], r["mask"], r["seq"], r["comm"], r["pass"]) + sim_sched(r)[1]


def label(r):
    """The schedule as the rows name it (USP with its degree u, the double
    ring with its inner size w)."""
    if r["sched"] == "usp":
        return f"usp u{r['usp_ulysses']}"
    if r["sched"] == "double-ring":
        return f"double-ring w{r['double_ring_inner']}"
    return r["sched"]


def predict(sim, topo, rows):
    """{row_key(r): predicted ms} for the measured rows."""
    out = {}
    groups = {}
    for r in rows:
        name, opts = sim_sched(r)
        groups.setdefault((r["mask"], r["comm"], r["n"], r["B"], r["H"], r["D"], r["pass"],
                           measured_cycles(r), r.get("attention", "softmax"), opts),
                          set()).add((name, r["sched"], r["seq"]))
    for (mask, comm, n, B, H, D, pas, cycles, attention, opts), pts in sorted(groups.items()):
        scheds = sorted({s for s, _, _ in pts})
        recorded = {s: rec for s, rec, _ in pts}  # tasp-sim's name -> the record's
        seqs = sorted({q for _, _, q in pts})
        args = [sim, "--topology", topo, "--sched", ",".join(scheds),
                "--seq", ",".join(map(str, seqs)), "--sp", str(n), "--batch", str(B),
                "--heads", str(H), "--kv-heads", str(H), "--head-dim", str(D),
                "--mask", mask, "--pass", pas, "--attention", attention, "--csv", "-", "--quiet",
                "--jobs", "1"]
        if "tasp" in scheds:  # the only scheduler that takes given cycles
            args += ["--tasp-cycles", cycles]
        if not comm:  # the program with its communication calls taken out
            args.append("--alone")
        args += list(opts)
        res = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        for c in csv.DictReader(io.StringIO(res)):
            out[(recorded[c["scheduler"]], mask, int(c["seq_len"]), comm, pas) + opts] = \
                float(c["step_ms"])
    return out


def band_line(tokens, errs):
    """The summary of the passes at one chunk length (--tokens): errs is
    [(pass, |error|)] of those rows; None when there are none."""
    if not errs:
        return None
    all_e = [e for _, e in errs]
    by = {}
    for p, e in errs:
        by.setdefault(p, []).append(e)
    return (f"at {tokens} tokens/GPU: median {100 * statistics.median(all_e):.2f}% max "
            f"{100 * max(all_e):.1f}% over {len(all_e)} passes; "
            + ", ".join(f"{k} {100 * statistics.median(v):.2f}% over {len(v)}"
                        for k, v in sorted(by.items())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("topology")
    ap.add_argument("passes")
    ap.add_argument("--sim", default="build/tasp-sim")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--max-median", type=float)
    ap.add_argument("--min-tokens", type=int)
    ap.add_argument("--by-sched", action="store_true")
    ap.add_argument("--tokens", type=int, action="append", default=[],
                    help="also summarise the passes of exactly this many tokens per GPU "
                         "(the short chunks: 1536, 2048), by pass; repeatable")
    a = ap.parse_args()
    rows = [json.loads(line) for line in open(a.passes) if line.strip()]
    pred = predict(a.sim, a.topology, rows)
    errs, errs_comm, by_pass, errs_big, by_sched = [], [], {}, [], {}
    at_tokens = {t: [] for t in a.tokens}
    if a.markdown:
        print("| pass | schedule | mask | tokens/GPU | comm | measured ms | predicted ms | error |")
        print("|---|---|---|---:|---|---:|---:|---:|")
    else:
        print(f"{'pass':4} {'sched':7} {'mask':6} {'tok/GPU':>7} {'comm':5} {'measured':>10} "
              f"{'predicted':>10} {'error':>7}")
    for r in rows:
        p = pred[row_key(r)]
        e = p / r["ms"] - 1
        errs.append(abs(e))
        if a.min_tokens is not None and r["tokens_per_gpu"] >= a.min_tokens:
            errs_big.append(abs(e))
        if a.min_tokens is None or r["tokens_per_gpu"] >= a.min_tokens:
            by_sched.setdefault((label(r), r["mask"]), []).append(abs(e))
        by_pass.setdefault(r["pass"], []).append(abs(e))
        if r["tokens_per_gpu"] in at_tokens:
            at_tokens[r["tokens_per_gpu"]].append((r["pass"], abs(e)))
        if r["comm"]:
            errs_comm.append(abs(e))
        comm = "yes" if r["comm"] else "no"
        if a.markdown:
            print(f"| {r['pass']} | {label(r)} | {r['mask']} | {r['tokens_per_gpu']} | {comm} | "
                  f"{r['ms']:.3f} | {p:.3f} | {100 * e:+.1f}% |")
        else:
            print(f"{r['pass']:4} {label(r):7} {r['mask']:6} {r['tokens_per_gpu']:7d} {comm:5} "
                  f"{r['ms']:10.3f} {p:10.3f} {100 * e:+6.1f}%")
    med, med_comm = 100 * statistics.median(errs), 100 * statistics.median(errs_comm)
    print(f"\nmedian |error|: {med:.2f}% over {len(errs)} passes, {med_comm:.2f}% over the "
          f"{len(errs_comm)} with communication; max {100 * max(errs):.1f}%")
    if errs_big:
        print(f"from {a.min_tokens} tokens/GPU: median {100 * statistics.median(errs_big):.2f}% "
              f"max {100 * max(errs_big):.1f}% over {len(errs_big)} passes")
    if len(by_pass) > 1:
        print("by pass: " + ", ".join(f"{k} {100 * statistics.median(v):.2f}% over {len(v)}"
                                      for k, v in sorted(by_pass.items())))
    for t, v in at_tokens.items():
        print(band_line(t, v) or f"at {t} tokens/GPU: no passes")
    if a.by_sched:
        band = f" from {a.min_tokens} tokens/GPU" if a.min_tokens is not None else ""
        for (sched, mask), v in by_sched.items():
            print(f"schedule {sched} {mask}{band}: median {100 * statistics.median(v):.2f}% "
                  f"max {100 * max(v):.1f}% over {len(v)} passes")
    if a.max_median is not None and med > a.max_median:
        print(f"validate: median |error| {med:.2f}% exceeds {a.max_median}%", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
