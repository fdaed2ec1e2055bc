"""bringup's runner vs transformers' generate and llama.cpp's llama-bench, side by side in one run (run by hand).

Same random-init Llama (~125M: hidden 768, 12 layers, 12 heads, 4 KV heads, intermediate 2048, vocab 32000),
one dtype for every side (`--dtype`, default float32), 64 prompt tokens + 64 new tokens, greedy, on the CPU.
Each target is printed as a ratio with the machine and the plan:

  1. batch-1 decode tokens/s ÷ transformers' generate                               (target ≥ 1.5x)
  2. batch-1 decode tokens/s ÷ llama.cpp's llama-bench on the same weights (GGUF), the two timed in turn
     (target ≥ 1.0x; built from the llama-cpp-python sources, see llama_cpp.py, or "not measured" with the reason)
  3. batch-1 decode as a fraction of the memory roofline: bandwidth measured by `bringup bench` ÷ weight bytes read
     per token (target ≥ 80 %). The bandwidth drifts with the neighbours on a shared VM, so each bench run is
     paired with the better of two decode runs right after it; the median pair is reported, every pair printed.
  4. with `--profile P` (what `bringup all` wrote here): decode planned from P ÷ with no profile, their decode
     steps interleaved, the median of 7 rounds; a second no-profile engine, interleaved with both, is the control:
     target ≥ 1.0x less the control's largest deviation from 1 (the noise of the comparison itself);
     with P, targets 1-3 measure the runner planned from P (at `--dtype auto`: the plan's dtype)
  5. engine start on the built-in model, no profile (target ≤ 1 s)
  plus 8 concurrent requests' total output tokens/s against transformers' batch of 8, and resident memory over
  1,000 sequential requests (built-in model; flat within a few percent).

Usage: python benchmarks/runner_vs_transformers.py [--quick] [--json] [--dtype bfloat16|auto] [--profile P]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # benchmarks.machine without PYTHONPATH=.

from benchmarks.machine import header_lines, machine_facts, plan_facts, plan_line  # noqa: E402
from bringup.runner.engine.engine import EngineOptions, LLMEngine  # noqa: E402
from bringup.runner.sampling_params import SamplingParams  # noqa: E402
from bringup.runner.weights.layouts import storage_key  # noqa: E402

PROMPT, NEW = 64, 64
CONFIG = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
              num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=512,
              tie_word_embeddings=False, bos_token_id=0, eos_token_id=1)


def build_model_dir(path: Path):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()
    model.generation_config.eos_token_id = None
    model.save_pretrained(path, safe_serialization=True)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(CONFIG["vocab_size"])}, unk_token="t2"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(path / "tokenizer.json"))
    return model


def prompts(n: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randint(3, CONFIG["vocab_size"], (PROMPT,), generator=gen).tolist() for _ in range(n)]


def best_of(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def hf_rates(model, reps: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(batch-1 decode tokens/s, batch-8 total output tokens/s) of transformers' generate."""
    one = torch.tensor(prompts(1))
    eight = torch.tensor(prompts(8))

    def gen(ids: torch.Tensor, new: int) -> None:
        with torch.inference_mode():
            model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0)

    gen(one, 4)
    prefill = best_of(lambda: gen(one, 1), reps)
    full = best_of(lambda: gen(one, NEW), reps)
    batch = best_of(lambda: gen(eight, NEW), reps)
    return (NEW - 1) / (full - prefill), 8 * NEW / batch


def decode_rate(engine: LLMEngine) -> float:
    """Batch-1 decode tokens/s of one request, from the step after its prefill to its last token."""
    engine.add_request("one", prompts(1)[0], SamplingParams(max_tokens=NEW, temperature=0.0, ignore_eos=True))
    engine.step()  # prefill + first token
    start = time.perf_counter()
    while engine.has_unfinished():
        engine.step()
    return (NEW - 1) / (time.perf_counter() - start)


def runner_rates(engine: LLMEngine, reps: int) -> tuple[float, float]:
    """(batch-1 decode tokens/s from step timings, 8-concurrent total output tokens/s)."""
    params = SamplingParams(max_tokens=NEW, temperature=0.0, ignore_eos=True)

    def concurrent() -> None:
        engine.generate(prompts(8), params)

    decode_rate(engine)
    decode = max(decode_rate(engine) for _ in range(reps))
    batch = best_of(concurrent, reps)
    return decode, 8 * NEW / batch


