#!/usr/bin/env python3
"""Run calibrate.py's softmax pass programs on CPU processes, without a GPU,
and check each against autograd as the tool does before timing
(calibrate.check_passes: output, dQ, dK, dV within 2e-2 of the reference's
largest magnitude).  For changing a program where no GPU is at hand; the
timed runs check again on the GPUs.

    python3 scripts/calibrate/cpu_check.py --ranks 4 --tokens 64 \\
        --schedules ring:full,zigzag:causal,stripe:causal,double-ring-w2:causal

N processes talk through gloo; PyTorch's flash kernels (CUDA only) are
replaced by float32 attention in plain torch ops with the same contract
(forward: bf16 block output and float32 log-sum-exp; backward: the
gradients from the final output and log-sum-exp, causal bottom-right
aligned).  Needs only a CPU build of PyTorch (Debian's python3-torch
1.13 runs it).  gloo has no bf16 all_to_all there, so Ulysses and USP
fail with "Invalid scalar type": not a fault of the programs.  Every
program also runs once without its communication (the timed "comm off"
variant)."""
import argparse
import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def scores(torch, q, k, causal):
    """(B, Sq, H, D) x (B, Sk, H, D) -> (B, H, Sq, Sk) float32, masked."""
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) / q.shape[-1] ** 0.5
    if causal:
        sq, sk = q.shape[1], k.shape[1]
        keep = torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq)
        s = s.masked_fill(~keep, float("-inf"))
    return s


def worker(ranks, tokens, schedules):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    import calibrate as cal

    def flash(q, k, v, causal):
        s = scores(torch, q, k, causal)
        lse = torch.logsumexp(s, -1)
        o = torch.einsum("bhqk,bkhd->bqhd", torch.exp(s - lse.unsqueeze(-1)), v.float())
        return o.to(torch.bfloat16), lse

    def flash_bwd(dout, q, k, v, out, lse, causal):
        p = torch.exp(scores(torch, q, k, causal) - lse.float().unsqueeze(-1))
        do = dout.float()
        dv = torch.einsum("bhqk,bqhd->bkhd", p, do)
        dp = torch.einsum("bqhd,bkhd->bhqk", do, v.float())
        delta = (do * out.float()).sum(-1).transpose(1, 2).unsqueeze(-1)
        ds = p * (dp - delta) / q.shape[-1] ** 0.5
        dq = torch.einsum("bhqk,bkhd->bqhd", ds, k.float())
        dk = torch.einsum("bhqk,bqhd->bkhd", ds, q.float())
        return tuple(x.to(torch.bfloat16) for x in (dq, dk, dv))

    def sdpa(q, k, v, is_causal=False):  # (B, H, S, D), as the reference calls it
        s = scores(torch, q.transpose(1, 2), k.transpose(1, 2), is_causal)
        return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, -1), v.float()).to(q.dtype)

    cal.DEV = "cpu"
    cal.flash, cal.flash_bwd = flash, flash_bwd
    F.scaled_dot_product_attention = sdpa
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    B, H, D = 1, 4, 16
    for sched, causal in schedules:
        p = cal.make_pass(sched, causal, ranks, rank, B, H, D, tokens, False)
        p.prepare_backward(torch.randn_like(p.q))
        p.run_backward()
    worst, failed = cal.check_passes(ranks, rank, B, H, D, tokens, schedules, stop=False)
    if rank == 0:
        print("cpu_check: largest errors " + json.dumps({k: round(v, 5) for k, v in
                                                          worst.items()}), flush=True)
        print(f"cpu_check: {len(worst)} passed, {len(failed)} failed", flush=True)
    dist.destroy_process_group()
    return 1 if failed else 0


def parse(spec):
    out = []
    for item in spec.split(","):
        name, _, mask = item.partition(":")
        if mask not in ("full", "causal"):
            print(f"cpu_check: --schedules: {item!r} is not NAME:full or NAME:causal",
                  file=sys.stderr)
            raise SystemExit(2)
        out.append((name, mask == "causal"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64, help="tokens per rank")
    ap.add_argument("--schedules", default="ring:full,ring:causal,zigzag:causal,"
                    "stripe:causal,double-ring-w2:causal")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    schedules = parse(a.schedules)
    if a.worker:
        sys.exit(worker(a.ranks, a.tokens, schedules))
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for r in range(a.ranks):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(a.ranks), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker",
                                       "--ranks", str(a.ranks), "--tokens", str(a.tokens),
                                       "--schedules", a.schedules], env=env))
    rcs = [p.wait() for p in procs]
    sys.exit(max(rcs))


if __name__ == "__main__":
    main()
