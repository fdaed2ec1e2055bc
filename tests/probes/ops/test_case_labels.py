"""Op-case labels derive from the cases' typed fields, and records written under the hand-written labels of the
catalog before (reference profiles, baselines) load under the new labels and still pair with new runs."""

import json
from pathlib import Path

import pytest
import yaml

from bringup.probes.ops.catalog import builtin_ops
from bringup.probes.ops.catalog.model import model_cases
from bringup.probes.ops.model_shapes import shapes_from_config
from bringup.probes.ops.spec import case_label, shape_text
from bringup.profiles.sections.ops import case_renames, current_case
from bringup.profiles.store import load_profile, render_yaml
from bringup.report.baseline import compare_to_baseline
from tests.cli.run_cli import run_cli

REPO = Path(__file__).resolve().parents[3]
REFERENCE_PROFILES = sorted((REPO / "reference" / "profiles").glob("*.yaml"))
CATALOG = {spec.name: [case.label for case in spec.cases] for spec in builtin_ops()}


def _raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_every_label_is_derived_from_the_fields_and_states_the_shapes():
    for spec in builtin_ops():
        labels = [case.label for case in spec.cases]
        assert len(set(labels)) == len(labels), spec.name
        for case in spec.cases:
            assert case.label == case_label(case.role, case.shapes, case.view, case.params)
            assert case.shapes, f"{spec.name} {case.label!r}: a built-in case states its input shapes"
            for shape in case.shapes:
                assert shape_text(shape) in case.label


