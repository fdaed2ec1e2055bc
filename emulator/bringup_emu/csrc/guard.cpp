// The device guard: current device per thread, one default stream per device (work runs synchronously), and
// simple events that record the host time, so elapsed-time measurements work as on a real device.
#include "emu.h"

#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>

namespace bringup_emu {
namespace {

struct EmuEvent {
  std::chrono::steady_clock::time_point recorded_at;
  bool recorded = false;
};

struct EmuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kEmu;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    const auto previous = current_device();
    if (device.index() != previous) {
      set_current_device(device.index());
    }
    return {kEmu, previous};
  }

  c10::Device getDevice() const override {
    return {kEmu, current_device()};
  }

  void setDevice(c10::Device device) const override {
    set_current_device(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0 && device.index() < device_count()) {
      set_current_device(device.index());
    }
  }

  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*isHighPriority*/) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  c10::DeviceCapability getDeviceCapability(c10::Device /*device*/) const override {
    c10::DeviceCapability capability;
#define BRINGUP_EMU_CLEAR_REFUSED(_, name)                           \
  if (is_refused(c10::ScalarType::name)) {                           \
    capability.capability_data.supported_scalar_types.has_##name = 0; \
  }
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(BRINGUP_EMU_CLEAR_REFUSED)
#undef BRINGUP_EMU_CLEAR_REFUSED
    return capability;
  }

  void record(void** event, const c10::Stream& /*stream*/, const c10::DeviceIndex /*device_index*/,
              const c10::EventFlag /*flag*/) const override {
    if (*event == nullptr) {
      *event = new EmuEvent();
    }
    auto* emu_event = static_cast<EmuEvent*>(*event);
    emu_event->recorded_at = std::chrono::steady_clock::now();
    emu_event->recorded = true;
  }

  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}

  bool queryEvent(void* /*event*/) const override {
    return true;
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<EmuEvent*>(event);
  }

  void synchronizeEvent(void* /*event*/) const override {}

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    TORCH_CHECK(start != nullptr && end != nullptr, "emu: both events must be recorded before elapsed_time");
    const auto* first = static_cast<EmuEvent*>(start);
    const auto* second = static_cast<EmuEvent*>(end);
    TORCH_CHECK(first->recorded && second->recorded, "emu: both events must be recorded before elapsed_time");
    return std::chrono::duration<double, std::milli>(second->recorded_at - first->recorded_at).count();
  }

  bool queryStream(const c10::Stream& /*stream*/) const override {
    return true;
  }

  void synchronizeStream(const c10::Stream& /*stream*/) const override {}

  void synchronizeDevice(const c10::DeviceIndex /*device_index*/) const override {}

  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, EmuGuardImpl);

} // namespace
} // namespace bringup_emu
