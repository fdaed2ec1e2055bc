"""Long-prompt prefill rate (llama-bench's pp512: one 512-token prompt in one step, tokens/s), the attention the
start-up plan chose beside plain matmul-softmax, alternated in one run (run by hand).

Usage: python benchmarks/prefill_rate.py [--model M] [--dtype D] [--tokens 512] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    engine = LLMEngine.create(EngineOptions(model_dir=args.model, device="cpu", dtype=args.dtype,
                                            max_model_len=max(1024, args.tokens + 16)))
    planned = engine.executor.attention
    plain = AttentionDispatcher([PLAIN_ATTENTION], FallbackRecorder())
    sides = {f"planned ({planned.current})": planned, PLAIN_ATTENTION: plain}
    best = dict.fromkeys(sides, float("inf"))
    for dispatcher in sides.values():  # warm each side once
        engine.executor.model.attend = dispatcher
        prefill_seconds(engine, args.tokens)
    for _ in range(args.rounds):
        for name, dispatcher in sides.items():
            engine.executor.model.attend = dispatcher
            best[name] = min(best[name], prefill_seconds(engine, args.tokens))
    engine.executor.model.attend = planned
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"model {args.model.name}, dtype {engine.plan.dtype.value}, pp{args.tokens}, best of {args.rounds} "
          "alternated rounds")
    for name, seconds in best.items():
        print(f"{name:<28} {args.tokens / seconds:8.1f} tok/s  ({seconds * 1e3:.0f} ms)")
    first, second = best.values()
    print(f"planned / plain: {second / first:.2f}x")


if __name__ == "__main__":
    main()
