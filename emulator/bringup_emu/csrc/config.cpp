// The spec's device list and refused dtypes, set once from Python before the device is used.
#include "emu.h"

#include <mutex>

namespace bringup_emu {
namespace {

std::vector<int64_t> g_caps;
std::vector<bool> g_refused(static_cast<size_t>(c10::ScalarType::NumOptions), false);
thread_local c10::DeviceIndex t_current = 0;

c10::ScalarType dtype_named(const std::string& name) {
  for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
    const auto type = static_cast<c10::ScalarType>(i);
    const auto names = c10::getDtypeNames(type);
    if (names.first == name || (!names.second.empty() && names.second == name)) {
      return type;
    }
  }
  TORCH_CHECK(false, "emu: unknown dtype name '", name, "'");
}

} // namespace

void configure_devices(const std::vector<int64_t>& memory_caps) {
  TORCH_CHECK(!memory_caps.empty(), "emu: the spec has no devices");
  TORCH_CHECK(memory_caps.size() <= 64, "emu: at most 64 devices");
  g_caps = memory_caps;
}

void configure_refused_dtypes(const std::vector<std::string>& dtype_names) {
  std::fill(g_refused.begin(), g_refused.end(), false);
  for (const auto& name : dtype_names) {
    g_refused[static_cast<size_t>(dtype_named(name))] = true;
  }
}

c10::DeviceIndex device_count() noexcept {
  return static_cast<c10::DeviceIndex>(g_caps.size());
}

void check_device_index(c10::DeviceIndex index) {
  TORCH_CHECK(
      index >= 0 && index < device_count(),
      "emu: device index ", static_cast<int>(index), " is out of range: the spec has ",
      static_cast<int>(device_count()), " device(s)");
}

c10::DeviceIndex current_device() {
  return t_current;
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  t_current = index;
}

int64_t memory_cap(c10::DeviceIndex index) {
  check_device_index(index);
  return g_caps[static_cast<size_t>(index)];
}

bool is_refused(c10::ScalarType dtype) {
  return g_refused[static_cast<size_t>(dtype)];
}

void check_dtype_allowed(c10::ScalarType dtype) {
  if (is_refused(dtype)) {
    const auto names = c10::getDtypeNames(dtype);
    TORCH_CHECK_TYPE(
        false, "emu: ", names.first, " is not supported on emu devices (refused_dtypes in the spec)");
  }
}

} // namespace bringup_emu
