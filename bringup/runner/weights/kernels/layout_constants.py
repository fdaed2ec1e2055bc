"""The layout constants the host kernels are built with, gathered from the modules that own them: the panels' width
(layouts.py) and the int8 / int4 blocks' (formats/integer.py), the int4 group sizes among them. build.py passes them
as -D defines (kernels/layout_constants.h declares them, nowhere else in C++ is a value written) and, after loading a
library, compares every one with what the library reports it was built with.
"""

from __future__ import annotations

from bringup.runner.weights.formats.integer import (
    GROUP,
    INT4_GROUPS,
    INT4_SCALE_BYTES,
    INT8_OFFSET,
    INT8_SCALE_BYTES,
    KERNEL_FORMATS,
    TILE,
    WORD,
)
from bringup.runner.weights.kinds import INT4, INT8
from bringup.runner.weights.layouts import PANEL

DEFINES: dict[str, int] = {
    "BRINGUP_PANEL": PANEL,
    "BRINGUP_QGROUP": GROUP,
    "BRINGUP_QTILE": TILE,
    "BRINGUP_QWORD": WORD,
    "BRINGUP_INT8_SCALE_BYTES": INT8_SCALE_BYTES,
    "BRINGUP_INT4_SCALE_BYTES": INT4_SCALE_BYTES,
    "BRINGUP_INT8_OFFSET": INT8_OFFSET,
    "BRINGUP_FORMAT_INT8": KERNEL_FORMATS[INT8],
    "BRINGUP_FORMAT_INT4": KERNEL_FORMATS[INT4],
}
# every int4 format as X(code, group): the kernels' format dispatch and weight_group() are generated from this list
INT4_FORMATS = " ".join(f"X({KERNEL_FORMATS[kind]},{group})" for kind, group in INT4_GROUPS.items())
# each kernel format's inputs per weight scale, as the libraries must report them (bringup_weight_group)
WEIGHT_GROUPS = {KERNEL_FORMATS[INT8]: GROUP, **{KERNEL_FORMATS[kind]: group for kind, group in INT4_GROUPS.items()}}
