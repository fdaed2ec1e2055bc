"""The profile's `models` section (bringup tune): read back as written, and compared side by side by profile diff."""

from __future__ import annotations

from bringup.profiles.diff import diff_profiles
from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.sections.models import CandidateRecord, ModelPlanRecord, RecordedChoice
from bringup.profiles.store import load_profile, render_yaml
from tests.cli.run_cli import run_cli

KEY = "SmolLM2 [0123abcd]"


def record(max_num_seqs: str, layout: str) -> ModelPlanRecord:
    return ModelPlanRecord(
        model="SmolLM2", source="/models/SmolLM2", model_sha256="0123abcd" * 8, device="cpu", dtype="float32",
        tuned="2026-12-01T20:00:00+00:00", bringup="0.1.0", runs=3,
        plan={"max_num_seqs": RecordedChoice(value=max_num_seqs, evidence="stated"),
              "weight_layout": RecordedChoice(value=layout, evidence="stated")},
        layout_times={1: {"out_in": 1e-4, "in_out": 2e-4}}, layout_stream_bytes=2**20, paged_decode=False,
        paged_decode_evidence="stated", candidates={"paged_decode": CandidateRecord(candidate_s=0.01, plain_s=0.02)},
        by_batch={1: 0.01, 2: 0.012}, batch_spreads={1: 0.05, 2: 0.07}, noise={"batch 1": 0.03})


def profile(tuned: ModelPlanRecord | None = None) -> Profile:
    return Profile(device=DeviceSection(id="cpu", backend="cpu", name="CPU"),
                   models={KEY: tuned} if tuned is not None else None)


def test_a_recorded_model_plan_reads_back_as_written(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(profile(record("16", "out_in"))))
    back = load_profile(path).models[KEY]
    assert back == record("16", "out_in")
    assert back.by_batch == {1: 0.01, 2: 0.012} and back.layout_times[1]["out_in"] == 1e-4


def test_profile_diff_shows_recorded_model_plans_side_by_side(tmp_path):
    before, after = profile(record("16", "out_in")), profile(record("32", "panels"))
    changes = {(c.section, c.key): (c.before, c.after) for c in diff_profiles(before, after)}
    assert changes == {("models", f"{KEY} max_num_seqs"): ("16", "32"),
                       ("models", f"{KEY} weight_layout"): ("out_in", "panels")}
    gone = {(c.section, c.key): (c.before, c.after) for c in diff_profiles(before, profile())}
    assert gone[("models", f"{KEY} max_num_seqs")] == ("16", None)
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(render_yaml(before))
    b.write_text(render_yaml(after))
    shown = run_cli(["profile", "diff", str(a), str(b)])
    assert shown.code == 0, shown.stderr
    assert "model plans recorded by tune" in shown.stdout
    row = next(line for line in shown.stdout.splitlines() if "max_num_seqs" in line)
    assert row.index("16") < row.index("32")
