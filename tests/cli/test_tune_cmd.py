"""`bringup tune` records the served model's plan and its timings; a later start-up replays them without timing
and says so in the plan (issue 25). The built-in model, on the CPU, through the real CLI."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.profiles.store import load_profile, render_yaml
from bringup.runner.engine import attention_check
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.startup import chunking, mixed, prompt
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.record.recorded import MEASURED_SETTINGS
from tests.cli.run_cli import run_cli


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A profile holding the built-in model's tuned plan (two runs), and tune's output."""
    folder = tmp_path_factory.mktemp("tuned")
    path = folder / "p.yaml"
    result = run_cli(["tune", "--device", "cpu", "--profile", str(path), "--runs", "2", "--max-model-len", "256"])
    assert result.code == 0, result.stderr
    return path, result


def replayed_start(path, **options) -> tuple[LLMEngine, list[StartupMeasurements]]:
    seen: list[StartupMeasurements] = []
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=path, max_model_len=256,
                                            on_measured=seen.append, **options))
    return engine, seen


@pytest.mark.slow
def test_tune_records_the_plan_with_the_timings_and_noise_behind_it(tuned):
    path, result = tuned
    (key, record), = load_profile(path).models.items()
    assert key.startswith("bringup-builtin-llama-2.5m [") and record.runs == 2 and record.dtype == "float32"
    assert record.by_batch and record.layout_times and record.noise
    assert "fastest of 2 start-up runs" in record.decode_how
    assert 0 < record.cpu_share <= 1 and "of the CPU" in result.stdout
    assert set(MEASURED_SETTINGS) <= set(record.plan)
    assert "machine noise across the runs: largest floor noise" in result.stdout
    assert load_profile(path).stages["tune"].status == "complete"


@pytest.mark.slow
def test_a_start_on_a_tuned_model_replays_the_record_and_says_so(tuned):
    path, _ = tuned
    record = next(iter(load_profile(path).models.values()))
    engine, seen = replayed_start(path)
    (given,) = seen
    assert given.layouts.times == record.layout_times  # the record's numbers, not timed afresh
    assert given.decode.by_batch == record.by_batch
    for setting in MEASURED_SETTINGS:
        evidence = getattr(engine.plan, setting).evidence
        assert evidence.startswith(f"recorded by tune at {record.tuned} on this device: "), (setting, evidence)
    assert engine.plan.max_num_seqs.value == record.plan["max_num_seqs"].value


@pytest.mark.slow
def test_a_record_tuned_at_another_dtype_is_not_replayed(tuned, tmp_path, caplog):
    path, _ = tuned
    profile = load_profile(path)
    (key, record), = profile.models.items()
    profile.models = {key: record.model_copy(update={"dtype": "bfloat16"})}
    other = tmp_path / "other.yaml"
    other.write_text(render_yaml(profile))
    engine, seen = replayed_start(other, max_num_seqs=1)
    # timed here: the layout's products were timed afresh (the record's candidates are no witness: a start on a busy
    # machine may time none, and the record may hold none, so two empty dicts compared equal)
    assert seen[0].layouts.times != record.layout_times
    assert "was tuned at bfloat16, not float32: timing at start-up" in caplog.text
    assert not any("recorded by tune" in getattr(engine.plan, s).evidence for s in MEASURED_SETTINGS)


@pytest.mark.slow
def test_a_record_tuned_without_quantization_is_not_replayed_for_a_quantized_start(tuned, tmp_path, caplog):
    path, _ = tuned
    (key, record), = load_profile(path).models.items()
    assert record.quantization == "none" and not key.endswith(" int8")
    engine, seen = replayed_start(path, max_num_seqs=1, quantization="int8")
    recorded = {name: (c.candidate_s, c.plain_s) for name, c in record.candidates.items()}
    assert seen[0].decode.candidates != recorded  # timed here, on the int8 weights
    assert f"no plan recorded for {key} int8 on this device" in caplog.text
    assert engine.plan.quantization.value == "int8"
    assert not any("recorded by tune" in getattr(engine.plan, s).evidence for s in MEASURED_SETTINGS)
    # and a record under the int8 key, tuned at another --quantization, is refused by what it says it is
    profile = load_profile(path)
    profile.models = {f"{key} int8": record}
    other = tmp_path / "other.yaml"
    other.write_text(render_yaml(profile))
    caplog.clear()
    replayed_start(other, max_num_seqs=1, quantization="int8")
    assert "was tuned with --quantization none, not int8: timing at start-up" in caplog.text


