"""Datasheet peaks: load, validate, and match a device name. The bundled table (peaks.yaml) holds the built-in
families' devices; a backend may ship its own table in the same schema (Backend.peaks_file), searched first."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

PEAKS_PATH = Path(__file__).with_name("peaks.yaml")


class DevicePeaks(BaseModel):
    """One accelerator's datasheet peaks."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    vendor: str
    match: list[str]
    memory_bandwidth_gbps: float = Field(gt=0)
    dense_tflops: dict[str, float]
    source: str
    notes: str | None = None

    def matches(self, device_name: str) -> bool:
        return any(re.search(pattern, device_name, re.IGNORECASE) for pattern in self.match)

    def tflops_for(self, dtype: str, allow_tf32: bool = False) -> float | None:
        """Peak for a torch dtype name ('float32', 'bfloat16', 'float8_e4m3fn', ...)."""
        if dtype == "float32" and allow_tf32 and "tf32" in self.dense_tflops:
            return self.dense_tflops["tf32"]
        if dtype.startswith("float8"):
            return self.dense_tflops.get("float8")
        return self.dense_tflops.get(dtype)


class PeaksTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: str = Field(alias="schema")
    devices: list[DevicePeaks]


@lru_cache(maxsize=16)
def load_peaks(path: Path = PEAKS_PATH) -> PeaksTable:
    """A peaks table (validated): the bundled one unless another path is given."""
    return PeaksTable.model_validate(yaml.safe_load(Path(path).read_text()))


def find_peaks(device_name: str | None, table: PeaksTable | None = None,
               backend_files: tuple[Path, ...] = ()) -> DevicePeaks | None:
    """The first entry whose pattern matches the device name, in the backends' own tables and then `table`
    (default: the bundled one), or None (unknown device / CPU)."""
    if not device_name:
        return None
    tables = [load_peaks(path) for path in backend_files] + [table or load_peaks()]
    return next((entry for t in tables for entry in t.devices if entry.matches(device_name)), None)