def roofline_pairs(engine: LLMEngine, tmp: Path, threads: int | None, pairs: int) -> list[dict]:
    """(bench bandwidth, decode tokens/s right after it) pairs; a failed bench run is left out. Bench reports
    the best of its kernels and repetitions, so the decode side is the better of two runs (~2 s in all)."""
    out = []
    for i in range(pairs):
        bench = bench_bandwidth_gbps(tmp / f"pair-{i}", threads)
        rate = max(decode_rate(engine), decode_rate(engine))
        if bench:
            out.append({"gbps": bench[0], "source": bench[1], "decode_tok_s": rate})
    return out


def bench_bandwidth_gbps(tmp: Path, threads: int | None) -> tuple[float, str] | None:
    """Best bandwidth of `bringup bench --only bandwidth --quick` run now, on the same CPU; None if it fails."""
    tmp.mkdir(parents=True, exist_ok=True)
    profile = tmp / "bench-profile.yaml"
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    cmd = [sys.executable, "-m", "bringup", "bench", "--only", "bandwidth", "--quick", "--device", "cpu",
           "--profile", str(profile), "--json"]
    if subprocess.run(cmd, env=env, capture_output=True, timeout=600).returncode != 0:
        return None
    from bringup.profiles.store import load_profile

    ceilings = load_profile(profile).bench.ceilings  # type: ignore[union-attr]
    return (ceilings.gbps, f"bench {ceilings.gbps_kernel or ''}") if ceilings and ceilings.gbps else None


def bytes_per_decode_token(engine: LLMEngine) -> int:
    """Weights streamed per decode token: the one-token layout's linear weights, norms and head
    (the embedding table is not streamed: one row is read)."""
    m = engine.executor.model
    kind = m.layout.for_tokens(1)
    norms = [p for name, p in m.named_parameters() if name != "embed"]
    linear = [t for layer in m.linear_layers() for t in (layer.weight(kind), layer.bias) if t is not None]
    seen = {storage_key(t): t.numel() * t.element_size() for t in [*norms, *linear]}
    return sum(seen.values())


def hf_bytes_per_decode_token(model) -> int:  # type: ignore[no-untyped-def]
    """transformers' weights streamed per decode token: every parameter but the input embedding table."""
    embedding = model.get_input_embeddings().weight
    return sum(p.numel() * p.element_size() for p in model.parameters() if p is not embedding)


def roofline_side(decode_tok_s: float, gbps: float, weight_bytes: int) -> dict:
    """One side's batch-1 decode against the memory roofline: bandwidth ÷ weight bytes read per token."""
    roofline = gbps * 1e9 / weight_bytes
    return {"decode_tok_s": decode_tok_s, "weight_bytes_per_token": weight_bytes, "roofline_tok_s": roofline,
            "pct": 100 * decode_tok_s / roofline}


def say(lines: list[str], quiet: bool) -> None:
    if not quiet:
        print("\n".join(lines), flush=True)


def memory_flatness(requests: int) -> dict:
    engine = LLMEngine.create(EngineOptions(device="cpu", max_model_len=256, max_num_seqs=4))
    params = SamplingParams(max_tokens=8, temperature=0.8, seed=0)
    prompt = engine.tokenizer.encode("memory flatness check ")
    proc = psutil.Process()

    def run(n: int) -> None:
        for _ in range(n):
            engine.generate([prompt], params)

    run(50)
    gc.collect()
    before = proc.memory_info().rss
    run(requests)
    gc.collect()
    after = proc.memory_info().rss
    return {"requests": requests, "rss_before_mib": before / 2**20, "rss_after_mib": after / 2**20,
            "growth_pct": 100 * (after - before) / before, "kv_blocks_used": engine.stats()["kv_blocks_used"]}


def engine_start_s(reps: int = 3) -> float:
    """Best seconds to create the built-in model's engine with no profile (nothing to compile)."""
    times = []
    for _ in range(reps):
        begin = time.perf_counter()
        LLMEngine.create(EngineOptions(device="cpu", profile_path=Path("/nonexistent/none.yaml")))
        times.append(time.perf_counter() - begin)
    return min(times)


