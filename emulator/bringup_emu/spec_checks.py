"""The checks a spec's untrusted values pass before the C++ extension sees them: a spec file read by bringup's one
bounded reader, JSON and YAML with no key written twice, names short and printable, sizes and factors by bringup's
number rule (bringup/number_rule.py) within what the device can be. Each failure is a SpecError naming the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bringup.bounded_file import FileRefused, read_bounded
from bringup.number_rule import NumberRefused, described, real_number, whole_number

MAX_NAME_CHARS = 256
MAX_MEMORY_BYTES = 1 << 50  # 1 PiB: more than any device's memory, and far inside the C++ side's int64
MAX_FACTOR = 1e6  # a `wrong` factor: above 0 (a wrong kernel still computes something) and at most this
MAX_HOST_THREADS = 1024
UNITS = {
    "": 1, "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", re.ASCII)


class SpecError(ValueError):
    """An invalid spec; the message is one line that names the field."""


def _named(path: Path) -> str:
    text = str(path)
    return repr(text if len(text) <= 200 and text.isprintable() else text[:200].encode("unicode_escape").decode())


def read_spec_file(path: Path, max_bytes: int) -> str:
    try:
        raw = read_bounded(path, max_bytes, f"{max_bytes:,} bytes: a spec is at most {max_bytes >> 20} MiB")
    except FileRefused as exc:
        raise SpecError(f"{_named(path)} {exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{_named(path)}: not UTF-8 (byte {exc.start})") from None


def unique_pairs(pairs: list[tuple[Any, Any]]) -> dict:
    """A JSON object's pairs as a dict; SpecError for a key written twice (JSON would keep the last silently)."""
    found: dict = {}
    for key, value in pairs:
        if key in found:
            raise SpecError(f"the key {described(key)} is written twice in one mapping; keep one")
        found[key] = value
    return found


def _json_int(text: str) -> int:
    """An integer of the JSON text, its length checked before int() sees it (past 4,300 digits int() raises)."""
    if len(text.lstrip("-")) > 4000:
        raise SpecError(f"a number of {len(text.lstrip('-')):,} digits: no field of a spec holds one that long")
    return int(text)


def load_json(text: str) -> Any:
    return json.loads(text, object_pairs_hook=unique_pairs, parse_int=_json_int)


def load_yaml(text: str) -> Any:
    """YAML safe-loaded, each mapping checked for a key written twice."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            keys = [self.construct_object(k, deep=deep) for k, _ in node.value if isinstance(k, yaml.ScalarNode)]
            unique_pairs([(key, None) for key in keys if isinstance(key, (str, int, float, bool))])
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=UniqueKeyLoader)


def check_name(value: Any, field: str) -> str:
    """A device name: a non-empty printable string of at most MAX_NAME_CHARS (no NUL, no control character)."""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{field}: must be a non-empty string")
    if len(value) > MAX_NAME_CHARS:
        raise SpecError(f"{field}: {len(value):,} characters, at most {MAX_NAME_CHARS}")
    if not value.isprintable():
        raise SpecError(f"{field}: holds a NUL or another character that is not printable; write a plain name")
    return value.strip()


def parse_size(value: Any, field: str) -> int:
    """Bytes from an int or a string such as "512MiB", "8GiB", "1.5GB": more than 0, at most MAX_MEMORY_BYTES."""
    try:
        if isinstance(value, str) and (match := _SIZE.fullmatch(value)) and match[2].lower() in UNITS:
            number = real_number(match[1], field, MAX_MEMORY_BYTES)
            size = int(number * UNITS[match[2].lower()])
        elif isinstance(value, str):
            raise SpecError(f"{field}: {described(value)} is not a size; write bytes or a number with a unit "
                            "(512MiB, 8GiB, 2GB)")
        else:
            size = whole_number(value, field, MAX_MEMORY_BYTES)
    except NumberRefused as exc:
        raise SpecError(f"{exc} (bytes, at most 1 PiB)") from None
    if size <= 0:
        raise SpecError(f"{field}: {described(value)} must be more than 0 bytes")
    if size > MAX_MEMORY_BYTES:
        raise SpecError(f"{field}: {described(value)} is more than {MAX_MEMORY_BYTES:,} bytes (1 PiB), the most a "
                        "device's memory can be")
    return size


def check_factor(value: Any, field: str) -> float:
    """A `wrong` factor: a finite number above 0 and at most MAX_FACTOR."""
    try:
        factor = real_number(value, field, MAX_FACTOR, 0.0, strings=False)
    except NumberRefused as exc:
        raise SpecError(f"{exc} (a factor above 0, at most {MAX_FACTOR:g})") from None
    if factor == 0:
        raise SpecError(f"{field}: 0 is not a factor above 0")
    return factor


def check_speed(value: Any, field: str) -> float:
    """A device's speed: a fraction of the host's, above 0 and at most 1 (a device cannot outrun its host)."""
    try:
        speed = real_number(value, field, 1.0, 0.0, strings=False)
    except NumberRefused as exc:
        raise SpecError(f"{exc} (a fraction of the host's speed, above 0 and at most 1)") from None
    if speed == 0:
        raise SpecError(f"{field}: 0 is not a speed (a fraction of the host's speed, above 0 and at most 1)")
    return speed


def check_host_threads(value: Any, field: str) -> int | None:
    """The host threads a device's ops run on: a whole number from 1 to MAX_HOST_THREADS, or absent (None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_HOST_THREADS:
        raise SpecError(f"{field}: {value!r} is not a thread count (a whole number from 1 to {MAX_HOST_THREADS}; "
                        "leave it out for as many as torch uses)")
    return value


def check_fail_after(value: Any, field: str) -> int | None:
    """A device's fail_after_ops: the ops it runs before it is lost, a whole number; absent (None) never fails."""
    if value is None:
        return None
    try:
        return whole_number(value, field, strings=False)
    except NumberRefused as exc:
        raise SpecError(f"{exc} (the ops the device runs before it is lost: 0 or more)") from None


def check_lost_when(value: Any, field: str) -> str | None:
    """A device's lost_when: the path of a file whose existence loses the device; absent (None) never."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise SpecError(f"{field}: {described(value)} is not a file path (the file whose existence loses the device)")
    return value
