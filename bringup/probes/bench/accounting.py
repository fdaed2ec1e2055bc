"""FLOP and byte accounting per kernel, from shapes alone (exact; what an ideal kernel must do).

Bytes are the minimum DRAM traffic: every operand read once and every result written once.
The bandwidth kernels count bytes the BabelStream way (copy/scale touch 2 arrays, add/triad 3,
dot reads 2 and writes a scalar, which is not counted).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    """What one call of a kernel must do."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity in FLOP per byte (None when nothing moves)."""
        return self.flops / self.bytes if self.bytes else None


def matmul_work(m: int, n: int, k: int, elem_bytes: int) -> Work:
    """C[m,n] = A[m,k] @ B[k,n]: 2mnk FLOPs (a multiply and an add per term); read A, B, write C."""
    return Work(flops=2.0 * m * n * k, bytes=float(elem_bytes * (m * k + k * n + m * n)))


STREAM_ARRAYS = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "dot": 2}
STREAM_FLOPS_PER_ELEMENT = {"copy": 0, "scale": 1, "add": 1, "triad": 2, "dot": 2}


def stream_work(kernel: str, n: int, elem_bytes: int) -> Work:
    """BabelStream accounting for arrays of n elements:
    copy c=a; scale b=s*c; add c=a+b; triad a=b+s*c; dot sum(a*b)."""
    return Work(
        flops=float(STREAM_FLOPS_PER_ELEMENT[kernel] * n),
        bytes=float(STREAM_ARRAYS[kernel] * n * elem_bytes),
    )


def sdpa_work(batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, elem_bytes: int,
              causal: bool) -> Work:
    """Scaled dot-product attention: QK^T and PV are 2·q·kv·d FLOPs each per head (4 in all);
    causal masking halves the useful work (the FlashAttention convention). Softmax FLOPs are
    not counted. Bytes: read Q, K, V and write O once."""
    flops = 4.0 * batch * heads * q_len * kv_len * head_dim
    if causal:
        flops /= 2
    elems = batch * heads * head_dim * (2 * q_len + 2 * kv_len)
    return Work(flops=flops, bytes=float(elems * elem_bytes))


def transfer_work(nbytes: int) -> Work:
    """A host<->device copy moves nbytes once (counted once, as the link carries it once)."""
    return Work(flops=0.0, bytes=float(nbytes))


def weight_only_work(m: int, n: int, k: int, act_bytes: int, weight_bits: int, scale_bytes: int) -> Work:
    """y[m,n] = x[m,k] @ dequant(W[n,k]).T with W stored in weight_bits per element: 2mnk FLOPs; read x, the
    packed weights (n*k*bits/8 bytes) and their scales/zeros (scale_bytes in all), write y."""
    return Work(flops=2.0 * m * n * k,
                bytes=float(act_bytes * (m * k + m * n) + n * k * weight_bits // 8 + scale_bytes))


def scaled_matmul_work(m: int, n: int, k: int, in_bytes: int, out_bytes: int, scale_bytes: int) -> Work:
    """C[m,n] = (A[m,k] * sa) @ (B[k,n] * sb) with A and B in in_bytes per element (int8, float8): 2mnk FLOPs;
    read A, B and the scales, write C in out_bytes per element."""
    return Work(flops=2.0 * m * n * k, bytes=float(in_bytes * (m * k + k * n) + out_bytes * m * n + scale_bytes))
