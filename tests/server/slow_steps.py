"""`python -m tests.server.slow_steps SECONDS ARGS...`: bringup's command line (ARGS) with every engine step taking
SECONDS longer, as on a slow device (tests only). The server, its signals and its drain run as they are; only the
rate of steps is pinned, so a request can outlast a drain timeout on any CPU."""

from __future__ import annotations

import sys
import time

from bringup.runner.engine.engine import LLMEngine


def main() -> None:
    delay_s = float(sys.argv[1])
    step = LLMEngine.step

    def slow_step(self: LLMEngine):
        time.sleep(delay_s)
        return step(self)

    LLMEngine.step = slow_step
    from bringup.cli.app import main as bringup_main

    sys.argv = ["bringup", *sys.argv[2:]]
    bringup_main()


if __name__ == "__main__":
    main()
