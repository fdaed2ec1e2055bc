"""Test and diagnostic fault injection for one rank of a fleet: BRINGUP_FLEET_FAULTS (or --inject-fault).

Spec: comma-separated `RANK=ACTION`, where ACTION is
  kill@STAGE   the rank sends itself SIGKILL when it reaches STAGE (a device that dies mid-run)
  hang@STAGE   the rank sleeps forever when it reaches STAGE (a device that stops answering)
  MODULE       an importable module the rank imports before its first stage; importing it may override a
               kernel with torch.library (e.g. a matmul that is several times slower, or a softmax that
               computes wrong numbers), so that rank really measures differently from the others.

It exists to prove that the fleet names a slow, a wrong, a dead or a hung rank (the tests use it) and to
rehearse such a failure on a real cluster. Not for production runs.
"""

from __future__ import annotations

import importlib
import os
import signal
import time
from dataclasses import dataclass

from bringup.probes.fleet.options import STAGES

ENV_VAR = "BRINGUP_FLEET_FAULTS"


@dataclass(frozen=True)
class RankFault:
    rank: int
    action: str          # kill | hang | plugin
    target: str          # the stage (kill, hang) or the module (plugin)


def parse_faults(text: str) -> list[RankFault]:
    """Parse '2=tests.probes.fleet.slow_kernel,1=kill@verify-ops'; ValueError says what is wrong."""
    faults = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        rank_text, sep, action = part.partition("=")
        if not sep or not rank_text.strip().isdigit() or not action.strip():
            raise ValueError(f"fault {part!r}: expected RANK=kill@STAGE, RANK=hang@STAGE or RANK=MODULE")
        rank, action = int(rank_text), action.strip()
        kind, at, stage = action.partition("@")
        if at:
            if kind not in ("kill", "hang") or stage not in STAGES:
                raise ValueError(f"fault {part!r}: use kill@STAGE or hang@STAGE with a stage of "
                                 f"{', '.join(STAGES)}")
            faults.append(RankFault(rank, kind, stage))
        else:
            faults.append(RankFault(rank, "plugin", action))
    return faults


def faults_for(rank: int, text: str | None = None) -> list[RankFault]:
    spec = os.environ.get(ENV_VAR, "") if text is None else text
    return [f for f in parse_faults(spec) if f.rank == rank]


def load_plugins(faults: list[RankFault]) -> list[str]:
    """Import this rank's fault modules (their import installs the faulty kernels); returns their names."""
    names = [f.target for f in faults if f.action == "plugin"]
    for name in names:
        importlib.import_module(name)
    return names


def act_on_stage(faults: list[RankFault], stage: str) -> None:
    """Die or hang here if this rank is told to at `stage`."""
    for fault in faults:
        if fault.target != stage:
            continue
        if fault.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.action == "hang":
            while True:
                time.sleep(3600)
