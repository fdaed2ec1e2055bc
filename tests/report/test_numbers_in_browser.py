"""The committed reference profiles' reports, rendered by headless Chromium: the verdict on top, and every figure
on the page in its unit and within its ceiling (the rendered DOM is scanned, cell by cell)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bringup.report.write import write_report
from tests.report.test_browser import browser, run_browser  # noqa: F401  (browser is a fixture)

REFERENCE = sorted((Path(__file__).parents[2] / "reference" / "profiles").glob("*.yaml"))


class Tables(HTMLParser):
    """Every table of a page by id: its header cells and its rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, tuple[list[str], list[list[str]]]] = {}
        self.current: str | None = None
        self.row: list[str] | None = None
        self.text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.current = dict(attrs).get("id") or f"table-{len(self.tables)}"
            self.tables[self.current] = ([], [])
        elif tag == "tr" and self.current:
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.text = []

    def handle_data(self, data: str) -> None:
        if self.text is not None:
            self.text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.row is not None and self.text is not None:
            self.row.append(" ".join("".join(self.text).split()))
            self.text = None
        elif tag == "tr" and self.row is not None and self.current:
            headers, rows = self.tables[self.current]
            if not headers:
                headers.extend(self.row)
            else:
                rows.append(self.row)
            self.row = None
        elif tag == "table":
            self.current = None


