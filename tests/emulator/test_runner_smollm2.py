"""A real trained model on the emulated device: SmolLM2-135M-Instruct's greedy tokens on emu:1 equal the CPU's over
32 tokens, at the same dtype (the emulator's kernels are the host's: any difference is the runner's doing)."""

from __future__ import annotations

import pytest

from tests.emulator.emu_process import emu_results
from tests.real_model import smollm2_hf_dir

BODY = """
from pathlib import Path
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

tokens = {}
for device in ("emu:1", "cpu"):
    e = LLMEngine.create(EngineOptions(model_dir=Path(MODEL), device=device, profile_path=Path("absent.yaml"),
                                       max_model_len=128, max_num_seqs=1, measurements=stated()))
    prompt = e.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    ids = e.tokenizer.encode(prompt, add_special_tokens=False)
    out = e.generate([ids], SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True))[0]
    tokens[device] = [e.plan.device, e.plan.dtype.value, out.token_ids, out.text]
    del e
report(tokens=tokens)
"""


@pytest.mark.slow
def test_smollm2_greedy_on_emu_equals_the_cpu_over_32_tokens():
    model = smollm2_hf_dir()
    seen = emu_results(f"MODEL = {str(model)!r}\n{BODY}", "default")["tokens"]
    emu, cpu = seen["emu:1"], seen["cpu"]
    assert emu[:2] == ["emu:1", "float32"] and cpu[:2] == ["cpu", "float32"]
    assert len(emu[2]) == 32 and emu[2] == cpu[2], (emu[3], cpu[3])
