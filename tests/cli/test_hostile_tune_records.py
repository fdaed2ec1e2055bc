"""A tune record edited by hand (issue 38): the profile's `models` section written by a real `bringup tune` on the
built-in model, one field changed, then started through the real CLI. A record start-up cannot replay as written is
refused as a whole, naming the field: a WARNING and timing at start-up, or under --strict one `error:` line and
exit 2; never a traceback, a KeyError or a ZeroDivisionError. A valid record, rows reordered, still replays."""

from __future__ import annotations

import math
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bringup.profiles.attention_kinds import PAGED_DECODE
from bringup.profiles.store import load_profile
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from tests.cli.run_cli import CliResult, run_cli
from tests.cli.test_tune_cmd import replayed_start, tuned  # noqa: F401 (tuned: the module's tuned profile)
from tests.server.serve_live import free_port, spawn_cli, wait_healthy

Edit = Callable[[dict[str, Any]], None]


def edited(tuned_profile: Path, folder: Path, edit: Edit) -> tuple[Path, str]:
    """A copy of the tuned profile with its one record changed by `edit` (on the YAML's plain data), and its key."""
    document = yaml.safe_load(tuned_profile.read_text())
    (key, record), = document["models"].items()
    edit(record)
    path = folder / "edited.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path, key


def generate(profile: Path, *flags: str) -> CliResult:
    return run_cli(["generate", "Hi", "--max-tokens", "2", "--device", "cpu", "--profile", str(profile),
                    "--max-model-len", "256", *flags])


