"""Running streams' inter-token latency while a long prompt arrives, chunked prefill off and on (run by hand).

One engine (SmolLM2 by default), STREAMS streams decoding; each round measures their inter-token gaps while a new
PROMPT-token prompt (fresh random tokens each round, so the prefix cache never serves it) is prefilled up to its first
token, then starts the same streams again and measures as many steps without it (at least BASELINE_STEPS): a chunked
prompt takes many steps, over which the streams' own contexts grow, so "without" covers the same growth. Rounds
alternate chunking off (prompts run whole: the engine before chunked prefill) and on (the plan's prefill_chunk, or
--chunk), so both sides see the same machine load; printed per side: the p99 gap without the long prompt, during it,
their ratio (target <= 3x with chunking on), the long prompt's time to first token, and the ratio against the first
BASELINE_STEPS steps alone (short contexts: the stricter figure).

Usage: python benchmarks/long_prompt_itl.py [--model M] [--dtype D] [--prompt 4000] [--streams 4] [--rounds 2]
                                            [--chunk N] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import header_lines, machine_facts  # noqa: E402
from bringup.runner.engine.engine import EngineOptions, LLMEngine  # noqa: E402
from bringup.runner.plan.prefill_chunk import shown_chunks  # noqa: E402
from bringup.runner.sampling_params import SamplingParams  # noqa: E402

DEFAULT_MODEL = REPO / ".cache/test-models/SmolLM2-135M-Instruct.Q4_1.gguf"
BASELINE_STEPS = 40


def p99(gaps: list[float]) -> float:
    ordered = sorted(gaps)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else float("nan")


def _gaps(engine: LLMEngine, streams: set[str], last: dict[str, float], until) -> list[float]:  # type: ignore[no-untyped-def]
    """Step until `until(outputs)`; the streams' gaps between successive tokens."""
    gaps: list[float] = []
    while True:
        outputs = engine.step()
        now = time.perf_counter()
        for out in outputs:
            if out.request_id in streams:
                gaps.append(now - last[out.request_id])
                last[out.request_id] = now
        if until(outputs):
            return gaps


def _start_streams(engine: LLMEngine, rng: random.Random, names: list[str]) -> dict[str, float]:
    """The streams added and stepped until each has its first token; when each last gave one."""
    params = SamplingParams(max_tokens=100_000, temperature=0.0, ignore_eos=True)
    for i, name in enumerate(names):
        engine.add_request(name, [rng.randrange(engine.vocab_size) for _ in range(16 + i)], params)
    last = dict.fromkeys(names, time.perf_counter())
    _gaps(engine, set(names), last, lambda outs: all(n in {o.request_id for o in outs} for n in names))
    return last


def one_round(engine: LLMEngine, chunk: list[list[int]] | None, args: argparse.Namespace, seed: int) -> dict:
    """The streams' gaps while the long prompt is prefilled, then the same streams started again and run as many
    steps without it: their contexts grow alike in both, so the two p99s differ by the prompt alone. The first
    BASELINE_STEPS steps without it are also kept (the short-context p99 the earlier figures used)."""
    engine.scheduler.prefill_chunk = chunk
    rng = random.Random(seed)
    names = [f"s{seed}-{i}" for i in range(args.streams)]
    last = _start_streams(engine, rng, names)
    arrived = time.perf_counter()
    engine.add_request(f"long{seed}", [rng.randrange(engine.vocab_size) for _ in range(args.prompt)],
                       SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True))
    during = _gaps(engine, set(names), last, lambda outs: any(o.request_id == f"long{seed}" for o in outs))
    ttft = time.perf_counter() - arrived
    for name in names:
        engine.abort_request(name)
    again = [f"{name}-again" for name in names]
    last = _start_streams(engine, rng, again)
    steps = iter(range(max(len(during) // args.streams, BASELINE_STEPS)))
    without = _gaps(engine, set(again), last, lambda outs: next(steps, None) is None)
    for name in again:
        engine.abort_request(name)
    return {"p99_without": p99(without), "p99_during": p99(during), "ttft": ttft, "gaps_during": len(during),
            "p99_first_steps": p99(without[:BASELINE_STEPS * args.streams])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--prompt", type=int, default=4000)
    parser.add_argument("--streams", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--chunk", type=int, default=None,
                        help="one chunk for every context when on (default: the plan's table)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    engine = LLMEngine.create(EngineOptions(model_dir=args.model, device="cpu", dtype=args.dtype,
                                            max_model_len=args.prompt + 512, max_num_seqs=args.streams + 1))
    chunk = [[1, 0, 0, args.chunk]] if args.chunk else engine.plan.prefill_chunk.value
    results: dict[str, list[dict]] = {"off": [], "on": []}
    for r in range(args.rounds):
        for side, value in (("off", None), ("on", chunk)):
            results[side].append(one_round(engine, value, args, seed=2 * r + (side == "on")))
            print(f"round {r} chunking {side}: {results[side][-1]}", file=sys.stderr, flush=True)
    keys = ("p99_without", "p99_during", "ttft", "p99_first_steps")
    summary = {side: {key: min(x[key] for x in rounds) for key in keys}
               for side, rounds in results.items()}
    for s in summary.values():
        s["ratio"] = s["p99_during"] / s["p99_without"]
    if args.json:
        print(json.dumps({"chunk": chunk, "summary": summary, "rounds": results}, indent=2))
        return
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"model {args.model.name}, dtype {engine.plan.dtype.value}, {args.streams} streams, a {args.prompt}-token "
          f"prompt arriving; chunk {shown_chunks(chunk)} ({engine.plan.prefill_chunk.evidence}); best of "
          f"{args.rounds} rounds")
    for side, s in summary.items():
        print(f"chunking {side:3}: p99 gap without {s['p99_without'] * 1e3:7.1f} ms, during "
              f"{s['p99_during'] * 1e3:8.1f} ms ({s['ratio']:.2f}x); long prompt's first token after {s['ttft']:.2f} s"
              f"; without, first {BASELINE_STEPS} steps only: {s['p99_first_steps'] * 1e3:.1f} ms "
              f"({s['p99_during'] / s['p99_first_steps']:.2f}x)")


if __name__ == "__main__":
    main()
