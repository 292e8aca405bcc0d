#!/usr/bin/env python3
"""Element-wise rates per op kind from the ops the calibration tool timed alone.

The layer calibration (`calibrate.py --parts layer`, scripts/calibrate/
layer.py) times each op of a decoder layer alone: `part: layer_op`
records, `pass` fwd (the op under no_grad) and fwdbwd (its forward, then
autograd's backward through it alone).  For RMSNorm, RoPE, SwiGLU and the
residual add this derives the rate in bytes per second at which that op
moves the bytes tasp-sim counts for it (src/compute.c, elemwise_bytes),
after its kernels' fixed cost (compute.copy_fixed_us per kernel):

    rate = bytes / (measured time - kernels x copy_fixed_s)

forward from the fwd records; backward from fwdbwd - fwd, whose bytes are
the op's backward as tasp-sim counts it plus what the timing loop adds:
the inputs were made with requires_grad and the loop calls backward again
and again, so autograd accumulates each input's gradient into its .grad
(an add: read both, write one, 3 bytes of the dtype an element, one kernel
per input).  The residual add's own backward is the identity (no kernel):
its measured backward is the two accumulations alone, an add of the same
access pattern as the one tasp-sim prices (3e an element).  The rate of a
kind is the median over the records from --min-tokens tokens per GPU.
Only one GPU's records (tp 1, sp 1: the op shapes of src/compute.c's
compute_layer_op) are used; the layer totals never are.

    scripts/calibrate/elementwise_rates.py LAYER_JSONL [--copy-fixed-us 5]
        [--min-tokens 8192] [--json]

The byte count here is src/compute.c's, written once more in Python;
tests/test_elementwise_rates.py (ctest elementwise_rates) checks that it equals tasp-sim's for
every kind and pass, fused and unfused.
"""
import argparse
import json
import statistics
import sys

KINDS = ("rmsnorm", "rope", "swiglu", "residual")
# the calibration tool's op names
RECORD_OPS = {"rmsnorm": "rmsnorm", "rope": "rope", "swiglu": "swiglu",
              "residual_add": "residual"}


def ew_cost(kind, backward, unfused):
    """(e, f32, row_f32, cols_e, kernels) per element: src/compute.c ew_cost_of."""
    b, u = backward, unfused
    if kind == "rmsnorm":
        if u:
            return (8, 68, 20, 1, 13) if b else (4, 28, 20, 1, 8)
        return (3, 0, 4, 1, 2) if b else (2, 0, 4, 1, 1)
    if kind == "rope":
        if u:
            return (15, 0, 0, 0, 18) if b else (10, 0, 0, 0, 10)
        return (2, 0, 0, 0, 2)
    if kind == "swiglu":
        if u:
            return (9, 0, 0, 0, 3) if b else (5, 0, 0, 0, 2)
        return (5, 0, 0, 0, 1) if b else (3, 0, 0, 0, 1)
    if kind == "residual":
        return (3, 0, 0, 0, 1)
    raise ValueError(f"unknown element-wise kind {kind!r}")


def ew_bytes(kind, rows, width, head_dim, elem_bytes, backward, unfused):
    """Bytes one op reads and writes: src/compute.c elemwise_bytes."""
    e_, f32, row_f32, _, _ = ew_cost(kind, backward, unfused)
    e = elem_bytes
    b = rows * width * (e_ * e + f32) + rows * row_f32
    if kind == "rmsnorm":
        b += width * e * (2 if backward else 1)
    elif kind == "rope":
        b += 4 * rows * head_dim * e if unfused else 2 * rows * head_dim * 4.0
    return b


def ew_kernels(kind, backward, unfused):
    return ew_cost(kind, backward, unfused)[4]


def layer_shape(rec, kind):
    """(rows, width) of the op as src/compute.c compute_layer_op shapes it (TP 1)."""
    T, h = rec["tokens_per_gpu"], rec["hidden"]
    if kind in ("rmsnorm", "residual"):
        return T, h
    if kind == "rope":
        return T, (rec["heads"] + rec["kv_heads"]) * rec["head_dim"]
    return T, rec["ffn"]  # swiglu


