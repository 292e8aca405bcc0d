"""A dense decoder layer on real GPUs: the calibration tool's `--parts layer`.

The program is a Llama-style layer as plain PyTorch runs it (the "unfused"
element-wise recipe of tasp-sim's `--elementwise unfused`), with Megatron's
tensor parallelism and sequence parallelism (Korthikanti et al. 2022,
arXiv 2205.05198, section 4.2.2: the sequence is all-gathered before the
column-parallel QKV and FC1, which save only the local shard and gather it
again in backward as Megatron's linear layers do, and reduce-scattered
after the row-parallel out projection and FC2) or DeepSpeed-Ulysses sequence parallelism (Jacobs et
al. 2023, arXiv 2309.14509: all-to-all from sequence to heads around the
attention):

    x (tokens / n, hidden) --RMSNorm--> [all-gather] --QKV--> RoPE
      --flash attention (causal)--> out projection --> [reduce-scatter] --+x
      --RMSNorm--> [all-gather] --FC1 (gate, up)--> SwiGLU --FC2--> [reduce-scatter] --+x

RMSNorm as Hugging Face's LlamaRMSNorm computes it (float32 variance and
scale, cast back); RoPE as its `rotate_half` form on the query and key
heads in bf16; SwiGLU as `silu(gate) * up`.  The attention is PyTorch's
flash kernel through scaled_dot_product_attention with GQA native where the
flash backend takes it (`gqa` in the records says which; else the KV heads
are repeated first, as Hugging Face's sdpa path does).

Records (`layer-nN.jsonl`):
  part "layer": the whole layer, `pass` fwd (a training forward: autograd
    saves what the backward reads) or fwdbwd, `ms` (median over iterations
    of the slowest rank, CUDA events; gradients set to None before each, so
    none is accumulated), and one clean pass's memory in bytes:
    `allocated_before` (weights, the input, cuBLAS's workspace),
    `peak_allocated`, `peak_reserved`, `allocated_after` (after fwd: the
    output and what autograd saved), `weights_bytes`, `input_bytes`.
  part "layer_op": each op alone at the layer's shapes on this GPU, `pass`
    fwd or fwdbwd (its forward then autograd's backward through it alone).
"""
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F

DEV = "cuda"


def bf16(*shape, grad=False):
    return torch.randn(*shape, dtype=torch.bfloat16, device=DEV, requires_grad=grad)


# ---- communication with its autograd (Megatron's mappings) ----

