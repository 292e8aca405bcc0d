#!/usr/bin/env python3
"""scripts/calibrate/gemm_shapes.py: the GEMM sweep is the layer shapes
tasp-sim prices (compute_layer_op: Megatron TP with sequence parallelism),
and what a run records becomes a compute.gemm_table tasp-sim reads.
Usage: test_gemm_shapes.py PATH/TO/tasp-sim"""
import json
import os
import subprocess
import sys
import tempfile

from checks import ROOT, check, finish  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "scripts", "calibrate"))
import gemm_shapes  # noqa: E402

sim = sys.argv[1]

s = gemm_shapes.sweep(["llama3-8b", "llama3-70b"], [1, 2, 4, 8],
                      [gemm_shapes.tokens(t) for t in "4K,8K,16K,32K,64K".split(",")])
keys = {(x["m"], x["n"], x["k"], x["product"]) for x in s}
check(len(keys) == len(s), "each product once")
# 2 models x 4 TP x 4 layers x 5 token counts x 3 products: no two alike
check(len(s) == 480, "the default sweep: 480 products")
# Llama-3-8B at TP 1: QKV 6144 x 4096 (32 + 2 x 8 heads of 128), out
# 4096 x 4096, FC1 2 x 14336 x 4096, FC2 4096 x 14336
for n, k in ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)):
    check(all((8192, n, k, p) in keys for p in gemm_shapes.PRODUCTS),
          f"llama3-8b TP 1: {n} x {k} at 8K tokens, all three products")
# Llama-3-70B at TP 8: QKV (64 + 16) x 128 / 8 = 1280 x 8192, out 8192 x
# 1024, FC1 2 x 28672 / 8 = 7168 x 8192, FC2 8192 x 3584
for n, k in ((1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)):
    check((65536, n, k, "wgrad") in keys, f"llama3-70b TP 8: {n} x {k} at 64K tokens")
check(gemm_shapes.sweep(["llama3-8b"], [16], [4096]) == [],
      "a TP that does not divide the KV heads is left out")
check(gemm_shapes.operands({"m": 3, "n": 5, "k": 7, "product": "wgrad"}) == ((5, 3), (3, 7)),
      "operands: wgrad is (N x M) @ (M x K)")
check([gemm_shapes.tokens(t) for t in ("4K", "1M", "4096")]
      == [4096, 1 << 20, 4096], "tokens: 4K, 1M, 4096")

# a run's records -> gemm_table -> a topology tasp-sim loads
recs = [{"part": "gemm", "n": 1, "model": "llama3-8b", "tp": 1, "layer": "qkv",
         "product": p, "M": m, "N": 6144, "K": 4096, "dtype": "bf16", "ms": 0.1 * m / 4096}
        for p in gemm_shapes.PRODUCTS for m in (4096, 8192)]
recs.append({"part": "mem", "op": "zero_acc", "bytes": 8, "gpu_ms": 1})
tab = gemm_shapes.table(recs)
check(len(tab) == 6, "table: one entry per gemm record, other records left out")
check(all(set(e) == {"m", "n", "k", "product", "ms"} for e in tab),
      "table: entries carry m, n, k, product, ms")
with tempfile.TemporaryDirectory() as d:
    jl = os.path.join(d, "gemm-n1.jsonl")
    with open(jl, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)
    printed = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "calibrate",
                                                           "gemm_shapes.py"), "--table", jl],
                             capture_output=True, text=True)
    check(json.loads(printed.stdout) == tab, "--table prints the table as JSON")
    with open(os.path.join(ROOT, "topologies", "h100x8.json")) as f:
        topo = json.load(f)
    topo["compute"]["gemm_table"] = tab
    tf = os.path.join(d, "t.json")
    with open(tf, "w") as f:
        json.dump(topo, f)
    r = subprocess.run([sim, "--topology", tf, "--dump-topology"], capture_output=True, text=True)
    check(r.returncode == 0, "tasp-sim reads the table (exit 0)")
    topo["compute"]["gemm_table"][0]["product"] = "bwd"
    with open(tf, "w") as f:
        json.dump(topo, f)
    r = subprocess.run([sim, "--topology", tf, "--dump-topology"], capture_output=True, text=True)
    check(r.returncode == 2 and "compute.gemm_table[0].product" in r.stderr,
          "tasp-sim refuses a product it does not know, naming the field (exit 2)")

