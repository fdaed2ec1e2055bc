"""Batch-1 decode where the weights leave the cache: a random Llama of TinyLlama-1.1B's shape (22 layers, hidden 2048,
MLP 5632, 32/4 heads, vocab 32000), bringup int8 / int4 / int4_g64 / bfloat16 against llama.cpp Q8_0 / Q4_0 / Q4_0 /
BF16 of the same weights (int4_g64: the int4 kind that streams Q4_0's bytes per weight), same threads, the rounds
alternated (the best of each runner, and the range of the rounds' ratios); each figure also as a share of the
machine's read bandwidth.

The model is random (seeded, std 0.02) and saved once as bfloat16 safetensors in a cache folder, with a byte-level
tokenizer of its vocabulary (only token ids are fed). llama.cpp gets it as a BF16 GGUF (benchmarks/llama_cpp.py's
writer) quantized to Q8_0 and Q4_0 by its own `llama-quantize --pure` (every tensor in that type, the head too),
and is timed by `llama-bench` (its tg rate, one run per round); both programs are built from the llama-cpp-python
sources (benchmarks/llama_cpp.py), so the Python bindings need not be installed. The
read bandwidth is `bringup bench --only bandwidth`'s dot kernel (two arrays read, nothing written) on this machine in
this run, measured before and after each pair of runners (a shared machine's bandwidth moves by a third within
minutes here), the highest of them taken. Share of bandwidth = bytes of weights a decode step streams (every linear
layer and the head as stored by that runner, plus one embedding row) x tokens/s / read bandwidth. `steal` is the
share of the CPU time during a pair's rounds that the hypervisor gave to other guests (/proc/stat). On a shared VM
both runners slow down while it is above a few percent (bringup's int8 on a Zen 4: 36-41 tok/s at none, 21-30 tok/s
while 7-20 % was stolen). A neighbour that holds the memory shows as `GB/s before/after` well below the run's
highest (here 45-51 against 75-81 GB/s): there both runners are bound by what is left, so a pair's ratio falls
toward the ratio of their bytes per weight (int4 20 against Q4_0's 18 per 32). `--quiet-gbps X` waits before each
pair until the read bandwidth is back to X, the machine's quiet level.

Run:  python -m benchmarks.memory_bound_decode [--tokens 32] [--rounds 3] [--threads N] [--quiet-gbps X]
(as a module from the repository root). Not a test: the figures are this machine's; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.llama_cpp import CACHE as LLAMA_CACHE
from benchmarks.llama_cpp import decode_tokens_per_s, quantized_file, write_gguf
from benchmarks.machine import cpu_times, header_lines, machine_facts, steal_share
from benchmarks.quantized_decode import bringup_decode_tps
from bringup.runner.engine.engine import EngineOptions, LLMEngine

SHAPE = {"hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22, "num_attention_heads": 32,
         "num_key_value_heads": 4, "vocab_size": 32000, "max_position_embeddings": 2048}
# int4 keeps a minimum per group of 32 (Q4_1's 20 bytes); int4_g64 (a scale and minimum per 64) streams Q4_0's 18
PAIRS = (("int8", "Q8_0"), ("int4", "Q4_0"), ("int4_g64", "Q4_0"), ("bfloat16", "BF16"))
GGUF_BYTES_PER_VALUE = {"Q8_0": 34 / 32, "Q4_0": 18 / 32, "BF16": 2.0}
MODEL_DIR = LLAMA_CACHE.parent / "tinyllama-shape-random"


def random_model_dir() -> Path:
    """The random 1.1B Llama as a bfloat16 directory (made once)."""
    if (MODEL_DIR / "config.json").exists():
        return MODEL_DIR
    from transformers import LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.runner.hf_fixtures import save_tokenizer

    torch.manual_seed(0)
    config = LlamaConfig(**SHAPE, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1, dtype="bfloat16")
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(1.0 + 0.1 * torch.randn_like(p) if "norm" in name else 0.02 * torch.randn_like(p))
    staging = MODEL_DIR.with_name(MODEL_DIR.name + ".partial")
    model.save_pretrained(staging, safe_serialization=True)
    save_tokenizer(staging, SHAPE["vocab_size"])
    staging.rename(MODEL_DIR)
    return MODEL_DIR


def read_bandwidth_gbps(work: Path) -> float:
    """The dot kernel's GB/s from `bringup bench --only bandwidth` on the CPU, now."""
    from bringup.profiles.store import load_profile

    profile = work / "bench.yaml"
    done = subprocess.run([sys.executable, "-m", "bringup", "bench", "--only", "bandwidth", "--device", "cpu",
                           "--profile", str(profile)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"bringup bench failed: {done.stderr.strip()[-400:]}")
    dot = load_profile(profile).bench.find("bandwidth", "dot float32")
    if dot is None or dot.gbps is None:
        raise RuntimeError(f"bringup bench wrote no dot bandwidth to {profile}")
    return float(dot.gbps)


def quiet_bandwidth_gbps(work: Path, quiet_gbps: float | None, max_wait_s: float) -> float:
    """The read bandwidth now; with `quiet_gbps`, measured again every 15 s until it reaches that (or max_wait_s
    passed: then said, and the pair runs anyway)."""
    began = time.monotonic()
    gbps = read_bandwidth_gbps(work)
    while quiet_gbps is not None and gbps < quiet_gbps and time.monotonic() - began < max_wait_s:
        time.sleep(15)
        gbps = read_bandwidth_gbps(work)
    waited = time.monotonic() - began
    if quiet_gbps is not None and gbps < quiet_gbps:
        print(f"read bandwidth still {gbps:.1f} GB/s after {waited:.0f} s, below --quiet-gbps {quiet_gbps:g}: "
              "this pair runs on a busy machine", flush=True)
    elif quiet_gbps is not None:
        print(f"read bandwidth {gbps:.1f} GB/s >= {quiet_gbps:g} after {waited:.0f} s", flush=True)
    return gbps


def streamed_bytes(engine: LLMEngine) -> int:
    """Bytes a batch-1 decode step reads: every linear layer's weight as stored for one-row steps, one embedding row."""
    model = engine.executor.model
    kind = model.layout.for_tokens(1)
    linear = sum(t.numel() * t.element_size() for layer in model.linear_layers() for t in [layer.weight(kind)])
    return linear + model.embed.shape[1] * model.embed.element_size()


def gguf_streamed_bytes(kind: str) -> int:
    """The same for llama.cpp's file: every projection and the output head in `kind`, norms aside."""
    h, i, layers = SHAPE["hidden_size"], SHAPE["intermediate_size"], SHAPE["num_hidden_layers"]
    kv = h // SHAPE["num_attention_heads"] * SHAPE["num_key_value_heads"]
    values = layers * (h * h * 2 + h * kv * 2 + 3 * h * i) + SHAPE["vocab_size"] * h
    return int(values * GGUF_BYTES_PER_VALUE[kind] + h * 2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32, help="decode steps timed per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the two runners per pair")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--quiet-gbps", type=float, default=None,
                        help="before each pair, wait until the read bandwidth is at least this (this machine's "
                             "quiet level, e.g. the highest an earlier run printed): neighbours come and go")
    parser.add_argument("--max-wait-s", type=float, default=900, help="the longest wait for --quiet-gbps, per pair")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model_dir = random_model_dir()
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"model:   random Llama of TinyLlama-1.1B's shape ({model_dir}); {args.threads} threads for both runners; "
          f"decode {args.tokens} tokens at batch 1, best of {args.rounds} alternating rounds")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bandwidths = []
        bf16 = write_gguf(model_dir, work / "tiny-BF16.gguf", "bfloat16", vendored=False)
        prompt = [0, 5, 9, 33, 80, 7, 120, 64]
        rows, files = [], {}
        for scheme, kind in PAIRS:
            dtype, quantization = ("bfloat16", "none") if scheme == "bfloat16" else ("float32", scheme)
            engine = LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=work / "p.yaml",
                                                    max_model_len=256, max_num_seqs=1, dtype=dtype,
                                                    quantization=quantization))
            if kind not in files:
                files[kind] = bf16 if kind == "BF16" else quantized_file(bf16, kind, args.threads)
            path = files[kind]
            before = quiet_bandwidth_gbps(work, args.quiet_gbps, args.max_wait_s)
            bandwidths.append(before)
            ours, theirs, began = [], [], cpu_times()
            for _ in range(args.rounds):
                ours.append(bringup_decode_tps(engine, prompt, args.tokens, 1))
                theirs.append(decode_tokens_per_s(path, args.tokens, args.threads, reps=1))
            steal = steal_share(began, cpu_times())
            after = read_bandwidth_gbps(work)
            bandwidths.append(after)
            per_round = [a / b for a, b in zip(ours, theirs, strict=True)]
            rows.append((scheme, kind, max(ours), max(theirs), min(per_round), max(per_round), streamed_bytes(engine),
                         gguf_streamed_bytes(kind), engine.plan.weight_layout.value, engine.plan.decode_layers.value,
                         steal, before, after))
            print(f"measured {scheme} vs {kind}; read bandwidth {before:.1f} GB/s before, {after:.1f} after "
                  "(bringup bench, dot kernel)", flush=True)
            del engine
        bandwidth = max(bandwidths)
        print(f"read bandwidth: {bandwidth:.1f} GB/s, the highest of {len(bandwidths)} measurements "
              f"({', '.join(f'{b:.1f}' for b in bandwidths)})")
        print(f"{'bringup':9} {'llama.cpp':9} {'bringup tok/s':>13} {'llama.cpp tok/s':>15} {'ratio':>6} "
              f"{'per round':>11} {'bringup % bw':>12} {'llama.cpp % bw':>14} {'steal':>5} {'GB/s before/after':>17}")
        for scheme, kind, ours, theirs, low, high, our_bytes, their_bytes, layout, layers, steal, before, after in rows:
            our_share = our_bytes * ours / (bandwidth * 1e9)
            their_share = their_bytes * theirs / (bandwidth * 1e9)
            stolen = "—" if steal is None else f"{steal:.0%}"
            print(f"{scheme:9} {kind:9} {ours:13.2f} {theirs:15.2f} {ours / theirs:5.2f}x {low:5.2f}-{high:4.2f}x "
                  f"{our_share:12.0%} {their_share:14.0%} {stolen:>5} {before:8.1f}/{after:<8.1f}  "
                  f"(bringup: {our_bytes / 2**30:.2f} GiB per step, weights {layout}, decode layers {layers}; "
                  f"llama.cpp {their_bytes / 2**30:.2f} GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
