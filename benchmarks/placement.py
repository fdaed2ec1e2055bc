"""Placement on an emulated pair that holds the model only together: the planned layer split against llama.cpp's
memory-proportional split and against the large device alone (issue 54's acceptance: >= 1.3x faster than each).

The pair: `emu:0` fast and small (speed 1.0), `emu:1` slow and large (speed 0.25, so the emulator waits three times
what it computes), both running the default spec's native ops (matmuls, elementwise, indexing, KV writes) as an
accelerator does; the caps (--fast-cap, --slow-cap, default 450 and 560 MiB) make SmolLM2-135M in float32 with a
256-token cache fit neither alone. Each device's bandwidth is measured here first (bench's triad kernel through its
harness, interleaved rounds), then a layer of the model is timed on each (engine/layer_timing.py, as a start-up
does), and the planner is fed those figures and the caps, as a start-up feeds it a profile's. Each placement's
predicted time is printed beside its measured one.
"large alone" runs every layer on emu:1 with its cap lifted (it cannot hold the model under it: that is the point
of the split; the row says how fast the large device would be if it could).

Each placement is the runner's own executor over the model split by engine/split_model.py, greedy, batch 1; the
rounds alternate the placements so a load that comes and goes falls on each; each figure is its best round. The
greedy tokens of every placement are checked against the CPU's.

`--devices FAST,LARGE` runs the same comparison on real devices, the first capped at --fast-cap, the second at
--slow-cap (MiB): on a lent GPU, `--devices cuda:0,cpu --fast-cap 300 --slow-cap 4096` makes SmolLM2 split between
the GPU and the host (llama.cpp's partial offload, set by hand there), and "large alone" is the CPU.

`--case replicas` runs the replicas case instead (benchmarks/placement_replicas.py says what it measures).

Run:  python -m benchmarks.placement [--case split|replicas] [--devices emu:0,emu:1] [--tokens 32] [--rounds 3]
[--workload short|chat|both] [--requests 64] [--model FILE.gguf] (from the repository root; on emu devices it sets
BRINGUP_EMU_SPEC for itself; --workload and --requests are the replicas case's). Not a test: the figures are this
machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

EMU_DEVICES = [{"name": "Emu fast small", "memory": "2GiB", "speed": 1.0},
               {"name": "Emu slow large", "memory": "2GiB", "speed": 0.25}]
DEFAULT_MODEL = Path(".cache/test-models/SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT = [1, 504, 3458, 282, 4649, 314]
CONTEXT = 256


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("split", "replicas"), default="split")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--devices", default="emu:0,emu:1", help="FAST,LARGE (the split case)")
    parser.add_argument("--fast-cap", type=int, default=450, help="MiB, the first device's cap")
    parser.add_argument("--slow-cap", type=int, default=560, help="MiB, the second device's cap")
    parser.add_argument("--workload", choices=("short", "chat", "both"), default="both", help="the replicas case's")
    parser.add_argument("--requests", type=int, default=64,
                        help="the replicas case's sustained load: requests served at concurrency 8")
    args = parser.parse_args()
    args.devices = [d.strip() for d in args.devices.split(",")]
    if len(args.devices) != 2 or (args.case == "replicas" and args.devices != ["emu:0", "emu:1"]):
        parser.error(f"--devices {','.join(args.devices)}: give two devices, FAST,LARGE (the replicas case runs on "
                     "emu:0,emu:1 only)")
    if args.requests < 1:
        parser.error(f"--requests {args.requests}: give at least 1 (the sustained load's requests)")
    if not args.model.is_file():
        parser.error(f"--model {args.model}: no such file (SmolLM2's GGUF: tests/real_model.py fetches it)")
    if not any(d.startswith("emu") for d in args.devices):
        run(args)
        return
    from benchmarks import placement_replicas
    from bringup_emu.default_spec import DEFAULT_NATIVE

    spec = {"devices": EMU_DEVICES, "refused_dtypes": ["float64"], "native": list(DEFAULT_NATIVE)}
    spec = placement_replicas.spec() if args.case == "replicas" else spec
    if os.environ.get("BRINGUP_EMU_SPEC") != json.dumps(spec):
        os.environ["BRINGUP_EMU_SPEC"] = json.dumps(spec)
        os.execv(sys.executable, [sys.executable, "-m", "benchmarks.placement", *sys.argv[1:]])
    run(args)


def measured_gbps(rounds: int, devices: list[str]) -> dict[str, float]:
    import torch

    from bringup.probes.bench.groups.bandwidth import kernels
    from bringup.probes.bench.harness import Harness, HarnessSettings

    settings = HarnessSettings(warmup=2, min_reps=5, max_reps=20, budget_s=0.2)
    best: dict[str, float] = {}
    for _ in range(rounds):
        for device in devices:
            a, b, c = (torch.rand(1 << 22, device=device) for _ in range(3))
            seconds = Harness.for_device(torch.device(device), settings).measure(kernels(a, b, c)["triad"]).min_s
            best[device] = max(best.get(device, 0.0), 3 * a.numel() * 4 / seconds / 1e9)
    return best


def placements(model_path: Path, gbps: dict[str, float], caps: dict[str, int]) -> tuple[dict[str, list],
                                                                                         dict[str, float]]:
    """Each placement's runs of layers, and the planner's predicted seconds per token for each."""
    import torch

    from bringup.runner.engine.layer_timing import layer_seconds
    from bringup.runner.plan.placement.facts import DeviceFacts
    from bringup.runner.plan.placement.layer_term import with_layer_time
    from bringup.runner.plan.placement.need import model_need
    from bringup.runner.plan.placement.planner import plan_placement
    from bringup.runner.plan.placement.split import given_split, memory_proportional_split
    from bringup.runner.sources.model_source import model_source

    config = model_source(model_path).config()
    need = model_need(config, CONTEXT)
    facts = []
    for d in caps:
        timed = layer_seconds(d, config, "float32")
        plain = DeviceFacts(d, caps[d], f"{caps[d] >> 20} MiB (cap)", gbps[d], None, "float32",
                            f"measured {gbps[d]:.2f} GB/s", False)
        facts.append(with_layer_time(plain, need, timed.seconds, timed.evidence))
        print(f"{d:>20}: {facts[-1].speed_evidence}")
    lifted = [facts[0], replace(facts[1], memory_bytes=1 << 40)]
    chosen = {"planned": plan_placement(facts, need), "memory-proportional": memory_proportional_split(facts, need),
              "large alone": given_split(lifted, need, [0.0, 1.0])}
    for name, p in chosen.items():
        print(f"{name:>20}: {', '.join(f'{m.device} layers [{m.first}, {m.last}]' for m in p.members)}; "
              f"predicted {p.seconds_per_token * 1e3:.1f} ms/token")
    print(f"{'planned evidence':>20}: {chosen['planned'].evidence}")
    runs = {name: [(torch.device(m.device), m.first, m.last) for m in p.members] for name, p in chosen.items()}
    return runs, {name: p.seconds_per_token for name, p in chosen.items()}


def decoder(model_path: Path, runs: list | None):  # type: ignore[no-untyped-def]
    import torch

    from bringup.fallbacks import FallbackRecorder
    from bringup.runner.engine.executor import Executor
    from bringup.runner.engine.split_model import split_across
    from bringup.runner.model.decoder import WeightLayout
    from bringup.runner.plan.plan import build_plan
    from bringup.runner.plan.profile_facts import ProfileFacts
    from bringup.runner.sources.model_source import model_source

    source = model_source(model_path)
    config = source.config()
    model = source.load(config, torch.float32, "cpu", WeightLayout("out_in", "out_in", 0))
    if runs is not None:
        split_across(model, runs)
    plan = build_plan(ProfileFacts(None), "benchmark", str(model.device), config, 1, CONTEXT, "float32")
    model.allocate_kv_cache(CONTEXT // plan.block_size, plan.block_size)
    return Executor(model, plan, FallbackRecorder())


def greedy(executor, tokens: int) -> tuple[list[int], float]:  # type: ignore[no-untyped-def]
    """The greedy tokens after PROMPT and the best decode step's seconds (batch 1)."""
    from bringup.runner.model.batch_inputs import SeqChunk

    ids, start, table, best = list(PROMPT), 0, list(range(CONTEXT // 16)), float("inf")
    for step in range(tokens):
        began = time.perf_counter()
        logits = executor.run_chunks([SeqChunk(list(ids), start, table)]).cpu()
        if step:
            best = min(best, time.perf_counter() - began)
        start = len(ids)
        ids.append(int(logits[0].argmax()))
    return ids[len(PROMPT):], best


def run(args: argparse.Namespace) -> None:
    import logging

    from benchmarks.machine import header_lines, machine_facts

    logging.disable(logging.WARNING)  # the plan's "no usable profile" warning: the benchmark gives the figures
    print("\n".join(header_lines(machine_facts("cpu"))))  # the host; the devices below
    spec = json.loads(os.environ.get("BRINGUP_EMU_SPEC") or "{}")
    print(f"load:    {os.getloadavg()[0]:.2f} (1-min average) at the start; devices {','.join(args.devices)}"
          + (f"; spec {json.dumps(spec['devices'])}" if spec else ""))
    gbps = measured_gbps(args.rounds, args.devices)
    print(f"measured: {', '.join(f'{d} {v:.2f} GB/s' for d, v in gbps.items())} (triad, best of {args.rounds})")
    if args.case == "replicas":
        from benchmarks.placement_replicas import run as run_replicas

        run_replicas(args.model, args.tokens, args.rounds, gbps, args.workload, args.requests)
        return
    fast, large = args.devices
    runs, predicted = placements(args.model, gbps, {fast: args.fast_cap << 20, large: args.slow_cap << 20})
    reference, _ = greedy(decoder(args.model, None), args.tokens)
    executors = {name: decoder(args.model, r) for name, r in runs.items()}
    best: dict[str, float] = {}
    for round_index in range(args.rounds):
        for name, executor in executors.items():
            tokens, seconds = greedy(executor, args.tokens)
            same = "same as the CPU" if tokens == reference else f"DIFFERENT from the CPU: {tokens} vs {reference}"
            print(f"round {round_index + 1} {name:>20}: {seconds * 1e3:8.1f} ms/token (best step); {same}")
            best[name] = min(best.get(name, float("inf")), seconds)
    planned = best["planned"]
    for name, seconds in best.items():
        print(f"best {name:>20}: {seconds * 1e3:8.1f} ms/token; planned is {seconds / planned:.2f}x faster; "
              f"predicted {predicted[name] * 1e3:.1f} (measured/predicted {seconds / predicted[name]:.2f})")
    print(f"load:    {os.getloadavg()[0]:.2f} (1-min average) at the end")


if __name__ == "__main__":
    main()
