"""The real Gemma 3 270M Q4_K_M GGUF (tests/real_model.py) through the engine against transformers reading the same
file (`gguf_file=`, float32, eager attention): three prompts batched, 32 greedy tokens each identical, and the
prompts' logits within LOGIT_TOLERANCE.

Both sides dequantize the same blocks with the gguf package into the same float32 weights and take the same 1 off
the norms, so the logits can differ only by float32 rounding in another order of summation: here they are identical
(max |error| 0 over logits up to 34 in magnitude, every position's argmax the same). LOGIT_TOLERANCE (1e-4, the
tiny-model parity tests' bound) leaves room for a BLAS that sums in another order (about 1e-5 at these magnitudes:
float32's ulp at 32 is 3.8e-6); a wrong rope base, attention scale or norm offset moves logits by whole units. (The
window, 512, is longer than these prompts: test_gemma3.py checks windows on a tiny model.)

transformers takes about three minutes here to read the file (its tokenizer, the dequantization) and generate, so
its outputs are computed once and kept beside the file, keyed by transformers' version. The engine is given token
ids and reads token ids: it gets a stand-in tokenizer (the file's SentencePiece vocabulary is not what this tests).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from filelock import FileLock

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.sources.gguf.file_source import GGUFSource
from tests.real_model import CACHE, gemma3_gguf
from tests.runner.stated import stated

TEXTS = ["The capital of France is", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"",
         "Once upon a time, in a small village by the sea,"]
GREEDY_TOKENS = 32
LOGIT_TOLERANCE = 1e-4
GLOBAL = [(i + 1) % 6 == 0 for i in range(18)]


class IdsOnly:
    """The engine's tokenizer when prompts are ids and only ids are read back: no text either way."""

    eos_token_ids: list[int] = []
    fallbacks = None

    def detokenizer(self) -> IdsOnly:
        return self

    def add(self, token_id: int) -> str:
        return ""

    def flush(self) -> str:
        return ""


@pytest.fixture(scope="module")
def gguf_path() -> Path:
    return gemma3_gguf()


@pytest.fixture(scope="module")
def reference(gguf_path) -> dict[str, torch.Tensor]:
    """transformers' reading of the file: each text's ids (BOS first), its logits and its 32 greedy tokens."""
    import transformers
    from safetensors.torch import load_file

    kept = CACHE / f"{gguf_path.stem}.transformers-{transformers.__version__}.reference.safetensors"
    with FileLock(str(CACHE / ".lock")):
        if not kept.exists():
            _save_reference(gguf_path, kept)
    return load_file(kept)


def _save_reference(gguf_path: Path, kept: Path) -> None:
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, name = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    model.generation_config.eos_token_id = None
    out: dict[str, torch.Tensor] = {}
    for i, text in enumerate(TEXTS):
        ids = torch.tensor([tokenizer(text).input_ids])
        with torch.no_grad():
            out[f"logits.{i}"] = model(ids).logits[0].contiguous()
            out[f"tokens.{i}"] = model.generate(ids, max_new_tokens=GREEDY_TOKENS, do_sample=False,
                                                pad_token_id=0)[0, ids.shape[1]:].contiguous()
        out[f"ids.{i}"] = ids[0]
    partial = kept.with_suffix(".partial")
    save_file(out, str(partial))
    partial.replace(kept)


@pytest.fixture(scope="module")
def engine(gguf_path, tmp_path_factory) -> LLMEngine:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(GGUFSource, "tokenizer", lambda self, config, fallbacks=None: IdsOnly())
        return LLMEngine.create(EngineOptions(model_dir=gguf_path, device="cpu", max_model_len=128, max_num_seqs=4,
                                              profile_path=tmp_path_factory.mktemp("p") / "absent.yaml",
                                              measurements=stated()))


def _prompts(reference: dict[str, torch.Tensor]) -> list[list[int]]:
    return [reference[f"ids.{i}"].tolist() for i in range(len(TEXTS))]


def test_the_file_reads_as_gemma3(engine):
    c = engine.executor.model.config
    assert c.architecture == "Gemma3ForCausalLM" and c.hidden_act == "gelu_pytorch_tanh" and c.tie_word_embeddings
    assert [not s for s in c.sliding_layers] == GLOBAL and c.local_rope_layers == c.sliding_layers
    assert (c.sliding_window, c.rope_theta, c.local_rope_theta, c.rope_scaling) == (512, 1e6, 1e4, None)
    assert (c.attention_scale, c.attn_logit_softcap, c.final_logit_softcap) == (256**-0.5, None, None)


def test_prompt_logits_match_transformers(engine, reference):
    block = engine.plan.block_size
    errors = []
    for i, prompt in enumerate(_prompts(reference)):
        ours = engine.executor.run_chunks([SeqChunk(prompt, 0, list(range(-(-len(prompt) // block))))],
                                          all_positions=True).cpu()
        want = reference[f"logits.{i}"]
        errors.append((ours - want).abs().max().item())
        assert torch.equal(ours.argmax(-1), want.argmax(-1))
    print(f"Gemma 3 270M Q4_K_M: max |logit error| per prompt {[f'{e:.2g}' for e in errors]}")
    assert max(errors) <= LOGIT_TOLERANCE, errors


def test_batched_greedy_tokens_match_transformers(engine, reference):
    outs = engine.generate(_prompts(reference), SamplingParams(max_tokens=GREEDY_TOKENS, temperature=0.0,
                                                               ignore_eos=True))
    assert [o.token_ids for o in outs] == [reference[f"tokens.{i}"].tolist() for i in range(len(TEXTS))]
    assert engine.stats()["kv_blocks_used"] == 0
