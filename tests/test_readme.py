"""The README stays a newcomer's page and the docs stay one site.

README.md: at most 200 lines, its two set-up commands present and real Makefile targets, every docs/ link in it
pointing at a file that exists. docs/: every page in mkdocs.yml's nav and every nav entry a page. CI's order runs
the set-up commands and then the strict docs build (`make docs`), which checks the links between pages.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
MAX_README_LINES = 200
SET_UP_COMMANDS = ("make run", "make test")
MARKDOWN_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z][\w-]*):", text, re.MULTILINE)}


def link_targets(markdown: str) -> list[str]:
    return [m.group(1) for m in MARKDOWN_LINK.finditer(markdown)]


def nav_pages(nav: list) -> list[str]:
    """Every page path named in an mkdocs nav, however deeply sectioned."""
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            pages.extend(nav_pages(value))
        else:
            pages.append(value)
    return pages


def mkdocs_config() -> dict:
    return yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))


def test_readme_fits_the_line_budget():
    lines = readme_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/ (budget {MAX_README_LINES})"


@pytest.mark.parametrize("command", SET_UP_COMMANDS)
def test_readme_set_up_commands_are_makefile_targets(command):
    assert re.search(rf"^{re.escape(command)}\b", readme_text(), re.MULTILINE), f"README lacks a `{command}` line"
    target = command.split()[1]
    assert target in makefile_targets(), f"README says `{command}`, but the Makefile has no `{target}` target"


def test_ci_runs_the_set_up_commands_then_the_docs_build():
    commands = [line for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
                if not line.lstrip().startswith("#")]
    steps = [f"make {target}" for line in commands for target in re.findall(r"(?<![\w-])make (\w+)", line)]
    assert steps == ["make run", "make test", "make docs"]
    assert "docs" in makefile_targets()
    docs_recipe = (REPO / "Makefile").read_text(encoding="utf-8").split("\ndocs:", 1)[1]
    assert "mkdocs build --strict" in docs_recipe


def test_readme_docs_links_resolve():
    docs_links = [t for t in link_targets(readme_text()) if t.startswith("docs/")]
    assert docs_links, "the README links no page under docs/"
    missing = [t for t in docs_links if not (REPO / t.split("#", 1)[0]).is_file()]
    assert not missing, f"README links to missing docs files: {missing}"


def test_readme_links_only_to_files_or_the_web():
    for target in link_targets(readme_text()):
        if target.startswith(("http://", "https://", "#")):
            continue
        assert (REPO / target.split("#", 1)[0]).exists(), f"README links to {target}, which does not exist"


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    in_nav = nav_pages(mkdocs_config()["nav"])
    on_disk = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(on_disk) - set(in_nav)) == [], "docs pages missing from mkdocs.yml's nav"
    assert sorted(set(in_nav) - set(on_disk)) == [], "mkdocs.yml's nav names pages that do not exist"
    assert len(in_nav) == len(set(in_nav)), "a page is in the nav twice"


def strict_build(config_file: Path, site_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config_file),
                           "--site-dir", str(site_dir)], capture_output=True, text=True, cwd=config_file.parent)


def test_the_docs_build_strictly(tmp_path):
    """What `make docs` runs in CI. Skipped where mkdocs is not installed (it comes with the docs extra)."""
    pytest.importorskip("mkdocs")
    build = strict_build(REPO / "mkdocs.yml", tmp_path / "site")
    assert build.returncode == 0, build.stderr


def test_a_broken_link_or_an_unlisted_page_fails_the_strict_build(tmp_path):
    pytest.importorskip("mkdocs")
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\n[gone](no-such-page.md)\n", encoding="utf-8")
    (tmp_path / "docs" / "unlisted.md").write_text("# not in the nav\n", encoding="utf-8")
    build = strict_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert build.returncode != 0
    assert "no-such-page.md" in build.stderr
    assert "unlisted.md" in build.stderr
