"""Serving benchmark for `bringup serve`: throughput and latency under Poisson arrivals.

Sends streaming /v1/completions requests at a given request rate (Poisson arrivals; `inf` = all at
once) with at most `--concurrency` in flight, and reports request throughput, output tokens/s, and
mean / median / p99 of time to first token (TTFT), time per output token after the first (TPOT),
inter-token latency (ITL, the gap between streamed chunks) and end-to-end latency.

Without --url it starts `bringup serve` on the built-in model in a child process (CPU unless --device says
otherwise), so it runs offline:

    python benchmarks/serve_bench.py --num-prompts 64 --concurrency 16 --request-rate 8
    python benchmarks/serve_bench.py --url http://127.0.0.1:8000 --json-out serve.json

Prints the machine (CPU, ISA features, torch, device) and the server's plan (from /v1/plan), then a table
(or only JSON with --json, where both are under "machine" and "plan"). With --url the machine is this
client's, which need not be the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # benchmarks.machine when run as `python benchmarks/serve_bench.py`

from benchmarks.machine import header_lines, machine_facts, plan_facts, plan_line  # noqa: E402


@dataclass
class RequestResult:
    ok: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float = math.nan
    e2e_s: float = math.nan
    itl_s: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def tpot_s(self) -> float:
        if self.output_tokens < 2:
            return math.nan
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


def make_prompts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 7))) for _ in range(words))
            for _ in range(n)]


async def one_request(http: httpx.AsyncClient, url: str, model: str, prompt: str, output_len: int,
                      headers: dict[str, str]) -> RequestResult:
    body = {"model": model, "prompt": prompt, "max_tokens": output_len, "temperature": 0.0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    return await streamed(http, f"{url}/v1/completions", body, headers, lambda chunk: bool(chunk.get("choices")))


def stamp_token(result: RequestResult, start: float, last: float | None, now: float) -> float:
    """Record a token event at `now`: the first sets TTFT, later ones add an inter-token gap; returns `now`."""
    if last is None:
        result.ttft_s = now - start
    else:
        result.itl_s.append(now - last)
    return now


async def streamed(http: httpx.AsyncClient, url: str, body: dict, headers: dict[str, str],
                   carries_tokens: Callable[[dict], bool]) -> RequestResult:
    """POST a streaming request and time its server-sent events: the first chunk that `carries_tokens` sets TTFT,
    the gaps between the next ones are the inter-token latencies; the usage chunk gives the token counts."""
    start = time.perf_counter()
    result = RequestResult(ok=False)
    last: float | None = None
    try:
        async with http.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                result.error = f"HTTP {response.status_code}: {(await response.aread())[:200]!r}"
                return result
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                now = time.perf_counter()
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    result.error = chunk["error"]["message"]
                    return result
                if chunk.get("usage"):
                    result.prompt_tokens = chunk["usage"]["prompt_tokens"]
                    result.output_tokens = chunk["usage"]["completion_tokens"]
                if carries_tokens(chunk):
                    last = stamp_token(result, start, last, now)
        result.e2e_s = time.perf_counter() - start
        result.ok = result.output_tokens > 0
        if not result.ok:
            result.error = "no usage chunk in the stream"
    except httpx.HTTPError as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    return result


async def run_load(url: str, model: str, prompts: list[str], output_len: int, rate: float, concurrency: int,
                   seed: int, headers: dict[str, str]) -> tuple[list[RequestResult], float]:
    rng = random.Random(seed)
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as http:
        await one_request(http, url, model, "warm up", 2, headers)

        async def gated(prompt: str) -> RequestResult:
            async with gate:
                return await one_request(http, url, model, prompt, output_len, headers)

        tasks = []
        start = time.perf_counter()
        for prompt in prompts:
            tasks.append(asyncio.create_task(gated(prompt)))
            if math.isfinite(rate):
                await asyncio.sleep(rng.expovariate(rate))
        results = await asyncio.gather(*tasks)
        return results, time.perf_counter() - start


def stats_ms(values: list[float]) -> dict[str, float]:
    arr = np.array([v for v in values if math.isfinite(v)], dtype=np.float64) * 1000.0
    if arr.size == 0:
        return {"mean": math.nan, "median": math.nan, "p99": math.nan}
    return {"mean": float(arr.mean()), "median": float(np.median(arr)), "p99": float(np.percentile(arr, 99))}


def summarize(results: list[RequestResult], duration: float, args: argparse.Namespace) -> dict:
    ok = [r for r in results if r.ok]
    output_tokens = sum(r.output_tokens for r in ok)
    prompt_tokens = sum(r.prompt_tokens for r in ok)
    return {
        "config": {"url": args.url or "local built-in model", "num_prompts": len(results),
                   "concurrency": args.concurrency, "request_rate": args.request_rate,
                   "prompt_words": args.prompt_words, "output_len": args.output_len, "seed": args.seed},
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "errors": sorted({r.error for r in results if r.error})[:5],
        "duration_s": duration,
        "request_throughput_per_s": len(ok) / duration,
        "output_tokens_per_s": output_tokens / duration,
        "total_tokens_per_s": (output_tokens + prompt_tokens) / duration,
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "ttft_ms": stats_ms([r.ttft_s for r in ok]),
        "tpot_ms": stats_ms([r.tpot_s for r in ok]),
        "itl_ms": stats_ms([gap for r in ok for gap in r.itl_s]),
        "e2e_ms": stats_ms([r.e2e_s for r in ok]),
    }


def print_table(summary: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    c = summary["config"]
    table = Table(title=f"bringup serve benchmark — {c['num_prompts']} requests, concurrency {c['concurrency']}, "
                        f"rate {c['request_rate']}/s, {c['output_len']} output tokens each", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("completed / failed", f"{summary['completed']} / {summary['failed']}")
    table.add_row("duration (s)", f"{summary['duration_s']:.2f}")
    table.add_row("request throughput (req/s)", f"{summary['request_throughput_per_s']:.2f}")
    table.add_row("output tokens/s", f"{summary['output_tokens_per_s']:.1f}")
    table.add_row("total tokens/s (prompt + output)", f"{summary['total_tokens_per_s']:.1f}")
    for key, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E latency")):
        s = summary[key]
        table.add_row(f"{label} mean / median / p99 (ms)", f"{s['mean']:.2f} / {s['median']:.2f} / {s['p99']:.2f}")
    Console().print(table)
    for error in summary["errors"]:
        Console(stderr=True).print(f"[red]error:[/] {error}")


def server_plan(url: str, headers: dict[str, str]) -> dict | None:
    """The server's plan (dtype, weight layout, attention, compiled, device) from /v1/plan; None if it has none."""
    try:
        response = httpx.get(f"{url}/v1/plan", headers=headers, timeout=30)
        response.raise_for_status()
        return response.json()["plan"]
    except (httpx.HTTPError, KeyError, ValueError):
        return None


