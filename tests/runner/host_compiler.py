"""Tests that build bringup's host kernels need a C++ compiler; without one they skip and say so."""

from __future__ import annotations

import pytest

from bringup.runner.weights.kernels import build as host_build


def compiler() -> str | None:
    try:
        return host_build._compiler()
    except host_build.KernelUnavailable:
        return None


needs_compiler = pytest.mark.skipif(compiler() is None, reason="no C++ compiler (CXX, g++, c++ or clang++) found "
                                    "to build the host kernels")
needs_compiler_for_inductor = pytest.mark.skipif(compiler() is None, reason="no C++ compiler found: torch.compile's "
                                                 "inductor backend generates C++ for the CPU")
