"""The HTML page: self-contained, escaped, complete when sections are missing, baseline differences marked."""

from __future__ import annotations

from html.parser import HTMLParser

from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.sections.bench import BenchRecord
from bringup.profiles.store import load_profile
from bringup.report.html import render_html
from bringup.report.model import build_report
from tests.report.sample import HOSTILE, REFERENCE_PROFILES, full_profile


class TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text.append(data)


def parsed(page: str) -> TagCollector:
    collector = TagCollector()
    collector.feed(page)
    return collector


def table_row(page: str, table_id: str, key: str) -> str:
    """The <tr> of the table `table_id` whose first cell is `key`."""
    table = page[page.index(f'id="{table_id}"'):]
    table = table[:table.index("</table>")]
    end = table.index(f">{key}</td>")
    start = table.rindex("<tr", 0, end)
    return table[start:table.index("</tr>", end)]


def html_of(profile: Profile, baseline: Profile | None = None) -> str:
    return render_html(build_report(profile, "p.yaml", baseline, "b.yaml" if baseline else None))


def test_page_has_no_external_references():
    amd = load_profile(REFERENCE_PROFILES / "cpu-amd-epyc-2core-avx512-bf16.yaml")
    for page in (html_of(full_profile()), html_of(amd)):
        tags = parsed(page).tags
        assert not [t for t, _ in tags if t in ("img", "link", "iframe", "object", "embed", "base")]
        for tag, attributes in tags:
            assert "src" not in attributes, tag
            href = attributes.get("href")
            assert href is None or href.startswith("#"), (tag, href)
        assert "url(" not in page and "@import" not in page
    reference = html_of(load_profile(REFERENCE_PROFILES / "cpu-intel-xeon-2core-avx512-amx.yaml"))
    assert "http://" not in reference and "https://" not in reference


def test_hostile_strings_are_text_not_markup():
    page = html_of(full_profile())
    collector = parsed(page)
    scripts = [t for t, _ in collector.tags if t == "script"]
    assert len(scripts) == 1  # the page's own few lines, nothing from the profile
    assert "pwned" not in "".join(collector.script_text)
    assert HOSTILE not in page and "<img" not in page
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in page
    assert all("onerror" not in attributes for _, attributes in collector.tags)


def test_sections_tables_and_chart_are_present():
    page = html_of(full_profile())
    for element_id in ("device-table", "environment-table", "capabilities-table", "ops-matrix", "compiled-table",
                       "roofline-chart", "bench-table-matmul", "plan-table", "fallbacks-table", "selftest-table",
                       "collectives-table", "fail-0", "fail-1"):
        assert f'id="{element_id}"' in page, element_id
    assert page.count('class="point"') == 4  # three matmuls and triad; copy does no arithmetic, so it has no point
    assert 'class="ceiling datasheet"' in page and 'class="ceiling measured"' in page


def test_failing_case_drill_down_shows_the_error_figures():
    page = html_of(full_profile())
    start = page.index('id="fail-1"')
    case = page[start:page.index("</details>", start)]
    for text in ("rms_norm", "max rel error", "0.25", "[1, 17] of output 0", "rtol 0.016", "&lt;img src=x"):
        assert text in case, text
    assert 'href="#fail-0"' in page  # the matrix cell links to its first failing case


def test_compiled_ladder_is_shown_in_order():
    page = html_of(full_profile())
    assert "eager: pass → aot_eager: pass → aot_eager_decomp_partition: mismatch" in page


def test_profile_with_missing_sections_renders():
    for profile in (Profile(), Profile(device=DeviceSection(id="cpu", backend="cpu", name="x"))):
        page = html_of(profile)
        assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
        assert page.count("not measured") >= 6
        assert 'id="roofline-chart"' not in page


def test_baseline_highlights_changed_capability_and_bench_figure():
    baseline = full_profile()
    current = full_profile()
    current.capabilities.dtypes["bfloat16"].status = "unsupported"
    slow = current.bench.groups["matmul"].records[0]
    current.bench.groups["matmul"].records[0] = BenchRecord.model_validate(
        {**slow.model_dump(), "median_s": slow.median_s * 3})
    page = html_of(current, baseline)
    assert 'class="changed"' in table_row(page, "capabilities-table", "dtypes.bfloat16")
    assert "was supported" in table_row(page, "capabilities-table", "dtypes.bfloat16")
    assert "changed slower" in table_row(page, "bench-table-matmul", slow.key)
    assert "changed" not in table_row(page, "bench-table-matmul", "bfloat16 square 512")
    assert 'id="baseline-table"' in page and "x3.000" in page
    assert 'class="badge status-unsupported"' in page


def test_identical_baseline_says_no_differences():
    page = html_of(full_profile(), full_profile())
    assert "No differences." in page