class _Gather(torch.autograd.Function):
    """All-gather along the sequence (dim 0); backward: reduce-scatter."""

    @staticmethod
    def forward(ctx, x):
        n = dist.get_world_size()
        out = torch.empty((x.shape[0] * n,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, g):
        n = dist.get_world_size()
        out = torch.empty((g.shape[0] // n,) + tuple(g.shape[1:]), dtype=g.dtype, device=g.device)
        dist.reduce_scatter_tensor(out, g.contiguous())
        return out


class _Scatter(torch.autograd.Function):
    """Reduce-scatter along the sequence; backward: all-gather."""

    @staticmethod
    def forward(ctx, x):
        n = dist.get_world_size()
        out = torch.empty((x.shape[0] // n,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
        dist.reduce_scatter_tensor(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, g):
        return _Gather.forward(ctx, g)


def _gather(x):
    n = dist.get_world_size()
    out = torch.empty((x.shape[0] * n,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_into_tensor(out, x.contiguous())
    return out


class _GatherLinear(torch.autograd.Function):
    """A column-parallel linear under sequence parallelism as Megatron runs
    it (megatron/core/tensor_parallel/layers.py,
    LinearWithGradAccumulationAndAsyncCommunication with sequence_parallel):
    the input all-gathered along the sequence for the GEMM, only the local
    shard saved, gathered again in backward for the weight gradient, the
    input's gradient reduce-scattered."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return F.linear(_gather(x), w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        total = _gather(x)
        gi = g @ w
        n = dist.get_world_size()
        dx = torch.empty((gi.shape[0] // n,) + tuple(gi.shape[1:]), dtype=gi.dtype,
                         device=gi.device)
        dist.reduce_scatter_tensor(dx, gi.contiguous())
        dw = g.reshape(-1, g.shape[-1]).t() @ total.reshape(-1, total.shape[-1])
        return dx, dw


def _a2a(x, scatter_dim, gather_dim):
    n = dist.get_world_size()
    parts = [t.contiguous() for t in torch.tensor_split(x, n, dim=scatter_dim)]
    outs = [torch.empty_like(parts[0]) for _ in range(n)]
    dist.all_to_all(outs, parts)
    return torch.cat(outs, dim=gather_dim)


class _SeqToHeads(torch.autograd.Function):
    """Ulysses: (tokens / n, heads, d) -> (tokens, heads / n, d); backward the inverse."""

    @staticmethod
    def forward(ctx, x):
        return _a2a(x, 1, 0)

    @staticmethod
    def backward(ctx, g):
        return _a2a(g, 0, 1)


class _HeadsToSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _a2a(x, 0, 1)

    @staticmethod
    def backward(ctx, g):
        return _a2a(g, 1, 0)


# ---- the ops ----

def rms_norm(x, w, eps=1e-5):
    """Hugging Face LlamaRMSNorm: float32 variance, scale, cast back."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rope(x, cos, sin):
    """x (tokens, heads, d); cos, sin (tokens, 1, d)."""
    return x * cos + rotate_half(x) * sin


def swiglu(gu):
    g, u = gu.chunk(2, dim=-1)
    return F.silu(g) * u


_GQA = {}


def attention(q, k, v):
    """Causal flash attention over (tokens, heads, d) tensors."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        if _GQA.get("mode", "native") == "native":
            try:
                o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True,
                                                   enable_gqa=qt.shape[1] != kt.shape[1])
                _GQA["mode"] = "native"
                return o.squeeze(0).transpose(0, 1)
            except RuntimeError:
                _GQA["mode"] = "repeat"
        r = qt.shape[1] // kt.shape[1]
        kt, vt = (t.repeat_interleave(r, dim=1) for t in (kt, vt))
        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    return o.squeeze(0).transpose(0, 1)


class Layer:
    """One decoder layer's weights on this rank and its forward."""

    def __init__(self, m, tp, sp, sp_kind, tokens_per_gpu):
        self.m, self.tp, self.sp, self.sp_kind = m, tp, sp, sp_kind
        h, d, H, KV, f = m["hidden"], m["head_dim"], m["heads"], m["kv_heads"], m["ffn"]
        self.hq, self.hkv = H // tp, max(KV // tp, 1)
        self.c = tokens_per_gpu
        self.T = tokens_per_gpu * (tp if tp > 1 else sp)  # the sequence the layer sees
        w = lambda *s: (torch.randn(*s, dtype=torch.bfloat16, device=DEV) * 0.02).requires_grad_()  # noqa: E731
        self.ln1, self.ln2 = (torch.ones(h, dtype=torch.bfloat16, device=DEV, requires_grad=True)
                              for _ in range(2))
        self.wqkv = w((self.hq + 2 * self.hkv) * d, h)
        self.wo = w(h, self.hq * d)
        self.w13 = w(2 * f // tp, h)
        self.w2 = w(h, f // tp)
        self.params = [self.ln1, self.ln2, self.wqkv, self.wo, self.w13, self.w2]
        pos = torch.arange(self.T, device=DEV, dtype=torch.float32)
        inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device=DEV, dtype=torch.float32) / d))
        ang = torch.outer(pos, inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.cos = ang.cos().to(torch.bfloat16).unsqueeze(1)
        self.sin = ang.sin().to(torch.bfloat16).unsqueeze(1)
        if sp_kind == "ulysses" and sp > 1:  # RoPE on this rank's tokens before the all-to-all
            r = dist.get_rank()
            self.cos_l = self.cos[r * self.c:(r + 1) * self.c]
            self.sin_l = self.sin[r * self.c:(r + 1) * self.c]

    def weights_bytes(self):
        return sum(p.numel() * p.element_size() for p in self.params)

    def forward(self, x):
        d = self.m["head_dim"]
        tp = self.tp > 1
        uly = self.sp_kind == "ulysses" and self.sp > 1
        h = rms_norm(x, self.ln1)
        qkv = _GatherLinear.apply(h, self.wqkv) if tp else F.linear(h, self.wqkv)
        q, k, v = qkv.split([self.hq * d, self.hkv * d, self.hkv * d], dim=-1)
        q = q.view(q.shape[0], self.hq, d)
        k = k.view(k.shape[0], self.hkv, d)
        v = v.view(v.shape[0], self.hkv, d)
        cos, sin = (self.cos_l, self.sin_l) if uly else (self.cos, self.sin)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if uly:
            q, k, v = (_SeqToHeads.apply(t) for t in (q, k, v))
        o = attention(q, k, v)
        if uly:
            o = _HeadsToSeq.apply(o)
        o = F.linear(o.reshape(o.shape[0], -1), self.wo)
        if tp:
            o = _Scatter.apply(o)
        x = x + o
        # the out projection's output is dead here, as in a model's layer
        # (Hugging Face rebinds the name); held, it would add its bytes to
        # the forward's peak (calibration/h100x1-layer-trace)
        del o
        h = rms_norm(x, self.ln2)
        h = _GatherLinear.apply(h, self.w13) if tp else F.linear(h, self.w13)
        h = F.linear(swiglu(h), self.w2)
        if tp:
            h = _Scatter.apply(h)
        return x + h


def _clear():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def layer_memory(L, pas):
    """One clean pass: [allocated before, peak allocated, reserved before,
    peak reserved, allocated after] on this rank (after a forward: its output
    and what autograd saved for the backward)."""
    x = bf16(L.c, L.m["hidden"], grad=True)
    dy = bf16(L.c, L.m["hidden"]) if pas != "fwd" else None
    _clear()
    if dist.is_initialized():
        dist.barrier()
    before, res = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    y = L.forward(x)  # a training forward: autograd saves what the backward reads
    if pas != "fwd":
        y.backward(dy)
    torch.cuda.synchronize()
    vals = [before, torch.cuda.max_memory_allocated(), res, torch.cuda.max_memory_reserved(),
            torch.cuda.memory_allocated()]
    del y, x, dy
    for p in L.params:
        p.grad = None
    return vals


def op_cases(L):
    """(name, make inputs, fn) of each op at this layer's shapes on this rank."""
    m, d = L.m, L.m["head_dim"]
    h, tok = m["hidden"], L.T if L.tp > 1 else L.c
    att_tok = L.T if L.sp_kind == "ulysses" and L.sp > 1 else tok
    hq = L.hq // (L.sp if L.sp_kind == "ulysses" else 1)
    hkv = max(L.hkv // (L.sp if L.sp_kind == "ulysses" else 1), 1)
    f = m["ffn"] // L.tp
    cos, sin = L.cos[:tok], L.sin[:tok]
    return [
        ("rmsnorm", lambda: [bf16(L.c, h, grad=True)], lambda x: rms_norm(x, L.ln1)),
        ("qkv", lambda: [bf16(tok, h, grad=True)], lambda x: F.linear(x, L.wqkv)),
        ("rope", lambda: [bf16(tok, L.hq + L.hkv, d, grad=True)], lambda x: rope(x, cos, sin)),
        ("attention", lambda: [bf16(att_tok, hq, d, grad=True), bf16(att_tok, hkv, d, grad=True),
                               bf16(att_tok, hkv, d, grad=True)], attention),
        ("out_proj", lambda: [bf16(tok, L.hq * d, grad=True)], lambda x: F.linear(x, L.wo)),
        ("residual_add", lambda: [bf16(L.c, h, grad=True), bf16(L.c, h, grad=True)],
         lambda a, b: a + b),
        ("fc1", lambda: [bf16(tok, h, grad=True)], lambda x: F.linear(x, L.w13)),
        ("swiglu", lambda: [bf16(tok, 2 * f, grad=True)], swiglu),
        ("fc2", lambda: [bf16(tok, f, grad=True)], lambda x: F.linear(x, L.w2)),
    ]


def measure_layer(out, n, rank, models, tokens, iters, sp_kind, gpu_timed):
    """Every model at every tokens-per-GPU count: the layer (fwd, fwdbwd:
    time and memory) and each op alone.  n GPUs are the TP group
    (sp_kind "tp", Megatron TP + SP) or the Ulysses group ("ulysses").
    gpu_timed(fn, iters): the calibration tool's timer (median, min, max
    ms of the slowest rank)."""
    import gemm_shapes
    name = f"layer-n{n}.jsonl"
    tp, sp = (n, 1) if sp_kind == "tp" else (1, n)
    for model in models:
        m = gemm_shapes.load_model(model)
        if m["heads"] % n or (sp_kind == "tp" and (m["kv_heads"] % n or m["ffn"] % n)):
            continue
        for c in tokens:
            L = Layer(m, tp, sp, sp_kind, c)
            base = {"n": n, "model": model, "tp": tp, "sp": sp, "sp_kind": sp_kind,
                    "tokens_per_gpu": c, "seq": L.T, "hidden": m["hidden"], "ffn": m["ffn"],
                    "heads": m["heads"], "kv_heads": m["kv_heads"], "head_dim": m["head_dim"],
                    "elementwise": "unfused", "dtype": "bf16", "causal": True}
            try:
                for pas in ("fwd", "fwdbwd"):
                    mem = layer_memory(L, pas)
                    x = bf16(c, m["hidden"], grad=True)
                    dy = bf16(c, m["hidden"])
                    def fn():
                        for p in L.params:  # each step's gradients fresh, none accumulated
                            p.grad = None
                        y = L.forward(x)
                        if pas != "fwd":
                            y.backward(dy)
                    ms, lo, hi = gpu_timed(fn, iters)
                    for p in L.params:
                        p.grad = None
                    x = dy = fn = None
                    _clear()
                    out.write(name, dict(base, part="layer", **{
                        "pass": pas, "ms": ms, "ms_min": lo, "ms_max": hi,
                        "allocated_before": mem[0], "peak_allocated": mem[1],
                        "reserved_before": mem[2], "peak_reserved": mem[3],
                        "allocated_after": mem[4],
                        "weights_bytes": L.weights_bytes(),
                        "input_bytes": c * m["hidden"] * 2 * (2 if pas != "fwd" else 1),
                        "gqa": _GQA.get("mode", "native")}))
                for op, make, f in op_cases(L):
                    args = make()
                    dy = bf16(*f(*args).shape)
                    with torch.no_grad():
                        ms_f = gpu_timed(lambda: f(*args), iters)
                    ms_b = gpu_timed(lambda: f(*args).backward(dy), iters)
                    for pas, (ms, lo, hi) in (("fwd", ms_f), ("fwdbwd", ms_b)):
                        out.write(name, dict(base, part="layer_op", op=op, **{
                            "pass": pas, "ms": ms, "ms_min": lo, "ms_max": hi,
                            "shapes": [list(a.shape) for a in args]}))
                    args = dy = None
                    _clear()
            except torch.cuda.OutOfMemoryError:
                if rank == 0:
                    print(f"calibrate: layer {model} tp {tp} sp {sp} at {c} tokens: out of memory",
                          flush=True)
            # the closures hold the layer: drop them with it, so the next
            # size starts from its own weights alone
            op = make = f = fn = args = x = dy = L = None
            _clear()
            if rank == 0:
                print(f"calibrate: layer {model} tp {tp} sp {sp} ({sp_kind}) at {c} tokens done",
                      flush=True)
