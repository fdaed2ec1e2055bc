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
// per device: the host's OpenMP threads each of its ops runs on (0: the calling thread's setting)
void configure_host_threads(const std::vector<int>& threads);
double device_speed(c10::DeviceIndex device);
// {paced ops, their host time, the time they lasted beyond it} on `device`, in ns since the process started (an op
// on one host thread: that thread's CPU time)
std::array<int64_t, 3> pacing_totals(c10::DeviceIndex device);

// Times the op it lives through; on a device slower than the host, sleeps the difference when it ends. On a device
// given host threads, the op runs on that many. An op on one thread is timed by that thread's CPU time, so time the
// host spent on other threads meanwhile (a preemption) is not stretched by the speed.
class PacedOp {
 public:
  explicit PacedOp(std::optional<c10::DeviceIndex> device);
  ~PacedOp();
  PacedOp(const PacedOp&) = delete;
  PacedOp& operator=(const PacedOp&) = delete;

 private:
  c10::DeviceIndex device_;
  double slowdown_;
  int restore_threads_ = 0;  // the calling thread's OpenMP setting to put back (0: not changed)
  int restore_mkl_ = 0;  // and its MKL thread-local count (0: it had none)
  std::chrono::steady_clock::time_point start_;
  bool one_thread_ = false;  // the op runs on the calling thread alone: its time is that thread's CPU time
  std::chrono::nanoseconds cpu_start_{0};
};

} // namespace bringup_emu
