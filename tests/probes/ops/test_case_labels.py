"""Op cases: the label is derived from the case's typed fields and is display only; the identity (case_id) is
derived from the shapes, view, params and variant, and seeds the inputs and keys resume. The reference profiles
carry the ids the migration rule gives (scripts/migrate_op_case_ids.py)."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from bringup.probes.ops.catalog import PLUGINS_ENV, builtin_ops, case_ids_by_label, load_catalog, with_model_cases
from bringup.probes.ops.catalog.model import model_cases
from bringup.probes.ops.execute import TRACE_ENV, run_case
from bringup.probes.ops.inputs import generator
from bringup.probes.ops.model_shapes import shapes_from_config
from bringup.probes.ops.runner import op_task
from bringup.probes.ops.spec import CaseKey, Catalog, case_label, shape_text
from bringup.probes.ops.stage import key_of
from bringup.profiles.store import load_profile
from bringup.report.baseline import compare_to_baseline
from tests.cli.run_cli import run_cli

REPO = Path(__file__).resolve().parents[3]
REFERENCE_PROFILES = sorted((REPO / "reference" / "profiles").glob("*.yaml"))
MIGRATE = REPO / "scripts" / "migrate_op_case_ids.py"
SPECS = {spec.name: spec for spec in builtin_ops()}
MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
           "max_position_embeddings": 131072}
SQUARE_LLAMA = {"model_type": "llama", "hidden_size": 576, "num_attention_heads": 9, "num_key_value_heads": 3,
                "intermediate_size": 1536, "vocab_size": 49152, "max_position_embeddings": 8192}


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
    for name, cases in model_cases(shapes_from_config(MIXTRAL)).items():
        labels = [case.label for case in cases]
        assert len(set(labels)) == len(labels), name
        for case in cases:
            assert case.label.startswith("model: ") and case.shapes, (name, case.label)
            assert case.label == case_label(case.role, case.shapes, case.view, case.params)


@pytest.mark.parametrize("config", [MIXTRAL, SQUARE_LLAMA], ids=["mixtral", "square-attention"])
def test_every_case_has_its_own_identity_with_a_model_s_cases_too(config):
    catalog = Catalog()
    for spec in with_model_cases(builtin_ops(), shapes_from_config(config)):
        catalog.add(spec)  # raises on two cases of an op with one identity
    linear = catalog.get("linear").cases
    q_proj = [c for c in linear if c.label.startswith("model: q_proj")]
    o_proj = [c for c in linear if c.label.startswith("model: o_proj")]
    if config is SQUARE_LLAMA:  # q_proj and o_proj have the same shapes here: the weight tells them apart
        assert [c.shapes for c in q_proj] == [c.shapes for c in o_proj]
    assert not {c.case_id for c in q_proj} & {c.case_id for c in o_proj}


def test_two_cases_with_one_identity_are_refused_naming_them():
    spec = SPECS["relu"]
    twin = replace(spec.cases[0], role="another name")
    with pytest.raises(ValueError, match="same shapes, view and params") as refused:
        Catalog().add(replace(spec, cases=(spec.cases[0], twin)))
    assert spec.cases[0].label in str(refused.value) and twin.label in str(refused.value)


def _inputs(spec, case) -> list[torch.Tensor]:
    return case.inputs(generator(*spec.seed_parts(case)))


def _resume_key(spec, case, dtype: str = "float32") -> tuple[str, ...]:
    return key_of(op_task(CaseKey(spec.name, dtype, case.label, case.case_id)))


def test_a_label_edit_changes_no_input_and_no_resume_key():
    spec = SPECS["matmul"]
    case = spec.cases[0]
    relabelled = replace(case, role="a new role for the same case")
    assert relabelled.label != case.label
    assert relabelled.case_id == case.case_id
    assert spec.seed_parts(relabelled) == spec.seed_parts(case) == ("matmul", case.case_id)
    assert all(torch.equal(a, b) for a, b in zip(_inputs(spec, relabelled), _inputs(spec, case)))
    assert _resume_key(spec, relabelled) == _resume_key(spec, case) == ("op", "matmul", "float32", case.case_id)


@pytest.mark.parametrize("change", [
    {"shapes": ((1, 4096), (4096, 1000))}, {"view": "b transposed"}, {"params": (("k", 7),)},
    {"variant": (("form", "other"),)}], ids=["shape", "view", "param", "variant"])
def test_a_parameter_change_gives_another_identity_seed_and_resume_key(change):
    spec = SPECS["matmul"]
    case = spec.cases[0]
    changed = replace(case, **change)
    assert changed.case_id != case.case_id
    assert spec.seed_parts(changed) != spec.seed_parts(case)
    assert _resume_key(spec, changed) != _resume_key(spec, case)


def test_a_recorded_case_is_found_by_its_id_after_its_label_changed():
    spec = SPECS["softmax"]
    case = spec.cases[2]
    assert spec.find(CaseKey("softmax", "float32", "a label the catalog no longer has", case.case_id)) is case
    assert spec.find(CaseKey("softmax", "float32", case.label)) is case  # a key written by hand: by label


@pytest.mark.parametrize("path", REFERENCE_PROFILES, ids=lambda p: p.name)
def test_every_record_of_a_reference_profile_carries_the_id_of_its_case(path):
    """Fails after a catalog change that gives a recorded case another identity: rerun the migration script."""
    ids = case_ids_by_label(load_catalog())
    profile = load_profile(path)
    assert profile.ops
    for record in profile.ops:
        assert record.case_id == ids[(record.op, record.case)], (record.op, record.case)
    for record in profile.compiled:
        assert record.case_id == (ids[(record.target, record.case)] if record.case else None)
    for record in profile.bench.groups["ops"].records:  # bench records name the case by its label
        assert (record.name, record.params["case"]) in ids


def _migrate(*paths: Path) -> str:
    done = subprocess.run([sys.executable, str(MIGRATE), *map(str, paths)], capture_output=True, text=True,
                          timeout=300, cwd=paths[0].parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_migration_rule_gives_the_committed_ids_and_keeps_every_other_byte(tmp_path):
    original = REFERENCE_PROFILES[0]
    text = original.read_text(encoding="utf-8")
    assert text.startswith("#")  # its comments must survive
    lines = text.split("\n")
    stripped = [line for line in lines if not line.startswith("  case_id: ")]
    assert len(lines) - len(stripped) == len(load_profile(original).ops)
    copy = tmp_path / original.name
    copy.write_text("\n".join(stripped), encoding="utf-8")
    assert load_profile(copy).ops[0].case_id is None  # as a profile recorded before cases had ids

    output = _migrate(copy)
    assert "0 record(s) whose label no case has" in output
    assert copy.read_text(encoding="utf-8") == text
    _migrate(copy)
    assert copy.read_text(encoding="utf-8") == text  # running it again changes nothing


def test_a_record_whose_label_no_case_has_keeps_no_id_and_is_listed(tmp_path):
    profile = tmp_path / "p.yaml"
    first = load_profile(REFERENCE_PROFILES[-1]).ops[0]
    text = REFERENCE_PROFILES[-1].read_text(encoding="utf-8").replace(f"  case: {first.case}\n",
                                                                       "  case: a case since removed\n", 1)
    profile.write_text(text, encoding="utf-8")
    output = _migrate(profile)
    assert f"ops: {first.op} {first.dtype} 'a case since removed'" in output
    migrated = yaml.safe_load(profile.read_text(encoding="utf-8"))["ops"]
    assert "case_id" not in migrated[0] and migrated[1]["case_id"]


def test_a_report_baseline_pairs_records_by_id_when_a_label_changed(tmp_path):
    old = load_profile(REFERENCE_PROFILES[0])
    new = load_profile(REFERENCE_PROFILES[0])
    record = new.ops[5]
    assert record.status == "pass"
    record.case, record.status = "the same case under a label edited since", "fail"
    comparison = compare_to_baseline(old, new, "old")
    assert comparison.changed_ops == {(record.op, record.dtype)}


PLUGIN_SOURCE = '''
import torch
from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec


def case(shape, role):
    return CaseSpec(lambda g: [randn(g, *shape)], lambda x: torch.sum(x, -1), shapes=(shape,), role=role,
                    accum=shape[-1])


def ops():
    return [OpSpec("test_identity", "test", (case({first}, {role!r}), case({second}, "kept")), ("float16",))]
'''


def _plugin(tmp_path: Path, name: str, first: tuple, role: str, second: tuple) -> str:
    (tmp_path / f"{name}.py").write_text(PLUGIN_SOURCE.format(first=first, role=role, second=second))
    return name


def _verify(profile: Path, *options: str) -> tuple[dict[str, dict], str]:
    result = run_cli(["verify-ops", "--no-isolate", "--json", "--op", "test_identity", "--profile", str(profile),
                      *options])
    assert result.code == 0, result.stderr
    return {case["case"]: case for case in json.loads(result.stdout)["cases"]}, result.stderr


def test_resume_after_a_label_edit_skips_the_case_and_reruns_only_the_changed_one(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    profile = tmp_path / "p.yaml"
    monkeypatch.setenv(PLUGINS_ENV, _plugin(tmp_path, "identity_before", (4, 300), "before", (3, 200)))
    first, _ = _verify(profile)
    assert sorted(first) == ["before [4,300]", "kept [3,200]"]

    # the first case's label edited, the second case's shape changed
    monkeypatch.setenv(PLUGINS_ENV, _plugin(tmp_path, "identity_after", (4, 300), "renamed", (3, 201)))
    ran_before = len(trace.read_text().splitlines())
    resumed, log = _verify(profile, "--resume", "-v")
    assert "resume: 1 of 2 cases already recorded" in " ".join(log.split())
    assert [line.split("\t")[2] for line in trace.read_text().splitlines()[ran_before:]] == ["kept [3,201]"]
    assert resumed["before [4,300]"]["status"] == "pass"  # the recorded case, not run again

    fresh, _ = _verify(tmp_path / "fresh.yaml")  # run again from scratch under the new label: the same inputs
    renamed, recorded = fresh["renamed [4,300]"], first["before [4,300]"]
    assert renamed["case_id"] == recorded["case_id"]
    assert (renamed["max_abs"], renamed["nmse"]) == (recorded["max_abs"], recorded["nmse"])
    assert fresh["kept [3,201]"]["case_id"] != first["kept [3,200]"]["case_id"]


def test_resume_skips_cases_recorded_before_cases_had_ids_and_writes_their_ids(tmp_path):
    profile = tmp_path / "p.yaml"
    args = ["verify-ops", "--no-isolate", "--json", "--op", "cat", "--dtype", "float32", "--profile", str(profile)]
    assert run_cli(args).code == 0
    lines = profile.read_text(encoding="utf-8").split("\n")
    profile.write_text("\n".join(line for line in lines if not line.startswith("  case_id: ")), encoding="utf-8")
    assert all(r.case_id is None for r in load_profile(profile).ops)

    resumed = run_cli([*args, "--resume", "-v"])
    assert resumed.code == 0, resumed.stderr
    assert "resume: 4 of 4 cases already recorded" in " ".join(resumed.stderr.split())
    ids = case_ids_by_label(load_catalog())
    expected = sorted((case.label, ids[("cat", case.label)]) for case in SPECS["cat"].cases)
    assert sorted((c["case"], c["case_id"]) for c in json.loads(resumed.stdout)["cases"]) == expected

    rerun = run_cli(["verify-ops", "--no-isolate", "--op", "cat", "--dtype", "float32", "-k", "empty", "--profile",
                     str(profile)])
    assert rerun.code == 0, rerun.stderr
    records = load_profile(profile).ops  # a merge writes the ids, and the rerun case replaced its record
    assert sorted((r.case, r.case_id) for r in records) == expected


def test_sampling_without_replacement_is_judged_by_its_param_not_by_label_text():
    catalog = load_catalog()
    (case,) = [c for c in catalog.get("multinomial").cases if ("replacement", False) in c.params]
    record = run_case(CaseKey("multinomial", "float32", case.label, case.case_id), catalog, torch.device("cpu"))
    assert (record.status, record.message) == ("pass", "draws valid: distinct categories, none with probability 0")
    assert (record.case, record.case_id) == (case.label, case.case_id)


def test_profile_diff_pairs_cases_by_id_and_names_them_by_the_newer_label(tmp_path):
    old = REFERENCE_PROFILES[0]
    first = load_profile(old).ops[0]
    new = tmp_path / "new.yaml"
    new.write_text(old.read_text(encoding="utf-8").replace(
        f"  case: {first.case}\n  case_id: {first.case_id}\n  status: pass\n",
        f"  case: relabelled\n  case_id: {first.case_id}\n  status: fail\n", 1), encoding="utf-8")
    result = run_cli(["profile", "diff", str(old), str(new), "--json"])
    changes = json.loads(result.stdout)["changes"]
    assert [(c["section"], c["key"], c["before"], c["after"]) for c in changes] == [
        ("ops", f"{first.op} {first.dtype} [relabelled]", "pass", "fail")]
