"""`bringup report` and `bringup profile show/validate/diff` read profiles without torch: a profile copied to a
machine without torch renders, and these commands do not pay for importing it (or the runner's torch modules)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cli.run_cli import run_cli

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "profiles"
REPO = REFERENCE.parents[1]
# what the draft plan needs from the runner: plain data and rules, no torch
TORCH_FREE_RUNNER = {"bringup.runner", "bringup.runner.plan", "bringup.runner.plan.plan",
                     "bringup.runner.plan.profile_facts", "bringup.runner.plan.choice",
                     "bringup.runner.plan.settings", "bringup.runner.plan.shown", "bringup.runner.plan.host_fallbacks",
                     "bringup.runner.plan.graphs_evidence",  # the eager-against-replay records, read as data
                     "bringup.runner.plan.placement", "bringup.runner.plan.placement.placement",  # the row, as data
                     "bringup.runner.plan.placement.step_cost",  # its prediction's step costs, plain data
                     "bringup.runner.plan.prefill_chunk",  # the prefill_chunk row's table, shown
                     "bringup.runner.model",
                     "bringup.runner.model.config",
                     "bringup.runner.model.config.fields", "bringup.runner.model.config.moe_settings",
                     "bringup.runner.model.config.builtin", "bringup.profiles.attention_kinds",
                     "bringup.runner.weights", "bringup.runner.weights.formats",
                     "bringup.runner.weights.formats.compressed_tensors",
                     "bringup.runner.weights.formats.compressed_tensors.scheme",
                     "bringup.runner.weights.formats.compressed_tensors.ignore_rules", "bringup.runner.sampling_params",
                     # the engine options' one definition: every command's flags are generated from it
                     "bringup.runner.engine", "bringup.runner.engine.options"}

READ_ONLY_SCRIPT = """
import sys
from bringup.cli.app import main
for args in {commands!r}:
    sys.argv = ["bringup", *args]
    try:
        main()
    except SystemExit as exc:
        if exc.code:
            raise
heavy = sorted(m for m in ("torch", "sympy", "transformers", "fastapi", "numpy") if m in sys.modules)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
print("RUNNER:" + ",".join(sorted(m for m in sys.modules if m.startswith("bringup.runner"))), file=sys.stderr)
"""

BLOCK_TORCH = """
import sys


class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"{name} is blocked: this test runs as on a machine without torch",
                                      name="torch")
        return None


sys.meta_path.insert(0, NoTorch())
"""


def _profiles(tmp_path: Path) -> tuple[Path, Path]:
    first, second = sorted(REFERENCE.glob("*.yaml"))[:2]
    return Path(shutil.copy(first, tmp_path / "a.yaml")), Path(shutil.copy(second, tmp_path / "b.yaml"))


def test_report_and_profile_commands_import_neither_torch_nor_the_runners_torch_modules(tmp_path):
    a, b = _profiles(tmp_path)
    commands = [["report", "--profile", str(a), "--output", str(tmp_path / "r.html")],
                ["report", "--profile", str(a), "--baseline", str(b), "--format", "md", "--output",
                 str(tmp_path / "r.md")],
                ["profile", "show", str(a)], ["profile", "validate", str(a)], ["profile", "diff", str(a), str(b)]]
    done = subprocess.run([sys.executable, "-c", READ_ONLY_SCRIPT.format(commands=commands)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "HEAVY:\n" in done.stderr, done.stderr[-2000:]
    runner = done.stderr.split("RUNNER:")[1].split("\n")[0].split(",")
    assert "bringup.runner.plan.plan" in runner  # the report still drafts the plan
    assert set(runner) <= TORCH_FREE_RUNNER, sorted(set(runner) - TORCH_FREE_RUNNER)
    assert (tmp_path / "r.html").stat().st_size and (tmp_path / "r.md").stat().st_size


def _without_torch(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import torch, as on a laptop a profile was copied to."""
    blocker = tmp_path / "no_torch"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCK_TORCH)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(REPO)])}


def test_report_renders_a_reference_profile_where_torch_cannot_be_imported(tmp_path):
    a, _ = _profiles(tmp_path)
    env = _without_torch(tmp_path)
    proof = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=120)
    assert proof.returncode != 0 and "blocked" in proof.stderr  # the blocker works
    done = subprocess.run([sys.executable, "-m", "bringup", "report", "--profile", str(a), "--output",
                           str(tmp_path / "without.html")], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    with_torch = run_cli(["report", "--profile", str(a), "--output", str(tmp_path / "with.html")])
    assert with_torch.code == 0, with_torch.stderr[-2000:]
    without = (tmp_path / "without.html").read_text()
    assert "draft for the built-in model" in without  # the plan section is drafted, not refused
    assert without == (tmp_path / "with.html").read_text()


def test_a_command_that_needs_torch_says_so_in_one_line_where_it_is_missing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bringup", "devices", "--profile", str(tmp_path / "p.yaml")],
                          capture_output=True, text=True, env=_without_torch(tmp_path), cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "needs PyTorch" in errors[0], done.stderr
    assert not (tmp_path / "p.yaml").exists()
