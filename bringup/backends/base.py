"""The backend contract: what every device family must answer. Queries are pure and never raise."""

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any

import torch


@dataclass
class DeviceInfo:
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
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def is_accelerator(self) -> bool:
        return self.backend != "cpu"


class Backend(ABC):
    """One device family. Subclasses answer from torch and the OS without side effects."""

    family: str
    torch_device_type: str
    visibility_variable: str | None = None

    @abstractmethod
    def availability(self) -> tuple[bool, str]:
        """(usable, reason when not usable). Never raises."""

    @abstractmethod
    def device_count(self) -> int: ...

    @abstractmethod
    def device_info(self, index: int) -> DeviceInfo: ...

    @abstractmethod
    def memory(self, index: int) -> tuple[int | None, int | None]:
        """(total, free) in bytes; None where the family cannot tell."""

    @abstractmethod
    def synchronize(self, device: torch.device) -> None: ...

    def graph_api(self) -> str | None:
        """Name of the family's graph-capture API, or None when it has none."""
        return None

    def device_string(self, index: int) -> str:
        return f"{self.torch_device_type}:{index}"

    def devices(self) -> list[DeviceInfo]:
        usable, _ = self.availability()
        if not usable:
            return []
        return [self.device_info(i) for i in range(self.device_count())]


