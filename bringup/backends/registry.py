"""Every registered device family, and lookups by device.

Backends register through the `bringup.backends` entry-point group: `name = "module:BackendClass"`. The
built-in ones are declared there in bringup's own pyproject.toml; where the installed bringup distribution
does not declare one (an install made before that family was added, or a source tree on PYTHONPATH), it comes
from BUILTIN below instead, so each is found once either way, and the installed declaration wins where both
name it.
"""

from functools import lru_cache
from importlib import import_module, metadata
from pathlib import Path

import torch

from bringup.backends.base import AttentionFn, Backend, DeviceInfo
from bringup.log import get_logger

log = get_logger("backends")

ENTRY_POINT_GROUP = "bringup.backends"
DISTRIBUTION = "bringup"
# the built-in families in listing order (automatic selection takes the first discrete accelerator)
BUILTIN = {
    "cuda": "bringup.backends.cuda:CudaBackend",
    "xpu": "bringup.backends.xpu:XpuBackend",
    "mps": "bringup.backends.mps:MpsBackend",
    "npu": "bringup.backends.ascend:AscendBackend",
    "hpu": "bringup.backends.habana:HabanaBackend",
    "emu": "bringup.backends.emu:EmuBackend",
    "privateuse1": "bringup.backends.privateuse1:PrivateUse1Backend",
    "cpu": "bringup.backends.cpu:CpuBackend",
}
HOST = "cpu"  # listed last: every accelerator, plugins included, comes before the host
# the catch-all for a renamed PrivateUse1 device: after the plugins, so a plugin that declares that family wins
GENERIC = "privateuse1"


def _load(target: str) -> type[Backend]:
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def _is_bringup(entry: metadata.EntryPoint) -> bool:
    dist = getattr(entry, "dist", None)
    return dist is not None and (dist.metadata["Name"] or "").lower() == DISTRIBUTION


def declared() -> dict[str, str]:
    """name -> "module:Class" for every registered backend: built-ins in BUILTIN's order, then plugins, then the
    generic PrivateUse1 backend and the host."""
    entries = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    own = {e.name: e.value for e in entries if _is_bringup(e)}
    builtin = BUILTIN | own
    ordered = {name: builtin[name] for name in BUILTIN if name in builtin}
    ordered |= {name: target for name, target in builtin.items() if name not in ordered}
    plugins = {e.name: e.value for e in entries if not _is_bringup(e) and e.name not in ordered}
    for entry in entries:
        if not _is_bringup(entry) and entry.name in ordered:
            log.warning("backend %r (%s) is left out: a built-in family has that name", entry.name, entry.value)
    tail = {name: ordered.pop(name) for name in (GENERIC, HOST) if name in ordered}
    return ordered | plugins | tail


@lru_cache(maxsize=1)
def backend_classes() -> tuple[type[Backend], ...]:
    """Every registered backend class. A plugin that fails to load is logged and left out; it never stops the
    built-in ones."""
    classes = []
    for name, target in declared().items():
        try:
            classes.append(_load(target))
        except Exception as exc:
            log.warning("backend %r (%s) could not be loaded and is left out: %s", name, target, exc)
    return tuple(classes)


def registered() -> list[Backend]:
    """One instance of every registered backend, present in this process or not (the OS scan reads all)."""
    return [cls() for cls in backend_classes()]


def _present(backend: Backend) -> bool:
    try:
        return bool(backend.present())
    except Exception as exc:  # a plugin's bug must not hide the other families
        log.warning("backend %r is left out: its present() raised %s: %s", backend.family, type(exc).__name__, exc)
        return False


def all_backends() -> list[Backend]:
    """The families this torch process has, one backend each, in listing order."""
    found: dict[str, Backend] = {}
    for backend in registered():
        if backend.family not in found and _present(backend):
            found[backend.family] = backend
    return list(found.values())


def backend_for(device: torch.device | str) -> Backend:
    """The backend of a torch device type: the family named as the type, else the first that runs on it."""
    device_type = torch.device(device).type
    backends = [b for b in all_backends() if b.torch_device_type == device_type]
    if not backends:
        raise KeyError(f"no bringup backend handles device type {device_type!r}")
    return next((b for b in backends if b.family == device_type), backends[0])


def attention_implementations(device_type: str) -> dict[str, AttentionFn]:
    """Every extra attention implementation the backends running on `device_type` supply, by name."""
    found: dict[str, AttentionFn] = {}
    for backend in all_backends():
        if backend.torch_device_type == device_type:
            found |= {k: v for k, v in backend.attention_implementations().items() if k not in found}
    return found


def peaks_files() -> tuple[Path, ...]:
    """The datasheet-peak tables the present backends ship (Backend.peaks_file)."""
    return tuple(b.peaks_file for b in all_backends() if b.peaks_file is not None)


def synchronize(device: torch.device | str) -> None:
    dev = torch.device(device)
    backend_for(dev).synchronize(dev)


def device_info(device: torch.device | str) -> DeviceInfo:
    dev = torch.device(device)
    return backend_for(dev).device_info(dev.index or 0)
