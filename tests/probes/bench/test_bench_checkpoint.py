"""An interrupted bench run keeps the groups it finished (stage status partial)."""

from __future__ import annotations

import pytest
import torch

from bringup.backends.registry import device_info
from bringup.probes.bench import stage
from bringup.probes.bench.stage import BenchOptions, run_bench_stage
from bringup.profiles.store import load_profile


def interrupt(_ctx):
    raise KeyboardInterrupt


def test_an_interrupted_run_keeps_finished_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(stage, "CHECKPOINT_EVERY_S", 0.0)  # write after every group
    monkeypatch.setitem(stage.GROUPS, "attention", interrupt)  # Ctrl-C while the attention group runs
    device = torch.device("cpu")
    path = tmp_path / "p.yaml"
    options = BenchOptions(quick=True, only=("dispatch", "attention"), budget_s=0.02)
    with pytest.raises(KeyboardInterrupt):
        run_bench_stage(device, device_info(device), path, None, options)
    saved = load_profile(path)
    assert set(saved.bench.groups) == {"dispatch"}
    assert saved.stages["bench"].status == "partial"
    run = run_bench_stage(device, device_info(device), path, saved, BenchOptions(quick=True, only=("transfer",)))
    assert set(run.section.groups) == {"dispatch", "transfer"}  # earlier groups are kept
    assert set(run.current.groups) == {"transfer"}
    assert load_profile(path).stages["bench"].status == "complete"
