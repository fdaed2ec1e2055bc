"""Decode tokens/s with graphs against `--graphs off`, the two engines' steps alternated, on the built-in model and
SmolLM2-135M, at batch 1 and 8 (issue 52's benchmark). Runs on the emulated accelerator here and on a GPU where one
is present: the device is whatever --device names, and the header names the machine and the device.

Each model gets two engines from the same profile: `graphs` (--graphs auto: the plan decides, and its graphs row is
printed with its evidence) and `eager` (--graphs off). For each batch size each engine in turn decodes `batch`
greedy requests of the same prompt, `--rounds` times (the order reversed every round), so a neighbour's load falls
on both; every decode step (engine.step(): scheduling, the forward, sampling; prefill excluded) is timed. Decode
tokens/s is given from the median step and from the fastest (a floor: a busy machine only adds time); the ratios
are graphs over eager. The greedy tokens of the two engines are compared (identical, or DIFFER).

Run:  BRINGUP_EMU_SPEC=spec.yaml python -m benchmarks.graph_decode --device emu:1 --profile emu.yaml
      python -m benchmarks.graph_decode --device cuda:0 --profile gpu.yaml [--models builtin smollm2]
      [--batches 1 8] [--tokens 32] [--rounds 3] [--json OUT.json]
(as a module from the repository root). The profile should hold verify-ops' eager-against-replay records (`bringup
verify-ops --compiled`), else the plan's graphs row says `off: not verified` and the two engines are the same.
Not a test: the figures are this machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.machine import header_lines, machine_facts
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.graphs.buckets import batch_buckets, context_buckets
from bringup.runner.engine.graphs.capture import family_capture
from bringup.runner.engine.graphs.checked_capture import capture_checked
from bringup.runner.plan.graphs import replay_check
from bringup.runner.sampling_params import SamplingParams

PROMPT = "The capital of France is"
MODES = {"graphs": "auto", "eager": "off"}


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load:    {one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min averages) on {os.cpu_count()} logical cores"


def model_dir(name: str) -> Path | None:
    if name == "builtin":
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.real_model import smollm2_hf_dir

    return smollm2_hf_dir()


def decode(engine: LLMEngine, prompt: list[int], batch: int, tokens: int) -> tuple[list[float], list[list[int]]]:
    """Seconds of each decode step of `batch` greedy requests decoding `tokens` tokens after the prefill (the first
    step, not timed), and each request's tokens."""
    params = SamplingParams(max_tokens=tokens + 1, temperature=0.0, ignore_eos=True)
    outputs: dict[str, list[int]] = {}
    for i in range(batch):
        engine.add_request(f"r{i}", prompt, params)
    _collect(engine.step(), outputs)
    seconds = []
    while engine.has_unfinished():
        begin = time.perf_counter()
        out = engine.step()
        seconds.append(time.perf_counter() - begin)
        _collect(out, outputs)
    return seconds, [outputs[f"r{i}"] for i in range(batch)]


def alternated(engines: dict[str, LLMEngine], prompt: list[int], batch: int, tokens: int,
               rounds: int) -> tuple[dict[str, list[float]], dict[str, list[list[int]]]]:
    """Each engine decodes in turn, `rounds` times (the order reversed every round): every decode step's seconds
    per engine, and its tokens (the last round's)."""
    steps: dict[str, list[float]] = {label: [] for label in engines}
    tokens_of: dict[str, list[list[int]]] = {}
    order = list(engines)
    for _ in range(rounds):
        for label in order:
            seconds, tokens_of[label] = decode(engines[label], prompt, batch, tokens)
            steps[label].extend(seconds)
        order.reverse()
    return steps, tokens_of


def _collect(outputs, into: dict[str, list[int]]) -> int:  # type: ignore[no-untyped-def]
    """Keep each request's tokens so far; how many are new since the last step."""
    new = 0
    for out in outputs:
        new += len(out.token_ids) - len(into.get(out.request_id, []))
        into[out.request_id] = list(out.token_ids)
    return new


