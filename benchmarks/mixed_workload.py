"""A mixed workload through `bringup serve` vs transformers' generate in static batches (run by hand, not in CI).

48 requests, prompts of 16–256 tokens and outputs of 16–128 tokens (seeded), all submitted at once to a
`bringup serve` child process on the same random-init 125M Llama as runner_vs_transformers.py; transformers
runs the same requests in static batches of 8 (left-padded, each batch run to its longest output), the way a
plain script would. Both sides count only the useful output tokens (what each request asked for) and run at
the same dtype. The sides alternate, best of two runs each; the ratio of useful output tokens/s is printed
with the machine (target ≥ 3x), and beside it the compute bound: the unpadded work's FLOPs at the rate of a
prefill-shaped GEMM measured in the same run — what no engine on these GEMMs can beat.

With `--profile P` (what `bringup all` wrote here) the server is planned from P, as a user would run it; at
`--dtype auto` the plan's dtype, which transformers then runs too.

Usage: python benchmarks/mixed_workload.py [--dtype bfloat16|auto] [--profile P] [--requests 48] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import header_lines, machine_facts  # noqa: E402
from benchmarks.runner_vs_transformers import CONFIG, build_model_dir  # noqa: E402
from benchmarks.serve_bench import start_local_server  # noqa: E402

BATCH = 8


def workload(n: int, seed: int = 7) -> list[tuple[list[int], int]]:
    """(prompt token ids, output tokens) per request."""
    rng = random.Random(seed)
    return [([rng.randrange(3, CONFIG["vocab_size"]) for _ in range(rng.randint(16, 256))], rng.randint(16, 128))
            for _ in range(n)]


async def serve_side(url: str, model: str, requests: list[tuple[list[int], int]]) -> float:
    """Seconds until every request, all submitted at once, has its full output."""

    async def one(http: httpx.AsyncClient, prompt: list[int], output: int) -> None:
        body = {"model": model, "prompt": prompt, "max_tokens": output, "temperature": 0, "ignore_eos": True}
        response = await http.post(f"{url}/v1/completions", json=body)
        response.raise_for_status()
        assert response.json()["usage"]["completion_tokens"] == output

    async with httpx.AsyncClient(timeout=1800, limits=httpx.Limits(max_connections=len(requests))) as http:
        start = time.perf_counter()
        await asyncio.gather(*(one(http, prompt, output) for prompt, output in requests))
        return time.perf_counter() - start


def transformers_side(model, requests: list[tuple[list[int], int]]) -> float:  # type: ignore[no-untyped-def]
    """Seconds for static batches of BATCH, left-padded, each run to its longest output."""
    start = time.perf_counter()
    for i in range(0, len(requests), BATCH):
        batch = requests[i:i + BATCH]
        width = max(len(p) for p, _ in batch)
        ids = torch.tensor([[0] * (width - len(p)) + p for p, _ in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in batch])
        longest = max(o for _, o in batch)
        with torch.inference_mode():
            model.generate(ids, attention_mask=mask, max_new_tokens=longest, min_new_tokens=longest,
                           do_sample=False, pad_token_id=0)
    return time.perf_counter() - start


def work_flops(requests: list[tuple[list[int], int]]) -> float:
    """The least arithmetic any engine must do for the requests: every prompt and output token through every
    layer's linears and attention over its context, and one LM-head row per output token (no padding)."""
    c = CONFIG
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    qkv = c["hidden_size"] * (c["hidden_size"] + 2 * c["num_key_value_heads"] * head_dim)
    per_layer = qkv + c["hidden_size"] ** 2 + 3 * c["hidden_size"] * c["intermediate_size"]
    total = 0.0
    for prompt, output in requests:
        tokens = len(prompt) + output - 1  # the last output token is never fed back
        context = tokens * (tokens + 1) / 2  # keys each token attends to, summed
        total += c["num_hidden_layers"] * (2 * per_layer * tokens + 4 * c["hidden_size"] * context)
        total += 2 * c["hidden_size"] * c["vocab_size"] * output
    return total


