"""Fork-start helper: `python -m bringup.probes.collectives.ranks.zygote` imports torch once, then forks
every rank from itself -- N ranks cost one torch import instead of N (seconds each on a small CPU).

Forking after `import torch` is safe while no device runtime has been initialised and no parallel
region has run (this process does neither); the ranks initialise their devices after the fork.
Each fork gets its rank's report pipe and log file, PR_SET_PDEATHSIG (dies with this process), and
runs the ordinary worker. This process then reaps the ranks and reports each exit code as a JSON line
on the control pipe; it dies with the launcher (PR_SET_PDEATHSIG set by the launcher).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback

ZYGOTE_ENV_VAR = "BRINGUP_COLLECTIVES_ZYGOTE"   # {"control_fd": int, "ranks": [{"rank", "fd", "log"}]}


def main() -> int:
    layout = json.loads(os.environ[ZYGOTE_ENV_VAR])
    control = int(layout["control_fd"])
    ranks = layout["ranks"]
    import torch  # the import every rank shares
    import torch.distributed  # noqa: F401

    from bringup.probes.collectives.ranks.launch_util import set_parent_death_signal

    children: dict[int, int] = {}
    for entry in ranks:
        pid = os.fork()
        if pid == 0:
            _child(entry, ranks, control, set_parent_death_signal)
        children[pid] = int(entry["rank"])
        os.close(int(entry["fd"]))
    _write(control, {"type": "forked", "pids": {str(rank): pid for pid, rank in children.items()}})
    while children:
        pid, status = os.waitpid(-1, 0)
        rank = children.pop(pid, None)
        if rank is not None:
            _write(control, {"type": "exit", "rank": rank, "code": os.waitstatus_to_exitcode(status)})
    return 0


def _child(entry: dict, ranks: list[dict], control: int, set_parent_death_signal) -> None:
    """In the forked rank: own pipe and log only, then the ordinary worker. Never returns."""
    code = 1
    try:
        parent = os.getppid()
        set_parent_death_signal()
        for other in ranks:  # earlier ranks' pipes are already closed in the zygote
            if other is not entry:
                with contextlib.suppress(OSError):
                    os.close(int(other["fd"]))
        os.close(control)
        log = os.open(entry["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        from bringup.probes.collectives.ranks.channel import FD_ENV_VAR
        from bringup.probes.collectives.ranks.worker import PARENT_ENV_VAR
        from bringup.probes.collectives.ranks.worker import main as worker_main

        os.environ.update({"RANK": str(entry["rank"]), "LOCAL_RANK": str(entry["rank"]),
                           FD_ENV_VAR: str(entry["fd"]), PARENT_ENV_VAR: str(parent)})
        code = worker_main()
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _write(fd: int, message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


if __name__ == "__main__":
    code = main()
    os._exit(code)
