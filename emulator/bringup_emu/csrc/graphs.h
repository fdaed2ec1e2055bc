// Graph capture and replay on the emulated device (graphs.cpp): torch.accelerator.Graph's implementation for
// PrivateUse1, and the hooks the boxed kernel and the device's own kernels call while a capture is open.
#pragma once

#include "emu_ops.h"

#include <functional>

namespace bringup_emu {

// whether this thread is capturing a graph
bool graph_capturing();
// The boxed kernel's path while capturing: refuse what a device cannot capture (a host-fallback op, an op the
// spec's capture_refused names), else run the op natively and record it for replay.
void capture_boxed_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpRule& rule);
// The own kernels' hooks: fail the capture with the device's error, or record a step that replay re-runs.
[[noreturn]] void refuse_capture(const std::string& op, const std::string& why);
void record_graph_step(const std::string& op, std::function<void()> step);

// ---- configuration from the spec ----
void configure_graphs(
    const std::vector<bool>& enabled_per_device,
    const std::vector<std::string>& capture_refused,
    const std::map<std::string, double>& replay_wrong);
// Register the graph implementation under the device type's current name (call after the backend is renamed).
void register_graph_impl();

} // namespace bringup_emu
