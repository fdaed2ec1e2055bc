// The boxed kernel for every op the device does not implement itself. Per the spec an op aborts the process,
// runs "natively" (the CPU kernel on CPU aliases of the device memory: no host copies, nothing extra dispatched)
// or goes through at::native::cpu_fallback (copies to the host and back, as a real backend's fallback does);
// a `wrong` op's floating outputs are then scaled. Random ops draw from the emu device's generator either way.
#include "emu_ops.h"
#include "graphs.h"
#include "emu_speed.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdio>
#include <cstdlib>
#include <unordered_map>

namespace bringup_emu {
namespace {

bool is_generator_argument(const c10::Argument& argument) {
  const auto& type = argument.type();
  if (type->kind() == c10::TypeKind::GeneratorType) {
    return true;
  }
  const auto* optional = type->castRaw<c10::OptionalType>();
  return optional != nullptr && optional->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

std::optional<c10::DeviceIndex> first_emu_device(c10::ArrayRef<c10::IValue> arguments) {
  for (const auto& value : arguments) {
    if (value.isTensor() && is_emu(value.toTensor())) {
      return value.toTensor().device().index();
    }
    if (value.isTensorList()) {
      for (const auto& t : value.toTensorVector()) {
        if (is_emu(t)) {
          return t.device().index();
        }
      }
    }
    if (value.isDevice() && value.toDevice().type() == kEmu) {
      return value.toDevice().has_index() ? value.toDevice().index() : current_device();
    }
  }
  return std::nullopt;
}

// Replaces an emu generator argument (or None, meaning the device's default) by a CPU generator holding the same
// state for the duration of the CPU kernel, then hands the advanced state back to the emu generator.
class GeneratorSwap {
 public:
  GeneratorSwap(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    const auto& arguments = op.schema().arguments();
    const size_t begin = stack->size() - arguments.size();
    for (size_t i = 0; i < arguments.size(); ++i) {
      if (!is_generator_argument(arguments[i])) {
        continue;
      }
      auto& slot = (*stack)[begin + i];
      at::Generator emu;
      if (slot.isGenerator() && slot.toGenerator().device().type() == kEmu) {
        emu = slot.toGenerator();
      } else if (slot.isNone()) {
        const auto device = first_emu_device(torch::jit::last(*stack, arguments.size()));
        if (!device.has_value()) {
          continue;
        }
        emu = default_generator(*device);
      } else {
        continue;
      }
      auto host = at::make_generator<at::CPUGeneratorImpl>();
      {
        std::lock_guard<std::mutex> lock(emu.mutex());
        host.set_state(emu.get_state());
      }
      slot = c10::IValue(host);
      swapped_.emplace_back(emu, host);
    }
  }

  void hand_back() {
    for (auto& [emu, host] : swapped_) {
      std::lock_guard<std::mutex> lock(emu.mutex());
      emu.set_state(host.get_state());
    }
  }

 private:
  std::vector<std::pair<at::Generator, at::Generator>> swapped_;
};

// The host aliases made for one call: one CPU storage per emu storage, so arguments that share device memory
// share host memory too, and results can be traced back to the device storage they view.
class AliasTable {
 public:
  at::Tensor alias(const at::Tensor& emu) {
    auto* key = emu.storage().unsafeGetStorageImpl();
    auto found = by_emu_.find(key);
    if (found == by_emu_.end()) {
      auto cpu = cpu_storage_alias(emu.storage());
      by_cpu_[cpu.unsafeGetStorageImpl()] = emu.storage();
      found = by_emu_.emplace(key, std::move(cpu)).first;
    }
    return cpu_tensor_over(found->second, emu);
  }

  // the emu storage that a CPU storage aliases, when it is one of this call's aliases
  std::optional<c10::Storage> emu_storage_of(const c10::StorageImpl* cpu) const {
    auto found = by_cpu_.find(cpu);
    if (found == by_cpu_.end()) {
      return std::nullopt;
    }
    return found->second;
  }

 private:
  std::unordered_map<const c10::StorageImpl*, c10::Storage> by_emu_;
  std::unordered_map<const c10::StorageImpl*, c10::Storage> by_cpu_;
};

struct Aliased {
  at::Tensor emu;
  at::Tensor cpu;
  bool written;
};

// After the CPU kernel wrote to an aliased argument: if it had to move the data (a resized output) copy it into
// fresh device memory of the same storage; if it changed the geometry, give the emu tensor the same geometry.
void write_back(const Aliased& arg, const AliasTable& table) {
  auto* emu_impl = arg.emu.unsafeGetTensorImpl();
  const auto& cpu_storage = arg.cpu.storage();
  const auto target = table.emu_storage_of(cpu_storage.unsafeGetStorageImpl());
  if (target.has_value()) {
    auto* device_storage = target->unsafeGetStorageImpl();
    if (cpu_storage.data() != device_storage->data() || cpu_storage.nbytes() != device_storage->nbytes()) {
      auto fresh = allocate_on(cpu_storage.nbytes(), target->device().index());
      if (cpu_storage.nbytes() > 0) {
        std::memcpy(fresh.get(), cpu_storage.data(), cpu_storage.nbytes());
      }
      device_storage->set_data_ptr_noswap(std::move(fresh));
      device_storage->set_nbytes(cpu_storage.nbytes());
    }
    if (!arg.emu.storage().is_alias_of(*target)) {
      emu_impl->set_storage_keep_dtype(*target);
    }
  } else {
    // the kernel gave the argument an unrelated host storage (set_): the device gets a copy of it
    const auto copy = emu_copy_of(arg.cpu, arg.emu.device().index());
    emu_impl->set_storage_keep_dtype(copy.storage());
  }
  if (arg.emu.sizes() != arg.cpu.sizes() || arg.emu.strides() != arg.cpu.strides() ||
      arg.emu.storage_offset() != arg.cpu.storage_offset()) {
    emu_impl->set_sizes_and_strides(arg.cpu.sizes(), arg.cpu.strides(), arg.cpu.storage_offset());
  }
}

class ReturnMapper {
 public:
  ReturnMapper(const AliasTable& table, const std::vector<Aliased>& aliased,
               std::vector<const c10::StorageImpl*> host_inputs, c10::DeviceIndex device)
      : table_(table), aliased_(aliased), host_inputs_(std::move(host_inputs)), device_(device) {}

  at::Tensor map(const at::Tensor& result) const {
    if (!result.defined() || result.device().type() != c10::kCPU) {
      return result;
    }
    for (const auto& arg : aliased_) {
      if (result.unsafeGetTensorImpl() == arg.cpu.unsafeGetTensorImpl()) {
        return arg.emu;  // in-place and out= results are the argument itself
      }
    }
    const auto* storage = result.storage().unsafeGetStorageImpl();
    if (const auto device_storage = table_.emu_storage_of(storage)) {
      return emu_view_of(*device_storage, result);  // a view of device memory
    }
    for (const auto* host : host_inputs_) {
      if (host == storage) {
        return result;  // a host argument, or a view of one, stays on the host
      }
    }
    return emu_copy_of(result, device_);
  }

 private:
  const AliasTable& table_;
  const std::vector<Aliased>& aliased_;
  std::vector<const c10::StorageImpl*> host_inputs_;
  c10::DeviceIndex device_;
};

bool written_argument(const c10::Argument& argument) {
  return argument.alias_info() != nullptr && argument.alias_info()->isWrite();
}

template <typename T>
void scale_strided(char* base, c10::IntArrayRef sizes, c10::IntArrayRef strides, double factor) {
  const int64_t dims = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> index(dims, 0);
  int64_t count = 1;
  for (auto size : sizes) {
    count *= size;
  }
  for (int64_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < dims; ++d) {
      offset += index[d] * strides[d];
    }
    auto* element = reinterpret_cast<T*>(base) + offset;
    *element = static_cast<T>(static_cast<double>(*element) * factor);
    for (int64_t d = dims - 1; d >= 0; --d) {
      if (++index[d] < sizes[d]) {
        break;
      }
      index[d] = 0;
    }
  }
}

void scale_tensor(const at::Tensor& t, double factor) {
  if (!is_emu(t) || !at::isFloatingType(t.scalar_type()) || t.numel() == 0) {
    return;
  }
  char* base = static_cast<char*>(t.mutable_data_ptr());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t.scalar_type(), "emu_wrong_scale", [&] {
    scale_strided<scalar_t>(base, t.sizes(), t.strides(), factor);
  });
}

// As on a real device, one op's device tensors must all be on one device (host tensors may join them); the CPU
// kernels behind both paths would otherwise compute across devices without a word.
void check_one_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  std::optional<c10::DeviceIndex> seen;
  auto check = [&](const at::Tensor& t) {
    if (!is_emu(t)) {
      return;
    }
    if (!seen.has_value()) {
      seen = t.device().index();
    }
    TORCH_CHECK(
        *seen == t.device().index(), "Expected all tensors to be on the same device, but found at least two devices, ",
        c10::Device(kEmu, *seen), " and ", t.device(), "! (", op.schema().operator_name(), " on the emu device)");
  };
  for (const auto& value : torch::jit::last(stack, op.schema().arguments().size())) {
    if (value.isTensor()) {
      check(value.toTensor());
    } else if (value.isTensorList()) {
      for (const auto& t : value.toTensorVector()) {
        check(t);
      }
    } else if (value.isOptionalTensorList()) {
      for (const auto& t : value.toOptionalTensorVector()) {
        if (t.has_value()) {
          check(*t);
        }
      }
    }
  }
}

