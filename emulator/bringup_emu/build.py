"""Build the C++ extension once per torch version, source hash and compiler, into a folder that outlives test runs.

The build runs in its own process (`python -m bringup_emu build`) under a file lock, into a temporary folder that is
renamed into place when complete, so several processes starting at once build it once and never load half a build.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

EXTENSION_NAME = "bringup_emu_C"
SOURCE_DIR = Path(__file__).resolve().parent / "csrc"
CXX_FLAGS = ("-O2", "-fvisibility=hidden")
UNITS = 4  # unity translation units at most (one per core); names at file scope must differ across sources
BUILD_DIR_ENV = "BRINGUP_EMU_BUILD_DIR"


class BuildError(RuntimeError):
    """The extension could not be built; the message says why and what to do."""


def sources() -> list[Path]:
    return sorted(SOURCE_DIR.glob("*.cpp"))


def compiler() -> str | None:
    """The C++ compiler torch.utils.cpp_extension will use ($CXX, else c++), resolved, or None when absent."""
    found = shutil.which(os.environ.get("CXX", "c++"))
    return os.path.realpath(found) if found else None


def missing_toolchain() -> str | None:
    """Why the extension cannot be compiled here (no compiler, no ninja), or None."""
    if compiler() is None:
        return "no C++ compiler is found (set CXX or install g++)"
    if shutil.which("ninja") is None:
        return "ninja is not found (install it: pip install ninja, or apt-get install ninja-build)"
    return None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def build_root() -> Path:
    """$BRINGUP_EMU_BUILD_DIR, else `_build/` beside the package, else $XDG_CACHE_HOME/bringup-emu."""
    override = os.environ.get(BUILD_DIR_ENV)
    if override:
        return Path(override)
    beside = Path(__file__).resolve().parent / "_build"
    if _writable(beside):
        return beside
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "bringup-emu"


def build_key(torch_version: str) -> str:
    """`<torch version>-<hash>` of the sources, the flags, the compiler (path, size, mtime) and the Python ABI."""
    digest = hashlib.sha256()
    for path in sorted(SOURCE_DIR.iterdir()):
        if path.suffix in (".cpp", ".h"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(" ".join(CXX_FLAGS).encode())
    cxx = compiler()
    if cxx:
        stat = os.stat(cxx)
        digest.update(f"{cxx}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    digest.update(sys.implementation.cache_tag.encode())
    return f"{torch_version}-{digest.hexdigest()[:16]}"


def library_path(torch_version: str) -> Path:
    return build_root() / build_key(torch_version) / f"{EXTENSION_NAME}.so"


def _first_error(output: str) -> str:
    """The compiler's first `error:` line, else the output's first line."""
    lines = output.splitlines() or ["no output"]
    return next((line.strip() for line in lines if "error:" in line), lines[0])


def unity_units(staging: Path, count: int) -> list[Path]:
    """`count` translation units in `staging`, each including a share of the sources (a unity build: torch's headers,
    which take most of each compile, are parsed `count` times instead of once per source file)."""
    files = sources()
    count = max(1, min(count, len(files)))
    units = []
    for index in range(count):
        unit = staging / f"unity_{index}.cpp"
        unit.write_text("".join(f'#include "{path}"\n' for path in files[index::count]))
        units.append(unit)
    return units


def compile_into(staging: Path, verbose: bool) -> None:
    """Compile the sources into `staging` with torch.utils.cpp_extension (which then imports the library), as one
    unity unit per core (at most UNITS), which ninja compiles side by side."""
    from torch.utils import cpp_extension

    cpp_extension.load(
        name=EXTENSION_NAME,
        sources=[str(unit) for unit in unity_units(staging, min(UNITS, os.cpu_count() or 1))],
        extra_cflags=[*CXX_FLAGS, f"-I{SOURCE_DIR}"],
        build_directory=str(staging),
        verbose=verbose,
    )


def build(verbose: bool = False, compile_step: Callable[[Path, bool], None] = compile_into) -> tuple[Path, float]:
    """Build unless built; call it from a throwaway process (the real compile step loads the library into it).
    Returns the library's path and the seconds spent building (0.0 when it was already built)."""
    import torch

    target = library_path(torch.__version__)
    if target.exists():
        return target, 0.0
    missing = missing_toolchain()
    if missing:
        raise BuildError(missing)
    root = target.parent.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{target.parent.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # another process built it while this one waited
            return target, 0.0
        for stale in root.glob(f"{target.parent.name}.tmp-*"):  # left by a killed build; the lock is ours
            shutil.rmtree(stale, ignore_errors=True)
        staging = root / f"{target.parent.name}.tmp-{os.getpid()}"
        staging.mkdir()
        started = time.perf_counter()
        try:
            compile_step(staging, verbose)
        except Exception as error:
            shutil.rmtree(staging, ignore_errors=True)
            raise BuildError(f"the compiler failed: {_first_error(str(error))}") from error
        os.replace(staging, target.parent)
        return target, time.perf_counter() - started


def build_in_subprocess() -> Path:
    """Build through `python -m bringup_emu build` with autoload off (so it cannot recurse); the path it printed."""
    import torch

    target = library_path(torch.__version__)
    if target.exists():
        return target
    missing = missing_toolchain()
    if missing:
        raise BuildError(f"it is not built here and {missing}")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    env.pop("BRINGUP_EMU_SPEC", None)
    print("emu: building the emulator extension once (30-90 s) ...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [sys.executable, "-m", "bringup_emu", "build"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or not target.exists():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1].removeprefix("error: ")
        raise BuildError(f"the build failed ({last})")
    return target
