"""The figures of this directory's measurement (README.md says how it was
taken), per session:  python3 analyse.py [s1|s2 ...]
1. each communication call's host time in the pass, with pre-allocated
   buffers, and alone (GPU idle, behind a sleep of the pass's GPU length,
   behind the pass's own kernels), beside calibrate.py's isolated host part
   of the same session (host-n2.jsonl);
2. the pass's host timeline: before the first modelled call, between the
   calls, and the tail (after the last modelled call until the pass
   returns), and the plain pass's GPU end after its host's return;
3. where in a call its first kernel is launched (torch.profiler)."""
import json
import statistics as st
from collections import defaultdict

COMM = ("batch_isend_irecv", "all_gather_into_tensor", "reduce_scatter_tensor")
MODELLED = COMM + ("flash", "flash_bwd", "merge", "fold_dkv")
ALONE = ("alone_idle", "alone_sleep", "alone_kernels")


def load(d, name):
    return [json.loads(line) for rank in (0, 1) for line in open(f"{d}/{name}-r{rank}.jsonl")]


def q(xs):
    """median (25th-75th percentile) of xs"""
    xs = sorted(xs)
    if not xs:
        return "-"
    qs = st.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return f"{st.median(xs):.0f} ({qs[0]:.0f}-{qs[2]:.0f})"


def size_group(c):
    return "1.5K-3K" if c <= 3072 else "6K-12K"


def call_kind(name, sched):
    if name == "batch_isend_irecv":
        return f"batch_isend_irecv, {4 if sched == 'tasp' else 2} ops"
    return name


def comm_calls(rows):
    """(kind, size group, pass, where) -> host us per call; where: the pass's
    first call (GPU idle when it is issued) or a later one (kernels queued)."""
    got = defaultdict(list)
    for r in rows:
        if r["mode"] in ("inpass", "prealloc"):
            j = 0
            for name, s, e in r["calls"]:
                if name in COMM:
                    where = "first" if j == 0 else "later"
                    key = (call_kind(name, r["sched"]), size_group(r["tokens_per_gpu"]))
                    got[key + (r["mode"], where)].append(e - s)
                    got[key + (r["mode"], "all")].append(e - s)
                    j += 1
        elif r["mode"] in ALONE:
            key = (call_kind(r["call"], r["sched"]), size_group(r["tokens_per_gpu"]))
            where = "first" if r["call_index"] == 0 else "later"
            got[key + (r["mode"], where)].extend(r["host_us"])
            got[key + (r["mode"], "all")].extend(r["host_us"])
    return got


