#!/usr/bin/env python3
"""tasp-sim calibration: measure one GPU node with PyTorch + NCCL.

Run one process per GPU:

    torchrun --nproc-per-node 4 scripts/calibrate/calibrate.py --out calibration/mynode

and turn what it writes into a topology file with

    scripts/calibrate/fit.py calibration/mynode --out topologies/mynode.json

Every measurement is one JSON line (rank 0 writes them):

  links-nN.jsonl     transfer patterns (pair, ring, all peers, collectives)
                     through two APIs, 64 KiB to 256 MiB per message
  compute-nN.jsonl   flash-attention forward and backward kernels over query
                     and key lengths and both masks; the log-sum-exp merge.
                     With --compute-heads (and --compute-head-dims,
                     --compute-batches, --compute-chunks) a sweep of square
                     kernels over query heads / KV heads ("Hk"), head dim,
                     batch and chunk length instead, whose backward is
                     timed directly (the kernel the passes call: "bwd_ms",
                     also written as bwd_ms_est; fwd_bwd_ms is null)
  kernels-nN.jsonl   (--parts kernels) the flash-kernel sweep of
                     kernel_sweep.py: head dims 64-256, batch x heads
                     1-256, 1K-256K tokens, full and causal, sk = sq / 2
                     and 2 sq, forward and backward, bounded by memory and
                     --compute-budget; shapes not timed are written as
                     unmeasured with the reason.  --kernel MODULE:FUNCTION
                     times a user's attention function instead
                     (scripts/calibrate/user_kernel.py has its signature)
                     and writes kernel-host-nN.jsonl, its host cost per
                     call; --kernel-head-dims, --kernel-shapes and
                     --kernel-lengths narrow the sweep; fit.py
                     --user-kernel makes the records a kernel table
  overhead-nN.jsonl  host and GPU cost of the small operations, measured
                     apart: the host cost of issuing a call (wall clock, GPU
                     kept busy so the call never blocks) and its GPU cost
                     (CUDA events around calls queued behind a busy GPU)
  host-nN.jsonl      (--parts host) host cost of every operation a pass
                     program issues, one at a time, with the GPU busy and
                     idle: flash forward and backward calls, the first
                     block's copies, merge, torch.cat of 2 and 4 key
                     ranges, the backward's gradient adds, batch_isend_irecv
                     of 1..8 ops (issued; issued and waited), LASP's single
                     isend / irecv, an async all_gather, each linear kernel
                     function; a linear Ring step's hop and kernel alone and
                     together; and the host time to issue each whole pass
                     program (softmax and linear, both masks, with and
                     without communication), which the per-op costs must
                     add up to
  passes-nN.jsonl    whole forward passes of sequence-parallel attention
                     schedules, with and without their communication, for
                     validating tasp-sim's predictions; with --backward,
                     their backward passes too.  With --pass-wall-clock
                     (passes and layer parts) each timed record also holds
                     "wall": the host's Unix time at the start and end of
                     its timing (scripts/calibrate/wall_spans.py).  --schedules picks them:
                       ring       Ring (full, causal), KV one hop a step
                       zigzag     Zigzag-Ring (causal)
                       tasp       TASP-style concurrent rings (full, causal)
                       ulysses    DeepSpeed-Ulysses: all_to_all of Q, K, V
                                  (heads scattered, sequence gathered), one
                                  kernel over the whole sequence, all_to_all
                                  of the output back
                       allgather  Llama 3 context parallelism: one
                                  all_gather of the packed KV, local queries
                                  against the gathered keys; backward ends
                                  in one float32 reduce_scatter of dK/dV
                       tokenring  TokenRing: KV stays, Q travels one hop a
                                  step, block outputs go straight back to
                                  their owner (full, causal)
                       usp        USP (yunchang): Ulysses all-to-all inside
                                  groups of u ranks, ring_flash_attn's ring
                                  (full) or zigzag ring (causal) across the
                                  n/u groups; one schedule per u
                                  (--usp-ulysses), recorded as "usp" with
                                  usp_ulysses and usp_ring
                       stripe     Striped Attention (ring_flash_attn's
                                  stripe_flash_attn_func; causal only, as
                                  there): token t on rank t mod n, KV one
                                  hop a step, every block a causal c x c
                                  kernel (with or without its diagonal)
                       double-ring LoongTrain's double ring (InternEvo's
                                  zigzag_double_ring_flash_attn; causal
                                  only, as there): windows of w consecutive
                                  ranks (--double-ring-inner, default the
                                  largest w leaving two windows or more),
                                  KV around the inner ring, the round's
                                  first KV across to the next window while
                                  the round runs; recorded as
                                  "double-ring" with double_ring_inner
                     Every schedule is first checked against PyTorch
                     autograd (output, dQ, dK, dV) over the whole sequence.
                     With --attention linear, linear-attention layers
                     instead (records carry "attention": "linear"):
                       lasp       LASP: the float32 running state travels
                                  rank to rank, point to point
                       lasp2      LASP-2: one all_gather of the states,
                                  local prefix (suffix) sums
                       ring       KV one hop a step, K^T V then Q times it
                     With --backward, forward+backward ("pass": "fwdbwd")
                     is timed too, and before timing each schedule the
                     memory of one clean pass of each kind is recorded
                     (memory-nN.jsonl, as the memory part)
  memory-nN.jsonl    (--parts memory) per schedule, mask, size and pass
                     (fwd, bwd, fwdbwd), with communication: the bytes the
                     caching allocator has allocated just before the pass
                     (its inputs: Q, K, V; backward also O, log-sum-exp,
                     dO and what the forward saved), torch.cuda.
                     max_memory_allocated and max_memory_reserved over the
                     pass (peak statistics reset just before, the cache
                     emptied), and what stays allocated after it; per rank
                     and the largest over the ranks.  --attention both runs
                     the softmax and the linear schedules.  Each program
                     allocates what the public implementation it follows
                     allocates, made in the pass (its class says which):
                       ring, zigzag, tasp  ring_flash_attn (zhuzilin/ring-
                                  flash-attention): new receive buffers each
                                  step, float32 running output, float32 dQ
                                  and travelling float32 dK/dV
                       ulysses    DeepSpeed-Ulysses / yunchang all_to_all_4D
                       usp        yunchang LongContextAttention around
                                  ring_flash_attn's ring and zigzag ring
                       stripe     ring_flash_attn's stripe_flash_attn_func
                       double-ring InternEvo's zigzag double ring (dK/dV
                                  bf16 after the first window, as there)
                       allgather  Llama 3 CP as the timing program sends it
                                  (gathered KV kept for the backward, float32
                                  reduce_scatter; see AllGather)
                       tokenring  ACA-Lab-SJTU/token-ring's double-buffered
                                  Q and returned block outputs
                       lasp, lasp2, linear ring  OpenNLPLab/LASP and
                                  Linear-MoE's LASP-2 (float32 D x D states)
                     With --emulate-ranks N (one process, one GPU) one
                     rank's program of N ranks runs with every
                     communication call replaced by a local copy into the
                     buffers the call would fill: the same allocations at
                     the same points (memory-nN-emulated.jsonl)
  headroom-nN.jsonl  (always) device memory outside the caching allocator:
                     torch.cuda.mem_get_info's used bytes minus
                     memory_reserved at each stage (the CUDA context,
                     init_process_group, the first call of each
                     collective / p2p pattern, TokenRing's side groups, and
                     after every part with the cache emptied: context,
                     loaded kernels, NCCL's buffers), per rank; env-nN.json
                     has get_device_properties().total_memory
  linear-nN.jsonl    (--parts linear) linear-attention kernels alone:
                     intra-chunk (causal, none), state K^T V, apply Q M,
                     forward and backward, as compute.linear_table entries
  lingpu-nN.jsonl    (--parts lingpu) the same kernels' GPU time with the
                     launch gaps hidden (calls queued behind a busy GPU),
                     and the linear backward's memory-bound steps (zero_,
                     gradient adds) by bytes moved
  overlap-nN.jsonl   (--parts overlap, 2 GPUs) a hop (bf16 KV, float32
                     dK/dV) alone, a linear kernel alone, and both at once:
                     how much each slows the other
  layer-nN.jsonl     (--parts layer) a Llama decoder layer as plain PyTorch
                     runs it, over the GPUs as Megatron TP + SP or Ulysses SP
                     (--layer-sp), at --layer-models x --layer-tokens: the
                     layer's forward and forward+backward time and memory,
                     and each op alone (scripts/calibrate/layer.py)
  gemm-nN.jsonl      (--parts gemm) a decoder layer's linear layers (QKV,
                     out projection, FC1, FC2) at the token counts and TP
                     splits of --gemm-models / --gemm-tokens / --gemm-tp,
                     each as its forward and both backward products in bf16
                     (scripts/calibrate/gemm_shapes.py lists them without a
                     GPU, and turns the records into compute.gemm_table)

Timing: every timed iteration starts after a barrier; `ms` is the median
over iterations of the slowest rank's time (CUDA events), ms_min / ms_max
the spread.  The ring-like pass programs follow ring_flash_attn's
structure: what a step sends is sent with batch_isend_irecv while this
step's kernels run; the block outputs are merged in float32 with unfused
PyTorch ops.  Each class below says what its program sends in which call
and what waits for what.
"""
import argparse
import datetime
import gc
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layouts  # noqa: E402  (token layouts and blocks of stripe, double ring)

KIB = 1024
MIB = 1024 * 1024
# where the pass programs and kernels run; a test harness may point it elsewhere
DEV = "cuda"
# --emulate-ranks: one process runs one rank's program of a larger group;
# every send / receive / collective becomes a local copy into the same
# buffers the real call would fill (memory follows allocation, not time)
LOCAL_COMM = False


def local_copies(sends, recvs):
    """Stand-in for one grouped send/receive call: each receive buffer gets
    the matching send's bytes (as many as both hold).  The buffers are the
    program's own, so what is allocated, and when, is as with NCCL."""
    for (s, _), (r, _) in zip(sends, recvs):
        k = min(s.numel(), r.numel())
        r.reshape(-1)[:k].copy_(s.reshape(-1)[:k])
    return []


class Out:
    """JSON-lines writer on rank 0; flushed per line so a killed run keeps
    what it measured."""

    def __init__(self, directory, rank):
        self.dir, self.rank, self.files = directory, rank, {}

    def write(self, name, rec):
        if self.rank != 0:
            return
        f = self.files.get(name)
        if f is None:
            f = self.files[name] = open(os.path.join(self.dir, name), "w")
        f.write(json.dumps(rec) + "\n")
        f.flush()


def timed(fn, iters, warmup):
    """Median/min/max over iterations of the slowest rank's time of fn(), ms."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        t = torch.tensor([a.elapsed_time(b)], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        times.append(t.item())
    return statistics.median(times), min(times), max(times)


# ---------------------------------------------------------------- gemm

def measure_gemm(out, n, models, tps, token_counts, iters):
    """A layer's GEMMs as autograd runs torch.nn.functional.linear (weight
    W of shape N x K, row-major): fwd X @ W^T, dgrad dY @ W, wgrad dY^T @ X,
    bf16 in and out, each timed alone as every kernel here is (timed: CUDA
    events, the median of the slowest rank's).  The shapes:
    gemm_shapes.sweep."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gemm_shapes
    name = f"gemm-n{n}.jsonl"
    token_counts = [gemm_shapes.tokens(str(v)) for v in token_counts]
    for s in gemm_shapes.sweep(models, tps, token_counts):
        M, N, K, prod = s["m"], s["n"], s["k"], s["product"]
        if prod == "fwd":
            x, w = bf16(M, K), bf16(N, K)
            fn = lambda: F.linear(x, w)  # noqa: E731
        elif prod == "dgrad":
            dy, w = bf16(M, N), bf16(N, K)
            fn = lambda: dy @ w  # noqa: E731
        else:
            dy, x = bf16(M, N), bf16(M, K)
            fn = lambda: dy.t() @ x  # noqa: E731
        with torch.no_grad():
            ms, lo, hi = timed(fn, iters, 2)
        out.write(name, {"part": "gemm", "n": n, "model": s["model"], "tp": s["tp"],
                         "layer": s["layer"], "product": prod, "M": M, "N": N, "K": K,
                         "dtype": "bf16", "ms": ms, "ms_min": lo, "ms_max": hi,
                         "TFLOPs": gemm_shapes.flops(s) / ms / 1e9})
        fn = x = w = dy = None
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- links

def pattern_pairs(pattern, n):
    """(src, dst) pairs of a point-to-point pattern."""
    if pattern == "pair_uni":
        return [(0, 1)]
    if pattern == "pair_bi":
        return [(0, 1), (1, 0)]
    if pattern == "two_pairs_uni":
        return [(0, 1), (2, 3)] if n >= 4 else None
    if pattern == "ring_uni":
        return [(i, (i + 1) % n) for i in range(n)]
    if pattern == "ring_bi":
        if n < 3:
            return None
        return [(i, (i + d) % n) for i in range(n) for d in (1, n - 1)]
    if pattern == "all_peers":
        return [(i, j) for i in range(n) for j in range(n) if i != j]
    raise ValueError(pattern)


def p2p_op(api, pairs, rank, n, nbytes, buf_send, buf_recv):
    """A callable issuing one pattern through `api`."""
    elems = nbytes // 2
    sends = [d for s, d in pairs if s == rank]
    recvs = [s for s, d in pairs if d == rank]
    if api == "batch_p2p":
        def run():
            ops = [dist.P2POp(dist.isend, buf_send[i * elems:(i + 1) * elems], d)
                   for i, d in enumerate(sends)]
            ops += [dist.P2POp(dist.irecv, buf_recv[i * elems:(i + 1) * elems], s)
                    for i, s in enumerate(recvs)]
            if ops:
                for r in dist.batch_isend_irecv(ops):
                    r.wait()
        return run
    if api == "alltoall_list":
        # all_to_all over tensor lists: one collective call, empty tensors
        # for pairs that do not talk
        none = buf_send[:0]
        ins, outs = [none] * n, [none] * n
        for i, d in enumerate(sends):
            ins[d] = buf_send[i * elems:(i + 1) * elems]
        for i, src in enumerate(recvs):
            outs[src] = buf_recv[i * elems:(i + 1) * elems]

        def run():
            dist.all_to_all(outs, ins)
        return run
    # one all-to-all with uneven splits: zero for pairs that do not talk
    ssplit = [elems if p in sends else 0 for p in range(n)]
    rsplit = [elems if p in recvs else 0 for p in range(n)]
    sb = buf_send[:sum(ssplit)]
    rb = buf_recv[:sum(rsplit)]

    def run():
        dist.all_to_all_single(rb, sb, rsplit, ssplit)
    return run


def measure_links(out, n, rank, sizes, iters):
    name = f"links-n{n}.jsonl"
    big = max(sizes)
    send = torch.randn(big // 2 * (n - 1), dtype=torch.bfloat16, device="cuda")
    recv = torch.empty_like(send)
    for pattern in ["pair_uni", "pair_bi", "two_pairs_uni", "ring_uni", "ring_bi", "all_peers"]:
        pairs = pattern_pairs(pattern, n)
        if pairs is None:
            continue
        per_sender = max(sum(1 for s, _ in pairs if s == r) for r in range(n))
        for api in ["alltoall_splits", "alltoall_list", "batch_p2p"]:
            for nb in sizes:
                ms, lo, hi = timed(p2p_op(api, pairs, rank, n, nb, send, recv), iters, 3)
                out.write(name, {"part": "links", "n": n, "pattern": pattern, "api": api,
                                 "msg_bytes": nb, "peers_per_sender": per_sender, "ms": ms,
                                 "ms_min": lo, "ms_max": hi,
                                 "egress_GBps": per_sender * nb / ms / 1e6})
    for coll in ["allgather", "alltoall"]:
        for nb in sizes:
            elems = nb // 2
            if coll == "allgather":
                inp = send[:elems]
                outp = recv[:elems * n] if elems * n <= recv.numel() else None
                if outp is None:
                    outp = torch.empty(elems * n, dtype=torch.bfloat16, device="cuda")
                fn = lambda: dist.all_gather_into_tensor(outp, inp)  # noqa: E731
            else:
                buf_in = torch.empty(elems * n, dtype=torch.bfloat16, device="cuda")
                buf_out = torch.empty_like(buf_in)
                fn = lambda: dist.all_to_all_single(buf_out, buf_in)  # noqa: E731
            ms, lo, hi = timed(fn, iters, 3)
            out.write(name, {"part": "links", "n": n, "pattern": coll, "api": "nccl",
                             "msg_bytes": nb, "peers_per_sender": n - 1, "ms": ms,
                             "ms_min": lo, "ms_max": hi,
                             "busbw_GBps": (n - 1) * nb / ms / 1e6})
            del fn
        torch.cuda.empty_cache()


# -------------------------------------------------------------- compute

def flash(q, k, v, causal):
    """q, k, v as (B, S, H, D) views; returns block output (B, S, H, D) and
    log-sum-exp (B, H, S) from PyTorch's flash-attention kernel."""
    o, lse = torch.ops.aten._scaled_dot_product_flash_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), 0.0, causal)[:2]
    return o.transpose(1, 2), lse


_RNG = []


def flash_bwd(dout, q, k, v, out, lse, causal):
    """Gradients dq, dk, dv as (B, S, H, D) views from PyTorch's flash-attention
    backward kernel; out and lse (B, H, Sq) are the rows' final output and
    log-sum-exp (the ring backward of ring_flash_attn: a block's gradients
    from the whole pass's softmax statistics).  Causal with Sq < Sk is
    bottom-right aligned, as the kernel's forward."""
    if not _RNG:  # the philox seed/offset arguments: unused without dropout
        x = torch.zeros(1, 1, 128, 64, dtype=torch.bfloat16, device=DEV)
        _RNG.append(torch.ops.aten._scaled_dot_product_flash_attention(x, x, x, 0.0, False))
    r0 = _RNG[0]
    dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(
        dout.transpose(1, 2), q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        out.transpose(1, 2), lse.contiguous(), r0[2], r0[3], q.shape[1], k.shape[1], 0.0,
        causal, r0[6], r0[7])
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)


def merge(acc, lse, blk, blse):
    """Fold a block's output into the running float32 output in place:
    o = o - sigmoid(lse_b - lse) (o - o_b); lse = lse - logsigmoid(lse - lse_b)
    (the log-sum-exp update used by ring_flash_attn)."""
    blse = blse.transpose(1, 2).unsqueeze(-1)
    acc.sub_(torch.sigmoid(blse - lse) * (acc - blk.float()))
    lse.sub_(F.logsigmoid(lse - blse))


