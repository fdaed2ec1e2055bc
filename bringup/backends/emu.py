"""bringup's emulated accelerator (the bringup-emu package in emulator/): an out-of-tree PrivateUse1 device named
`emu`, host memory behind it, its devices, memory caps, refused dtypes and native ops given by BRINGUP_EMU_SPEC.

The generic PrivateUse1 backend drives it through torch.emu (names, the integrated flag, memory); this family adds
only what the emulator is known to lack by construction, so the probe grades those checks `skip` rather than
warning about them, and the package the environment report names (BRINGUP_EMU_SPEC is recorded in the profile
with every BRINGUP_ variable).
"""

from bringup.backends.cpu import FP8_DTYPES
from bringup.backends.privateuse1 import PrivateUse1Backend, registered_name

HOST_KERNELS = "the emulator computes with the host's CPU kernels"


class EmuBackend(PrivateUse1Backend):
    vendor_default = "bringup (emulated)"
    packages = ("bringup-emu",)
    not_applicable = {
        **{f"dtypes.{fp8}": f"{HOST_KERNELS}, which have no FP8 arithmetic" for fp8 in FP8_DTYPES},
        "attention.sdpa_efficient": f"the memory-efficient SDPA kernel is a GPU kernel; {HOST_KERNELS}",
        "attention.sdpa_cudnn": f"cuDNN is NVIDIA's GPU library; {HOST_KERNELS}",
        "features.pinned_memory": "the emulated device's memory is host memory: the emulator has no pinned "
                                  "staging buffers (pin_memory() is refused)",
        "ops._weight_int4pack_mm": f"the byte-packed int4 kernel is the GPUs'; {HOST_KERNELS} and run "
                                   "_weight_int4pack_mm_for_cpu, verified on its own",
    }

    def __init__(self) -> None:
        super().__init__("emu")

    def build_support(self) -> dict[str, tuple[bool, str]]:
        return {"emu": (registered_name() == "emu", "the emulator is not active in this process: install "
                        "emulator/ (bringup-emu) and set BRINGUP_EMU_SPEC (docs/emulator.md)")}
