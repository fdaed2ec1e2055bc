"""The environment as `bringup env` shows it: ordered sections of `name: value` text, one shape for text and JSON."""

from collections.abc import Mapping

from bringup.profiles.schema import EnvironmentSection

Sections = dict[str, dict[str, str]]
SECTION_ORDER = ("bringup", "torch", "accelerators", "compilers", "packages", "variables", "cpu", "system")
RUNTIME_NAMES = {"torch_git": "git_version"}


def torch_section(environment: EnvironmentSection) -> dict[str, str]:
    runtime = {RUNTIME_NAMES.get(k, k): v for k, v in environment.runtime.items() if v is not None}
    section = {"version": environment.torch}
    if "git_version" in runtime:
        section["git_version"] = runtime.pop("git_version")
    section.update(environment.torch_build)
    section.update({k: v for k, v in runtime.items() if k not in section})
    return section


def variables_section(environment: EnvironmentSection, always_named: tuple[str, ...]) -> dict[str, str]:
    section = dict(environment.env)
    unset = [name for name in always_named if name not in section]
    if unset:
        section["not_set"] = " ".join(unset)
    return section


def system_section(environment: EnvironmentSection) -> dict[str, str]:
    """The collected system facts; for profiles recorded before them, the one-line fields they had."""
    if environment.system:
        return dict(environment.system)
    return {"os": environment.os, "python": environment.python}


def accelerators_section(environment: EnvironmentSection) -> dict[str, str]:
    if environment.accelerators:
        return dict(environment.accelerators)
    return {"driver": environment.driver or "none found"}


def report_sections(environment: EnvironmentSection, always_named: tuple[str, ...] = ()) -> Sections:
    sections: Mapping[str, dict[str, str]] = {
        "bringup": {"version": environment.bringup, "captured": environment.captured or "unknown"},
        "torch": torch_section(environment),
        "accelerators": accelerators_section(environment),
        "compilers": dict(environment.compilers),
        "packages": dict(environment.packages),
        "variables": variables_section(environment, always_named),
        "cpu": dict(environment.cpu),
        "system": system_section(environment),
    }
    return {name: sections[name] for name in SECTION_ORDER}
