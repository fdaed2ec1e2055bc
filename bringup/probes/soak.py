"""A soak: the same matmul and softmax rounds repeated for minutes, watching for what a short run cannot see —
a rate that drifts down (thermal or power throttling, a clock change, a neighbour) and results that are wrong
in some rounds only (a marginal part, a race).

Each round, per dtype: a timed n x n x n matmul (the rate), then the matmul and a softmax on fixed seeded inputs,
judged against their float64 CPU references with the verify-ops tolerance for that dtype and accumulation
length, and compared bit for bit with the first round's results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median

import torch

from bringup.backends.registry import synchronize
from bringup.probes.ops.judge.tolerances import tolerance_for
from bringup.profiles.sections.soak import SoakDtype, SoakSection

DRIFT_LIMIT = 0.9  # the last fifth of the rounds below 90 % of the first fifth's rate is reported
TIMED_CALLS = 4
CHECKS = ["matmul n x n x n vs float64", "softmax over rows of n vs float64"]


@dataclass
class DtypeRounds:
    dtype: torch.dtype
    inputs: tuple[torch.Tensor, torch.Tensor]  # on the device
    references: tuple[torch.Tensor, torch.Tensor]  # float64, CPU
    first: tuple[torch.Tensor, torch.Tensor] | None = None
    tflops: list[float] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)
    bitwise_changes: int = 0


def prepare(device: torch.device, dtype: torch.dtype, n: int) -> DtypeRounds:
    gen = torch.Generator().manual_seed(20261201)
    a, b = (torch.randn(n, n, generator=gen, dtype=torch.float64) for _ in range(2))
    a_lo, b_lo = a.to(dtype), b.to(dtype)  # the references see exactly the values the device sees
    references = (a_lo.double() @ b_lo.double(), torch.softmax(a_lo.double(), dim=-1))
    return DtypeRounds(dtype, (a_lo.to(device), b_lo.to(device)), references)


def one_round(rounds: DtypeRounds, index: int, device: torch.device) -> None:
    a, b = rounds.inputs
    n = a.shape[0]
    synchronize(device)
    start = time.perf_counter()
    for _ in range(TIMED_CALLS):
        product = a @ b
    synchronize(device)
    rounds.tflops.append(2 * n**3 * TIMED_CALLS / (time.perf_counter() - start) / 1e12)
    results = (product.cpu(), torch.softmax(a, dim=-1).cpu())
    name = str(rounds.dtype).removeprefix("torch.")
    wrong = False
    for got, want, accum in zip(results, rounds.references, (n, 1), strict=True):
        tol = tolerance_for(name, accum, want.pow(2).mean().sqrt().item())
        if not bool(((got.double() - want).abs() <= tol.atol + tol.rtol * want.abs()).all()):
            wrong = True
    if wrong:
        rounds.wrong.append(index)
    if rounds.first is None:
        rounds.first = results
    elif any(not torch.equal(x, y) for x, y in zip(results, rounds.first, strict=True)):
        rounds.bitwise_changes += 1


def run_soak(device: torch.device, dtypes: list[torch.dtype], seconds: float, n: int = 512,
             min_rounds: int = 10, on_round: Callable[[int, float], None] | None = None) -> SoakSection:
    """Rounds over every dtype until `seconds` have passed (at least `min_rounds`); the section with findings."""
    all_rounds = [prepare(device, dtype, n) for dtype in dtypes]
    start, index = time.perf_counter(), 0
    while index < min_rounds or time.perf_counter() - start < seconds:
        for rounds in all_rounds:
            one_round(rounds, index, device)
        index += 1
        if on_round:
            on_round(index, time.perf_counter() - start)
    results = [summarise(r, index) for r in all_rounds]
    findings = [f for r in results for f in findings_for(r)]
    return SoakSection(status="fail" if any(r.wrong_rounds for r in results) else "pass",
                       seconds=round(time.perf_counter() - start, 2), matmul_size=n, checks=CHECKS,
                       dtypes=results, findings=findings)


def summarise(rounds: DtypeRounds, count: int) -> SoakDtype:
    fifth = max(1, count // 5)
    first, last = median(rounds.tflops[:fifth]), median(rounds.tflops[-fifth:])
    return SoakDtype(dtype=str(rounds.dtype).removeprefix("torch."), rounds=count, first_tflops=first,
                     last_tflops=last, min_tflops=min(rounds.tflops), max_tflops=max(rounds.tflops),
                     ratio=last / first if first > 0 else 0.0, wrong_rounds=rounds.wrong,
                     bitwise_changes=rounds.bitwise_changes)


def findings_for(r: SoakDtype) -> list[str]:
    out = []
    if r.wrong_rounds and len(r.wrong_rounds) < r.rounds:
        shown = ", ".join(str(i) for i in r.wrong_rounds[:8]) + (" ..." if len(r.wrong_rounds) > 8 else "")
        out.append(f"{r.dtype}: intermittent wrong results in {len(r.wrong_rounds)} of {r.rounds} rounds "
                   f"(rounds {shown}); the other rounds were right")
    elif r.wrong_rounds:
        out.append(f"{r.dtype}: wrong results in every round ({r.rounds}); verify-ops should show the op")
    if r.ratio < DRIFT_LIMIT:
        out.append(f"{r.dtype}: matmul rate drifted from {r.first_tflops:.3g} to {r.last_tflops:.3g} TFLOP/s "
                   f"({r.ratio:.0%} of the start; limit {DRIFT_LIMIT:.0%}): throttling or a neighbour")
    return out
