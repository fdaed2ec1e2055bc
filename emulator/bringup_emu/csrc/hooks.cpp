// PrivateUse1 hooks: what torch asks a backend about itself (availability, devices, generators, pointers).
#include "emu.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <cstring>

namespace bringup_emu {
namespace {

struct EmuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return device_count() > 0;
  }

  bool hasPrimaryContext(c10::DeviceIndex /*device_index*/) const override {
    return true;
  }

  void init() const override {}

  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_current_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const auto previous = current_device();
    set_current_device(device);
    return previous;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const auto device = device_of_pointer(data);
    TORCH_CHECK(device.has_value(), "emu: pointer ", data, " is not in memory allocated on an emu device");
    return {kEmu, *device};
  }

  bool isPinnedPtr(const void* /*data*/) const override {
    return false;
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    TORCH_CHECK(false, "emu: pinned host memory is not emulated (use pageable memory)");
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "emu: trying to resize a storage that is not resizable");
    auto fresh = allocate_on(new_bytes, storage.device().index());
    const size_t kept = std::min(new_bytes, impl->nbytes());
    if (kept > 0) {
      std::memcpy(fresh.get(), impl->data(), kept);
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_bytes);
  }
};

const bool g_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new EmuHooks());
  return true;
}();

} // namespace
} // namespace bringup_emu
