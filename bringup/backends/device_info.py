"""The one device record: what a backend reports about a device and what a profile's `device` section holds.

Torch-free, so reading a profile never imports torch."""

from typing import Any

from pydantic import BaseModel, ConfigDict


class DeviceInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str
    backend: str
    name: str
    vendor: str | None = None
    arch: str | None = None
    pci_bus_id: str | None = None
    integrated: bool | None = None
    uuid: str | None = None
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    extra: dict[str, Any] = {}

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @property
    def is_accelerator(self) -> bool:
        return self.backend != "cpu"
