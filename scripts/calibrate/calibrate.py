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
                     and key lengths and both masks; the log-sum-exp merge
  overhead-nN.jsonl  host and GPU cost of the small operations, measured
                     apart: the host cost of issuing a call (wall clock, GPU
                     kept busy so the call never blocks) and its GPU cost
                     (CUDA events around calls queued behind a busy GPU)
  passes-nN.jsonl    whole forward passes of Ring (full, causal), Zigzag-Ring
                     and TASP-style concurrent rings, with and without their
                     communication, for validating tasp-sim's predictions;
                     with --backward, their backward passes too.  Every
                     schedule is first checked against PyTorch autograd
                     (output, dQ, dK, dV) over the whole sequence

Timing: every timed iteration starts after a barrier; `ms` is the median
over iterations of the slowest rank's time (CUDA events), ms_min / ms_max
the spread.  The pass programs follow ring_flash_attn's structure: the KV
for the next step is sent with batch_isend_irecv while this step's kernels
run; the block outputs are merged in float32 with unfused PyTorch ops.
"""
import argparse
import datetime
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

KIB = 1024
MIB = 1024 * 1024


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


def merge(acc, lse, blk, blse):
    """Fold a block's output into the running float32 output in place:
    o = o - sigmoid(lse_b - lse) (o - o_b); lse = lse - logsigmoid(lse - lse_b)
    (the log-sum-exp update used by ring_flash_attn)."""
    blse = blse.transpose(1, 2).unsqueeze(-1)
    acc.sub_(torch.sigmoid(blse - lse) * (acc - blk.float()))
    lse.sub_(F.logsigmoid(lse - blse))


def merge_inputs(B, sq, H, D):
    """A running output and log-sum-exp, and a block's, for timing merge."""
    return (torch.zeros(B, sq, H, D, dtype=torch.float32, device="cuda"),
            torch.zeros(B, sq, H, 1, dtype=torch.float32, device="cuda"),
            torch.randn(B, sq, H, D, dtype=torch.bfloat16, device="cuda"),
            torch.randn(B, H, sq, dtype=torch.float32, device="cuda"))


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


# ------------------------------------------------------------- overhead

def split_cost(fn, reps=20):
    """Host cost (wall clock per call while the GPU is busy, so no call
    waits) and GPU cost (events around `reps` calls queued behind a busy
    GPU) of fn, in microseconds."""
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time at 2 GHz
    t0 = time.perf_counter()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    host = (time.perf_counter() - t0) / reps * 1e6
    torch.cuda.synchronize()
    gpu = a.elapsed_time(b) / reps * 1e3
    return host, gpu


def measure_overhead(out, n, rank, B, H, D, max_tokens):
    name = f"overhead-n{n}.jsonl"
    sq = 768
    while sq <= max_tokens:
        acc, lse, blk, blse = merge_inputs(B, sq, H, D)
        host, gpu = split_cost(lambda: merge(acc, lse, blk, blse))
        out.write(name, {"part": "overhead", "n": n, "op": "merge", "B": B, "H": H, "D": D,
                         "sq": sq, "host_us": host, "gpu_us": gpu})
        q = torch.randn(B, sq, H, D, dtype=torch.bfloat16, device="cuda")
        host, gpu = split_cost(lambda: flash(q, q, q, False), reps=5)
        out.write(name, {"part": "overhead", "n": n, "op": "attn_fwd", "B": B, "H": H, "D": D,
                         "sq": sq, "sk": sq, "host_us": host, "gpu_us": gpu})
        sq *= 4
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
        host, _ = split_cost(fn)
        dist.barrier()
        out.write(name, {"part": "overhead", "n": n, "op": op, "msg_bytes": 8192,
                         "host_us": host})


# --------------------------------------------------------------- passes