def llama_cpp_rates(engine: LLMEngine, model_dir: Path, dtype: str, threads: int, tmp: Path, rounds: int
                    ) -> tuple[float | None, float | None, str]:
    """(bringup, llama-bench) batch-1 decode tokens/s on the same weights at `dtype`, the two timed in turn
    `rounds` times and the best of each kept (this VM's bandwidth moves by the minute); None and why not."""
    from benchmarks import llama_cpp

    try:
        gguf = llama_cpp.write_gguf(model_dir, tmp / f"model-{dtype}.gguf", dtype)
        ours = theirs = 0.0
        for _ in range(rounds):
            ours = max(ours, decode_rate(engine), decode_rate(engine))
            theirs = max(theirs, llama_cpp.decode_tokens_per_s(gguf, NEW, threads, reps=2))
        return ours, theirs, f"llama-bench tg{NEW}, {threads} threads; {rounds} rounds in turn with bringup, best of " \
                             "each"
    except (llama_cpp.Unavailable, ImportError, OSError, KeyError, ValueError) as exc:
        return None, None, f"llama.cpp not measured: {exc}"


def profile_ratio(model_dir: Path, profile: Path | None, rounds: int) -> dict | None:
    """Batch-1 decode with the given profile (as `bringup all` wrote it) ÷ with no profile, their decode steps
    interleaved (interleaved_decode.py); a second no-profile engine is the control, its ratio the noise."""
    if profile is None:
        return None
    from benchmarks.interleaved_decode import paired_ratios

    none = Path("/nonexistent/none.yaml")
    engines = {label: LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", max_model_len=256,
                                                     max_num_seqs=8, profile_path=path))
               for label, path in (("no profile", none), ("profile", profile), ("control", none))}
    paired = paired_ratios(engines, prompts(1)[0], 2 * NEW, rounds, baseline="no profile")
    plans = {label: plan_line(plan_facts(engine.plan.to_dict())) for label, engine in engines.items()}
    del engines
    gc.collect()
    control = paired["control"]["ratios"]
    noise = max(abs(1 - r) for r in control)
    return {"profile": {**paired["profile"], "plan": plans["profile"]},
            "no profile": {**paired["no profile"], "plan": plans["no profile"]},
            "control": paired["control"], "ratio": paired["profile"]["ratio"], "noise": noise,
            "rounds": rounds, "target": 1.0 - noise}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one repetition each, 200 memory requests")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "auto"), default="float32",
                    help="the dtype of every side (runner --dtype, transformers, the GGUF for llama.cpp); auto: "
                         "the plan's choice (from --profile)")
    ap.add_argument("--profile", type=Path, default=None,
                    help="a profile `bringup all` wrote on this machine: the runner is planned from it (compiled "
                         "forward, layout, attention as it confirms them), and compared with no profile")
    ap.add_argument("--no-llama-cpp", action="store_true", help="skip building and running llama.cpp")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    reps = 1 if args.quick else 3
    machine = machine_facts("cpu")
    say(header_lines(machine), args.json)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        hf = build_model_dir(model_dir)
        engine = LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", max_model_len=256,
                                                max_num_seqs=8, dtype=args.dtype,
                                                profile_path=args.profile or Path("/nonexistent/none.yaml")))
        args.dtype = engine.plan.dtype.value  # what "auto" resolved to: every other side runs it too
        hf = hf.to(getattr(torch, args.dtype))
        plan = plan_facts(engine.plan.to_dict())
        say([plan_line(plan), ""], args.json)
        ours_1, ours_8 = runner_rates(engine, reps)
        ours_vs_cpp, cpp_1, cpp_how = (None, None, "skipped (--no-llama-cpp)") if args.no_llama_cpp else \
            llama_cpp_rates(engine, model_dir, args.dtype, torch.get_num_threads(), Path(tmp), reps)
        per_token = bytes_per_decode_token(engine)
        pairs = roofline_pairs(engine, Path(tmp), args.threads, 3 if args.quick else 5)
        del engine
        gc.collect()
        hf_1, hf_8 = hf_rates(hf, reps)
        hf_per_token = hf_bytes_per_decode_token(hf)
        del hf
        gc.collect()
        with_profile = profile_ratio(model_dir, args.profile, 3 if args.quick else 7)
    start_s = engine_start_s()
    if not pairs:
        raise SystemExit("`bringup bench --only bandwidth` failed every time: no roofline to compare with")
    for pair in pairs:
        pair["pct"] = 100 * pair["decode_tok_s"] * per_token / (pair["gbps"] * 1e9)
    median = sorted(pairs, key=lambda p: p["pct"])[len(pairs) // 2]
    gbps, source = median["gbps"], median["source"]
    roofline = gbps * 1e9 / per_token
    result = {
        "machine": machine, "plan": plan, "dtype": args.dtype, "threads": torch.get_num_threads(),
        "batch1_decode_tok_s": {"runner": ours_1, "transformers": hf_1, "ratio": ours_1 / hf_1, "target": 1.5},
        "llama_cpp": {"runner": ours_vs_cpp, "llama_cpp": cpp_1, "how": cpp_how, "target": 1.0,
                      "ratio": ours_vs_cpp / cpp_1 if cpp_1 and ours_vs_cpp else None},
        "batch8_total_tok_s": {"runner": ours_8, "transformers": hf_8, "ratio": ours_8 / hf_8},
        "roofline": {"gbps": gbps, "gbps_source": source, "weight_bytes_per_token": per_token,
                     "roofline_tok_s": roofline, "decode_tok_s": median["decode_tok_s"], "pct": median["pct"],
                     "target_pct": 80, "pairs": pairs, "transformers": roofline_side(hf_1, gbps, hf_per_token)},
        "profile_vs_none": with_profile,
        "engine_start_s": {"builtin": start_s, "target": 1.0},
        "memory": memory_flatness(200 if args.quick else 1000),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print_targets(result)


def print_targets(result: dict) -> None:
    b1, cpp, b8, rf = (result[k] for k in ("batch1_decode_tok_s", "llama_cpp", "batch8_total_tok_s", "roofline"))
    rows = [("batch-1 decode tok/s vs transformers", b1["runner"], b1["transformers"], b1["ratio"], 1.5),
            ("batch-1 decode tok/s vs llama.cpp", cpp["runner"] or 0.0, cpp["llama_cpp"], cpp["ratio"], 1.0),
            ("8 concurrent, total output tok/s", b8["runner"], b8["transformers"], b8["ratio"], None),
            ("batch-1 decode, fraction of roofline", rf["pct"] / 100, rf["transformers"]["pct"] / 100,
             rf["pct"] / 100, 0.8)]
    prof = result["profile_vs_none"]
    if prof:
        rows.append(("decode with the profile vs none", prof["profile"]["decode_tok_s"],
                     prof["no profile"]["decode_tok_s"], prof["ratio"], prof["target"]))
    start = result["engine_start_s"]
    rows.append(("engine start, built-in model (s)", start["builtin"], None, 1.0 / start["builtin"], 1.0))
    print(f"dtype {result['dtype']}, {result['threads']} threads")
    print(f"{'metric':38} {'bringup':>9} {'other':>9} {'ratio':>7} {'target':>7}  met")
    for name, ours, other, ratio, target in rows:
        shown = "—" if other is None else f"{other:9.2f}"
        met = "" if target is None or ratio is None else ("yes" if ratio >= target else "NO")
        print(f"{name:38} {ours:9.2f} {shown:>9} {'—' if ratio is None else f'{ratio:6.2f}x':>7} "
              f"{'' if target is None else f'{target:.2f}x':>7}  {met}")
    print(f"llama.cpp: {cpp['how']}")
    print(f"roofline: median pair {rf['decode_tok_s']:.1f} tok/s vs {rf['gbps_source']} {rf['gbps']:.1f} GB/s ÷ "
          f"{rf['weight_bytes_per_token'] / 1e6:.0f} MB/token = {rf['roofline_tok_s']:.1f} tok/s; every pair: "
          + ", ".join(f"{p['gbps']:.1f} GB/s → {p['decode_tok_s']:.1f} tok/s = {p['pct']:.0f}%" for p in rf["pairs"]))
    if prof:
        print(f"profile vs none: median of {prof['rounds']} rounds, decode steps interleaved: "
              + ", ".join(f"{r:.3f}" for r in prof["profile"]["ratios"]) + "; the control (a second no-profile "
              "engine): " + ", ".join(f"{r:.3f}" for r in prof["control"]["ratios"])
              + f"; target: not slower than the control's noise, ≥ {prof['target']:.3f}x")
        print(f"plans: with the profile {prof['profile']['plan']}; with none {prof['no profile']['plan']}")
    mem = result["memory"]
    print(f"RSS over {mem['requests']} sequential requests: {mem['rss_before_mib']:.0f} → {mem['rss_after_mib']:.0f} "
          f"MiB ({mem['growth_pct']:+.1f}%), KV blocks in use after: {mem['kv_blocks_used']}")


if __name__ == "__main__":
    main()
