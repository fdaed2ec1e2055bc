"""The backend contract: everything the tool needs to know about one device family, as data and methods.

A backend is one class. Besides answering for torch's devices (pure queries that never raise), it declares
what the OS scan, reconcile, device selection, the environment report, the collectives stage and the bench's
datasheet lookup read about its family, so none of them keeps a per-vendor table of its own.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bringup.backends.device_info import DeviceInfo

__all__ = ["AttentionFn", "Backend", "DeviceInfo", "Hardware", "LseAttentionFn", "SmiTool"]

# (q [kvH, B, G*Q, hd], k [kvH, B, L, hd], v [kvH, B, L, hd], boolean mask [G*Q, L] or [B, G*Q, L] or None
# (True = attend), scale, softcap or None) -> [kvH, B, G*Q, hd]: the runner's attention signature
AttentionFn = Callable[..., torch.Tensor]
# (q [B, H, n, hd], k [B, H, L, hd], v [B, H, L, hd], is_causal, scale) -> (out [B, H, n, hd], the float32
# log-sum-exp of each query row's scaled scores [B, H, n]); is_causal aligns the diagonal to the top left (n == L here)
LseAttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool, float], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Hardware:
    """One kind of physical device the family drives, as the OS shows it (PCI vendor, driver, /dev nodes)."""

    name: str                                       # what a matching PCI device is reported as, e.g. "rocm"
    pci_vendors: Mapping[str, str] = field(default_factory=dict)  # PCI vendor id -> vendor name
    node_group: str | None = None                   # the scan lists the driver's /dev nodes under this name
    node_patterns: tuple[str, ...] = ()             # globs below the system root, e.g. "dev/kfd"
    visibility_variable: str | None = None          # hides these devices from torch when set


@dataclass(frozen=True)
class SmiTool:
    """A vendor command-line tool whose output the environment report keeps (the matching lines)."""

    name: str
    arguments: tuple[str, ...]
    keep: str  # regular expression: the output lines worth keeping


def device_count_text(count: int) -> str:
    return f"yes ({count} device{'s' if count != 1 else ''})"


class Backend(ABC):
    """One device family. Subclasses answer from torch and the OS without side effects."""

    family: str
    torch_device_type: str
    visibility_variable: str | None = None          # the variable that hides this build's devices, if any

    # --- what the rest of the tool reads about the family (data; override in the subclass) ---
    hardware: tuple[Hardware, ...] = ()
    visibility_variables: tuple[str, ...] = ()      # every variable that decides which devices torch sees
    order_variables: tuple[str, ...] = ()           # variables that decide how torch numbers them
    environment_prefixes: tuple[str, ...] = ()      # variables recorded in the profile's environment
    smi_tools: tuple[SmiTool, ...] = ()
    driver_files: Mapping[str, str] = {}            # file below the system root -> fact name (driver_<name>)
    kernel_modules: tuple[str, ...] = ()            # kernel modules reported as loaded or not
    packages: tuple[str, ...] = ()                  # Python distributions whose versions the report names
    collective_libraries: Mapping[str, tuple[str, str]] = {}  # device family -> (torch.distributed backend, what)
    peaks_file: Path | None = None                  # datasheet peaks (bringup.peaks/v1 YAML) for its devices
    # probe check id (e.g. "dtypes.float8_e4m3fn") or "ops.<op>" -> why the family has no such thing; the probe
    # records these and the verdict calls such a check (and the op cases in such a dtype, attention backend or op)
    # `skip` (not applicable) when unsupported, instead of a warning. A check that passes anyway still passes.
    not_applicable: Mapping[str, str] = {}

    def present(self) -> bool:
        """Whether this torch process has the family at all (an out-of-tree extension may not be imported).
        Absent families are not listed as torch families, yet the OS scan still reads their hardware."""
        return True

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

    def memory_source(self, index: int) -> str | None:
        """The API `memory` read (e.g. torch.cuda.mem_get_info), for evidence; None where it does not say."""
        return None

    @abstractmethod
    def synchronize(self, device: torch.device) -> None: ...

    def build_support(self) -> dict[str, tuple[bool, str]]:
        """For each of its `hardware` names: does this torch build contain the backend (and if not, why)?"""
        return {}

    def availability_facts(self) -> dict[str, str]:
        """`<family>_available: yes (N devices) | not built | no (why)` for the environment report."""
        built, _ = self.build_support().get(self.family, (True, ""))
        if not built:
            return {f"{self.family}_available": "not built"}
        usable, why = self.availability()
        return {f"{self.family}_available": device_count_text(self.device_count()) if usable else f"no ({why})"}

    def integrated_guess(self, vendor_id: str, class_code: str, address: str) -> bool | None:
        """Whether an OS-listed device of this family is integrated, where the PCI facts alone tell."""
        return None

    def order_warnings(self, devices: list[DeviceInfo], env: Mapping[str, str]) -> list[str]:
        """Warnings where torch's numbering of this family's devices may not follow PCI bus order."""
        return []

    def graph_api(self) -> str | None:
        """Name of the family's graph-capture API, or None when it has none."""
        return None

    def capture_graph(self, device: torch.device, step: Callable[[], None]) -> Callable[[], None] | None:
        """Run `step` to warm up, capture it into the family's graph, and return the replay; None where
        bringup has no executed capture for the family."""
        return None

    def peer_access(self, index: int, other: int) -> bool | None:
        """Whether device `index` reads device `other`'s memory directly; None where the family cannot tell."""
        return None

    def attention_implementations(self) -> dict[str, AttentionFn]:
        """Extra attention implementations for this device type, by the name the profile records them under.
        The probe verifies each against a float64 reference; the plan may choose one only when verified."""
        return {}

    def attention_with_lse(self) -> LseAttentionFn | None:
        """This device type's fused attention that also returns each query row's log-sum-exp, so attention over two
        disjoint sets of keys merges exactly (a prompt's cached context, unmasked, and its own keys, causal): the
        kernel the SDPA backend `attention_with_lse_backend` names runs. None: not offered (a prompt with a cached
        context takes the masked path). The runner checks it against float64 before it serves."""
        return None

    attention_with_lse_backend: str | None = None  # the SDPA backend (profile name) whose kernel that is

    def device_string(self, index: int) -> str:
        return f"{self.torch_device_type}:{index}"

    def devices(self) -> list[DeviceInfo]:
        usable, _ = self.availability()
        if not usable:
            return []
        return [self.device_info(i) for i in range(self.device_count())]
