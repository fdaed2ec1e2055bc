"""llama.cpp's `llama-bench` on the same weights, for the runner benchmark (run by hand, not in CI).

llama.cpp is built from the sources inside the `llama-cpp-python` source package (pip downloads it; nothing else
is fetched) with the host compiler (`-DGGML_NATIVE=ON`), into a cache folder, once. The weights are written as
GGUF with the `gguf-py` package vendored in the same sources: the Hugging Face Llama tensors under llama.cpp's
names, q/k rows reordered for its rotary convention, a byte-level BPE vocabulary of the model's size (llama-bench
never tokenizes text). Every step that cannot run here returns the reason instead of a number.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import torch

CACHE = Path(os.environ.get("BRINGUP_BENCH_CACHE", Path.home() / ".cache" / "bringup" / "llama-cpp"))
GGUF_FILE_TYPE = {"float32": 0, "bfloat16": 32}  # LlamaFileType ALL_F32, MOSTLY_BF16


class Unavailable(RuntimeError):
    """llama.cpp cannot be built or run here; the message says why."""


def sources() -> Path:
    """The llama.cpp tree vendored in the llama-cpp-python sdist (downloaded once)."""
    found = sorted(CACHE.glob("llama_cpp_python-*/vendor/llama.cpp"))
    if found:
        return found[-1]
    CACHE.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-d",
                           str(CACHE), "llama-cpp-python"], capture_output=True, text=True, timeout=600)
    archives = sorted(CACHE.glob("llama_cpp_python-*.tar.gz"))
    if done.returncode != 0 or not archives:
        raise Unavailable(f"could not download the llama-cpp-python sources: {done.stderr.strip()[-200:]}")
    with tarfile.open(archives[-1]) as tar:
        tar.extractall(CACHE, filter="data")
    return sorted(CACHE.glob("llama_cpp_python-*/vendor/llama.cpp"))[-1]


def llama_tool(target: str) -> Path:
    """A built llama.cpp program (`llama-bench`, `llama-quantize`, `llama-server`), built now when absent (the
    first build takes 10-20 minutes on 2 cores, a further target a minute or two)."""
    root = sources()
    binary = root / "build" / "bin" / target
    if binary.exists():
        return binary
    steps = [["cmake", "-B", "build", "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
              "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_SERVER=ON"],
             ["cmake", "--build", "build", "--target", target, f"-j{os.cpu_count() or 1}"]]
    for step in steps:
        try:
            done = subprocess.run(step, cwd=root, capture_output=True, text=True, timeout=3600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"{step[0]} failed: {exc}") from None
        if done.returncode != 0:
            raise Unavailable(f"{' '.join(step[:3])} failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return binary


def llama_bench() -> Path:
    return llama_tool("llama-bench")


def quantized_file(source: Path, kind: str, threads: int) -> Path:
    """`source` quantized by `llama-quantize --pure` to `kind` (Q8_0, Q4_0, ...): every tensor in that type, the
    output head too (without --pure llama.cpp keeps the head at Q6_K)."""
    out = source.with_name(f"{source.stem}-{kind}.gguf")
    done = subprocess.run([str(llama_tool("llama-quantize")), "--pure", str(source), str(out), kind, str(threads)],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise Unavailable(f"llama-quantize to {kind} failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return out


def rotary_rows(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Hugging Face q/k rows (each head's two rotary halves) in llama.cpp's interleaved-pair order."""
    rows, cols = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def byte_level_vocab(size: int) -> list[str]:
    """The 256 byte-level BPE symbols (so llama.cpp finds its newline token), then placeholders."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    symbols, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            symbols[byte] = chr(byte)
        else:
            symbols[byte] = chr(256 + extra)
            extra += 1
    return [symbols[b] for b in range(256)] + [f"<t{i}>" for i in range(256, size)]


def write_gguf(model_dir: Path, out: Path, dtype: str, vendored: bool = True) -> Path:
    """model_dir's Llama weights (safetensors) as a GGUF file of `dtype` (float32 or bfloat16); with the gguf-py
    vendored in the llama.cpp sources, or (`vendored=False`) the installed `gguf` package."""
    from safetensors.torch import load_file

    if vendored:
        sys.path.insert(0, str(sources() / "gguf-py"))
    import gguf  # the version that matches the llama.cpp being built

    cfg = json.loads((model_dir / "config.json").read_text())
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(model_dir.glob("*.safetensors")):
        tensors.update(load_file(shard))
    heads, kv_heads, layers = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_context_length(cfg["max_position_embeddings"])
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_block_count(layers)
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_rope_dimension_count(cfg["hidden_size"] // heads)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_layer_norm_rms_eps(cfg.get("rms_norm_eps", 1e-6))
    # transformers 5 writes rope_theta inside rope_parameters; 4.x at the top level
    writer.add_rope_freq_base(cfg.get("rope_theta") or (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    writer.add_file_type(GGUF_FILE_TYPE[dtype])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(byte_level_vocab(cfg["vocab_size"]))
    writer.add_token_types([1] * cfg["vocab_size"])
    writer.add_token_merges(["a b"])  # llama.cpp refuses a BPE vocabulary without merges
    writer.add_bos_token_id(cfg.get("bos_token_id") or 0)
    writer.add_eos_token_id(cfg.get("eos_token_id") or 1)

    def put(name: str, t: torch.Tensor) -> None:
        big = t.dim() > 1 and dtype == "bfloat16"  # norms stay float32, as llama.cpp's converter keeps them
        data = t.to(torch.bfloat16).view(torch.int16).numpy() if big else t.float().numpy()
        writer.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType.BF16 if big else None)

    head = tensors.get("lm_head.weight", tensors["model.embed_tokens.weight"])
    put("token_embd.weight", tensors["model.embed_tokens.weight"])
    put("output_norm.weight", tensors["model.norm.weight"])
    put("output.weight", head)
    for i in range(layers):
        p = f"model.layers.{i}."
        put(f"blk.{i}.attn_norm.weight", tensors[p + "input_layernorm.weight"])
        put(f"blk.{i}.attn_q.weight", rotary_rows(tensors[p + "self_attn.q_proj.weight"], heads))
        put(f"blk.{i}.attn_k.weight", rotary_rows(tensors[p + "self_attn.k_proj.weight"], kv_heads))
        put(f"blk.{i}.attn_v.weight", tensors[p + "self_attn.v_proj.weight"])
        put(f"blk.{i}.attn_output.weight", tensors[p + "self_attn.o_proj.weight"])
        put(f"blk.{i}.ffn_norm.weight", tensors[p + "post_attention_layernorm.weight"])
        put(f"blk.{i}.ffn_gate.weight", tensors[p + "mlp.gate_proj.weight"])
        put(f"blk.{i}.ffn_up.weight", tensors[p + "mlp.up_proj.weight"])
        put(f"blk.{i}.ffn_down.weight", tensors[p + "mlp.down_proj.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def decode_tokens_per_s(gguf_path: Path, tokens: int, threads: int, reps: int = 3) -> float:
    """llama-bench's batch-1 generation rate (tg) over `tokens` tokens, no prompt."""
    return _bench_rate(gguf_path, ["-p", "0", "-n", str(tokens)], threads, reps)


def prefill_tokens_per_s(gguf_path: Path, tokens: int, threads: int, reps: int = 3) -> float:
    """llama-bench's prompt-processing rate (pp) of one `tokens`-token prompt, nothing generated."""
    return _bench_rate(gguf_path, ["-p", str(tokens), "-n", "0"], threads, reps)


def _bench_rate(gguf_path: Path, test: list[str], threads: int, reps: int) -> float:
    done = subprocess.run([str(llama_bench()), "-m", str(gguf_path), *test, "-t", str(threads), "-r", str(reps),
                           "-o", "json"], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise Unavailable(f"llama-bench failed: {done.stderr.strip()[-300:]}")
    runs = json.loads(done.stdout)
    return float(runs[0]["avg_ts"])
