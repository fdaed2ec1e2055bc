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


def test_e2e_plans_with_the_matmul_numbers_of_the_same_run(tmp_path):
    """Before this run the profile makes bfloat16 look usable; this run's matmul shows it slower than float32
    on this CPU, and the e2e group (later in the same run) must plan with that, as the runner will."""
    from bringup.profiles.schema import Capabilities
    from tests.runner.test_plan_fallbacks import _ok, _op, write_profile

    path = write_profile(tmp_path / "cpu.yaml", Capabilities(dtypes={"bfloat16": _ok(), "float32": _ok()}),
                         [_op("matmul", "bfloat16"), _op("softmax", "bfloat16")])
    result = run_cli(["bench", "--quick", "--only", "matmul,e2e", "--device", "cpu", "--profile", str(path), "--json"])
    assert result.code == 0, result.stderr[-2000:]
    bench = load_profile(path).bench
    assert bench.ceilings.tflops["bfloat16"] < bench.ceilings.tflops["float32"]  # a fact of this CPU, measured
    plan = bench.groups["e2e"].records[0].params["plan"]
    assert plan["dtype"] == "float32"
