// A device's speed (a fraction of the host's, from the spec): each op on a slower device takes 1/speed of its host
// time. The emulator waits out the difference by sleeping, so a slow device leaves the CPU to other threads and
// processes; the last stretch of a wait, shorter than a sleep's overshoot, spins on the clock, so every op (small ones
// too) ends on time and a minimum over repetitions measures the device's speed.
// A device given host threads runs each of its ops on that many of the host's OpenMP threads (the calling thread's
// setting, put back when the op ends), so two devices given a core each compute side by side as separate devices
// do, rather than slowing each other on the same cores (and each wait stretching the slowdown).
// An op that runs on one host thread is timed by that thread's CPU time, not the wall clock: a device's op lasts its
// computation over the speed, and a preemption of the host thread (another device's thread, the server's own, a
// neighbour) adds its own length, not that length over the speed. An op on several threads is timed by the wall
// clock (the calling thread's CPU time holds only its share).
#include "emu_speed.h"

#include "emu.h"
#include "emu_fault.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace bringup_emu {
namespace {

using SpeedClock = std::chrono::steady_clock;
// a sleep overshoots by up to about this much: the last stretch of a wait spins on the clock instead (without
// yielding: a yield to a thread sharing the core hands it the rest of its time slice, milliseconds, at every op)
constexpr auto kSleepSlack = std::chrono::microseconds(100);

std::vector<double> g_speeds;
std::vector<int> g_host_threads;  // per device: OpenMP threads its ops run on (0: the calling thread's setting)
thread_local int t_paced_depth = 0;  // paced ops open on this thread: only the outermost waits
std::mutex g_totals_mutex;
// per device: paced ops, their host ns, the ns they lasted beyond it (start to the wait's end, less the host ns)
std::vector<std::array<int64_t, 3>> g_totals;

double speed_of(c10::DeviceIndex device) {
  if (device < 0 || static_cast<size_t>(device) >= g_speeds.size()) {
    return 1.0;
  }
  return g_speeds[static_cast<size_t>(device)];
}

int host_threads_of(c10::DeviceIndex device) {
  if (device < 0 || static_cast<size_t>(device) >= g_host_threads.size()) {
    return 0;
  }
  return g_host_threads[static_cast<size_t>(device)];
}

// torch's own OpenMP runtime (already loaded), looked up once: the setting is per thread there
// (and MKL's thread-local count where torch carries MKL: torch.set_num_threads sets MKL's global one, which MKL
// follows over OpenMP's setting)
struct OpenMp {
  void (*set_num_threads)(int) = nullptr;
  // MKL's C entry (the lower-case name takes a pointer): returns the thread's previous local count (0: none)
  int (*mkl_set_local)(int) = nullptr;
};

const OpenMp& open_mp() {
  static const OpenMp found = [] {
    OpenMp omp;
    omp.set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    omp.mkl_set_local = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
    return omp;
  }();
  return found;
}

std::chrono::nanoseconds thread_cpu_now() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

} // namespace

void configure_host_threads(const std::vector<int>& threads) {
  for (const int count : threads) {
    TORCH_CHECK(count >= 0, "emu: a device's host threads are a count, 0 for the calling thread's setting");
  }
  TORCH_CHECK(std::all_of(threads.begin(), threads.end(), [](int c) { return c == 0; }) ||
                  open_mp().set_num_threads != nullptr,
              "emu: host_threads needs torch's OpenMP runtime, which this process has not loaded");
  g_host_threads = threads;
}

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
  } else if (const int threads = host_threads_of(device_); threads > 0) {
    restore_threads_ = at::get_num_threads();  // its first call in a thread sets torch's count: before ours
    open_mp().set_num_threads(threads);
    if (open_mp().mkl_set_local != nullptr) {
      restore_mkl_ = open_mp().mkl_set_local(threads);
    }
    one_thread_ = threads == 1;
  } else {
    one_thread_ = at::get_num_threads() == 1;
  }
  if (slowdown_ > 0.0) {
    start_ = SpeedClock::now();
    cpu_start_ = one_thread_ ? thread_cpu_now() : std::chrono::nanoseconds(0);
  }
}

PacedOp::~PacedOp() {
  --t_paced_depth;
  if (restore_threads_ > 0) {
    open_mp().set_num_threads(restore_threads_);
    if (open_mp().mkl_set_local != nullptr) {
      open_mp().mkl_set_local(restore_mkl_);
    }
  }
  if (slowdown_ <= 0.0) {
    return;
  }
  const auto end = SpeedClock::now();
  auto host = std::chrono::duration_cast<SpeedClock::duration>(end - start_);
  if (one_thread_) {
    host = std::min(host, std::chrono::duration_cast<SpeedClock::duration>(thread_cpu_now() - cpu_start_));
  }
  // the op ends its host time over the speed after it began: a stretch the thread did not run falls within that,
  // as a launch delay does on a device that computes on its own
  const auto deadline =
      std::max(end, start_ + std::chrono::duration_cast<SpeedClock::duration>(host * (1.0 + slowdown_)));
  const auto wait = deadline - end;
  if (wait > kSleepSlack) {
    std::this_thread::sleep_for(wait - kSleepSlack);
  }
  auto now = SpeedClock::now();
  while (now < deadline) {
    now = SpeedClock::now();
  }
  const auto ns = [](SpeedClock::duration d) {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  };
  std::lock_guard<std::mutex> lock(g_totals_mutex);
  auto& totals = g_totals.at(static_cast<size_t>(device_));
  totals[0] += 1;
  totals[1] += ns(host);
  totals[2] += ns((now - start_) - host);
}

} // namespace bringup_emu
