"""The torch the test suite runs on, and the one-line warning when the running torch is older.

pyproject asks for `torch>=2.4` (users bring their vendor's torch); only TESTED_TORCH is tested
(docs/install.md#torch-versions says so). `bringup env` and `bringup devices` warn below it.
"""

from __future__ import annotations

import re

from bringup.log import get_logger

TESTED_TORCH = "2.13"  # the oldest (and only) torch release the test suite runs on
CLAIMED_FLOOR = "2.4"  # pyproject.toml's `torch>=` floor: claimed, not tested
DOCS_ANCHOR = "docs/install.md#torch-versions"

RELEASE = re.compile(r"^\s*(\d+)\.(\d+)")


def release_of(version: str) -> tuple[int, int] | None:
    """`2.4.1+cu121` → (2, 4); `2.6.0a0+git1234` → (2, 6); None when the string names no release."""
    found = RELEASE.match(version)
    return (int(found[1]), int(found[2])) if found else None


def untested_torch_warning(version: str) -> str | None:
    """One line when `version` is older than TESTED_TORCH (or cannot be read), else None."""
    release = release_of(version)
    tested, floor = release_of(TESTED_TORCH) or (0, 0), release_of(CLAIMED_FLOOR) or (0, 0)
    if release is None:
        return (f"torch version {version!r} is not a version number to compare with {TESTED_TORCH}, the oldest "
                f"torch the test suite runs on ({DOCS_ANCHOR})")
    if release >= tested:
        return None
    claim = (f"below the floor torch>={CLAIMED_FLOOR}" if release < floor
             else f"torch>={CLAIMED_FLOOR} is claimed, not tested")
    return (f"torch {version} is older than {TESTED_TORCH}, the oldest torch the test suite runs on "
            f"({claim}; {DOCS_ANCHOR})")


def warn_if_untested_torch(version: str) -> None:
    """The warning, logged at WARNING (stderr; `bringup all` shows it once), when there is one."""
    warning = untested_torch_warning(version)
    if warning is not None:
        get_logger("torch").warning("%s", warning)
