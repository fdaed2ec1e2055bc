"""Every decoder layer of a decode step in one host-kernel call (kernels/decode_layers.cpp, built by host_build).

On a CPU a small model's decode step is weight streaming plus some twenty small ops per layer, each a Python
call and a dispatch (about 2 ms of a 125M model's step). This kernel runs all the layers of a decode step in
one call, with the weights the model already holds as panels: the embedding, the final norm and the LM head stay
in Python. It computes what the decoder's modules compute for Llama-style layers only — `cannot_fuse` says why
any other model is not served by it — and the plan uses it only where it matched the modules on the served
model and measured faster than them (plan/host_kernels.py, plan/confirm.py).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import fields, replace

import torch

from bringup.backends.host import is_host
from bringup.runner.host.huge_pages import HugePageBlock
from bringup.runner.host.paged_decode import HOST_KERNELS, check_context
from bringup.runner.model.attention_layer import AttentionMetadata, AttentionOps
from bringup.runner.model.batch_inputs import SeqChunk, build_inputs
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import MLP, DecoderLayer, DecoderModel
from bringup.runner.model.norm import RMSNorm
from bringup.runner.weights.formats.integer import GROUP, INT4_GROUPS, KERNEL_FORMATS, group_why_not, row_bytes
from bringup.runner.weights.kernels.build import HostKernelInputError, load, require_host_tensor
from bringup.runner.weights.kinds import PANELS
from bringup.runner.weights.layout_linear import LayoutLinear
from bringup.runner.weights.layouts import PANEL

WEIGHTS_PER_LAYER, DIMS = 12, 12  # the kernel's Weight and Dim enums
FORMATS = {PANELS: 0, **KERNEL_FORMATS}  # the weight kinds the kernel reads, as its dims[WEIGHT_FORMAT]
QUANTIZED_DTYPES = (torch.float32,)  # int8 / int4 weights: float32 activations only
# How far one of the kernel's layers may be from the model's own on the check (each given the same residual stream),
# per dtype: (largest difference relative to the largest magnitude, NMSE). Layer by layer a value one rounding apart
# stays one value apart; through all the layers the flip propagates (SmolLM2-135M bfloat16: an NMSE of 2.4e-4 after
# 30 layers with AMX products on both sides, above bfloat16's own 2.1e-4 from float32 on a 125M Llama), so a bound
# on the whole model must allow bfloat16's own error and lets a 1 % error through. Measured per layer on SmolLM2-135M
# (2-core Xeon with AMX): float32 5.0e-7 and 4.9e-13, bfloat16 4.9e-4 and 1.7e-7, the worst of its 30 layers. The
# bounds allow every value of a layer one bfloat16 rounding (2^-8) apart (an NMSE of at most 1.5e-5): an error of
# 1 % on every value (1e-4) or on half of them is caught.
TOLERANCES = {torch.float32: (1e-5, 1e-10), torch.bfloat16: (1e-2, 1e-5)}
# int8 / int4: the activations are rounded to int8 codes per block of 32, and a float32 difference of one ulp in a
# normalised row moves a value across a code boundary now and then (one code step, 1/127 of its block's largest
# value, on that product) — measured on SmolLM2-135M int8: 8.2e-3 (relative) and an NMSE of 3.1e-4 after 30 layers.
# The bounds (checked layer by layer, as the others) allow about three times that NMSE; a scale off by 1.5 or a
# block's minimum dropped is orders beyond.
QUANTIZED_TOLERANCE = (5e-2, 1e-3)
ENTRY_POINTS = {torch.float32: "bringup_decode_layers", torch.bfloat16: "bringup_decode_layers_bf16"}


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    lib = load("decode_layers.cpp", HOST_KERNELS)
    if lib.bringup_decode_layers_abi() != WEIGHTS_PER_LAYER * 100 + DIMS:
        raise HostKernelInputError(f"decode_layers.cpp has ABI {lib.bringup_decode_layers_abi()}, expected "
                                   f"{WEIGHTS_PER_LAYER * 100 + DIMS}")
    ptr, i64 = ctypes.c_void_p, ctypes.c_int64
    for name in ENTRY_POINTS.values():
        entry = getattr(lib, name)
        entry.argtypes = [ptr, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ctypes.c_float, ctypes.c_float, ptr]
        entry.restype = None
    return lib


def cannot_fuse(model: DecoderModel, max_model_len: int) -> str | None:
    """None when every layer of `model` is one the kernel computes exactly; otherwise why not (one line)."""
    name, c = type(model).__name__, model.config
    if not is_host(model.device):
        return f"a host-memory kernel; the model is on {model.device}"
    if model.dtype not in ENTRY_POINTS:
        return f"float32 and bfloat16 only; the model runs {str(model.dtype).removeprefix('torch.')}"
    for i, layer in enumerate(model.layers):
        why = layer_differs(layer, max_model_len)
        if why:
            return f"{name} layer {i}: {why}"
    kind = fused_kind(model)
    if kind is None:
        return f"reads weights stored as {' or '.join(FORMATS)}; the layout stores {' and '.join(model.stored_kinds)}"
    if kind == PANELS and c.hidden_size % PANEL:
        return f"hidden size {c.hidden_size} is not a multiple of the panel width {PANEL}"
    if kind != PANELS and model.dtype not in QUANTIZED_DTYPES:
        return f"{kind} weights with float32 activations only; the model runs {str(model.dtype).removeprefix('torch.')}"
    if kind != PANELS:
        for size in (c.hidden_size, c.num_heads * c.head_dim, c.intermediate_size):
            why = group_why_not(size, INT4_GROUPS.get(kind, GROUP))
            if why:
                return why
    return None


def fused_kind(model: DecoderModel) -> str | None:
    """The weight kind the kernel would read for this model's layers: panels or int8 / int4, whichever is stored."""
    return next((kind for kind in FORMATS if kind in model.stored_kinds), None)


