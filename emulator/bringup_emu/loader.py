"""Load the built extension straight from its file (no compiler, no ninja on the warm path)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from bringup_emu.build import EXTENSION_NAME, build_in_subprocess


def load_extension() -> ModuleType:
    path = build_in_subprocess()
    spec = importlib.util.spec_from_file_location(EXTENSION_NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
