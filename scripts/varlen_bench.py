"""Flash attention over packed documents on one GPU: one varlen call over
cu_seqlens, one call per document, the padded dense kernel and the dense
kernel over the whole sequence, forward and backward (tasp-sim issue 23).
Writes JSON lines to $OUT/varlen.jsonl."""
import json, math, os, random, sys, time
import torch

OUT = os.environ.get("OUT", ".")
dev = torch.device("cuda")
props = torch.cuda.get_device_properties(0)
H, HKV, D = 32, 8, 128
REPS = int(os.environ.get("REPS", "5"))
fwd = torch.ops.aten._flash_attention_forward
bwd = torch.ops.aten._flash_attention_backward
env = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
       "cuda": torch.version.cuda, "fwd_schema": str(fwd.default._schema),
       "bwd_schema": str(bwd.default._schema), "heads": H, "kv_heads": HKV, "head_dim": D,
       "reps": REPS}
print(json.dumps(env), flush=True)
out = open(os.path.join(OUT, "varlen.jsonl"), "w")
out.write(json.dumps({"env": env}) + "\n")

GQA = True  # KV heads passed as 8; fall back to expanded K/V if the op refuses


def lognormal(total, mean, sigma, seed):
    r = random.Random(seed)
    mu = math.log(mean) - sigma * sigma / 2
    docs, left = [], total
    while left > 0:
        n = max(1, int(round(math.exp(mu + sigma * r.gauss(0, 1)))))
        n = (n + 15) // 16 * 16
        n = min(n, left)
        docs.append(n)
        left -= n
    return docs


