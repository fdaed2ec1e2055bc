"""GGUF files holding K-quants (Q2_K to Q6_K) and Q5_0 / Q5_1 load: each tensor dequantized exactly as the gguf
package's reference dequantizer gives it (blocks with extreme scales: ±65504, the smallest normal and subnormal
float16, zero), q's rope permutation undone as for any other type; a non-finite scale is counted as its whole block;
a file mixing them generates; and the int8 row accounts for each type of the mix (Q5_0 and Q8_0 re-packed exactly, Q4_K
and Q6_K quantized from their values)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.quantize.held_blocks import auto_candidates_for, origin, requantized
from bringup.runner.sources.model_source import model_source
from bringup.runner.weights.formats.integer import dequantize_int8
from bringup.runner.weights.kinds import INT4, INT8, INT8_DEQUANT, OUT_IN
from tests.cli.run_cli import run_cli
from tests.runner.gguf_files import T, gguf, mixed_types, permute_for_gguf_rope, write_gguf
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.test_gguf_repacked import file_values

# each type's float16 scale fields, as byte offsets in its block (ggml's block layouts)
SCALE_OFFSETS = {"Q5_0": (0,), "Q5_1": (0, 2), "Q2_K": (80, 82), "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2),
                 "Q6_K": (208,)}
EXTREME_SCALES = np.array([65504.0, -65504.0, 6.1035e-05, 5.96e-08, 0.0, 1.0, -0.5], dtype=np.float16)
HEADS, HIDDEN, INTERMEDIATE = 4, 256, 512  # K-quant blocks are 256 values: every row holds whole blocks


@pytest.fixture(scope="module")
def hf(tmp_path_factory) -> tuple[torch.nn.Module, Path]:
    where = tmp_path_factory.mktemp("kquant-hf")
    return make_hf_model(where, "llama", tied=True, hidden=HIDDEN, intermediate=INTERMEDIATE, heads=HEADS), where


def with_extreme_scales(path: Path, names: tuple[str, ...] | None, scale: float | None = None) -> None:
    """Overwrite the scale fields of every block of `names` (None: of every tensor in a type listed here) in place:
    the extreme values in turn, or `scale`. (The test files hold random bytes in these types: their scales too.)"""
    reader = gguf.GGUFReader(str(path), "r+")
    for tensor in reader.tensors:
        kind = tensor.tensor_type.name
        if (tensor.name in names) if names is not None else kind in SCALE_OFFSETS:
            blocks = tensor.data.reshape(-1, gguf.GGML_QUANT_SIZES[tensor.tensor_type][1])
            for n, start in enumerate(SCALE_OFFSETS[kind]):
                values = np.resize(np.roll(EXTREME_SCALES, n), len(blocks)) if scale is None else \
                    np.full(len(blocks), scale, dtype=np.float16)
                blocks[:, start:start + 2] = values.astype(np.float16).view(np.uint8).reshape(-1, 2)
    reader.data.flush()


def reference(path: Path, name: str) -> np.ndarray:
    tensor = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == name)
    return gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)


def written_in(kind: str, names: tuple[str, ...]):
    return lambda name, tensor: getattr(T, kind) if name in names else mixed_types(name, tensor)


@pytest.mark.parametrize("kind", list(SCALE_OFFSETS))
def test_each_type_loads_as_the_gguf_reference_dequantizes_it(tmp_path, hf, kind):
    model, tokenizer = hf
    names = ("blk.0.attn_q.weight", "blk.1.ffn_down.weight")
    path = write_gguf(tmp_path / f"{kind}.gguf", model, tokenizer, "llama", written_in(kind, names))
    with_extreme_scales(path, names)
    loaded = file_values(path)
    down = loaded.layers[1].mlp.down_proj.weight("out_in")
    assert torch.equal(down, torch.from_numpy(reference(path, "blk.1.ffn_down.weight")))
    q = loaded.layers[0].self_attn.qkv_proj.weight("out_in")[:HIDDEN]
    assert np.array_equal(permute_for_gguf_rope(q.numpy(), HEADS), reference(path, "blk.0.attn_q.weight"))
    assert down.abs().max().item() > 1e6  # the ±65504 scales reached the weights, still finite in float32


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K", "Q5_0"])
def test_a_non_finite_scale_is_refused_with_its_block_counted(tmp_path, hf, kind):
    model, tokenizer = hf
    names = ("blk.1.ffn_up.weight",)
    path = write_gguf(tmp_path / "nan.gguf", model, tokenizer, "llama", written_in(kind, names))
    with_extreme_scales(path, names, scale=float("inf"))
    result = run_cli(["generate", "Hi", "--model", str(path), "--device", "cpu", "--max-tokens", "2",
                      "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 2 and "Traceback" not in result.stderr, result.stderr
    values = INTERMEDIATE * HIDDEN  # every block's scale is infinite: all of the tensor's values
    assert f"model.layers.1.mlp.up_proj.weight' holds {values} NaN/Inf" in " ".join(result.stderr.split())


def q4_k_m(name: str, tensor: torch.Tensor) -> object:
    """Q4_K_M's mix: Q4_K projections, Q6_K down projections and head, Q5_0 and Q8_0 beside them."""
    if tensor.dim() == 1:
        return T.F32
    return T.Q6_K if "ffn_down" in name or "token_embd" in name else T.Q5_0 if "attn_v" in name else \
        T.Q8_0 if "attn_k" in name else T.Q4_K


