"""Where the library is cached, and that processes starting at once build it once."""

import subprocess
import sys

from bringup_emu import build
from tests.emulator.emu_process import emu_env

FAKE_BUILD = """
import sys, time, types
sys.modules["torch"] = types.SimpleNamespace(__version__="0.0-test")  # the lock is under test, not torch
from bringup_emu import build

def fake_compile(staging, verbose):
    with open(sys.argv[1], "a") as log:
        log.write("compiled\\n")
    time.sleep(1.0)  # long enough for the other processes to reach the lock
    (staging / (build.EXTENSION_NAME + ".so")).write_bytes(b"not a real library")

path, seconds = build.build(compile_step=fake_compile)
print(path.read_bytes().decode())
"""


def test_the_key_names_the_torch_version_and_changes_with_the_sources(monkeypatch, tmp_path) -> None:
    key = build.build_key("2.13.0+cpu")
    assert key.startswith("2.13.0+cpu-") and build.build_key("2.14.0").startswith("2.14.0-")
    sources = tmp_path / "csrc"
    sources.mkdir()
    (sources / "a.cpp").write_text("int a;")
    monkeypatch.setattr(build, "SOURCE_DIR", sources)
    first = build.build_key("2.13.0")
    (sources / "a.cpp").write_text("int b;")
    assert build.build_key("2.13.0") != first


def test_the_build_folder_is_overridable_else_beside_the_package(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(build.BUILD_DIR_ENV, str(tmp_path / "here"))
    assert build.build_root() == tmp_path / "here"
    monkeypatch.delenv(build.BUILD_DIR_ENV)
    assert build.build_root().name == "_build"


def test_processes_starting_at_once_compile_once_and_all_get_the_complete_library(tmp_path) -> None:
    env = emu_env(None) | {build.BUILD_DIR_ENV: str(tmp_path / "cache")}
    log = tmp_path / "compiles.log"
    stale = tmp_path / "cache" / f"{build.build_key('0.0-test')}.tmp-999999"  # a killed build's leftovers
    stale.mkdir(parents=True)
    children = [subprocess.Popen([sys.executable, "-c", FAKE_BUILD, str(log)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outputs = [child.communicate(timeout=120) for child in children]
    assert [child.returncode for child in children] == [0, 0, 0], outputs
    assert log.read_text() == "compiled\n"
    assert [out.strip() for out, _ in outputs] == ["not a real library"] * 3
    leftovers = sorted(p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock"))
    assert len(leftovers) == 1 and ".tmp-" not in leftovers[0]