def test_model_cases_are_derived_too():
    mixtral = shapes_from_config({"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32,
                                  "num_key_value_heads": 8, "intermediate_size": 14336, "num_local_experts": 8,
                                  "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 131072})
    for name, cases in model_cases(mixtral).items():
        labels = [case.label for case in cases]
        assert len(set(labels)) == len(labels), name
        for case in cases:
            assert case.label.startswith("model: ") and case.shapes, (name, case.label)
            assert case.label == case_label(case.role, case.shapes, case.view, case.params)


def test_the_rename_table_points_at_current_labels_and_never_renames_one():
    renames = case_renames()
    assert renames, "the table is empty"
    for op, table in renames.items():
        current = set(CATALOG[op])
        for old, new in table.items():
            assert new in current, (op, old, new)
            assert old not in current, f"{op}: {old!r} is a current label; renaming it would corrupt new records"


@pytest.mark.parametrize("path", REFERENCE_PROFILES, ids=lambda p: p.name)
def test_every_label_in_a_reference_profile_maps_to_a_catalog_case(path):
    raw = _raw(path)
    old_labels = {(r["op"], r["case"]) for r in raw["ops"]}
    if path.name.startswith("cpu-"):  # recorded before the labels were derived; later profiles hold only new ones
        assert any(current_case(op, case) != case for op, case in old_labels), "the profile has no old labels"
    unmapped = {(op, case) for op, case in old_labels if current_case(op, case) not in CATALOG.get(op, [])}
    assert not unmapped
    profile = load_profile(path)
    assert len(profile.ops) == len(raw["ops"])
    assert all(r.case in CATALOG[r.op] for r in profile.ops)
    for record in profile.bench.groups["ops"].records:
        assert record.params["case"] in CATALOG[record.name]
        assert record.key == f"{record.name} {record.dtype} {record.params['case']}"


def _new_run(old: Path, into: Path, flip: tuple[str, str, str] | None = None) -> Path:
    """The old-label profile as a run of today's catalog writes it (labels derived), one op status changed."""
    profile = load_profile(old)
    for record in profile.ops:
        if flip and record.key() == flip:
            record.status = "fail"
    into.write_text(render_yaml(profile), encoding="utf-8")
    return into


def test_profile_diff_pairs_old_labels_with_a_new_run(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_bytes(REFERENCE_PROFILES[0].read_bytes())
    raw_first = _raw(old)["ops"][0]
    flipped = ("matmul", raw_first["dtype"], current_case("matmul", raw_first["case"]))
    assert raw_first["op"] == "matmul" and flipped[2] != raw_first["case"]
    new = _new_run(old, tmp_path / "new.yaml", flipped)
    assert raw_first["case"] not in new.read_text(encoding="utf-8")

    result = run_cli(["profile", "diff", str(old), str(new), "--json"])
    changes = json.loads(result.stdout)["changes"]
    assert [(c["section"], c["key"], c["before"], c["after"]) for c in changes] == [
        ("ops", f"matmul {flipped[1]} [{flipped[2]}]", "pass", "fail")]  # bench and the other cases all paired


def test_report_baseline_pairs_old_labels_with_a_new_run(tmp_path):
    old = REFERENCE_PROFILES[0]
    flipped = ("softmax", "float32", "[64,33] transposed dim=-1")
    new = load_profile(_new_run(old, tmp_path / "new.yaml", flipped))
    comparison = compare_to_baseline(load_profile(old), new, str(old))
    assert comparison.changed_ops == {("softmax", "float32")}
    ops_rows = [row for (group, _), row in comparison.bench.items() if group == "ops"]
    assert len(ops_rows) == len(new.bench.groups["ops"].records)
    assert not [row for row in ops_rows if row["verdict"] in ("added", "removed")]


def test_resume_skips_cases_recorded_under_their_old_labels(tmp_path):
    profile = tmp_path / "p.yaml"
    args = ["verify-ops", "--no-isolate", "--json", "--op", "cat", "--dtype", "float32", "--profile", str(profile)]
    first = run_cli(args)
    assert first.code == 0, first.stderr
    text = profile.read_text(encoding="utf-8")
    for old, new in case_renames()["cat"].items():  # as a run before typed cases wrote it
        text = text.replace(f"case: '{new}'\n", f"case: {new}\n").replace(f"case: {new}\n", f"case: '{old}'\n")
    profile.write_text(text, encoding="utf-8")
    assert sorted(r["case"] for r in _raw(profile)["ops"]) == sorted(case_renames()["cat"])

    resumed = run_cli([*args, "--resume", "-v"])
    assert resumed.code == 0, resumed.stderr
    assert "resume: 4 of 4 cases already recorded" in " ".join(resumed.stderr.split())
    assert sorted(c["case"] for c in json.loads(resumed.stdout)["cases"]) == sorted(CATALOG["cat"])
    assert sorted(r.case for r in load_profile(profile).ops) == sorted(CATALOG["cat"])  # no second copy


def test_bench_baseline_recorded_under_old_labels_pairs_with_a_new_run(tmp_path):
    profile = tmp_path / "p.yaml"
    verified = run_cli(["verify-ops", "--no-isolate", "--op", "cat", "--dtype", "float32", "--profile", str(profile)])
    assert verified.code == 0, verified.stderr
    baseline = REFERENCE_PROFILES[0]
    old_keys = {r["key"] for r in _raw(baseline)["bench"]["groups"]["ops"]["records"]
                if r["name"] == "cat" and r["dtype"] == "float32"}
    assert old_keys and not old_keys & {f"cat float32 {label}" for label in CATALOG["cat"]}

    result = run_cli(["bench", "--quick", "--only", "ops", "--profile", str(profile), "--baseline", str(baseline),
                      "--json"])
    assert result.code == 0, result.stderr
    rows = {row["key"]: row for row in json.loads(result.stdout)["baseline"]["rows"] if row["group"] == "ops"}
    for label in CATALOG["cat"]:
        assert rows[f"cat float32 {label}"]["verdict"] not in ("added", "removed"), label


def test_renamed_cases_keep_the_inputs_recorded_runs_had():
    """The seed of a renamed case is its label before, so old profiles and new runs judge the same numbers."""
    specs = {spec.name: spec for spec in builtin_ops()}
    for op, table in case_renames().items():
        cases = {case.label: case for case in specs[op].cases}
        for old, new in table.items():
            assert specs[op].seed_parts(cases[new]) == (op, old)
    unchanged = specs["rms_norm"].cases[0]
    assert specs["rms_norm"].seed_parts(unchanged) == ("rms_norm", unchanged.label)
