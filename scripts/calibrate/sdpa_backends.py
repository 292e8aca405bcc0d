"""Two implementations of the same attention for calibrate.py --kernel: PyTorch's
scaled_dot_product_attention restricted to one backend each with
torch.nn.attention.sdpa_kernel.  Each follows user_kernel.py's signature,
out = f(q, k, v, causal) on (B, S, H, D) views, and differs from the other
only in the backend, so their tables differ as the two kernels do:

    calibrate.py --parts kernels --kernel scripts/calibrate/sdpa_backends.py:flash ...
    calibrate.py --parts kernels --kernel scripts/calibrate/sdpa_backends.py:efficient ...

(calibration/h100x1-sdpa/README.md has the runs.)  GQA (Hk < H) goes
through SDPA's enable_gqa, which not every backend takes; the calibration
runs use Hk = H.
"""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def _sdpa(backend, q, k, v, causal):
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=causal,
                                           enable_gqa=k.shape[2] != q.shape[2])
    return o.transpose(1, 2)  # causal: top-left aligned where sq != sk (square only here)


def flash(q, k, v, causal):
    """SDPA's flash-attention backend (FlashAttention-2 in PyTorch)."""
    return _sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, causal)


def efficient(q, k, v, causal):
    """SDPA's memory-efficient backend (xFormers' cutlass kernel in PyTorch)."""
    return _sdpa(SDPBackend.EFFICIENT_ATTENTION, q, k, v, causal)


def math(q, k, v, causal):
    """SDPA's math backend (unfused matmul, softmax, matmul; the whole
    sq x sk score matrix in memory: short sequences only)."""
    return _sdpa(SDPBackend.MATH, q, k, v, causal)
