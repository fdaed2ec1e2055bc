import pytest

from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli


def test_e2e_group_records_the_runners_prefill_and_decode_rates(tmp_path):
    path = tmp_path / "cpu.yaml"
    result = run_cli(["bench", "--quick", "--only", "e2e", "--device", "cpu", "--profile", str(path), "--json"])
    assert result.code == 0, result.stderr[-2000:]
    group = load_profile(path).bench.groups["e2e"]
    records = {r.key: r for r in group.records}
    assert set(records) == {"prefill_b1", "decode_b1"}  # no profile: the plan is eager, so no eager baseline
    for record in records.values():
        assert record.status == "ok" and record.params["tokens_per_s"] > 0
        assert abs(record.median_s * record.params["tokens_per_s"] - 1) < 0.01
        assert record.params["plan"]["compiled"] == "eager"


@pytest.mark.parametrize("stale", [{"bfloat16": 1e3, "float32": 1e-3}, {"bfloat16": 1e-3, "float32": 1e3}],
                         ids=["stale-says-bf16-faster", "stale-says-fp32-faster"])
def test_e2e_plans_with_the_matmul_numbers_of_the_same_run(tmp_path, stale):
    """The profile holds stale matmul figures; the e2e group (later in the same run) must plan with this run's
    figures, as the runner will. One of the two stale directions contradicts whatever this machine measures."""
    from bringup.backends.registry import device_info
    from bringup.profiles.schema import Capabilities
    from bringup.profiles.sections.bench import BenchSection, MeasuredCeilings
    from bringup.profiles.store import update_profile
    from tests.runner.test_plan_fallbacks import _ok, _op, write_profile

    path = write_profile(tmp_path / "cpu.yaml", Capabilities(dtypes={"bfloat16": _ok(), "float32": _ok()}),
                         [_op("matmul", "bfloat16"), _op("softmax", "bfloat16")])

    def plant_stale(profile):
        profile.bench = BenchSection(ceilings=MeasuredCeilings(tflops=stale))

    update_profile(path, device_info("cpu"), plant_stale, stage="bench", status="complete")
    result = run_cli(["bench", "--quick", "--only", "matmul,e2e", "--device", "cpu", "--profile", str(path), "--json"])
    assert result.code == 0, result.stderr[-2000:]
    bench = load_profile(path).bench
    measured = bench.ceilings.tflops
    assert measured != stale
    plan = bench.groups["e2e"].records[0].params["plan"]
    assert plan["dtype"] == ("bfloat16" if measured["bfloat16"] > measured["float32"] else "float32"), measured
