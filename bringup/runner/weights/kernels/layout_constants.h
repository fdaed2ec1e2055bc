// The weight layouts' constants, as the build passes them: -D defines from the Python modules that own them
// (kernels/layout_constants.py gathers them). No value is written here, so the kernels and the Python that lays the
// weights out cannot disagree; a build without them stops here. Every library exports them back by name
// (bringup_layout_constant), and the loader compares each with what it passed before the library is used.
#pragma once
#include <cstdint>
#include <cstring>

#if !defined(BRINGUP_PANEL) || !defined(BRINGUP_QGROUP) || !defined(BRINGUP_QTILE) || !defined(BRINGUP_QWORD) || \
    !defined(BRINGUP_INT8_SCALE_BYTES) || !defined(BRINGUP_INT4_SCALE_BYTES) || !defined(BRINGUP_INT8_OFFSET) ||  \
    !defined(BRINGUP_FORMAT_INT8) || !defined(BRINGUP_FORMAT_INT4) || !defined(BRINGUP_INT4_FORMATS)
#error "build with the layout constants of bringup/runner/weights/kernels/layout_constants.py (-DBRINGUP_...)"
#endif

static const int64_t PANEL = BRINGUP_PANEL;  // output columns per panel
static const int64_t QGROUP = BRINGUP_QGROUP, QTILE = BRINGUP_QTILE, QWORD = BRINGUP_QWORD;
static const int64_t INT8_SCALE_BYTES = BRINGUP_INT8_SCALE_BYTES, INT4_SCALE_BYTES = BRINGUP_INT4_SCALE_BYTES;
// int8 codes are stored as q + 128: the kernels undo it by flipping the sign bit (xor 0x80), which only 128 does
static_assert(BRINGUP_INT8_OFFSET == 128, "the int8 kernels flip the sign bit to undo the stored offset");
enum QuantizedFormat { FORMAT_INT8 = BRINGUP_FORMAT_INT8, FORMAT_INT4 = BRINGUP_FORMAT_INT4 };
// BRINGUP_INT4_FORMATS lists every int4 format as X(code, group): one entry per int4 kind, FORMAT_INT4's first

// the input features one weight scale covers: QGROUP for int8, an int4 format's group; -1 for no such format
static constexpr int64_t weight_group(int format) {
#define X(code, group) \
  if (format == code) return group;
  BRINGUP_INT4_FORMATS
#undef X
  return format == FORMAT_INT8 ? QGROUP : -1;
}

#define BRINGUP_LAYOUT_ENTRY(name) {#name, int64_t(name)}
struct LayoutConstant {
  const char* name;
  int64_t value;
};
static const LayoutConstant LAYOUT_CONSTANTS[] = {
    BRINGUP_LAYOUT_ENTRY(BRINGUP_PANEL),           BRINGUP_LAYOUT_ENTRY(BRINGUP_QGROUP),
    BRINGUP_LAYOUT_ENTRY(BRINGUP_QTILE),           BRINGUP_LAYOUT_ENTRY(BRINGUP_QWORD),
    BRINGUP_LAYOUT_ENTRY(BRINGUP_INT8_SCALE_BYTES), BRINGUP_LAYOUT_ENTRY(BRINGUP_INT4_SCALE_BYTES),
    BRINGUP_LAYOUT_ENTRY(BRINGUP_INT8_OFFSET),     BRINGUP_LAYOUT_ENTRY(BRINGUP_FORMAT_INT8),
    BRINGUP_LAYOUT_ENTRY(BRINGUP_FORMAT_INT4),
};

// the value this library was built with for the define `name`, or -1 for a name it does not know
extern "C" int64_t bringup_layout_constant(const char* name) {
  for (const LayoutConstant& c : LAYOUT_CONSTANTS)
    if (std::strcmp(c.name, name) == 0) return c.value;
  return -1;
}

// the inputs per weight scale this library was built with for format code `format` (-1: not a format it knows)
extern "C" int64_t bringup_weight_group(int64_t format) { return weight_group(int(format)); }
