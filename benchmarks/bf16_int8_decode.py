"""SmolLM2-135M batch-1 decode: `--dtype bfloat16` alone against `--dtype bfloat16 --quantization int8` (served with
float32 activations, plan/quantize/activations.py) and `--dtype float32 --quantization int8`, one run, side by side
(issue 35, item 5: bfloat16 + int8 at >= 1.3x bfloat16 alone on a CPU like the 2-core Xeon it was written on).

Each engine is the plan its start-up measures here and now. The rounds alternate the engines, so a load that comes and
goes on a shared machine falls on each; each engine's figure is its best round, and the ratios are of those.

Run:  BRINGUP_TEST_MODELS=... python -m benchmarks.bf16_int8_decode [--tokens 64] [--rounds 5] [--threads N]
      [--clock wall|cpu]
(as a module from the repository root). Not a test: the figures are this machine's. Prints the machine, the load
average, each plan's dtype, decode layers, attention and quantization rows, one line per round and the ratios.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.bf16_decode import CLOCKS, load_line
from benchmarks.machine import header_lines, machine_facts, plan_facts, plan_line
from benchmarks.quantized_decode import bringup_decode_tps
from bringup.runner.engine.engine import EngineOptions, LLMEngine

PLANS = {"bf16": ("bfloat16", "none"), "bf16+int8": ("bfloat16", "int8"), "f32+int8": ("float32", "int8")}
ROWS = ("dtype", "decode_layers", "attention", "quantization")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="decode steps timed per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of the engines")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--clock", choices=CLOCKS, default="wall")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.real_model import smollm2_hf_dir

    model_dir = smollm2_hf_dir()
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(load_line())
    print(f"model:   SmolLM2-135M-Instruct ({model_dir.name}); {args.threads} threads; decode {args.tokens} tokens "
          f"at batch 1, {args.rounds} alternating rounds, {args.clock} time", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        engines = {}
        for name, (dtype, quantization) in PLANS.items():
            engines[name] = LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", max_model_len=512,
                                                           profile_path=Path(tmp) / "p.yaml", max_num_seqs=1,
                                                           dtype=dtype, quantization=quantization))
            plan = engines[name].plan
            print(f"{name}: {plan_line(plan_facts(plan.to_dict()))}")
            for setting in ROWS:
                print(f"  {setting}: {getattr(plan, setting).evidence}", flush=True)
        prompt = engines["bf16"].tokenizer.encode("The capital of France is")
        rates: dict[str, list[float]] = {name: [] for name in engines}
        for i in range(args.rounds):
            for name, engine in engines.items():
                rates[name].append(bringup_decode_tps(engine, prompt, args.tokens, reps=1, clock=CLOCKS[args.clock]))
            print(f"round {i + 1}: " + ", ".join(f"{name} {r[-1]:.1f}" for name, r in rates.items()) + " tok/s",
                  flush=True)
        print(load_line())
        best = {name: max(r) for name, r in rates.items()}
        per_round = [a / b for a, b in zip(rates["bf16+int8"], rates["bf16"], strict=True)]
        print("best:    " + ", ".join(f"{name} {tps:.1f} tok/s" for name, tps in best.items()))
        print(f"ratio:   bf16+int8 / bf16 {best['bf16+int8'] / best['bf16']:.2f}x (per round "
              f"{min(per_round):.2f}-{max(per_round):.2f}x); f32+int8 / bf16 {best['f32+int8'] / best['bf16']:.2f}x; "
              f"bf16+int8 / f32+int8 {best['bf16+int8'] / best['f32+int8']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
