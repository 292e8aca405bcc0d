"""Time the TASP paper's own forward programs at n = 4 GPUs on one node.

Runs infinigence/HamiltonAttention's H100-1/hamilton_attention.py (not part
of this project: the run script copies it next to this file as
`hamilton_attention.py`; see README.md) the way its test_hamilton_attention.py
times them: the `*_profile` forward programs on dummy random data, CUDA events
around the whole pass on the default stream, a barrier after each pass.

One process per GPU:
    torchrun --standalone --nproc-per-node 4 paper_code_bench.py --out DIR

What this harness adds around the paper's code, and why:
- n = 4.  The code builds its cycles for n = 8 (a table) or n >= 8 with
  n % 4 == 0; K_4* has no decomposition into 3 directed Hamiltonian cycles
  (Tillson 1980: K_n* has one for every n except 4 and 6).  The programs take
  their routing as arguments (out_mapping, in_mapping, and for causal
  source_rank_per_iter), so they are given the three shifts r -> r+j (j = 1,
  2, 3): each GPU sends one sub-chunk to each of the other three every step,
  the same all_to_all (same bytes, same peers) a decomposition would issue.
  The j = 2 shift is two 2-cycles, so the result is not the attention (the
  paper's timing runs use dummy data and do not check it either); the
  causal split flags are those of a Hamiltonian order (3r of the 9 received
  sub-chunks come from lower ranks on rank r, as in any decomposition).
- flash_attn.  If the package is missing, `_flash_attn_forward` is provided
  over PyTorch's flash kernel (aten._scaled_dot_product_flash_attention),
  the kernel this project's H100 tables were measured with.
- Pieces the simulator prices separately, each timed on its own:
  * `nocomm`: the same program with its communication calls issuing
    nothing: its kernels, merges, events and host synchronisations alone;
  * `nosync`: the same program with the per-step host
    `stream_comm.synchronize()` replaced by a GPU-side wait of the default
    stream on the communication stream (no host block);
  * `cat`: the per-step torch.cat of the n-1 received K and V sub-chunks
    into one chunk (what TASP's full forward does before each kernel);
  * `issue`: host time of issuing one step's communication call
    (RingComm.send_recv_kv = batch_isend_irecv of 4 ops; A2AComm.all_to_all
    of 4 tensors), the call returning before the transfer is done.
"""
import argparse
import contextlib
import json
import os
import sys
import time
import types

import torch
import torch.distributed as dist
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
N_BASIC = 3360  # the H100-1 script's basic_len; 3360 = 4 x 3 x 280 suits n = 4 too


def install_flash_adapter(cpu):
    """Provide flash_attn.flash_attn_interface._flash_attn_forward if absent.
    Returns the name of what runs the kernels."""
    if not cpu:
        try:
            import flash_attn.flash_attn_interface  # noqa: F401
            import flash_attn
            return "flash_attn " + getattr(flash_attn, "__version__", "?")
        except ImportError:
            pass

    def _flash_attn_forward(q, k, v, dropout_p, softmax_scale, causal,
                            window_size_left=-1, window_size_right=-1,
                            softcap=0.0, alibi_slopes=None, return_softmax=False):
        # q, k, v: (B, S, H, D) as flash_attn takes them; lse (B, H, S) float32
        if cpu:
            qt, kt, vt = (x.transpose(1, 2).float() for x in (q, k, v))
            s = qt @ kt.transpose(-2, -1) * softmax_scale
            if causal:
                m = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
                s = s.masked_fill(~m, float("-inf"))
            lse = torch.logsumexp(s, dim=-1)
            o = (torch.softmax(s, dim=-1) @ vt).to(q.dtype)
        else:
            o, lse = torch.ops.aten._scaled_dot_product_flash_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                dropout_p, causal, scale=softmax_scale)[:2]
        return o.transpose(1, 2), lse, None, None

    iface = types.ModuleType("flash_attn.flash_attn_interface")
    iface._flash_attn_forward = _flash_attn_forward
    pkg = types.ModuleType("flash_attn")
    pkg.flash_attn_interface = iface
    sys.modules["flash_attn"] = pkg
    sys.modules["flash_attn.flash_attn_interface"] = iface
    return "math (CPU dry run)" if cpu else "adapter over torch aten._scaled_dot_product_flash_attention"


