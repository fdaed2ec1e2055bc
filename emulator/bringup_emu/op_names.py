"""Op names in a spec: aten ops written `name` (every overload) or `name.overload`, checked against torch.

An op is only worth naming when it can reach the device's boxed kernel: ops torch decomposes first (a Composite
kernel) and the device's own kernels never do, so naming one is an error rather than a rule that silently does
nothing.
"""

from __future__ import annotations

# the ops the C++ extension implements itself (kernels.cpp own_kernel_names; a test keeps the two equal)
OWN_KERNELS = frozenset({
    "empty.memory_format", "empty_strided.default", "_copy_from.default", "_copy_from_and_resize.default",
    "as_strided.default", "view.default", "_reshape_alias.default", "resize_.default",
    "set_.source_Storage_storage_offset", "set_.source_Storage", "set_.source_Tensor", "set_.default",
    "_local_scalar_dense.default", "fill_.Scalar",
})
_COMPOSITE_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


def _qualified(bare: str, overload: str) -> str:
    return f"aten::{bare}" if overload == "default" else f"aten::{bare}.{overload}"


def reaches_device(bare: str, overload: str) -> bool:
    """Whether aten::bare.overload, called on emu tensors, reaches the emulator's boxed kernel."""
    import torch

    if f"{bare}.{overload}" in OWN_KERNELS:
        return False
    name = _qualified(bare, overload)
    try:
        return not any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _COMPOSITE_KEYS)
    except RuntimeError:  # an overload TorchScript knows that the dispatcher does not (hacked_twin)
        return False


def _overloads(bare: str) -> list[str] | None:
    import torch

    try:
        return list(getattr(torch.ops.aten, bare).overloads())
    except (AttributeError, RuntimeError):
        return None


def check_op_name(name: str, field: str) -> str:
    """`bare` or `bare.overload` for a valid name; SpecError naming `field` otherwise."""
    from bringup_emu.spec import SpecError

    text = name.strip()
    for prefix in ("aten::", "aten."):
        text = text.removeprefix(prefix)
    bare, _, overload = text.partition(".")
    overloads = _overloads(bare) if bare else None
    if overloads is None:
        raise SpecError(f"{field}: {name!r} is not an aten operator")
    if overload and overload not in overloads:
        raise SpecError(f"{field}: aten::{bare} has no overload {overload!r} (it has {', '.join(sorted(overloads))})")
    candidates = [overload] if overload else overloads
    if not any(reaches_device(bare, candidate) for candidate in candidates):
        what = f"aten::{bare}" + (f".{overload}" if overload else "")
        if overload and f"{bare}.{overload}" in OWN_KERNELS:
            raise SpecError(f"{field}: {what} is one of the emulator's own kernels; it always runs natively")
        suggest_out = overload and "out" in overloads and reaches_device(bare, "out")
        hint = f"; name {bare}.out or {bare}, which it becomes" if suggest_out else ""
        raise SpecError(
            f"{field}: {what} never reaches a device's kernels (torch runs it as other ops first){hint}"
        )
    return f"{bare}.{overload}" if overload else bare
