"""Eager against graph replay as checks: wrong under replay is a failure named by graphs and the first op off;
a capture the device refused is a warning with the device's reason (the runner serves that block eagerly); a
device without a graph API skips."""

from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.verdict.checks import Check

STAGE = "graphs"


def replay_checks(records: list[GraphReplayRecord]) -> list[Check]:
    checks = []
    for r in records:
        block = f"{r.target}[{r.dtype}]"
        if r.status == "pass":
            checks.append(Check(STAGE, block, "pass", f"{r.replays} replays with new inputs as accurate as eager"))
        elif r.status == "mismatch":
            name = f"{r.first_bad_op} {block}" if r.first_bad_op else block
            checks.append(Check(STAGE, name, "fail", r.message or "wrong under graph replay"))
        elif r.status == "skipped":
            checks.append(Check(STAGE, block, "skip", r.message or "no graph API"))
        elif r.status == "capture_unsupported":
            checks.append(Check(STAGE, block, "warn", f"graph capture unsupported: {r.message or 'no reason'}; "
                                "the runner serves it eagerly"))
        else:
            checks.append(Check(STAGE, block, "warn", f"{r.status}: {r.message or 'no message recorded'}; "
                                "graphs stay off for it"))
    return checks