def install_cpu_fakes():
    """CPU dry run: CUDA streams and events as no-ops, so the control flow of
    the programs and of this harness can be checked on a machine without GPUs."""
    class FakeStream:
        def synchronize(self):
            pass

        def wait_stream(self, other):
            pass

    class FakeEvent:
        def __init__(self, enable_timing=False):
            self.t = 0.0

        def record(self, stream=None):
            self.t = time.perf_counter()

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

        def synchronize(self):
            pass

    torch.cuda.Stream = lambda *a, **k: FakeStream()
    torch.cuda.Event = FakeEvent
    torch.cuda.stream = lambda s: contextlib.nullcontext()
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_stream = lambda *a, **k: FakeStream()

    class Handles:
        def __init__(self, reqs):
            self.reqs = reqs

        def wait(self):
            for q in self.reqs:
                q.wait()

    def all_to_all(out_list, in_list, group=None, async_op=False):
        # gloo has no all_to_all: point-to-point sends and receives instead
        me, reqs = dist.get_rank(), []
        for p, (o, i) in enumerate(zip(out_list, in_list)):
            if p == me:
                o.copy_(i)
                continue
            if i.numel():
                reqs.append(dist.isend(i.contiguous(), p))
            if o.numel():
                reqs.append(dist.irecv(o, p))
        h = Handles(reqs)
        return h if async_op else h.wait()
    dist.all_to_all = all_to_all


class NoHostSyncStream:
    """Stands in for torch.cuda.Stream inside the paper's module for the
    `nosync` variant: synchronize() makes the current (compute) stream wait
    for this stream on the GPU instead of blocking the host."""

    def __init__(self, real):
        self.real = real

    def __call__(self, *a, **k):
        s = self.real(*a, **k)
        real_sync = s.synchronize  # noqa: F841 (kept for clarity)

        def gpu_wait():
            torch.cuda.current_stream().wait_stream(s)
        try:
            s.synchronize = gpu_wait
        except AttributeError:
            return _Wrapped(s, gpu_wait)
        return s


class _Wrapped:
    def __init__(self, s, sync):
        self._s, self.synchronize = s, sync

    def __getattr__(self, name):
        return getattr(self._s, name)


_REAL_COMM = {}


def no_communication(ha, on):
    """The `nocomm` variant: the programs' communication calls issue
    nothing (the buffers they would fill keep what they hold), so a pass is
    its kernels, merges, events and host synchronisations alone."""
    if not _REAL_COMM:
        _REAL_COMM.update(commit=ha.RingComm.commit, rwait=ha.RingComm.wait,
                          a2a=ha.A2AComm.all_to_all, await_=ha.A2AComm.wait)
    if not on:
        ha.RingComm.commit, ha.RingComm.wait = _REAL_COMM["commit"], _REAL_COMM["rwait"]
        ha.A2AComm.all_to_all, ha.A2AComm.wait = _REAL_COMM["a2a"], _REAL_COMM["await_"]
        return

    def commit(self):
        self._reqs = []

    def rwait(self):
        self._reqs, self._ops = None, []

    ha.RingComm.commit, ha.RingComm.wait = commit, rwait
    ha.A2AComm.all_to_all = lambda self, s, r, async_op=True: None
    ha.A2AComm.wait = lambda self: None


def shift_routing(n):
    """out_mapping[r][dst] / in_mapping[r][src]: the sub-chunk index sent to /
    received from each peer (-1: none), for the shifts r -> r + j, j = 1..n-1;
    source_rank_per_iter[r][step][c]: whether sub-chunk c held at that step
    came from a rank not above r, in a Hamiltonian order (source r - step)."""
    out_m = [[-1] * n for _ in range(n)]
    in_m = [[-1] * n for _ in range(n)]
    for r in range(n):
        for j in range(1, n):
            out_m[r][(r + j) % n] = j - 1
            in_m[r][(r - j) % n] = j - 1
    src = [[[((r - s) % n) <= r for _ in range(n - 1)] for s in range(n)] for r in range(n)]
    return out_m, in_m, src


def chunk_tensors(ha, n, b, seq, h, d, dev, dtype):
    """The paper's dummy data: TASP's local q and K/V sub-chunk lists, and
    the ring's local q, k, v (test_hamilton_attention.prof_perform)."""
    looping = [list(range(n))] * (n - 1)  # only its shape is read here
    tq, tk, tv = ha.get_circle_init_qkv_for_rank_dummy(looping, b, seq, h, d, dev, dtype)
    rq, rk, rv = (ha.extract_local_for_ring_dummy(n, b, seq, h, d, dev, dtype) for _ in range(3))
    return (tq, tk, tv), (rq, rk, rv)


