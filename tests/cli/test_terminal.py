"""What a person sees: `bringup all` fits one screen, stage commands summarise unless --details, --help is
quick (imports nothing heavy), shows flags as flags, and lists commands whose modules load lazily."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import typer

from bringup.cli.app import COMMANDS
from bringup.cli.lazy_group import LazyCommand, LazyGroup
from tests.cli.run_cli import run_cli

PLANTED_WARNING = "planted third-party warning: functools.lru_cache is not traced"
PLANTED_FALLBACK = "planted fallback: wanted sdpa_flash, using sdpa_math instead"


@pytest.fixture(scope="module")
def all_run(tmp_path_factory: pytest.TempPathFactory):
    """One real `bringup all` (the slow stages left out) whose probe stage raises a third-party warning and
    logs the same WARNING fallback twice."""
    import bringup.probes.capabilities.stage as probe_stage

    real_run_probe = probe_stage.run_probe

    def noisy_run_probe(*args, **kwargs):
        warnings.warn(PLANTED_WARNING, UserWarning, stacklevel=1)
        for _ in range(2):
            logging.getLogger("bringup.fallback").warning(PLANTED_FALLBACK)
        return real_run_probe(*args, **kwargs)

    path = tmp_path_factory.mktemp("all") / "cpu.yaml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "80")
        patch.setattr(probe_stage, "run_probe", noisy_run_probe)
        result = run_cli(["all", "--device", "cpu", "--profile", str(path), "--skip", "verify-ops",
                          "--skip", "bench"])
    return result, path


def test_all_fits_one_screen(all_run):
    result, path = all_run
    assert result.code == 0, result.stderr[-2000:]
    lines = (result.stdout + result.stderr).splitlines()
    assert len(lines) <= 60, "\n".join(lines)
    assert all(len(line) <= 80 for line in lines), "\n".join(line for line in lines if len(line) > 80)
    for stage in ("devices", "probe", "selftest"):
        assert sum(line.startswith(stage) for line in result.stdout.splitlines()) == 1, result.stdout
    assert str(path.with_name("cpu.all.log")) in result.stdout


def test_all_prints_the_plan_once(all_run):
    result, _ = all_run
    text = result.stdout + result.stderr
    assert sum(line.startswith("plan: ") for line in text.splitlines()) == 1
    assert "plan dtype =" not in text and "evidence" not in text


def test_third_party_warnings_go_to_the_log_only(all_run):
    result, path = all_run
    assert "planted third-party warning" not in result.stdout + result.stderr
    log = path.with_name("cpu.all.log").read_text()
    assert PLANTED_WARNING in log
    assert "stage probe: bringup probe" in log  # the INFO logs and the stages' own output are there too
    assert "Capabilities (executed checks)" in log  # the stages ran with --details into the log


def test_a_fallback_reaches_the_terminal_once(all_run):
    result, path = all_run
    assert (result.stdout + result.stderr).count("planted fallback") == 1
    assert path.with_name("cpu.all.log").read_text().count(PLANTED_FALLBACK) == 2


def test_stage_summary_by_default_and_tables_with_details(tmp_path):
    args = ["verify-ops", "--no-isolate", "--device", "cpu", "--op", "softmax", "--dtype", "float32",
            "--profile", str(tmp_path / "p.yaml")]
    short = run_cli(args)
    assert short.code == 0, short.stderr[-2000:]
    assert short.stdout.splitlines()[-1] == "verify-ops: 7 pass, 0 warn, 0 fail, 0 skip"  # the verdict's words
    assert "op x dtype" not in short.stdout
    full = run_cli([*args, "--details"])
    assert "op x dtype" in full.stdout and full.stdout.splitlines()[-1] == short.stdout.splitlines()[-1]
    as_json = run_cli([*args, "--json"])
    assert json.loads(as_json.stdout)["summary"]["ops"]


HELP_SCRIPT = """
import sys
from bringup.cli.app import main
for args in {commands!r}:
    sys.argv = ["bringup", *args]
    try:
        main()
    except SystemExit:
        pass
heavy = ("torch", "transformers", "fastapi", "bringup.profiles.schema")
heavy = sorted(m for m in heavy if m in sys.modules)
# of the runner, only the engine options' one definition (plain dataclasses: every command's flags come from it)
light = {{"bringup.runner", "bringup.runner.engine", "bringup.runner.engine.options"}}
heavy += sorted(m for m in sys.modules if m.startswith("bringup.runner") and m not in light)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


