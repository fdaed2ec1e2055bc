"""Long-prompt prefill rate (llama-bench's pp512: one 512-token prompt in one step, tokens/s), the attention the
start-up plan chose beside plain matmul-softmax, alternated in one run, and llama.cpp's own pp512 (llama-bench, built
as benchmarks/llama_cpp.py says) on the same weights and threads between bringup's rounds: the GGUF file as given
(its own quantized blocks) and, with --llama-dtype, the same weights written at that dtype (run by hand).

Usage: python benchmarks/prefill_rate.py [--model M] [--dtype D] [--tokens 512] [--rounds 3] [--llama-dtype bfloat16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import llama_cpp  # noqa: E402
from benchmarks.machine import header_lines, machine_facts  # noqa: E402
from bringup.fallbacks import FallbackRecorder  # noqa: E402
from bringup.profiles.attention_kinds import PLAIN_ATTENTION  # noqa: E402
from bringup.runner.engine.engine import EngineOptions, LLMEngine  # noqa: E402
from bringup.runner.model.attention import AttentionDispatcher  # noqa: E402
from bringup.runner.model.batch_inputs import SeqChunk  # noqa: E402

DEFAULT_MODEL = REPO / ".cache/test-models/SmolLM2-135M-Instruct.Q4_1.gguf"


def prefill_seconds(engine: LLMEngine, tokens: int) -> float:
    prompt = [1 + i % 1000 for i in range(tokens)]
    start = time.perf_counter()
    engine.executor.run_chunks([SeqChunk(prompt, 0, list(range(-(-tokens // engine.plan.block_size))))])
    return time.perf_counter() - start


def llama_files(model: Path, dtype: str | None, work: Path) -> dict[str, Path]:
    """The GGUF files llama-bench reads: the given file as is, and the same weights at `dtype` when asked."""
    files = {f"llama.cpp ({model.name})": model} if model.suffix == ".gguf" else {}
    if dtype is not None:
        sys.path.insert(0, str(REPO))
        from tests.real_model import smollm2_hf_dir

        hf_dir = smollm2_hf_dir() if model == DEFAULT_MODEL else model
        files[f"llama.cpp ({dtype})"] = llama_cpp.write_gguf(hf_dir, work / f"model-{dtype}.gguf", dtype,
                                                             vendored=False)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--llama-dtype", choices=sorted(llama_cpp.GGUF_FILE_TYPE), default=None,
                        help="also time llama.cpp on the same weights written at this dtype")
    parser.add_argument("--no-llama-cpp", action="store_true", help="time bringup's two attention paths only")
    args = parser.parse_args()
    engine = LLMEngine.create(EngineOptions(model_dir=args.model, device="cpu", dtype=args.dtype,
                                            max_model_len=max(1024, args.tokens + 16)))
    planned = engine.executor.attention
    plain = AttentionDispatcher([PLAIN_ATTENTION], FallbackRecorder())
    sides = {f"planned ({planned.current})": planned, PLAIN_ATTENTION: plain}
    best = dict.fromkeys(sides, float("inf"))
    threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        files = {} if args.no_llama_cpp else llama_files(args.model, args.llama_dtype, Path(tmp))
        rates: dict[str, float] = dict.fromkeys(files, 0.0)
        for dispatcher in sides.values():  # warm each side once
            engine.executor.model.attend = dispatcher
            prefill_seconds(engine, args.tokens)
        for _ in range(args.rounds):
            for name, dispatcher in sides.items():
                engine.executor.model.attend = dispatcher
                best[name] = min(best[name], prefill_seconds(engine, args.tokens))
            for name, path in files.items():
                try:
                    rates[name] = max(rates[name], llama_cpp.prefill_tokens_per_s(path, args.tokens, threads, 1))
                except llama_cpp.Unavailable as exc:
                    print(f"{name}: not run: {exc}")
                    files = {}
                    break
    engine.executor.model.attend = planned
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"model {args.model.name}, bringup dtype {engine.plan.dtype.value}, quantization "
          f"{engine.plan.quantization.value}, pp{args.tokens}, {threads} threads, best of {args.rounds} alternated "
          "rounds")
    for name, seconds in best.items():
        print(f"{name:<46} {args.tokens / seconds:8.1f} tok/s  ({seconds * 1e3:.0f} ms)")
    for name, rate in rates.items():
        print(f"{name:<46} {rate:8.1f} tok/s" if rate else f"{name:<46} not run")
    first, second = best.values()
    print(f"planned / plain: {second / first:.2f}x")
    for name, rate in rates.items():
        if rate:
            print(f"planned / {name}: {args.tokens / first / rate:.2f}x")


if __name__ == "__main__":
    main()
