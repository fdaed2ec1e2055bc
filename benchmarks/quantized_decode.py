"""SmolLM2-135M batch-1 decode: bringup float32, int8 and int4 against llama.cpp's F32, Q8_0 and Q4_0 files of the same
model, same threads, one run; and each scheme's KL divergence from the float32 model over the same text.

llama.cpp runs through the installed `llama-cpp-python` bindings (its own build of llama.cpp; decode timed as
one `eval` of one token per step, the same loop llama-bench times). Its files are written here: the float32 model as
an F32 GGUF (benchmarks/llama_cpp.py's writer, the installed gguf package), quantized to Q8_0 and Q4_0 with
llama.cpp's own `llama_model_quantize`. KL divergence: KL(float32 bringup || scheme) per position over the first
--kld-tokens tokens of the eval's built-in text, fed as token ids to both runners (the same vocabulary).

Run:  BRINGUP_TEST_MODELS=... python -m benchmarks.quantized_decode [--tokens 64] [--threads N]
(as a module from the repository root: run as a script, `import llama_cpp` would find benchmarks/llama_cpp.py)
Not a test: the figures are this machine's. Prints the machine, then one row per runner and scheme.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.llama_cpp import write_gguf
from benchmarks.machine import header_lines, machine_facts
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.eval.text import default_text
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.sampling_params import SamplingParams

LLAMA_FTYPES = {"Q8_0": 7, "Q4_0": 2}  # llama_ftype LLAMA_FTYPE_MOSTLY_Q8_0, _Q4_0
PAIRS = (("none", "F32"), ("int8", "Q8_0"), ("int4", "Q4_0"), ("int4_g64", "Q4_0"))


def bringup_engine(model_dir: Path, work: Path, quantization: str) -> LLMEngine:
    return LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=work / "p.yaml",
                                          max_model_len=512, max_num_seqs=1, quantization=quantization))


def bringup_decode_tps(engine: LLMEngine, prompt: list[int], tokens: int, reps: int,
                       clock: Callable[[], float] = time.perf_counter) -> float:
    """Decode tokens/s: (tokens - 1) steps, the time of a 1-token generation (the prefill) taken off; best of reps.
    `clock`: wall time, or the process's CPU time (time.process_time: one thread on a shared machine)."""
    def seconds(n: int) -> float:
        start = clock()
        engine.generate([prompt], SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
        return clock() - start

    seconds(4)  # warm
    best = min(seconds(tokens) - seconds(1) for _ in range(reps))
    return (tokens - 1) / best


def bringup_logprobs(engine: LLMEngine, tokens: list[int]) -> torch.Tensor:
    blocks = list(range(-(-len(tokens) // engine.plan.block_size)))
    logits = engine.executor.run_chunks([SeqChunk(tokens, 0, blocks)], all_positions=True)
    return torch.log_softmax(logits.double().cpu(), dim=-1)


def llama_file(f32: Path, kind: str, threads: int) -> Path:
    if kind == "F32":
        return f32
    import llama_cpp

    out = f32.with_name(f"{f32.stem}-{kind}.gguf")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.nthread = LLAMA_FTYPES[kind], threads
    if llama_cpp.llama_model_quantize(str(f32).encode(), str(out).encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama_model_quantize to {kind} failed")
    return out


def llama_decode_tps(path: Path, tokens: int, threads: int, reps: int,
                     clock: Callable[[], float] = time.perf_counter) -> float:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_threads=threads, n_threads_batch=threads,
                          n_batch=512, verbose=False)
    best = float("inf")
    for _ in range(reps + 1):  # the first round warms up
        llm.reset()
        llm.eval([1])
        start = clock()
        for i in range(tokens - 1):
            llm.eval([2 + i])
        best = min(best, clock() - start)
    return (tokens - 1) / best


def llama_logprobs(path: Path, tokens: list[int], threads: int) -> torch.Tensor:
    """Next-token log-probabilities after each token, one token per eval (logits_all over a batch crashed these
    bindings with a Q8_0 file here: llama-cpp-python 0.3.36, a segmentation fault)."""
    import llama_cpp

    # without logits_all the bindings leave `scores` unwritten (zeros: a uniform distribution, KLD = log V - H)
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=512, n_threads=threads, n_threads_batch=threads,
                          logits_all=True, verbose=False)
    rows = []
    for i, token in enumerate(tokens):
        llm.eval([token])
        rows.append(torch.from_numpy(llm.scores[i].copy()))
    return torch.log_softmax(torch.stack(rows).double(), dim=-1)


def kld(reference: torch.Tensor, run: torch.Tensor) -> float:
    return float((reference.exp() * (reference - run)).sum(-1).clamp_min(0).mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="decode steps timed per run")
    parser.add_argument("--reps", type=int, default=5, help="rounds, each timing bringup then llama.cpp once")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--kld-tokens", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.real_model import smollm2_hf_dir

    model_dir = smollm2_hf_dir()
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"model:   SmolLM2-135M-Instruct ({model_dir.name}); {args.threads} threads for both runners; decode "
          f"{args.tokens} tokens at batch 1, best of {args.reps}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        f32 = write_gguf(model_dir, work / "smollm2-F32.gguf", "float32", vendored=False)
        engine = bringup_engine(model_dir, work, "none")
        prompt = engine.tokenizer.encode("The capital of France is")
        text = engine.tokenizer.encode(default_text().text, add_special_tokens=False)[: args.kld_tokens]
        reference = bringup_logprobs(engine, text)
        rows = []
        for scheme, kind in PAIRS:
            current = engine if scheme == "none" else bringup_engine(model_dir, work, scheme)
            path = llama_file(f32, kind, args.threads)
            ours, theirs = [], []
            for _ in range(args.reps):  # the two runners in turn, so a drift in the machine's load meets both
                ours.append(bringup_decode_tps(current, prompt, args.tokens, 1))
                theirs.append(llama_decode_tps(path, args.tokens, args.threads, 1))
            ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
            our_kld = 0.0 if scheme == "none" else kld(reference, bringup_logprobs(current, text))
            their_kld = kld(reference, llama_logprobs(path, text, args.threads))
            rows.append((scheme, kind, max(ours), max(theirs), min(ratios), max(ratios), our_kld, their_kld,
                         current.plan.weight_layout.value))
            print(f"measured {scheme} vs {kind}", flush=True)
        print(f"{'bringup':8} {'llama.cpp':9} {'bringup tok/s':>13} {'llama.cpp tok/s':>15} {'ratio':>6} "
              f"{'per round':>11} {'KLD bringup':>11} {'KLD llama.cpp':>13}  (best of {args.reps} rounds each; KLD vs "
              f"bringup float32 over {len(text)} tokens)")
        for scheme, kind, ours, theirs, low, high, our_kld, their_kld, layout in rows:
            print(f"{scheme:8} {kind:9} {ours:13.1f} {theirs:15.1f} {ours / theirs:5.2f}x {low:5.2f}-{high:4.2f}x "
                  f"{our_kld:11.5f} {their_kld:13.5f}  (bringup weights: {layout})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
