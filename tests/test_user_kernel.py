#!/usr/bin/env python3
"""A user's own kernel (calibrate.py --parts kernels --kernel MODULE:FUNCTION)
becomes a topology's kernel table through scripts/calibrate/fit.py
--user-kernel: from a small synthetic record set, tasp-sim reads back each
kernel's time as given (forward and backward, both masks, less the
measured host cost of a call) with confidence `measured`; the flash-only
kernel_model and aspect_table are gone; bad records exit 2 naming the file
and leave --out as it was; the sweep's axes narrow as asked.
Usage: test_user_kernel.py PATH/TO/tasp-sim"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from pycheck import ROOT, check, finish, kernel_price, scripts_on_path  # noqa: E402
FIT = os.path.join(ROOT, "scripts", "calibrate", "fit.py")
scripts_on_path("calibrate")
import kernel_sweep  # noqa: E402
import user_kernel  # noqa: E402

sim = sys.argv[1]
HOST_US = 30.0


def records(d, H, lengths):
    """kernels-n1.jsonl and kernel-host-n1.jsonl of a made-up kernel:
    times rising with FLOPs, backward 2.6x forward, one unmeasured row."""
    rows = []
    for L in lengths:
        for causal in (False, True):
            ms = 0.05 + (L / 2048) ** 2 * 0.1 * (0.55 if causal else 1.0)
            rows.append(dict(part="kernels", n=1, op="attn", kernel="mine:attn", B=1, H=H, Hk=H,
                             D=128, sq=L, sk=L, causal=causal, ms=ms, bwd_ms=2.6 * ms))
    rows.append(dict(part="kernels", n=1, op="attn", kernel="mine:attn", B=1, H=H, Hk=H, D=128,
                     sq=262144, sk=262144, causal=False, unmeasured="forward over 20 TFLOP"))
    with open(os.path.join(d, "kernels-n1.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(os.path.join(d, "kernel-host-n1.jsonl"), "w") as f:
        for L in (lengths[0], lengths[-1]):
            f.write(json.dumps(dict(part="overhead", n=1, op="attn_fwd", kernel="mine:attn",
                                    B=1, H=H, Hk=H, D=128, sq=L, sk=L, host_us=HOST_US,
                                    gpu_us=1.0)) + "\n")
    return [r for r in rows if "ms" in r]


def priced(topo, H, L, causal, pas):
    """(ms, confidence) of the one kernel of a one-GPU pass."""
    s, conf = kernel_price(sim, ["--topology", topo, "--sched", "ring", "--pass", pas,
                                 "--seq", str(L), "--heads", str(H), "--kv-heads", str(H),
                                 "--head-dim", "128", "--mask", "causal" if causal else "full"])
    return s * 1e3, conf


def fit(d, out):
    return subprocess.run([sys.executable, FIT, d, "--user-kernel", "--out", out],
                          capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    d = os.path.join(tmp, "mine")
    os.makedirs(d)
    H, lengths = 8, (2048, 4096, 8192, 16384)
    given = records(d, H, lengths)
    topo = os.path.join(tmp, "h100x8-mine.json")
    shutil.copy(os.path.join(ROOT, "topologies", "h100x8.json"), topo)
    r = fit(d, topo)
    check(f"fit.py --user-kernel converts the records (rc {r.returncode}: {r.stderr.strip()})",
          r.returncode == 0)
    t = json.load(open(topo))
    c = t["compute"]
    check("the table holds every measured kernel and no unmeasured one",
          len(c["table"]) == len(given))
    check("PyTorch flash's kernel_model and aspect_table are removed",
          "kernel_model" not in c and "aspect_table" not in c)
    check("the topology is named after --out", t["name"] == "h100x8-mine")
    worst, confs = 0.0, set()
    for g in given:
        for pas, col in (("fwd", "ms"), ("bwd", "bwd_ms")):
            ms, conf = priced(topo, H, g["sq"], g["causal"], pas)
            want = g[col] - HOST_US * 1e-3
            worst = max(worst, abs(ms - want) / want)
            confs.add(conf)
    check(f"tasp-sim reads back every kernel's forward and backward time less the host cost "
          f"(worst {100 * worst:.4f}%)", worst < 1e-4)
    check(f"... each priced as measured ({sorted(confs)})", confs == {"measured"})

    # bad records: exit 2 naming the file, --out untouched
    before = open(topo).read()
    with open(os.path.join(d, "kernels-n1.jsonl"), "a") as f:
        f.write(json.dumps(dict(part="kernels", op="attn", B=1, H=H, D=128, sq=1024, sk=1024,
                                causal=False, ms=0.1)) + "\n")
    r = fit(d, topo)
    check(f"a measured kernel without bwd_ms exits 2 naming the file ({r.stderr.strip()})",
          r.returncode == 2 and "kernels-n1.jsonl" in r.stderr and "bwd_ms" in r.stderr)
    check("... and leaves --out as it was", open(topo).read() == before)
    r = fit(os.path.join(tmp, "none"), topo)
    check("a directory without the records exits 2", r.returncode == 2 and
          "kernel-host-n" in r.stderr)

    # --kernel MODULE:FUNCTION: a .py path or a module; bad ones exit 2
    mod = os.path.join(tmp, "mine.py")
    with open(mod, "w") as f:
        f.write("def attn(q, k, v, causal):\n    return q\n")
    check("a .py path's function loads", user_kernel.load(f"{mod}:attn")(1, 2, 3, False) == 1)
    for bad in ("noColon", f"{mod}:missing", os.path.join(tmp, "absent.py") + ":attn"):
        try:
            user_kernel.load(bad)
            check(f"--kernel {bad} refused", False)
        except SystemExit as e:
            check(f"--kernel {os.path.basename(bad)} refused with exit 2", e.code == 2)

# the sweep's axes narrow to what --kernel-head-dims / -shapes / -lengths ask
todo, skip = kernel_sweep.plan(16, 40, head_dims=(128,), shapes=((1, 32, 32),),
                               lengths=(2048, 4096))
got = sorted((k["D"], k["H"], k["sq"], k["sk"], k["causal"]) for k in todo + skip)
want = sorted([(128, 32, L, L, c) for L in (2048, 4096) for c in (False, True)] +
              [(128, 32, 2048, 4096, False), (128, 32, 2048, 1024, False)])
check(f"the narrowed plan is the asked axes with their aspects ({len(got)} kernels)",
      got == want)
finish()
