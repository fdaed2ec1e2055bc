"""BRINGUP_EMU_SPEC: `default`, a path to a JSON or YAML file, or inline JSON, parsed and checked in one place.

Every problem raises SpecError with one line naming the field (`devices[1].memory: ...`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup_emu.default_spec import DEFAULT_SPEC
from bringup_emu.numerics import NumericsError, parse_numerics
from bringup_emu.op_names import check_op_name

SPEC_ENV = "BRINGUP_EMU_SPEC"
MAX_DEVICES = 16
MAX_SPEC_BYTES = 1 << 20
FIELDS = ("devices", "refused_dtypes", "native", "wrong", "abort", "numerics")
DEVICE_FIELDS = ("name", "integrated", "memory")
_UNITS = {
    "": 1, "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


class SpecError(ValueError):
    """An invalid spec; the message is one line that names the field."""


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    integrated: bool
    memory_bytes: int


@dataclass(frozen=True)
class EmuSpec:
    devices: tuple[DeviceSpec, ...]
    refused_dtypes: tuple[str, ...]
    native: tuple[str, ...]
    wrong: dict[str, float]
    abort: tuple[str, ...]
    source: str
    numerics: dict[str, str] = dataclasses.field(default_factory=dict)  # op -> legal or biased variant (numerics.py)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "devices": [
                {"name": d.name, "integrated": d.integrated, "memory": d.memory_bytes} for d in self.devices
            ],
            "refused_dtypes": list(self.refused_dtypes),
            "native": list(self.native),
            "wrong": dict(self.wrong),
            "abort": list(self.abort),
            "numerics": dict(self.numerics),
        }


def parse_size(value: Any, field: str) -> int:
    """Bytes from an int or a string such as "512MiB", "8GiB", "1.5GB"."""
    if isinstance(value, bool):
        raise SpecError(f"{field}: {value!r} is not a size")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (match := _SIZE.match(value)) and match[2].lower() in _UNITS:
        size = int(float(match[1]) * _UNITS[match[2].lower()])
    else:
        raise SpecError(
            f"{field}: {value!r} is not a size; write bytes or a number with a unit (512MiB, 8GiB, 2GB)"
        )
    if size <= 0:
        raise SpecError(f"{field}: {value!r} must be more than 0 bytes")
    return size


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
            return json.loads(text), "inline JSON"
        except json.JSONDecodeError as error:
            raise SpecError(f"inline JSON is invalid: {error}") from None
    path = Path(text).expanduser()
    if not path.is_file():
        raise SpecError(f"{text!r} is neither 'default', inline JSON ({{...}}), nor an existing .json/.yaml file")
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise SpecError(f"{path}: {path.stat().st_size} bytes, a spec is at most {MAX_SPEC_BYTES}")
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: cannot be read ({error})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(content), str(path)
        except yaml.YAMLError as error:
            raise SpecError(f"{path}: invalid YAML ({str(error).splitlines()[0]})") from None
    try:
        return json.loads(content), str(path)
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
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise SpecError(f"{field}.name: must be a non-empty string")
        integrated = item.get("integrated", False)
        if not isinstance(integrated, bool):
            raise SpecError(f"{field}.integrated: must be true or false")
        if "memory" not in item:
            raise SpecError(f"{field}.memory: missing (bytes, or a size such as 4GiB)")
        devices.append(DeviceSpec(name.strip(), integrated, parse_size(item["memory"], f"{field}.memory")))
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


def _wrong(raw: dict) -> dict[str, float]:
    value = raw.get("wrong", {})
    if not isinstance(value, dict):
        raise SpecError("wrong: must be a mapping of op name to scale factor")
    wrong = {}
    for name, factor in value.items():
        field = f"wrong[{name!r}]"
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor):
            raise SpecError(f"{field}: {factor!r} is not a finite number")
        wrong[check_op_name(str(name), field)] = float(factor)
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