def run_model(name: str, args: argparse.Namespace) -> list[dict]:
    directory = model_dir(name)
    engines = {label: LLMEngine.create(EngineOptions(
        model_dir=directory, device=args.device, profile_path=args.profile, max_num_seqs=max(args.batches),
        max_model_len=args.max_model_len, graphs=mode, dtype=args.dtype)) for label, mode in MODES.items()}
    plan = engines["graphs"].plan
    print(f"model:   {name} ({directory or 'built-in'}), dtype {plan.dtype.value}", flush=True)
    print(f"  graphs row: {plan.shown('graphs')} ({plan.graphs.evidence})", flush=True)
    if args.force_graphs and not plan.graphs.value:
        print(f"  --force-graphs: {forced(engines['graphs'])}", flush=True)
    prompt = engines["graphs"].tokenizer.encode(PROMPT)
    rows = []
    for batch in args.batches:
        steps, tokens = alternated(engines, prompt, batch, args.tokens, args.rounds)
        median_rate = {label: batch / statistics.median(seconds) for label, seconds in steps.items()}
        floor_rate = {label: batch / min(seconds) for label, seconds in steps.items()}
        same = tokens["graphs"] == tokens["eager"]
        row = {"model": name, "batch": batch, "graphs_tok_s": median_rate["graphs"],
               "eager_tok_s": median_rate["eager"], "ratio": median_rate["graphs"] / median_rate["eager"],
               "graphs_floor_tok_s": floor_rate["graphs"], "eager_floor_tok_s": floor_rate["eager"],
               "floor_ratio": floor_rate["graphs"] / floor_rate["eager"], "steps": len(steps["graphs"]),
               "same_tokens": same, "graphs_row": plan.shown("graphs")}
        print(f"  batch {batch}: median step graphs {row['graphs_tok_s']:.1f} tok/s, eager {row['eager_tok_s']:.1f} "
              f"tok/s, {row['ratio']:.2f}x; fastest step graphs {row['graphs_floor_tok_s']:.1f}, eager "
              f"{row['eager_floor_tok_s']:.1f} tok/s, {row['floor_ratio']:.2f}x ({row['steps']} steps each); greedy "
              f"tokens {'identical' if same else 'DIFFER'}", flush=True)
        rows.append(row)
    fallbacks = {label: dict(engine.fallbacks.counts) for label, engine in engines.items()}
    print(f"  fallbacks: {fallbacks}")
    return rows


def forced(engine: LLMEngine) -> str:
    """Capture the decode graphs the plan left out (its timing on a busy machine, say) on the engine's executor, as
    start-up does, after the same replay check; what was done."""
    model, plan = engine.executor.model, engine.plan
    contexts = context_buckets(plan.max_model_len.value, plan.block_size)
    graphs, difference = capture_checked(model, plan.block_size, batch_buckets(plan.max_num_seqs.value), contexts,
                                         family_capture(model.device), engine.fallbacks)
    if replay_check(difference) is not None:
        return f"not used: {replay_check(difference)}"
    engine.executor.graphs = graphs
    return f"captured batch {', '.join(map(str, graphs.batches))}; replay vs eager relative difference {difference:.2g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", required=True, help="emu:1, cuda:0, ...")
    parser.add_argument("--profile", type=Path, required=True, help="the device's profile (verify-ops records)")
    parser.add_argument("--models", nargs="+", choices=("builtin", "smollm2"), default=["builtin", "smollm2"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--tokens", type=int, default=32, help="decode steps timed per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-model-len", type=int, default=256)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--force-graphs", action="store_true",
                        help="where the plan left graphs off for its timing (a busy machine), capture them anyway "
                             "(after the same replay check) so the two paths can be compared")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print("\n".join(header_lines(machine_facts(args.device))))
    print(load_line(), flush=True)
    rows = [row for name in args.models for row in run_model(name, args)]
    print(load_line())
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": machine_facts(args.device), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