def one_error_line(result: CliResult) -> str:
    assert result.code == 2, (result.code, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def _set(path: tuple, value: Any) -> Edit:
    def edit(record: dict[str, Any]) -> None:
        *parents, last = path
        node = record
        for part in parents:
            node = node[part]
        node[last] = value
    return edit


def _drop(path: tuple) -> Edit:
    def edit(record: dict[str, Any]) -> None:
        *parents, last = path
        node = record
        for part in parents:
            node = node[part]
        del node[last]
    return edit


def _first_candidate(value: dict[str, float]) -> Edit:
    """The record's first candidate set to `value`; where the tune timed none (which candidates the plan holds is
    decided by timings of the machine: the layout's panels, paged decode), a candidate start-up times, added."""
    def edit(record: dict[str, Any]) -> None:
        name = next(iter(record["candidates"]), PAGED_DECODE)
        record["candidates"][name] = value
    return edit


HOSTILE = [  # (what, edit, the field the refusal names)
    ("an unknown candidate", _set(("candidates", "turbo"), {"candidate_s": 0.001, "plain_s": 0.002}),
     "candidates.turbo: not a candidate start-up times"),
    ("an unknown skipped candidate", _set(("candidates_skipped",), {"turbo": "not timed"}),
     "candidates_skipped.turbo: not a candidate start-up times"),
    ("a candidate timed at 0 s", _first_candidate({"candidate_s": 0.0, "plain_s": 0.002}),
     "candidate_s: 0.0 is not a positive, finite number of seconds"),
    ("a negative spread", _first_candidate({"candidate_s": 0.001, "plain_s": 0.002, "spread": -5.0}),
     "spread: -5.0 is not a finite spread of at least 0"),
    ("layout_times without row 1", _drop(("layout_times", "1")),
     "layout_times: no row 1: the one-row (decode) layout is chosen from it"),
    ("row 1 without F.linear", _drop(("layout_times", "1", "out_in")),
     "layout_times.1: no out_in: row 1 needs both plain kinds"),
    ("a quantized kind timed as a layout", _set(("layout_times", "1", "int8"), 1e-9),
     "layout_times.1.int8: not a weight kind start-up times"),
    ("a row count start-up never times", _set(("layout_times", "3"), {"in_out": 1e-5, "out_in": 1e-5}),
     "layout_times.3: not a row count start-up times"),
    ("an infinite layout time", _set(("layout_times", "2", "in_out"), math.inf),
     "layout_times.2.in_out: inf is not a positive, finite number of seconds"),
    ("a decode step of 0 s", _set(("by_batch", "1"), 0.0), "by_batch.1: 0.0 is not a positive, finite number"),
    ("a batch of a billion", _set(("by_batch",), {1: 0.001, 1_000_000_000: 0.001}),
     "by_batch.1000000000: 1000000000 is not a batch size from 1 to 256, the most the batch sweep times"),
    ("a batch beyond what tune's cache held", _set(("memory_batch",), 2),
     "by_batch.4: 4 is not a batch size from 1 to 2, the sequences tune's sweep held (memory_batch)"),
    ("a second pass over a batch never swept", _set(("by_batch_again",), {3: 0.002}),
     "by_batch_again.3: "),
    ("a NaN batch spread", _set(("batch_spreads", "1"), math.nan), "batch_spreads.1: nan is not a finite spread"),
    ("a graphs timing of 0 s", _set(("graph_decode",), {"candidate_s": 0.0, "plain_s": 0.002}),
     "graph_decode.candidate_s: 0.0 is not a positive, finite number of seconds"),
    ("a prefill step of -1 s", _set(("prefill", "by_tokens", "16"), -1.0),
     "prefill.by_tokens.16: -1.0 is not a positive, finite number of seconds"),
    ("an attention check error of NaN", _set(("attention_check", "plain_error"), math.nan),
     "attention_check.plain_error: nan is not an error of at least 0"),
    ("a prompt run of no time", _set(("prompt",), {"tokens": 255, "kernels": [0.0], "modules": [0.01]}),
     "prompt.kernels.0: 0.0 is not a positive, finite number of seconds"),
    ("a prompt timed through neither path", _set(("prompt",), {"tokens": 255, "kernels": [], "modules": [0.01]}),
     "prompt.kernels: no runs"),
    ("a mixed step of no time", _set(("mixed",), {"decodes": 4, "tokens": 16, "one": {15: [0.0], 255: [0.02]},
                                                   "two": {15: [0.01], 255: [0.01]}}),
     "mixed.one.15.0: 0.0 is not a positive, finite number of seconds"),
    ("a mixed step timed at one context", _set(("mixed",), {"decodes": 4, "tokens": 16, "one": {15: [0.01]},
                                                            "two": {15: [0.01]}}),
     "mixed: not two contexts timed both ways"),
]


@pytest.mark.slow
@pytest.mark.parametrize("what, edit, field", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_a_hand_edited_record_is_refused_naming_the_field(tuned, tmp_path, what, edit, field):  # noqa: F811
    profile, key = edited(tuned[0], tmp_path, edit)
    line = one_error_line(generate(profile, "--strict"))
    assert f"field models.'{key}'." in line and field in line, line
    assert "--strict forbids fallbacks" in line and "re-run `bringup tune`" in line


@pytest.mark.slow
def test_without_strict_a_refused_record_is_a_warning_and_start_up_times(tuned, tmp_path):  # noqa: F811
    """The KeyError in the layout choice, now: one WARNING naming the field, and the plan timed as with no record."""
    profile, key = edited(tuned[0], tmp_path, _drop(("layout_times", "1")))
    relaxed = generate(profile, "-v")
    assert relaxed.code == 0, relaxed.stderr
    said = " ".join((relaxed.stdout + relaxed.stderr).split())
    assert f"fallback[path] tune record: wanted the plan recorded for {key}, using timing at start-up" in said
    assert f"field models.'{key}'.layout_times: no row 1" in said
    assert "replayed, no timing" not in said and "Traceback" not in said


@pytest.mark.slow
def test_a_valid_record_with_its_rows_reordered_still_replays_exactly(tuned, tmp_path):  # noqa: F811
    def reverse(record: dict[str, Any]) -> None:
        for name in ("layout_times", "by_batch", "batch_spreads"):
            record[name] = dict(reversed(list(record[name].items())))

    profile, key = edited(tuned[0], tmp_path, reverse)
    record = load_profile(tuned[0]).models[key]
    engine, (given,) = replayed_start(profile)
    assert given.layouts.times == record.layout_times and list(given.layouts.times) == sorted(record.layout_times)
    assert given.decode.by_batch == record.by_batch and not engine.fallbacks.events
    assert engine.plan.weight_layout.evidence.startswith(f"recorded by tune at {record.tuned}")
    assert engine.plan.max_num_seqs.value == record.plan["max_num_seqs"].value


@pytest.mark.slow
def test_a_record_whose_sweep_the_cache_cannot_hold_now_is_timed_afresh(tuned, tmp_path, monkeypatch):  # noqa: F811
    """A valid record, replayed where less memory is free than tune had: the batches it timed beyond what this
    start's KV cache holds are not replayed; the decode steps are timed at this start."""
    import psutil
    import torch

    from bringup.runner.engine.decode_timing import sweep_limit
    from bringup.runner.model.kv_cache import bytes_per_block
    from bringup.runner.plan.kv_sizing import MEMORY_FRACTION, activation_estimate
    from bringup.runner.sources.builtin_model import builtin_config, load_builtin

    def swept_to_64(record: dict[str, Any]) -> None:
        sizes = (1, 2, 4, 8, 16, 32, 64)
        record.update(by_batch={b: 0.001 * b for b in sizes}, batch_spreads={b: 0.01 for b in sizes},
                      by_batch_again={}, memory_batch=256)

    profile, key = edited(tuned[0], tmp_path, swept_to_64)
    config, weights = builtin_config(), load_builtin(torch.float32, "cpu").weight_bytes()
    per_block, per_sequence = bytes_per_block(config, 16, torch.float32), 9  # 128 + 8 tokens of sweep context
    room_for_20 = int((activation_estimate(config, 2048, 256, torch.float32) + 20.5 * per_sequence * per_block)
                      / MEMORY_FRACTION)
    memory = psutil.virtual_memory()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: memory._replace(available=weights + room_for_20))
    monkeypatch.setattr("bringup.serve.http.runtime.make_server", _never_serve)
    result = run_cli(["serve", "--device", "cpu", "--profile", str(profile), "--max-model-len", "256", "--strict",
                      "--port", "0"])
    line = one_error_line(result)
    held = re.search(r"this start's KV cache and step budget hold (\d+) sequences", line)
    assert f"field models.'{key}'.by_batch.64: tune timed batch 64, but" in line and held, line
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=profile, max_model_len=256))  # as serve does
    (event,) = engine.fallbacks.events
    assert event.what == "tune record" and "by_batch.64" in event.why
    # The room was sized for about 20 sequences of plain float32 weights; the weight layout the record replays was
    # chosen by this machine's timings and may hold other bytes, so the limit is the start's own, below 64.
    limit = int(held[1])
    assert 1 <= limit < 64 and limit == sweep_limit(engine.plan), (limit, engine.plan.kv_blocks)
    seqs = engine.plan.max_num_seqs
    assert seqs.value <= limit and "recorded by tune" not in seqs.evidence, seqs


