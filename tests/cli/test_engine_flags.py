"""Engine options are declared once (runner/engine/options.py): each command's flags are generated from the fields
of the groups it takes, with the field's default and help, and fill one EngineOptions."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from bringup.cli.app import COMMANDS
from bringup.cli.common import OVERWRITES_TOO
from bringup.cli.engine_flags import ENGINE_OPTIONS, takes_engine_options
from bringup.cli.lazy_group import load_command
from bringup.runner.engine.options import BATCH, CHAT, CONTEXT, CPU_FALLBACK, MODEL, TARGET, EngineOptions
from tests.cli.run_cli import run_cli

ENGINE_FLAGS = {"--model", "--dtype", "--quantization", "--force", "--device", "--profile", "--strict",
                "--allow-cpu-fallback", "--max-num-seqs", "--max-model-len", "--chat-template"}
# which engine flags each runner command takes (the same sets as before the options were declared once)
TAKES = {
    "serve": ENGINE_FLAGS,
    "generate": ENGINE_FLAGS - {"--max-num-seqs"},
    "selftest": ENGINE_FLAGS - {"--max-num-seqs", "--max-model-len", "--chat-template"},
    "eval": ENGINE_FLAGS - {"--max-num-seqs", "--max-model-len", "--chat-template"},
    "tune": ENGINE_FLAGS - {"--max-num-seqs", "--allow-cpu-fallback", "--chat-template"},
}


def click_command(name: str):  # type: ignore[no-untyped-def]
    return load_command(next(c for c in COMMANDS if c.name == name))


def engine_params(name: str) -> dict[str, object]:
    """The command's engine flags by their long name, as click parsed its signature."""
    return {max(p.opts, key=len): p for p in click_command(name).params if set(p.opts) & ENGINE_FLAGS}


@pytest.mark.parametrize("name", sorted(TAKES))
def test_each_runner_command_takes_its_groups_flags_with_the_fields_defaults(name):
    params = engine_params(name)
    assert set(params) == TAKES[name]
    by_flag = {"--model": "model_dir", "--profile": "profile_path"}
    defaults = {f.name: f.default for f in fields(EngineOptions)}
    for flag, param in params.items():
        field = by_flag.get(flag, flag[2:].replace("-", "_"))
        assert param.default == defaults[field], flag
    assert params["--dtype"].default == "auto" and params["--quantization"].default == "none"
    assert "-m" in params["--model"].opts and "-d" in params["--device"].opts and "-p" in params["--profile"].opts


def test_help_comes_from_the_field_and_says_what_else_a_flag_does_in_a_command():
    serve_force = engine_params("serve")["--force"].help
    selftest_force = engine_params("selftest")["--force"].help
    assert serve_force.startswith("Run a --dtype the profile marks broken") and OVERWRITES_TOO not in serve_force
    assert selftest_force == f"{serve_force} {OVERWRITES_TOO}"
    assert "capped at 4096" in engine_params("tune")["--max-model-len"].help
    assert engine_params("serve")["--max-num-seqs"].min == 1


def test_the_flags_fill_one_engine_options_and_the_rest_of_the_command_line_stays_the_commands():
    got: list[tuple[EngineOptions, int]] = []

    @takes_engine_options(MODEL, TARGET, CPU_FALLBACK, BATCH, CONTEXT, CHAT)
    def command(options: EngineOptions = ENGINE_OPTIONS, steps: int = 3) -> None:
        got.append((options, steps))

    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, ["--model", "m.gguf", "-d", "cpu", "--dtype", "bfloat16", "--quantization",
                                      "int8", "--max-num-seqs", "4", "--max-model-len", "256", "--strict", "--force",
                                      "--allow-cpu-fallback", "--chat-template", "t.jinja", "--steps", "7"])
    assert result.exit_code == 0, result.output
    [(options, steps)] = got
    assert steps == 7
    assert options == EngineOptions(model_dir=Path("m.gguf"), device="cpu", dtype="bfloat16", quantization="int8",
                                    max_num_seqs=4, max_model_len=256, strict=True, force=True,
                                    allow_cpu_fallback=True, chat_template=Path("t.jinja"))


def test_a_command_without_a_group_gets_its_fields_defaults():
    got: list[EngineOptions] = []

    @takes_engine_options(MODEL)
    def command(options: EngineOptions = ENGINE_OPTIONS) -> None:
        got.append(options)

    app = typer.Typer()
    app.command()(command)
    assert CliRunner().invoke(app, ["--max-num-seqs", "4"]).exit_code == 2  # not a flag of this command
    assert CliRunner().invoke(app, []).exit_code == 0
    assert got == [EngineOptions()]


@pytest.mark.parametrize("args", [["serve", "--max-num-seqs", "0"], ["generate", "Hi", "--max-model-len", "0"],
                                  ["tune", "--max-model-len", "0"]])
def test_a_limit_below_its_minimum_is_refused_before_any_work(args):
    refused = run_cli(args)
    assert refused.code == 2 and f"{args[-2]}': Input should be greater than or equal to 1" in refused.stderr