def describe_setup(url: str, headers: dict[str, str], local_device: str | None) -> tuple[dict, list[str]]:
    """(machine and plan facts for the JSON, the header lines): the local server's device, or a remote one's."""
    machine = machine_facts(local_device)
    plan = server_plan(url, headers)
    lines = header_lines(machine)
    if local_device is None:
        where = f" on its device {plan.get('device')}" if plan else ""
        lines.append(f"server:  {url}{where} — the lines above describe this client's machine, not the server's")
    facts = {"machine": machine, "plan": plan_facts(plan) if plan else None}
    lines.append(plan_line(facts["plan"]) if plan else "plan:    not available (the server has no /v1/plan)")
    return facts, lines


def start_local_server(device: str, max_num_seqs: int | None,
                       extra: list[str] | None = None) -> tuple[str, subprocess.Popen]:
    """`bringup serve` on the built-in model (or `extra` options, e.g. --model DIR) as a child process on a free
    port (no profile: the conservative plan). A separate process keeps this client's work off the server's
    interpreter; its log goes to a temporary file, shown when it fails to start."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [sys.executable, "-m", "bringup", "serve", "--port", str(port), "--device", device,
            "--profile", str(Path(tempfile.gettempdir()) / "serve-bench-no-profile.yaml")]
    if max_num_seqs:
        args += ["--max-num-seqs", str(max_num_seqs)]
    args += extra or []
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    log = tempfile.NamedTemporaryFile("w+", prefix="serve-bench-", suffix=".log", delete=False)  # noqa: SIM115
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return url, proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server did not become healthy: {Path(log.name).read_text()[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server (default: serve the built-in model in a child process)")
    parser.add_argument("--api-key", help="the server's API key, if it has one")
    parser.add_argument("--model", help="model name (default: the first of /v1/models)")
    parser.add_argument("--device", default="cpu", help="device for the local server (default: cpu)")
    parser.add_argument("--max-num-seqs", type=int, help="batch cap for the local server")
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16, help="most requests in flight at once")
    parser.add_argument("--request-rate", type=float, default=math.inf,
                        help="mean requests per second, Poisson arrivals (default: inf = all at once)")
    parser.add_argument("--prompt-words", type=int, default=16, help="random words per prompt")
    parser.add_argument("--output-len", type=int, default=32, help="tokens generated per request (EOS ignored)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print only JSON on stdout")
    parser.add_argument("--json-out", type=Path, help="also write the JSON summary to this file")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.num_prompts < 1 or args.output_len < 1 or args.request_rate <= 0:
        parser.error("--concurrency, --num-prompts, --output-len and --request-rate must be positive")

    server = None
    url = args.url
    if url is None:
        url, server = start_local_server(args.device, args.max_num_seqs)
    url = url.rstrip("/")
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    try:
        setup, header = describe_setup(url, headers, args.device if server is not None else None)
        if not args.json:
            print("\n".join(header), flush=True)
        model = args.model or httpx.get(f"{url}/v1/models", headers=headers, timeout=30).json()["data"][0]["id"]
        prompts = make_prompts(args.num_prompts, args.prompt_words, args.seed)
        results, duration = asyncio.run(run_load(url, model, prompts, args.output_len, args.request_rate,
                                                 args.concurrency, args.seed, headers))
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)  # drains, exits 0
            server.wait(60)
    summary = summarize(results, duration, args)
    summary["config"]["model"] = model
    summary.update(setup)
    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=2))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_table(summary)
        print(json.dumps({k: summary[k] for k in ("request_throughput_per_s", "output_tokens_per_s", "ttft_ms",
                                                  "tpot_ms", "itl_ms")}))
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