# FP8: the records of fp8_gemm.py (bf16 and fp8 of each product) -> the
# fp8 entries alone -> fit.py --fp8-gemm -> a topology --precision fp8 runs on
mixed = [dict(r, dtype=dt, ms=r["ms"] / (1.8 if dt == "fp8" else 1)) for r in recs[:6]
         for dt in ("bf16", "fp8")]
f8 = gemm_shapes.table(mixed, "fp8")
check(len(f8) == 6 and all(e["dtype"] == "fp8" for e in f8),
      "table fp8: the fp8 records only, each with its dtype")
check(sorted(e["ms"] for e in f8) == sorted(round(r["ms"] / 1.8, 5) for r in recs[:6]),
      "table fp8: their own times, not bf16's")
check(len(gemm_shapes.table(mixed)) == 6 and all("dtype" not in e for e in gemm_shapes.table(mixed)),
      "table bf16: the bf16 records of a mixed run, without dtype")
with tempfile.TemporaryDirectory() as d:
    jl = os.path.join(d, "fp8gemm-n1.jsonl")
    with open(jl, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in mixed)
    tf = os.path.join(d, "a100.json")
    with open(os.path.join(ROOT, "topologies", "a100x8x8.json")) as f:
        before = f.read()
    with open(tf, "w") as f:
        f.write(before)
    fit = [sys.executable, os.path.join(ROOT, "scripts", "calibrate", "fit.py")]
    r = subprocess.run(fit + ["--fp8-gemm", jl, "--out", tf], capture_output=True, text=True)
    with open(tf) as f:
        after = f.read()
    t = json.loads(after)
    check(r.returncode == 0 and t["compute"]["fp8_gemm_table"] == f8,
          "fit.py --fp8-gemm writes the fp8 entries as compute.fp8_gemm_table")
    check("fp8_gemm_table: " + jl in t["compute"]["source"],
          "fit.py --fp8-gemm names the records in compute.source")
    check(after.split('"fp8_gemm_table"')[0].rstrip(",\n ") ==
          before.rstrip().rstrip("}").rstrip().rstrip("}").rstrip().replace(
              json.dumps(json.loads(before)["compute"]["source"]),
              json.dumps(t["compute"]["source"])),
          "fit.py --fp8-gemm keeps the rest of the file's text")
    run = [sim, "--topology", tf, "--model", "llama3-8b", "--scope", "layer", "--tp", "8",
           "--sp", "8", "--seq", "64K", "--sched", "ring", "--csv", "-", "--quiet"]
    r = subprocess.run(run + ["--precision", "fp8"], capture_output=True, text=True)
    check(r.returncode == 0,
          "--precision fp8 runs on the topology fit.py gave the table (exit 0)")
    r = subprocess.run(fit + ["--fp8-gemm", os.path.join(d, "none.jsonl"), "--out", tf],
                       capture_output=True, text=True)
    check(r.returncode == 2, "fit.py --fp8-gemm: records it cannot read, exit 2")
# every bundled H100 topology carries the committed FP8 sweep, entry for entry
with open(os.path.join(ROOT, "calibration", "h100x1-fp8gemm", "fp8gemm-n1.jsonl")) as f:
    measured = gemm_shapes.table([json.loads(x) for x in f if x.strip()], "fp8")
for name in ("h100x8", "h100x8x2", "h100x8x4", "h100x8x8", "h100x8x32"):
    with open(os.path.join(ROOT, "topologies", name + ".json")) as f:
        check(json.load(f)["compute"].get("fp8_gemm_table") == measured,
              f"{name}: compute.fp8_gemm_table is calibration/h100x1-fp8gemm's")
finish("gemm_shapes")
