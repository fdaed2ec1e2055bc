// The op rules from the spec, the counters, the device's own kernels and the boxed kernel.
#pragma once

#include "emu_tensors.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <map>

namespace bringup_emu {

// ---- op rules and counters (op_rules.cpp) ----
struct OpRule {
  bool native = false;  // run on CPU aliases of the device memory (no host copies)
  bool abort = false;   // std::abort() the process when the op reaches the device
  bool scaled = false;  // multiply floating outputs by `scale` (a deliberately wrong op)
  double scale = 1.0;
};
OpRule rule_for(const c10::OperatorHandle& op);
void count_fallback(const c10::OperatorName& name);
void count_native(const c10::OperatorName& name);

// ---- the device's own kernels (kernels.cpp) and the boxed kernel (boxed.cpp) ----
void run_on_host_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void scale_floating_returns(const c10::OperatorHandle& op, torch::jit::Stack* stack, double factor);

} // namespace bringup_emu
