// A device that fails mid-run (fault.cpp): after the spec's fail_after_ops ops, or once its lost_when file exists,
// every op on it raises.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bringup_emu {

// per device: the ops it runs before it is lost (-1: no count), and the file whose existence loses it ("": none)
void configure_failures(const std::vector<int64_t>& fail_after_ops, const std::vector<std::string>& lost_when);
// counts one op on `device`; raises the device's error once it is lost
void count_device_op(std::optional<c10::DeviceIndex> device);
int64_t device_ops(c10::DeviceIndex device);

} // namespace bringup_emu
