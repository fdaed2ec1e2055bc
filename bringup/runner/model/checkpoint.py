"""Hugging Face tensor names of a decoder checkpoint (weights/checkpoint_reader.py reads them, fusing projections).

Llama, Mistral and Qwen2 checkpoints share these names; a family (llama.py, qwen2.py) declares only which
projections carry biases. Others add to them (CheckpointNames): Qwen3 per-head q/k norms, Gemma-2 two more
norms per layer, Phi-3 stores qkv_proj and gate_up_proj already fused. q, k and v are fused into one
`qkv_proj`, gate and up into one `gate_up_proj`, so each step runs one matmul where the checkpoint has several.
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.model.config import ModelConfig
from bringup.runner.weights.checkpoint_reader import EMBED, LM_HEAD

FINAL_NORM = "model.norm.weight"  # EMBED and LM_HEAD: the head's names, which the weights reader reads too
LAYER_NORMS = ("input_layernorm", "post_attention_layernorm")
# our projection -> the checkpoint's projections fused into it (in order), under self_attn. and mlp.
ATTENTION_PROJECTIONS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "o_proj": ("o_proj",)}
MLP_PROJECTIONS = {"gate_up_proj": ("gate_proj", "up_proj"), "down_proj": ("down_proj",)}

SANDWICH_NORMS = (*LAYER_NORMS, "pre_feedforward_layernorm", "post_feedforward_layernorm")  # Gemma-2
QK_NORMS = ("self_attn.q_norm", "self_attn.k_norm")  # Qwen3: RMSNorm over head_dim
FUSED_ATTENTION_PROJECTIONS = {"qkv_proj": ("qkv_proj",), "o_proj": ("o_proj",)}  # Phi-3
FUSED_MLP_PROJECTIONS = {"gate_up_proj": ("gate_up_proj",), "down_proj": ("down_proj",)}

@dataclass(frozen=True)
class CheckpointNames:
    """How a family's checkpoint names a layer's tensors beyond the Llama set."""

    layer_norms: tuple[str, ...] = LAYER_NORMS
    qk_norms: bool = False
    fused: bool = False  # q/k/v stored as one qkv_proj, gate/up as one gate_up_proj


@dataclass(frozen=True)
class ProjectionBiases:
    """Which projections carry a bias in a family's checkpoints."""

    qkv: bool = False
    o: bool = False
    mlp: bool = False


def layer_prefix(index: int) -> str:
    return f"model.layers.{index}."


def hf_tensor_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a Llama-layout decoder with this config reads, by Hugging Face name, with its shape (lm_head
    only when untied; biases only where the config has them). The built-in model uses it; the loader's checks use
    the family's DecoderModel.hf_tensor_shapes, built from the pieces below."""
    c = config
    biases, names = ProjectionBiases(c.qkv_bias, c.o_bias, c.mlp_bias), CheckpointNames()
    shapes = model_shapes(c)
    for i in range(c.num_layers):
        p = layer_prefix(i)
        shapes |= layer_shapes(c, p, names, biases) | dense_mlp_shapes(c, p + "mlp.", biases.mlp, names.fused)
    return shapes


def model_shapes(c: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The tensors outside the layers: embedding, final norm, and the head when untied."""
    shapes: dict[str, tuple[int, ...]] = {EMBED: (c.vocab_size, c.hidden_size), FINAL_NORM: (c.hidden_size,)}
    if not c.tie_word_embeddings:
        shapes[LM_HEAD] = (c.vocab_size, c.hidden_size)
    return shapes


def layer_shapes(c: ModelConfig, p: str, names: CheckpointNames,
                 biases: ProjectionBiases) -> dict[str, tuple[int, ...]]:
    """One layer's norms and attention tensors (its MLP is the family's: dense_mlp_shapes or its own)."""
    hidden, q_rows, kv_rows = c.hidden_size, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    shapes = {f"{p}{norm}.weight": (hidden,) for norm in names.layer_norms}
    if names.qk_norms:
        shapes |= {f"{p}{norm}.weight": (c.head_dim,) for norm in QK_NORMS}
    projections = [("self_attn.qkv_proj", q_rows + 2 * kv_rows, hidden, biases.qkv)] if names.fused else [
        ("self_attn.q_proj", q_rows, hidden, biases.qkv), ("self_attn.k_proj", kv_rows, hidden, biases.qkv),
        ("self_attn.v_proj", kv_rows, hidden, biases.qkv)]
    return shapes | _projection_shapes(p, [*projections, ("self_attn.o_proj", hidden, q_rows, biases.o)])


def dense_mlp_shapes(c: ModelConfig, p: str, bias: bool, fused: bool = False) -> dict[str, tuple[int, ...]]:
    """A gated MLP's tensors under `p` (`...mlp.`)."""
    hidden, inter = c.hidden_size, c.intermediate_size
    projections = [("gate_up_proj", 2 * inter, hidden, bias)] if fused else [
        ("gate_proj", inter, hidden, bias), ("up_proj", inter, hidden, bias)]
    return _projection_shapes(p, [*projections, ("down_proj", hidden, inter, bias)])


def _projection_shapes(p: str, projections: list[tuple[str, int, int, bool]]) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for proj, out, inp, bias in projections:
        shapes[f"{p}{proj}.weight"] = (out, inp)
        if bias:
            shapes[f"{p}{proj}.bias"] = (out,)
    return shapes


def hf_tensor_names(config: ModelConfig) -> list[str]:
    """Hugging Face names of every weight matrix and norm the model reads, in checkpoint order (lm_head only
    when untied; biases are not listed)."""
    return [name for name in hf_tensor_shapes(config) if not name.endswith(".bias")]
