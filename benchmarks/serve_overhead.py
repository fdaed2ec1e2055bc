"""Serving overhead at concurrency 1: `bringup serve`'s streamed decode against `bringup generate`'s, same model,
same dtype, same plan, one run, side by side (run by hand, not in CI; issue 36's target: serve >= 90 % of generate).

The plan is the same on both sides because both replay one tune record: `bringup tune` runs first into a profile
in a temporary directory (or `--profile` names one that holds a record for the model), so neither side times
anything at its start. The rounds alternate the sides; each keeps its best round (interference only adds time).

- generate: `python -m bringup generate --max-tokens N --ignore-eos`, its own decode tokens/s line;
- serve, lean client: one streamed chat completion read from a raw socket (each SSE event counted, no JSON
  parsed), decode tokens/s from the first content event to the last, so the client costs the machine little;
- serve, httpx client: the same request through httpx, as benchmarks/vs_vllm.py sends it.
Beside them: the CPU time per generated token of the server's event-loop thread and of each client, read from
/proc: where the serving overhead goes on a machine whose cores the decode step already fills.

Run:  python benchmarks/serve_overhead.py [--tokens 256] [--rounds 3] [--dtype bfloat16] [--profile P]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import header_lines, machine_facts  # noqa: E402
from benchmarks.serve_bench import streamed  # noqa: E402
from benchmarks.vs_vllm import SERVED_NAME, Server, free_port, start  # noqa: E402

PROMPT = "Tell me a long story about a cat who learns to sail."
ENV = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), "COLUMNS": "200"}


def bringup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bringup", *args], capture_output=True, text=True, env=ENV,
                          timeout=1800)


def tuned_profile(model: Path, dtype: str, max_len: int) -> Path:
    profile = Path(tempfile.mkdtemp(prefix="serve-overhead-")) / "profile.yaml"
    done = bringup("tune", "--model", str(model), "--dtype", dtype, "--profile", str(profile), "--runs", "2",
                   "--max-model-len", str(max_len))
    if done.returncode != 0:
        raise SystemExit(f"bringup tune failed: {(done.stderr or done.stdout)[-600:]}")
    return profile


def generate_rate(model: Path, dtype: str, profile: Path, tokens: int, max_len: int) -> float:
    done = bringup("generate", PROMPT, "--model", str(model), "--dtype", dtype, "--profile", str(profile),
                   "--max-tokens", str(tokens), "--ignore-eos", "--max-model-len", str(max_len))
    found = re.search(r"decode ([\d.]+) tokens/s", done.stdout + done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"bringup generate failed: {(done.stderr or done.stdout)[-600:]}")
    return float(found.group(1))


def chat_body(tokens: int) -> dict:
    return {"model": SERVED_NAME, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": tokens,
            "temperature": 0.0, "ignore_eos": True, "stream": True}


async def lean_rate(port: int, tokens: int) -> float:
    """Decode tokens/s of one streamed chat completion read from a raw socket: content events counted by their
    bytes, their arrival times kept, nothing parsed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps(chat_body(tokens)).encode()
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    await writer.drain()
    stamps: list[float] = []
    while chunk := await reader.read(65536):
        now = time.perf_counter()
        stamps += [now] * chunk.count(b'"content":"')  # the role event's content is "" and ends at once: counted
    writer.close()
    content = stamps[1:]  # without the role event
    if len(content) < 2:
        raise SystemExit(f"the lean client saw {len(content)} content events")
    return (len(content) - 1) / (content[-1] - content[0])


async def httpx_rate(url: str, tokens: int) -> float:
    async with httpx.AsyncClient(timeout=600) as http:
        body = {**chat_body(tokens), "stream_options": {"include_usage": True}}
        result = await streamed(http, f"{url}/v1/chat/completions", body, {},
                                lambda c: bool(c.get("choices")) and bool(c["choices"][0]["delta"].get("content")))
    if not result.ok:
        raise SystemExit(f"streamed request failed: {result.error}")
    return len(result.itl_s) / sum(result.itl_s)


def thread_cpu_s(pid: int, tid: int) -> float:
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(model: Path, dtype: str, profile: Path, max_len: int) -> tuple[Server, int]:
    port = free_port()
    command = [sys.executable, "-m", "bringup", "serve", "--model", str(model), "--dtype", dtype, "--port", str(port),
               "--served-model-name", SERVED_NAME, "--profile", str(profile), "--max-model-len", str(max_len)]
    return start("bringup serve", command, ENV, port), port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a Hugging Face directory (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--profile", type=Path, help="a profile holding a tune record of the model (default: tune "
                                                     "one into a temporary directory first)")
    parser.add_argument("--tokens", type=int, default=256, help="tokens generated per request")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-model-len", type=int, default=2048)
    args = parser.parse_args()
    if args.model is None:
        from tests.real_model import smollm2_hf_dir
        args.model = smollm2_hf_dir()
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"model:   {args.model.name}, {args.dtype}, {args.tokens} tokens per request, concurrency 1", flush=True)
    profile = args.profile or tuned_profile(args.model, args.dtype, args.max_model_len)
    print(f"plan:    the tune record in {profile} (both sides replay it)", flush=True)
    server, port = start_server(args.model, args.dtype, profile, args.max_model_len)
    rows: dict[str, list[float]] = {"generate": [], "serve, lean client": [], "serve, httpx client": []}
    loop_ms: list[float] = []
    client_ms: list[float] = []
    try:
        pid = server.proc.pid
        asyncio.run(lean_rate(port, 8))  # warm
        for _ in range(args.rounds):
            rows["generate"].append(generate_rate(args.model, args.dtype, profile, args.tokens, args.max_model_len))
            before, client_before = thread_cpu_s(pid, pid), time.process_time()
            rows["serve, lean client"].append(asyncio.run(lean_rate(port, args.tokens)))
            loop_ms.append((thread_cpu_s(pid, pid) - before) * 1e3 / args.tokens)
            lean_client = (time.process_time() - client_before) * 1e3 / args.tokens
            client_before = time.process_time()
            rows["serve, httpx client"].append(asyncio.run(httpx_rate(server.url, args.tokens)))
            client_ms.append((time.process_time() - client_before) * 1e3 / args.tokens)
            print("round: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rows.items()) + " tok/s", flush=True)
    finally:
        server.stop()
    best = {k: max(v) for k, v in rows.items()}
    print(f"\n{'side':24} {'decode tok/s':>12} {'vs generate':>12}  rounds")
    for k, v in rows.items():
        print(f"{k:24} {best[k]:12.1f} {best[k] / best['generate']:11.0%}  {[round(x, 1) for x in v]}")
    print(f"\nCPU per generated token: server event-loop thread {min(loop_ms):.2f} ms, lean client {lean_client:.2f} "
          f"ms, httpx client {min(client_ms):.2f} ms (the decode step fills every core, so this work slows it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