@pytest.fixture(scope="module")
def mix(tmp_path_factory, hf) -> Path:
    model, tokenizer = hf
    path = write_gguf(tmp_path_factory.mktemp("mix") / "mix.gguf", model, tokenizer, "llama", q4_k_m)
    with_extreme_scales(path, None, scale=0.002)
    return path


def test_a_file_mixing_k_quants_as_q4_k_m_does_generates(tmp_path, mix):
    result = run_cli(["generate", "Hi", "--model", str(mix), "--device", "cpu", "--max-tokens", "4", "--json",
                      "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 0, result.stderr
    assert "dequantized at load" in " ".join(result.stdout.split())


def test_the_quantization_row_says_per_block_type_what_int8_does_with_the_mix(mix):
    """int8 holds Q5_0 and Q8_0 exactly (re-packed), no storage holds Q4_K or Q6_K (quantized from their values, as
    an F16 weight would be: not a fallback); int4 would round Q5_0 and Q8_0 again, so auto does not try it."""
    weights = model_source(mix).linear_weight_types()
    assert weights.layers == {"Q4_K": 8, "Q5_0": 2, "Q6_K": 2, "Q8_0": 2} and weights.head == "Q6_K"
    assert origin(INT8, weights) == ("from the file's Q5_0 and Q8_0 blocks, re-packed (no re-quantization); its Q4_K "
                                     "and Q6_K blocks dequantized and quantized at load (round to nearest) (no storage "
                                     "here holds them exactly)")
    assert requantized(INT8, weights) == [] and requantized(INT4, weights) == ["Q5_0", "Q8_0"]
    notes: list[str] = []
    assert auto_candidates_for([INT8, INT4], notes, weights) == [INT8]
    assert notes == ["int4 not tried: it would quantize the file's Q5_0 and Q8_0 blocks again (--quantization int4 "
                     "does that, as a recorded fallback)"]


def test_int8_on_the_mix_keeps_the_q5_0_and_q8_0_codes(mix):
    """The int8 weights of the Q5_0 v and Q8_0 k projections dequantize to gguf's own values (re-packed, never
    rounded again); the Q4_K q rows beside them in the fused qkv are int8 roundings of their values."""
    source = model_source(mix)
    ours = source.load(source.config(), torch.float32, torch.device("cpu"), WeightLayout(INT8_DEQUANT, INT8_DEQUANT, 0))
    floats = file_values(mix)
    q_rows = ours.config.num_heads * ours.config.head_dim
    for ours_layer, float_layer in zip(ours.layers, floats.layers, strict=True):
        stored = dequantize_int8(ours_layer.self_attn.qkv_proj.weight(INT8_DEQUANT))
        values = float_layer.self_attn.qkv_proj.weight(OUT_IN)
        assert torch.equal(stored[q_rows:], values[q_rows:])  # k (Q8_0) and v (Q5_0): exact
        assert not torch.equal(stored[:q_rows], values[:q_rows])  # q (Q4_K): rounded to int8
        assert torch.allclose(stored[:q_rows], values[:q_rows], rtol=0, atol=float(values[:q_rows].abs().max()) / 200)
