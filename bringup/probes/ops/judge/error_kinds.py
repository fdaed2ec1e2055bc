"""Classify the errors a case raises: a rejection (unsupported) or a malfunction, and which break the device."""

from __future__ import annotations

import re

# Messages with which torch and vendor backends reject a dtype, an op or a kernel choice.
_UNSUPPORTED = re.compile(
    r"not implemented for|no viable backend|not have support|no support for|not supported|unsupported|"
    r"no available kernel|does not support|"
    r"could not run '|is not available|only supports|not compiled with|no kernel|not enabled|"
    # TORCH_CHECK's argument checks: a kernel refusing a dtype or a shape before it computes anything
    r"to be true, but got false|needs to be (greater|less|at least|a multiple|divisible)",
    re.IGNORECASE,
)


# Errors after which the device context is unusable: the worker is replaced after reporting them.
_STICKY = re.compile(
    r"illegal memory access|device-side assert|unspecified launch failure|misaligned address|"
    r"illegal instruction|uncorrectable ECC|device lost|hardware exception",
    re.IGNORECASE,
)


def poisons_device(message: str | None) -> bool:
    """True when an error message says the device context is broken for the rest of the process."""
    return bool(message) and bool(_STICKY.search(message or ""))


def is_unsupported_error(exc: BaseException) -> bool:
    """A rejection (dtype/op/kernel not offered) rather than a malfunction."""
    return isinstance(exc, NotImplementedError) or bool(_UNSUPPORTED.search(str(exc)))
