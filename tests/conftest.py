"""Hermetic tests, enforced here and nowhere else.

Every test runs from a fresh temporary working directory, so the default `./profiles/<device>.yaml` is
empty, and `$HOME`, the XDG and Hugging Face caches, bringup's kernel cache and torch's compile caches
all point inside one temporary folder of this run (shared by the tests of the run so a compile is paid
once). Subprocesses that tests start inherit the same environment. `--reverse` runs the collected tests
in reverse order, to show that no test depends on another one having run first.
"""

import os
import tempfile
from pathlib import Path

import pytest

RUN_DIR = Path(tempfile.mkdtemp(prefix="bringup-tests-"))
HERMETIC_ENV = {
    "HOME": RUN_DIR / "home",
    "XDG_CACHE_HOME": RUN_DIR / "home" / ".cache",
    "XDG_CONFIG_HOME": RUN_DIR / "home" / ".config",
    "HF_HOME": RUN_DIR / "home" / ".cache" / "huggingface",
    "TORCHINDUCTOR_CACHE_DIR": RUN_DIR / "inductor",
    "TRITON_CACHE_DIR": RUN_DIR / "triton",
    "BRINGUP_KERNEL_CACHE": RUN_DIR / "kernels",
    "HYPOTHESIS_STORAGE_DIRECTORY": RUN_DIR / "hypothesis",
}
# variables that would steer a test towards a device or a profile of the machine it runs on
UNSET = ("BRINGUP_DEVICE",)

for name, folder in HERMETIC_ENV.items():
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[name] = str(folder)
for name in UNSET:
    os.environ.pop(name, None)
os.environ["HF_HUB_OFFLINE"] = "1"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--reverse", action="store_true", help="run the collected tests in reverse order")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--reverse"):
        items.reverse()


@pytest.fixture(scope="session", autouse=True)
def session_working_directory(tmp_path_factory: pytest.TempPathFactory):
    """Module- and session-scoped fixtures (built once, before any test's own directory) start here."""
    start = Path.cwd()
    os.chdir(tmp_path_factory.mktemp("session-cwd"))
    yield
    os.chdir(start)


@pytest.fixture(autouse=True)
def test_working_directory(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test starts in its own empty directory (not its tmp_path, which stays the test's own)."""
    workdir = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(workdir)
    return workdir


@pytest.fixture
def inductor_cache_dir() -> str:
    return os.environ["TORCHINDUCTOR_CACHE_DIR"]
