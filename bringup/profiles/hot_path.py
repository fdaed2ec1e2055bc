"""The ops on the runner's hot path, by their verify-ops names: what every forward pass and sampling step runs.

Defined once here, below the runner and the verdict: the plan needs the decoder's ops verified in a dtype before it
picks that dtype, and the verdict warns when a hot-path op runs through the host (a fallback off the hot path is
listed for information only).
"""

# the ops the decoder runs in the model dtype; a low-precision dtype needs these verified, not every op
DECODER_OPS: frozenset[str] = frozenset({
    "matmul", "linear", "addmm", "bmm", "softmax", "log_softmax", "rms_norm", "silu", "mul", "add", "embedding",
    "rotary", "index_copy", "index_select", "cat", "masked_fill", "rsqrt", "mean", "pow", "cast",
})
FUSED_NORM_OPS: frozenset[str] = frozenset({"F.rms_norm"})  # rms_norm's float32 form (runner/model/norm.py)
ATTENTION_OPS: frozenset[str] = frozenset({"sdpa_math", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn"})
# sampling runs on the step's float32 logits, on the model's device (runner/engine/sampling.py)
SAMPLING_OPS: frozenset[str] = frozenset({"argmax", "topk", "sort", "multinomial", "cumsum"})
HOT_PATH_OPS: frozenset[str] = DECODER_OPS | FUSED_NORM_OPS | ATTENTION_OPS | SAMPLING_OPS


def on_hot_path(op: str) -> bool:
    return op in HOT_PATH_OPS