void emu_boxed_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto rule = rule_for(op);
  const auto& name = op.schema().operator_name();
  check_one_device(op, *stack);
  const PacedOp paced(first_emu_device(torch::jit::last(*stack, op.schema().arguments().size())));
  if (rule.abort) {
    std::fprintf(stderr, "emu: %s is listed under abort in the spec: aborting the process\n",
                 c10::toString(name).c_str());
    std::fflush(stderr);
    std::abort();
  }
  if (graph_capturing()) {
    capture_boxed_op(op, stack, rule);
    return;
  }
  if (rule.native) {
    count_native(name);
    run_on_host_aliases(op, stack);
  } else {
    count_fallback(name);
    GeneratorSwap generators(op, stack);
    at::native::cpu_fallback(op, stack);
    generators.hand_back();
  }
  if (rule.scaled) {
    scale_floating_returns(op, stack, rule.scale);
  }
}

} // namespace

void run_on_host_aliases(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t begin = stack->size() - arguments.size();
  const auto device = first_emu_device(torch::jit::last(*stack, arguments.size()));
  GeneratorSwap generators(op, stack);  // before the aliasing, which hides the device of the arguments
  AliasTable table;
  std::vector<Aliased> aliased;
  std::vector<const c10::StorageImpl*> host_inputs;
  auto alias_one = [&](const at::Tensor& t, bool written) -> at::Tensor {
    if (!is_emu(t)) {
      if (t.defined()) {
        host_inputs.push_back(t.storage().unsafeGetStorageImpl());
      }
      return t;
    }
    auto cpu = table.alias(t);
    aliased.push_back({t, cpu, written});
    return cpu;
  };
  for (size_t i = 0; i < arguments.size(); ++i) {
    auto& slot = (*stack)[begin + i];
    const bool written = written_argument(arguments[i]);
    if (slot.isTensor()) {
      slot = alias_one(slot.toTensor(), written);
    } else if (slot.isTensorList()) {
      c10::List<at::Tensor> cpu_list;
      for (const auto& t : slot.toTensorVector()) {
        cpu_list.push_back(alias_one(t, written));
      }
      slot = c10::IValue(cpu_list);
    } else if (slot.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> cpu_list;
      for (const auto& t : slot.toOptionalTensorVector()) {
        cpu_list.push_back(t.has_value() ? std::optional<at::Tensor>(alias_one(*t, written)) : std::nullopt);
      }
      slot = c10::IValue(cpu_list);
    } else if (slot.isDevice() && slot.toDevice().type() == kEmu) {
      slot = c10::IValue(c10::Device(c10::kCPU));
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  generators.hand_back();
  for (const auto& arg : aliased) {
    if (arg.written) {
      write_back(arg, table);
    }
  }
  const ReturnMapper mapper(table, aliased, std::move(host_inputs), device.value_or(current_device()));
  const size_t returns = op.schema().returns().size();
  const size_t returns_begin = stack->size() - returns;
  for (size_t i = 0; i < returns; ++i) {
    auto& slot = (*stack)[returns_begin + i];
    if (slot.isTensor()) {
      slot = c10::IValue(mapper.map(slot.toTensor()));
    } else if (slot.isTensorList()) {
      c10::List<at::Tensor> mapped;
      for (const auto& t : slot.toTensorVector()) {
        mapped.push_back(mapper.map(t));
      }
      slot = c10::IValue(mapped);
    }
  }
}

void scale_floating_returns(const c10::OperatorHandle& op, torch::jit::Stack* stack, double factor) {
  const size_t returns = op.schema().returns().size();
  for (const auto& value : torch::jit::last(*stack, returns)) {
    if (value.isTensor()) {
      scale_tensor(value.toTensor(), factor);
    } else if (value.isTensorList()) {
      for (const auto& t : value.toTensorVector()) {
        scale_tensor(t, factor);
      }
    }
  }
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&emu_boxed_kernel>());
}

} // namespace bringup_emu