def layer_differs(layer: torch.nn.Module, max_model_len: int) -> str | None:
    """What in this layer the kernel does not compute (Llama's layer is what it computes)."""
    if type(layer) is not DecoderLayer:
        return f"a {type(layer).__name__}, not a plain pre-norm layer"
    if any(type(getattr(layer, n)) is not RMSNorm for n in layer.norm_names):
        return "its norms are not plain RMSNorm"
    if type(layer.mlp) is not MLP or layer.mlp.act is not torch.nn.functional.silu:
        return "its MLP is not SwiGLU"
    spec = layer.self_attn.spec
    if spec.qk_norm:
        return "q/k norms"
    if spec.softcap is not None:
        return "attention logit soft-capping"
    if spec.window is not None and spec.window < max_model_len:
        return f"a sliding window of {spec.window} < max_model_len {max_model_len}"
    return None


class FusedDecode:
    """The decode-step layers of one model through the kernel; holds the pointer table of its weights and caches
    (built once, after the plan fixed the layout and the KV cache was allocated)."""

    def __init__(self, model: DecoderModel) -> None:
        self.model, c = model, model.config
        self.kind = fused_kind(model) or PANELS
        self.rows = 0  # decode steps up to this many sequences run here past the layout's small steps (start-up)
        self.huge_pages = _into_one_block(model, self.kind)
        attn = model.layers[0].self_attn
        self.keep: list[torch.Tensor] = []  # every tensor a pointer in the table points into
        pointers: list[int] = []
        for layer in model.layers:
            a, mlp = layer.self_attn, layer.mlp
            _check_layer(layer, c, self.kind)
            for t in (layer.input_layernorm.weight, *_linear(a.qkv_proj, self.kind), *_linear(a.o_proj, self.kind),
                      layer.post_attention_layernorm.weight, *_linear(mlp.gate_up_proj, self.kind),
                      *_linear(mlp.down_proj, self.kind), a.cache.k, a.cache.v):
                pointers.append(self._pointer(t))
        self.table = (ctypes.c_void_p * len(pointers))(*pointers)
        k = attn.cache.k
        self.slots_total = k.shape[1]
        self.widths = (_width(attn.qkv_proj, self.kind), _width(model.layers[0].mlp.gate_up_proj, self.kind))
        self.eps, self.scale = c.rms_norm_eps, attn.scale
        self.rotary_half = model.rope_cos.shape[1]
        for name in ("rope_cos", "rope_sin"):
            require_host_tensor(name, getattr(model, name), model.dtype, dims=2, contiguous=True)
        self.dims = [c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size,
                     self.rotary_half, *self.widths, self.slots_total, FORMATS[self.kind]]  # the kernel's Dim order;
        # LD_SLOTS is added per step
        self.work_per_row = 2 * c.hidden_size + self.widths[0] + 2 * c.num_heads * c.head_dim + self.widths[1] + \
            c.intermediate_size
        self.entry = getattr(library(), ENTRY_POINTS[model.dtype])  # built (or found) now, not on the first request
        self._last_dims: torch.Tensor | None = None
        self._scratch = torch.empty(0, dtype=torch.float32)

    def _pointer(self, t: torch.Tensor | None) -> int:
        if t is None:
            return 0
        dtype = torch.uint8 if t.dtype == torch.uint8 and self.kind != PANELS else self.model.dtype
        require_host_tensor("weight", t, dtype, dims=t.dim(), contiguous=True)
        self.keep.append(t)
        return t.data_ptr()

    def usable(self) -> bool:
        """Whether the model still stores its weights as the kernel reads them (a layout check or a fallback may
        drop them)."""
        return self.kind in self.model.stored_kinds

    def serves(self, batch: int) -> bool:
        """Whether it runs a decode step of `batch` sequences: the layout's small steps (whatever kind the modules
        read for them, since the kernel's steps were timed against theirs), any step the panels serve, and steps up to
        `rows` where start-up timed the kernel faster than the modules there."""
        layout = self.model.layout  # the executor drops the kernel whenever the panels go (a panels fallback)
        return batch <= max(layout.switch_tokens, self.rows) or layout.for_tokens(batch) == self.kind

    def serves_every_decode_step(self) -> bool:
        return self.usable() and self.model.layout.large == self.kind

    def hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """The final-norm hidden states [B, hidden] of a decode step (one new token per sequence), its K/V
        written into the cache: what model(input_ids, positions, meta) returns."""
        m = self.model
        self._check(input_ids, positions, meta)
        x = m.embed[input_ids].contiguous()
        self._run(x, positions, meta, 0, len(m.layers))
        return m.norm(x)

    def layer(self, index: int, x: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> None:
        """Layer `index` alone on the residual stream x ([B, hidden], contiguous, updated in place)."""
        require_host_tensor("x", x, self.model.dtype, dims=2, contiguous=True)
        if list(x.shape) != [positions.shape[0], self.model.config.hidden_size] or \
                not 0 <= index < len(self.model.layers):
            raise HostKernelInputError(f"x of shape {list(x.shape)} for layer {index}: not this step's residual stream")
        self._check(torch.zeros_like(positions), positions, meta)  # token 0 for the ids a layer does not read
        self._run(x, positions, meta, index, 1)

    def _run(self, x: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata, first: int, layers: int) -> None:
        m = self.model
        batch, slots = x.shape[0], meta.context_slots.contiguous()
        dims, work = self._dims(slots.shape[1]), self._work(batch)
        if layers != len(m.layers):
            dims = dims.clone()
            dims[0] = layers  # the kernel's Dim LAYERS
        table = ctypes.addressof(self.table) + first * WEIGHTS_PER_LAYER * ctypes.sizeof(ctypes.c_void_p)
        self.entry(x.data_ptr(), batch, dims.data_ptr(), table, m.rope_cos.data_ptr(), m.rope_sin.data_ptr(),
                   positions.data_ptr(), meta.slot_mapping.data_ptr(), slots.data_ptr(),
                   meta.context_lens.data_ptr(), self.eps, self.scale, work.data_ptr())

    def _dims(self, ld_slots: int) -> torch.Tensor:
        """The kernel's dims for context_slots of `ld_slots` columns (kept: a step reuses the last ones)."""
        if self._last_dims is None or int(self._last_dims[-1]) != ld_slots:
            self._last_dims = torch.tensor([*self.dims, ld_slots], dtype=torch.int64)
        return self._last_dims

    def _work(self, batch: int) -> torch.Tensor:
        """Scratch for a step of `batch` sequences (kept and grown: only the kernel reads it, within a call)."""
        if self._scratch.numel() < batch * self.work_per_row:
            self._scratch = torch.empty(batch * self.work_per_row, dtype=torch.float32)
        return self._scratch

    def _check(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> None:
        """HostKernelInputError unless every index the kernel follows stays inside its tables."""
        batch = input_ids.shape[0]
        for name, t in (("input_ids", input_ids), ("positions", positions), ("slot_mapping", meta.slot_mapping)):
            require_host_tensor(name, t, torch.int64, dims=1, contiguous=True)
            if t.shape[0] != batch:
                raise HostKernelInputError(f"{name} has {t.shape[0]} entries for {batch} tokens")
        if meta.context_lens is None:
            raise HostKernelInputError("context_lens is missing; a decode step needs each sequence's length")
        require_host_tensor("context_slots", meta.context_slots, torch.int64, dims=2)
        require_host_tensor("context_lens", meta.context_lens, torch.int64, dims=1, contiguous=True)
        if meta.context_slots.shape[0] != batch or meta.context_lens.shape[0] != batch:
            raise HostKernelInputError(f"context_slots and context_lens must have {batch} rows, one per token")
        for name, t, limit in (("input_ids", input_ids, self.model.embed.shape[0]),
                               ("positions", positions, self.model.rope_cos.shape[0]),
                               ("slot_mapping", meta.slot_mapping, self.slots_total)):
            values = t.tolist()  # a decode step's few entries: faster as a list than as a reduction
            low, high = min(values), max(values)
            if low < 0 or high >= limit:
                raise HostKernelInputError(f"{name} holds {low}..{high}; each must be in [0, {limit})")
        check_context(meta.context_slots, meta.context_lens, self.slots_total)


def _into_one_block(model: DecoderModel, kind: str) -> bool:
    """Move every linear weight stored as `kind` (the layers' and the head's) into one block advised for huge pages
    (host/huge_pages.py); whether the advice was taken."""
    linears = [linear for linear in model.linear_layers() if kind in linear.kinds]
    block = HugePageBlock([linear.weight(kind).numel() * linear.weight(kind).element_size() for linear in linears])
    for i, linear in enumerate(linears):
        linear.keep(kind, block.place(i, linear.weight(kind)))
    return block.advised


def _check_layer(layer: DecoderLayer, c: ModelConfig, kind: str) -> None:
    """HostKernelInputError unless each weight, bias and cache has the shape the kernel reads for it."""
    a, mlp = layer.self_attn, layer.mlp
    q_width, kv_width = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    for name, linear, k, n in (("qkv_proj", a.qkv_proj, c.hidden_size, q_width + 2 * kv_width),
                               ("o_proj", a.o_proj, q_width, c.hidden_size),
                               ("gate_up_proj", mlp.gate_up_proj, c.hidden_size, 2 * c.intermediate_size),
                               ("down_proj", mlp.down_proj, c.intermediate_size, c.hidden_size)):
        stored, expected = linear.weight(kind), _stored_shape(kind, k, n)
        if list(stored.shape) != expected:
            raise HostKernelInputError(f"{name} {kind} weights have shape {list(stored.shape)}; expected {expected}")
        width = _width(linear, kind)
        if linear.bias is not None and linear.bias.shape != (width,):
            raise HostKernelInputError(f"{name} bias has shape {list(linear.bias.shape)}; expected [{width}]")
    for name, norm in (("input_layernorm", layer.input_layernorm), ("post_attention_layernorm",
                                                                      layer.post_attention_layernorm)):
        if norm.weight.shape != (c.hidden_size,):
            raise HostKernelInputError(f"{name} weight has shape {list(norm.weight.shape)}; expected [{c.hidden_size}]")
    if a.cache.k is None or a.cache.k.shape != a.cache.v.shape or a.cache.k.shape[0] != c.num_kv_heads or \
            a.cache.k.shape[2] != c.head_dim:
        raise HostKernelInputError("the KV cache is not allocated as [kv_heads, slots, head_dim] for this model")


def _stored_shape(kind: str, k: int, n: int) -> list[int]:
    if kind == PANELS:
        return [-(-n // PANEL), k, PANEL]
    return [n, row_bytes(kind, k)]


def _linear(linear: LayoutLinear, kind: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    return linear.weight(kind), linear.bias


def _width(linear: LayoutLinear, kind: str) -> int:
    """The output columns the kernel writes: panels round them up to whole panels."""
    stored = linear.weight(kind)
    return stored.shape[0] * PANEL if kind == PANELS else stored.shape[0]


def check_on_model(fused: FusedDecode, block_size: int, max_model_len: int, kv_blocks: int) -> str | None:
    """None when each layer of the kernel matches the model's own layer, with plain matmul-softmax attention (the
    arithmetic the kernel's attention follows), on a ragged decode step of the served model (three sequences, their
    prompts written into the cache first by the modules), every layer given the residual stream the modules gave it;
    otherwise the first layer that differs, and by how much. Layer by layer, a value one rounding apart is one value
    apart, where through all the layers the flip would propagate."""
    model = fused.model
    lengths = [n for n in (5, 21, 40) if n <= max_model_len]
    tables, blocks = block_tables(lengths, block_size)
    if blocks > kv_blocks:
        return f"no room in the KV cache ({kv_blocks} blocks) for the check"
    gen = torch.Generator().manual_seed(0)
    chunks = [SeqChunk(torch.randint(0, model.config.vocab_size, (n,), generator=gen).tolist(), n - 1, table)
              for n, table in zip(lengths, tables, strict=True)]
    tolerance = TOLERANCES[model.dtype] if fused.kind == PANELS else QUANTIZED_TOLERANCE
    with torch.inference_mode():
        prompts = build_inputs([SeqChunk(c.token_ids[:-1], 0, c.block_table) for c in chunks], block_size,
                               model.config.num_queries_per_kv, model.device, model.config.attention_window)
        model(prompts.input_ids, prompts.positions, prompts.meta)
        step = build_inputs(chunks, block_size, model.config.num_queries_per_kv, model.device,
                            model.config.attention_window)
        planned = replace(model.ops)
        _assign(model.ops, AttentionOps())  # plain matmul-softmax alone, the arithmetic the kernel follows
        try:  # (the planned attention is checked on its own)
            streams = layer_streams(model, step.input_ids, step.positions, step.meta)
        finally:
            _assign(model.ops, planned)
        return first_differing_layer(lambda i, x: fused.layer(i, x, step.positions, step.meta), streams, tolerance)


def _assign(ops: AttentionOps, source: AttentionOps) -> None:
    """`source`'s implementations into `ops`, the instance every layer holds."""
    for item in fields(source):
        setattr(ops, item.name, getattr(source, item.name))


def block_tables(lengths: list[int], block_size: int) -> tuple[list[list[int]], int]:
    """Consecutive blocks from the cache's first for sequences of `lengths` tokens, and how many blocks in all."""
    tables, first = [], 0
    for n in lengths:
        blocks = -(-n // block_size)
        tables.append(list(range(first, first + blocks)))
        first += blocks
    return tables, first


def first_differing_layer(run_layer: Callable[[int, torch.Tensor], None], streams: list[torch.Tensor],
                          tolerance: tuple[float, float]) -> str | None:
    """None when `run_layer(i, x)` (layer i on x, in place) turns each layer's input stream into one within
    `tolerance` of the next; otherwise the first layer that does not, and by how much."""
    for i in range(len(streams) - 1):
        got = streams[i].clone()
        run_layer(i, got)
        why = differs(got.double(), streams[i + 1].double(), *tolerance)
        if why is not None:
            return f"layer {i}: {why}"
    return None


def layer_streams(model: DecoderModel, input_ids: torch.Tensor, positions: torch.Tensor,
                  meta: AttentionMetadata) -> list[torch.Tensor]:
    """The residual stream into each of the model's layers and out of the last, through its modules (its forward,
    one layer at a time, before the final norm)."""
    kind = model.layout.for_tokens(input_ids.shape[0])
    x = model.embed[input_ids]
    rope = model.rope_cos[positions].unsqueeze(1), model.rope_sin[positions].unsqueeze(1)
    streams = [x.contiguous()]
    for layer in model.layers:
        x = layer(x, kind, *rope, meta)
        streams.append(x.contiguous())
    return streams


def differs(got: torch.Tensor, want: torch.Tensor, max_relative: float, max_nmse: float) -> str | None:
    """None when `got` is within both bounds of `want`; otherwise by how much it differs."""
    worst = ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
    nmse = ((got - want).square().sum() / want.square().sum().clamp_min(1e-300)).item()
    if worst <= max_relative and nmse <= max_nmse:
        return None
    return f"differs from the modules by {worst:.2g} (relative; at most {max_relative:g}) and NMSE {nmse:.2g} " \
           f"(at most {max_nmse:g}) on a check"