def input_elements(rec, kind):
    """Elements of the op's inputs in layer.py's op_cases (each gets a .grad)."""
    rows, width = layer_shape(rec, kind)
    if kind == "swiglu":
        return rows * 2 * width  # gate and up, one (tokens, 2 x ffn) tensor
    if kind == "residual":
        return 2 * rows * width  # both summands
    return rows * width


def samples(records, copy_fixed_s, min_tokens):
    """{(kind, pass): [rate B/s, ...]} over the one-GPU op records."""
    ops = {}
    for r in records:
        if (r.get("part") != "layer_op" or r["op"] not in RECORD_OPS or r["tp"] != 1
                or r["sp"] != 1 or r["tokens_per_gpu"] < min_tokens):
            continue
        ops[(r["model"], r["tokens_per_gpu"], r["op"], r["pass"])] = r
    out = {}
    for (model, T, op, pas), r in sorted(ops.items()):
        if pas != "fwd":
            continue
        kind = RECORD_OPS[op]
        unfused = r["elementwise"] == "unfused"
        e = 2 if r["dtype"] in ("bf16", "fp16") else 4
        rows, width = layer_shape(r, kind)
        fb = ew_bytes(kind, rows, width, r["head_dim"], e, False, unfused)
        fk = ew_kernels(kind, False, unfused)
        t = r["ms"] * 1e-3 - fk * copy_fixed_s
        out.setdefault((kind, "fwd"), []).append(fb / t)
        both = ops.get((model, T, op, "fwdbwd"))
        if not both:
            continue
        n_in = 2 if kind == "residual" else 1
        acc = 3 * e * input_elements(r, kind)
        if kind == "residual":  # add's backward is the identity: the accumulations alone
            bb, bk = acc, n_in
        else:
            bb = ew_bytes(kind, rows, width, r["head_dim"], e, True, unfused) + acc
            bk = ew_kernels(kind, True, unfused) + n_in
        t = (both["ms"] - r["ms"]) * 1e-3 - bk * copy_fixed_s
        out.setdefault((kind, "bwd"), []).append(bb / t)
    return out


def rates(records, copy_fixed_s, min_tokens=8192):
    """({"fwd": {kind: GB/s}, "bwd": {kind: GB/s}}, the samples): medians in whole GB/s."""
    s = samples(records, copy_fixed_s, min_tokens)
    res = {"fwd": {}, "bwd": {}}
    for (kind, pas), v in sorted(s.items()):
        res[pas][kind] = round(statistics.median(v) * 1e-9)
    return res, s


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("records")
    ap.add_argument("--copy-fixed-us", type=float, default=5.0,
                    help="the topology's compute.copy_fixed_us (tasp-sim's default 5)")
    ap.add_argument("--min-tokens", type=int, default=8192)
    ap.add_argument("--json", action="store_true", help="the rates alone, as JSON")
    a = ap.parse_args()
    try:
        recs = [json.loads(line) for line in open(a.records) if line.strip()]
    except (OSError, ValueError) as ex:
        print(f"elementwise_rates: {a.records}: {ex}", file=sys.stderr)
        sys.exit(2)
    res, s = rates(recs, a.copy_fixed_us * 1e-6, a.min_tokens)
    if not res["fwd"]:
        print(f"elementwise_rates: {a.records}: no one-GPU layer_op records of "
              f"{', '.join(RECORD_OPS)} from {a.min_tokens} tokens", file=sys.stderr)
        sys.exit(2)
    if a.json:
        print(json.dumps(res, sort_keys=True))
        return
    for (kind, pas), v in sorted(s.items()):
        g = sorted(x * 1e-9 for x in v)
        print(f"{kind:9s} {pas}: median {statistics.median(g):6.0f} GB/s over {len(g)} records "
              f"(range {g[0]:.0f}-{g[-1]:.0f})")


if __name__ == "__main__":
    main()
