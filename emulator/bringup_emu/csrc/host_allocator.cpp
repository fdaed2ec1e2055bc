// The host allocator torch.accelerator asks a backend for (torch.accelerator.empty_host_cache(), which
// torch.accelerator.Graph calls on entering a capture). Pinned host memory is not emulated: there is no cache to
// empty, and an allocation says so.
#include "emu.h"

#include <ATen/core/CachingHostAllocator.h>

namespace bringup_emu {
namespace {

struct EmuHostAllocator final : public at::HostAllocator {
  at::DataPtr allocate(size_t /*nbytes*/) override {
    TORCH_CHECK(false, "emu: pinned host memory is not emulated (use pageable memory)");
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override {
    return true;
  }

  void empty_cache() override {}

  at::HostStats get_stats() override {
    return {};
  }

  void reset_accumulated_stats() override {}

  void reset_peak_stats() override {}
};

EmuHostAllocator g_host_allocator;

const bool g_host_allocator_set = [] {
  at::setHostAllocator(kEmu, &g_host_allocator);
  return true;
}();

} // namespace
} // namespace bringup_emu