def rendered(chromium: str, page: Path, scratch: Path) -> str:
    done = run_browser(chromium, scratch, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def column(table: tuple[list[str], list[list[str]]], name: str) -> list[str]:
    headers, rows = table
    return [row[headers.index(name)] for row in rows] if name in headers else []


@pytest.fixture(scope="module")
def pages(browser, tmp_path_factory) -> dict[str, str]:  # noqa: F811
    out = tmp_path_factory.mktemp("pages")
    found = {}
    for path in REFERENCE:
        page = write_report(path, out / f"{path.stem}.html")
        found[path.stem] = rendered(browser, page, out / "chromium")
    baseline = write_report(REFERENCE[1], out / "vs-baseline.html", baseline_path=REFERENCE[0])
    found["vs-baseline"] = rendered(browser, baseline, out / "chromium")
    return found


def test_the_verdict_is_on_top_and_reads_what_the_profile_found(pages):
    for name in (p.stem for p in REFERENCE):
        dom = pages[name]
        assert dom.index('id="verdict-line"') < dom.index('id="summary"') < dom.index("<main>"), name
        line = re.sub(r"<[^>]+>", "", re.search(r'<p id="verdict-line"[^>]*>(.*?)</p>', dom).group(1))
        if name.startswith("nvidia-"):  # wrong results off the plan's path, re-judged (tests/profiles/test_verdict.py)
            assert line.startswith("READY WITH WARNINGS ("), (name, line)
        else:
            assert line.startswith("READY: ") and "not applicable to this device" in line, (name, line)


def test_no_figure_above_its_ceiling_and_no_unit_mix_up(pages):
    for name, dom in pages.items():
        tables = Tables()
        tables.feed(dom)
        bench = {tid: t for tid, t in tables.tables.items() if tid.startswith("bench-table-")}
        assert bench, name
        named_ceilings = 0
        for tid, table in bench.items():
            for cell in column(table, "% of ceiling"):
                if cell.startswith("above its ceiling ("):
                    named_ceilings += 1
                    assert re.search(r"\d (GB|TFLOP)/s, (measured in this run|datasheet)", cell), cell
                elif cell != "—":
                    assert 0.0 <= float(cell.rstrip("%")) <= 100.0, (name, tid, cell)
            if tid == "bench-table-bandwidth":
                assert all(rate.endswith(" GB/s") for rate in column(table, "rate")), (name, column(table, "rate"))
        # the roofs these CPUs beat (M=1 matmuls from cache); the H200 beats none once float64's is its tensor cores'
        if name.startswith("nvidia-"):
            assert named_ceilings == 0, name
        else:
            assert named_ceilings > 0 or name == "vs-baseline" or "2core-zen3" in name, name
        text = re.sub(r"<[^>]+>", " ", dom)
        assert not re.search(r"\{'[a-z_]+': ", text), name  # no Python dict repr anywhere on the page
        assert "fallbacks-table" not in dom and "No fallback happened." in text, name


def test_no_roofline_point_is_drawn_above_its_roof(pages):
    from tests.report.roof_geometry import drawn_above_a_roof, marks, roofline_chart

    for name, dom in pages.items():
        chart = roofline_chart(dom)
        assert marks(chart), name
        assert drawn_above_a_roof(chart) == [], name
        named = [m.above_roof for m in marks(chart) if m.above_roof]
        assert all(re.search(r"\d (GB|TFLOP)/s, (measured in this run|datasheet)", n) for n in named), (name, named)
        listed = re.search(r'<details id="roofline-above-roof"><summary>(\d+) point', dom)
        assert (int(listed.group(1)) if listed else 0) == len(named), name  # each one listed under the chart
        assert bool(named) != name.startswith("nvidia-") or name == "vs-baseline", name  # CPUs' M=1 matmuls do


def test_baseline_changes_separate_new_cases_from_changed_results(pages):
    text = " ".join(re.sub(r"<[^>]+>", " ", pages["vs-baseline"]).split())
    counts = re.search(r"(\d+) changed results.*?; (\d+) new cases; (\d+) no longer measured", text)
    assert counts and int(counts.group(2)) > 0, text[:2000]  # the two machines' catalogs differ in size
    assert "new cases (not in the baseline)" in text and "Changed results" in text


def with_serve_group(source: Path, target: Path, scale: float) -> Path:
    """A reference profile plus a serve group built by the group's own record makers from known samples."""
    from bringup.probes.bench.groups.serve import latency_record, rate_record
    from bringup.profiles.sections.bench import BenchGroup
    from bringup.profiles.store import load_profile, render_yaml

    profile = load_profile(source)
    ttft = [scale * (0.020 + 0.001 * i) for i in range(8)]
    gaps = [scale * (0.004 + 0.0001 * (i % 13)) for i in range(8 * 15)]
    decode = [sum(gaps[i * 15:(i + 1) * 15]) for i in range(8)]
    common = {"model": "bringup-builtin-llama-2.5m", "requests": 8, "new_tokens": 16}
    profile.bench.groups["serve"] = BenchGroup(records=[
        rate_record("decode_b1", "decode", 15, decode, common), rate_record("prefill_b1", "prefill", 64, ttft, common),
        latency_record("ttft", "time to first token", ttft, common),
        latency_record("inter_token", "inter-token latency", gaps, common)], notes=["8 requests, batch 1"])
    target.write_text(render_yaml(profile), encoding="utf-8")
    return target


def test_speed_card_latency_distributions_and_speedup_chart_from_samples(browser, tmp_path):  # noqa: F811
    before = with_serve_group(REFERENCE[0], tmp_path / "before.yaml", 2.0)
    after = with_serve_group(REFERENCE[0], tmp_path / "after.yaml", 1.0)
    dom = rendered(browser, write_report(after, tmp_path / "after.html", baseline_path=before), tmp_path / "chromium")
    tables = Tables()
    tables.feed(dom)
    card = dict(zip(column(tables.tables["speed-card"], "figure"), column(tables.tables["speed-card"], "value")))
    assert card["time to first token"] == "p50 23.5 ms · p90 26.3 ms · p99 26.9 ms"
    assert card["decode, batch 1"].endswith(" tokens/s") and card["prefill, batch 1"].endswith(" tokens/s")
    chart = dom[dom.index('<svg id="latency-chart"'):]
    chart = chart[:chart.index("</svg>")]
    assert chart.count('class="sample"') == 8 + 8 * 15 and chart.count('class="p99"') == 2
    speedups = dom[dom.index('<svg id="speedup-chart"'):]
    speedups = speedups[:speedups.index("</svg>")]
    for key in ("ttft", "inter_token", "decode_b1", "prefill_b1"):
        assert re.search(rf"serve {key}: 2\.000x", speedups), key  # twice as fast as the baseline's samples


def test_the_markdown_summary_opens_with_the_verdict_and_carries_the_speed_card(tmp_path):
    from bringup.report.write import render_report

    text = render_report(with_serve_group(REFERENCE[0], tmp_path / "p.yaml", 1.0), None, "md")
    assert text.splitlines()[1].startswith("**READY**: ")
    assert "- LLM speed card (bringup-builtin-llama-2.5m): decode, batch 1 " in text
    assert "time to first token p50 23.5 ms · p90 26.3 ms · p99 26.9 ms" in text
