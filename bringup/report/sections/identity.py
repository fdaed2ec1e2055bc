"""Device identity, environment and stage stamps as label/value facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.profiles.schema import Profile
from bringup.report.text import MISSING, byte_size


@dataclass
class Fact:
    label: str
    value: str


def shown(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def device_facts(profile: Profile) -> list[Fact]:
    device = profile.device
    if device is None:
        return []
    facts = [Fact("id", device.id), Fact("name", device.name), Fact("backend", device.backend),
             Fact("vendor", shown(device.vendor)), Fact("arch", shown(device.arch)),
             Fact("PCI bus id", shown(device.pci_bus_id)), Fact("integrated", shown(device.integrated)),
             Fact("UUID", shown(device.uuid)), Fact("memory total", byte_size(device.memory_total_bytes)),
             Fact("memory free (when recorded)", byte_size(device.memory_free_bytes))]
    facts += [Fact(str(key), shown(value)) for key, value in device.extra.items()]
    return [fact for fact in facts if fact.value != MISSING]


# topics `bringup env` records (name -> value each); read with getattr so profiles and schemas without them work
ENVIRONMENT_TOPICS = ("torch_build", "accelerators", "compilers", "packages", "cpu", "system")


def environment_facts(profile: Profile) -> list[Fact]:
    env = profile.environment
    if env is None:
        return []
    facts = [Fact("bringup", env.bringup), Fact("torch", env.torch), Fact("python", env.python),
             Fact("driver", shown(env.driver)), Fact("OS", env.os), Fact("captured", shown(env.captured))]
    facts += [Fact(f"runtime {key}", shown(value)) for key, value in env.runtime.items() if value is not None]
    facts += [Fact(f"${key}", value) for key, value in env.env.items()]
    for topic in ENVIRONMENT_TOPICS:
        found = getattr(env, topic, None)
        if isinstance(found, dict):
            facts += [Fact(f"{topic.replace('_', ' ')}: {name}", shown(value)) for name, value in found.items()]
    return facts


def stage_facts(profile: Profile) -> list[Fact]:
    return [Fact(name, f"{stamp.status}, finished {stamp.finished or MISSING} (bringup {stamp.bringup})")
            for name, stamp in profile.stages.items()]