def run_program(ha, name, data, n, routing):
    out_m, in_m, src = routing
    (tq, tk, tv), (rq, rk, rv) = data
    if name == "tasp-full":
        return ha.hamilton_attention_forward_full_flash_attn_profile(
            None, tq, tk, tv, None, world_size=n, looping=[list(range(n))] * (n - 1),
            out_mapping=out_m, in_mapping=in_m)[2]
    if name == "tasp-causal":
        return ha.hamilton_attention_forward_causal_flash_attn_profile(
            None, tq, tk, tv, None, world_size=n, looping=[list(range(n))] * (n - 1),
            out_mapping=out_m, in_mapping=in_m, source_rank_per_iter=src)[2]
    if name == "ring-full":
        return ha.ring_attention_forward_flash_attn_profile(None, rq, rk, rv, None, world_size=n)[2]
    if name == "zigzag-causal":
        return ha.zigzag_ring_attention_forward_flash_attn_profile(None, rq, rk, rv, None, world_size=n)[2]
    raise ValueError(name)


def time_program(ha, name, data, n, routing, warm, iters):
    """As prof_perform: warm-up passes, then timed passes, a barrier after
    each; every rank's total/comm/comp ms per timed pass."""
    rows = []
    for it in range(warm + iters):
        prof = run_program(ha, name, data, n, routing)
        dist.barrier()
        if it >= warm:
            rows.append([prof["total_time"], prof["comm_total_time"], prof["comp_total_time"]])
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, rows)
    return everyone


def time_cat(sub, n, iters, cpu):
    """ms of one pass's torch.cat of the n-1 K and V sub-chunks (n steps),
    the full forward's copies, on this GPU."""
    kv = [torch.stack((x, x), dim=0) for x in sub]
    if cpu:
        t0 = time.perf_counter()
    else:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
    for _ in range(iters):
        for _ in range(n):
            torch.cat([x[0] for x in kv], dim=1)
            torch.cat([x[1] for x in kv], dim=1)
    if cpu:
        return (time.perf_counter() - t0) * 1e3 / iters
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / iters


