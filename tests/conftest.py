"""Shared test set-up: one inductor and one kernel cache per test run, a quiet deterministic torch."""

import os
import tempfile

import pytest

_INDUCTOR_CACHE = tempfile.mkdtemp(prefix="bringup-inductor-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", _INDUCTOR_CACHE)
os.environ.setdefault("BRINGUP_KERNEL_CACHE", tempfile.mkdtemp(prefix="bringup-kernels-"))
os.environ.pop("BRINGUP_DEVICE", None)


@pytest.fixture
def inductor_cache_dir() -> str:
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]
