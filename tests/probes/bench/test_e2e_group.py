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