def test_help_imports_nothing_heavy():
    own = [c.name for c in COMMANDS if c.name not in ("env", "report")]  # those two belong to other modules
    commands = [["--help"]] + [[name, "--help"] for name in own] + [["profile", "diff", "--help"]]
    done = subprocess.run([sys.executable, "-c", HELP_SCRIPT.format(commands=commands)], capture_output=True,
                          text=True, timeout=120)
    assert "HEAVY:\n" in done.stderr, done.stderr[-2000:]
    assert done.stdout.count("Usage: bringup") == len(commands)


def test_help_shows_flags_as_flags_and_lists_every_command():
    top = run_cli(["--help"])
    assert top.code == 0
    for spec in COMMANDS:
        assert f"  {spec.name} " in top.stdout
    bench = run_cli(["bench", "--help"])
    assert "--json " in bench.stdout and "<bool>" not in bench.stdout and "--details" in bench.stdout


def test_help_text_is_rewrapped():
    bench = run_cli(["bench", "--help"]).stdout
    assert "--baseline profiles/last-week.yaml --fail-on-regression" in " ".join(bench.split())
    for line in bench.splitlines():
        assert len(line) <= 80


def test_a_command_whose_module_is_missing_is_one_line_error():
    class Group(LazyGroup):
        lazy_commands = (LazyCommand("ghost", "bringup.cli.no_such_module_here", "command", "Not installed."),)

    app = typer.Typer(cls=Group, rich_markup_mode=None)

    @app.callback()
    def root() -> None:
        """A group."""

    group = typer.main.get_command(app)
    from bringup.errors import BringupError

    with pytest.raises(BringupError, match=r"bringup ghost.* is not available.*no_such_module_here"):
        group.main(["ghost"], standalone_mode=False)


def test_names_spelled_out_for_help_match_their_sources():
    from bringup.cli.commands.stages.bench import GROUP_NAMES
    from bringup.cli.commands.stages.verify_collectives import DEFAULT_DTYPES
    from bringup.probes.bench.stage import GROUPS
    from bringup.probes.collectives.patterns import DEFAULT_DTYPES as PATTERN_DTYPES

    assert tuple(GROUPS) == GROUP_NAMES
    assert DEFAULT_DTYPES == PATTERN_DTYPES


def test_log_file_sits_beside_the_profile():
    from bringup.cli.commands.all_cmd import log_path_for

    assert log_path_for(Path("profiles/cpu.yaml")) == Path("profiles/cpu.all.log")


def test_the_plan_line_names_each_setting_once():
    from bringup.cli.render.all_summary import plan_line

    rows = [("dtype", "bfloat16", ""), ("compiled", "compiled (inductor)", ""), ("weight_layout", "panels", "")]
    assert plan_line(rows) == "dtype bfloat16 · compiled (inductor) · weights panels"
    assert plan_line([("compiled", "eager", "")]) == "eager"
    assert plan_line([("dtype", "float32", ""), ("experts", "none", "")]) == "dtype float32"  # a dense model
    assert plan_line([("experts", "grouped", "")]) == "experts grouped"


def test_log_records_reach_the_terminal_with_control_characters_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """A log message quoting a model's, a profile's or a request's string (a fallback's reason, a file name)."""
    from bringup.log import ROOT_NAME, configure_logging, terminal_handler

    root = logging.getLogger(ROOT_NAME)
    saved = list(root.handlers)
    root.handlers = [h for h in root.handlers if terminal_handler(root) is not h]
    try:
        configure_logging(verbose=False)
        logging.getLogger(f"{ROOT_NAME}.test").warning("model %s failed", "m\x1b[2J\x07\u202e[/bold]")
    finally:
        root.handlers = saved
    err = capsys.readouterr().err
    assert "\\x1b[2J\\x07\\u202e[/bold]" in err
    assert "\x1b[2J" not in err and "\x07" not in err and "\u202e" not in err


def test_a_string_from_outside_is_bounded_before_rich_sees_it():
    from bringup.log import MAX_RECORD_CHARS, TerminalSafeFormatter
    from bringup.terminal_text import MAX_SHOWN_CHARS, markup_safe, shown

    name = "n" * 100_000 + "\x1b[2J"
    assert len(shown(name)) < MAX_SHOWN_CHARS + 40 and shown(name).endswith("(100,004 characters in all)")
    assert len(markup_safe(name)) < MAX_SHOWN_CHARS + 40
    record = logging.LogRecord("bringup.devices", logging.INFO, __file__, 1, "device name %s", (name,), None)
    formatted = TerminalSafeFormatter().format(record)
    assert len(formatted) < MAX_RECORD_CHARS + 40 and "\x1b" not in formatted