def gemm_flops_per_s(dtype: torch.dtype, reps: int = 10) -> float:
    """Best rate of a prefill-shaped product ([512, hidden] @ [hidden, intermediate]) at `dtype`, now."""
    x = torch.randn(512, CONFIG["hidden_size"]).to(dtype)
    w = torch.randn(CONFIG["intermediate_size"], CONFIG["hidden_size"]).to(dtype)
    best = float("inf")
    with torch.inference_mode():
        torch.nn.functional.linear(x, w)
        for _ in range(reps):
            start = time.perf_counter()
            torch.nn.functional.linear(x, w)
            best = min(best, time.perf_counter() - start)
    return 2 * x.shape[0] * x.shape[1] * w.shape[0] / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "auto"), default="float32",
                    help="both sides' dtype; auto: the server plan's choice (from --profile)")
    ap.add_argument("--profile", type=Path, default=None, help="the profile the server plans from (default: none)")
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    requests = workload(args.requests)
    useful = sum(o for _, o in requests)
    machine = machine_facts("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        hf = build_model_dir(model_dir).eval()
        profile = ["--profile", str(args.profile)] if args.profile else []
        url, server = start_local_server("cpu", None, extra=["--model", str(model_dir), "--dtype", args.dtype,
                                                            "--max-model-len", "512", *profile])
        try:
            model = httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"]
            plan = httpx.get(f"{url}/v1/plan", timeout=30).json()["plan"]
            args.dtype = plan["dtype"]["value"]  # what "auto" resolved to
            hf = hf.to(getattr(torch, args.dtype))
            served, static = [], []
            for _ in range(2):  # alternate the sides
                served.append(asyncio.run(serve_side(url, model, requests)))
                static.append(transformers_side(hf, requests))
        finally:
            server.terminate()
            server.wait(60)
    ours, theirs = useful / min(served), useful / min(static)
    flops, rate = work_flops(requests), gemm_flops_per_s(getattr(torch, args.dtype))
    bound_s = flops / rate  # no engine on these GEMMs finishes sooner
    result = {"machine": machine, "dtype": args.dtype, "requests": len(requests), "useful_output_tokens": useful,
              "serve_tok_s": ours, "transformers_static_tok_s": theirs, "ratio": ours / theirs, "target": 3.0,
              "serve_runs_s": served, "transformers_runs_s": static,
              "compute_bound": {"flops": flops, "gemm_flops_per_s": rate, "seconds": bound_s,
                                "tok_s": useful / bound_s, "ratio": useful / bound_s / theirs},
              "plan": {name: plan[name]["value"] for name in ("dtype", "compiled", "weight_layout", "max_num_seqs")}}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print("\n".join(header_lines(machine)))
    print(f"{len(requests)} requests, {useful} useful output tokens, {args.dtype}, best of 2 alternating runs")
    print("server plan: " + ", ".join(f"{k} {v}" for k, v in result["plan"].items())
          + f" (profile: {args.profile or 'none'})")
    print(f"bringup serve (all at once)          {ours:8.1f} tok/s   runs {', '.join(f'{s:.1f}s' for s in served)}")
    print(f"transformers, static batches of {BATCH}   {theirs:8.1f} tok/s   runs "
          f"{', '.join(f'{s:.1f}s' for s in static)}")
    print(f"ratio {ours / theirs:.2f}x (target 3.0x): {'met' if ours / theirs >= 3.0 else 'NOT met'}")
    print(f"compute bound: {flops / 1e12:.2f} TFLOP of unpadded work ÷ {rate / 1e9:.0f} GFLOP/s ({args.dtype} "
          f"[512, {CONFIG['hidden_size']}] x [{CONFIG['hidden_size']}, {CONFIG['intermediate_size']}], best now) = "
          f"{bound_s:.1f} s → at most {useful / bound_s:.1f} tok/s, {useful / bound_s / theirs:.2f}x transformers; "
          f"bringup serve reached {bound_s / min(served):.0%} of it")


if __name__ == "__main__":
    main()
