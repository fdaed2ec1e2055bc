"""A prompt step's decoder layers with their element-wise parts in host kernels (kernels/prompt_ops.cpp).

A prompt step on a CPU is GEMMs (oneDNN, AMX where the CPU has it), attention, and some twenty element-wise ops per
layer that eager torch runs one by one, each widening bfloat16 to float32 and writing its result out: a third of a
bfloat16 step of SmolLM2-135M on a 2-core Xeon. Here each layer is four of the model's own products (its
LayoutLinear modules, the layout the plan chose), the model's attention (its `_attend`: the plan's implementation,
causal prompts and mixed steps included) and three kernel calls: the residual add with the norm after it, rotary
embedding with the K/V cache write, and SiLU(gate) * up. The same Llama-style layers as the fused decode layers, with
any weight kind (`cannot_fuse` says why another model is not served); the plan uses it only where it matched the
modules on the served model and measured faster (engine/startup/prompt.py, plan/prompt_layers.py).
"""

from __future__ import annotations

import ctypes
import functools

import torch

from bringup.backends.host import is_host
from bringup.runner.host import flash_prompt
from bringup.runner.host.decode_layers import (
    TOLERANCES,
    block_tables,
    first_differing_layer,
    layer_differs,
    layer_streams,
)
from bringup.runner.host.paged_decode import HOST_KERNELS
from bringup.runner.model.attention_layer import AttentionMetadata
from bringup.runner.model.batch_inputs import SeqChunk, build_inputs
from bringup.runner.model.decoder import DecoderModel
from bringup.runner.weights.kernels.build import HostKernelInputError, load, require_host_tensor

ABI = 1
SUFFIX = {torch.float32: "", torch.bfloat16: "_bf16"}


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    lib = load("prompt_ops.cpp", HOST_KERNELS)
    if lib.bringup_prompt_ops_abi() != ABI:
        raise HostKernelInputError(f"prompt_ops.cpp has ABI {lib.bringup_prompt_ops_abi()}, expected {ABI}")
    ptr, i64, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    for suffix in SUFFIX.values():
        getattr(lib, f"bringup_add_rms_norm{suffix}").argtypes = [ptr, ptr, i64, i64, ptr, f32, ptr]
        getattr(lib, f"bringup_rope_and_cache{suffix}").argtypes = [ptr, i64, i64, i64, i64, i64, i64, ptr, ptr, ptr,
                                                                      ptr, ptr, ptr, i64]
        getattr(lib, f"bringup_silu_mul{suffix}").argtypes = [ptr, i64, i64, i64, ptr]
    return lib


def cannot_fuse(model: DecoderModel, max_model_len: int) -> str | None:
    """None when every layer of `model` is one the kernels compute with the modules' products; otherwise why not."""
    if not is_host(model.device):
        return f"host-memory kernels; the model is on {model.device}"
    if model.dtype not in SUFFIX:
        return f"float32 and bfloat16 only; the model runs {str(model.dtype).removeprefix('torch.')}"
    if model.embed_scale is not None:
        return "the model scales its embeddings"
    for i, layer in enumerate(model.layers):
        why = "a layer split across devices" if hasattr(layer, "placed_on") else layer_differs(layer, max_model_len)
        if why:
            return f"{type(model).__name__} layer {i}: {why}"
    return None


