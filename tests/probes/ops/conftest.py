"""verify-ops test helpers: kernel overrides for the test's duration, the plugin module name."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import pytest
import torch

PLUGIN = "tests.probes.ops.faulty_ops"


@pytest.fixture
def override_cpu_kernel() -> Iterator[Callable[[str, Callable], None]]:
    """Replace a real aten CPU kernel via torch.library; the original is restored after the test."""
    libraries: list[torch.library.Library] = []

    def install(op_name: str, fn: Callable) -> None:
        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl(op_name, fn, "CPU")
        libraries.append(lib)

    yield install
    for lib in libraries:
        lib._destroy()
