"""The verdict at the top of the page: the overall line, then what to look at and what does not apply here."""

from __future__ import annotations

from bringup.profiles.verdict import Check, Verdict
from bringup.report.html.parts import Html, details, e, status_badge, table

CSS = {"READY": "ok", "READY WITH WARNINGS": "warn", "NOT READY": "bad"}
LISTED_AT_MOST = 50


def check_rows(checks: list[Check]) -> list[list[object]]:
    return [[c.stage, c.name, status_badge(c.result), c.reason] for c in checks[:LISTED_AT_MOST]]


def check_table(table_id: str, checks: list[Check]) -> Html:
    more = len(checks) - LISTED_AT_MOST
    caption = f"the first {LISTED_AT_MOST} of {len(checks)}" if more > 0 else None
    return table(table_id, ["stage", "check", "result", "reason"], check_rows(checks), caption=caption)


def verdict_block(verdict: Verdict) -> Html:
    counts = verdict.counts()
    tally = (f"{counts['pass']} pass · {counts['warn']} warn · {counts['fail']} fail · {counts['skip']} skip "
             "(not applicable to this device, from the backend's declared facts)")
    body = (f'<p id="verdict-line" class="verdict {CSS[verdict.status]}"><b>{e(verdict.headline())}</b>'
            f"{e(verdict.line()[len(verdict.headline()):])}</p><p class=\"note\">{e(tally)}</p>")
    if verdict.look_at():
        body += check_table("verdict-table", verdict.look_at())
    if verdict.of("skip"):
        body += details(f"{counts['skip']} checks skipped: not applicable to this device",
                        check_table("verdict-skipped", verdict.of("skip")))
    return Html(f'<div id="verdict">{body}</div>')