class FusedPrompt:
    """The layers of one model for steps the fused decode layers do not run (prompts, mixed steps, large batches)."""

    def __init__(self, model: DecoderModel) -> None:
        self.model, c = model, model.config
        lib, suffix = library(), SUFFIX[model.dtype]
        self.add_rms_norm = getattr(lib, f"bringup_add_rms_norm{suffix}")
        self.rope_and_cache = getattr(lib, f"bringup_rope_and_cache{suffix}")
        self.silu_mul = getattr(lib, f"bringup_silu_mul{suffix}")
        first = model.layers[0].self_attn.cache.k
        if first is None:
            raise HostKernelInputError("the KV cache is not allocated yet")
        self.slots_total = first.shape[1]
        for layer in model.layers:  # every size a kernel reads from a table, checked once against the table
            cache = layer.self_attn.cache
            for name, t in (("k cache", cache.k), ("v cache", cache.v)):
                if t is None:
                    raise HostKernelInputError("the KV cache is not allocated yet")
                require_host_tensor(name, t, model.dtype, dims=3, contiguous=True)
                if list(t.shape) != [c.num_kv_heads, self.slots_total, c.head_dim]:
                    raise HostKernelInputError(f"the {name} has shape {list(t.shape)}; expected [{c.num_kv_heads}, "
                                               f"{self.slots_total}, {c.head_dim}]")
            for norm in (layer.input_layernorm, layer.post_attention_layernorm):
                require_host_tensor("norm weight", norm.weight, model.dtype, dims=1, contiguous=True)
                if norm.weight.shape[0] != c.hidden_size:
                    raise HostKernelInputError(f"a norm weight has {norm.weight.shape[0]} values for hidden size "
                                               f"{c.hidden_size}")
        for name in ("rope_cos", "rope_sin"):
            require_host_tensor(name, getattr(model, name), model.dtype, dims=2, contiguous=True)
        if 2 * model.rope_cos.shape[1] > c.head_dim:
            raise HostKernelInputError(f"rotary tables of {2 * model.rope_cos.shape[1]} dims for heads of {c.head_dim}")
        # prompts attend by the flash kernel straight from the cache (flash_prompt.py) where the plan says so
        # (plan/host_kernels.prompt_flash_verdict); otherwise by the model's attention as planned
        self.flash = False

    def hidden(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """The final-norm hidden states [T, hidden] of the step, its K/V written into the cache: what
        model(input_ids, positions, meta) returns."""
        m = self.model
        self._check(input_ids, positions, meta)
        x = m.embed[input_ids].contiguous()
        normed, delta = torch.empty_like(x), None
        kind = m.layout.for_tokens(x.shape[0])
        for layer in m.layers:
            delta = self._layer(layer, x, delta, normed, positions, meta, kind)
        x += delta  # rounded once, as the modules' residual add
        return m.norm(x)

    def layer(self, index: int, x: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> None:
        """Layer `index` alone on the residual stream x ([T, hidden], contiguous, updated in place)."""
        m = self.model
        require_host_tensor("x", x, m.dtype, dims=2, contiguous=True)
        if list(x.shape) != [positions.shape[0], m.config.hidden_size] or not 0 <= index < len(m.layers):
            raise HostKernelInputError(f"x of shape {list(x.shape)} for layer {index}: not this step's residual stream")
        self._check(torch.zeros_like(positions), positions, meta)  # token 0 for the ids a layer does not read
        kind = m.layout.for_tokens(x.shape[0])
        x += self._layer(m.layers[index], x, None, torch.empty_like(x), positions, meta, kind)

    def _layer(self, layer: torch.nn.Module, x: torch.Tensor, delta: torch.Tensor | None, normed: torch.Tensor,
               positions: torch.Tensor, meta: AttentionMetadata, kind: str) -> torch.Tensor:
        """One layer on x, after adding the previous layer's `delta` to it; what it adds to x in turn (its MLP's
        output: the next layer's norm adds it, in the same pass)."""
        m, c = self.model, self.model.config
        T, H, KV, D = x.shape[0], c.num_heads, c.num_kv_heads, c.head_dim
        a, mlp = layer.self_attn, layer.mlp
        self._norm(x, delta, layer.input_layernorm, normed)
        qkv = a.qkv_proj(normed, kind).contiguous()
        if qkv.shape[1] < (H + 2 * KV) * D:
            raise HostKernelInputError(f"q/k/v rows of {qkv.shape[1]} values for {H + 2 * KV} heads of {D}")
        self.rope_and_cache(qkv.data_ptr(), T, qkv.shape[1], H, KV, D, m.rope_cos.shape[1], m.rope_cos.data_ptr(),
                            m.rope_sin.data_ptr(), positions.data_ptr(), meta.slot_mapping.data_ptr(),
                            a.cache.k.data_ptr(), a.cache.v.data_ptr(), self.slots_total)
        q = qkv[:, : H * D].view(T, H, D)
        k = qkv[:, H * D: (H + KV) * D].view(T, KV, D)
        v = qkv[:, (H + KV) * D: (H + 2 * KV) * D].view(T, KV, D)
        attended = a.o_proj(self._attention(a, q, k, v, meta), kind).contiguous()
        self._norm(x, attended, layer.post_attention_layernorm, normed)
        gate_up = mlp.gate_up_proj(normed, kind).contiguous()
        inter = c.intermediate_size
        if gate_up.shape[1] != 2 * inter:
            raise HostKernelInputError(f"gate/up rows of {gate_up.shape[1]} values for 2 x {inter}")
        act = torch.empty(T, inter, dtype=x.dtype)
        self.silu_mul(gate_up.data_ptr(), T, gate_up.shape[1], inter, act.data_ptr())
        return mlp.down_proj(act, kind).contiguous()

    def _attention(self, a: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   meta: AttentionMetadata) -> torch.Tensor:
        """The layer's attention output [T, H*D]: each prompt's by the flash kernel over its slots in the cache (its
        K/V already written there), where `flash`; the model's own otherwise, and for decode rows."""
        if meta.parts is not None:
            return torch.cat([self._attention(a, q[part.first:part.end], k[part.first:part.end],
                                              v[part.first:part.end], part.meta) for part in meta.parts])
        spans = [(0, n) for n in meta.fresh] if meta.fresh is not None else meta.spans
        if spans is None or not self.flash:
            return a._attend(q, k, v, meta)
        out, first = torch.empty(q.shape[0], q.shape[1] * q.shape[2], dtype=q.dtype), 0
        for b, (cached, n) in enumerate(spans):
            end = first + n
            if flash_prompt.run(q[first:end], a.cache.k, a.cache.v, meta.context_slots[b, :cached + n], a.scale,
                                out[first:end]) is None:
                raise HostKernelInputError("the prompt flash kernel declined a prompt of "
                                           f"{n} tokens behind {cached}")
            first = end
        return out

    def _norm(self, x: torch.Tensor, delta: torch.Tensor | None, norm: torch.nn.Module, out: torch.Tensor) -> None:
        """x += delta (when given), then out = norm(x)."""
        self.add_rms_norm(x.data_ptr(), None if delta is None else delta.data_ptr(), x.shape[0], x.shape[1],
                          norm.weight.data_ptr(), norm.eps, out.data_ptr())

    def _check(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> None:
        """HostKernelInputError unless every index the kernels follow stays inside its table."""
        T = input_ids.shape[0]
        for name, t, limit in (("input_ids", input_ids, self.model.embed.shape[0]),
                               ("positions", positions, self.model.rope_cos.shape[0]),
                               ("slot_mapping", meta.slot_mapping, self.slots_total)):
            require_host_tensor(name, t, torch.int64, dims=1, contiguous=True)
            if t.shape[0] != T:
                raise HostKernelInputError(f"{name} has {t.shape[0]} entries for {T} tokens")
            low, high = int(t.min()), int(t.max())
            if low < 0 or high >= limit:
                raise HostKernelInputError(f"{name} holds {low}..{high}; each must be in [0, {limit})")


def check_on_model(fused: FusedPrompt, block_size: int, max_model_len: int, kv_blocks: int) -> str | None:
    """None when each fused layer matches the model's own layer on a step of two prompts (one with a cached context,
    one fresh) of the served model, every layer given the residual stream the modules gave it (as the fused decode
    layers' check: decode_layers.check_on_model); otherwise the first layer that differs, and by how much."""
    model = fused.model
    lengths = [n for n in (37, 70) if n <= max_model_len] or [max_model_len]
    tables, blocks = block_tables(lengths, block_size)
    if blocks > kv_blocks:
        return f"no room in the KV cache ({kv_blocks} blocks) for the check"
    gen = torch.Generator().manual_seed(0)
    ids = [torch.randint(0, model.config.vocab_size, (n,), generator=gen).tolist() for n in lengths]
    cached = [n // 2 if i == 0 else 0 for i, n in enumerate(lengths)]  # the first prompt has its first half cached
    shape = block_size, model.config.num_queries_per_kv, model.device, model.config.attention_window
    with torch.inference_mode():
        if cached[0]:
            before = build_inputs([SeqChunk(ids[0][:cached[0]], 0, tables[0])], *shape)
            model(before.input_ids, before.positions, before.meta)
        step = build_inputs([SeqChunk(t, s, b) for t, s, b in zip(ids, cached, tables, strict=True)], *shape)
        streams = layer_streams(model, step.input_ids, step.positions, step.meta)
        return first_differing_layer(lambda i, x: fused.layer(i, x, step.positions, step.meta), streams,
                                     TOLERANCES[model.dtype])
