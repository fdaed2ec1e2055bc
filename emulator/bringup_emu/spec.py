"""BRINGUP_EMU_SPEC: `default`, a path to a JSON or YAML file, or inline JSON, parsed and checked in one place.

Every problem raises SpecError with one line naming the field (`devices[1].memory: ...`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.number_rule import described
from bringup_emu.default_spec import DEFAULT_SPEC
from bringup_emu.numerics import NumericsError, parse_numerics
from bringup_emu.op_names import check_op_name
from bringup_emu.spec_checks import (
    SpecError,
    check_factor,
    check_fail_after,
    check_host_threads,
    check_lost_when,
    check_name,
    check_speed,
    load_json,
    load_yaml,
    parse_size,
    read_spec_file,
)

__all__ = ["SPEC_ENV", "DeviceSpec", "EmuSpec", "SpecError", "load_spec", "parse_size", "parse_spec"]

SPEC_ENV = "BRINGUP_EMU_SPEC"
MAX_DEVICES = 16
MAX_SPEC_BYTES = 1 << 20
FIELDS = ("devices", "refused_dtypes", "native", "wrong", "abort", "numerics", "capture_refused", "replay_wrong")
DEVICE_FIELDS = ("name", "integrated", "memory", "graphs", "speed", "host_threads", "fail_after_ops", "lost_when")


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    integrated: bool
    memory_bytes: int
    graphs: bool = True  # torch.accelerator.Graph captures on this device
    speed: float = 1.0  # a fraction of the host's speed: each op takes 1/speed of its host time
    fail_after_ops: int | None = None  # the device is lost after this many ops (each later op raises); None: never
    lost_when: str | None = None  # the device is lost once this file exists (a test "pulls the card"); None: never
    host_threads: int | None = None  # the host threads each op runs on (None: as many as the calling thread's torch)


@dataclass(frozen=True)
class EmuSpec:
    devices: tuple[DeviceSpec, ...]
    refused_dtypes: tuple[str, ...]
    native: tuple[str, ...]
    wrong: dict[str, float]
    abort: tuple[str, ...]
    source: str
    numerics: dict[str, str] = dataclasses.field(default_factory=dict)  # op -> legal or biased variant (numerics.py)
    capture_refused: tuple[str, ...] = ()  # ops a graph capture refuses, as a device that cannot capture them
    replay_wrong: dict[str, float] = dataclasses.field(default_factory=dict)  # op -> factor, wrong only when replayed

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "devices": [
                {"name": d.name, "integrated": d.integrated, "memory": d.memory_bytes, "graphs": d.graphs,
                 "speed": d.speed, "host_threads": d.host_threads, "fail_after_ops": d.fail_after_ops,
                 "lost_when": d.lost_when}
                for d in self.devices
            ],
            "refused_dtypes": list(self.refused_dtypes),
            "native": list(self.native),
            "wrong": dict(self.wrong),
            "abort": list(self.abort),
            "numerics": dict(self.numerics),
            "capture_refused": list(self.capture_refused),
            "replay_wrong": dict(self.replay_wrong),
        }


def _read_source(value: str) -> tuple[Any, str]:
    try:
        return _parse_source(value)
    except RecursionError:
        raise SpecError("the spec is nested too deeply to be a spec") from None


def _parse_source(value: str) -> tuple[Any, str]:
    text = value.strip()
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError(f"inline JSON of {len(text)} characters, at most {MAX_SPEC_BYTES}")
    if text == "default":
        return DEFAULT_SPEC, "default"
    if text.startswith("{"):
        try:
            return load_json(text), "inline JSON"
        except json.JSONDecodeError as error:
            raise SpecError(f"inline JSON is invalid: {error}") from None
    path = Path(text).expanduser()
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long, or a NUL in it
        exists = False
    if not exists:
        raise SpecError(f"{text[:80]!r} is neither 'default', inline JSON ({{...}}), nor an existing .json/.yaml file")
    content = read_spec_file(path, MAX_SPEC_BYTES)
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return load_yaml(content), str(path)
        except yaml.YAMLError as error:
            raise SpecError(f"{path}: invalid YAML ({str(error).splitlines()[0]})") from None
    try:
        return load_json(content), str(path)
    except json.JSONDecodeError as error:
        raise SpecError(f"{path}: invalid JSON ({error})") from None


def _string_list(raw: dict, field: str) -> list[str]:
    value = raw.get(field, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SpecError(f"{field}: must be a list of strings")
    return value


def _devices(raw: dict) -> tuple[DeviceSpec, ...]:
    value = raw.get("devices")
    if not isinstance(value, list) or not value:
        raise SpecError("devices: must be a non-empty list of {name, integrated, memory}")
    if len(value) > MAX_DEVICES:
        raise SpecError(f"devices: {len(value)} devices, at most {MAX_DEVICES}")
    devices = []
    for index, item in enumerate(value):
        field = f"devices[{index}]"
        if not isinstance(item, dict):
            raise SpecError(f"{field}: must be a mapping with name, integrated and memory")
        unknown = sorted(set(item) - set(DEVICE_FIELDS))
        if unknown:
            raise SpecError(f"{field}: unknown field {unknown[0]!r} (known: {', '.join(DEVICE_FIELDS)})")
        name = check_name(item.get("name"), f"{field}.name")
        integrated = item.get("integrated", False)
        if not isinstance(integrated, bool):
            raise SpecError(f"{field}.integrated: must be true or false")
        graphs = item.get("graphs", True)
        if not isinstance(graphs, bool):
            raise SpecError(f"{field}.graphs: must be true (torch.accelerator.Graph captures here) or false")
        if "memory" not in item:
            raise SpecError(f"{field}.memory: missing (bytes, or a size such as 4GiB)")
        memory = parse_size(item["memory"], f"{field}.memory")
        speed = check_speed(item.get("speed", 1.0), f"{field}.speed")
        fail_after = check_fail_after(item.get("fail_after_ops"), f"{field}.fail_after_ops")
        lost_when = check_lost_when(item.get("lost_when"), f"{field}.lost_when")
        threads = check_host_threads(item.get("host_threads"), f"{field}.host_threads")
        devices.append(DeviceSpec(name, integrated, memory, graphs, speed, fail_after, lost_when, threads))
    return tuple(devices)


def _dtypes(raw: dict) -> tuple[str, ...]:
    import torch

    names = []
    for index, name in enumerate(_string_list(raw, "refused_dtypes")):
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype):
            raise SpecError(f"refused_dtypes[{index}]: {name!r} is not a torch dtype (float64, bfloat16, ...)")
        names.append(str(dtype).removeprefix("torch."))
    return tuple(dict.fromkeys(names))


def _ops(raw: dict, field: str) -> tuple[str, ...]:
    names = [check_op_name(name, f"{field}[{index}]") for index, name in enumerate(_string_list(raw, field))]
    return tuple(dict.fromkeys(names))


def _wrong(raw: dict, key: str = "wrong") -> dict[str, float]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise SpecError(f"{key}: must be a mapping of op name to scale factor")
    wrong = {}
    for name, factor in value.items():
        field = f"{key}[{described(name)}]"
        wrong[check_op_name(str(name), field)] = check_factor(factor, field)
    return wrong


def parse_spec(raw: Any, source: str = "inline") -> EmuSpec:
    if not isinstance(raw, dict):
        raise SpecError(f"the spec must be a mapping with {', '.join(FIELDS)}")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise SpecError(f"unknown field {unknown[0]!r} (known: {', '.join(FIELDS)})")
    return EmuSpec(
        devices=_devices(raw),
        refused_dtypes=_dtypes(raw),
        native=_ops(raw, "native"),
        wrong=_wrong(raw),
        abort=_ops(raw, "abort"),
        source=source,
        numerics=_numerics(raw),
        capture_refused=_ops(raw, "capture_refused"),
        replay_wrong=_wrong(raw, "replay_wrong"),
    )


def _numerics(raw: dict) -> dict[str, str]:
    try:
        return parse_numerics(raw)
    except NumericsError as error:
        raise SpecError(str(error)) from None


def load_spec(value: str) -> EmuSpec:
    """The spec named by a BRINGUP_EMU_SPEC value."""
    raw, source = _read_source(value)
    return parse_spec(raw, source)
