// The Python module bringup_emu_C: configure the device from the parsed spec, read the counters and statistics.
#include "emu.h"
#include "graphs.h"
#include "emu_speed.h"
#include "emu_fault.h"

#include <torch/csrc/Generator.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

namespace {

using bringup_emu::device_stats;
using c10::CachingAllocator::StatType;
constexpr size_t kAll = static_cast<size_t>(StatType::AGGREGATE);

void configure(
    const std::vector<int64_t>& memory_caps, const std::vector<std::string>& refused_dtypes,
    const std::vector<std::string>& native, const std::vector<std::string>& abort,
    const std::map<std::string, double>& wrong) {
  bringup_emu::configure_devices(memory_caps);
  bringup_emu::configure_refused_dtypes(refused_dtypes);
  bringup_emu::configure_op_rules(native, abort, wrong);
}

std::map<std::string, int64_t> memory_stats(int64_t device) {
  const auto index = static_cast<c10::DeviceIndex>(device);
  const auto stats = device_stats(index);
  return {
      {"allocated_bytes", stats.allocated_bytes[kAll].current},
      {"peak_allocated_bytes", stats.allocated_bytes[kAll].peak},
      {"allocations", stats.allocation[kAll].current},
      {"allocations_total", stats.allocation[kAll].allocated},
      {"cap_bytes", bringup_emu::memory_cap(index)},
      {"ooms", stats.num_ooms},
  };
}

py::object default_generator(int64_t device) {
  const auto& generator = bringup_emu::default_generator(static_cast<c10::DeviceIndex>(device));
  return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(generator));
}

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "bringup's emulated accelerator (PrivateUse1 backed by host memory)";
  m.def("configure", &configure, "set the devices, refused dtypes and op rules from the parsed spec");
  m.def("configure_speeds", &bringup_emu::configure_speeds, "each device's speed, a fraction of the host's");
  m.def("configure_host_threads", &bringup_emu::configure_host_threads,
        "per device: the host's OpenMP threads each of its ops runs on (0: the calling thread's setting)");
  m.def("device_speed", [](int64_t device) { return bringup_emu::device_speed(static_cast<c10::DeviceIndex>(device)); });
  m.def("pacing_totals", [](int64_t device) { return bringup_emu::pacing_totals(static_cast<c10::DeviceIndex>(device)); },
        "[paced ops, their host ns, ns they lasted beyond it] on one device");
  m.def("configure_failures", &bringup_emu::configure_failures, "per device: ops before it is lost (-1 none), the file that loses it");
  m.def("device_ops", [](int64_t device) { return bringup_emu::device_ops(static_cast<c10::DeviceIndex>(device)); });
  m.def("device_count", [] { return static_cast<int>(bringup_emu::device_count()); });
  m.def("current_device", [] { return static_cast<int>(bringup_emu::current_device()); });
  m.def("set_device", [](int64_t index) { bringup_emu::set_current_device(static_cast<c10::DeviceIndex>(index)); });
  m.def("memory_stats", &memory_stats, "allocated, peak, allocation counts, cap and OOMs of one device");
  m.def("reset_peak", [](int64_t device) { bringup_emu::reset_peak_stats(static_cast<c10::DeviceIndex>(device)); });
  m.def("fallback_counts", &bringup_emu::fallback_counts, "op (name.overload) -> calls through cpu_fallback");
  m.def("native_counts", &bringup_emu::native_counts, "op (name.overload) -> calls run natively on aliases");
  m.def("reset_counts", &bringup_emu::reset_counts);
  m.def("default_generator", &default_generator, "the default torch.Generator of one emu device");
  m.def("configure_graphs", &bringup_emu::configure_graphs,
        "graphs on or off per device, the ops capture refuses, the ops wrong only under replay (factor)");
  m.def("register_graphs", &bringup_emu::register_graph_impl, "register torch.accelerator.Graph's emu implementation");
  m.def("own_kernels", &bringup_emu::own_kernel_names, "aten ops the device implements itself (name.overload)");
}
