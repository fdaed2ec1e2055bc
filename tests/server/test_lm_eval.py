"""lm-evaluation-harness itself against `bringup serve`: a small log-likelihood multiple-choice task (a YAML task
file and a JSONL file written here) run with `lm_eval --model local-completions` against a live server of the
SmolLM2 directory in float32, and with `lm_eval --model hf` on the same directory: the same accuracy and the same
per-choice log-likelihoods within 1e-4.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.real_model import smollm2_hf_dir
from tests.server.serve_live import REPO, free_port, wait_healthy

# two lm_eval runs (each imports torch, transformers and datasets) and a server start: about 2 minutes on 2 cores
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
pytest.importorskip("lm_eval", reason="lm-evaluation-harness is in the dev extra")

TASK = "bringup_tiny_mc"
TOLERANCE = 1e-4
SERVED_NAME = "smollm2-f32"
ITEMS = [
    ("What color is the sky on a clear day?", ["blue", "green", "red"], 0),
    ("How many legs does a dog have?", ["two", "four", "six"], 1),
    ("What is the opposite of hot?", ["warm", "cold"], 1),
    ("Which animal says moo?", ["cat", "cow", "duck", "dog"], 1),
    ("What do bees make?", ["milk", "silk", "honey"], 2),
    ("What is the capital of France?", ["Paris", "Berlin", "Madrid", "Rome"], 0),
    ("Which number is larger, 3 or 8?", ["3", "8"], 1),
    ("What falls from clouds when it rains?", ["water", "sand", "leaves"], 0),
    ("What do you use to write on paper?", ["a spoon", "a pen", "a shoe"], 1),
    ("Which season is the coldest?", ["summer", "spring", "winter", "autumn"], 2),
    ("What is frozen water called?", ["steam", "ice"], 1),
    ("Which planet do we live on?", ["Mars", "Earth", "Jupiter"], 1),
    ("How many days are in a week?", ["five", "seven", "ten"], 1),
    ("What color are ripe bananas?", ["yellow", "blue", "purple"], 0),
    ("What does a fish live in?", ["water", "a tree", "the desert"], 0),
    ("What is two plus two?", ["three", "four", "five", "six"], 1),
]
TASK_YAML = """task: TASK
dataset_path: json
dataset_kwargs:
  data_files:
    test: DATA
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_choice: "{{choices}}"
doc_to_target: "{{answer}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """The task folder (its YAML and JSONL) and a private Hugging Face cache: nothing outside tmp is touched."""
    root = tmp_path_factory.mktemp("lm-eval")
    data = root / "items.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n" for q, c, a in ITEMS))
    (root / "tasks").mkdir()
    (root / "tasks" / f"{TASK}.yaml").write_text(TASK_YAML.replace("TASK", TASK).replace("DATA", str(data)))
    return root


def environment(workdir: Path) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(workdir / "hf"),
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.fixture(scope="module")
def server(workdir: Path):
    """`bringup serve` of the SmolLM2 directory in float32, as a child process."""
    port = free_port()
    log = (workdir / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "bringup", "serve", "--model", str(smollm2_hf_dir()),
                             "--dtype", "float32", "--device", "cpu", "--port", str(port), "--max-model-len", "512",
                             "--served-model-name", SERVED_NAME, "--profile", str(workdir / "absent.yaml")],
                            cwd=workdir, env=environment(workdir), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=300, proc=proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def run_lm_eval(workdir: Path, name: str, model: str, model_args: dict[str, str]) -> dict:
    """One `python -m lm_eval` run of the task: its accuracy and each document's per-choice log-likelihoods."""
    out = workdir / name
    args = [sys.executable, "-m", "lm_eval", "--model", model,
            "--model_args", ",".join(f"{k}={v}" for k, v in model_args.items()),
            "--tasks", TASK, "--include_path", str(workdir / "tasks"), "--batch_size", "1",
            "--output_path", str(out), "--log_samples", "--device", "cpu"]
    done = subprocess.run(args, cwd=workdir, env=environment(workdir), capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    samples = [json.loads(line) for line in next(out.rglob(f"samples_{TASK}_*.jsonl")).read_text().splitlines()]
    loglikelihoods = {s["doc_id"]: [float(r[0]) for r in s["filtered_resps"]] for s in samples}
    greedy = {s["doc_id"]: [str(r[1]) for r in s["filtered_resps"]] for s in samples}
    return {"acc": results["results"][TASK]["acc,none"], "loglikelihoods": loglikelihoods, "greedy": greedy,
            "per_doc_acc": {s["doc_id"]: s["acc"] for s in samples}}


def test_local_completions_against_bringup_serve_equals_hf(workdir: Path, server: str) -> None:
    directory = smollm2_hf_dir()
    assert httpx.get(f"{server}/v1/models").json()["data"][0]["id"] == SERVED_NAME
    served = run_lm_eval(workdir, "served", "local-completions", {
        "model": SERVED_NAME, "base_url": f"{server}/v1/completions", "tokenizer": str(directory),
        "tokenizer_backend": "huggingface", "num_concurrent": "1", "max_retries": "1"})
    reference = run_lm_eval(workdir, "hf", "hf", {"pretrained": str(directory), "dtype": "float32"})
    assert sorted(served["loglikelihoods"]) == sorted(reference["loglikelihoods"]) == list(range(len(ITEMS)))
    deltas = [abs(a - b) for doc, theirs in reference["loglikelihoods"].items()
              for a, b in zip(served["loglikelihoods"][doc], theirs, strict=True)]
    print(f"\n{TASK}: {len(ITEMS)} items, {len(deltas)} choices; acc served {served['acc']:.4f}, "
          f"hf {reference['acc']:.4f}; max |delta loglikelihood| {max(deltas):.2e}")
    assert max(deltas) <= TOLERANCE
    assert served["per_doc_acc"] == reference["per_doc_acc"]
    assert served["acc"] == reference["acc"]
    assert served["greedy"] == reference["greedy"]
