"""SmolLM2-135M batch-1 decode in bfloat16: bringup against llama.cpp's BF16 GGUF of the same model, same threads,
one run, side by side (issue 24's bfloat16 target: >= 1.0x on CPUs with BF16 dot-product instructions).

Two bringup engines: `planned` (the plan start-up measures here and now) and `kernels` (the plan given as data that
the panels layout is fastest and the fused decode layers may run: the host kernels this target is about, checked
against the modules at start-up as always, whatever a loaded machine's start-up timing would have picked).
llama.cpp runs through the installed `llama-cpp-python` bindings, timed as benchmarks/quantized_decode.py times it
(one `eval` of one token per step); its file is the float32 model written as a BF16 GGUF by benchmarks/llama_cpp.py's
writer (norms kept float32, as llama.cpp's converter keeps them). The rounds alternate the runners, so a load that
comes and goes on a shared machine falls on each; each runner's figure is its best round.

Run:  BRINGUP_TEST_MODELS=... python -m benchmarks.bf16_decode [--tokens 64] [--rounds 5] [--threads N]
      [--clock wall|cpu] [--plans planned kernels]
(as a module from the repository root). Not a test: the figures are this machine's. Prints the machine, the load
average, each bringup plan, one row per round and the best of each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.llama_cpp import write_gguf
from benchmarks.machine import header_lines, machine_facts, plan_facts, plan_line
from benchmarks.quantized_decode import bringup_decode_tps, llama_decode_tps
from bringup.backends.registry import backend_for
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.plan.layout import LayoutTimings
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.weights.kinds import IN_OUT, OUT_IN, PANELS

PLANS = ("planned", "kernels")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load:    {one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min averages) on {os.cpu_count()} logical cores"


def host_kernels_given() -> StartupMeasurements:
    """Start-up measurements stating the panels layout fastest at every row count and the fused layers worth trying."""
    layouts = LayoutTimings({m: {IN_OUT: 2e-6 * m, OUT_IN: 2e-6 * m, PANELS: 1e-6 * m} for m in (1, 2, 4, 8)})
    cpu = torch.device("cpu")
    return StartupMeasurements(layouts=layouts, paged_decode=(False, "given as data: not used"),
                               free_bytes=backend_for(cpu).memory(0)[1], fused_decode=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="decode steps timed per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of the runners")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--clock", choices=CLOCKS, default="wall",
                        help="cpu: tokens per second of the process's CPU time, for --threads 1 on a shared machine "
                             "(other processes' load then costs no time; several threads would count their waits)")
    parser.add_argument("--plans", nargs="+", choices=PLANS, default=list(PLANS), help="the bringup engines to run")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.real_model import smollm2_hf_dir

    model_dir = smollm2_hf_dir()
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(load_line())
    print(f"model:   SmolLM2-135M-Instruct ({model_dir.name}) in bfloat16; {args.threads} threads for all runners; "
          f"decode {args.tokens} tokens at batch 1, {args.rounds} alternating rounds, {args.clock} time", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        gguf = write_gguf(model_dir, work / "smollm2-BF16.gguf", "bfloat16", vendored=False)
        engines = {}
        for name in args.plans:
            given = host_kernels_given() if name == "kernels" else None
            engines[name] = LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", max_model_len=512,
                                                           profile_path=work / "p.yaml", max_num_seqs=1,
                                                           dtype="bfloat16", measurements=given))
            plan = engines[name].plan
            print(f"{name}: {plan_line(plan_facts(plan.to_dict()))}")
            for setting in ("weight_layout", "decode_layers"):  # why the plan took (or left) the host kernels
                print(f"  {setting}: {getattr(plan, setting).evidence}", flush=True)
        prompt = engines[args.plans[0]].tokenizer.encode("The capital of France is")
        clock = CLOCKS[args.clock]
        rates: dict[str, list[float]] = {name: [] for name in (*engines, "llama.cpp")}
        for i in range(args.rounds):
            for name, engine in engines.items():
                rates[name].append(bringup_decode_tps(engine, prompt, args.tokens, reps=1, clock=clock))
            rates["llama.cpp"].append(llama_decode_tps(gguf, args.tokens, args.threads, reps=1, clock=clock))
            print(f"round {i + 1}: " + ", ".join(f"{name} {r[-1]:.1f}" for name, r in rates.items()) + " tok/s",
                  flush=True)
        print(load_line())
        theirs = max(rates["llama.cpp"])
        print(f"best:    llama.cpp BF16 {theirs:.1f} tok/s; " + ", ".join(
            f"bringup {name} {max(rates[name]):.1f} tok/s ({max(rates[name]) / theirs:.2f}x)" for name in engines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
