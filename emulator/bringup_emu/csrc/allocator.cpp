// Device memory: aligned host memory under a per-device cap from the spec, with CUDA-like statistics, registered
// as PrivateUse1's allocator (a c10::DeviceAllocator, so torch.accelerator's memory API reads it).
#include "emu.h"

#include <c10/util/irange.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace bringup_emu {
namespace {

using c10::CachingAllocator::StatType;
constexpr size_t kAll = static_cast<size_t>(StatType::AGGREGATE);
constexpr size_t kAlignment = 64;

struct Block {
  size_t size;
  c10::DeviceIndex device;
};

std::mutex g_mutex;
std::map<uintptr_t, Block> g_blocks;  // by start address, for frees and pointer look-ups
std::vector<c10::CachingDeviceAllocator::DeviceStats> g_stats;

c10::CachingDeviceAllocator::DeviceStats& stats_locked(c10::DeviceIndex device) {
  if (g_stats.size() < static_cast<size_t>(device_count())) {
    g_stats.resize(device_count());
  }
  return g_stats[static_cast<size_t>(device)];
}

std::string human(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%.0f %s", bytes, units[unit]);
  } else {
    std::snprintf(text, sizeof(text), "%.2f %s", bytes, units[unit]);
  }
  return text;
}

void free_block(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_blocks.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != g_blocks.end()) {
      auto& stats = stats_locked(it->second.device);
      const size_t size = it->second.size;
      stats.allocation[kAll].decrease(1);
      stats.segment[kAll].decrease(1);
      stats.active[kAll].decrease(1);
      stats.allocated_bytes[kAll].decrease(size);
      stats.reserved_bytes[kAll].decrease(size);
      stats.active_bytes[kAll].decrease(size);
      stats.requested_bytes[kAll].decrease(size);
      stats.num_device_free++;
      g_blocks.erase(it);
    }
  }
  std::free(ptr);
}

struct EmuAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    return allocate_on(nbytes, current_device());
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_block;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool initialized() override {
    return device_count() > 0;
  }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {}

  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return device_stats(device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_device_index(device);
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& stats = stats_locked(device);
    for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.allocated_bytes,
                        &stats.reserved_bytes, &stats.active_bytes, &stats.requested_bytes}) {
      (*array)[kAll].reset_accumulated();
    }
    stats.num_ooms = 0;
    stats.num_device_alloc = 0;
    stats.num_device_free = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    reset_peak_stats(device);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const auto cap = static_cast<size_t>(memory_cap(device));
    const auto used = static_cast<size_t>(device_stats(device).allocated_bytes[kAll].current);
    return {cap > used ? cap - used : 0, cap};
  }
};

EmuAllocator g_allocator;

} // namespace

c10::DataPtr allocate_on(size_t nbytes, c10::DeviceIndex device) {
  check_device_index(device);
  const c10::Device where(kEmu, device);
  if (nbytes == 0) {
    return {nullptr, nullptr, &free_block, where};
  }
  const auto cap = static_cast<uint64_t>(memory_cap(device));
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto& stats = stats_locked(device);
    const auto used = static_cast<uint64_t>(stats.allocated_bytes[kAll].current);
    if (used + nbytes > cap) {
      stats.num_ooms++;
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "emu: out of memory on emu:", static_cast<int>(device), ". Tried to allocate ",
          human(static_cast<double>(nbytes)), " (", nbytes, " bytes); the device's cap is ",
          human(static_cast<double>(cap)), " with ", human(static_cast<double>(used)), " already allocated and ",
          human(static_cast<double>(cap - used)), " free (memory in the spec).");
    }
    // reserve under the lock so two threads cannot both pass the cap check
    stats.allocated_bytes[kAll].increase(nbytes);
  }
  void* ptr = nullptr;
  const size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  ptr = std::aligned_alloc(kAlignment, rounded);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& stats = stats_locked(device);
  if (ptr == nullptr) {
    stats.allocated_bytes[kAll].decrease(nbytes);
    stats.num_ooms++;
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "emu: out of memory on emu:", static_cast<int>(device),
        ". The host could not provide ", human(static_cast<double>(nbytes)), ".");
  }
  g_blocks[reinterpret_cast<uintptr_t>(ptr)] = Block{nbytes, device};
  stats.allocation[kAll].increase(1);
  stats.segment[kAll].increase(1);
  stats.active[kAll].increase(1);
  stats.reserved_bytes[kAll].increase(nbytes);
  stats.active_bytes[kAll].increase(nbytes);
  stats.requested_bytes[kAll].increase(nbytes);
  stats.num_device_alloc++;
  return {ptr, ptr, &free_block, where};
}

c10::Allocator* emu_allocator() {
  return &g_allocator;
}

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  return stats_locked(device);
}

void reset_peak_stats(c10::DeviceIndex device) {
  check_device_index(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& stats = stats_locked(device);
  for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.allocated_bytes,
                      &stats.reserved_bytes, &stats.active_bytes, &stats.requested_bytes}) {
    (*array)[kAll].reset_peak();
  }
}

std::optional<c10::DeviceIndex> device_of_pointer(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_blocks.upper_bound(address);
  if (it == g_blocks.begin()) {
    return std::nullopt;
  }
  --it;
  if (address < it->first + it->second.size) {
    return it->second.device;
  }
  return std::nullopt;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

} // namespace bringup_emu
