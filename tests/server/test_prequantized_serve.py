"""`bringup serve` of a compressed-tensors FP8 checkpoint, live: /v1/plan says the weights are the checkpoint's own
fp8, served weight-only, and a greedy completion over HTTP returns the engine's own greedy tokens."""

from __future__ import annotations

import httpx

from bringup.runner.engine.engine import LLMEngine
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.weights.kinds import FP8
from tests.runner.compressed_tensors_files import DYNAMIC_TOKENS, write_compressed
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.stated import stated
from tests.server.serve_live import engine_options, start_server


def test_a_served_fp8_checkpoint_says_so_and_completes_greedily(tmp_path):
    model = tmp_path / "m"
    make_hf_model(model, hidden=64, intermediate=128, layers=2, vocab=320)
    checkpoint = write_compressed(model, tmp_path / "fp8", "float-quantized", ignore=("lm_head",),
                                  activations=DYNAMIC_TOKENS)
    options = {"model_dir": checkpoint, "max_model_len": 128, "measurements": stated()}
    alone = LLMEngine.create(engine_options(tmp_path, **options))  # the same engine, outside the server
    prompt = alone.tokenizer.encode("the quick brown")
    want = alone.generate([prompt], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))[0].token_ids
    live = start_server(tmp_path, **options)
    try:
        quantization = httpx.get(f"{live.base_url}/plan", timeout=10).json()["plan"]["quantization"]
        assert quantization["value"] == FP8
        assert quantization["evidence"].startswith("from the checkpoint's compressed-tensors float-quantized fp8")
        assert "served weight-only" in quantization["evidence"]
        body = {"model": live.engine.model_name, "prompt": "the quick brown", "max_tokens": 6, "temperature": 0,
                "ignore_eos": True}
        response = httpx.post(f"{live.base_url}/completions", json=body, timeout=60)
        assert response.status_code == 200, response.text
        choice = response.json()["choices"][0]
        assert choice["text"] == alone.tokenizer.decode(want)
    finally:
        live.stop()
