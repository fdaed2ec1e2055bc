// A device's speed from the spec, and the guard that paces one op to it (speed.cpp).
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace bringup_emu {

void configure_speeds(const std::vector<double>& speeds);
double device_speed(c10::DeviceIndex device);
// {paced ops, their host time, the time waited after them} on `device`, in ns since the process started
std::array<int64_t, 3> pacing_totals(c10::DeviceIndex device);

// Times the op it lives through; on a device slower than the host, sleeps the difference when it ends.
class PacedOp {
 public:
  explicit PacedOp(std::optional<c10::DeviceIndex> device);
  ~PacedOp();
  PacedOp(const PacedOp&) = delete;
  PacedOp& operator=(const PacedOp&) = delete;

 private:
  c10::DeviceIndex device_;
  double slowdown_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace bringup_emu
