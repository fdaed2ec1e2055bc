"""Where ops ran, in the report: the ops that went through the host, hot path first-class (a warning), the others
for information; nothing on a profile recorded on the host itself."""

from __future__ import annotations

from bringup.profiles.schema import Profile
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.report.html import render_html
from bringup.report.markdown import render_markdown
from bringup.report.model import build_report
from tests.report.sample import HOSTILE

EVIDENCE = "aten::rsqrt copied arguments to the host (aten::_to_cpu x1) and results back (x1)"


def record(op: str, runs_on: str | None) -> OpCaseRecord:
    return OpCaseRecord(op=op, dtype="float32", case="[4,128]", status="pass", runs_on=runs_on,
                        runs_on_evidence=EVIDENCE if runs_on == "host_fallback" else None)


def placed_profile() -> Profile:
    return Profile(ops=[record("rms_norm", "host_fallback"), record("matmul", "device"),
                        record("relu", "host_fallback"), record(HOSTILE, "host_fallback")])


def test_the_html_lists_each_op_through_the_host_with_its_evidence():
    page = render_html(build_report(placed_profile(), "p.yaml"))
    section = page[page.index('id="host-fallback"'):]
    table = section[:section.index("</table>")]
    assert "3 ops ran through the host (a CPU fallback) in some case, 1 of them on the runner&#x27;s hot" in section
    assert '<tr class="warn"><td class="short">rms_norm</td><td class="short">yes (warn)</td>' in table
    assert "<td class=\"short\">relu</td><td class=\"short\">no (info)</td>" in table
    assert "float32 [4,128]: aten::rsqrt copied arguments to the host" in table
    assert "matmul" not in table and "<script>" not in page.split("</main>")[0]


def test_the_markdown_lists_them_in_the_op_verdicts():
    text = render_markdown(build_report(placed_profile(), "p.yaml"))
    assert "Ran through the host (a CPU fallback):" in text
    assert "| rms_norm | yes (warn) | host fallback (1 of 1 cases) | float32 \\[4,128\\]: aten::rsqrt copied" in text
    assert "| relu | no (info) |" in text


def test_a_device_where_every_op_ran_says_so_and_the_host_itself_says_nothing():
    on_device = render_html(build_report(Profile(ops=[record("matmul", "device")]), "p.yaml"))
    assert "Every op ran on the device (1 cases decided)." in on_device
    on_host = Profile(ops=[record("matmul", None)])
    assert 'id="host-fallback"' not in render_html(build_report(on_host, "p.yaml"))
    assert "Ran through the host" not in render_markdown(build_report(on_host, "p.yaml"))