def _never_serve(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the engine started: the record was not refused")


def _serve_plan(profile: Path, workdir: Path) -> tuple[dict[str, Any], str]:
    """`bringup serve` as a process on `profile`: its /v1/plan once healthy, and what it logged."""
    port = free_port()
    proc = spawn_cli(["serve", "--port", str(port), "--device", "cpu", "--profile", str(profile),
                      "--max-model-len", "256"], cwd=workdir)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, timeout=120, proc=proc)
        import httpx

        plan = httpx.get(f"{url}/v1/plan", timeout=30).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    return plan, stderr


@pytest.mark.slow
@pytest.mark.parametrize("edit, field", [
    (_set(("by_batch", "1"), 0.0), "by_batch.1"),  # a ZeroDivisionError that killed serve
    (_set(("by_batch",), {1: 0.001, 1_000_000_000: 0.001}), "by_batch.1000000000"),  # max_num_seqs 10^9
], ids=["zero seconds", "a billion"])
def test_serve_on_a_refused_record_times_its_plan_and_serves(tuned, tmp_path, edit, field):  # noqa: F811
    profile, _ = edited(tuned[0], tmp_path, edit)
    answer, stderr = _serve_plan(profile, tmp_path)
    assert "Traceback" not in stderr and field in " ".join(stderr.split())
    assert answer["fallbacks"]["path"] >= 1
    seqs = answer["plan"]["max_num_seqs"]
    assert "recorded by tune" not in seqs["evidence"] and 1 <= seqs["value"] <= 256, seqs