@pytest.mark.slow
def test_generate_on_a_tuned_model_logs_the_replay(tuned, tmp_path, monkeypatch):
    path, _ = tuned
    monkeypatch.chdir(tmp_path)
    result = run_cli(["generate", "Hi", "--max-tokens", "4", "--device", "cpu", "--profile", str(path), "-v"])
    assert result.code == 0, result.stderr
    assert "replayed, no timing" in " ".join((result.stdout + result.stderr).split())
    assert "decode steps, batch" not in result.stdout + result.stderr  # DecodeSteps logs every timed measurement


@pytest.mark.slow
def test_tune_json_is_the_recorded_plan(tmp_path):
    """`tune --json` prints the record as the profile holds it, under its key (run_cli validates the schema)."""
    path = tmp_path / "p.yaml"
    result = run_cli(["tune", "--device", "cpu", "--profile", str(path), "--runs", "2", "--max-model-len", "256",
                      "--json"])
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    record = load_profile(path).models[document["key"]]
    assert document["schema"] == "bringup.tune/v1" and document["runs"] == 2
    assert document["plan"] == record.model_dump(mode="json")["plan"]


def _never(*_args, **_kwargs):  # type: ignore[no-untyped-def]
    raise AssertionError("a start replaying the record timed what the record holds")


@pytest.mark.slow
def test_the_record_keeps_the_late_decisions_and_a_replay_takes_them_without_timing(tuned, monkeypatch):
    path, _ = tuned
    (key, record), = load_profile(path).models.items()
    assert record.torch == torch.__version__
    assert record.prefill is not None and record.prefill.by_tokens and record.prefill.decode_step > 0
    check = record.attention_check  # no profile verified SDPA here, so start-up checked it
    assert check is not None and check.plain_s > 0 and check.errors
    monkeypatch.setattr(chunking, "measure_prefill", _never)
    assert record.prompt is not None and len(record.prompt.kernels) == len(record.prompt.modules) == 2  # 2 runs
    monkeypatch.setattr(attention_check, "_seconds", _never)
    monkeypatch.setattr(prompt, "time_prompt", _never)
    monkeypatch.setattr(mixed, "measure_mixed", _never)
    engine, (given,) = replayed_start(path)
    chunk, attention = engine.plan.prefill_chunk, engine.plan.attention
    assert engine.plan.prompt_layers.value == record.plan["prompt_layers"].value
    assert f"from tune record {key}, tuned {record.tuned}" in engine.plan.prompt_layers.evidence
    assert chunk.value == record.plan["prefill_chunk"].value
    if record.mixed is not None:  # timed where the fused decode layers serve some steps' rows, not all
        assert all(len(runs) == 2 for side in (record.mixed.one, record.mixed.two) for runs in side.values())
        assert engine.plan.mixed_steps.value == record.plan["mixed_steps"].value
        assert f"from tune record {key}, tuned {record.tuned}" in engine.plan.mixed_steps.evidence
    assert chunk.evidence.endswith(f"; from tune record {key}, tuned {record.tuned}")
    assert f"timings from tune record {key}, the float64 check run here" in attention.evidence
    assert attention.value == record.plan["attention"].value
    assert given.attention.seconds == check.seconds and given.attention.plain_s == check.plain_s


@pytest.mark.slow
@pytest.mark.parametrize("update, said", [
    # before they were kept
    ({"prefill": None, "attention_check": None, "graph_decode": None, "prompt": None, "mixed": None}, ""),
    ({"torch": "0.0.1"}, "was tuned under torch 0.0.1, not "),
    ({"prefill": "chunk alone"}, ""),  # prefill timings from before the chunk ran in the decodes' forward
])
def test_an_older_record_or_another_torchs_is_measured_not_trusted(tuned, tmp_path, caplog, update, said):
    path, _ = tuned
    profile = load_profile(path)
    (key, record), = profile.models.items()
    if update == {"prefill": "chunk alone"}:
        update = {"prefill": record.prefill.model_copy(update={"with_decode": False})}
    profile.models = {key: record.model_copy(update=update)}
    other = tmp_path / "other.yaml"
    other.write_text(render_yaml(profile))
    engine, _ = replayed_start(other)
    assert "measured at start-up in " in engine.plan.prefill_chunk.evidence
    if ("prefill" in update and update["prefill"] is None) or "torch" in update:
        assert "measured at start-up in " in engine.plan.prompt_layers.evidence
    if update.get("prefill") is not None:
        assert "from tune record" in engine.plan.attention.evidence
        return
    assert "checked and timed at start-up in " in engine.plan.attention.evidence
    if "torch" in update:
        assert said in caplog.text
        assert not any("recorded by tune" in getattr(engine.plan, s).evidence for s in MEASURED_SETTINGS)
    else:  # the rest of the older record is still replayed
        assert engine.plan.max_num_seqs.evidence.startswith("recorded by tune at ")
