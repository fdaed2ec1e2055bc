"""Bundled datasheet peaks (peaks.yaml): load, validate, and match a device name."""

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


@lru_cache(maxsize=1)
def load_peaks(path: Path = PEAKS_PATH) -> PeaksTable:
    """The bundled table (validated)."""
    return PeaksTable.model_validate(yaml.safe_load(path.read_text()))


def find_peaks(device_name: str | None, table: PeaksTable | None = None) -> DevicePeaks | None:
    """The first entry whose pattern matches the device name, or None (unknown device / CPU)."""
    if not device_name:
        return None
    table = table or load_peaks()
    return next((entry for entry in table.devices if entry.matches(device_name)), None)
