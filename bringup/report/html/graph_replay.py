"""The report's "Eager vs graph replay" section: each block captured and replayed, failures first."""

from __future__ import annotations

from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.report.html.parts import Html, not_measured, paragraph, section, status_badge, table
from bringup.report.text import MISSING, number, one_line, seconds

TITLE = "Eager vs graph replay"


def replay_section(records: list[GraphReplayRecord]) -> Html:
    if not records:
        return section("replay", TITLE, not_measured("eager vs graph replay", "Run `bringup verify-ops --compiled` "
                                                     "on a device with a graph API."))
    rows = sorted(records, key=lambda r: (not r.failing, r.status != "capture_unsupported", r.target, r.dtype))
    headers = ["target", "dtype", "graph API", "status", "replays", "eager err", "replay err", "allowed",
               "first op off under replay", "time", "message"]
    cells = [[r.target, r.dtype, r.api or MISSING, status_badge(r.status), str(r.replays), number(r.eager_err),
              number(r.replay_err), number(r.allowed), r.first_bad_op or MISSING, seconds(r.seconds),
              one_line(r.message, 300) if r.message else MISSING] for r in rows]
    failing = sum(r.failing for r in rows)
    refused = sum(r.status == "capture_unsupported" for r in rows)
    summary = paragraph(f"{len(rows)} blocks, {failing} wrong under replay or failing, {refused} whose capture the "
                        "device refused; each replay ran on new values copied into the captured inputs, judged "
                        "against float64 as compiled is (replay err ≤ k × eager err + tol/10)")
    return section("replay", TITLE, summary + table("replay-table", headers, cells))
