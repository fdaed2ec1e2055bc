"""GGUF Q8_0, Q5_0, Q4_0 and Q4_1 linear weights loaded straight into the int8 / int4 kinds that hold them exactly:
the file's blocks re-packed bit for bit (the stored rows dequantize to gguf's own dequantization; codes a
re-quantization would have changed are kept), q/k rows unpermuted as whole rows, fused projections concatenated, the
tied head from token_embd; and the engine's greedy tokens on such a file equal the module-level reference of the same
weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.sources.gguf.reader import open_gguf
from bringup.runner.sources.model_source import model_source
from bringup.runner.weights.formats.integer import dequantize_int4, dequantize_int8, unpack_int8
from bringup.runner.weights.kinds import INT4, INT4_DEQUANT, INT8, INT8_DEQUANT, OUT_IN
from tests.runner.gguf_files import T, gguf, write_gguf
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import needs_compiler
from tests.runner.quantized_parity import REFERENCE_KIND, assert_same_greedy, reference_model
from tests.runner.stated import stated

PROMPT = [0, 5, 9, 33, 80, 7, 120, 64, 12]
DEQUANTIZE = {INT8: dequantize_int8, INT4: dequantize_int4}


def all_in(kind: object):
    """Every matrix in `kind`, norms and biases in F32."""
    return lambda name, tensor: T.F32 if tensor.dim() == 1 else kind


def q4_0_layers_q4_1_embedding(name: str, tensor: torch.Tensor) -> object:
    return T.F32 if tensor.dim() == 1 else T.Q4_1 if name.startswith("token_embd") else T.Q4_0


def q8_0_but_f16_v(name: str, tensor: torch.Tensor) -> object:
    """q and k in Q8_0 beside an F16 v: one fused qkv_proj from two storages."""
    return T.F32 if tensor.dim() == 1 else T.F16 if ".attn_v." in name else T.Q8_0


def tiny_gguf(tmp_path: Path, types, *, arch: str = "llama", tied: bool = False) -> Path:
    hf = make_hf_model(tmp_path / "hf", arch, tied=tied)
    return write_gguf(tmp_path / "tiny.gguf", hf, tmp_path / "hf", arch, types)


def load(path: Path, kind: str) -> DecoderModel:
    source = model_source(path)
    return source.load(source.config(), torch.float32, torch.device("cpu"), WeightLayout(kind, kind, 0))


def file_values(path: Path) -> DecoderModel:
    """The same file loaded the float way: every tensor dequantized by gguf, rope rows unpermuted."""
    return load(path, OUT_IN)


@pytest.mark.parametrize("types, arch, tied, kind", [
    (all_in(T.Q8_0), "llama", False, INT8_DEQUANT),
    (all_in(T.Q4_1), "llama", True, INT4_DEQUANT),
    (q4_0_layers_q4_1_embedding, "qwen2", True, INT4_DEQUANT),
    (all_in(T.Q4_0), "llama", False, INT4_DEQUANT),
    (all_in(T.Q4_0), "llama", False, INT8_DEQUANT),
    (all_in(T.Q5_0), "qwen2", True, INT8_DEQUANT),
])
def test_stored_rows_dequantize_to_ggufs_own_values(tmp_path, types, arch, tied, kind):
    path = tiny_gguf(tmp_path, types, arch=arch, tied=tied)
    repacked, floats = load(path, kind), file_values(path)
    dequantize = DEQUANTIZE[INT8 if kind == INT8_DEQUANT else INT4]
    linears = list(zip(repacked.linear_layers(), floats.linear_layers(), strict=True))
    assert len(linears) == 2 * 4 + 1  # qkv, o, gate_up, down per layer, and the head (tied: token_embd's blocks)
    for ours, values in linears:
        assert torch.equal(dequantize(ours.weight(kind)), values.weight(OUT_IN))


def test_q8_0_codes_are_kept_as_the_file_has_them(tmp_path):
    """Hand-made Q8_0 blocks whose codes stay within +-50: re-quantizing their values would stretch every block to
    +-127, so equal codes prove the blocks were re-packed, not dequantized and rounded again."""
    hf = make_hf_model(tmp_path / "hf", "qwen2", tied=False)
    rng = np.random.default_rng(3)
    path = write_gguf(tmp_path / "tiny.gguf", hf, tmp_path / "hf", "qwen2", all_in(T.Q8_0))
    down = open_gguf(path).tensors["blk.1.ffn_down.weight"]
    rows, row_bytes = down.data.shape
    blocks = np.zeros((rows, row_bytes // 34, 34), dtype=np.uint8)
    blocks[..., :2] = np.full(blocks.shape[:2], 0.01, dtype=np.float16)[..., None].view(np.uint8)
    blocks[..., 2:] = rng.integers(-50, 51, (rows, row_bytes // 34, 32)).astype(np.int8).view(np.uint8)
    with open(path, "r+b") as f:  # the same tensor, other blocks: written where the file keeps it
        f.seek(int(down.data_offset))
        f.write(blocks.tobytes())
    layer = load(path, INT8_DEQUANT).layers[1].mlp.down_proj
    stored = layer.weight(INT8_DEQUANT)
    codes = unpack_int8(stored)[1]
    assert torch.equal(codes, torch.from_numpy(blocks[..., 2:].reshape(rows, -1).view(np.int8)))
    assert codes.abs().max().item() == 50
    want = gguf.quants.dequantize(blocks.reshape(rows, -1), T.Q8_0)
    assert torch.equal(dequantize_int8(stored), torch.from_numpy(want.astype(np.float32)))


def test_a_fused_projection_joins_file_blocks_and_quantized_float_rows(tmp_path):
    path = tiny_gguf(tmp_path, q8_0_but_f16_v)
    model, floats = load(path, INT8_DEQUANT), file_values(path)
    qkv, values = model.layers[0].self_attn.qkv_proj.weight(INT8_DEQUANT), floats.layers[0].self_attn.qkv_proj
    q_and_k = 64 + 32  # 4 query heads and 2 kv heads of 16
    assert torch.equal(dequantize_int8(qkv)[:q_and_k], values.weight(OUT_IN)[:q_and_k])  # the file's blocks
    v = values.weight(OUT_IN)[q_and_k:]
    assert not torch.equal(dequantize_int8(qkv)[q_and_k:], v)  # F16 values: rounded to int8 at load
    assert (dequantize_int8(qkv)[q_and_k:] - v).abs().max() <= v.abs().max() / 127


@needs_compiler
@pytest.mark.parametrize("types, scheme", [(all_in(T.Q8_0), INT8), (all_in(T.Q4_0), INT4)])
def test_engine_decode_on_a_quantized_file_equals_the_reference_of_its_blocks(tmp_path, types, scheme):
    path = tiny_gguf(tmp_path, types, tied=scheme == INT4)
    engine = LLMEngine.create(EngineOptions(model_dir=path, device="cpu", profile_path=tmp_path / "p.yaml",
                                            max_model_len=128, max_num_seqs=1, measurements=stated(),
                                            quantization=scheme))
    served = engine.executor.model
    kind = served.layout.small  # the kernel's kind, or the reference's where the kernel failed its check here
    assert served.layout.kinds == [kind] and kind in (scheme, REFERENCE_KIND[scheme])
    reference = reference_model(engine, path, scheme)  # the file loaded again, applied as the module-level reference
    for ours, theirs in zip(served.linear_layers(), reference.linear_layers(), strict=True):
        assert torch.equal(ours.weight(kind), theirs.weight(REFERENCE_KIND[scheme]))
    assert_same_greedy(engine, reference, PROMPT)
    floats = file_values(path)
    for ours, values in zip(served.linear_layers(), floats.linear_layers(), strict=True):
        assert torch.equal(DEQUANTIZE[scheme](ours.weight(kind)), values.weight(OUT_IN))