def uniform(total, lo, hi, seed):
    r = random.Random(seed)
    docs, left = [], total
    while left > 0:
        n = min(r.randint(lo, hi) // 16 * 16, left)
        docs.append(n)
        left -= n
    return docs


K = 1024
lists = [
    ("donewhen-128K", [2 * K, 59 * K, 4 * K, 63 * K]),
    ("donewhen-64K", [1 * K, 59 * K // 2, 2 * K, 63 * K // 2]),
    ("donewhen-32K", [K // 2, 59 * K // 4, K, 63 * K // 4]),
    ("one-32K", [32 * K]), ("one-64K", [64 * K]), ("one-128K", [128 * K]),
    ("2K-x16", [2 * K] * 16), ("2K-x64", [2 * K] * 64),
    ("512-x64", [512] * 64), ("512-x256", [512] * 256),
    ("8K-x16", [8 * K] * 16),
    ("lognormal8K-s1-128K", lognormal(128 * K, 8 * K, 1.0, 1)),
    ("lognormal8K-s1-64K", lognormal(64 * K, 8 * K, 1.0, 2)),
    ("lognormal2K-s1-32K", lognormal(32 * K, 2 * K, 1.0, 3)),
    ("uniform1K-16K-128K", uniform(128 * K, K, 16 * K, 4)),
]


def kv(k):
    return k if GQA else k.repeat_interleave(H // HKV, dim=1)


def timed(fn):
    fn()  # warm-up
    torch.cuda.synchronize()
    ts = []
    for _ in range(REPS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    ts.sort()
    return ts[len(ts) // 2], ts


def call_fwd(q, k, v, cq, ck, mq, mk, causal):
    return fwd(q, kv(k), kv(v), cq, ck, mq, mk, 0.0, causal, False, scale=None)


def call_bwd(do, q, k, v, o, lse, cq, ck, mq, mk, causal, seed, off):
    return bwd(do, q, kv(k), kv(v), o, lse, cq, ck, mq, mk, 0.0, causal, seed, off, scale=None)


def measure(name, docs, causal=True):
    S = sum(docs)
    g = torch.Generator(device=dev).manual_seed(0)
    q = torch.randn(S, H, D, device=dev, dtype=torch.bfloat16, generator=g)
    k = torch.randn(S, HKV, D, device=dev, dtype=torch.bfloat16, generator=g)
    v = torch.randn(S, HKV, D, device=dev, dtype=torch.bfloat16, generator=g)
    do = torch.randn(S, H, D, device=dev, dtype=torch.bfloat16, generator=g)
    cu = torch.tensor([0] + list(torch.tensor(docs).cumsum(0).tolist()), device=dev,
                      dtype=torch.int32)
    m = max(docs)
    rec = {"list": name, "docs": docs, "n_docs": len(docs), "total": S, "causal": causal}
    o, lse, seed, off, _ = call_fwd(q, k, v, cu, cu, m, m, causal)
    rec["varlen_fwd_s"], rec["varlen_fwd_all"] = timed(lambda: call_fwd(q, k, v, cu, cu, m, m, causal))
    rec["varlen_bwd_s"], rec["varlen_bwd_all"] = timed(
        lambda: call_bwd(do, q, k, v, o, lse, cu, cu, m, m, causal, seed, off))
    if len(docs) > 1:
        starts = [0]
        for d in docs[:-1]:
            starts.append(starts[-1] + d)
        cus = [torch.tensor([0, d], device=dev, dtype=torch.int32) for d in docs]
        pieces = []
        for s0, d, c in zip(starts, docs, cus):
            sl = slice(s0, s0 + d)
            po, pl, ps, pf, _ = call_fwd(q[sl], k[sl], v[sl], c, c, d, d, causal)
            pieces.append((sl, d, c, po, pl, ps, pf))

        def per_fwd():
            for sl, d, c, *_ in pieces:
                call_fwd(q[sl], k[sl], v[sl], c, c, d, d, causal)

        def per_bwd():
            for sl, d, c, po, pl, ps, pf in pieces:
                call_bwd(do[sl], q[sl], k[sl], v[sl], po, pl, c, c, d, d, causal, ps, pf)
        rec["perdoc_fwd_s"], rec["perdoc_fwd_all"] = timed(per_fwd)
        rec["perdoc_bwd_s"], rec["perdoc_bwd_all"] = timed(per_bwd)
        del pieces
        B = len(docs)
        if B * m <= 4 * S:  # padded dense: every document padded to the longest
            qp = torch.randn(B * m, H, D, device=dev, dtype=torch.bfloat16, generator=g)
            kp = torch.randn(B * m, HKV, D, device=dev, dtype=torch.bfloat16, generator=g)
            vp = torch.randn(B * m, HKV, D, device=dev, dtype=torch.bfloat16, generator=g)
            dp = torch.randn(B * m, H, D, device=dev, dtype=torch.bfloat16, generator=g)
            cp = torch.arange(0, B * m + 1, m, device=dev, dtype=torch.int32)
            po, pl, ps, pf, _ = call_fwd(qp, kp, vp, cp, cp, m, m, causal)
            rec["padded_fwd_s"], rec["padded_fwd_all"] = timed(
                lambda: call_fwd(qp, kp, vp, cp, cp, m, m, causal))
            rec["padded_bwd_s"], rec["padded_bwd_all"] = timed(
                lambda: call_bwd(dp, qp, kp, vp, po, pl, cp, cp, m, m, causal, ps, pf))
            del qp, kp, vp, dp, po, pl
    out.write(json.dumps(rec) + "\n")
    out.flush()
    print(name, len(docs), S, {k2: round(v2 * 1e3, 3) for k2, v2 in rec.items()
                              if k2.endswith("_s")}, flush=True)


try:
    measure("probe", [1024, 1024])
except RuntimeError as e:
    print("GQA refused, expanding K/V:", e, flush=True)
    GQA = False
env["gqa_passed_as_kv_heads"] = GQA
out.write(json.dumps({"gqa_passed_as_kv_heads": GQA}) + "\n")
t0 = time.time()
for name, docs in lists:
    measure(name, docs)
    if time.time() - t0 > 200:
        print("time budget reached; stopping", flush=True)
        break
for name, docs in lists[:1] + lists[7:8]:
    measure(name + "-full", docs, causal=False)
print("done in", round(time.time() - t0, 1), "s", flush=True)
