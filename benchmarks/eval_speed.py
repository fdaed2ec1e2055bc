"""`bringup eval` tokens/s against transformers' forward alone, side by side in one run (run by hand).

SmolLM2-135M-Instruct (the float32 directory tests/real_model.py makes), the first 4,096 tokens of the built-in text,
windows of 512 tokens every 256 (the command's defaults), float32, on the CPU, the same process and threads:

  bringup: `run_eval` through the real engine (each window one prefill of all positions, log-softmax, NLL);
           tokens/s = scored tokens / the seconds of its windows
  transformers: the same windows through AutoModelForCausalLM's forward under torch.inference_mode (logits only)
  target: bringup >= 0.8x transformers. Window by window the two alternate (each bringup window is followed by the
  same window through transformers), so load from elsewhere falls on both alike; the best round of each is
  compared, every round printed. Perplexities are printed too: the two must agree within 0.1 %.

Usage: BRINGUP_TEST_MODELS=... python benchmarks/eval_speed.py [--tokens 4096] [--ctx 512] [--stride 256]
       [--rounds 2] [--profile P] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # benchmarks.machine without PYTHONPATH=.

from benchmarks.machine import header_lines, machine_facts, plan_facts, plan_line  # noqa: E402
from bringup.runner.engine.engine import EngineOptions, LLMEngine  # noqa: E402
from bringup.runner.eval.run import EvalResult, eval_tokens, run_eval  # noqa: E402
from bringup.runner.eval.settings import EvalSettings  # noqa: E402
from bringup.runner.eval.text import EvalText, default_text  # noqa: E402
from bringup.runner.eval.windows import plan_windows  # noqa: E402
from tests.real_model import smollm2_hf_dir  # noqa: E402
from tests.runner.hf_perplexity import hf_window_nlls, load_hf  # noqa: E402

TARGET = 0.8


def interleaved_round(engine: LLMEngine, model_dir: Path, hf: torch.nn.Module, text: EvalText, tokens: list[int],
                      settings: EvalSettings) -> tuple[EvalResult, float]:
    """One run_eval, each of its windows followed by the same window through transformers' forward (timed alone), so
    load from elsewhere on the machine falls on both alike. Returns the result and transformers' seconds."""
    windows = plan_windows(len(tokens), settings.ctx, settings.stride)
    spent = [0.0]

    def transformers_window(done: int, total: int) -> None:
        window = windows[done - 1]
        ids = torch.tensor([tokens[window.start:window.end]])
        with torch.inference_mode():
            start = time.perf_counter()
            hf(ids)
            spent[0] += time.perf_counter() - start

    result = run_eval(engine, model_dir, text, tokens, settings, on_window=transformers_window)
    return result, spent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--stride", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile", type=Path, help="plan from this profile (what `bringup all` wrote here); "
                        "default: none, the conservative plan")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    model_dir = smollm2_hf_dir()
    settings = EvalSettings(args.ctx, args.stride, args.tokens)
    with tempfile.TemporaryDirectory() as tmp:
        profile = args.profile or Path(tmp) / "none.yaml"
        engine = LLMEngine.create(EngineOptions(model_dir=model_dir, profile_path=profile, device="cpu",
                                                max_model_len=args.ctx, max_num_seqs=1, dtype="float32"))
    text = default_text()
    tokens = eval_tokens(engine, text, settings, None)
    hf = load_hf(model_dir)
    scored = len(tokens) - 1
    rounds = []
    result = None
    for _ in range(args.rounds):
        result, hf_s = interleaved_round(engine, model_dir, hf, text, tokens, settings)
        rounds.append({"bringup_tokens_per_s": result.tokens_per_s, "transformers_tokens_per_s": scored / hf_s})
    assert result is not None
    best_bringup = max(r["bringup_tokens_per_s"] for r in rounds)
    best_hf = max(r["transformers_tokens_per_s"] for r in rounds)
    hf_ppl = math.exp(float(hf_window_nlls(hf, tokens, args.ctx, args.stride).mean()))
    facts = machine_facts("cpu")
    report = {"machine": facts, "plan": plan_facts(engine.plan.to_dict()), "tokens": len(tokens), "scored": scored,
              "windows": result.windows, "ctx": args.ctx, "stride": args.stride, "rounds": rounds,
              "bringup_tokens_per_s": best_bringup, "transformers_tokens_per_s": best_hf,
              "ratio": best_bringup / best_hf, "target": TARGET, "bringup_ppl": result.nll.ppl,
              "transformers_ppl": hf_ppl}
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return
    print("\n".join(header_lines(facts)))
    print(plan_line(report["plan"]))
    print(f"text:    {len(tokens)} tokens of the built-in text, {result.windows} windows of {args.ctx} every "
          f"{args.stride}, {scored} scored")
    for i, r in enumerate(rounds, 1):
        ours, theirs = r["bringup_tokens_per_s"], r["transformers_tokens_per_s"]
        print(f"round {i}: bringup {ours:.1f} tok/s, transformers forward {theirs:.1f} tok/s ({ours / theirs:.2f}x)")
    verdict = "met" if report["ratio"] >= TARGET else "NOT met"
    print(f"best:    bringup {best_bringup:.1f} tok/s / transformers {best_hf:.1f} tok/s = {report['ratio']:.2f}x "
          f"(target >= {TARGET}x: {verdict})")
    print(f"ppl:     bringup {result.nll.ppl:.4f}, transformers {hf_ppl:.4f} "
          f"({abs(result.nll.ppl / hf_ppl - 1):.2e} apart)")


if __name__ == "__main__":
    main()
