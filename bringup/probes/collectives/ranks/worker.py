"""One rank: `python -m bringup.probes.collectives.ranks.worker` (spawn start) or `main()` in a fork of the zygote.

Reads its plan, rank and rendezvous from the environment the launcher sets, reports on the pipe named
by BRINGUP_COLLECTIVES_FD, and exits 0 after `done`, 1 after a failure. It dies with its parent
(PR_SET_PDEATHSIG, set before exec or right after the fork, plus a parent check here), so it is never
orphaned.
"""

from __future__ import annotations

import os
import sys

PLAN_ENV_VAR = "BRINGUP_COLLECTIVES_PLAN"
STORE_ENV_VAR = "BRINGUP_COLLECTIVES_STORE"      # host:port of the launcher's TCPStore
PARENT_ENV_VAR = "BRINGUP_COLLECTIVES_PARENT"    # the launcher's pid
ENTRY_ENV_VAR = "BRINGUP_COLLECTIVES_ENTRY"      # "module:function(setup, channel)" run instead of the plan


def main() -> int:
    from bringup.probes.collectives.ranks.channel import FD_ENV_VAR, PipeChannel

    rank = int(os.environ["RANK"])
    channel = PipeChannel(rank, int(os.environ[FD_ENV_VAR]))
    channel.send("boot", pid=os.getpid())
    parent = os.environ.get(PARENT_ENV_VAR)
    if parent and os.getppid() != int(parent):
        return 1  # the launcher is already gone
    try:
        return _run(rank, channel)
    except Exception as exc:
        from bringup.probes.collectives.execute import MonitorFailure, first_line

        if isinstance(exc, MonitorFailure):
            channel.send("fault", suspects=exc.suspects, detail=exc.detail)
        else:
            channel.send("error", detail=first_line(exc))
        return 1


def _run(rank: int, channel) -> int:
    import importlib
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from bringup.probes.collectives.execute import RankSetup, run_plan
    from bringup.probes.collectives.faults import fault_from_env
    from bringup.probes.collectives.plan import Plan
    from bringup.probes.collectives.ranks.runtime import (
        device_for_rank,
        make_synchronize,
        monitor_group,
        prepare_backend,
        works_on_host,
    )

    plan = Plan.from_json(os.environ[PLAN_ENV_VAR])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    fault = fault_from_env()
    device = device_for_rank(plan.device_type, local_rank)
    if works_on_host(plan.backend, device):  # N ranks share the cores: no oversubscription by intra-op threads
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    host, port = os.environ[STORE_ENV_VAR].rsplit(":", 1)
    timeout = timedelta(seconds=plan.timeout_s)
    store = dist.TCPStore(host, int(port), world_size, is_master=False, timeout=timeout)
    prepare_backend(plan.backend, plan.device_type)
    dist.init_process_group(plan.backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    try:
        channel.send("ready", backend=dist.get_backend(), device=str(device), torch=torch.__version__)
        setup = RankSetup(rank, world_size, device, make_synchronize(device), monitor_group(plan.backend))
        entry = os.environ.get(ENTRY_ENV_VAR)
        if entry:  # another stage reusing this engine (bringup fleet): its own per-rank work
            module, _, function = entry.partition(":")
            getattr(importlib.import_module(module), function)(setup, channel)
        else:
            run_plan(plan, setup, channel, fault)
        channel.send("done")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (seconds with torch loaded); everything is reported
