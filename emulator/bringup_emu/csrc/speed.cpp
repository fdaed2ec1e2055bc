// A device's speed (a fraction of the host's, from the spec): each op on a slower device takes 1/speed of its host
// time. The emulator waits out the difference by sleeping, so a slow device leaves the CPU to other threads and
// processes; the last stretch of a wait, shorter than a sleep's overshoot, yields in a loop, so every op (small ones
// too) ends on time and a minimum over repetitions measures the device's speed.
#include "emu_speed.h"

#include "emu.h"
#include "emu_fault.h"

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace bringup_emu {
namespace {

using SpeedClock = std::chrono::steady_clock;
// a sleep overshoots by up to about this much: the last stretch of a wait yields in a loop instead
constexpr auto kSleepSlack = std::chrono::microseconds(100);

std::vector<double> g_speeds;
thread_local int t_paced_depth = 0;  // paced ops open on this thread: only the outermost waits
std::mutex g_totals_mutex;
std::vector<std::array<int64_t, 3>> g_totals;  // per device: paced ops, their host ns, ns waited after them

double speed_of(c10::DeviceIndex device) {
  if (device < 0 || static_cast<size_t>(device) >= g_speeds.size()) {
    return 1.0;
  }
  return g_speeds[static_cast<size_t>(device)];
}

} // namespace

void configure_speeds(const std::vector<double>& speeds) {
  for (const double speed : speeds) {
    TORCH_CHECK(speed > 0.0 && speed <= 1.0, "emu: a device speed is a fraction of the host's, in (0, 1]");
  }
  g_speeds = speeds;
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  g_totals.assign(speeds.size(), {0, 0, 0});
}

std::array<int64_t, 3> pacing_totals(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  const auto index = static_cast<size_t>(device);
  return index < g_totals.size() ? g_totals[index] : std::array<int64_t, 3>{0, 0, 0};
}

double device_speed(c10::DeviceIndex device) {
  check_device_index(device);
  return speed_of(device);
}

PacedOp::PacedOp(std::optional<c10::DeviceIndex> device)
    : device_(device.value_or(-1)), slowdown_(device.has_value() ? 1.0 / speed_of(*device) - 1.0 : 0.0) {
  count_device_op(device);  // every paced op is one op on its device: a lost device raises here, before it runs
  if (t_paced_depth++ > 0) {
    slowdown_ = 0.0;  // inside another paced op (a fallback's copies, say): the outer op's time already holds it
  }
  if (slowdown_ > 0.0) {
    start_ = SpeedClock::now();
  }
}

PacedOp::~PacedOp() {
  --t_paced_depth;
  if (slowdown_ <= 0.0) {
    return;
  }
  const auto end = SpeedClock::now();
  const auto wait = std::chrono::duration_cast<SpeedClock::duration>((end - start_) * slowdown_);
  const auto deadline = end + wait;
  if (wait > kSleepSlack) {
    std::this_thread::sleep_for(wait - kSleepSlack);
  }
  auto now = SpeedClock::now();
  while (now < deadline) {
    std::this_thread::yield();
    now = SpeedClock::now();
  }
  const auto ns = [](SpeedClock::duration d) {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  };
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  auto& totals = g_totals.at(static_cast<size_t>(device_));
  totals[0] += 1;
  totals[1] += ns(end - start_);
  totals[2] += ns(now - end);
}

} // namespace bringup_emu
