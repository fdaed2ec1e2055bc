"""Out-of-tree backends registered under PrivateUse1 by their own name (a family with no backend of its own)."""

from collections.abc import Callable

import torch

from bringup.backends.module_backend import ModuleBackend


def registered_name() -> str | None:
    """The name an extension gave PrivateUse1, or None when nothing renamed it."""
    try:
        name = torch._C._get_privateuse1_backend_name()
    except Exception:
        return None
    return None if name in ("privateuse1", "privateuseone") else name


class PrivateUse1Backend(ModuleBackend):
    """Whatever extension renamed PrivateUse1, driven through torch.<name>'s usual device API. A family that
    declares its own facts (ascend.py) subclasses this with its name fixed."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or registered_name() or "privateuse1"
        self.family = self.name
        self.torch_device_type = self.name
        self.module_name = self.name

    def present(self) -> bool:
        return registered_name() == self.name

    def build_missing_reason(self) -> str:
        if self.name == "privateuse1":
            return "no out-of-tree backend has registered PrivateUse1 in this process (import its extension)"
        return f"backend {self.name!r} is registered but torch.{self.name} is missing"

    def graph_api(self) -> str | None:
        has_graph = getattr(getattr(torch, "accelerator", None), "Graph", None) is not None
        return "torch.accelerator.Graph" if has_graph and self.is_current_accelerator() else None

    def capture_graph(self, device: torch.device, step: Callable[[], None]) -> Callable[[], None] | None:
        """torch's device-generic graph (torch 2.10 and later): warm up and capture on a side stream of `device`,
        made the current device first (a graph captures on the current device; entering a stream need not switch)."""
        with torch.accelerator.device_index(device.index), torch.Stream(device):
            for _ in range(2):
                step()
            graph = torch.accelerator.Graph()
            with graph:
                step()
        return graph.replay
