"""The default spec: a mixed machine, a small, slower integrated device beside a large discrete one.

The native list is the core an inference stack runs on; the sampling ops (sort, topk, multinomial) and one piece of
RMS norm (rsqrt) are left to the CPU fallback, so a readiness run on this spec has real host fallbacks to report.
Of the quantized matmuls only int8's (`_weight_int8pack_mm`) is native: the probe proves int8 weight-only there and
the runner serves it; int4 and fp8 are not, so their refusals show.
"""

DEFAULT_NATIVE = (
    # matrix products
    "mm", "bmm", "addmm", "baddbmm",
    # elementwise arithmetic and activations
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "sigmoid", "silu", "gelu", "cos",
    "sin", "abs", "reciprocal", "relu", "erf", "clamp", "clamp_min", "maximum", "minimum", "where", "masked_fill_",
    "zero_", "fill_",
    # comparisons and masks
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "bitwise_and", "bitwise_or",
    "isnan", "isneginf", "isposinf", "all", "any", "triu", "tril",
    # reductions and normalisation
    "sum", "mean", "amax", "max", "argmax", "cumsum", "_softmax", "_log_softmax",
    # indexing, joining, embedding lookups (embedding reaches the device as index_select), KV-cache writes
    "cat", "index", "index_select", "_embedding_bag", "_embedding_bag_forward_only", "_index_put_impl_",
    "index_copy", "gather", "scatter", "arange",
    # attention on the host kernels
    "_fused_sdp_choice", "_scaled_dot_product_flash_attention_for_cpu",
    # int8 weight-only matmul (the runner's int8_pack kind); int4 and float8 (_weight_int4pack_mm*, _scaled_mm)
    # are left out, so their refusals are exercised
    "_weight_int8pack_mm",
)

DEFAULT_SPEC: dict = {
    "devices": [
        {"name": "Emu iGPU", "integrated": True, "memory": "512MiB", "speed": 0.5},
        {"name": "Emu dGPU", "integrated": False, "memory": "8GiB", "speed": 1.0},
    ],
    "refused_dtypes": ["float64"],
    "native": list(DEFAULT_NATIVE),
    "wrong": {},
    "abort": [],
}
