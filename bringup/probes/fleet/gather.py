"""Every rank's summary to rank 0, through torch.distributed's object gather on the gloo group."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from bringup.probes.collectives.execute import RankSetup


def gather_summaries(setup: RankSetup, summary: dict[str, Any]) -> list[dict[str, Any]] | None:
    """On rank 0: every rank's summary, in rank order; elsewhere None."""
    gathered: list[Any] | None = [None] * setup.world_size if setup.rank == 0 else None
    dist.gather_object(summary, gathered, dst=0, group=setup.monitor_group)
    return [g for g in gathered if isinstance(g, dict)] if gathered is not None else None
