"""Which kind serves a quantization scheme on an accelerator, by the profile's evidence: the probe's record of the
scheme's kernel (capabilities.features.<record>) must be `supported`, naming the kernel a device kind applies, and
that kind must compute its float64 reference's product here at the plan's dtype (weights/kernels/device_check.py).
Otherwise the scheme is refused, the reason quoting the record. Nothing here reads a device's name.

int8 -> int8_pack (`_weight_int8pack_mm`); fp8 -> fp8_scaled_mm (`_scaled_mm`, per-tensor scales: the form the
record's cases verify), or fp8_scaled_mm_rowwise (per-row scales) where the `fp8_scaled_mm_rowwise` record is
supported too; int4 (groups of 32) -> int4_pack (`_weight_int4pack_mm`) or int4_pack_cpu
(`_weight_int4pack_mm_for_cpu`), whichever kernel the record names. int4's larger groups have no device kind.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bringup.profiles.schema import Profile
from bringup.runner.weights.formats import device_fp8, device_fp8_rowwise, device_int8
from bringup.runner.weights.kernels.device_check import device_kind_why_not
from bringup.runner.weights.kinds import (
    FP8,
    FP8_ROWWISE,
    FP8_SCALED_MM,
    INT4,
    INT4_KINDS,
    INT4_PACK_KERNELS,
    INT8,
    INT8_PACK,
)

# each scheme's record in capabilities.features (written by the probe's quantized checks)
RECORDS = {INT8: "int8_weight_only_matmul", **{kind: "int4_weight_only_matmul" for kind in INT4_KINDS},
           FP8: "fp8_scaled_mm"}
QUOTED = 400  # characters of a record's evidence or reason quoted in a refusal (the profile has it whole)
# each scheme's device kinds by the kernel they call
KIND_KERNELS = {INT8: {device_int8.KERNEL: INT8_PACK}, FP8: {device_fp8.KERNEL: FP8_SCALED_MM},
                INT4: {kernel: kind for kind, kernel in INT4_PACK_KERNELS.items()}}
# a scheme's finer variant, used where its own record is supported too: (record, kinds by kernel, what it is, what the
# plain kind is)
PREFERRED = {FP8: ("fp8_scaled_mm_rowwise", {device_fp8_rowwise.KERNEL: FP8_ROWWISE}, "per-row scales",
                   "per-tensor scales")}


@dataclass(frozen=True)
class KernelRecord:
    """A scheme's record in the profile, as plain data: where it is, what it says, and the kernel it names."""

    path: str  # capabilities.features.<name>
    status: str  # supported | unsupported | unknown (unknown: not in the profile)
    said: str  # its evidence or reason
    kernel: str | None
    activations: str | None

    def quoted(self) -> str:
        said = self.said if len(self.said) <= QUOTED else self.said[: QUOTED - 3] + "..."
        return f"{self.path} is {self.status} ({said})" if said else f"{self.path} is {self.status}"


@dataclass(frozen=True)
class DeviceKernel:
    """The kind serving a scheme on the device, and the row's account of why."""

    kind: str
    kernel: str
    note: str


def record_named(profile: Profile | None, name: str) -> KernelRecord:
    """The profile's record capabilities.features.<name>, as plain data."""
    path = f"capabilities.features.{name}"
    found = profile.capabilities.features.get(name) if profile and profile.capabilities else None
    if found is None:
        return KernelRecord(path, "unknown", "not in the profile: run bringup probe on this device", None, None)
    details = found.details if isinstance(found.details, dict) else {}
    said = (found.evidence or found.reason or "").strip()
    return KernelRecord(path, found.status, said, details.get("kernel"), details.get("activations"))


def kernel_record(profile: Profile | None, scheme: str) -> KernelRecord:
    return record_named(profile, RECORDS[scheme])


def _served(scheme: str, record: KernelRecord, kinds: dict[str, str] | None, device: torch.device,
            dtype: torch.dtype) -> tuple[DeviceKernel | None, str]:
    """The kind `record` proves for `scheme` on `device` (its kernel one of `kinds`, its check passing), or why not."""
    if record.status != "supported":
        return None, f"{record.quoted()}, so no {scheme} kernel is verified on {device}"
    if kinds is None:
        return None, (f"{record.path} is supported ({record.kernel}), but the runner has no {scheme} weight kind off "
                      f"the host: the device's int4 kinds hold groups of 32 (--quantization int4)")
    if record.kernel not in kinds:
        several = len(kinds) > 1
        return None, (f"{record.path} is supported by {record.kernel}, not by {' or '.join(kinds)}, the "
                      f"{'kernels the' if several else 'kernel the'} {scheme} device "
                      f"{'kinds call' if several else 'kind calls'}")
    kernel = record.kernel
    kind = kinds[kernel]
    why = device_kind_why_not(kind, device, dtype)
    if why:
        return None, f"{record.path} is supported ({kernel}), but the {kind} weights' check on {device} failed: {why}"
    dtypes = " and ".join(dict.fromkeys(("float32", str(dtype).removeprefix("torch."))))
    note = (f"torch's {kernel} ({kind} weights): {record.path} is supported ({record.said}); the {kind} weights "
            f"matched their float64 reference on a check here at {dtypes}")
    return DeviceKernel(kind, kernel, note), ""


def device_kernel(scheme: str, device: torch.device, profile: Profile | None, dtype: torch.dtype
                  ) -> tuple[DeviceKernel | None, str]:
    """(the kind serving `scheme` on `device`, "") or (None, why not, quoting the record). A scheme with a finer
    variant (PREFERRED: fp8's per-row scales) takes it where its own record and check pass too, and says which."""
    found, why = _served(scheme, kernel_record(profile, scheme), KIND_KERNELS.get(scheme), device, dtype)
    if found is None or scheme not in PREFERRED:
        return found, why
    record, kinds, finer, plain = PREFERRED[scheme]
    better, not_why = _served(scheme, record_named(profile, record), kinds, device, dtype)
    if better:
        return DeviceKernel(better.kind, better.kernel, f"{finer}: {better.note}"), ""
    return DeviceKernel(found.kind, found.kernel, f"{plain}: {found.note}; not {finer}, as {not_why}"), ""