def merge_inputs(B, sq, H, D):
    """A running output and log-sum-exp, and a block's, for timing merge."""
    return (torch.zeros(B, sq, H, D, dtype=torch.float32, device=DEV),
            torch.zeros(B, sq, H, 1, dtype=torch.float32, device=DEV),
            torch.randn(B, sq, H, D, dtype=torch.bfloat16, device=DEV),
            torch.randn(B, H, sq, dtype=torch.float32, device=DEV))


def attn_flops(B, H, D, sq, sk, causal):
    return 4.0 * B * H * D * sq * sk * (0.5 if causal else 1.0)


def compute_shapes(max_tokens):
    shapes = []
    sq = 768
    while sq <= max_tokens:
        for sk in (sq // 2, sq, 2 * sq):
            if sk <= 2 * max_tokens and sq * sk <= max_tokens * max_tokens:
                shapes.append((sq, sk, False))
        shapes.append((sq, sq, True))
        sq *= 2
    return shapes


def measure_compute(out, n, B, H, D, max_tokens, iters):
    name = f"compute-n{n}.jsonl"
    for sq, sk, causal in compute_shapes(max_tokens):
        q = torch.randn(B, sq, H, D, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        k = torch.randn(B, sk, H, D, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        v = torch.randn_like(k, requires_grad=True)
        with torch.no_grad():
            ms, lo, hi = timed(lambda: flash(q, k, v, causal), iters, 2)

        def fwd_bwd():
            o = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
            o.backward(torch.ones_like(o))
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
            fb, _, _ = timed(fwd_bwd, iters, 2)
        out.write(name, {"part": "compute", "n": n, "op": "attn_fwd", "B": B, "H": H, "D": D,
                         "sq": sq, "sk": sk, "causal": causal, "ms": ms, "ms_min": lo,
                         "ms_max": hi,
                         "TFLOPs": attn_flops(B, H, D, sq, sk, causal) / ms / 1e9,
                         "fwd_bwd_ms": fb, "bwd_ms_est": fb - ms})
        del q, k, v
    torch.cuda.empty_cache()
    sq = 768
    while sq <= max_tokens:
        acc, lse, blk, blse = merge_inputs(B, sq, H, D)
        ms, lo, hi = timed(lambda: merge(acc, lse, blk, blse), iters, 2)
        out.write(name, {"part": "compute", "n": n, "op": "merge", "B": B, "H": H, "D": D,
                         "sq": sq, "ms": ms, "ms_min": lo, "ms_max": hi})
        sq *= 2


def measure_compute_sweep(out, n, heads, dims, batches, chunks, iters, budget_s):
    """Square flash kernels (sq = sk = chunk), full and causal, over query /
    KV heads (heads: [(H, Hk)], GQA where Hk < H), head dims, batches and
    chunks; forward and backward each timed directly (the kernels the
    passes call), and the merge of each (H, D, B, chunk).  Chunks are the
    outer loop, smallest first, so a run cut short (budget_s seconds, then
    no new point is started) still covers every other axis."""
    name = f"compute-n{n}.jsonl"
    t0 = time.time()
    for L in chunks:
        for H, Hk in heads:
            for D in dims:
                for B in batches:
                    for causal in (False, True):
                        if time.time() - t0 > budget_s:
                            print(f"calibrate: compute sweep stopped at its {budget_s} s "
                                  f"budget before chunk {L}", flush=True)
                            return
                        try:
                            q = torch.randn(B, L, H, D, dtype=torch.bfloat16, device=DEV)
                            k = torch.randn(B, L, Hk, D, dtype=torch.bfloat16, device=DEV)
                            v = torch.randn_like(k)
                            ms, lo, hi = timed(lambda: flash(q, k, v, causal), iters, 2)
                            o, lse = flash(q, k, v, causal)
                            do = torch.randn_like(o)
                            bms, blo, bhi = timed(
                                lambda: flash_bwd(do, q, k, v, o, lse, causal), iters, 2)
                        except RuntimeError as e:  # a shape the kernel refuses, or memory
                            print(f"calibrate: compute H={H} Hk={Hk} D={D} B={B} L={L} "
                                  f"causal={causal} failed: {e}", flush=True)
                            q = k = v = o = lse = do = None
                            torch.cuda.empty_cache()
                            continue
                        fl = attn_flops(B, H, D, L, L, causal)
                        out.write(name, {"part": "compute", "n": n, "op": "attn_fwd", "B": B,
                                         "H": H, "Hk": Hk, "D": D, "sq": L, "sk": L,
                                         "causal": causal, "ms": ms, "ms_min": lo,
                                         "ms_max": hi, "TFLOPs": fl / ms / 1e9,
                                         "fwd_bwd_ms": None, "bwd_ms_est": bms,
                                         "bwd_ms": bms, "bwd_ms_min": blo, "bwd_ms_max": bhi,
                                         "bwd_TFLOPs": 2.5 * fl / bms / 1e9})
                        q = k = v = o = lse = do = None
                    torch.cuda.empty_cache()
        for H in sorted({h for h, _ in heads}):
            for D in dims:
                for B in batches:
                    acc, lse, blk, blse = merge_inputs(B, L, H, D)
                    ms, lo, hi = timed(lambda: merge(acc, lse, blk, blse), iters, 2)
                    out.write(name, {"part": "compute", "n": n, "op": "merge", "B": B, "H": H,
                                     "D": D, "sq": L, "ms": ms, "ms_min": lo, "ms_max": hi})
                    del acc, lse, blk, blse
        print(f"calibrate: compute chunk {L} done at {time.time() - t0:.0f} s", flush=True)


# ------------------------------------------------------------- overhead

def measure_overhead(out, n, rank, B, H, D, max_tokens):
    name = f"overhead-n{n}.jsonl"
    sq = 768
    while sq <= max_tokens:
        acc, lse, blk, blse = merge_inputs(B, sq, H, D)
        host, gpu = host_us(lambda: merge(acc, lse, blk, blse), True)
        out.write(name, {"part": "overhead", "n": n, "op": "merge", "B": B, "H": H, "D": D,
                         "sq": sq, "host_us": host, "gpu_us": gpu})
        q = torch.randn(B, sq, H, D, dtype=torch.bfloat16, device="cuda")
        host, gpu = host_us(lambda: flash(q, q, q, False), True, reps=5)
        out.write(name, {"part": "overhead", "n": n, "op": "attn_fwd", "B": B, "H": H, "D": D,
                         "sq": sq, "sk": sq, "host_us": host, "gpu_us": gpu})
        sq *= 4
    if n == 1:  # no peer to send to
        return
    # one ring step of a small message: host cost of the grouped NCCL call
    buf = torch.zeros(4096, dtype=torch.bfloat16, device="cuda")
    rbuf = torch.empty_like(buf)
    nxt, prv = (rank + 1) % n, (rank - 1) % n

    def ring_step():
        for r in dist.batch_isend_irecv([dist.P2POp(dist.isend, buf, nxt),
                                         dist.P2POp(dist.irecv, rbuf, prv)]):
            r.wait()
    ins = [buf if p in (nxt, prv) else buf[:0] for p in range(n)]
    outs = [rbuf[:0]] * n
    outs[nxt] = rbuf
    outs[prv] = torch.empty_like(rbuf)

    def alltoall_list():
        dist.all_to_all(outs, ins, async_op=True).wait()
    for op, fn in [("batch_p2p_ring", ring_step), ("alltoall_list_2peers", alltoall_list)]:
        dist.barrier()
        host, _ = host_us(fn, True, reps=20)
        dist.barrier()
        out.write(name, {"part": "overhead", "n": n, "op": op, "msg_bytes": 8192,
                         "host_us": host})


# --------------------------------------------------------------- passes

class Pass:
    """One forward pass of a ring-like schedule on this rank.

    Layouts are (B, S, H, D); a KV buffer is (B, S, 2, H, D) so any run of
    tokens is one contiguous slice that can be sent as is.

    Buffers follow ring_flash_attn (zhuzilin/ring-flash-attention,
    ring_flash_attn.py and zigzag_ring_flash_attn.py; TASP, which has no
    public code, the same way): every step's incoming KV goes into a new
    buffer (its send_recv: torch.empty_like), so the rank's own KV, the
    KV held and the KV arriving are live at once (three chunks from n = 3
    on); the running output and log-sum-exp are float32, made from the
    first block (block_out.to(float32)), and the output is cast to bf16 at
    the end of the pass.  The backward's float32 dK/dV accumulator of the
    KV held travels one hop a step: ring and TASP make a new one each step
    (ring_flash_attn's dk = block_dk + next_dk, then a new receive buffer:
    three float32 dK/dV live at the add), zigzag adds into the one received
    and receives the next into the one it sent (two live); dQ is a float32
    accumulator; results are cast to bf16.  Nothing is allocated in
    __init__ but the inputs (Q and the packed KV)."""

    comm_api = "batch_p2p"

    def __init__(self, sched, causal, n, rank, B, H, D, c, comm):
        self.sched, self.causal, self.n, self.rank = sched, causal, n, rank
        self.B, self.H, self.D, self.c, self.comm = B, H, D, c, comm
        dev = DEV
        self.q = torch.randn(B, c, H, D, dtype=torch.bfloat16, device=dev)
        self.kv = torch.randn(B, c, 2, H, D, dtype=torch.bfloat16, device=dev)
        if sched == "tasp":
            # K_n* split into edge-disjoint directed Hamiltonian cycles; for
            # the 4 GPUs of one node the two directions of one ring (K_4*
            # has no 3-cycle decomposition, Tillson 1980).  On NVSwitch any
            # decomposition gives the same timing.
            ring = list(range(n))
            self.cycles = [ring, ring[::-1]] if n > 2 else [ring]
            self.k = len(self.cycles)
        self.setup_schedule()

    # KV helpers
    @staticmethod
    def k_of(kv):
        return kv[:, :, 0]

    @staticmethod
    def v_of(kv):
        return kv[:, :, 1]

    def attend(self, cur, blocks, acc, lse):
        """One step's kernels on the KV chunk `cur`, merged into the output
        (the first block covers all queries and starts it)."""
        for q_lo, q_hi, segs, causal in blocks:
            kv = self.keys(cur, segs)
            o, blse = flash(self.q[:, q_lo:q_hi], self.k_of(kv), self.v_of(kv), causal)
            sl = None if (q_lo, q_hi) == (0, self.c) else slice(q_lo, q_hi)
            acc, lse = update_out_lse(acc, lse, o, blse, sl)
            del o, blse, kv
        return acc, lse

    def keys(self, buf, segs):
        """The KV rows segs [(a, b)] of buf as one block: a view for one
        range, a torch.cat gather for several."""
        if len(segs) == 1:
            return buf[:, segs[0][0]:segs[0][1]]
        return torch.cat([buf[:, a:b] for a, b in segs], dim=1)

    def exchange(self, sends, recvs):
        """sends: [(tensor, peer)], recvs: [(tensor, peer)] in one group."""
        if not self.comm:
            return []
        if LOCAL_COMM:
            return local_copies(sends, recvs)
        ops = [dist.P2POp(dist.isend, t, p) for t, p in sends]
        ops += [dist.P2POp(dist.irecv, t, p) for t, p in recvs]
        return dist.batch_isend_irecv(ops)

    def move(self, src, dst):
        """Issue one step's move of what src holds into dst (one group)."""
        return self.exchange([(src[:, a:b], peer) for a, b, peer, _ in self.moves],
                             [(dst[:, a:b], peer) for a, b, _, peer in self.moves])

    def setup_schedule(self):
        """moves: [(a, b, to, from)]: each step, rows [a, b) of the rotating
        buffer go to `to` and arrive from `from`; blocks(t): the kernels of
        step t as (q_lo, q_hi, key row ranges, causal)."""
        n, r, c = self.n, self.rank, self.c
        if self.sched != "tasp":
            self.moves = [(0, c, (r + 1) % n, (r - 1) % n)]
            return
        k = self.k
        spans = [(0, c // 2), (c // 2, c)] if self.causal else [(0, c)]
        # sub-chunk m: piece m of each of the rank's chunks
        self.lay = [[(a + (b - a) * m // k, a + (b - a) * (m + 1) // k) for a, b in spans]
                    for m in range(k)]
        succ = [{cyc[i]: cyc[(i + 1) % n] for i in range(n)} for cyc in self.cycles]
        pred = [{v: u for u, v in s.items()} for s in succ]
        self.pos = [{v: i for i, v in enumerate(cyc)} for cyc in self.cycles]
        self.moves = [(a, b, succ[m][r], pred[m][r]) for m in range(k) for a, b in self.lay[m]]

    def blocks(self, t):
        n, r, c, h = self.n, self.rank, self.c, self.c // 2
        whole = [(0, c)]
        if t == 0:
            return [(0, c, whole, self.causal)]
        if not self.causal:
            return [(0, c, whole, False)]
        if self.sched == "ring":  # contiguous chunks: later ones are skipped
            return [(0, c, whole, False)] if (r - t) % n < r else []
        if self.sched == "zigzag":  # chunks r and 2n-1-r, c/2 tokens each
            return [(0, c, [(0, h)], False)] if (r - t) % n < r else [(h, c, whole, False)]
        # TASP: origin of sub-chunk m held now is t hops back along cycle m;
        # lower origins: all queries x first pieces; higher: second half of
        # the queries x whole sub-chunks
        lay, k = self.lay, self.k
        origin = [self.cycles[m][(self.pos[m][r] - t) % n] for m in range(k)]
        low = [lay[m][0] for m in range(k) if origin[m] < r]
        high = [s for m in range(k) if origin[m] > r for s in lay[m]]
        return ([(0, c, low, False)] if low else []) + ([(h, c, high, False)] if high else [])

    def run(self):
        """Forward: each step's KV move (into a new buffer) overlaps its
        kernels; the first block output starts the float32 running output,
        every later one is merged into it out of place (update_out_lse:
        ring_flash_attn's update, which holds the block's float32 copy and
        two float32 temporaries beside the running output; the in-place
        merge() holds one fewer).  Leaves the bf16 output (acc,
        out) and the log-sum-exp (B, H, c) float32 (lse_bhs), which the
        backward reads, as ring_flash_attn's autograd function saves them."""
        cur, acc, lse = self.kv, None, None
        for t in range(self.n):
            reqs, recv = [], None
            if t + 1 < self.n:
                recv = torch.empty_like(cur)
                reqs = self.move(cur, recv)
            acc, lse = self.attend(cur, self.blocks(t), acc, lse)
            wait_all(reqs)
            if recv is not None and self.comm:
                cur = recv
            del recv
        del cur
        self.out = self.acc = acc.to(torch.bfloat16)
        del acc
        self.lse_bhs = lse.squeeze(-1).transpose(1, 2).contiguous()

    def prepare_backward(self, dout):
        """A forward pass (its output and log-sum-exp kept), and the output
        gradient, for run_backward."""
        self.run()
        self.dout = dout

    def fold(self, base, grads):
        """The float32 dK/dV (B, c, 2, H, D) of the KV held after this step:
        base (what arrived from the previous holder, None at step 0) plus
        this step's block gradients [(key row ranges, dk, dv)].  A new
        tensor (ring_flash_attn's block_dk + next_dk), except for zigzag,
        which adds into the buffer received (its in-place +=), and stripe,
        which does so for its shifted blocks (stripe_flash_attn_backward)."""
        if not grads:
            return base
        if base is None:
            new = torch.zeros(self.kv.shape, dtype=torch.float32, device=DEV)
        elif self.sched == "zigzag" or (self.sched == "stripe" and
                                        grads[0][0] != [(0, self.c)]):
            new = base  # stripe's shifted block: dk[:, :-1] += in place
        elif len(grads) == 1 and grads[0][0] == [(0, self.c)]:
            _, dk, dv = grads[0]
            new = torch.empty_like(base)
            torch.add(base[:, :, 0], dk, out=new[:, :, 0])
            torch.add(base[:, :, 1], dv, out=new[:, :, 1])
            return new
        else:
            new = base.clone()
        for segs, dk, dv in grads:  # scatter the gathered key gradients back
            off = 0
            for a, b in segs:
                new[:, a:b, 0] += dk[:, off:off + b - a]
                new[:, a:b, 1] += dv[:, off:off + b - a]
                off += b - a
        return new

    def run_backward(self):
        """Backward (ring_flash_attn's pattern): KV moves as in forward; the
        float32 dK/dV accumulator of the KV held at a step gets that step's
        block gradients plus what its previous holders added, and moves one
        hop after the step's kernels, n hops in all, the last one home.
        Returns this rank's dK and dV (bf16; dq too)."""
        n = self.n
        cur, dreqs = self.kv, []
        dq = dkv = arrived = spare = None
        for t in range(n):
            reqs, recv = [], None
            if t + 1 < n:
                recv = torch.empty_like(cur)
                reqs = self.move(cur, recv)
            grads = []
            for q_lo, q_hi, segs, causal in self.blocks(t):
                kv = self.keys(cur, segs)
                sl = slice(q_lo, q_hi)
                bdq, dk, dv = flash_bwd(self.dout[:, sl], self.q[:, sl], self.k_of(kv),
                                        self.v_of(kv), self.out[:, sl],
                                        self.lse_bhs[:, :, sl], causal)
                if dq is None:  # step 0's block: all queries (block_dq.to(float32))
                    dq = bdq.to(torch.float32, memory_format=torch.contiguous_format)
                else:
                    dq[:, sl] += bdq
                grads.append((segs, dk, dv))
                del bdq, kv
            wait_all(dreqs)
            dreqs = []
            if t > 0 and self.comm:
                if self.sched in ("zigzag", "stripe"):  # the sent one receives next
                    spare = dkv
                dkv = self.fold(arrived, grads)
            else:  # step 0, or no communication: this rank's own sum
                dkv = self.fold(dkv if t > 0 else None, grads)
            if dkv is None:  # nothing computed yet on this KV (causal ring)
                dkv = torch.zeros(self.kv.shape, dtype=torch.float32, device=DEV)
            del grads
            wait_all(reqs)
            if recv is not None and self.comm:
                cur = recv
            del recv
            if n > 1 and self.comm:
                nxt = spare if spare is not None else torch.empty_like(dkv)
                spare = None
                dreqs = self.move(dkv, nxt)
                arrived = nxt
                del nxt
        wait_all(dreqs)
        del cur
        home = arrived if (n > 1 and self.comm) else dkv
        del dkv, arrived
        self.dq = dq.to(torch.bfloat16)
        del dq
        dkv = home.to(torch.bfloat16)
        return dkv[:, :, 0], dkv[:, :, 1]


def p2p(group, sends, recvs):
    """One grouped send/receive call (batch_isend_irecv) on `group`:
    sends, recvs: [(tensor, peer)]."""
    if LOCAL_COMM:
        return local_copies(sends, recvs)
    ops = [dist.P2POp(dist.isend, t, p, group) for t, p in sends]
    ops += [dist.P2POp(dist.irecv, t, p, group) for t, p in recvs]
    return dist.batch_isend_irecv(ops)


def wait_all(reqs):
    for q in reqs:
        q.wait()


_SIDE_GROUPS = []


def side_groups():
    """Two more process groups over all ranks, made once: TokenRing's
    traffic towards the next rank (Q) and back to the owners (outputs, dQ)
    goes through separate groups, hence separate NCCL communicators and
    streams, so the two can run at once, as the public TokenRing code does
    (its RING_Q and RING_OUT groups, ACA-Lab-SJTU/token-ring globals.py)."""
    if not _SIDE_GROUPS:
        ranks = list(range(dist.get_world_size()))
        # a hang ends the run after a minute, as on the default group
        limit = datetime.timedelta(seconds=60)
        _SIDE_GROUPS.extend([dist.new_group(ranks, timeout=limit),
                             dist.new_group(ranks, timeout=limit)])
    return _SIDE_GROUPS


def bf16(*shape):
    return torch.randn(*shape, dtype=torch.bfloat16, device=DEV)


class Stripe(Pass):
    """Striped Attention (Brandon et al. 2023, arXiv 2311.09431) as
    ring_flash_attn's stripe_flash_attn_func runs it (zhuzilin/ring-flash-
    attention, stripe_flash_attn.py).  Rank i holds tokens i, i+n, i+2n, ...
    (layouts.stripe_tokens; the caller permutes the sequence so).

    Forward: the packed KV one hop a step around the ring (batch_isend_irecv
    into a new buffer, issued before the step's kernel, awaited after it),
    as Ring; the step's one kernel (layouts.stripe_block): the KV of a rank
    j <= i, flash attention's causal kernel on all of q, k, v; of j > i, the
    causal kernel on q[1:] against k[:-1], v[:-1], merged into rows 1..c-1.
    Every step's kernel is c x c causal, on every rank.
    Backward (stripe_flash_attn_backward): KV moves as in the forward; the
    float32 dK/dV of the KV held travels one hop a step behind it, the last
    hop home: j <= i a new sum (block + received), j > i added into the
    received rows [:-1] in place; the buffer sent last step receives the
    next one (its dk_comm_buffer).  float32 dQ.  Causal only: the public
    function asserts a causal mask (under a full one the layout changes
    nothing and the pass is Ring's)."""

    def __init__(self, causal, n, rank, B, H, D, c, comm):
        if not causal:
            raise SystemExit("calibrate: stripe is causal only (stripe_flash_attn_func; "
                             "under a full mask it is ring)")
        super().__init__("stripe", causal, n, rank, B, H, D, c, comm)

    def blocks(self, t):
        src = layouts.ring_source(self.rank, self.n, t)
        return [layouts.stripe_block(self.rank, src, self.c)]


_DRING_GROUPS = {}


def double_ring_groups(w):
    """(window ranks, place ranks, inner KV group, across KV group, inner
    dK/dV group, across dK/dV group) of this rank for inner size w, made
    once per w on every rank.  Four families of groups, as InternEvo's
    double ring has (intra_window, inter_window, dkv_intra_window,
    dkv_inter_window): each its own NCCL communicator, so the hop across
    runs beside the inner hops and dK/dV beside KV.  A group of one rank
    needs none (None: never used)."""
    n, rank = dist.get_world_size(), dist.get_rank()
    if LOCAL_COMM:  # emulated: ranks only
        n, rank = LOCAL_COMM
    windows, places = layouts.double_ring_windows(n, w)
    win = next(x for x in windows if rank in x)
    plc = next(x for x in places if rank in x)
    if LOCAL_COMM:
        return win, plc, None, None, None, None
    if w not in _DRING_GROUPS:
        limit = datetime.timedelta(seconds=60)

        def make(sets):
            mine = None
            for ranks in sets:
                g = dist.new_group(ranks, timeout=limit) if len(ranks) > 1 else None
                if rank in ranks:
                    mine = g
            return mine
        _DRING_GROUPS[w] = (make(windows), make(places), make(windows), make(places))
    return (win, plc) + _DRING_GROUPS[w]


class DoubleRing(Pass):
    """LoongTrain's double-ring attention (Gu et al. 2024, arXiv 2406.18485
    sec. 4.2) as InternEvo runs it (internlm/model/ops/ring_flash_attn/
    zigzag_ring_flash_attn_with_sliding_window.py, zigzag_double_ring_flash_
    attn_forward / _backward).  n = w x o ranks: o windows of w consecutive
    ranks; zigzag layout (chunks g and 2n-1-g on rank g) and Zigzag-Ring's
    blocks (layouts.zigzag_blocks, by the global ranks of the query's and the
    KV's holders); rank (b, p) holds at step j w + s the KV of (b - j, p - s)
    (layouts.double_ring_source).

    Forward, o rounds of w steps:
      at a round's start, wait for the KV that came across (rounds after
        the first), then send this round-start KV across to the same place
        of the next window (inter-window group, one batch_isend_irecv into
        a new buffer), not awaited until the next round starts: it runs
        beside the whole round
      each step: the KV held one hop around the window's ring (intra-window
        group, into a new buffer), the step's kernels, the merge (float32,
        out of place), then wait for the hop
    Backward, the same rounds and KV hops; the dK/dV of the KV held travels
    with it: around the window one hop after every step (its own group; w
    hops a round, so the last brings the round-start KV's dK/dV back to the
    rank that started the round with it; the buffer sent last step receives
    the next), then one hop across after the round (its own group, awaited
    after the next round's first kernel; the last one home).  As InternEvo:
    dQ and dK/dV are float32 in the first round and cast to bf16 at its end;
    later rounds add bf16 block gradients into bf16 dQ and dK/dV, and every
    hop across carries bf16.  Causal only: the public code asserts it."""

    def __init__(self, causal, n, rank, B, H, D, c, comm, w):
        if not causal:
            raise SystemExit("calibrate: double-ring is causal only (InternEvo's double ring)")
        if c % 2:
            raise SystemExit(f"calibrate: double-ring needs an even chunk ({c} tokens)")
        self.sched, self.causal, self.n, self.rank = "double-ring", causal, n, rank
        self.B, self.H, self.D, self.c, self.comm = B, H, D, c, comm
        self.w, self.o = w, n // w
        self.q = bf16(B, c, H, D)
        self.kv = bf16(B, c, 2, H, D)
        (self.window, self.places, self.g_in, self.g_x, self.dg_in,
         self.dg_x) = double_ring_groups(w)
        b, p = divmod(rank, w)
        self.nxt_in, self.prv_in = self.window[(p + 1) % w], self.window[(p - 1) % w]
        self.nxt_x, self.prv_x = self.places[(b + 1) % self.o], self.places[(b - 1) % self.o]

    def hop(self, group, send, to, recv, frm):
        """One grouped send/receive on `group` (global peers)."""
        if not self.comm:
            return []
        return p2p(group, [(send, to)], [(recv, frm)])

    def step_blocks(self, t):
        src = layouts.double_ring_source(self.rank, self.n, self.w, t)
        return layouts.zigzag_blocks(self.rank, src, self.c)

    def run(self):
        w, o = self.w, self.o
        start, acc, lse, xreqs, xrecv = self.kv, None, None, [], None
        for j in range(o):
            if j > 0:
                wait_all(xreqs)
                if self.comm:
                    start = xrecv
                xrecv = None
            if j + 1 < o:
                xrecv = torch.empty_like(start)
                xreqs = self.hop(self.g_x, start, self.nxt_x, xrecv, self.prv_x)
            cur = start
            for s in range(w):
                reqs, recv = [], None
                if s + 1 < w:
                    recv = torch.empty_like(cur)
                    reqs = self.hop(self.g_in, cur, self.nxt_in, recv, self.prv_in)
                acc, lse = self.attend(cur, self.step_blocks(j * w + s), acc, lse)
                wait_all(reqs)
                if recv is not None and self.comm:
                    cur = recv
                del recv
            del cur
        del start
        self.out = self.acc = acc.to(torch.bfloat16)
        del acc
        self.lse_bhs = lse.squeeze(-1).transpose(1, 2).contiguous()

    def run_backward(self):
        w, o, c = self.w, self.o, self.c
        inner, across = self.comm and w > 1, self.comm and o > 1
        dq = None
        start, xreqs, xrecv = self.kv, [], None
        dxreqs, dxrecv, done = [], None, None
        for j in range(o):
            if j > 0:
                wait_all(xreqs)
                if self.comm:
                    start = xrecv
                xrecv = None
            if j + 1 < o:
                xrecv = torch.empty_like(start)
                xreqs = self.hop(self.g_x, start, self.nxt_x, xrecv, self.prv_x)
            cur, dkv, spare, dreqs, arrived = start, None, None, [], None
            for s in range(w):
                reqs, recv = [], None
                if s + 1 < w:
                    recv = torch.empty_like(cur)
                    reqs = self.hop(self.g_in, cur, self.nxt_in, recv, self.prv_in)
                grads = []
                for q_lo, q_hi, segs, causal in self.step_blocks(j * w + s):
                    kv = self.keys(cur, segs)
                    sl = slice(q_lo, q_hi)
                    bdq, dk, dv = flash_bwd(self.dout[:, sl], self.q[:, sl], self.k_of(kv),
                                            self.v_of(kv), self.out[:, sl],
                                            self.lse_bhs[:, :, sl], causal)
                    if dq is None:  # the first block: all queries (dq_buffer.to(float32))
                        dq = bdq.to(torch.float32, memory_format=torch.contiguous_format)
                    else:
                        dq[:, sl] += bdq
                    grads.append((segs, dk, dv))
                    del bdq, kv
                if j == 0 and s == 0:  # own KV, whole causal block: float32 copies
                    _, dk, dv = grads[0]
                    dkv = torch.empty(self.kv.shape, dtype=torch.float32, device=DEV)
                    dkv[:, :, 0].copy_(dk)
                    dkv[:, :, 1].copy_(dv)
                else:
                    if s > 0:
                        wait_all(dreqs)
                        dreqs = []
                        if inner:
                            spare, dkv = dkv, arrived
                    else:  # a round's first step: what came across
                        wait_all(dxreqs)
                        dxreqs = []
                        dkv = dxrecv if across else done
                        dxrecv = None
                    for segs, dk, dv in grads:
                        off = 0
                        for a, b in segs:
                            dkv[:, a:b, 0] += dk[:, off:off + b - a]
                            dkv[:, a:b, 1] += dv[:, off:off + b - a]
                            off += b - a
                del grads
                wait_all(reqs)
                if recv is not None and self.comm:
                    cur = recv
                del recv
                if inner:
                    nxt = spare if spare is not None else torch.empty_like(dkv)
                    spare = None
                    dreqs = self.hop(self.dg_in, dkv, self.nxt_in, nxt, self.prv_in)
                    arrived = nxt
                    del nxt
            wait_all(dreqs)
            done = arrived if inner else dkv
            del dkv, arrived, spare, cur
            if j == 0:  # the first window's results as bf16 (InternEvo's return)
                dq = dq.to(torch.bfloat16)
                done = done.to(torch.bfloat16)
            if across:
                dxrecv = torch.empty_like(done)
                dxreqs = self.hop(self.dg_x, done, self.nxt_x, dxrecv, self.prv_x)
        wait_all(dxreqs)
        home = dxrecv if across else done
        del start, done, dxrecv
        self.dq = dq
        return home[:, :, 0], home[:, :, 1]


class Ulysses:
    """DeepSpeed-Ulysses (Jacobs et al., arXiv 2309.14509; DeepSpeed's
    DistributedAttention, which calls one _SeqAllToAll per tensor).  Rank r
    holds tokens [r c, (r+1) c) for both masks.

    Forward, in issue order on the compute stream (every call blocking the
    stream until it is done, as synchronous collectives do):
      for X in Q, K, V: copy X (B, c, H, D) into n head groups
        (n, B, c, H/n, D); all_to_all_single (bf16, c H D / n elements to
        each peer); read back as (B, S, H/n, D) (a view for B = 1)
      one flash kernel over the whole sequence on H/n heads (causal: the
        plain causal mask)
      output: as (n, B, c, H/n, D) (a view for B = 1); all_to_all_single;
        copy into (B, c, H, D)
    Backward (after a forward; the gathered Q, K, V, output and log-sum-exp
    are kept): all_to_all of dO as Q's; one flash backward over the whole
    sequence; all_to_all of dQ, then dK, then dV (bf16) as the output's,
    each followed by its copy back into (B, c, H, D).

    Memory follows DeepSpeed-Ulysses and yunchang's all_to_all_4D (every
    buffer made in the pass): per all-to-all a contiguous copy in
    head-group order and a new output (torch.empty_like), the copy freed
    after the call; the attention function saves the gathered Q, K, V, its
    output and log-sum-exp, and (keep_saved False, as autograd) frees them
    once its backward has run, before the gradients' all-to-alls."""

    comm_api = "all_to_all"
    keep_saved = True   # False: the saved tensors go once read (one backward only)

    def __init__(self, causal, n, rank, B, H, D, c, comm):
        if H % n:
            raise SystemExit(f"calibrate: ulysses needs heads ({H}) divisible by ranks ({n})")
        self.causal, self.n, self.comm = causal, n, comm
        self.u, self.ugroup = n, None   # the all-to-all's ranks: all of them
        self.q = bf16(B, c, H, D)
        self.kv = bf16(B, c, 2, H, D)

    def a2a(self, t):
        """all_to_all_single of t (u, ...) over the Ulysses group: block p
        to its p-th rank, block p of the result from it, into a new tensor
        (yunchang's all_to_all_4D: torch.empty_like).  Comm off, or a group
        of one: t itself, same shape."""
        if not self.comm or self.u == 1:
            return t
        o = torch.empty_like(t)
        if LOCAL_COMM:
            o.copy_(t)
        else:
            dist.all_to_all_single(o, t, group=self.ugroup)
        return o

    def to_heads(self, x):
        """(B, c, H, D), sequence-sharded -> (B, u c, H/u, D), head-sharded:
        a contiguous copy in head-group-major order (yunchang's input_t),
        the all-to-all into a new tensor, read back as a view (B = 1)."""
        B, c, H, D = x.shape
        n = self.u
        t = x.reshape(B, c, n, H // n, D).permute(2, 0, 1, 3, 4).contiguous()
        return self.a2a(t).transpose(0, 1).reshape(B, n * c, H // n, D)

    def to_seq(self, y):
        """(B, u c, H/u, D), head-sharded -> (B, c, H, D), sequence-sharded."""
        B, S, hn, D = y.shape
        n = self.u
        t = y.reshape(B, n, S // n, hn, D).transpose(0, 1).contiguous()
        return self.a2a(t).permute(1, 2, 0, 3, 4).reshape(B, S // n, n * hn, D)

    def attend(self, qg, kg, vg):
        return flash(qg, kg, vg, self.causal)

    def attend_bwd(self, dog, qg, kg, vg, o, lse):
        return flash_bwd(dog, qg, kg, vg, o, lse, self.causal)

    def run(self):
        qg = self.to_heads(self.q)
        kg = self.to_heads(self.kv[:, :, 0])
        vg = self.to_heads(self.kv[:, :, 1])
        o, lse = self.attend(qg, kg, vg)
        self.acc = self.to_seq(o)
        self.saved = (qg, kg, vg, o, lse)   # what the attention function saves
        del qg, kg, vg, o, lse

    def prepare_backward(self, dout):
        self.run()
        self.dout = dout

    def run_backward(self):
        """As autograd runs it: dO to heads; the attention backward, after
        which its saved tensors are freed; then dQ, dK, dV back to the
        sequence layout one after another, each head-layout gradient freed
        once sent."""
        qg, kg, vg, o, lse = self.saved
        if not self.keep_saved:
            self.saved = None
        dog = self.to_heads(self.dout)
        dq, dk, dv = self.attend_bwd(dog, qg, kg, vg, o, lse)
        del dog, qg, kg, vg, o, lse
        self.dq = self.to_seq(dq)
        del dq
        dks = self.to_seq(dk)
        del dk
        dvs = self.to_seq(dv)
        return dks, dvs


_USP_GROUPS = {}


def usp_groups(u):
    """((Ulysses group, its ranks), (ring group, its ranks)) of this rank
    for Ulysses degree u, made once per u on every rank: Ulysses groups
    are runs of u consecutive ranks, ring groups every u-th rank (yunchang's
    set_seq_parallel_pg with the Ulysses degree inside).  A group of all
    ranks is the default group (None); a group of one rank needs none."""
    n, rank = dist.get_world_size(), dist.get_rank()
    if LOCAL_COMM:  # emulated: ranks only, no groups
        n, rank = LOCAL_COMM
        return (None, list(range(rank - rank % u, rank - rank % u + u))), \
            (None, list(range(rank % u, n, u)))
    if u not in _USP_GROUPS:
        limit = datetime.timedelta(seconds=60)

        def make(sets):
            mine = None
            for ranks in sets:
                g = dist.new_group(ranks, timeout=limit) if 1 < len(ranks) < n else None
                if rank in ranks:
                    mine = (g, ranks)
            return mine
        r = n // u
        _USP_GROUPS[u] = (make([list(range(g * u, (g + 1) * u)) for g in range(r)]),
                          make([list(range(i, n, u)) for i in range(u)]))
    return _USP_GROUPS[u]


def update_out_lse(out, lse, blk, blse, sl=None):
    """ring_flash_attn's update_out_and_lse, out of place: the block output
    (bf16) made float32, the running output and log-sum-exp (B, S, H, 1)
    replaced by new float32 tensors (the first block's: its own, the
    log-sum-exp a view); sl: the block covers those query rows only, the
    new values are copied into them."""
    if out is None:
        return blk.float(), blse.transpose(-2, -1).unsqueeze(-1)
    if sl is not None:
        o2, l2 = update_out_lse(out[:, sl], lse[:, sl], blk, blse)
        out[:, sl], lse[:, sl] = o2, l2
        return out, lse
    blk = blk.float()
    blse = blse.transpose(-2, -1).unsqueeze(-1)
    out = out - torch.sigmoid(blse - lse) * (out - blk)
    lse = lse - F.logsigmoid(lse - blse)
    return out, lse


class USP(Ulysses):
    """USP, unified sequence parallelism (Fang and Zhao, arXiv 2405.07719;
    feifeibear/long-context-attention, "yunchang", LongContextAttention):
    n = u x r ranks, Ulysses of degree u inside each run of u consecutive
    ranks, ring attention of degree r across them (usp_groups).
    Forward: Q, K, V each through the Ulysses all-to-all (scatter heads,
    gather the group's tokens: Ulysses.to_heads, three calls, as yunchang
    without use_pack_qkv), then ring attention of ring_flash_attn over the
    ring group on H/u heads and u c tokens (ring_fwd: ring_flash_attn_func
    for the full mask, zigzag_ring_flash_attn_func for causal; K and V as
    two tensors, each step's pair received into new buffers; float32
    running output merged out of place), then the output's all-to-all
    back.  Backward as autograd runs it (Ulysses.run_backward) around
    ring_bwd: ring_flash_attn_backward (full: dk = block_dk + next_dk, new
    float32 tensors each step) or zigzag_ring_flash_attn_backward (causal:
    adds into the float32 dK/dV received, receives into the ones sent).
    Token layout: full, rank g u + i holds tokens [(g u + i) c, +c);
    causal (yunchang's zigzag extract), ring rank g holds sequence chunks g
    and 2r-1-g of u c / 2 tokens, split into u pieces of c in that order,
    piece i on Ulysses rank i.  u = n is Ulysses (a ring of one rank, no
    hop), u = 1 ring_flash_attn's ring or zigzag (no all-to-all; K and V
    made contiguous, as ring_flash_attn's autograd function does)."""

    comm_api = "all_to_all+batch_p2p"

    def __init__(self, causal, n, rank, B, H, D, c, comm, u):
        if n % u or H % u:
            raise SystemExit(f"calibrate: usp needs u ({u}) dividing ranks ({n}) and heads ({H})")
        self.causal, self.n, self.rank, self.comm = causal, n, rank, comm
        self.u, self.r = u, n // u
        self.q = bf16(B, c, H, D)
        self.kv = bf16(B, c, 2, H, D)
        (self.ugroup, _), (self.rgroup, self.rranks) = usp_groups(u)
        self.ring_rank = self.rranks.index(rank)

    def ring_p2p(self, sends, recvs):
        """One grouped call on the ring group; peers as ring positions."""
        if not self.comm or self.r == 1:
            return []
        g = self.rranks
        return p2p(self.rgroup, [(t, g[i]) for t, i in sends], [(t, g[i]) for t, i in recvs])

    def attend(self, q, k, v):
        """ring_flash_attn's (zigzag_)ring_flash_attn_forward on the ring
        group: returns the bf16 output and the (B, H, S) log-sum-exp."""
        r, i, causal = self.r, self.ring_rank, self.causal
        nxt, prv, half = (i + 1) % r, (i - 1) % r, q.shape[1] // 2
        out = lse = None
        for step in range(r):
            reqs, nk = [], None
            if step + 1 < r:
                nk, nv = torch.empty_like(k), torch.empty_like(v)
                reqs = self.ring_p2p([(k, nxt), (v, nxt)], [(nk, prv), (nv, prv)])
            sl = None
            if not causal:
                o, bl = flash(q, k, v, False)
            elif step == 0:
                o, bl = flash(q, k, v, True)
            elif step <= i:
                o, bl = flash(q, k[:, :half], v[:, :half], False)
            else:
                o, bl = flash(q[:, half:], k, v, False)
                sl = slice(half, None)
            out, lse = update_out_lse(out, lse, o, bl, sl)
            del o, bl
            wait_all(reqs)
            if nk is not None and self.comm:
                k, v = nk, nv
            nk = nv = None
        o = out.to(torch.bfloat16)
        del out
        return o, lse.squeeze(-1).transpose(1, 2)

    def attend_bwd(self, dout, q, k, v, out, lse):
        """ring_flash_attn's (zigzag_)ring_flash_attn_backward on the ring
        group: float32 dQ, and the float32 dK/dV of the KV held travelling
        one hop a step, the last one home; bf16 results."""
        r, i, causal = self.r, self.ring_rank, self.causal
        nxt, prv, half = (i + 1) % r, (i - 1) % r, q.shape[1] // 2
        hops = self.comm and r > 1
        if causal:  # zigzag's second halves (views; the log-sum-exp a copy)
            dout1, q1, out1 = dout[:, half:], q[:, half:], out[:, half:]
            lse1 = lse[:, :, half:].contiguous()
        dq = dk = dv = ndk = ndv = None
        spare, dreqs = None, []
        for step in range(r):
            reqs, nk = [], None
            if step + 1 < r:
                nk, nv = torch.empty_like(k), torch.empty_like(v)
                reqs = self.ring_p2p([(k, nxt), (v, nxt)], [(nk, prv), (nv, prv)])
            first_half = causal and 0 < step <= i
            second = causal and step > i
            if second:
                bq, bk, bv = flash_bwd(dout1, q1, k, v, out1, lse1, False)
            elif first_half:
                bq, bk, bv = flash_bwd(dout, q, k[:, :half], v[:, :half], out, lse, False)
            else:
                bq, bk, bv = flash_bwd(dout, q, k, v, out, lse, causal and step == 0)
            if step == 0:  # contiguous float32 copies (block buffers .to(float32))
                dq, dk, dv = (x.to(torch.float32, memory_format=torch.contiguous_format)
                              for x in (bq, bk, bv))
            else:
                if second:
                    dq[:, half:] += bq
                else:
                    dq += bq
                wait_all(dreqs)
                dreqs = []
                gk, gv = (ndk, ndv) if hops else (dk, dv)
                if not causal:  # ring_flash_attn: new tensors
                    dk, dv = torch.empty_like(gk), torch.empty_like(gv)
                    torch.add(gk, bk, out=dk)
                    torch.add(gv, bv, out=dv)
                else:  # zigzag: into the received ones
                    if hops:
                        spare = (dk, dv)
                    dk, dv = gk, gv
                    rows = slice(None, half) if first_half else slice(None)
                    dk[:, rows] += bk
                    dv[:, rows] += bv
                gk = gv = None
            del bq, bk, bv
            wait_all(reqs)
            if nk is not None and self.comm:
                k, v = nk, nv
            nk = nv = None
            if hops:
                a, b = spare if spare is not None else (torch.empty_like(dk),
                                                        torch.empty_like(dv))
                spare = None
                dreqs = self.ring_p2p([(dk, nxt), (dv, nxt)], [(a, prv), (b, prv)])
                ndk, ndv = a, b
                del a, b
        wait_all(dreqs)
        if hops:
            dk, dv = ndk, ndv
        ndk = ndv = None
        return dq.to(torch.bfloat16), dk.to(torch.bfloat16), dv.to(torch.bfloat16)


class AllGather:
    """Llama 3 context parallelism (arXiv 2407.21783 sec. 3.3.2; the llama3
    variant of ring_flash_attn).  Full mask: rank r holds tokens
    [r c, (r+1) c); causal: chunks r and 2n-1-r of h = c/2 tokens (zigzag).

    Forward: ONE all_gather_into_tensor of the rank's packed KV (B, c, 2, H,
    D) bf16 into (n, B, c, 2, H, D); the compute stream waits for it.  Then
    the gathered KV in sequence order: a view for the full mask (B = 1),
    an index_select copy of the whole buffer for zigzag.  Full: one kernel,
    the c local queries against all S keys.  Causal: two kernels, chunk r's
    queries against keys [0, (r+1) h) and chunk 2n-1-r's against
    [0, (2n-r) h), causal bottom-right aligned (the flash kernel's meaning
    of causal when Sq < Sk: key <= query here); their outputs are
    concatenated.  No merge.
    Backward (gathered KV kept from the forward): the flash backward of the
    same kernels; dQ stays local; dK and dV of the gathered sequence go
    into one float32 buffer (the larger kernel's copied in, the rest
    zeroed, the other kernel's added); copied into owner order
    (n, B, c, 2, H, D); ONE reduce_scatter_tensor (float32, sum) gives each
    owner its dK, dV.

    Memory: every buffer is made in the pass (the gathered KV, its
    sequence-order copy for zigzag, the float32 dK/dV of the whole
    sequence, its owner-order copy, the float32 result) and the gathered
    KV is kept from the forward for the backward (saved, as an autograd
    function that saves its gathered inputs does; freed once the backward
    has read it).  This is not ring_flash_attn's llama3_flash_attn_varlen,
    which gathers the KV again in the backward (two gather buffers of
    heads_k_stride heads each, forward and backward), keeps dK/dV of the
    gathered sequence in bf16 and reduce-scatters bf16: this program keeps
    the communication the timing calibration measured (h200x2-sp)."""

    comm_api = "all_gather"
    keep_saved = True   # False: the saved tensors go once read (one backward only)

    def __init__(self, causal, n, rank, B, H, D, c, comm):
        self.causal, self.n, self.rank, self.comm = causal, n, rank, comm
        self.B, self.H, self.D, self.c, self.h = B, H, D, c, c // 2
        self.q = bf16(B, c, H, D)
        self.kv = bf16(B, c, 2, H, D)
        if causal:
            # half-chunk 2p+s of the gathered buffer is sequence chunk p (s=0)
            # or 2n-1-p (s=1)
            owner = [p if s == 0 else 2 * n - 1 - p for p in range(n) for s in range(2)]
            seq = [owner.index(i) for i in range(2 * n)]
            self.to_seq = torch.tensor(seq, device=DEV)
            self.to_owner = torch.tensor(owner, device=DEV)

    def kernels(self):
        """(query rows lo, hi, key prefix length, causal) of each kernel."""
        n, r, c, h = self.n, self.rank, self.c, self.h
        if not self.causal:
            return [(0, c, n * c, False)]
        return [(0, h, (r + 1) * h, True), (h, c, (2 * n - r) * h, True)]

    def gathered(self):
        B, n, c, h, H, D = self.B, self.n, self.c, self.h, self.H, self.D
        g = bf16(n, B, c, 2, H, D)   # all_gather output, rank-major
        if self.comm and LOCAL_COMM:
            g.copy_(self.kv.unsqueeze(0).expand_as(g))
        elif self.comm:
            dist.all_gather_into_tensor(g, self.kv)
        if not self.causal:
            return g.transpose(0, 1).reshape(B, n * c, 2, H, D)
        x = g.view(n, B, 2, h, 2, H, D).transpose(1, 2).reshape(2 * n, B, h, 2, H, D)
        return x.index_select(0, self.to_seq).transpose(0, 1).reshape(B, n * c, 2, H, D)

    def run(self):
        kvg = self.gathered()
        outs = [flash(self.q[:, lo:hi], kvg[:, :kh, 0], kvg[:, :kh, 1], causal)
                for lo, hi, kh, causal in self.kernels()]
        self.acc = outs[0][0] if len(outs) == 1 else torch.cat([o for o, _ in outs], dim=1)
        self.saved = (kvg, outs)
        del kvg, outs

    def prepare_backward(self, dout):
        self.run()
        self.dout = dout

    def run_backward(self):
        B, n, c, h, H, D = self.B, self.n, self.c, self.h, self.H, self.D
        kvg, outs = self.saved
        if not self.keep_saved:  # as autograd frees a node's saved tensors once it has run
            self.saved = None
        dkv, dqs = torch.empty(B, n * c, 2, H, D, dtype=torch.float32, device=DEV), []
        ks = self.kernels()
        big = max(kh for _, _, kh, _ in ks)
        if big < n * c:
            dkv[:, big:].zero_()
        first = True
        for (lo, hi, kh, causal), (o, lse) in sorted(zip(ks, outs), key=lambda x: -x[0][2]):
            dq, dk, dv = flash_bwd(self.dout[:, lo:hi], self.q[:, lo:hi], kvg[:, :kh, 0],
                                   kvg[:, :kh, 1], o, lse, causal)
            dqs.append((lo, dq))
            if first:
                dkv[:, :kh, 0].copy_(dk)
                dkv[:, :kh, 1].copy_(dv)
                first = False
            else:
                dkv[:, :kh, 0] += dk
                dkv[:, :kh, 1] += dv
            del dq, dk, dv
        del kvg, outs, o, lse
        dqs.sort(key=lambda x: x[0])
        self.dq = dqs[0][1] if len(dqs) == 1 else torch.cat([d for _, d in dqs], dim=1)
        del dqs
        if self.causal:
            x = dkv.view(B, 2 * n, h, 2, H, D).index_select(1, self.to_owner)
        else:
            x = dkv
        del dkv
        send = x.view(B, n, c, 2, H, D).transpose(0, 1).contiguous()
        del x
        if self.comm:
            own = torch.empty(B, c, 2, H, D, dtype=torch.float32, device=DEV)
            if LOCAL_COMM:
                own.copy_(send[self.rank])
            else:
                dist.reduce_scatter_tensor(own, send)
        else:
            own = send[self.rank]
        del send
        own = own.to(torch.bfloat16)
        return own[:, :, 0], own[:, :, 1]


class TokenRing:
    """TokenRing (arXiv 2412.20501; code ACA-Lab-SJTU/token-ring): KV stays
    put, Q travels.  Full mask: rank r holds tokens [r c, (r+1) c); causal:
    chunks r and 2n-1-r of h = c/2 tokens (zigzag).

    Forward, step t = 0..n-1, rank r holds Q of owner j = (r - t) mod n:
      call 1 (Q group), if t+1 < n: send the held Q (bf16, B c H D) to
        r+1, receive the next from r-1;
      call 2 (output group), if t >= 2: send the block output of step t-1
        (bf16) and its log-sum-exp (float32, B H rows) to its owner
        (r-t+1) mod n, receive the block for r from (r+t-1) mod n;
      the step's kernel, Q_j against the local KV_r: j == r: causal over
        both chunks (t = 0; its output starts the running float32 output);
        causal r < j: all of Q_j against chunk r; causal r > j: Q_j's
        second half against all of KV_r; full: all against all;
      wait for calls 1 and 2 (the compute stream waits for them; the
        received block is merged into the owner's rows with the
        log-sum-exp merge).
    After the last step, call 2 once more for the block of step n-1 (not
    overlapped with a kernel).  So a block output travels during the next
    step's kernel, as in the public code (its out_comm at step > 1).  The
    two calls go through two process groups of their own (side_groups), so
    they run at once.
    Backward, step t, rank r holds (Q_j, dO_j, out_j, lse_j):
      call 1 (Q group), if t+1 < n: forward them one hop (Q, dO, out bf16,
        lse float32 (B, H, c)) to r+1, receive from r-1;
      call 2 (output group), if t >= 2: send the float32 dQ partial of
        step t-1 to its owner, receive the one for r from (r+t-1) mod n;
      the step's flash backward against KV_r (the same kernel as the
        forward's); dK_r, dV_r accumulate locally in float32 and never
        move; dQ of j == r accumulates locally, other dQ partials become
        float32 for call 2 of the next step;
      wait for calls 1 and 2; the received dQ partial is added to dQ.
    After the last step, call 2 once more."""

    comm_api = "batch_p2p"

    def __init__(self, causal, n, rank, B, H, D, c, comm):
        self.causal, self.n, self.rank, self.comm = causal, n, rank, comm
        self.B, self.H, self.D = B, H, D
        self.c, self.h = c, c // 2
        self.q = bf16(B, c, H, D)
        self.kv = bf16(B, c, 2, H, D)
        self.gq, self.gout = side_groups() if comm and not LOCAL_COMM else (None, None)

    def buffers(self, what):
        """The pass's receive buffers, made at its start and dropped at its
        end: two Q buffers (forward; backward: two
        sets of Q, dO, out, lse), and per block size a block output (bf16)
        and log-sum-exp (float32) arriving from another rank (forward) or
        a float32 dQ partial (backward)."""
        B, c, H, D = self.B, self.c, self.H, self.D
        rows = {c, self.h} if self.causal else {c}
        if what == "out":
            self.qbufs = [torch.empty_like(self.q) for _ in range(2)]
            self.blk_in = {m: (torch.zeros(B, m, H, D, dtype=torch.bfloat16, device=DEV),
                               torch.zeros(B, H, m, dtype=torch.float32, device=DEV))
                           for m in rows}
        else:
            self.bbufs = [[torch.empty_like(x) for x in (self.q, self.dout, self.out,
                                                          self.lse_bhs)] for _ in range(2)]
            self.dq_in = {m: torch.zeros(B, m, H, D, dtype=torch.float32, device=DEV)
                          for m in rows}

    def free_buffers(self):
        self.qbufs = self.blk_in = self.bbufs = self.dq_in = None

    def block(self, r, j):
        """The kernel of rank r on Q of owner j: (query rows lo, hi, key rows
        [0, kh) of KV_r, causal)."""
        c, h = self.c, self.h
        if not self.causal:
            return 0, c, c, False
        if j == r:
            return 0, c, c, True
        if r < j:  # chunk r precedes both of j's; chunk 2n-1-r follows both
            return 0, c, h, False
        return h, c, c, False  # only j's second chunk follows both of r's

    def exchange(self, group, sends, recvs):
        return p2p(group, sends, recvs) if self.comm else []

    def send_back(self, pending, s, what):
        """Call 2: what rank r computed at step s goes to its owner; the
        block for r computed by (r + s) mod n at its step s arrives.
        Returns the requests and (rows, received tensors)."""
        n, r = self.n, self.rank
        tensors, owner = pending
        src = (r + s) % n
        lo, hi, _, _ = self.block(src, r)
        got = self.blk_in[hi - lo] if what == "out" else (self.dq_in[hi - lo],)
        reqs = self.exchange(self.gout, [(t, owner) for t in tensors],
                             [(t, src) for t in got])
        return reqs, (lo, hi, got)

    def run(self):
        n, r = self.n, self.rank
        self.buffers("out")
        self.acc = torch.empty(self.B, self.c, self.H, self.D, dtype=torch.float32, device=DEV)
        self.lse = torch.empty(self.B, self.c, self.H, 1, dtype=torch.float32, device=DEV)
        held, pending = self.q, None
        for t in range(n):
            j = (r - t) % n
            reqs, got, sending = [], None, pending
            if t + 1 < n:
                nxt = self.qbufs[t % 2]
                reqs += self.exchange(self.gq, [(held, (r + 1) % n)], [(nxt, (r - 1) % n)])
            if pending is not None:
                rq, got = self.send_back(pending, t - 1, "out")
                reqs += rq
            lo, hi, kh, causal = self.block(r, j)
            o, lse = flash(held[:, lo:hi], self.kv[:, :kh, 0], self.kv[:, :kh, 1], causal)
            if j == r:
                self.acc.copy_(o)
                self.lse.copy_(lse.transpose(1, 2).unsqueeze(-1))
                pending = None
            else:
                pending = ((o.contiguous(), lse.contiguous()), j)
            wait_all(reqs)
            del sending
            if got is not None:
                a, b, (bo, bl) = got
                merge(self.acc[:, a:b], self.lse[:, a:b], bo, bl)
            if t + 1 < n and self.comm:
                held = nxt
        if pending is not None:
            reqs, (a, b, (bo, bl)) = self.send_back(pending, n - 1, "out")
            wait_all(reqs)
            merge(self.acc[:, a:b], self.lse[:, a:b], bo, bl)
            del reqs, bo, bl
        pending = held = None
        self.free_buffers()
        # the bf16 output and the (B, H, c) log-sum-exp the backward reads
        self.out = self.acc.to(torch.bfloat16)
        self.lse_bhs = self.lse.squeeze(-1).transpose(1, 2).contiguous()
        self.acc, self.lse = self.out, None

    def prepare_backward(self, dout):
        self.run()
        self.dout = dout

    def run_backward(self):
        n, r = self.n, self.rank
        self.buffers("dq")
        self.dq = torch.zeros(self.q.shape, dtype=torch.float32, device=DEV)
        self.dkv = torch.zeros(self.kv.shape, dtype=torch.float32, device=DEV)
        held, pending = (self.q, self.dout, self.out, self.lse_bhs), None
        for t in range(n):
            j = (r - t) % n
            reqs, got, sending = [], None, pending
            if t + 1 < n:
                nxt = self.bbufs[t % 2]
                reqs += self.exchange(self.gq, [(x, (r + 1) % n) for x in held],
                                      [(x, (r - 1) % n) for x in nxt])
            if pending is not None:
                rq, got = self.send_back(pending, t - 1, "dq")
                reqs += rq
            lo, hi, kh, causal = self.block(r, j)
            q, do, o, lse = held
            dq, dk, dv = flash_bwd(do[:, lo:hi], q[:, lo:hi], self.kv[:, :kh, 0],
                                   self.kv[:, :kh, 1], o[:, lo:hi], lse[:, :, lo:hi], causal)
            self.dkv[:, :kh, 0] += dk
            self.dkv[:, :kh, 1] += dv
            if j == r:
                self.dq[:, lo:hi] += dq
                pending = None
            else:
                pending = ((dq.float(),), j)
            wait_all(reqs)
            del sending
            if got is not None:
                a, b, (d,) = got
                self.dq[:, a:b] += d
            if t + 1 < n and self.comm:
                held = nxt
        if pending is not None:
            reqs, (a, b, (d,)) = self.send_back(pending, n - 1, "dq")
            wait_all(reqs)
            self.dq[:, a:b] += d
            del reqs, d
        pending = held = None
        self.free_buffers()
        self.dq = self.dq.to(torch.bfloat16)
        dkv, self.dkv = self.dkv.to(torch.bfloat16), None
        return dkv[:, :, 0], dkv[:, :, 1]


# ------------------------------------------------------- linear attention

# Linear attention, chunked: no decay, no normalisation, no feature map.
# Causal: O = ((Q K^T) (.) M) V; bidirectional: O = Q (K^T V).  Layouts are
# (B, H, L, D) bf16; states M = K^T V are float32 (B, H, D, D).  These
# stand in for lightning attention's kernels (plain PyTorch batched matrix
# products, blocks of LIN_BLOCK tokens, tasp-sim's linear_block default).
LIN_BLOCK = 64
_OUT32 = []


def out32():
    """Whether torch.bmm takes out_dtype=float32 for bf16 inputs here
    (PyTorch >= 2.9 on CUDA): bf16 tensor-core products accumulated and
    stored in float32.  Else the inputs are cast to float32 first."""
    if not _OUT32:
        try:
            x = torch.zeros(1, 16, 16, dtype=torch.bfloat16, device=DEV)
            _OUT32.append(torch.bmm(x, x, out_dtype=torch.float32).dtype == torch.float32)
        except (TypeError, RuntimeError):
            _OUT32.append(False)
    return _OUT32[0]


def mm32(a, b):
    """Batched product of bf16 3-D tensors as float32."""
    if out32():
        return torch.bmm(a, b, out_dtype=torch.float32)
    return torch.bmm(a.float(), b.float())


def _bh(x):
    """(B, H, L, D) -> (B H, L, D), a view."""
    return x.reshape(-1, x.shape[-2], x.shape[-1])


def lin_state(k, v):
    """OP_LIN_STATE forward: M = K^T V, float32 (B, H, D, D)."""
    B, H, _, D = k.shape
    return mm32(_bh(k).transpose(1, 2), _bh(v)).view(B, H, D, D)


def lin_apply(q, m, out=None):
    """OP_LIN_APPLY forward: Q M (M float32, used as bf16 by the tensor
    cores), into a new tensor, or added to `out` in place."""
    mb = _bh(m.to(torch.bfloat16))
    if out is None:
        return torch.bmm(_bh(q), mb).view(q.shape)
    _bh(out).baddbmm_(_bh(q), mb)
    return out


def lin_apply_bwd(q, do, m):
    """OP_LIN_APPLY backward: dQ = dO M^T (bf16), dM = Q^T dO (float32)."""
    B, H, _, D = q.shape
    dq = torch.bmm(_bh(do), _bh(m.to(torch.bfloat16)).transpose(1, 2)).view(q.shape)
    return dq, mm32(_bh(q).transpose(1, 2), _bh(do)).view(B, H, D, D)


def lin_state_bwd(k, v, dm):
    """OP_LIN_STATE backward: dK = V dM^T, dV = K dM (dM float32)."""
    dmb = _bh(dm.to(torch.bfloat16))
    dk = torch.bmm(_bh(v), dmb.transpose(1, 2)).view(k.shape)
    return dk, torch.bmm(_bh(k), dmb).view(v.shape)


_TRIL = {}


def _blocks(x, b):
    """(B, H, L, D) -> (B H L/b, b, D), a view."""
    return x.reshape(-1, b, x.shape[-1])


def _masked_scores(qb, kb, b):
    """Diagonal blocks' (Q_i K_i^T) (.) M, bf16 (B H L/b, b, b)."""
    keep = _TRIL.get((b, qb.device))
    if keep is None:
        keep = _TRIL[(b, qb.device)] = torch.ones(b, b, dtype=torch.bool,
                                                  device=qb.device).tril()
    return torch.bmm(qb, kb.transpose(1, 2)).masked_fill_(~keep, 0)


def _prefix_states(kb, vb, nbh, b):
    """Per block i the float32 states K_i^T V_i (B H, L/b, D, D)."""
    D = kb.shape[-1]
    return mm32(kb.transpose(1, 2), vb).view(nbh, -1, D, D)


def lin_intra(q, k, v, causal, b=LIN_BLOCK):
    """OP_LIN_INTRA forward: the chunk onto itself from a zero state.
    Full: Q (K^T V).  Causal (lightning attention's two passes): masked
    diagonal blocks (Q_i K_i^T (.) M) V_i, plus Q_i times the float32 sum
    of the earlier blocks' K_j^T V_j (an exclusive prefix sum over
    blocks)."""
    if not causal:
        return lin_apply(q, lin_state(k, v))
    B, H, L, D = q.shape
    b = min(b, L)
    qb, kb, vb = _blocks(q, b), _blocks(k, b), _blocks(v, b)
    o = torch.bmm(_masked_scores(qb, kb, b), vb)
    kv = _prefix_states(kb, vb, B * H, b).cumsum_(1)
    pre = torch.zeros(B * H, L // b, D, D, dtype=torch.bfloat16, device=q.device)
    pre[:, 1:] = kv[:, :-1]
    o.baddbmm_(qb, pre.view(-1, D, D))
    return o.view(q.shape)


def lin_intra_bwd(q, k, v, do, causal, b=LIN_BLOCK):
    """OP_LIN_INTRA backward: dQ, dK, dV (bf16) of lin_intra.  Full: the
    state recomputed, then apply's and state's backward.  Causal: the
    diagonal blocks' five products (scores, dV, dS, dQ, dK) and, for the
    inter-block part, the block states recomputed, dQ += dO_i P_i^T, dP_i =
    Q_i^T dO_i (float32) and its exclusive suffix sum S_i, dK_i += V_i
    S_i^T, dV_i += K_i S_i (lightning attention's backward)."""
    if not causal:
        dq, dm = lin_apply_bwd(q, do, lin_state(k, v))
        dk, dv = lin_state_bwd(k, v, dm)
        return dq, dk, dv
    B, H, L, D = q.shape
    b = min(b, L)
    qb, kb, vb, dob = _blocks(q, b), _blocks(k, b), _blocks(v, b), _blocks(do, b)
    s = _masked_scores(qb, kb, b)
    dv = torch.bmm(s.transpose(1, 2), dob)
    ds = _masked_scores(dob, vb, b)
    dq = torch.bmm(ds, kb)
    dk = torch.bmm(ds.transpose(1, 2), qb)
    nb = L // b
    kv = _prefix_states(kb, vb, B * H, b).cumsum_(1)
    pre = torch.zeros(B * H, nb, D, D, dtype=torch.bfloat16, device=q.device)
    pre[:, 1:] = kv[:, :-1]
    dq.baddbmm_(dob, pre.view(-1, D, D).transpose(1, 2))
    dp = mm32(qb.transpose(1, 2), dob).view(B * H, nb, D, D).cumsum_(1)
    suf = (dp[:, -1:] - dp).to(torch.bfloat16).view(-1, D, D)
    dk.baddbmm_(vb, suf.transpose(1, 2))
    dv.baddbmm_(kb, suf)
    return dq.view(q.shape), dk.view(k.shape), dv.view(v.shape)


def linear_reference(q, k, v, causal):
    """Whole-sequence linear attention in float32 (B, H, S, D), for autograd."""
    if causal:
        s = torch.matmul(q, k.transpose(-1, -2)).tril()
        return torch.matmul(s, v)
    return torch.matmul(q, torch.matmul(k.transpose(-1, -2), v))


def linear_kinds(q, k, v, do, m, block):
    """(kind, causal, forward call, backward call) of each linear kernel
    kind on these tensors, as tasp-sim's compute.linear_table names them."""
    return [("intra", True, lambda: lin_intra(q, k, v, True, block),
             lambda: lin_intra_bwd(q, k, v, do, True, block)),
            ("intra", False, lambda: lin_intra(q, k, v, False, block),
             lambda: lin_intra_bwd(q, k, v, do, False, block)),
            ("state", False, lambda: lin_state(k, v), lambda: lin_state_bwd(k, v, m)),
            ("apply", False, lambda: lin_apply(q, m), lambda: lin_apply_bwd(q, do, m))]


def time_linear_kinds(out, name, L, heads, dims, block, timer, keys):
    """One record per linear kernel kind, heads and head dim at chunk L:
    timer(call) ms of the forward and backward calls, under `keys`, with
    the fields of a compute.linear_table entry.  A kind that fails (memory)
    is reported and skipped."""
    for H in heads:
        for D in dims:
            q, k, v, do = (bf16(1, H, L, D) for _ in range(4))
            m = lin_state(k, v)
            kinds = linear_kinds(q, k, v, do, m, block)
            for kind, causal, fwd, bwd in kinds:
                try:
                    fms, bms = timer(fwd), timer(bwd)
                except RuntimeError as e:  # memory
                    print(f"calibrate: {name} {kind} H={H} D={D} L={L} failed: {e}", flush=True)
                    torch.cuda.empty_cache()
                    continue
                out.write(name, {"kind": kind, "batch": 1, "heads": H, "head_dim": D,
                                 "tokens": L, "causal": causal, "block": block,
                                 "decay": False, keys[0]: fms, keys[1]: bms})
            del q, k, v, do, m, kinds
            torch.cuda.empty_cache()


def measure_linear(out, n, heads, dims, chunks, iters, block):
    """Each linear kernel kind on this GPU alone, forward and backward,
    timed apart: intra (causal and full), state and apply (no mask),
    batch 1.  Records carry exactly the fields of a topology's
    compute.linear_table entry."""
    name = f"linear-n{n}.jsonl"
    t0 = time.time()
    for L in chunks:
        time_linear_kinds(out, name, L, heads, dims, block,
                          lambda f: timed(f, iters, 2)[0], ("fwd_ms", "bwd_ms"))
        print(f"calibrate: linear chunk {L} done at {time.time() - t0:.0f} s", flush=True)


class LinearPass:
    """Common parts of the linear-attention passes: rank r holds tokens
    [r c, (r+1) c) (both masks), Q and the packed KV (2, B, H, c, D) bf16;
    `acc` is the output after run(), `dq` after run_backward()."""

    attention = "linear"

    def __init__(self, causal, n, rank, B, H, D, c, comm):
        self.causal, self.n, self.rank, self.comm = causal, n, rank, comm
        self.B, self.H, self.D, self.c = B, H, D, c
        self.q = bf16(B, H, c, D)
        self.kv = bf16(2, B, H, c, D)
        self.k, self.v = self.kv[0], self.kv[1]

    def state_buf(self):
        return torch.zeros(self.B, self.H, self.D, self.D, dtype=torch.float32, device=DEV)

    def send(self, t, peer):
        return [dist.isend(t, peer)] if self.comm and not LOCAL_COMM else []

    def recv(self, t, peer):
        """Receive into t; the compute stream waits for it."""
        if self.comm and not LOCAL_COMM:  # emulated: t is already there
            dist.irecv(t, peer).wait()

    def prepare_backward(self, dout):
        self.run()
        self.dout = dout


class Lasp(LinearPass):
    """LASP (arXiv 2404.02882; OpenNLPLab/LASP lasp_naive.py), as tasp-sim's
    src/sched/lasp.c models it.  Every message is one float32 B x H x D x D
    state, sent with dist.isend / dist.irecv (point to point), one hop
    after another.
    Causal forward, rank r: M_r = K_r^T V_r, then the intra-chunk output
    (both before any communication); r > 0: receive M_{1:r-1} from r-1,
    O_r += Q_r M_{1:r-1}; r < n-1: M_{1:r} = M_{1:r-1} + M_r (r = 0: M_0
    itself) sent to r+1.
    Causal backward, rank r: r > 0: dQ_r = dO_r M_{1:r-1}^T (cached) and
    dM_r = Q_r^T dO_r; the intra-chunk backward; then the chain the other
    way: r < n-1: receive dM_{r+1:n} from r+1, dK_r += V_r dM^T, dV_r += K_r
    dM; r > 0: dM_{r:n} (r = n-1: dM_r itself) sent to r-1.
    Bidirectional, forward (backward): every rank M_r (backward: dQ_r and
    dM_r from the cached total); lap 1: the running sum goes 0 -> 1 -> ...
    -> n-1, each rank adding its own; rank n-1 sends the total to 0 and
    lap 2 hands it on 0 -> 1 -> ... -> n-2 (a rank forwards it before
    using it); each rank then applies the total (backward: dK, dV from the
    total dM).  2(n-1) serial hops."""

    comm_api = "p2p"

    def __init__(self, *a):
        super().__init__(*a)
        self.pre = self.state_buf()    # M_{1:r-1} (or the total), received
        self.suf = self.state_buf()    # dM_{r+1:n} (or a running sum), received

    def chain_sum(self, own, buf):
        """Bidirectional: the two laps; returns the total of every rank's
        `own` (buf receives)."""
        n, r = self.n, self.rank
        if n == 1:
            return own
        reqs = []
        if r > 0:
            self.recv(buf, r - 1)
            part = buf + own
        else:
            part = own
        reqs += self.send(part, (r + 1) % n)
        if r == n - 1:
            total = part
        else:
            self.recv(buf, (r - 1) % n)
            total = buf
            if r + 1 < n - 1:
                reqs += self.send(total, r + 1)
        wait_all(reqs)
        return total

    def run(self):
        n, r = self.n, self.rank
        m = lin_state(self.k, self.v)
        if not self.causal:
            self.total = self.chain_sum(m, self.pre)
            self.acc = lin_apply(self.q, self.total)
            return
        self.acc = lin_intra(self.q, self.k, self.v, True)
        reqs = []
        if r > 0:
            self.recv(self.pre, r - 1)
            lin_apply(self.q, self.pre, self.acc)
        if r + 1 < n:
            tot = self.pre + m if r > 0 else m  # M_{1:r}
            reqs = self.send(tot, r + 1)
        wait_all(reqs)

    def run_backward(self):
        n, r = self.n, self.rank
        if not self.causal:
            self.dq, dm = lin_apply_bwd(self.q, self.dout, self.total)
            total = self.chain_sum(dm, self.suf)
            return lin_state_bwd(self.k, self.v, total)
        if r > 0:
            dqa, dm = lin_apply_bwd(self.q, self.dout, self.pre)
        self.dq, dk, dv = lin_intra_bwd(self.q, self.k, self.v, self.dout, True)
        if r > 0:
            self.dq += dqa
        reqs = []
        if r + 1 < n:
            self.recv(self.suf, r + 1)
            dks, dvs = lin_state_bwd(self.k, self.v, self.suf)
            dk += dks
            dv += dvs
        if r > 0:
            tot = self.suf + dm if r + 1 < n else dm  # dM_{r:n}
            reqs = self.send(tot, r - 1)
        wait_all(reqs)
        return dk, dv


class Lasp2(LinearPass):
    """LASP-2 (arXiv 2502.07563 Algorithms 1-4; OpenSparseLLMs/Linear-MoE),
    as tasp-sim's src/sched/lasp2.c models it.
    Forward, rank t: M_t = K_t^T V_t (float32); ONE all_gather_into_tensor
    of the states (n, B, H, D, D), issued asynchronously; causal: the
    intra-chunk output computed while it runs; wait; causal t > 0: the
    prefix M_{1:t-1} summed from the gathered states (a sum only past one
    state), O_t += Q_t M_{1:t-1}; bidirectional: the sum of all n states,
    O_t = Q_t M.
    Backward: dQ_t = dO_t M^T from the cached prefix (total) and dM_t =
    Q_t^T dO_t (causal: t > 0 only; rank 0 sends zeros, its dM is nobody's
    suffix); ONE all_gather of the dM (async); causal: the intra-chunk
    backward meanwhile; wait; the suffix dM_{t+1:n} (bidirectional: all of
    them) summed; dK_t += V_t dM^T, dV_t += K_t dM."""

    comm_api = "all_gather"

    def __init__(self, *a):
        super().__init__(*a)
        self.glob = torch.zeros(self.n, self.B, self.H, self.D, self.D,
                                dtype=torch.float32, device=DEV)

    def gather(self, m):
        if not self.comm:
            return None
        if LOCAL_COMM:
            self.glob.copy_(m.unsqueeze(0).expand_as(self.glob))
            return None
        return dist.all_gather_into_tensor(self.glob, m.contiguous(), async_op=True)

    def total(self, lo, hi):
        """The sum of gathered states lo..hi-1 (None if none)."""
        if hi - lo <= 0:
            return None
        return self.glob[lo] if hi - lo == 1 else self.glob[lo:hi].sum(0)

    def run(self):
        n, r = self.n, self.rank
        m = lin_state(self.k, self.v)
        work = self.gather(m)
        if self.causal:
            self.acc = lin_intra(self.q, self.k, self.v, True)
        if work is not None:
            work.wait()
        if self.causal:
            self.pre = self.total(0, r)
            if self.pre is not None:
                self.pre = self.pre.clone()  # kept for backward: glob is reused
                lin_apply(self.q, self.pre, self.acc)
        else:
            self.pre = self.total(0, n)
            self.acc = lin_apply(self.q, self.pre)

    def run_backward(self):
        n, r = self.n, self.rank
        dqa = None
        if self.pre is not None:
            dqa, dm = lin_apply_bwd(self.q, self.dout, self.pre)
        else:
            dm = self.state_buf()
        work = self.gather(dm)
        if self.causal:
            self.dq, dk, dv = lin_intra_bwd(self.q, self.k, self.v, self.dout, True)
            if dqa is not None:
                self.dq += dqa
        else:
            self.dq, dk, dv = dqa, None, None
        if work is not None:
            work.wait()
        suf = self.total(r + 1, n) if self.causal else self.total(0, n)
        if suf is not None:
            dks, dvs = lin_state_bwd(self.k, self.v, suf)
            if dk is None:
                dk, dv = dks, dvs
            else:
                dk += dks
                dv += dvs
        return dk, dv


class LinRing(LinearPass):
    """Ring on linear-attention layers, as the LASP papers compare it and
    tasp-sim's src/sched/ring.c models it: the KV travels exactly as in
    the softmax ring (Pass): step t, one batch_isend_irecv of the packed KV
    (2, B, H, c, D) bf16 to r+1, from r-1, while the step's kernels run on
    the KV held.  Step kernels: own chunk (t = 0): one intra-chunk kernel
    (causal or full); another chunk (bidirectional, or causal from an
    earlier rank; later ones skipped): the right product, M = K_j^T V_j
    (float32, kept for backward) then O += Q M.
    Backward: KV moves again the same way; per step, own chunk: the
    intra-chunk backward; another needed chunk: dQ += dO M^T, dM = Q^T dO
    (apply's backward), then dK_j = V_j dM^T, dV_j = K_j dM (state's);
    the float32 dK/dV accumulator (2, B, H, c, D) of the KV held gets them
    plus what its earlier holders added and moves one hop after the step's
    kernels, n hops in all, the last one home."""

    comm_api = "batch_p2p"

    def exchange(self, src, dst):
        if not self.comm:
            return []
        n, r = self.n, self.rank
        return p2p(None, [(src, (r + 1) % n)], [(dst, (r - 1) % n)])

    def needed(self, t):
        """'own', 'other' or None: what step t computes on the KV held."""
        n, r = self.n, self.rank
        src = (r - t) % n
        if src == r:
            return "own"
        return "other" if not self.causal or src < r else None

    def run(self):
        n = self.n
        cur = self.kv
        self.states = {}
        self.bufs = [torch.empty_like(self.kv), torch.empty_like(self.kv)]
        for t in range(n):
            reqs, recv = [], None
            if t + 1 < n:
                recv = self.bufs[t % 2]
                reqs = self.exchange(cur, recv)
            what = self.needed(t)
            if what == "own":
                self.acc = lin_intra(self.q, cur[0], cur[1], self.causal)
            elif what == "other":
                m = self.states[t] = lin_state(cur[0], cur[1])
                lin_apply(self.q, m, self.acc)
            wait_all(reqs)
            if recv is not None and self.comm:
                cur = recv
        self.bufs = cur = recv = None

    def run_backward(self):
        n = self.n
        cur, dreqs = self.kv, []
        self.bufs = [torch.empty_like(self.kv), torch.empty_like(self.kv)]
        self.dacc = [torch.zeros(self.kv.shape, dtype=torch.float32, device=DEV)
                     for _ in range(3)]
        arrived = self.dacc[2]
        for t in range(n):
            reqs, recv = [], None
            if t + 1 < n:
                recv = self.bufs[t % 2]
                reqs = self.exchange(cur, recv)
            acc = self.dacc[t % 2]
            acc.zero_()
            what = self.needed(t)
            if what == "own":
                self.dq, dk, dv = lin_intra_bwd(self.q, cur[0], cur[1], self.dout, self.causal)
            elif what == "other":
                dq, dm = lin_apply_bwd(self.q, self.dout, self.states[t])
                self.dq += dq
                dk, dv = lin_state_bwd(cur[0], cur[1], dm)
            if what is not None:
                acc[0] += dk
                acc[1] += dv
            wait_all(dreqs)
            if t > 0 and self.comm:
                acc += arrived
            dreqs = self.exchange(acc, arrived)
            wait_all(reqs)
            if recv is not None and self.comm:
                cur = recv
        wait_all(dreqs)
        dkv = arrived if self.comm else self.dacc[(n - 1) % 2]
        self.bufs = self.dacc = cur = recv = acc = arrived = None
        dkv = dkv.to(torch.bfloat16)  # bf16 results, as the other programs return
        return dkv[0], dkv[1]


LINEAR_SCHEDULES = [("lasp", False), ("lasp", True), ("lasp2", False), ("lasp2", True),
                    ("ring", False), ("ring", True)]
LINEAR_CLASSES = {"lasp": Lasp, "lasp2": Lasp2, "ring": LinRing}


# ----------------------------------------------- linear: GPU time, overlap

def gpu_ms(fn, reps=10):
    """GPU milliseconds per call of fn with every call queued behind a
    sleeping GPU (torch.cuda._sleep), so that no launch gap is counted:
    the kernels' own time, whatever the host takes to issue them."""
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # ~100 ms of GPU time: longer than the issuing
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / reps


def mem_ops(B, H, D, L):
    """The memory-bound steps of the linear passes' backward (LinRing,
    Lasp, Lasp2 run_backward), as (op, bytes moved, fn): zero_ of the float32
    dK/dV accumulator (2, B, H, L, D); acc[0] += dk (float32 += bf16, one
    of K, V); acc += arrived (float32 + float32, both halves); dq += dq
    (bf16)."""
    acc = torch.zeros(2, B, H, L, D, dtype=torch.float32, device=DEV)
    arr = torch.zeros_like(acc)
    g = bf16(B, H, L, D)
    dq = bf16(B, H, L, D)
    e = B * H * L * D
    return [("zero_acc", 8 * e, lambda: acc.zero_()),
            ("acc_add_bf16", 10 * e, lambda: acc[0].add_(g)),
            ("add_arrived", 24 * e, lambda: acc.add_(arr)),
            ("add_dq", 6 * e, lambda: dq.add_(g))]


def measure_linear_gpu(out, n, heads, dims, chunks, block, B=1, H=32, D=128):
    """Each linear kernel kind's GPU time alone (launch gaps hidden: gpu_ms),
    forward and backward, over the shapes of the linear part: the fields
    of a compute.linear_table entry with gpu_fwd_ms / gpu_bwd_ms.  Then the
    passes' memory-bound steps (mem_ops) at B, H, D, by bytes moved."""
    name = f"lingpu-n{n}.jsonl"
    for L in chunks:
        time_linear_kinds(out, name, L, heads, dims, block, gpu_ms,
                          ("gpu_fwd_ms", "gpu_bwd_ms"))
        ops = mem_ops(B, H, D, L)
        for op, nbytes, fn in ops:
            out.write(name, {"part": "mem", "op": op, "B": B, "H": H, "D": D, "tokens": L,
                             "bytes": nbytes, "gpu_ms": gpu_ms(fn)})
        del ops
        torch.cuda.empty_cache()


def measure_overlap(out, n, rank, B, H, D, chunks, iters):
    """Two GPUs: a hop (one batch_isend_irecv each way, as LinRing sends)
    alone, a kernel alone, and both issued as the passes issue them (hop
    first).  The hop's end is taken on a side stream that waits for it, the
    kernel's on the compute stream, both from one start event, so that the
    slowdown of each while the other runs can be told apart.  Hops: the
    packed bf16 KV (2, B, H, L, D) and the float32 dK/dV accumulator of
    the same shape; kernels: intra causal and full forward, intra causal
    backward, and the accumulator's zero_ + two adds (memory-bound)."""
    name = f"overlap-n{n}.jsonl"
    peer = 1 - rank
    side = torch.cuda.Stream()
    for L in chunks:
        q, do = bf16(B, H, L, D), bf16(B, H, L, D)
        kv = bf16(2, B, H, L, D)
        acc = torch.zeros(2, B, H, L, D, dtype=torch.float32, device=DEV)
        g = bf16(B, H, L, D)
        bufs = {"kv_bf16": (kv, torch.empty_like(kv)),
                "acc_f32": (acc, torch.empty_like(acc))}
        kerns = {"intra_causal_fwd": lambda: lin_intra(q, kv[0], kv[1], True),
                 "intra_full_fwd": lambda: lin_intra(q, kv[0], kv[1], False),
                 "intra_causal_bwd": lambda: lin_intra_bwd(q, kv[0], kv[1], do, True),
                 "acc_zero_add": lambda: (acc.zero_(), acc[0].add_(g), acc[1].add_(g))}
        for hop_name, (src, dst) in bufs.items():
            for kname, kern in kerns.items():
                rows = []
                for it in range(iters + 2):
                    res = {}
                    for what in ("hop", "kernel", "both"):
                        dist.barrier()
                        torch.cuda.synchronize()
                        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
                        ev[0].record()
                        reqs = []
                        if what != "kernel":
                            reqs = p2p(None, [(src, peer)], [(dst, peer)])
                            side.wait_stream(torch.cuda.current_stream())
                            with torch.cuda.stream(side):
                                wait_all(reqs)
                                ev[1].record(side)
                        if what != "hop":
                            kern()
                        ev[2].record()
                        torch.cuda.synchronize()
                        h = ev[0].elapsed_time(ev[1]) if what != "kernel" else 0.0
                        k = ev[0].elapsed_time(ev[2]) if what != "hop" else 0.0
                        t = torch.tensor([h, k], device=DEV)
                        dist.all_reduce(t, op=dist.ReduceOp.MAX)
                        res[what] = t.tolist()
                    if it >= 2:
                        rows.append(res)
                med = lambda w, i: statistics.median(r[w][i] for r in rows)  # noqa: E731
                out.write(name, {"part": "overlap", "n": n, "tokens": L, "B": B, "H": H,
                                 "D": D, "hop": hop_name, "hop_bytes": src.numel() *
                                 src.element_size(), "kernel": kname,
                                 "hop_ms": med("hop", 0), "kernel_ms": med("kernel", 1),
                                 "both_hop_ms": med("both", 0),
                                 "both_kernel_ms": med("both", 1)})
        del q, do, kv, acc, g, bufs, kerns
        torch.cuda.empty_cache()


# ----------------------------------------------------------------- host

def host_us(fn, busy, reps=10):
    """Host microseconds per call of fn (wall clock).  busy: every call is
    queued behind a sleeping GPU, so none waits for it (the pure issue
    cost); idle: the GPU is synchronised before each call, as when a short
    pass outruns its kernels.  Also the GPU time per call (events around
    the calls, busy only: launch gaps hidden), microseconds."""
    fn()
    torch.cuda.synchronize()
    if busy:
        torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time at 2 GHz
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        host = (time.perf_counter() - t0) / reps * 1e6
        b.record()
        torch.cuda.synchronize()
        return host, a.elapsed_time(b) / reps * 1e3
    total = 0.0
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        total += time.perf_counter() - t0
    torch.cuda.synchronize()
    return total / reps * 1e6, None


def both_ranks(x):
    """[rank 0's x, rank 1's x, ...] (every rank calls this)."""
    t = torch.tensor([x], dtype=torch.float64, device="cuda")
    outs = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(outs, t)
    return [o.item() for o in outs]


def p2p_batch_ops(n, rank, k, bufs, rbufs):
    """k point-to-point ops of one batch_isend_irecv call on this rank,
    matched on every rank.  2 GPUs: rank 0 alternates send, receive, ...
    and rank 1 receive, send, ...; more GPUs: k/2 sends to the next rank
    and k/2 receives from the previous (k even)."""
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    ops = []
    for i in range(k):
        send = (i % 2 == 0) == (rank == 0) if n == 2 else i < k // 2
        if send:
            ops.append(dist.P2POp(dist.isend, bufs[i], nxt))
        else:
            ops.append(dist.P2POp(dist.irecv, rbufs[i], prv))
    return ops


def measure_host(out, n, rank, B, H, D, chunks=(1536, 3072, 12288), lin_chunks=(2048, 8192)):
    """Host cost of each operation the pass programs issue, one at a time
    (records "op", "host_us" GPU busy, "host_idle_us" GPU idle, "gpu_us"),
    and the host time to issue each whole pass program with the GPU busy
    ("op": "pass"), which the per-operation costs must add up to."""
    name = f"host-n{n}.jsonl"

    def rec(op, fn, **kw):
        try:  # an op failing fails on every rank alike: the others still run
            hb, gpu = host_us(fn, True)
            hi, _ = host_us(fn, False)
        except (RuntimeError, TypeError, ValueError) as e:
            print(f"calibrate: host {op} {kw} failed: {e}", flush=True)
            return
        hb, hi = max(both_ranks(hb)), max(both_ranks(hi))
        out.write(name, {"part": "host", "n": n, "op": op, "B": B, "H": H, "D": D, **kw,
                         "host_us": hb, "host_idle_us": hi, "gpu_us": gpu})

    for c in chunks:
        q = bf16(B, c, H, D)
        kv = bf16(B, c, 2, H, D)
        k, v = kv[:, :, 0], kv[:, :, 1]
        o, lse = flash(q, k, v, False)
        acc = torch.zeros(B, c, H, D, dtype=torch.float32, device=DEV)
        lacc = torch.zeros(B, c, H, 1, dtype=torch.float32, device=DEV)
        rec("flash_fwd", lambda: flash(q, k, v, False), sq=c, sk=c)
        rec("flash_fwd_causal", lambda: flash(q, k, v, True), sq=c, sk=c)
        rec("copy_out", lambda: acc.copy_(o), sq=c)
        rec("copy_lse", lambda: lacc.copy_(lse.transpose(1, 2).unsqueeze(-1)), sq=c)
        rec("merge", lambda: merge(acc, lacc, o, lse), sq=c)
        h = c // 2
        rec("cat2", lambda: torch.cat([kv[:, :h], kv[:, h:]], dim=1), tokens=c, segs=2)
        qs = [(i * c // 4, (i + 1) * c // 4) for i in range(4)]
        rec("cat4", lambda: torch.cat([kv[:, a:b] for a, b in qs], dim=1), tokens=c, segs=4)
        out_b = o.contiguous()
        lse_b = lse.contiguous()
        rec("flash_bwd", lambda: flash_bwd(q, q, k, v, out_b, lse_b, False), sq=c, sk=c)
        dq = torch.zeros_like(acc)
        dacc = torch.zeros(kv.shape, dtype=torch.float32, device=DEV)
        arrived = torch.zeros_like(dacc)
        rec("add_dq", lambda: dq.__iadd__(q), sq=c)
        rec("add_dk", lambda: dacc[:, :, 0].__iadd__(k), tokens=c)
        rec("zero_acc", lambda: dacc.zero_(), tokens=c)
        rec("add_arrived", lambda: dacc.__iadd__(arrived), tokens=c)
        del q, kv, k, v, o, lse, acc, lacc, out_b, lse_b, dq, dacc, arrived
        torch.cuda.empty_cache()
    if n > 1:
        # the calls that move data, with small messages (host cost does not
        # depend on size): batch_isend_irecv of k ops, issued alone and
        # issued then waited on; single isend / irecv + wait; all_gather
        bufs = [torch.zeros(4096, dtype=torch.bfloat16, device="cuda") for _ in range(8)]
        rbufs = [torch.empty_like(b) for b in bufs]
        for k in range(1, 9):
            if n > 2 and k % 2:
                continue
            works = []

            def issue():
                works.extend(dist.batch_isend_irecv(p2p_batch_ops(n, rank, k, bufs, rbufs)))

            def issue_wait():
                for w in dist.batch_isend_irecv(p2p_batch_ops(n, rank, k, bufs, rbufs)):
                    w.wait()
            dist.barrier()
            once = dist.batch_isend_irecv(p2p_batch_ops(n, rank, k, bufs, rbufs))
            nworks = len(once)
            wait_all(once)
            rec("p2p_batch", issue, ops=k, works=nworks)
            wait_all(works)
            works.clear()
            dist.barrier()
            rec("p2p_batch_wait", issue_wait, ops=k, works=nworks)
            dist.barrier()

        def chain():  # LASP's hop: rank r > 0 receives then waits, r < n-1 sends
            if rank > 0:
                dist.irecv(rbufs[0], rank - 1).wait()
            if rank + 1 < n:
                works.append(dist.isend(bufs[0], rank + 1))
        dist.barrier()
        hb, _ = host_us(chain, True)
        hi, _ = host_us(chain, False)
        wait_all(works)
        works.clear()
        out.write(name, {"part": "host", "n": n, "op": "isend_or_irecv_wait",
                         "host_us_by_rank": both_ranks(hb), "host_idle_us_by_rank": both_ranks(hi)})
        glob = torch.zeros(n * 4096, dtype=torch.bfloat16, device="cuda")
        dist.barrier()
        rec("all_gather_wait",
            lambda: dist.all_gather_into_tensor(glob, bufs[0], async_op=True).wait())
        torch.cuda.synchronize()
        dist.barrier()
    for L in lin_chunks:
        q, k, v, do = (bf16(B, H, L, D) for _ in range(4))
        m = lin_state(k, v)
        o = lin_apply(q, m)
        glob = torch.zeros(max(n, 2), B, H, D, D, dtype=torch.float32, device=DEV)
        for op, fn in [("lin_intra_causal", lambda: lin_intra(q, k, v, True)),
                       ("lin_intra_full", lambda: lin_intra(q, k, v, False)),
                       ("lin_state", lambda: lin_state(k, v)),
                       ("lin_apply", lambda: lin_apply(q, m)),
                       ("lin_apply_into", lambda: lin_apply(q, m, o)),
                       ("lin_intra_causal_bwd", lambda: lin_intra_bwd(q, k, v, do, True)),
                       ("lin_intra_full_bwd", lambda: lin_intra_bwd(q, k, v, do, False)),
                       ("lin_state_bwd", lambda: lin_state_bwd(k, v, m)),
                       ("lin_apply_bwd", lambda: lin_apply_bwd(q, do, m)),
                       ("state_add", lambda: m + m),
                       ("state_sum", lambda: glob.sum(0))]:
            rec(op, fn, tokens=L)
        del q, k, v, do, m, o, glob
        torch.cuda.empty_cache()
    if n == 2:
        # a linear Ring step: the packed KV hop alone, the own chunk's
        # intra kernel alone, and both as the pass issues them (hop first)
        for L in (16384, 65536):
            kv = bf16(2, B, H, L, D)
            rkv = torch.empty_like(kv)
            q = bf16(B, H, L, D)
            hop = lambda: wait_all(p2p(None, [(kv, 1 - rank)], [(rkv, 1 - rank)]))  # noqa: E731
            for causal in (True, False):
                kern = lambda: lin_intra(q, kv[0], kv[1], causal)  # noqa: E731

                def both():
                    reqs = p2p(None, [(kv, 1 - rank)], [(rkv, 1 - rank)])
                    kern()
                    wait_all(reqs)
                res = {}
                for what, fn in [("hop", hop), ("kernel", kern), ("both", both)]:
                    res[what] = timed(fn, 5, 2)[0]
                out.write(name, {"part": "host", "n": n, "op": "lin_ring_step_overlap",
                                 "tokens": L, "causal": causal, "B": B, "H": H, "D": D,
                                 "hop_ms": res["hop"], "kernel_ms": res["kernel"],
                                 "both_ms": res["both"]})
            del kv, rkv, q
            torch.cuda.empty_cache()
    # whole pass programs: host time to issue one pass, GPU busy
    progs = [(s, cz, "softmax", c) for c in chunks[:2] for s, cz in SCHEDULES[:5]]
    progs += [(s, cz, "linear", c) for c in lin_chunks for s, cz in LINEAR_SCHEDULES]
    for sched, causal, att, c in progs:
        for comm in (True, False):
            if att == "linear":
                p = LINEAR_CLASSES[sched](causal, n, rank, B, H, D, c, comm)
            else:
                p = make_pass(sched, causal, n, rank, B, H, D, c, comm)
            p.prepare_backward(torch.randn_like(p.q))
            for pas, fn in [("fwd", p.run), ("bwd", p.run_backward)]:
                dist.barrier()
                hb, gpu = host_us(fn, True, reps=3)
                hi, _ = host_us(fn, False, reps=3)
                out.write(name, {"part": "host", "n": n, "op": "pass", "attention": att,
                                 "sched": sched, "mask": "causal" if causal else "full",
                                 "pass": pas, "comm": comm, "B": B, "H": H, "D": D,
                                 "tokens_per_gpu": c, "host_us_by_rank": both_ranks(hb),
                                 "host_idle_us_by_rank": both_ranks(hi), "gpu_us": gpu})
            del p
            torch.cuda.synchronize()
        torch.cuda.empty_cache()


def judge(errs, why, label, reference, rank, stop):
    """One schedule's check: the largest error of output, dQ, dK and dV over
    the ranks must be within 2e-2 of the reference's largest magnitude (NaN
    fails too).  A failure stops the run, or with --skip-failed is reported.
    Returns (passed, the errors reduced over the ranks)."""
    err = torch.tensor(errs, device=DEV)
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    errs = err.tolist()
    for what, e in zip(("output", "dQ", "dK", "dV"), errs):
        if not e <= 2e-2:
            msg = f"calibrate: {label} {what} differs from {reference} by {e:.3g}{why}"
            if stop:
                raise SystemExit(msg)
            if rank == 0:
                print(msg + "; not timed", flush=True)
            return False, errs
    return True, errs


def check_linear_passes(n, rank, B, H, D, c, schedules=LINEAR_SCHEDULES, stop=True):
    """As check_passes, for the linear-attention programs: each one's
    output, dQ, dK and dV against PyTorch autograd through whole-sequence
    linear attention (linear_reference, float32, from the same bf16
    inputs) on one GPU.  Same failure rule (error above 2e-2 relative to
    the reference's largest magnitude, or an exception)."""
    g = torch.Generator(device=DEV).manual_seed(1234)
    S = n * c
    # scaled so that outputs stay O(1)-ish: randn / sqrt(D) per factor
    q, k, v, dout = (torch.randn(B, H, S, D, device=DEV, generator=g).div(D ** 0.5)
                     .to(torch.bfloat16) for _ in range(4))
    worst, failed = {}, []
    sl = slice(rank * c, (rank + 1) * c)
    for sched, causal in schedules:
        label = f"{sched} {'causal' if causal else 'full'}"
        qr, kr, vr = (x.float().requires_grad_() for x in (q, k, v))
        ref = linear_reference(qr, kr, vr, causal)
        ref.backward(dout.float())
        wants = [ref.detach()[:, :, sl], qr.grad[:, :, sl], kr.grad[:, :, sl],
                 vr.grad[:, :, sl]]
        try:
            p = LINEAR_CLASSES[sched](causal, n, rank, B, H, D, c, True)
            p.q.copy_(q[:, :, sl])
            p.k.copy_(k[:, :, sl])
            p.v.copy_(v[:, :, sl])
            p.prepare_backward(dout[:, :, sl].contiguous())
            dk, dv = p.run_backward()
            gots = [p.acc, p.dq, dk, dv]
            errs = [((got.float() - want).abs().max() / want.abs().max()).item()
                    for got, want in zip(gots, wants)]
            why = ""
        except (RuntimeError, ValueError, TypeError) as e:
            errs, why = [float("inf")] * 4, f" ({type(e).__name__}: {e})"
        p = None
        ok, errs = judge(errs, why, f"linear {label}", "reference linear attention", rank, stop)
        if ok:
            worst[label] = max(worst.get(label, 0.0), *errs)
        else:
            failed.append((sched, causal))
    if rank == 0:
        print("calibrate: linear check errors " + json.dumps(
            {k: round(v, 5) for k, v in worst.items()}), flush=True)
    return worst, failed


def usp_degree(sched):
    """The Ulysses degree u of a USP schedule name "usp-uU", else None."""
    return int(sched[5:]) if sched.startswith("usp-u") else None


def inner_size(sched):
    """The inner ring's size w of a double-ring schedule name
    "double-ring-wW", else None."""
    return int(sched[13:]) if sched.startswith("double-ring-w") else None


def sched_fields(sched, n):
    """A record's schedule fields: USP as "usp" with its two degrees, the
    double ring as "double-ring" with its inner ring's size."""
    w = inner_size(sched)
    if w is not None:
        return {"sched": "double-ring", "double_ring_inner": w}
    u = usp_degree(sched)
    if u is None:
        return {"sched": sched}
    return {"sched": "usp", "usp_ulysses": u, "usp_ring": n // u}


def expand_double_ring(schedules, n, w=None):
    """Each ("double-ring", causal) as "double-ring-wW": inner size w, else
    layouts.double_ring_inner_default(n) (exit 2 naming
    --double-ring-inner where w does not divide n)."""
    w = w or layouts.double_ring_inner_default(n)
    if n % w:
        print(f"calibrate: --double-ring-inner {w} does not divide the {n} ranks",
              file=sys.stderr)
        raise SystemExit(2)
    return [(f"double-ring-w{w}", c) if s == "double-ring" else (s, c) for s, c in schedules]


def expand_usp(schedules, n, H, degrees=None):
    """Each ("usp", causal) as one schedule per Ulysses degree u ("usp-uU"):
    degrees, else every u dividing both n and the heads, largest first
    (n = 2: u = 2, a ring of one; u = 1, no all-to-all)."""
    us = degrees or [u for u in range(n, 0, -1) if n % u == 0 and H % u == 0]
    out = []
    for s, causal in schedules:
        out += [(f"usp-u{u}", causal) for u in us] if s == "usp" else [(s, causal)]
    return out


def token_index(sched, causal, n, rank, c):
    """The global tokens a rank holds, in its local order."""
    if sched == "stripe":
        return layouts.stripe_tokens(rank, n, c)
    return [t for a, b in token_ranges(sched, causal, n, rank, c) for t in range(a, b)]


def token_ranges(sched, causal, n, rank, c):
    """Global token ranges a rank holds, in its local order (stripe: see
    token_index)."""
    u = usp_degree(sched)
    if u is not None and causal:
        # ring rank g: zigzag chunks g and 2r-1-g of u c / 2 tokens, cut into
        # u pieces of c; piece i on the group's i-th rank
        r, g, i = n // u, rank // u, rank % u
        h = u * c // 2
        pair = [(g * h, (g + 1) * h), ((2 * r - 1 - g) * h, (2 * r - g) * h)]
        out, off = [], 0
        for a, b in pair:
            lo, hi = max(i * c, off), min((i + 1) * c, off + b - a)
            if lo < hi:
                out.append((a + lo - off, a + hi - off))
            off += b - a
        return out
    if sched in ("ring", "ulysses") or u is not None or not causal:
        return [(rank * c, (rank + 1) * c)]
    h = c // 2
    return [(rank * h, (rank + 1) * h), ((2 * n - 1 - rank) * h, (2 * n - rank) * h)]


SCHEDULES = [("ring", False), ("ring", True), ("zigzag", True), ("tasp", False),
             ("tasp", True), ("ulysses", False), ("ulysses", True), ("allgather", False),
             ("allgather", True), ("tokenring", False), ("tokenring", True), ("usp", False),
             ("usp", True), ("stripe", True), ("double-ring", True)]
PASS_CLASSES = {"ulysses": Ulysses, "allgather": AllGather, "tokenring": TokenRing,
                "stripe": Stripe}


def program_class(sched):
    if sched.startswith("usp"):
        return USP
    if sched.startswith("double-ring"):
        return DoubleRing
    return PASS_CLASSES.get(sched, Pass)


def make_pass(sched, causal, n, rank, B, H, D, c, comm):
    """The program of a softmax schedule ("usp-uU": USP of Ulysses degree
    U; plain "usp": U = n; "double-ring-wW": inner rings of W, plain
    "double-ring": the default)."""
    if sched.startswith("usp"):
        return USP(causal, n, rank, B, H, D, c, comm, usp_degree(sched) or n)
    if sched.startswith("double-ring"):
        w = inner_size(sched) or layouts.double_ring_inner_default(n)
        return DoubleRing(causal, n, rank, B, H, D, c, comm, w)
    cls = PASS_CLASSES.get(sched)
    if cls is None:
        return Pass(sched, causal, n, rank, B, H, D, c, comm)
    return cls(causal, n, rank, B, H, D, c, comm)


def check_passes(n, rank, B, H, D, c, schedules=SCHEDULES, stop=True):
    """Each pass's output, and each backward's dQ, dK and dV, equal
    single-GPU attention over the whole sequence (PyTorch autograd): the
    measured programs are correct implementations.  Returns the largest
    error relative to the reference's largest magnitude, per schedule, and
    the schedules that failed (an error above 2e-2, or an exception).  A
    failure ends the run (stop) or only drops that schedule."""
    g = torch.Generator(device=DEV).manual_seed(1234)
    S = n * c
    q = torch.randn(B, S, H, D, dtype=torch.bfloat16, device=DEV, generator=g)
    kv = torch.randn(B, S, 2, H, D, dtype=torch.bfloat16, device=DEV, generator=g)
    dout = torch.randn(B, S, H, D, dtype=torch.bfloat16, device=DEV, generator=g)
    worst, failed = {}, []
    for sched, causal in schedules:
        label = f"{sched} {'causal' if causal else 'full'}"
        qr, kr, vr = (x.detach().clone().requires_grad_() for x in (q, kv[:, :, 0], kv[:, :, 1]))
        ref = F.scaled_dot_product_attention(qr.transpose(1, 2), kr.transpose(1, 2),
                                             vr.transpose(1, 2), is_causal=causal)
        ref.backward(dout.transpose(1, 2))
        ref = ref.transpose(1, 2)
        idx = torch.tensor(token_index(sched, causal, n, rank, c), device=DEV)
        local = lambda x: x.index_select(1, idx)  # noqa: E731
        wants = [local(ref), local(qr.grad), local(kr.grad), local(vr.grad)]
        try:
            p = make_pass(sched, causal, n, rank, B, H, D, c, True)
            p.q.copy_(local(q))
            p.kv.copy_(local(kv))
            p.prepare_backward(local(dout))
            dk, dv = p.run_backward()
            gots = [p.acc, p.dq, dk, dv]
            errs = [((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
                    for got, want in zip(gots, wants)]
            why = ""
        except (RuntimeError, ValueError) as e:  # both ranks meet the same shapes
            errs, why = [float("inf")] * 4, f" ({type(e).__name__}: {e})"
        p = None
        ok, errs = judge(errs, why, label, "reference attention", rank, stop)
        if ok:
            worst[label] = max(worst.get(label, 0.0), *errs)
        else:
            failed.append((sched, causal))
    return worst, failed


# ----------------------------------------------------------------- memory

GIB = 1024 ** 3


def gather_rows(vals):
    """Every rank's list of numbers, rank-major (every rank calls this)."""
    t = torch.tensor([float(v) for v in vals], dtype=torch.float64, device="cuda")
    outs = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(outs, t)
    return [o.tolist() for o in outs]


def make_program(sched, causal, n, rank, B, H, D, c, comm, attention):
    if attention == "linear":
        return LINEAR_CLASSES[sched](causal, n, rank, B, H, D, c, comm)
    return make_pass(sched, causal, n, rank, B, H, D, c, comm)


def nominal_inputs(pas, attention, B, H, D, c):
    """Bytes of a pass's inputs as the memory model counts them: local Q,
    K, V (bf16); backward also O, dO (bf16) and, softmax, the float32
    log-sum-exp (B, H, c); forward+backward Q, K, V and dO."""
    x = B * c * H * D * 2
    if pas == "fwd":
        return 3 * x
    if pas == "fwdbwd":
        return 4 * x
    return 5 * x + (B * H * c * 4 if attention == "softmax" else 0)


def pass_memory(make, pas):
    """One pass of a fresh program (make(): its inputs only), with the
    caching allocator emptied and its peak statistics reset just before:
    [allocated before, max_memory_allocated, reserved before,
    max_memory_reserved, allocated after] in bytes on this rank.  bwd: the
    forward runs first (its output, log-sum-exp and saved tensors are the
    backward's inputs), then the peak is reset; fwdbwd: forward then
    backward, one peak.  Tensors a program saves for its backward are freed
    once the backward has read them, as autograd does."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    p = make()
    p.keep_saved = False
    dout = None
    if pas != "fwd":
        dout = torch.randn_like(p.q)
    if pas == "bwd":
        p.prepare_backward(dout)
    elif pas == "fwdbwd":
        p.dout = dout
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    dist.barrier()
    before, res_before = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    if pas == "fwd":
        p.run()
        keep = None
    elif pas == "bwd":
        keep = p.run_backward()
    else:
        p.run()
        keep = p.run_backward()
    torch.cuda.synchronize()
    vals = [before, torch.cuda.max_memory_allocated(), res_before,
            torch.cuda.max_memory_reserved(), torch.cuda.memory_allocated()]
    del keep, p, dout
    return vals


def memory_records(out, n, rank, B, H, D, c, sched, causal, attention,
                   passes=("fwd", "bwd", "fwdbwd")):
    """pass_memory of each pass of one schedule, mask and size, with its
    communication, one record each in memory-nN.jsonl: per rank
    (allocated_before, peak_allocated, reserved_before, peak_reserved,
    allocated_after, bytes) and the largest over the ranks in GiB."""
    name = f"memory-n{n}-emulated.jsonl" if LOCAL_COMM else f"memory-n{n}.jsonl"
    emu = {"emulated_rank": rank, "comm_by": "local copies"} if LOCAL_COMM else {}
    total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
    for pas in passes:
        make = lambda: make_program(sched, causal, n, rank, B, H, D, c, True,  # noqa: E731
                                    attention)
        try:
            vals = pass_memory(make, pas)
        except (RuntimeError, ValueError) as e:  # out of memory: both ranks alike
            print(f"calibrate: memory {sched} {pas} at {c} failed: {e}", flush=True)
            vals = [float("nan")] * 5
            gc.collect()
            torch.cuda.empty_cache()
        rows = gather_rows(vals)
        col = lambda i: [r[i] for r in rows]  # noqa: E731
        cls = LINEAR_CLASSES[sched] if attention == "linear" else program_class(sched)
        out.write(name, {
            "part": "memory", "attention": attention, "n": n, **emu, **sched_fields(sched, n),
            "mask": "causal" if causal else "full", "pass": pas, "comm": True,
            "comm_api": cls.comm_api, "B": B, "H": H, "D": D, "tokens_per_gpu": c,
            "seq": c * n, "inputs_bytes": nominal_inputs(pas, attention, B, H, D, c),
            "allocated_before": col(0), "peak_allocated": col(1),
            "reserved_before": col(2), "peak_reserved": col(3), "allocated_after": col(4),
            "peak_allocated_gib": max(col(1)) / GIB, "peak_reserved_gib": max(col(3)) / GIB,
            "peak_over_before_gib": max(a - b for a, b in zip(col(1), col(0))) / GIB,
            "total_memory": total})
        if rank == 0:
            print(f"calibrate: memory {sched} {'causal' if causal else 'full'} {pas} {c}: "
                  f"peak {max(col(1)) / GIB:.3f} GiB allocated, {max(col(3)) / GIB:.3f} "
                  f"reserved", flush=True)


def measure_memory(out, n, rank, B, H, D, per_gpu, schedules, stop, attention):
    """The memory part: each schedule checked against autograd at the
    smallest size (which also warms every kernel and library workspace up),
    then memory_records at every size."""
    linear = attention == "linear"
    if LOCAL_COMM:  # one rank's program alone: no reference to check against;
        # one forward+backward of each at the smallest size warms kernels up
        for sched, causal in schedules:
            p = make_program(sched, causal, n, rank, B, H, D, min(per_gpu), True, attention)
            p.prepare_backward(torch.randn_like(p.q))
            p.run_backward()
            p = None
        worst, failed = {}, []
    else:
        check = check_linear_passes if linear else check_passes
        worst, failed = check(n, rank, B, H, D, min(per_gpu), schedules, stop)
    schedules = [x for x in schedules if x not in failed]
    if rank == 0 and not LOCAL_COMM:
        print(f"calibrate: {attention} check errors " + json.dumps(
            {k: round(v, 5) for k, v in worst.items()}) +
            (f"; failed {failed}" if failed else ""), flush=True)
    for c in per_gpu:
        for sched, causal in schedules:
            memory_records(out, n, rank, B, H, D, c, sched, causal, attention)
        torch.cuda.empty_cache()


def mem_stage(stage):
    """Device memory now (torch.cuda.mem_get_info: every allocation on the
    GPU, the CUDA context and NCCL's buffers included) against what the
    caching allocator holds: [stage, free, total, used, reserved,
    allocated, outside the allocator = used - reserved]."""
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    res, alloc = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
    return [stage, free, total, total - free, res, alloc, total - free - res]


def comm_warmup(n, rank, stages):
    """Every kind of call the programs make, once each on tiny buffers,
    with the memory after each (mem_stage): NCCL sets a connection up (and
    its buffers) the first time a pattern runs."""
    x = torch.zeros(n * 1024, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    dist.all_reduce(x[:8])
    stages.append(mem_stage("first all_reduce"))
    if n > 1:
        wait_all(p2p(None, [(x[:1024], (rank + 1) % n)], [(y[:1024], (rank - 1) % n)]))
        stages.append(mem_stage("p2p to the next rank"))
        wait_all(p2p(None, [(x[:1024], (rank - 1) % n)], [(y[:1024], (rank + 1) % n)]))
        stages.append(mem_stage("p2p to the previous rank"))
    dist.all_to_all_single(y, x)
    stages.append(mem_stage("all_to_all_single"))
    dist.all_gather_into_tensor(y, x[:1024])
    stages.append(mem_stage("all_gather_into_tensor"))
    dist.reduce_scatter_tensor(y[:1024], x)
    stages.append(mem_stage("reduce_scatter_tensor"))
    if n > 1:
        gq, gout = side_groups()
        for g in (gq, gout):
            wait_all(p2p(g, [(x[:1024], (rank + 1) % n)], [(y[:1024], (rank - 1) % n)]))
            wait_all(p2p(g, [(x[:1024], (rank - 1) % n)], [(y[:1024], (rank + 1) % n)]))
        stages.append(mem_stage("TokenRing's two side groups, p2p both ways"))
    torch.cuda.synchronize()
    del x, y


def write_headroom(out, n, stages):
    """headroom-nN.jsonl: every rank's mem_stage rows, one record per
    stage, with the largest "outside the allocator" over the ranks in GiB."""
    for i, st in enumerate(stages):
        rows = gather_rows(st[1:])
        col = lambda k: [r[k] for r in rows]  # noqa: E731
        out.write(f"headroom-n{n}.jsonl", {
            "part": "headroom", "n": n, "order": i, "stage": st[0], "free": col(0),
            "total": col(1), "used": col(2), "reserved": col(3), "allocated": col(4),
            "outside_allocator": col(5), "outside_allocator_gib": max(col(5)) / GIB,
            "used_gib": max(col(2)) / GIB})


def measure_passes(out, n, rank, B, H, D, per_gpu, iters, backward, schedules=SCHEDULES,
                   stop=True, attention="softmax", check_tokens=None, timer=None):
    """Each schedule checked against autograd at check_tokens tokens per GPU
    (default: the smallest of per_gpu), then timed at every size by timer
    (default: timed; --pass-wall-clock passes one that notes its span)."""
    timer = timer or timed
    linear = attention == "linear"
    check = check_linear_passes if linear else check_passes
    check_c = check_tokens or min(per_gpu)
    worst, failed = check(n, rank, B, H, D, check_c, schedules, stop)
    schedules = [x for x in schedules if x not in failed]
    if rank == 0 and worst:
        print(f"calibrate: {'every' if not failed else 'each other'} pass matches reference "
              f"attention and its gradients at {check_c} tokens per GPU (max relative "
              f"error {max(worst.values()):.2g}; " +
              ", ".join(f"{k} {v:.2g}" for k, v in worst.items()) + ")", flush=True)
    name = f"passes-n{n}.jsonl"
    for c in per_gpu:
        for sched, causal in schedules:
            # the memory of one clean pass of each kind (memory-nN.jsonl)
            memory_records(out, n, rank, B, H, D, c, sched, causal, attention,
                           ("fwd", "bwd", "fwdbwd") if backward else ("fwd",))
            for comm in (True, False):
                p = make_program(sched, causal, n, rank, B, H, D, c, comm, attention)
                runs = [("fwd", p.run)]
                if backward:
                    p.prepare_backward(torch.randn_like(p.q))
                    runs.append(("bwd", p.run_backward))
                    runs.append(("fwdbwd", lambda: (p.run(), p.run_backward())))
                for pas, fn in runs:
                    ms, lo, hi = timer(fn, iters, 2)
                    extra = {"attention": "linear", "block": LIN_BLOCK} if linear else {}
                    out.write(name, {
                        **extra, "part": "pass", "n": n, **sched_fields(sched, n),
                        "mask": "causal" if causal else "full", "pass": pas, "comm": comm,
                        "comm_api": p.comm_api,
                        "tasp_cycles": ",".join("-".join(map(str, cyc)) for cyc in p.cycles)
                        if sched == "tasp" else None, "check_tokens_per_gpu": check_c,
                        "B": B, "H": H, "D": D, "tokens_per_gpu": c, "seq": c * n, "ms": ms,
                        "ms_min": lo, "ms_max": hi})
                # drop every reference to the program (runs' bound methods
                # and closure too), so the next memory record starts clean
                p = runs = fn = None
            gc.collect()
            torch.cuda.empty_cache()
        if rank == 0:
            print(f"calibrate: passes at {c} tokens per GPU done", flush=True)


def kernel_axes(a):
    """The kernel sweep's axes narrowed by --kernel-head-dims, --kernel-shapes
    and --kernel-lengths (exit 2 naming the option where one is malformed)."""
    axes = {}
    try:
        if a.kernel_head_dims:
            axes["head_dims"] = tuple(int(v) for v in a.kernel_head_dims.split(","))
        if a.kernel_lengths:
            axes["lengths"] = tuple(int(v) for v in a.kernel_lengths.split(","))
        if a.kernel_shapes:
            shapes = []
            for s in a.kernel_shapes.split(","):
                B, H, Hk = (int(v) for v in s.split("/"))
                if min(B, H, Hk) < 1 or H % Hk:
                    raise ValueError(s)
                shapes.append((B, H, Hk))
            axes["shapes"] = tuple(shapes)
    except ValueError as e:
        print(f"calibrate: --kernel-head-dims / --kernel-lengths (integers, comma separated) "
              f"or --kernel-shapes (B/H/HK triples, HK dividing H): cannot read {e}",
              file=sys.stderr)
        raise SystemExit(2)
    return axes


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the .jsonl files")
    ap.add_argument("--parts", default="links,compute,overhead,passes")
    ap.add_argument("--iters", type=int, default=7)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--max-msg", default="256M", help="largest message (links)")
    ap.add_argument("--max-tokens", type=int, default=49152,
                    help="largest query length of the kernel grid")
    ap.add_argument("--pass-tokens", default="1536,3072,6144,12288,24576,49152",
                    help="tokens per GPU of the measured passes")
    ap.add_argument("--backward", action="store_true",
                    help="also time the backward passes (after a forward; float32 dK/dV "
                         "accumulators travel with the KV, as in ring_flash_attn)")
    ap.add_argument("--schedules",
                    help="schedules of the passes part (each with the masks it has), "
                         "measured in this order; default: every one of the --attention "
                         "kind")
    ap.add_argument("--attention", choices=("softmax", "linear", "both"), default="softmax",
                    help="passes and memory parts: softmax attention (flash kernels) or "
                         "linear attention (schedules lasp, lasp2, ring; records carry "
                         "\"attention\": \"linear\"); both: one after the other "
                         "(--schedules may then name schedules of either kind)")
    ap.add_argument("--emulate-ranks", type=int,
                    help="memory part on one GPU (one process): run one rank's program of "
                         "this many ranks, every communication call replaced by a local "
                         "copy into the buffers it would fill (memory follows allocation, "
                         "not time); records go to memory-nN-emulated.jsonl")
    ap.add_argument("--emulate-rank", type=int,
                    help="with --emulate-ranks: which rank (default: the last, which "
                         "merges at every step of a causal ring)")
    ap.add_argument("--usp-ulysses",
                    help="USP's Ulysses degrees u (ring degree n/u), e.g. 2,1; default: "
                         "every u dividing the ranks and the heads")
    ap.add_argument("--double-ring-inner", type=int,
                    help="double-ring's inner ring size w (windows of w consecutive ranks; "
                         "it divides the ranks); default: the largest leaving two windows "
                         "or more (4 ranks: 2)")
    ap.add_argument("--check-tokens", type=int,
                    help="passes part: tokens per GPU of the check against autograd "
                         "(default: the smallest of --pass-tokens)")
    ap.add_argument("--linear-heads", default="16,32", help="linear part: heads")
    ap.add_argument("--linear-head-dims", default="128,64", help="linear part: head dims")
    ap.add_argument("--linear-chunks", default="1024,2048,4096,8192,16384,32768,65536",
                    help="linear part: chunk lengths (tokens)")
    ap.add_argument("--overlap-chunks", default="4096,16384,65536",
                    help="overlap part: tokens per GPU of the hop and the kernels")
    ap.add_argument("--skip-failed", action="store_true",
                    help="a schedule failing the check against autograd is not timed and "
                         "the others are (default: the run stops)")
    ap.add_argument("--compute-heads",
                    help="compute sweep instead of the kernel grid: query/KV heads pairs, "
                         "e.g. 32/8,32/32")
    ap.add_argument("--compute-head-dims", default="128", help="compute sweep: head dims")
    ap.add_argument("--compute-batches", default="1", help="compute sweep: batch sizes")
    ap.add_argument("--compute-chunks", default="1024,2048,4096,8192,16384,32768,65536",
                    help="compute sweep: sequence lengths (sq = sk)")
    ap.add_argument("--gemm-models", default="llama3-8b,llama3-70b",
                    help="gemm part: models (bundled presets or model files)")
    ap.add_argument("--gemm-tokens", default="4K,8K,16K,32K,64K",
                    help="gemm part: tokens a TP group holds (M)")
    ap.add_argument("--gemm-tp", default="1,2,4,8", help="gemm part: TP degrees")
    ap.add_argument("--layer-models", default="llama3-8b,llama3-70b",
                    help="layer part: models (bundled presets or model files)")
    ap.add_argument("--layer-tokens", default="4K,8K,16K,32K,64K",
                    help="layer part: tokens per GPU")
    ap.add_argument("--layer-sp", choices=("tp", "ulysses"), default="tp",
                    help="layer part: what the GPUs split: Megatron TP with sequence "
                         "parallelism, or Ulysses SP (one GPU: neither)")
    ap.add_argument("--compute-budget", type=float, default=1e9,
                    help="compute and kernels sweeps: seconds after which no new shape is "
                         "started")
    ap.add_argument("--kernel-mem-gib", type=float, default=16.0,
                    help="kernels part: largest Q, K, V, O of one kernel (GiB)")
    ap.add_argument("--kernel-max-tflop", type=float, default=20.0,
                    help="kernels part: largest forward kernel (nominal TFLOP; device time)")
    ap.add_argument("--kernel", metavar="MODULE:FUNCTION",
                    help="kernels part: time this attention function instead of PyTorch's "
                         "flash kernel; signature out = f(q, k, v, causal), q (B, sq, H, D), "
                         "k and v (B, sk, Hk, D), bf16; backward through autograd "
                         "(scripts/calibrate/user_kernel.py); fit.py --user-kernel turns the "
                         "records into a topology's kernel table")
    ap.add_argument("--kernel-wall-clock", action="store_true",
                    help="kernels part: each timed kernel's record also holds fwd_wall and "
                         "bwd_wall, the host's Unix time at the start and end of its forward's "
                         "and backward's timing (to match clock samples taken beside the sweep)")
    ap.add_argument("--pass-wall-clock", action="store_true",
                    help="passes and layer parts: each timed record also holds wall, the "
                         "host's Unix time at the start and end of its timing, warm-up "
                         "included (to match clock samples taken beside the run; "
                         "scripts/calibrate/wall_spans.py)")
    ap.add_argument("--kernel-head-dims", help="kernels part: head dims (default: the sweep's)")
    ap.add_argument("--kernel-shapes", metavar="B/H/HK,...",
                    help="kernels part: batch / query heads / KV heads triples, e.g. 1/32/8 "
                         "(default: the sweep's)")
    ap.add_argument("--kernel-lengths",
                    help="kernels part: sequence lengths sq = sk, e.g. 1024,4096 (aspects "
                         "sk = 2 sq, sq / 2 at those of 2K, 8K, 32K among them; default: "
                         "the sweep's)")
    a = ap.parse_args()
    # the kernel sweep's options, checked before any GPU or process group
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    axes = kernel_axes(a)
    user_fn = None
    if a.kernel:
        import user_kernel
        user_fn = user_kernel.load(a.kernel)
    kinds = {"softmax": [("softmax", SCHEDULES)], "linear": [("linear", LINEAR_SCHEDULES)],
             "both": [("softmax", SCHEDULES), ("linear", LINEAR_SCHEDULES)]}[a.attention]
    every = {s for _, known in kinds for s, _ in known}
    names = (a.schedules.split(",") if a.schedules
             else list(dict.fromkeys(s for _, known in kinds for s, _ in known)))
    for nm in names:
        if nm not in every:
            raise SystemExit(f"calibrate: unknown {a.attention} schedule {nm!r}")
    ints = lambda x: [int(v) for v in x.split(",")]  # noqa: E731
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    world = n
    if a.emulate_ranks:
        global LOCAL_COMM
        if n != 1 or a.parts != "memory":
            raise SystemExit("calibrate: --emulate-ranks runs the memory part in one process")
        er = a.emulate_rank if a.emulate_rank is not None else a.emulate_ranks - 1
        LOCAL_COMM = (a.emulate_ranks, er)
        n = a.emulate_ranks
    # (attention, schedules) in turn; USP once per Ulysses degree
    # in the order --schedules names them (a run cut short keeps the first)
    runs = [(att, expand_double_ring(
        expand_usp([(s, c) for nm in names for s, c in known if s == nm], n, a.heads,
                   ints(a.usp_ulysses) if a.usp_ulysses else None), n, a.double_ring_inner))
            for att, known in kinds]
    stages = []  # device memory before and after the CUDA context, NCCL, ...
    try:  # NVML's view before this process has a CUDA context (if pynvml is there)
        pre = torch.cuda.device_memory_used(local)
    except Exception:  # noqa: BLE001 -- no NVML binding: not measured
        pre = float("nan")
    torch.cuda.set_device(local)
    st = mem_stage("CUDA context (first CUDA call)")
    stages.append(["device memory used before the context (NVML)", float("nan"), st[2], pre,
                   0, 0, pre])
    stages.append(st)
    # a hang (a mismatched message) ends the run after a minute, not never
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60),
                            device_id=torch.device("cuda", local))
    stages.append(mem_stage("init_process_group (NCCL, device_id bound)"))
    out32()  # every rank: cuBLAS's workspace (caching allocator) made before any part
    os.makedirs(a.out, exist_ok=True)
    out = Out(a.out, rank)
    if rank == 0:
        props = torch.cuda.get_device_properties(0)
        with open(os.path.join(a.out, f"env-n{world}.json"), "w") as f:
            json.dump({"gpu": props.name, "gpus": world, "torch": torch.__version__,
                       "emulated_ranks": list(LOCAL_COMM) if LOCAL_COMM else None,
                       "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "cuda": torch.version.cuda,
                       "total_memory": props.total_memory,
                       "total_memory_gib": props.total_memory / GIB,
                       "date": time.strftime("%Y-%m-%d"),
                       "linear_state_products": "bf16 bmm, float32 out_dtype" if out32()
                       else "float32 bmm of inputs cast to float32",
                       "env": {k: v for k, v in os.environ.items()
                               if k.startswith(("NCCL_", "TORCH_SYMM", "PYTORCH_",
                                                "TORCH_NCCL", "CUDA_MODULE"))}}, f, indent=1)
    comm_warmup(world, rank, stages)
    mult = {"K": KIB, "M": MIB}
    mm = a.max_msg.upper()
    max_msg = int(mm[:-1]) * mult[mm[-1]] if mm[-1] in mult else int(mm)
    sizes, s = [], 64 * KIB
    while s <= max_msg:
        sizes.append(s)
        s *= 4
    B, H, D = 1, a.heads, a.head_dim
    parts = a.parts.split(",")
    # the passes and layer parts write through span_out and time with
    # span_timed: with --pass-wall-clock each record gets its timing's span
    span_out, span_timed = out, timed
    if a.pass_wall_clock:
        import wall_spans
        spans = wall_spans.WallSpans(out)
        span_out, span_timed = spans, spans.timer(timed)
    t0 = time.time()
    for part in parts:
        if part == "links":
            measure_links(out, n, rank, sizes, a.iters)
        elif part == "compute" and a.compute_heads:
            heads = [tuple(int(v) for v in hk.split("/")) for hk in a.compute_heads.split(",")]
            measure_compute_sweep(out, n, heads, ints(a.compute_head_dims),
                                  ints(a.compute_batches), ints(a.compute_chunks), a.iters,
                                  a.compute_budget)
        elif part == "compute":
            measure_compute(out, n, B, H, D, a.max_tokens, a.iters)
        elif part == "kernels":
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import kernel_sweep
            todo, skip = kernel_sweep.plan(a.kernel_mem_gib, a.kernel_max_tflop, **axes)
            if a.kernel:
                import user_kernel
                fwd, bwd_of = user_kernel.wrap(user_fn, torch)
                extra = {"kernel": a.kernel}
            else:
                fwd, bwd_of = flash, kernel_sweep.flash_backward(flash, flash_bwd)
                extra = {}
            kernel_sweep.measure(out, f"kernels-n{n}.jsonl", n, todo, skip, a.iters,
                                 a.compute_budget, timed, fwd, bwd_of, torch, extra,
                                 wall_clock=a.kernel_wall_clock)
            if a.kernel:
                user_kernel.measure_host(out, f"kernel-host-n{n}.jsonl", n, user_fn, todo, host_us,
                                         torch, a.kernel)
        elif part == "overhead":
            measure_overhead(out, n, rank, B, H, D, a.max_tokens)
        elif part == "host":
            measure_host(out, n, rank, B, H, D)
        elif part == "passes":
            for att, schedules in runs:
                measure_passes(span_out, n, rank, B, H, D, ints(a.pass_tokens), a.iters,
                               a.backward, schedules, not a.skip_failed, att, a.check_tokens,
                               span_timed)
        elif part == "memory":
            for att, schedules in runs:
                measure_memory(out, n, LOCAL_COMM[1] if LOCAL_COMM else rank, B, H, D,
                               ints(a.pass_tokens), schedules, not a.skip_failed, att)
        elif part == "linear":
            measure_linear(out, n, ints(a.linear_heads), ints(a.linear_head_dims),
                           ints(a.linear_chunks), a.iters, LIN_BLOCK)
        elif part == "lingpu":
            measure_linear_gpu(out, n, ints(a.linear_heads), ints(a.linear_head_dims),
                               ints(a.linear_chunks), LIN_BLOCK, B, H, D)
        elif part == "overlap":
            measure_overlap(out, n, rank, B, H, D, ints(a.overlap_chunks), a.iters)
        elif part == "layer":
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            import gemm_shapes
            import layer
            layer.measure_layer(span_out, n, rank, a.layer_models.split(","),
                                [gemm_shapes.tokens(v) for v in a.layer_tokens.split(",")],
                                a.iters, a.layer_sp, lambda fn, iters: span_timed(fn, iters, 2))
        elif part == "gemm":
            measure_gemm(out, n, a.gemm_models.split(","), ints(a.gemm_tp),
                         a.gemm_tokens.split(","), a.iters)
        else:
            raise SystemExit(f"calibrate: unknown part {part!r}")
        if rank == 0:
            print(f"calibrate: {part} done at {time.time() - t0:.0f} s", flush=True)
    gc.collect()
    torch.cuda.empty_cache()
    stages.append(mem_stage(f"after the parts ({a.parts}), cache emptied"))
    write_headroom(out, world, stages)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
