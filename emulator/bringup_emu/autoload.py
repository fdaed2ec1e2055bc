"""The `torch.backends` entry point: torch calls autoload() at the end of `import torch`.

Dormant unless BRINGUP_EMU_SPEC is set, so an ordinary `import torch` pays only for reading one variable. With it
set, the spec is parsed, the extension built if needed (once, in a child process) and loaded, and PrivateUse1
becomes the `emu` device. A bad spec or a failed build ends the process at `import torch` with one line on stderr
and exit code 2: the user asked for a device that cannot be given, and running on without it would silently
test the CPU instead.
"""

from __future__ import annotations

import os
import sys


def autoload() -> None:
    value = os.environ.get("BRINGUP_EMU_SPEC")
    if not value:
        return
    try:
        from bringup_emu.build import BuildError
        from bringup_emu.spec import SpecError
    except ImportError as error:  # the spec checks are bringup's (bringup/number_rule.py, bringup/bounded_file.py)
        _exit(f"BRINGUP_EMU_SPEC is set but the emulator cannot read it ({error}); install bringup beside "
              "bringup-emu, or unset BRINGUP_EMU_SPEC")
    try:
        activate(value)
    except SpecError as error:
        _exit(f"BRINGUP_EMU_SPEC: {error} (see docs/emulator.md, or unset BRINGUP_EMU_SPEC)")
    except BuildError as error:
        _exit(
            f"BRINGUP_EMU_SPEC is set but the emulator extension is unavailable: {error}; run "
            "`python -m bringup_emu build` to see the compiler's output, or unset BRINGUP_EMU_SPEC"
        )
    except (TypeError, ValueError, OverflowError, OSError, RuntimeError) as error:
        first = (str(error).strip().splitlines() or [""])[0][:200]
        _exit(f"BRINGUP_EMU_SPEC: the emulated device could not be configured ({type(error).__name__}: {first}); "
              "check the spec against docs/emulator.md, or unset BRINGUP_EMU_SPEC")


def _exit(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def activate(value: str) -> None:
    """Parse the spec, load the extension and register the `emu` device in this process."""
    import torch

    from bringup_emu import device, numerics, runtime
    from bringup_emu.loader import load_extension
    from bringup_emu.spec import load_spec

    if runtime.is_active():
        return
    spec = load_spec(value)
    extension = load_extension()
    extension.configure(
        [d.memory_bytes for d in spec.devices], list(spec.refused_dtypes), list(spec.native), list(spec.abort),
        dict(spec.wrong),
    )
    extension.configure_graphs([d.graphs for d in spec.devices], list(spec.capture_refused), dict(spec.replay_wrong))
    extension.configure_speeds([d.speed for d in spec.devices])
    extension.configure_host_threads([d.host_threads or 0 for d in spec.devices])
    extension.configure_failures([-1 if d.fail_after_ops is None else d.fail_after_ops for d in spec.devices],
                                 [d.lost_when or "" for d in spec.devices])
    runtime.activate(extension, spec)
    numerics.install(spec.numerics)
    torch.utils.rename_privateuse1_backend("emu")
    extension.register_graphs()  # keyed by the device type's name, which the rename just set
    torch._register_device_module("emu", device)
    torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