class Pass:
    """One forward pass of a ring-like schedule on this rank.

    Layouts are (B, S, H, D); a KV buffer is (B, S, 2, H, D) so any run of
    tokens is one contiguous slice that can be sent as is."""

    def __init__(self, sched, causal, n, rank, B, H, D, c, comm):
        self.sched, self.causal, self.n, self.rank = sched, causal, n, rank
        self.B, self.H, self.D, self.c, self.comm = B, H, D, c, comm
        dev = "cuda"
        self.q = torch.randn(B, c, H, D, dtype=torch.bfloat16, device=dev)
        self.kv = torch.randn(B, c, 2, H, D, dtype=torch.bfloat16, device=dev)
        self.acc = torch.empty(B, c, H, D, dtype=torch.float32, device=dev)
        self.lse = torch.empty(B, c, H, 1, dtype=torch.float32, device=dev)
        if sched == "tasp":
            # K_n* split into edge-disjoint directed Hamiltonian cycles; for
            # the 4 GPUs of one node the two directions of one ring (K_4*
            # has no 3-cycle decomposition, Tillson 1980).  On NVSwitch any
            # decomposition gives the same timing.
            ring = list(range(n))
            self.cycles = [ring, ring[::-1]] if n > 2 else [ring]
            self.k = len(self.cycles)
        self.bufs = [self.kv.clone(), self.kv.clone()]
        self.setup_schedule()

    # KV helpers
    @staticmethod
    def k_of(kv):
        return kv[:, :, 0]

    @staticmethod
    def v_of(kv):
        return kv[:, :, 1]

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
        """Forward: each step's KV move overlaps its kernels; every block
        output after the first is merged into the running output."""
        cur, first = self.kv, True
        for t in range(self.n):
            reqs = []
            if t + 1 < self.n:
                recv = self.bufs[t % 2]
                reqs = self.move(cur, recv)
            for q_lo, q_hi, segs, causal in self.blocks(t):
                kv = self.keys(cur, segs)
                o, lse = flash(self.q[:, q_lo:q_hi], self.k_of(kv), self.v_of(kv), causal)
                if first:
                    self.acc[:, q_lo:q_hi].copy_(o)
                    self.lse[:, q_lo:q_hi].copy_(lse.transpose(1, 2).unsqueeze(-1))
                    first = False
                else:
                    merge(self.acc[:, q_lo:q_hi], self.lse[:, q_lo:q_hi], o, lse)
            for q in reqs:
                q.wait()
            if t + 1 < self.n and self.comm:
                cur = recv

    def prepare_backward(self, dout):
        """Output and log-sum-exp of a forward pass, and the output gradient,
        for run_backward; the forward's rng tensors for the kernel call."""
        self.run()
        self.out = self.acc.to(torch.bfloat16)
        self.lse_bhs = self.lse.squeeze(-1).transpose(1, 2).contiguous()
        self.dout = dout
        self.dq = torch.zeros_like(self.acc)
        self.dacc = [torch.zeros(self.kv.shape, dtype=torch.float32, device="cuda")
                     for _ in range(3)]
        x = self.q[:, :128].transpose(1, 2)
        self.rng = torch.ops.aten._scaled_dot_product_flash_attention(x, x, x, 0.0, False)

    def run_backward(self):
        """Backward (ring_flash_attn's pattern): KV moves as in forward; the
        float32 dK/dV accumulator of the KV held at a step gets that step's
        block gradients plus what its previous holders added, and moves one
        hop after the step's kernels, n hops in all, the last one home."""
        n, r0 = self.n, self.rng
        cur, dreqs = self.kv, []
        self.dq.zero_()
        arrived = self.dacc[2]
        for t in range(n):
            reqs = []
            if t + 1 < n:
                recv = self.bufs[t % 2]
                reqs = self.move(cur, recv)
            acc = self.dacc[t % 2]
            acc.zero_()
            for q_lo, q_hi, segs, causal in self.blocks(t):
                kv = self.keys(cur, segs)
                sl = slice(q_lo, q_hi)
                dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(
                    self.dout[:, sl].transpose(1, 2), self.q[:, sl].transpose(1, 2),
                    self.k_of(kv).transpose(1, 2), self.v_of(kv).transpose(1, 2),
                    self.out[:, sl].transpose(1, 2),
                    self.lse_bhs[:, :, sl].contiguous(), r0[2], r0[3], q_hi - q_lo,
                    kv.shape[1], 0.0, causal, r0[6], r0[7])
                self.dq[:, sl] += dq.transpose(1, 2)
                off = 0
                for a, b in segs:  # scatter the gathered key gradients back
                    acc[:, a:b, 0] += dk.transpose(1, 2)[:, off:off + b - a]
                    acc[:, a:b, 1] += dv.transpose(1, 2)[:, off:off + b - a]
                    off += b - a
            for q in dreqs:
                q.wait()
            if t > 0 and self.comm:
                acc += arrived
            dreqs = self.move(acc, arrived)
            for q in reqs:
                q.wait()
            if t + 1 < n and self.comm:
                cur = recv
        for q in dreqs:
            q.wait()
        return arrived if self.comm else self.dacc[(n - 1) % 2]


def token_ranges(sched, causal, n, rank, c):
    """Global token ranges a rank holds, in its local order."""
    if sched == "ring" or not causal:
        return [(rank * c, (rank + 1) * c)]
    h = c // 2
    return [(rank * h, (rank + 1) * h), ((2 * n - 1 - rank) * h, (2 * n - rank) * h)]


SCHEDULES = [("ring", False), ("ring", True), ("zigzag", True), ("tasp", False),
             ("tasp", True)]


