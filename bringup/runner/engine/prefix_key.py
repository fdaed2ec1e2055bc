"""The prefix cache's keys: a chain over full KV blocks, rooted in the identity of what the K/V values depend on.

A block's key is a digest of its parent's key and its own token ids, so equal keys mean the same tokens at the same
positions after the same prefix. The root is a digest of the identity (cache_identity): the model's weights, the
dtype, the quantization and every plan setting that changes how K/V are computed or laid out, so a cache is never
read across a change of any of them.
"""

from __future__ import annotations

import hashlib
from array import array
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bringup.runner.plan.plan import ExecutionPlan

DIGEST_BYTES = 16
# plan settings whose values change the K/V a prompt leaves in the cache (the kernels that compute them, their
# precision, their layout); max_num_seqs, max_num_batched_tokens and the like do not
KV_SETTINGS = ("dtype", "quantization", "weight_layout", "attention", "compiled", "decode_layers",
               "prompt_layers", "experts")


def root_key(identity: str) -> bytes:
    return hashlib.blake2b(identity.encode(), digest_size=DIGEST_BYTES).digest()


def block_key(parent: bytes, token_ids: list[int]) -> bytes:
    digest = hashlib.blake2b(parent, digest_size=DIGEST_BYTES)
    digest.update(array("q", token_ids).tobytes())
    return digest.digest()


def cache_identity(weights: str, plan: ExecutionPlan) -> str:
    """What the cached K/V values depend on: the weights' identity (their files' digest), the K/V settings of
    `plan`, the block size and the device."""
    settings = "; ".join(f"{name}={getattr(plan, name).value!r}" for name in KV_SETTINGS)
    return f"weights={weights}; {settings}; block_size={plan.block_size}; device={plan.device}"
