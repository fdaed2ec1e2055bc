"""Guide text that cannot go stale: every module path a docstring, a comment or a docs page names exists, and
docs/development.md's layer table says what tests/test_layers.py enforces.

A reference is a file name ending in `.py` (bare, or with folders: `engine/scheduler.py`), or a dotted module path
under `bringup` with at least three parts (`bringup.runner.engine`); a dotted path may end in up to two attributes
of a module (`bringup.runner.engine.engine.LLMEngine`). Text is read where people read it: Markdown files, Python
docstrings and comments, C/C++ comments. Names of other projects' files, cited on purpose, are listed below with
where they come from.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

FILE_REFERENCE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
MODULE_REFERENCE = re.compile(r"(?<![\w.])bringup(?:\.[A-Za-z_]\w*){2,}")
C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
OTHER_PROJECTS = {  # files of other projects that the text names on purpose
    "convert_hf_to_gguf.py",  # llama.cpp's converter
    "sitecustomize.py",  # the interpreter's start-up hook
}
OTHER_PREFIXES = ("torch/",)  # torch's sources
EXAMPLE_NAMES = {  # placeholders in instructions, the tests' own fixtures, a generated repro's name
    "file.py", "mine.py", "acme_plugin.py", "exp-bfloat16-odd_3_37_101.py",
}
# text that is data, not guide: eval's built-in corpus, a fixed snapshot of the docs (editing it would change every
# perplexity recorded against it)
FIXED_TEXTS = {"bringup/runner/eval/default_text.md"}
SCHEMA_ID = re.compile(r"\.v\d+(\.json)?$")  # bringup.<command>.v1: a JSON schema's id, not a module


UNTRACKED_DIRS = {".git", ".venv", ".cache", "__pycache__", "build", "dist", "site"}


@cache
def tracked_files() -> tuple[str, ...]:
    """The repository's files (git's list; outside a git checkout, the tree without build and cache folders)."""
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
        return tuple(line for line in listed.splitlines() if line)
    except (OSError, subprocess.CalledProcessError):
        return tuple(str(path.relative_to(REPO)) for path in REPO.rglob("*")
                     if path.is_file() and not UNTRACKED_DIRS & set(path.relative_to(REPO).parts))


def exists(reference: str) -> bool:
    files = tracked_files()
    if "/" not in reference:
        return any(path.rsplit("/", 1)[-1] == reference for path in files)
    return any(path == reference or path.endswith("/" + reference) for path in files)


def module_exists(dotted: str) -> bool:
    """A module (file or package) of this tree, or a module's attribute chain of at most two names."""
    parts = dotted.split(".")
    files = set(tracked_files())
    for size in range(len(parts), 1, -1):
        base = "/".join(parts[:size])
        if base + ".py" in files or base + "/__init__.py" in files:
            attributes = parts[size:]
            if len(attributes) > 2:
                return False
            value = importlib.import_module(".".join(parts[:size]))
            for name in attributes:
                if not hasattr(value, name):
                    return False
                value = getattr(value, name)
            return True
    return False


def python_text(source: str) -> str:
    """The docstrings and comments of a Python file."""
    pieces = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                pieces.append(token.string)
    except (tokenize.TokenError, SyntaxError):
        pass
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                pieces.append(docstring)
    return "\n".join(pieces)


def readable_text(path: str) -> str:
    source = (REPO / path).read_text(errors="replace")
    if path.endswith(".py"):
        return python_text(source)
    if path.endswith((".h", ".cpp")):
        return "\n".join(C_COMMENT.findall(source))
    return source


def stale_references() -> dict[str, list[str]]:
    """reference -> the files whose text names it, for every reference that names nothing here."""
    stale: dict[str, list[str]] = {}
    for path in tracked_files():
        if not path.endswith((".py", ".md", ".h", ".cpp")) or path in FIXED_TEXTS:
            continue
        text = readable_text(path)
        for reference in FILE_REFERENCE.findall(text):
            if reference in OTHER_PROJECTS | EXAMPLE_NAMES or reference.startswith(OTHER_PREFIXES) or exists(reference):
                continue
            stale.setdefault(reference, []).append(path)
        for dotted in MODULE_REFERENCE.findall(text):
            if not SCHEMA_ID.search(dotted) and not module_exists(dotted):
                stale.setdefault(dotted, []).append(path)
    return stale


def test_every_module_the_text_names_exists():
    stale = stale_references()
    assert not stale, "text names modules that do not exist (rename the reference or drop it):\n" + "\n".join(
        f"  {reference}: {', '.join(sorted(set(paths)))}" for reference, paths in sorted(stale.items()))


def test_the_scan_finds_a_stale_name():
    text = python_text('"""Read families.py first, then bringup.runner.engine.engine and engine/scheduler.py."""\n'
                       "# see bringup.runner.model.nowhere\n")
    names = FILE_REFERENCE.findall(text) + MODULE_REFERENCE.findall(text)
    assert [name for name in names if not (exists(name) if name.endswith(".py") else module_exists(name))] == [
        "families.py", "bringup.runner.model.nowhere"]


def _backticked(text: str) -> set[str]:
    return set(re.findall(r"`([\w.]+)`", text))


def test_the_layer_table_in_the_docs_is_the_one_the_layer_test_holds():
    from tests.test_layers import CORE, LAYERS, RUNNER_LAYERS

    docs = (REPO / "docs" / "development.md").read_text()
    rows = dict(re.findall(r"^\| `([\w.]+)` \| (.+) \|$", docs, re.M))
    packages = {name.removeprefix("bringup.") for name in LAYERS if name != "bringup.__main__"}
    assert set(rows) == packages
    for name, allowed in LAYERS.items():
        if name != "bringup.__main__":
            want = {target.removeprefix("bringup.") for target in allowed}
            assert _backticked(rows[name.removeprefix("bringup.")]) == want, name
    header = next(line for line in docs.splitlines() if line.startswith("| package | may import"))
    assert _backticked(header) == {name.removeprefix("bringup.") for name in CORE if name != "bringup"}
    inside = docs[docs.index("Inside the runner:"):].split("\n\n", 1)[0]
    assert _backticked(inside) == {name.removeprefix("bringup.runner.") for name in RUNNER_LAYERS}
