#!/usr/bin/env python3
"""The GEMM sweep of the calibration tool: which products to time, and the
compute.gemm_table a run's records become.  Pure Python (no torch), so the
sweep can be listed and checked on any machine:

    scripts/calibrate/gemm_shapes.py                    # the default sweep, one line a product
    scripts/calibrate/gemm_shapes.py --models llama3-8b --tp 1,8 --tokens 8K
    scripts/calibrate/gemm_shapes.py --table calibration/h100x1-gemm/gemm-n1.jsonl
                                                        # the measured records as gemm_table entries
    scripts/calibrate/gemm_shapes.py --dtype fp8 --table calibration/h100x1-fp8gemm/fp8gemm-n1.jsonl
                                                        # FP8 records as fp8_gemm_table entries

The products are a dense decoder layer's linear layers as one GPU of a
tensor-parallel group runs them, Megatron-style with sequence parallelism
(src/compute.h, compute_layer_op): the sequence is gathered to T tokens
before the column-parallel QKV and FC1 and the row-parallel out projection
and FC2 run on T tokens too; heads and FFN are split by TP:

    qkv       M = T, N = (heads + 2 kv_heads) x head_dim / tp, K = hidden
    out_proj  M = T, N = hidden, K = heads x head_dim / tp
    fc1       M = T, N = 2 ffn / tp (gate and up in one GEMM), K = hidden
    fc2       M = T, N = hidden, K = ffn / tp

each timed as its three products, as autograd runs a linear layer
(torch.nn.functional.linear, weight W of shape N x K):

    fwd    Y  = X W^T      (M x K) by (K x N)
    dgrad  dX = dY W       (M x N) by (N x K)
    wgrad  dW = dY^T X     (N x M) by (M x K)

2MNK FLOPs each.  The model figures come from the bundled presets
(models/NAME.json), so the sweep follows them.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRODUCTS = ("fwd", "dgrad", "wgrad")
LAYERS = ("qkv", "out_proj", "fc1", "fc2")
# the sizes users run: Llama-3-8B and -70B, 4K..64K tokens a TP group, TP 1-8
DEFAULT_MODELS = "llama3-8b,llama3-70b"
DEFAULT_TOKENS = "4K,8K,16K,32K,64K"
DEFAULT_TP = "1,2,4,8"


def tokens(text):
    """A token count: 4096, 4K, 1M."""
    t = text.strip().upper()
    mult = {"K": 1024, "M": 1024 * 1024}
    v = int(t[:-1]) * mult[t[-1]] if t and t[-1] in mult else int(t)
    if v < 1:
        raise ValueError(f"expected a positive token count, got {text!r}")
    return v


def load_model(name):
    """A bundled preset's figures (models/NAME.json), or a model file's."""
    path = name if os.path.exists(name) else os.path.join(ROOT, "models", name + ".json")
    with open(path) as f:
        m = json.load(f)
    m.setdefault("kv_heads", m["heads"])
    return m


def layer_shapes(m, tp):
    """(layer, N, K) of one layer at TP degree tp; None where tp does not
    divide the heads, KV heads or FFN (Megatron refuses such a split)."""
    if m["heads"] % tp or m["kv_heads"] % tp or m["ffn"] % tp:
        return None
    h, d = m["hidden"], m["head_dim"]
    q, kv, f = m["heads"] * d // tp, m["kv_heads"] * d // tp, m["ffn"] // tp
    return [("qkv", q + 2 * kv, h), ("out_proj", h, q), ("fc1", 2 * f, h), ("fc2", h, f)]


def sweep(models, tps, token_counts):
    """Every product to time, each (M, N, K, product) once, in a fixed
    order; each with the first (model, tp, layer) that asked for it."""
    seen, out = set(), []
    for name in models:
        m = load_model(name)
        for tp in tps:
            shapes = layer_shapes(m, tp)
            if shapes is None:
                continue
            for layer, n, k in shapes:
                for t in token_counts:
                    for product in PRODUCTS:
                        key = (t, n, k, product)
                        if key in seen:
                            continue
                        seen.add(key)
                        out.append({"model": name, "tp": tp, "layer": layer, "m": t, "n": n,
                                    "k": k, "product": product})
    return out


def operands(s):
    """Shapes (rows, cols) of the two operands of product s, as the tool
    multiplies them (a @ b)."""
    M, N, K = s["m"], s["n"], s["k"]
    return {"fwd": ((M, K), (K, N)), "dgrad": ((M, N), (N, K)),
            "wgrad": ((N, M), (M, K))}[s["product"]]


def flops(s):
    return 2.0 * s["m"] * s["n"] * s["k"]


def table(records, dtype="bf16"):
    """compute.gemm_table entries from a run's gemm records (calibrate.py
    measure_gemm: "part": "gemm", the product's "M", "N", "K"; their "n" is
    the GPU count, as in every record) of one dtype (a record without
    "dtype" is bf16): one per measured product, sorted; repeats are kept
    (tasp-sim merges them at their geometric mean).  bf16 entries carry no
    dtype (gemm_table's default), others carry theirs (fp8: the entries of
    compute.fp8_gemm_table, fp8_gemm.py's records)."""
    rows = []
    for r in records:
        if r.get("part") != "gemm" or r.get("dtype", "bf16") != dtype:
            continue
        e = {"m": r["M"], "n": r["N"], "k": r["K"], "product": r["product"]}
        if dtype != "bf16":
            e["dtype"] = dtype
        e["ms"] = round(r["ms"], 5)
        rows.append(e)
    rows.sort(key=lambda e: (e["n"], e["k"], PRODUCTS.index(e["product"]), e["m"]))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help="bundled presets or model files, comma separated")
    ap.add_argument("--tp", default=DEFAULT_TP, help="TP degrees, comma separated")
    ap.add_argument("--tokens", default=DEFAULT_TOKENS,
                    help="tokens a TP group holds (M), comma separated")
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "fp8"),
                    help="--table: the records of this dtype (default bf16)")
    ap.add_argument("--table", metavar="JSONL",
                    help="print the gemm records of a calibration run as compute.gemm_table "
                         "entries instead")
    a = ap.parse_args(argv)
    if a.table:
        with open(a.table) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        print("[\n" + ",\n".join("  " + json.dumps(e) for e in table(recs, a.dtype)) + "\n]")
        return 0
    shapes = sweep(a.models.split(","), [int(v) for v in a.tp.split(",")],
                   [tokens(v) for v in a.tokens.split(",")])
    total = 0.0
    for s in shapes:
        (ar, ac), (br, bc) = operands(s)
        total += flops(s)
        print(f"{s['model']:<12} tp {s['tp']} {s['layer']:<8} {s['product']:<5} "
              f"M {s['m']:>6} N {s['n']:>6} K {s['k']:>6}  ({ar} x {ac}) @ ({br} x {bc})  "
              f"{flops(s) / 1e12:.3f} TFLOP")
    print(f"{len(shapes)} products, {total / 1e15:.2f} PFLOP in all (at 600 TFLOP/s "
          f"{total / 600e12:.0f} s a timed iteration of each)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
