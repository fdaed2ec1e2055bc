"""SmolLM2-135M batch-1 decode in bfloat16: bringup (its planned bfloat16 path) against llama.cpp's BF16 GGUF of the
same model, same threads, one run, side by side (issue 24's bfloat16 target: >= 1.0x on CPUs with BF16 dot-product
instructions).

llama.cpp runs through the installed `llama-cpp-python` bindings, timed as benchmarks/quantized_decode.py times it
(one `eval` of one token per step); its file is the float32 model written as a BF16 GGUF by benchmarks/llama_cpp.py's
writer (norms kept float32, as llama.cpp's converter keeps them). The rounds alternate bringup and llama.cpp, so a
load that comes and goes on a shared machine falls on both; each side's figure is its best round.

Run:  BRINGUP_TEST_MODELS=... python -m benchmarks.bf16_decode [--tokens 64] [--rounds 5] [--threads N]
(as a module from the repository root). Not a test: the figures are this machine's. Prints the machine, the load
average, bringup's plan, then one row per round and the best of each.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.llama_cpp import write_gguf
from benchmarks.machine import header_lines, machine_facts, plan_facts, plan_line
from benchmarks.quantized_decode import bringup_decode_tps, llama_decode_tps
from bringup.runner.engine.engine import EngineOptions, LLMEngine


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load:    {one:.2f} {five:.2f} {fifteen:.2f} (1, 5, 15 min averages) on {os.cpu_count()} logical cores"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="decode steps timed per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating bringup / llama.cpp rounds")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.real_model import smollm2_hf_dir

    model_dir = smollm2_hf_dir()
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(load_line())
    print(f"model:   SmolLM2-135M-Instruct ({model_dir.name}) in bfloat16; {args.threads} threads for both runners; "
          f"decode {args.tokens} tokens at batch 1, {args.rounds} alternating rounds", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        gguf = write_gguf(model_dir, work / "smollm2-BF16.gguf", "bfloat16", vendored=False)
        engine = LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=work / "p.yaml",
                                                max_model_len=512, max_num_seqs=1, dtype="bfloat16"))
        print(plan_line(plan_facts(engine.plan.to_dict())), flush=True)
        prompt = engine.tokenizer.encode("The capital of France is")
        ours, theirs = [], []
        for i in range(args.rounds):
            ours.append(bringup_decode_tps(engine, prompt, args.tokens, reps=1))
            theirs.append(llama_decode_tps(gguf, args.tokens, args.threads, reps=1))
            print(f"round {i + 1}: bringup {ours[-1]:.1f} tok/s, llama.cpp {theirs[-1]:.1f} tok/s, "
                  f"ratio {ours[-1] / theirs[-1]:.2f}x", flush=True)
        print(load_line())
        print(f"best:    bringup bfloat16 {max(ours):.1f} tok/s, llama.cpp BF16 {max(theirs):.1f} tok/s, "
              f"ratio {max(ours) / max(theirs):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
