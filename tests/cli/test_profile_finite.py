"""No stage writes NaN or an infinity into a profile, whatever it is fed: verify-ops runs kernels that return NaN,
infinities, values past their dtype's range and integer garbage; bench times those very cases; tune and eval run a
model with a NaN weight (--force); eval is given a reference holding NaN (tests/cli/test_hostile_eval.py has the
rest, and one whose perplexity overflows). Then every number of the profile file, as YAML reads it back, is
walked."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bringup.probes.ops.catalog import PLUGINS_ENV
from tests.cli.eval_references import poisoned
from tests.cli.run_cli import CliResult, run_cli
from tests.probes.ops.poisoned_ops import OPS
from tests.runner.hf_fixtures import make_hf_model, with_nan_weight

STAGE_SECTIONS = ("ops", "bench", "models", "eval")  # what verify-ops, bench, tune and eval write


def numbers(value: Any, where: str = "") -> Iterator[tuple[str, float]]:
    """Every int and float in a YAML document, by its path (bench.groups.ops.records[3].median_s)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from numbers(item, f"{where}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield where, value


def finished(result: CliResult, *codes: int) -> CliResult:
    assert result.code in codes and "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result


def test_no_stage_writes_a_non_finite_number_after_poisoned_runs(tmp_path, monkeypatch):
    profile = tmp_path / "p.yaml"
    where = ["--device", "cpu", "--profile", str(profile)]
    make_hf_model(tmp_path / "nan-model", vocab=320)
    nan_model = with_nan_weight(tmp_path / "nan-model")
    monkeypatch.setenv(PLUGINS_ENV, "tests.probes.ops.poisoned_ops")

    finished(run_cli(["verify-ops", *where, "--op", ",".join(OPS)]), 1)  # every case fails
    finished(run_cli(["bench", *where, "--quick", "--only", "ops,dispatch", "--include-unverified"]), 0)
    finished(run_cli(["tune", *where, "--model", str(nan_model), "--force", "--runs", "2", "--max-model-len", "64"]),
             0)
    windows = ["--ctx", "32", "--stride", "16", "--max-tokens", "64"]
    reference = tmp_path / "ref.safetensors"
    finished(run_cli(["eval", *where, *windows, "--save-reference", str(reference)]), 0)
    finished(run_cli(["eval", *where, *windows, "--model", str(nan_model), "--force"]), 1)
    nan_reference = poisoned(reference, tmp_path, tensors=lambda a: a | {"target_logprobs": a["target_logprobs"]
                                                                          * math.nan}, name="nan.safetensors")
    finished(run_cli(["eval", *where, "--reference", str(nan_reference)]), 2)

    document = yaml.safe_load(Path(profile).read_text())
    found = list(numbers(document))
    for section in STAGE_SECTIONS:  # the walk covers every stage's own figures, not an empty section
        assert sum(1 for path, _ in found if path.startswith(section)) >= 10, section
    assert [(path, value) for path, value in found if not math.isfinite(value)] == []
