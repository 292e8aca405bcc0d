#!/usr/bin/env python3
"""Element-wise rates per kind (compute.elementwise_gbps, elementwise_bwd_gbps):
- tasp-sim prices each element-wise op of a layer at its own kind's and
  pass's rate: with a distinct rate per kind and pass and no fixed cost,
  every op's time in the trace is the bytes scripts/calibrate/
  elementwise_rates.py counts over that rate (so the Python count equals
  src/compute.c's for every kind, both passes, fused and unfused);
- without the field every op runs at copy_GBps;
- bad values exit 2 naming the file and field;
- elementwise_rates.py recovers known rates from synthetic op records
  (backward with the timing loop's gradient accumulation) and ignores TP
  records and those below 8K tokens; fit.py --elementwise-from adds only
  the two fields and a source to a topology's text.
Usage: test_elementwise_rates.py PATH/TO/tasp-sim"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from pycheck import ROOT, check, finish, scripts_on_path  # noqa: E402
scripts_on_path("calibrate")
import elementwise_rates as er  # noqa: E402

sim = sys.argv[1]
FWD = {"rmsnorm": 1000, "rope": 1500, "swiglu": 2500, "residual": 3500}
BWD = {"rmsnorm": 700, "rope": 1300, "swiglu": 2100, "residual": 4100}
# the order of a layer's element-wise ops (src/layer.c): norm, RoPE,
# residual, norm, SwiGLU, residual; backward the reverse
LAYER = ["rmsnorm", "rope", "residual", "rmsnorm", "swiglu", "residual"]
M = {"hidden": 4096, "ffn": 14336, "heads": 32, "kv_heads": 8, "head_dim": 128}


def trace_ops(tmp, sets, unfused, pas, topology="h200x2-tool"):
    """(name, µs) of every element-wise op in a Llama-3-8B layer at 8K tokens."""
    tr = os.path.join(tmp, "t.json")
    cmd = [sim, "--topology", topology, "--model", "llama3-8b", "--scope", "layer",
           "--elementwise", "unfused" if unfused else "fused", "--sched", "ring", "--sp", "1", "--seq", "8192",
           "--pass", pas, "--precision", "bf16", "--csv", os.devnull, "--quiet",
           "--trace", tr, "--set", "compute.copy_fixed_us=0"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True)
    t = json.load(open(tr))
    ev = t["traceEvents"] if isinstance(t, dict) else t
    seen, out = set(), []
    for e in ev:  # one event per op on the GPU's compute track
        if e.get("name", "").startswith("elemwise") and e.get("ph") == "X":
            key = (e.get("pid"), e.get("tid"), e.get("ts"), e["name"])
            if key not in seen:
                seen.add(key)
                out.append((e["name"], e["dur"]))
    return out


def expected(kind, bwd, unfused, rate_gbps):
    rows, width = er.layer_shape(dict(M, tokens_per_gpu=8192), kind)
    return er.ew_bytes(kind, rows, width, M["head_dim"], 2, bwd, unfused) / (rate_gbps * 1e9) * 1e6


def close(a, b):
    return abs(a - b) <= 1e-4 * max(abs(b), 1e-9) + 2e-3  # the trace's µs carry 3 decimals


def same_multiset(got, want):
    got, want = sorted(got), sorted(want)
    return len(got) == len(want) and all(close(g, w) for g, w in zip(got, want))


tmp = tempfile.mkdtemp()
try:
    plain = os.path.join(tmp, "plain.json")  # h200x2-tool without the rates
    topo = json.load(open(os.path.join(ROOT, "topologies", "h200x2-tool.json")))
    for k in ("elementwise_gbps", "elementwise_bwd_gbps"):
        topo["compute"].pop(k, None)
    json.dump(topo, open(plain, "w"))
    sets = ["compute.elementwise_gbps=" + json.dumps(FWD),
            "compute.elementwise_bwd_gbps=" + json.dumps(BWD)]
    for unfused in (True, False):
        for pas in ("fwd", "fwdbwd"):
            ops = trace_ops(tmp, sets, unfused, pas)
            f = [d for n, d in ops if n == "elemwise fwd"]
            b = [d for n, d in ops if n == "elemwise bwd"]
            tag = f"{'unfused' if unfused else 'fused'} {pas}"
            check(f"{tag}: forward ops at their kinds' rates, Python bytes = tasp-sim's",
                  same_multiset(f, [expected(k, False, unfused, FWD[k]) for k in LAYER]))
            check(f"{tag}: backward ops at their kinds' backward rates",
                  same_multiset(b, [expected(k, True, unfused, BWD[k]) for k in LAYER]
                                if pas == "fwdbwd" else []))
    # a backward rate left out: the forward's; a kind left out: copy_GBps
    ops = trace_ops(tmp, ['compute.elementwise_gbps={"rmsnorm": 1000}', "compute.copy_GBps=1700"],
                    True, "fwdbwd", plain)
    rate = {"rmsnorm": 1000, "rope": 1700, "swiglu": 1700, "residual": 1700}
    check("fallbacks: backward at the forward's rate, other kinds at copy_GBps",
          same_multiset([d for _, d in ops],
                        [expected(k, bwd, True, rate[k]) for k in LAYER for bwd in (False, True)]))
    # the field absent: every kind at copy_GBps
    tr = os.path.join(tmp, "p.json")
    subprocess.run([sim, "--topology", plain, "--model", "llama3-8b", "--scope", "layer",
                    "--elementwise", "unfused", "--sched", "ring", "--sp", "1", "--seq", "8192",
                    "--pass", "fwd",
                    "--precision", "bf16", "--csv", os.devnull, "--quiet", "--trace", tr,
                    "--set", "compute.copy_fixed_us=0", "--set", "compute.copy_GBps=1200"],
                   check=True)
    ev = json.load(open(tr))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    f = sorted({(e["ts"], e["dur"]) for e in ev if e.get("name") == "elemwise fwd"})
    check("no field: every kind at copy_GBps",
          same_multiset([d for _, d in f], [expected(k, False, True, 1200) for k in LAYER]))
    # --dump-topology lists the rates
    out = subprocess.run([sim, "--topology", "h200x2-tool", "--dump-topology"] +
                         sum((["--set", s] for s in sets), []),
                         capture_output=True, text=True).stdout
    check("--dump-topology lists each kind's fwd/bwd rate",
          "rmsnorm 1000/700" in out and "residual 3500/4100" in out and "cast 2000/2000" in out)
    # bad input: exit 2, the file and the field named
    for bad, field in (({"rmsnorm": -1}, "compute.elementwise_gbps.rmsnorm"),
                       ({"norm": 3000}, "compute.elementwise_gbps.norm"),
                       ({"rope": "fast"}, "compute.elementwise_gbps.rope"),
                       (3000, "compute.elementwise_gbps")):
        t = json.load(open(plain))
        t["compute"]["elementwise_gbps"] = bad
        path = os.path.join(tmp, "bad.json")
        json.dump(t, open(path, "w"))
        r = subprocess.run([sim, "--topology", path, "--dump-topology"], capture_output=True,
                           text=True)
        check(f"bad elementwise_gbps {bad!r}: exit 2 naming the file and field",
              r.returncode == 2 and path in r.stderr and field in r.stderr)

    # elementwise_rates.py: synthetic records at known rates
    recs = []
    fixed = 5e-6
    true_f = {"rmsnorm": 2700e9, "rope": 1850e9, "swiglu": 1860e9, "residual": 4000e9}
    true_b = {"rmsnorm": 3300e9, "rope": 3100e9, "swiglu": 2500e9, "residual": 4300e9}
    for T in (4096, 8192, 16384, 32768):
        for op, kind in er.RECORD_OPS.items():
            base = dict(M, model="llama3-8b", tp=1, sp=1, tokens_per_gpu=T, seq=T,
                        elementwise="unfused", dtype="bf16", part="layer_op", op=op)
            rows, width = er.layer_shape(base, kind)
            tf = (er.ew_bytes(kind, rows, width, 128, 2, False, True) / true_f[kind]
                  + er.ew_kernels(kind, False, True) * fixed)
            acc = 6 * er.input_elements(base, kind)  # 3 bytes of bf16 an element
            if kind == "residual":
                tb = acc / true_b[kind] + 2 * fixed
            else:
                tb = ((er.ew_bytes(kind, rows, width, 128, 2, True, True) + acc) / true_b[kind]
                      + (er.ew_kernels(kind, True, True) + 1) * fixed)
            if T == 4096:  # below 8K: must be left out
                tf *= 3
            recs.append(dict(base, **{"pass": "fwd", "ms": tf * 1e3}))
            recs.append(dict(base, **{"pass": "fwdbwd", "ms": (tf + tb) * 1e3}))
            recs.append(dict(base, tp=2, **{"pass": "fwd", "ms": tf * 1e4}))  # TP: left out
    res, s = er.rates(recs, fixed)
    check("synthetic records: forward rates recovered",
          res["fwd"] == {k: round(v * 1e-9) for k, v in true_f.items()})
    check("synthetic records: backward rates recovered (accumulation counted)",
          res["bwd"] == {k: round(v * 1e-9) for k, v in true_b.items()})
    check("three records a kind and pass (8K-32K, TP 1)", all(len(v) == 3 for v in s.values()))

    # fit.py --elementwise-from: only the two fields and a source added
    topo_path = os.path.join(tmp, "h100x8.json")
    shutil.copy(os.path.join(ROOT, "topologies", "h100x8.json"), topo_path)
    t0 = json.load(open(topo_path))
    for k in ("elementwise_gbps", "elementwise_bwd_gbps"):
        t0["compute"].pop(k, None)
    t0["sources"] = [x for x in t0["sources"] if not x.startswith("compute.elementwise")]
    recs_path = os.path.join(tmp, "layer-n1.jsonl")
    with open(recs_path, "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in recs)
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "calibrate", "fit.py"),
                    "--elementwise-from", recs_path, "--out", topo_path], check=True,
                   capture_output=True)
    t1 = json.load(open(topo_path))
    check("fit.py --elementwise-from writes the recovered forward rates, no backward ones",
          t1["compute"]["elementwise_gbps"] == res["fwd"]
          and "elementwise_bwd_gbps" not in t1["compute"])
    t1["compute"].pop("elementwise_gbps")
    src = [x for x in t1["sources"] if x.startswith("compute.elementwise_gbps")]
    t1["sources"] = [x for x in t1["sources"] if not x.startswith("compute.elementwise")]
    check("fit.py --elementwise-from leaves the rest of the topology as it was, one source added",
          t1 == t0 and len(src) == 1 and recs_path in src[0])
    # no usable records: exit 2, the topology left as it was
    empty = os.path.join(tmp, "empty.jsonl")
    with open(empty, "w") as fh:
        fh.writelines(json.dumps(dict(r, tp=2)) + "\n" for r in recs)
    before = open(topo_path).read()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "calibrate", "fit.py"),
                        "--elementwise-from", empty, "--out", topo_path], capture_output=True,
                       text=True)
    check("fit.py --elementwise-from without one-GPU op records: exit 2 naming the file, "
          "topology untouched",
          r.returncode == 2 and empty in r.stderr and open(topo_path).read() == before)
finally:
    shutil.rmtree(tmp)
finish()
