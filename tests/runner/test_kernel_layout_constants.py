"""The host kernels take the weights' layout constants from the Python that owns them (-D defines) and report them
back: a library built with any other value for any of them is refused when loaded, naming the constant."""

from __future__ import annotations

import re
import subprocess

import pytest

from bringup.runner.weights.formats.integer import GROUP, TILE
from bringup.runner.weights.kernels import build as host_build
from bringup.runner.weights.kernels.layout_constants import DEFINES
from bringup.runner.weights.layouts import PANEL
from tests.runner.host_compiler import needs_compiler

HOST_KERNELS = host_build.KERNELS.parent.parent / "host" / "kernels"
KERNEL_SOURCES = [*host_build.KERNELS.glob("*.h"), *host_build.KERNELS.glob("*.cpp"), *HOST_KERNELS.glob("*.h"),
                  *HOST_KERNELS.glob("*.cpp")]


def test_no_layout_constant_is_written_in_the_kernels_sources():
    """Only layout_constants.h names them, and only from the defines."""
    assigned = re.compile(r"\b(PANEL|QGROUP|QTILE|QWORD|INT8_SCALE_BYTES|INT4_SCALE_BYTES|FORMAT_INT\w+)\s*=\s*\d")
    assert len(KERNEL_SOURCES) >= 9
    assert [s.name for s in KERNEL_SOURCES if assigned.search(s.read_text())] == []
    assert DEFINES["BRINGUP_PANEL"] == PANEL and DEFINES["BRINGUP_QGROUP"] == GROUP and DEFINES["BRINGUP_QTILE"] == TILE


def _built_with(tmp_path, monkeypatch, name: str, value: int | str):
    """quantized_linear.cpp built with one define changed, left in a fresh cache under its sound name (a new folder
    each time: a path already loaded would be handed back as it was); then loaded."""
    monkeypatch.setenv("BRINGUP_KERNEL_CACHE", str(tmp_path))
    host_build.load.cache_clear()
    source = host_build.KERNELS / "quantized_linear.cpp"
    target = host_build.library_path("quantized_linear.cpp")
    target.parent.mkdir(parents=True, exist_ok=True)
    command = [f"-D{name}={value}" if f.startswith(f"-D{name}=") else f
               for f in host_build.compile_args(source, target)]
    subprocess.run(command, check=True, timeout=host_build.BUILD_TIMEOUT_S)
    try:
        return host_build.load("quantized_linear.cpp")
    finally:
        host_build.load.cache_clear()


@needs_compiler
@pytest.mark.parametrize(("name", "value"), [("BRINGUP_QTILE", 8), ("BRINGUP_INT4_SCALE_BYTES", 4),
                                             ("BRINGUP_FORMAT_INT4", 5), ("BRINGUP_PANEL", 8)])
def test_a_library_built_with_another_layout_constant_is_refused_naming_it(tmp_path, monkeypatch, name, value):
    with pytest.raises(host_build.KernelUnavailable,
                       match=rf"quantized_linear.cpp was built with other layout constants: {name} = {value} "
                             rf"\(expected {DEFINES[name]}\)$"):
        _built_with(tmp_path, monkeypatch, name, value)


@needs_compiler
def test_the_sound_build_reports_every_constant(tmp_path, monkeypatch):
    lib = _built_with(tmp_path, monkeypatch, "BRINGUP_QTILE", DEFINES["BRINGUP_QTILE"])
    assert all(lib.bringup_layout_constant(name.encode()) == value for name, value in DEFINES.items())
    assert lib.bringup_layout_constant(b"BRINGUP_NOT_A_CONSTANT") == -1


@needs_compiler
def test_a_library_built_with_another_int4_group_is_refused_naming_the_format(tmp_path, monkeypatch):
    with pytest.raises(host_build.KernelUnavailable, match=r"layout constants: the group of format 4 = 256 "
                                                           r"\(expected 128\)$"):
        _built_with(tmp_path / "other", monkeypatch, "BRINGUP_INT4_FORMATS", "X(2,32) X(3,64) X(4,256)")
    with pytest.raises(host_build.KernelUnavailable, match=r"layout constants: the group of format 5 = 256 "
                                                           r"\(expected -1\)$"):
        _built_with(tmp_path / "more", monkeypatch, "BRINGUP_INT4_FORMATS", "X(2,32) X(3,64) X(4,128) X(5,256)")
