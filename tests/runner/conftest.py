"""One built-in engine per test module (start-up is ~1 s); tests reset its block budget as needed."""

from __future__ import annotations

import logging

import pytest

from bringup.runner.engine.engine import EngineOptions, LLMEngine


@pytest.fixture(scope="module")
def builtin_engine(tmp_path_factory) -> LLMEngine:
    missing = tmp_path_factory.mktemp("noprofile") / "none.yaml"
    return LLMEngine.create(EngineOptions(device="cpu", profile_path=missing, max_model_len=256, max_num_seqs=8))


@pytest.fixture
def bringup_logs(caplog):
    """caplog that also sees the 'bringup' logger after the CLI turned its propagation off."""
    logger = logging.getLogger("bringup")
    logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="bringup")
    yield caplog
    logger.removeHandler(caplog.handler)
