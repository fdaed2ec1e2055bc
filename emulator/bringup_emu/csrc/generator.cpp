// One default random generator per device: the CPU's Mersenne twister, labelled with the emu device so that
// torch.manual_seed, torch.Generator(device="emu") and seeded random ops on the device behave as on CUDA.
#include "emu.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace bringup_emu {
namespace {

class EmuGeneratorImpl : public at::CPUGeneratorImpl {
 public:
  explicit EmuGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val)
      : at::CPUGeneratorImpl(seed) {
    device_ = c10::Device(kEmu, device);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }

  static c10::DeviceType device_type() {
    return kEmu;
  }

 private:
  EmuGeneratorImpl* clone_impl() const override {
    auto* copy = new EmuGeneratorImpl(device_.index());
    copy->set_state(*get_state());
    return copy;
  }
};

std::once_flag g_once;
std::vector<at::Generator> g_defaults;

} // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  std::call_once(g_once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      g_defaults.push_back(at::make_generator<EmuGeneratorImpl>(i));
    }
  });
  const auto index = device < 0 ? current_device() : device;
  check_device_index(index);
  return g_defaults[static_cast<size_t>(index)];
}

at::Generator new_generator(c10::DeviceIndex device) {
  const auto index = device < 0 ? current_device() : device;
  check_device_index(index);
  return at::make_generator<EmuGeneratorImpl>(index);
}

} // namespace bringup_emu
