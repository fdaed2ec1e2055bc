// Shared declarations of the emulated accelerator: its configuration (from the spec), the allocator's entry
// points, the op rules and the CPU aliases that let host kernels work on device memory in place.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <map>
#include <string>
#include <vector>

namespace bringup_emu {

constexpr c10::DeviceType kEmu = c10::DeviceType::PrivateUse1;

// ---- configuration (config.cpp) ----
void configure_devices(const std::vector<int64_t>& memory_caps);
void configure_refused_dtypes(const std::vector<std::string>& dtype_names);
c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
void check_device_index(c10::DeviceIndex index);
int64_t memory_cap(c10::DeviceIndex index);
bool is_refused(c10::ScalarType dtype);
void check_dtype_allowed(c10::ScalarType dtype);

// ---- allocator (allocator.cpp) ----
c10::DataPtr allocate_on(size_t nbytes, c10::DeviceIndex device);
c10::Allocator* emu_allocator();
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
void reset_peak_stats(c10::DeviceIndex device);
std::optional<c10::DeviceIndex> device_of_pointer(const void* ptr);

// ---- generators (generator.cpp) ----
const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// ---- op rules and counters (op_rules.cpp) ----
struct OpRule {
  bool native = false;  // run on CPU aliases of the device memory (no host copies)
  bool abort = false;   // std::abort() the process when the op reaches the device
  bool scaled = false;  // multiply floating outputs by `scale` (a deliberately wrong op)
  double scale = 1.0;
};
void configure_op_rules(
    const std::vector<std::string>& native,
    const std::vector<std::string>& abort,
    const std::map<std::string, double>& wrong);
OpRule rule_for(const c10::OperatorHandle& op);
void count_fallback(const c10::OperatorName& name);
void count_native(const c10::OperatorName& name);
std::map<std::string, int64_t> fallback_counts();
std::map<std::string, int64_t> native_counts();
void reset_counts();

// ---- tensors on host aliases (alias.cpp) ----
bool is_emu(const at::Tensor& t);
// A resizable CPU storage over an emu storage's memory, keeping the emu storage alive.
c10::Storage cpu_storage_alias(const c10::Storage& emu);
// A CPU tensor over `cpu_storage` with `like`'s dtype, offset, sizes and strides.
at::Tensor cpu_tensor_over(const c10::Storage& cpu_storage, const at::Tensor& like);
// A CPU tensor viewing the same memory as an emu tensor (same offset, sizes, strides), keeping it alive.
at::Tensor cpu_alias_of(const at::Tensor& emu_tensor);
// A fresh emu tensor holding a copy of a CPU tensor, copied with memcpy (no dispatcher call).
at::Tensor emu_copy_of(const at::Tensor& cpu_tensor, c10::DeviceIndex device);
// An emu tensor with `like`'s dtype and geometry over an existing emu storage.
at::Tensor emu_view_of(const c10::Storage& storage, const at::Tensor& like);
at::Tensor empty_emu_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype, c10::DeviceIndex device);

// ---- the device's own kernels (kernels.cpp) and the boxed kernel (boxed.cpp) ----
const std::vector<std::string>& own_kernel_names();
void run_on_host_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void scale_floating_returns(const c10::OperatorHandle& op, torch::jit::Stack* stack, double factor);

} // namespace bringup_emu
