"""Test-only catalog plugin (loaded through BRINGUP_OPS_PLUGINS=tests.probes.ops.faulty_ops).

Adds ops whose kernels really misbehave — one calls os.abort(), one never returns, one is slow — and
registers a torch.compile backend that perturbs the compiled graph's floating outputs by 1 %.
"""

from __future__ import annotations

import os
import time

import torch
from torch._dynamo import register_backend

from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec

PERTURB_BACKEND = "bringup_test_perturb"
SLOW_CASES = 12
SLOW_SECONDS = 0.25


def _abort(x: torch.Tensor) -> torch.Tensor:
    os.abort()


def _hang(x: torch.Tensor) -> torch.Tensor:
    time.sleep(3600)
    return x


def _raise(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("kernel exploded")


def _reject(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("\"fancy_kernel\" not implemented for 'Float'")


def _slow(x: torch.Tensor) -> torch.Tensor:
    time.sleep(SLOW_SECONDS)
    return x * 2


def ops() -> list[OpSpec]:
    def one(g: torch.Generator) -> list:
        return [randn(g, 4, 5)]

    def case(role: str, fn, number: int = 0) -> CaseSpec:
        return CaseSpec(one, fn, role=role, variant=(("number", number),))  # slow cases differ only by number

    return [
        OpSpec("test_abort", "test", (case("kernel calls os.abort()", _abort),), ("float32",)),
        OpSpec("test_hang", "test", (case("kernel never returns", _hang),), ("float32",)),
        OpSpec("test_raise", "test", (case("kernel raises", _raise),), ("float32",)),
        OpSpec("test_reject", "test", (case("kernel rejects the dtype", _reject),), ("float32",)),
        OpSpec("test_slow", "test", tuple(case(f"slow case {i}", _slow, i) for i in range(SLOW_CASES)),
               ("float32",)),
    ]


def _perturb(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value * 1.01
    if isinstance(value, (tuple, list)):
        return type(value)(_perturb(v) for v in value)
    return value


@register_backend(name=PERTURB_BACKEND)
def perturbing_backend(gm: torch.fx.GraphModule, example_inputs):
    """A 'compiler' that runs the graph and then scales every floating output by 1.01 (a miscompile)."""
    def run(*args):
        return _perturb(gm(*args))
    return run
