"""`bringup generate` / `bringup selftest` end to end, in-process, including every bad-input case."""

from __future__ import annotations

import json
import sys

import pytest

from bringup.cli.app import main
from bringup.profiles.schema import Capabilities, Capability
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.store import load_profile
from tests.runner.test_plan_fallbacks import write_profile


def run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["bringup", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out, err = capsys.readouterr()
    return exit_info.value.code or 0, out, err


def assert_one_line_error(code: int, err: str, *words: str) -> None:
    assert code == 2
    assert "Traceback" not in err
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert last.startswith("error: ")
    for word in words:
        assert word in last


def test_generate_json(tmp_path, monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, "generate", "Hello", "--max-tokens", "8", "--device", "cpu",
                           "--profile", str(tmp_path / "none.yaml"), "--json", "--ignore-eos")
    data = json.loads(out)
    assert code == 0 and data["completion_tokens"] == 8 and data["finish_reason"] == "length"
    assert data["decode_tokens_per_s"] > 0 and data["ttft_s"] > 0
    assert data["plan"]["dtype"]["value"] == "float32" and data["plan"]["dtype"]["evidence"]
    compiled, plan = data["plan"]["compiled"], data["plan"]
    assert compiled["value"] is None and compiled["shown"] == "eager"  # values as data, the table's text beside
    assert isinstance(plan["max_num_seqs"]["value"], int) and isinstance(plan["attention"]["value"], list)


def test_bad_inputs_end_in_one_line(tmp_path, monkeypatch, capsys):
    base = ["generate", "--device", "cpu", "--profile", str(tmp_path / "none.yaml")]
    code, _, err = run_cli(monkeypatch, capsys, *base, "Hi", "--model", str(tmp_path / "nowhere"))
    assert_one_line_error(code, err, "does not exist")

    pickled = tmp_path / "pickled"
    pickled.mkdir()
    (pickled / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "vocab_size": 8,
                                                     "hidden_size": 8, "intermediate_size": 8,
                                                     "num_hidden_layers": 1, "num_attention_heads": 1}))
    (pickled / "pytorch_model.bin").write_bytes(b"not really")
    code, _, err = run_cli(monkeypatch, capsys, *base, "Hi", "--model", str(pickled))
    assert_one_line_error(code, err, "pickle", "safetensors")

    (pickled / "model.safetensors").write_bytes(b"")
    code, _, err = run_cli(monkeypatch, capsys, *base, "Hi", "--model", str(pickled))
    assert_one_line_error(code, err, "tokenizer.json")

    (pickled / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    code, _, err = run_cli(monkeypatch, capsys, *base, "Hi", "--model", str(pickled))
    assert_one_line_error(code, err, "GPT2LMHeadModel", "LlamaForCausalLM", "Qwen2ForCausalLM")

    code, _, err = run_cli(monkeypatch, capsys, *base, "--max-model-len", "16", "x" * 40)
    assert_one_line_error(code, err, "prompt", "16")

    code, _, err = run_cli(monkeypatch, capsys, *base, "Hi", "--temperature", "-1")
    assert_one_line_error(code, err, "temperature")

    caps = Capabilities(attention={n: Capability(status="unsupported", reason="failed")
                                   for n in ("sdpa_flash", "sdpa_efficient", "sdpa_math")})
    failed = write_profile(tmp_path / "failed.yaml", caps, [OpCaseRecord(op="bmm", dtype="float32", case="c",
                                                                         status="fail")])
    code, _, err = run_cli(monkeypatch, capsys, "generate", "Hi", "--device", "cpu", "--profile", str(failed))
    assert_one_line_error(code, err, "every attention path failed", "sdpa_math")


def test_selftest_records_a_pass_in_the_profile(tmp_path, monkeypatch, capsys):
    path = tmp_path / "p.yaml"
    code, out, _ = run_cli(monkeypatch, capsys, "selftest", "--device", "cpu", "--profile", str(path), "--json",
                           "--steps", "8")
    data = json.loads(out)
    assert code == 0 and data["status"] == "pass" and data["top1_agreement"] == 1.0
    assert data["max_abs_err"] <= data["threshold"]
    recorded = load_profile(path).selftest
    assert recorded is not None and recorded.status == "pass" and recorded.steps == 8
