// Shared declarations of the emulated accelerator: its configuration (from the spec), the allocator's entry
// points and the default generators. Kept free of the tensor and dispatcher headers, which are slow to compile.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/ScalarType.h>

#include <map>
#include <optional>
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

// ---- op rules from the spec, counters (op_rules.cpp), the own kernels' names (kernels.cpp) ----
void configure_op_rules(
    const std::vector<std::string>& native,
    const std::vector<std::string>& abort,
    const std::map<std::string, double>& wrong);
std::map<std::string, int64_t> fallback_counts();
std::map<std::string, int64_t> native_counts();
void reset_counts();
const std::vector<std::string>& own_kernel_names();

} // namespace bringup_emu
