// A device lost mid-run, as a GPU that falls off the bus or whose driver resets. The spec says when, per device:
// after fail_after_ops ops (every boxed op, copy and replayed op: the ops PacedOp paces), or once the file
// lost_when names exists (a test or a person "pulls the card" by creating it; looked for at most once a
// millisecond). From then on every op on the device raises its error, until the process ends.
#include "emu_fault.h"

#include "emu.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <sys/stat.h>

namespace bringup_emu {
namespace {

constexpr int64_t kLookEveryNs = 1000000;  // how often lost_when's file is looked for
constexpr int kAlive = 0, kCounted = 1, kPulled = 2;  // why a device is lost

struct DeviceFault {
  int64_t fail_after = -1;
  std::string lost_when;
  std::atomic<int64_t> ops{0};
  std::atomic<int> lost{kAlive};
  std::atomic<int64_t> looked_at_ns{0};
};

std::vector<std::unique_ptr<DeviceFault>> g_faults;

DeviceFault* fault_of(c10::DeviceIndex device) {
  if (device < 0 || static_cast<size_t>(device) >= g_faults.size()) {
    return nullptr;
  }
  return g_faults[static_cast<size_t>(device)].get();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool file_appeared(DeviceFault& fault) {
  if (fault.lost_when.empty()) {
    return false;
  }
  const int64_t now = now_ns();
  int64_t looked = fault.looked_at_ns.load();
  if (now - looked < kLookEveryNs || !fault.looked_at_ns.compare_exchange_strong(looked, now)) {
    return false;
  }
  struct stat info {};
  return ::stat(fault.lost_when.c_str(), &info) == 0;
}

} // namespace

void configure_failures(const std::vector<int64_t>& fail_after_ops, const std::vector<std::string>& lost_when) {
  TORCH_CHECK(fail_after_ops.size() == lost_when.size(), "emu: one fail_after_ops and one lost_when per device");
  std::vector<std::unique_ptr<DeviceFault>> faults;
  for (size_t i = 0; i < fail_after_ops.size(); ++i) {
    TORCH_CHECK(fail_after_ops[i] >= -1, "emu: fail_after_ops is a count of ops, or -1 for never");
    faults.push_back(std::make_unique<DeviceFault>());
    faults.back()->fail_after = fail_after_ops[i];
    faults.back()->lost_when = lost_when[i];
  }
  g_faults = std::move(faults);
}

void count_device_op(std::optional<c10::DeviceIndex> device) {
  if (!device.has_value()) {
    return;
  }
  DeviceFault* fault = fault_of(*device);
  if (fault == nullptr) {
    return;
  }
  const int64_t done = fault->ops.fetch_add(1);
  if (fault->lost.load() == kAlive) {
    if (fault->fail_after >= 0 && done >= fault->fail_after) {
      fault->lost.store(kCounted);
    } else if (file_appeared(*fault)) {
      fault->lost.store(kPulled);
    }
  }
  const int why = fault->lost.load();
  if (why != kAlive) {
    const auto index = static_cast<int>(*device);
    const std::string field = "devices[" + std::to_string(index) + "]";
    TORCH_CHECK(false, "emu: device emu:", index, " is lost: it no longer answers (",
                why == kCounted ? field + ".fail_after_ops: " + std::to_string(fault->fail_after) + " ops ran"
                                : field + ".lost_when: " + fault->lost_when + " exists",
                ")");
  }
}

int64_t device_ops(c10::DeviceIndex device) {
  check_device_index(device);
  const DeviceFault* fault = fault_of(device);
  return fault == nullptr ? 0 : fault->ops.load();
}

} // namespace bringup_emu