def print_comm(rows, host):
    got = comm_calls(rows)
    kinds = sorted({k[:2] for k in got})
    print("1. Communication call, host us: median (IQR) over ranks, passes, calls")
    print("| call | tokens/GPU | in the pass | buffers made beforehand | alone, GPU idle "
          "| alone, behind a sleep of the pass's GPU time | alone, behind the pass's kernels |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for kind, grp in kinds:
        cells = [q(got[(kind, grp, m, "all")]) for m in ("inpass", "prealloc") + ALONE]
        print(f"| {kind} | {grp} | " + " | ".join(cells) + " |")
    print("\nthe pass's first call (issued on an idle GPU) vs its later calls (kernels queued),"
          " all sizes, host us median:")
    for kind in sorted({k[0] for k in kinds}):
        for where in ("first", "later"):
            xs = {m: [x for (k, g, mm, w), v in got.items() if k == kind and mm == m and w == where
                      for x in v] for m in ("inpass",) + ALONE}
            if xs["inpass"]:
                print(f"  {kind:32s} {where:5s}: in pass {st.median(xs['inpass']):5.0f}"
                      + "".join(f", {m[6:]} {st.median(xs[m]):5.0f}" for m in ALONE if xs[m]))
    print("\ncalibrate.py's host part, same session (host-n2.jsonl: 10 calls in a row; busy ="
          " behind a 50 ms sleep, idle = synchronised before each):")
    for r in host:
        if r["op"] in ("p2p_batch", "all_gather_wait", "flash_fwd", "flash_bwd", "merge") and \
                r.get("sq", 1536) == 1536:
            what = f"ops={r['ops']}" if "ops" in r else f"sq={r.get('sq')}"
            print(f"  {r['op']:16s} {what:9s} busy {r['host_us']:6.1f}  idle {r['host_idle_us']:6.1f}")


def print_timeline(rows):
    print("\n2. Pass host timeline (inpass mode), us: median over ranks and passes")
    print("| schedule | mask | pass | tokens/GPU | host pass | before 1st call | between calls "
          "| tail after last call | plain: GPU end after host return |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    plain = defaultdict(list)
    for r in rows:
        if r["mode"] == "plain":
            plain[(r["sched"], r["mask"], r["pass"], r["tokens_per_gpu"])].append(
                (r["gpu_ms"] - r["host_ms"]) * 1e3)
    agg = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["mode"] != "inpass":
            continue
        calls = [c for c in r["calls"] if c[0] in MODELLED]
        if not calls:
            continue
        inside = sum(e - s for _, s, e in r["calls"])
        head = calls[0][1]
        tail = r["pass_us"] - calls[-1][2]
        k = (r["sched"], r["mask"], r["pass"], r["tokens_per_gpu"])
        a = agg[k]
        a["pass"].append(r["pass_us"])
        a["head"].append(head)
        a["tail"].append(tail)
        a["between"].append(r["pass_us"] - inside - head - tail)
    tails = defaultdict(list)
    for k in sorted(agg):
        a = agg[k]
        m = {x: st.median(v) for x, v in a.items()}
        tails[(k[0] == "allgather", k[2])].extend(a["tail"])
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {m['pass']:.0f} | {m['head']:.0f} | "
              f"{m['between']:.0f} | {m['tail']:.0f} | {st.median(plain[k]):.0f} |")
    print("\ntail after the last modelled call, all sizes, us: "
          + "; ".join(f"{'all-gather' if ag else 'ring family'} {p} {q(v)}"
                      for (ag, p), v in sorted(tails.items())))


def print_launch(rows, launch):
    if not all("ts_us" in c for rec in launch for c in rec["calls"]):
        print("\n3. First launch within a call: not in this session's records (its ranges mix"
              " the profiler's CPU ranges with their GPU spans; s2 keeps the CPU ones)")
        return
    frac, first, n = defaultdict(list), defaultdict(list), defaultdict(list)
    tails = defaultdict(list)
    for rec in launch:
        tails[(rec["sched"] == "allgather", rec["pass"])].append(rec["tail_from_last_launch_us"])
        for c in rec["calls"]:
            if c["launches"] and c["call"] != "wait":
                kind = call_kind(c["call"], rec["sched"])
                if kind == "merge":
                    kind = "merge (first block: one cast)" if c["launches"] == 1 else \
                        "merge (update: several kernels)"
                frac[kind].append(c["first_launch_us"] / c["dur_us"])
                first[kind].append(c["first_launch_us"])
                n[kind].append(c["launches"])
    print("\n3. First launch within a call (under torch.profiler, which slows the host:"
          " fractions, not microseconds, carry over)")
    print("| call | first launch at (fraction of the call) | first launch us (profiled) "
          "| launches per call |")
    print("|---|---:|---:|---:|")
    for kind in sorted(frac):
        print(f"| {kind} | {st.median(frac[kind]):.2f} ({st.quantiles(frac[kind], n=4)[0]:.2f}-"
              f"{st.quantiles(frac[kind], n=4)[2]:.2f}) | {st.median(first[kind]):.0f} | "
              f"{st.median(n[kind]):.0f} |")
    print("\nthe pass's last launch to its return (profiled), us: "
          + "; ".join(f"{'all-gather' if ag else 'ring family'} {p} {q(v)}"
                      for (ag, p), v in sorted(tails.items())))


def main():
    import os
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.argv[1:] or ["s1", "s2"]:
        d = os.path.join(here, d)
        print(f"==== {os.path.basename(d)}: {open(d + '/env.json').read()}\n")
        rows = load(d, "inpass")
        host = [json.loads(line) for line in open(d + "/host-n2.jsonl")]
        print_comm(rows, host)
        print_timeline(rows)
        print_launch(rows, load(d, "launch"))
        print()


if __name__ == "__main__":
    main()
