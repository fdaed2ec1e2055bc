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


OLDER_RECORD = """
models:
  SmolLM2 [0123abcd]:
    model: SmolLM2
    source: /models/SmolLM2
    model_sha256: 0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd0123abcd
    device: cpu
    dtype: float32
    tuned: '2026-11-01T20:00:00+00:00'
    bringup: 0.1.0
    runs: 2
    plan:
      kv_blocks: {value: 256 × 16 tokens, evidence: sized}
      max_num_seqs: {value: '16', evidence: stated}
      compiled: {value: eager, evidence: stated}
    layout_times: {1: {out_in: 0.0001}}
    layout_stream_bytes: 1048576
    paged_decode: false
    paged_decode_evidence: stated
"""


def test_a_record_an_older_tune_wrote_as_text_loads_shows_its_text_and_gives_no_values(tmp_path):
    """Records from before plan values were data (no plan_format): loaded and shown as written, never parsed."""
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(profile()) + OLDER_RECORD)
    back = load_profile(path).models[KEY]
    assert back.plan_format == 1 and back.block_size is None
    assert back.shown("kv_blocks") == "256 × 16 tokens" and back.shown("max_num_seqs") == "16"
    assert back.value("kv_blocks") is None and back.value("max_num_seqs") is None and back.value("dtype") is None
    assert back.by_batch == {} and back.layout_times == {1: {"out_in": 1e-4}}  # its timings replay as before


def test_diff_compares_an_older_text_record_and_a_data_record_by_their_text(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(profile()) + OLDER_RECORD)
    older = load_profile(path)
    choices = {"kv_blocks": (256, "256 × 16 tokens"), "max_num_seqs": (32, "32"), "compiled": (None, "eager")}
    data = record("16", "out_in").model_copy(update={
        "plan_format": 2, "block_size": 16,
        "plan": {k: RecordedChoice(value=v, evidence="stated", shown=text) for k, (v, text) in choices.items()}})
    changes = {(c.section, c.key): (c.before, c.after) for c in diff_profiles(older, profile(data))}
    assert changes == {("models", f"{KEY} max_num_seqs"): ("16", "32")}


def test_a_record_of_an_unknown_plan_format_is_refused_in_one_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(profile()) + OLDER_RECORD.replace("    runs: 2\n", "    runs: 2\n    plan_format: 3\n"))
    shown = run_cli(["profile", "show", str(path)])
    assert shown.code == 2 and "Traceback" not in shown.stderr
    assert f"models.{KEY}.plan_format" in shown.stderr, shown.stderr