def time_issue(ha, n, dev, dtype, iters):
    """Host us to issue one step's communication call (it returns before the
    transfer ends), each GPU: ring's batch_isend_irecv of K and V, TASP's
    all_to_all of n tensors.  Small tensors: the issue, not the transfer."""
    x = torch.randn(2, 64, 4, 64, device=dev, dtype=dtype)
    out = {}
    ring = ha.RingComm(None)
    a2a = ha.A2AComm(None)
    sends = [x.clone() for _ in range(n)]
    recvs = [torch.empty_like(x) for _ in range(n)]
    for kind in ("ring_send_recv_kv", "tasp_all_to_all"):
        ts = []
        for it in range(iters + 5):
            dist.barrier()
            t0 = time.perf_counter()
            if kind == "ring_send_recv_kv":
                ring.send_recv_kv(x[0], x[1])
            else:
                a2a.all_to_all(sends, recvs)
            t1 = time.perf_counter()
            (ring if kind == "ring_send_recv_kv" else a2a).wait()
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if it >= 5:
                ts.append((t1 - t0) * 1e6)
        ts.sort()
        out[kind + "_us"] = ts[len(ts) // 2]
    # host time of stream.synchronize() on a stream with nothing left to do
    s = torch.cuda.Stream() if dev.type == "cuda" else None
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        if s is not None:
            s.synchronize()
        ts.append((time.perf_counter() - t0) * 1e6)
    ts.sort()
    out["idle_stream_synchronize_us"] = ts[len(ts) // 2]
    return out


def points(spec):
    """'k:batch:heads,...' -> [(seq, batch, heads)]"""
    res = []
    for p in spec.split(","):
        k, b, h = (int(v) for v in p.split(":"))
        res.append((k * N_BASIC, b, h))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--points", required=True, help="k:batch:heads,... (seq = k x 3360)")
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--variants", default="code,nosync,nocomm")
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop starting points after this")
    ap.add_argument("--cpu", action="store_true", help="dry run on CPU (gloo, no timing meaning)")
    a = ap.parse_args()
    t_start = time.time()

    flash = install_flash_adapter(a.cpu)
    if a.cpu:
        install_cpu_fakes()
    sys.path.insert(0, HERE)
    import hamilton_attention as ha

    if a.cpu:
        dist.init_process_group("gloo")
        dev = torch.device("cpu")
    else:
        lr = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(lr)
        dev = torch.device(f"cuda:{lr}")
        dist.init_process_group("nccl", device_id=dev)
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype = torch.bfloat16 if not a.cpu else torch.float32
    d = 64  # prof_perform sets d = 64 whatever it is given
    routing = shift_routing(n)
    os.makedirs(a.out, exist_ok=True)
    res_f = open(os.path.join(a.out, f"paper-code-n{n}.jsonl"), "a") if rank == 0 else None

    if rank == 0:
        env = {"flash": flash, "torch": torch.__version__, "gpus": n,
               "cuda": torch.version.cuda,
               "nccl": ".".join(map(str, torch.cuda.nccl.version())) if not a.cpu else None,
               "gpu": torch.cuda.get_device_name(0) if not a.cpu else "cpu",
               "warm": a.warm, "iters": a.iters,
               "env": {k: v for k, v in os.environ.items()
                       if k.startswith(("NCCL_", "TORCH_SYMM", "NVSHMEM"))}}
        json.dump(env, open(os.path.join(a.out, f"env-n{n}.json"), "w"), indent=1)

    issue = time_issue(ha, n, dev, dtype, 50)
    allissue = [None] * n
    dist.all_gather_object(allissue, issue)
    if rank == 0:
        res_f.write(json.dumps({"kind": "issue", "per_rank": allissue}) + "\n")
        res_f.flush()

    real_stream = torch.cuda.Stream
    for seq, b, h in points(a.points):
        go = [time.time() - t_start < a.budget_s]
        dist.broadcast_object_list(go, src=0)
        if not go[0]:
            if rank == 0:
                print(f"budget: stopping before seq {seq} batch {b} heads {h}", flush=True)
            break
        torch.manual_seed(42 + rank)
        data = chunk_tensors(ha, n, b, seq, h, d, dev, dtype)
        for variant in a.variants.split(","):
            if variant == "nosync":
                torch.cuda.Stream = NoHostSyncStream(real_stream)
            if variant == "nocomm":
                no_communication(ha, True)
            for prog in ("ring-full", "tasp-full", "zigzag-causal", "tasp-causal"):
                t0 = time.time()
                try:
                    per_rank = time_program(ha, prog, data, n, routing, a.warm, a.iters)
                    err = None
                except Exception as e:  # one point's failure (memory) must not end the run
                    per_rank, err = None, repr(e)[:300]
                    torch.cuda.empty_cache() if not a.cpu else None
                if rank == 0:
                    rec = {"kind": "pass", "program": prog, "variant": variant, "seq": seq,
                           "batch": b, "heads": h, "head_dim": d, "gpus": n,
                           "wall_s": round(time.time() - t0, 2)}
                    if per_rank is not None:
                        slow = [max(per_rank[r][i][0] for r in range(n)) for i in range(a.iters)]
                        slow.sort()
                        rec.update({
                            "ms_median_slowest": slow[len(slow) // 2],
                            "ms_mean_slowest": sum(slow) / len(slow),
                            "ms_mean_rank0": sum(x[0] for x in per_rank[0]) / a.iters,
                            "comm_ms_mean_rank0": sum(x[1] for x in per_rank[0]) / a.iters,
                            "comp_ms_mean_rank0": sum(x[2] for x in per_rank[0]) / a.iters,
                            "per_rank": per_rank})
                    else:
                        rec["error"] = err
                    res_f.write(json.dumps(rec) + "\n")
                    res_f.flush()
                    print(prog, variant, seq, b, h, rec.get("ms_median_slowest", err), flush=True)
            torch.cuda.Stream = real_stream
            no_communication(ha, False)
        cat_ms = time_cat(data[0][1], n, 10, a.cpu)
        allcat = [None] * n
        dist.all_gather_object(allcat, cat_ms)
        if rank == 0:
            res_f.write(json.dumps({"kind": "cat", "seq": seq, "batch": b, "heads": h,
                                    "head_dim": d, "gpus": n,
                                    "ms_per_pass_per_rank": allcat}) + "\n")
            res_f.flush()
        del data
        if not a.cpu:
            torch.cuda.empty_cache()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
