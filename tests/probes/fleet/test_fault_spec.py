"""BRINGUP_FLEET_FAULTS: the per-rank fault spec parses, and bad specs say what is wrong."""

from __future__ import annotations

import pytest

from bringup.probes.fleet.faults import RankFault, faults_for, parse_faults
from bringup.probes.fleet.options import parse_stages


def test_a_spec_names_plugins_kills_and_hangs_per_rank():
    spec = "2=tests.probes.fleet.slow_kernel, 3=tests.probes.fleet.wrong_kernel,1=kill@verify-ops,0=hang@bench"
    assert parse_faults(spec) == [RankFault(2, "plugin", "tests.probes.fleet.slow_kernel"),
                                  RankFault(3, "plugin", "tests.probes.fleet.wrong_kernel"),
                                  RankFault(1, "kill", "verify-ops"), RankFault(0, "hang", "bench")]
    assert faults_for(1, spec) == [RankFault(1, "kill", "verify-ops")] and faults_for(5, spec) == []


@pytest.mark.parametrize("bad", ["x=kill@probe", "1", "1=kill@nowhere", "1=explode@probe", "=mod"])
def test_a_bad_spec_is_refused_with_the_reason(bad):
    with pytest.raises(ValueError, match="fault"):
        parse_faults(bad)


def test_stages_keep_their_run_order_and_unknown_ones_are_named():
    assert parse_stages(["bench,devices", "links"]) == ["devices", "bench", "links"]
    assert parse_stages([]) == ["devices", "probe", "verify-ops", "bench", "selftest", "links"]
    with pytest.raises(ValueError, match="unknown stage"):
        parse_stages(["devices,warp"])


def test_the_stage_list_spelled_out_for_help_matches_the_source():
    from bringup.cli.commands.fleet import STAGE_LIST
    from bringup.probes.fleet.options import STAGES

    assert ", ".join(STAGES) == STAGE_LIST