def check_passes(n, rank, B, H, D, c):
    """Each pass's output, and each backward's dQ, dK and dV, equal
    single-GPU attention over the whole sequence (PyTorch autograd): the
    measured programs are correct implementations.  Returns the largest
    error relative to the reference's largest magnitude."""
    g = torch.Generator(device="cuda").manual_seed(1234)
    S = n * c
    q = torch.randn(B, S, H, D, dtype=torch.bfloat16, device="cuda", generator=g)
    kv = torch.randn(B, S, 2, H, D, dtype=torch.bfloat16, device="cuda", generator=g)
    dout = torch.randn(B, S, H, D, dtype=torch.bfloat16, device="cuda", generator=g)
    worst = 0.0
    for sched, causal in SCHEDULES:
        qr, kr, vr = (x.detach().clone().requires_grad_() for x in (q, kv[:, :, 0], kv[:, :, 1]))
        ref = F.scaled_dot_product_attention(qr.transpose(1, 2), kr.transpose(1, 2),
                                             vr.transpose(1, 2), is_causal=causal)
        ref.backward(dout.transpose(1, 2))
        ref = ref.transpose(1, 2)
        p = Pass(sched, causal, n, rank, B, H, D, c, True)
        rng = token_ranges(sched, causal, n, rank, c)
        local = lambda x: torch.cat([x[:, a:b] for a, b in rng], dim=1)  # noqa: E731
        p.q.copy_(local(q))
        p.kv.copy_(local(kv))
        p.prepare_backward(local(dout))
        dkv = p.run_backward()
        for what, got, want in [("output", p.acc, local(ref)), ("dQ", p.dq, local(qr.grad)),
                                ("dK", dkv[:, :, 0], local(kr.grad)),
                                ("dV", dkv[:, :, 1], local(vr.grad))]:
            want = want.float()
            err = torch.tensor([((got - want).abs().max() / want.abs().max()).item()],
                               device="cuda")
            dist.all_reduce(err, op=dist.ReduceOp.MAX)
            if err.item() > 2e-2:
                raise SystemExit(f"calibrate: {sched} {'causal' if causal else 'full'} {what} "
                                 f"differs from reference attention by {err.item():.3g}")
            worst = max(worst, err.item())
        del p
    return worst


def measure_passes(out, n, rank, B, H, D, per_gpu, iters, backward):
    worst = check_passes(n, rank, B, H, D, min(per_gpu))
    if rank == 0:
        print(f"calibrate: every pass matches reference attention and its gradients "
              f"(max relative error {worst:.2g})", flush=True)
    name = f"passes-n{n}.jsonl"
    for c in per_gpu:
        for sched, causal in SCHEDULES:
            for comm in (True, False):
                p = Pass(sched, causal, n, rank, B, H, D, c, comm)
                runs = [("fwd", p.run)]
                if backward:
                    p.prepare_backward(torch.randn_like(p.q))
                    runs.append(("bwd", p.run_backward))
                for pas, fn in runs:
                    ms, lo, hi = timed(fn, iters, 2)
                    out.write(name, {
                        "part": "pass", "n": n, "sched": sched,
                        "mask": "causal" if causal else "full", "pass": pas, "comm": comm,
                        "comm_api": "batch_p2p",
                        "tasp_cycles": ",".join("-".join(map(str, cyc)) for cyc in p.cycles)
                        if sched == "tasp" else None,
                        "B": B, "H": H, "D": D, "tokens_per_gpu": c, "seq": c * n, "ms": ms,
                        "ms_min": lo, "ms_max": hi})
                del p
        torch.cuda.empty_cache()


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
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    # a hang (a mismatched message) ends the run after a minute, not never
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60), device_id=torch.device("cuda", int(os.environ["LOCAL_RANK"])))
    os.makedirs(a.out, exist_ok=True)
    out = Out(a.out, rank)
    if rank == 0:
        props = torch.cuda.get_device_properties(0)
        with open(os.path.join(a.out, f"env-n{n}.json"), "w") as f:
            json.dump({"gpu": props.name, "gpus": n, "torch": torch.__version__,
                       "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                       "cuda": torch.version.cuda,
                       "date": time.strftime("%Y-%m-%d"),
                       "env": {k: v for k, v in os.environ.items()
                               if k.startswith(("NCCL_", "TORCH_SYMM"))}}, f, indent=1)
    mult = {"K": KIB, "M": MIB}
    mm = a.max_msg.upper()
    max_msg = int(mm[:-1]) * mult[mm[-1]] if mm[-1] in mult else int(mm)
    sizes, s = [], 64 * KIB
    while s <= max_msg:
        sizes.append(s)
        s *= 4
    B, H, D = 1, a.heads, a.head_dim
    parts = a.parts.split(",")
    t0 = time.time()
    for part in parts:
        if part == "links":
            measure_links(out, n, rank, sizes, a.iters)
        elif part == "compute":
            measure_compute(out, n, B, H, D, a.max_tokens, a.iters)
        elif part == "overhead":
            measure_overhead(out, n, rank, B, H, D, a.max_tokens)
        elif part == "passes":
            measure_passes(out, n, rank, B, H, D, [int(x) for x in a.pass_tokens.split(",")],
                           a.iters, a.backward)
        else:
            raise SystemExit(f"calibrate: unknown part {part!r}")
        if rank == 0:
            print(f"calibrate: {part} done at {time.time() - t0:.0f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
