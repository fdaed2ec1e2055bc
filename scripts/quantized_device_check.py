"""Quantized decode on a lent accelerator (issue 53), for scripts/device_check.sh: a random ~1B Llama shape (and
SmolLM2-135M where its files are present) served unquantized in bfloat16 and with --quantization int8, int4, fp8,
decode tok/s at batch 1 and 8, and each scheme's KL divergence from the bfloat16 model over 128 tokens; a scheme the
profile does not verify there is listed with the runner's refusal. One JSON line per row, then a table.

Run:  python3 scripts/quantized_device_check.py --device cuda:0 --profile $OUT/profile.yaml [--out DIR]
The profile must hold the probe's quantized records (bringup probe on the device).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bringup.errors import BringupError
from bringup.runner.engine.auto_quantization.measure import kl_divergence, next_token_logprobs
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.eval.text import default_text
from bringup.runner.sampling_params import SamplingParams

SCHEMES = ("none", "int8", "int4", "fp8")
ONE_B = dict(hidden=2048, intermediate=8192, layers=16, heads=32, kv_heads=8, vocab=32000)  # Llama-3.2-1B-like


def random_llama(folder: Path) -> Path:
    from tests.runner.hf_fixtures import make_hf_model

    path = folder / "llama-1b-random"
    make_hf_model(path, std=0.02, **ONE_B)
    return path


def engine(model: Path, device: str, profile: Path, scheme: str, seqs: int) -> LLMEngine:
    return LLMEngine.create(EngineOptions(model_dir=model, device=device, profile_path=profile, dtype="bfloat16",
                                          max_model_len=512, max_num_seqs=seqs, quantization=scheme))


def decode_tps(e: LLMEngine, batch: int, tokens: int = 64) -> float:
    prompts = [[1, 100 + i, 200 + i, 300 + i] for i in range(batch)]

    def seconds(n: int) -> float:
        start = time.perf_counter()
        e.generate(prompts, SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
        return time.perf_counter() - start

    seconds(4)
    return batch * (tokens - 1) / min(seconds(tokens) - seconds(1) for _ in range(3))


def rows_for(model: Path, name: str, device: str, profile: Path) -> list[dict]:
    rows, reference = [], None
    for scheme in SCHEMES:
        try:
            e = engine(model, device, profile, scheme, 8)
        except BringupError as exc:
            rows.append(dict(model=name, scheme=scheme, refused=str(exc)))
            continue
        text = e.tokenizer.encode(default_text().text, add_special_tokens=False)[:128]
        logprobs = next_token_logprobs(e.executor, text)
        reference = logprobs if scheme == "none" else reference
        row = dict(model=name, scheme=scheme, kind=e.executor.model.layout.small,
                   kld=0.0 if reference is None else kl_divergence(reference, logprobs),
                   tps_b1=decode_tps(e, 1), tps_b8=decode_tps(e, 8), row=e.plan.quantization.evidence)
        rows.append(row)
        print(json.dumps(row), flush=True)
        del e
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", required=True)
    parser.add_argument("--profile", type=Path, required=True)
    parser.add_argument("--small", action="store_true", help="a small random shape instead of ~1B (a dry run)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.small:
            ONE_B.update(hidden=256, intermediate=512, layers=2, heads=4, kv_heads=2, vocab=512)
        models = {"llama-1b-random": random_llama(Path(tmp))}
        try:
            from tests.real_model import smollm2_hf_dir
            models["SmolLM2-135M"] = smollm2_hf_dir()
        except Exception as exc:  # no model files on this machine
            print(f"SmolLM2 skipped: {exc}"[:200])
        rows = [row for name, path in models.items() for row in rows_for(path, name, args.device, args.profile)]
    base = {r["model"]: r for r in rows if r["scheme"] == "none" and "tps_b1" in r}
    for r in rows:
        if "refused" in r:
            print(f"{r['model']:16} {r['scheme']:5} refused: {r['refused'][:160]}")
            continue
        b = base.get(r["model"], r)
        print(f"{r['model']:16} {r['scheme']:5} {r['kind']:14} b1 {r['tps_b1']:8.1f} tok/s "
              f"({r['tps_b1'] / b['tps_b1']:.2f}x)  b8 {r['tps_b8']:8.1f} tok/s "
              f"({r['tps_b8'] / b['tps_b8']:.2f}x)  KLD {r['kld']:.5f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
