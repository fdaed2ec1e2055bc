"""Fake command-line tools placed first on PATH, for the environment probes' tests."""

import os
import stat
from pathlib import Path

import pytest


def fake_tool(folder: Path, name: str, script: str) -> Path:
    """An executable shell script `name` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def first_on_path(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


# a tool that hangs, and whose child keeps the output pipe open after the tool itself is killed
HANGING = "sleep 30 &\nsleep 30"
