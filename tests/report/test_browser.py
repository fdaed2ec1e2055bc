"""The report in a real browser: headless Chromium renders it (with and without JavaScript), takes a screenshot,
and the rendered DOM holds the tables and the roofline chart with its points."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bringup.report.write import write_report
from tests.report.sample import full_profile, write_profile

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
INSTALL_TIMEOUT_S = 600
RENDER_TIMEOUT_S = 120


def find_browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def install_browser() -> str:
    """Debian's chromium, installed when missing and this user may install packages; else the reason it can't be."""
    if not shutil.which("apt-get"):
        return "no apt-get to install chromium with"
    if os.geteuid() != 0:
        return "not root: cannot apt-get install chromium"
    try:
        done = subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    except subprocess.TimeoutExpired:
        return f"apt-get install chromium took over {INSTALL_TIMEOUT_S} s"
    return "" if done.returncode == 0 else f"apt-get install chromium failed: {done.stderr.strip()[-200:]}"


@pytest.fixture(scope="session")
def browser() -> str:
    found = find_browser()
    if found is None:
        reason = install_browser()
        found = find_browser()
        if found is None:
            pytest.skip(f"headless Chromium is not available: {reason or 'not found after installing'}")
    return found


def run_browser(browser: str, profile_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", f"--user-data-dir={profile_dir}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=RENDER_TIMEOUT_S)


@pytest.fixture
def report_page(tmp_path: Path) -> Path:
    return write_report(write_profile(tmp_path / "sample.yaml", full_profile()))


def assert_rendered_dom(dom: str, scripts: int = 1) -> None:
    for element_id in ("capabilities-table", "ops-matrix", "compiled-table", "bench-table-matmul", "plan-table",
                       "selftest-table", "collectives-table", "roofline-chart"):
        assert f'id="{element_id}"' in dom, element_id
    chart = dom[dom.index('<svg id="roofline-chart"'):dom.index("</svg>")]
    assert chart.count('class="point"') == 4
    assert "<polyline" in chart and "arithmetic intensity" in chart
    assert dom.count("<script") == scripts  # the page's own at most; the profile's "<script>" stays text
    assert "&lt;script&gt;" in dom


def test_chromium_renders_the_page_and_its_dom_holds_tables_and_chart(browser, report_page, tmp_path):
    done = run_browser(browser, tmp_path / "chromium", "--dump-dom", report_page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert_rendered_dom(done.stdout)


def test_page_reads_without_javascript(browser, report_page, tmp_path):
    """Headless Chromium needs JavaScript to dump or capture a page, so the page's script is removed instead."""
    page = report_page.read_text(encoding="utf-8")
    start, end = page.index("<script>"), page.index("</script>") + len("</script>")
    without_script = tmp_path / "no-script.html"
    without_script.write_text(page[:start] + page[end:], encoding="utf-8")
    done = run_browser(browser, tmp_path / "chromium", "--dump-dom", without_script.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert_rendered_dom(done.stdout, scripts=0)


def test_chromium_takes_a_screenshot(browser, report_page, tmp_path):
    shot = tmp_path / "report.png"
    done = run_browser(browser, tmp_path / "chromium", f"--screenshot={shot}", "--window-size=1280,2400",
                       "--hide-scrollbars", report_page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000  # a blank page compresses to a few kilobytes; the report does not
