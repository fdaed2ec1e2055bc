"""The `environment` section: versions and settings that explain "what changed since it last worked".

One place gathers the facts; `bringup devices` records them and `bringup env` prints them (and records them)."""

import os
import platform
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

from bringup import __version__
from bringup.backends.registry import registered
from bringup.backends.selection.reconcile import visibility_variables
from bringup.probes.env_facts.accelerators import accelerator_facts, legacy_driver
from bringup.probes.env_facts.compilers import compiler_facts
from bringup.probes.env_facts.host import cpu_facts, system_facts
from bringup.probes.env_facts.packages import package_facts
from bringup.probes.env_facts.tools import TOOL_TIMEOUT_S, guarded, run_all
from bringup.probes.env_facts.torch_build import runtime_versions, torch_build_facts, torch_config
from bringup.profiles.schema import EnvironmentSection
from bringup.profiles.store import now_iso

# every family's own prefixes come from its backend (environment_prefixes); these concern them all
COMMON_PREFIXES = (
    "PYTORCH_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "OMP_", "MKL_", "KMP_", "GOMP_", "GLOO_", "BRINGUP_",
    "OPENBLAS_",
)
VISIBILITY_VARIABLES = visibility_variables()
RECORDED_PREFIXES = COMMON_PREFIXES + tuple(p for b in registered() for p in b.environment_prefixes)
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|PRIVATE", re.IGNORECASE)
# always named in the report, "not set" included: the ones maintainers ask about first
KEY_VARIABLES = (*VISIBILITY_VARIABLES, "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTORCH_CUDA_ALLOC_CONF")


def recorded_env(env: Mapping[str, str]) -> dict[str, str]:
    """Variables that change device behaviour; never ones whose name suggests a secret."""
    keep = {}
    for name, value in sorted(env.items()):
        if SECRET_NAME.search(name):
            continue
        if name in VISIBILITY_VARIABLES or name.startswith(RECORDED_PREFIXES):
            keep[name] = value
    return keep


def os_summary() -> str:
    return f"{platform.system()} {platform.release()} ({platform.platform()})"


def failed_topic(reason: str) -> dict[str, str]:
    return {"error": reason}


def topic(probe: Callable[[], dict[str, str]]) -> Callable[[], dict[str, str]]:
    return lambda: guarded(probe, failed_topic)


def collect_environment(
    env: Mapping[str, str] | None = None, root: Path = Path("/"), timeout: float = TOOL_TIMEOUT_S
) -> EnvironmentSection:
    """Every fact, each probe bounded and none able to fail the whole: a broken one leaves a short reason."""
    env = os.environ if env is None else env
    slow = run_all({
        "accelerators": topic(lambda: accelerator_facts(root, timeout)),
        "compilers": topic(lambda: compiler_facts(env, timeout)),
    })
    config = torch_config()
    return EnvironmentSection(
        bringup=__version__,
        torch=torch.__version__,
        python=sys.version.split()[0],
        runtime=guarded(lambda: runtime_versions(config), lambda reason: {"error": reason}),
        driver=legacy_driver(slow["accelerators"]),
        os=guarded(os_summary, lambda reason: reason),
        env=recorded_env(env),
        captured=now_iso(),
        torch_build=topic(lambda: torch_build_facts(config))(),
        accelerators=slow["accelerators"],
        compilers=slow["compilers"],
        packages=topic(package_facts)(),
        cpu=topic(lambda: cpu_facts(root))(),
        system=topic(lambda: system_facts(root))(),
    )
