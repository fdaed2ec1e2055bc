"""The fused decode layers' rows past the layout's switch travel through a tune record: written with their pairs,
combined across tune's runs (the fastest of each side, batches every run timed), refused when out of bounds, and
replayed so a start from the record serves the same decode steps through the kernel as the run that timed them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.sections.models import CandidateRecord
from bringup.profiles.store import load_profile, render_yaml
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.config.builtin import builtin_config
from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.record.bounds import record_problem
from bringup.runner.plan.record.recorded import plan_record, replayed
from bringup.runner.plan.record.tune_runs import combine
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import needs_compiler
from tests.runner.stated import layout_times, stated
from tests.runner.test_plan_values import KEY, served_plan

WON_TO_64 = {64: (0.058, 0.072), 128: (0.1106, 0.1096)}  # won at 64 sequences, lost at 128


def run_with(rows: dict[int, tuple[float, float]], spreads: dict[int, float] | None = None):  # type: ignore[no-untyped-def]
    return stated(decode=DecodeTimings(how="stated", fused_rows=rows, fused_rows_spreads=spreads or {}))


def test_the_rows_are_written_read_back_and_replayed(tmp_path: Path) -> None:
    record = plan_record(run_with(WON_TO_64, {64: 0.01}), served_plan(), "bringup-builtin", None, "ab" * 32,
                         "2026-12-07T00:00:00+00:00", "0.1.0", 1, {})
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(Profile(device=DeviceSection(id="cpu", backend="cpu", name="CPU"),
                                        models={KEY: record})))
    read = load_profile(path).models[KEY]
    assert read.fused_rows == {64: CandidateRecord(candidate_s=0.058, plain_s=0.072, spread=0.01),
                               128: CandidateRecord(candidate_s=0.1106, plain_s=0.1096, spread=0.0)}
    assert record_problem(KEY, read) is None
    back = replayed(read, torch.device("cpu"), torch.float32, builtin_config(), 1 << 30).decode
    assert back is not None and back.fused_rows == WON_TO_64 and back.fused_rows_spreads == {64: 0.01, 128: 0.0}


def test_tune_keeps_the_fastest_of_each_side_of_the_batches_every_run_timed() -> None:
    first = run_with({64: (0.060, 0.070), 128: (0.12, 0.11)}, {64: 0.02})
    second = run_with({64: (0.058, 0.075)})  # its doubling stopped at 64
    combined, noise = combine([first, second])
    assert combined.decode is not None
    assert combined.decode.fused_rows == {64: (0.058, 0.070)}
    assert combined.decode.fused_rows_spreads[64] >= 0.02 and "fused rows 64" in noise


def test_a_record_with_rows_out_of_bounds_is_refused_naming_the_field() -> None:
    record = plan_record(run_with(WON_TO_64), served_plan(), "bringup-builtin", None, "ab" * 32,
                         "2026-12-07T00:00:00+00:00", "0.1.0", 1, {})
    edited = record.model_copy(update={"fused_rows": {**record.fused_rows, 4096: record.fused_rows[64]}})
    assert "fused_rows.4096: 4096 is not a batch size from 1 to 256" in (record_problem(KEY, edited) or "")
    negative = record.model_copy(update={"fused_rows": {64: CandidateRecord(candidate_s=-1.0, plain_s=0.07)}})
    assert "fused_rows.64.candidate_s" in (record_problem(KEY, negative) or "")


@needs_compiler
def test_a_start_from_given_timings_serves_the_rows_their_pairs_won(tmp_path: Path) -> None:
    model_dir = tmp_path / "llama"
    make_hf_model(model_dir, "llama", hidden=64, heads=4, kv_heads=2, intermediate=96, layers=3)
    panels_win = layout_times(in_out=2.0, out_in=2.0, panels=1.0)
    timings = DecodeTimings(candidates={"fused": (0.001, 0.002)}, how="stated",
                            fused_rows={4: (0.001, 0.002), 8: (0.003, 0.002)})
    measured = replace(stated(panels_win, decode=timings), fused_decode=True)
    engine = LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=tmp_path / "none.yaml",
                                            max_model_len=64, max_num_seqs=4, measurements=measured))
    fused = engine.executor.fused
    assert fused is not None and fused.rows == 4  # won at 4, lost at 8
    assert "serves decode steps of up to 4 sequences" in engine.plan.decode_layers.evidence
