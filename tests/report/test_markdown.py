"""The Markdown summary: short enough for an issue, inert profile text, the figures a bug report needs."""

from __future__ import annotations

from bringup.profiles.schema import Profile
from bringup.profiles.store import load_profile
from bringup.report.markdown import render_markdown
from bringup.report.model import build_report
from tests.report.sample import REFERENCE_PROFILES, full_profile

LINE_BUDGET = 150


def markdown_of(profile: Profile, baseline: Profile | None = None) -> str:
    return render_markdown(build_report(profile, "p.yaml", baseline, "b.yaml" if baseline else None))


def test_stays_under_the_line_budget_with_many_failures_and_a_large_baseline():
    reference = load_profile(REFERENCE_PROFILES / "cpu-intel-xeon-2core-avx512-amx.yaml")
    text = markdown_of(full_profile(failing=200), reference)
    assert len(text.splitlines()) < LINE_BUDGET
    assert "more (see the HTML report)" in text


def test_reference_profile_summary_holds_the_essentials():
    text = markdown_of(load_profile(REFERENCE_PROFILES / "cpu-amd-epyc-2core-avx512-bf16.yaml"))
    assert len(text.splitlines()) < LINE_BUDGET
    for heading in ("**Device**", "**Environment**", "### Capabilities", "### Op verdicts", "### Key bench figures",
                    "### Runner plan"):
        assert heading in text, heading
    assert "TFLOP/s" in text and "GB/s" in text


def test_profile_text_cannot_break_the_markdown():
    text = markdown_of(full_profile())
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script&gt;" in text
    table_rows = [line for line in text.splitlines() if line.startswith("| rms_norm")]
    assert table_rows and all(row.count(" | ") == 6 for row in table_rows)  # the message's "|" is escaped


def test_failing_cases_and_baseline_differences_are_listed():
    baseline, current = full_profile(), full_profile()
    current.capabilities.dtypes["bfloat16"].status = "unsupported"
    text = markdown_of(current, baseline)
    assert "| rms_norm | bfloat16 | shape=\\[0,4096\\] | fail |" in text
    assert "### Differences from the baseline" in text
    assert "| capabilities dtypes.bfloat16 | supported | unsupported |" in text


def test_empty_profile_says_not_measured():
    text = markdown_of(Profile())
    assert text.count("not measured") >= 3
