"""bringup's CPU quantized decode (SmolLM2-135M, batch 1) in two checkouts, alternated in one run: a change's
"no regression" check on a busy machine.

Each round starts one process per checkout in turn (`--before`, then `--after`, each run from its own tree with its
own `bringup` first on sys.path) that loads every scheme's engine and times its decode once
(quantized_decode.bringup_decode_tps), and its KL divergence from the float32 model over the eval text. The rows
give each checkout's best tok/s over the rounds and the after/before ratio per round: interference only adds time,
so the best and the spread of the ratios are what to read.

Run:  python -m benchmarks.quantized_before_after --before ../devquant-before --after . [--rounds 3]
(llama.cpp is not needed: this compares bringup with itself.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SCHEMES = ("none", "int8", "int4")
CHILD = """
import json, sys, tempfile, torch
from pathlib import Path
from benchmarks.quantized_decode import bringup_decode_tps, bringup_engine, bringup_logprobs, kld
from bringup.runner.eval.text import default_text
from tests.real_model import smollm2_hf_dir
model_dir, out = smollm2_hf_dir(), {}
with tempfile.TemporaryDirectory() as tmp:
    base = bringup_engine(model_dir, Path(tmp), "none")
    prompt = base.tokenizer.encode("The capital of France is")
    text = base.tokenizer.encode(default_text().text, add_special_tokens=False)[:KLD_TOKENS]
    reference = bringup_logprobs(base, text)
    for scheme in SCHEMES:
        engine = base if scheme == "none" else bringup_engine(model_dir, Path(tmp), scheme)
        tps = bringup_decode_tps(engine, prompt, TOKENS, 1)
        out[scheme] = [tps, 0.0 if scheme == "none" else kld(reference, bringup_logprobs(engine, text)),
                       engine.plan.weight_layout.value]
print("RESULT " + json.dumps(out))
"""


def measure(tree: Path, tokens: int, kld_tokens: int, models: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "BRINGUP_TEST_MODELS": str(models)}
    code = f"SCHEMES = {SCHEMES!r}\nTOKENS = {tokens}\nKLD_TOKENS = {kld_tokens}\n{CHILD}"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True,
                          check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{tree}: exit {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--kld-tokens", type=int, default=128)
    args = parser.parse_args()
    models = Path(os.environ.get("BRINGUP_TEST_MODELS", Path(__file__).resolve().parents[1] / ".cache/test-models"))
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for n in range(args.rounds):
        for side in ("before", "after"):
            runs[side].append(measure(getattr(args, side).resolve(), args.tokens, args.kld_tokens, models))
            print(f"round {n + 1} {side}: {runs[side][-1]}", flush=True)
    print(f"load average at the end: {os.getloadavg()}")
    print(f"{'scheme':7} {'before tok/s':>12} {'after tok/s':>11} {'ratio per round':>22} {'KLD before':>10} "
          f"{'KLD after':>9}")
    for scheme in SCHEMES:
        before, after = ([r[scheme][0] for r in runs[side]] for side in ("before", "after"))
        ratios = ", ".join(f"{a / b:.2f}" for a, b in zip(after, before, strict=True))
        print(f"{scheme:7} {max(before):12.1f} {max(after):11.1f} {ratios:>22} {runs['before'][0][scheme][1]:10.5f} "
              f"{runs['after'][0][scheme][1]:9.5f}  ({runs['after'][0][scheme][2]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
