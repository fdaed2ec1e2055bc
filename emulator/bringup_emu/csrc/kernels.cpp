// The device's own kernels: allocation, copies, views, resizing, set_ and scalars. The CPU fallback cannot
// provide these (it needs them itself), so they work on the device memory directly or on CPU aliases of it.
#include "emu_ops.h"
#include "emu_speed.h"
#include "graphs.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace bringup_emu {
namespace {

c10::DeviceIndex index_of(const std::optional<c10::Device>& device) {
  const auto where = c10::device_or_default(device);
  TORCH_CHECK(where.type() == kEmu, "emu: expected an emu device, got ", where);
  return where.has_index() ? where.index() : current_device();
}

void check_plain_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "emu: only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "emu: pin_memory applies to CPU tensors only");
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
    std::optional<c10::Device> device, std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  check_plain_options(layout, pin_memory);
  const auto type = c10::dtype_or_default(dtype);
  check_dtype_allowed(type);
  const c10::DeviceGuard guard(c10::Device(kEmu, index_of(device)));
  return at::detail::empty_generic(
      size, emu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type, memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_plain_options(layout, pin_memory);
  return empty_emu_strided(size, stride, c10::dtype_or_default(dtype), index_of(device));
}

void copy_now(const at::Tensor& self, const at::Tensor& dst) {
  const PacedOp paced(is_emu(dst) ? dst.device().index() : self.device().index());
  if (is_emu(dst)) {
    check_dtype_allowed(dst.scalar_type());
  }
  at::Tensor source;
  at::Tensor target;
  if (is_emu(self) && is_emu(dst) && self.storage().is_alias_of(dst.storage())) {
    // one host alias for both, so the CPU copy sees the overlap as it would on the host
    const auto shared = cpu_storage_alias(dst.storage());
    source = cpu_tensor_over(shared, self);
    target = cpu_tensor_over(shared, dst);
  } else {
    source = is_emu(self) ? cpu_alias_of(self) : self;
    target = is_emu(dst) ? cpu_alias_of(dst) : dst;
  }
  at::native::copy_(target, source, false);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking*/) {
  const bool capturing = graph_capturing();
  if (capturing && !is_emu(dst)) {
    refuse_capture("aten::_copy_from", "a copy to the host (the host cannot wait inside a graph)");
  }
  if (capturing && !is_emu(self)) {
    refuse_capture("aten::_copy_from", "a copy from the host (host memory is not the device's to replay)");
  }
  copy_now(self, dst);
  if (capturing) {
    record_graph_step("aten::_copy_from", [source = emu_view_of(self.storage(), self),
                                           target = emu_view_of(dst.storage(), dst)] { copy_now(source, target); });
  }
  return dst;
}

const at::Tensor& resize_emu(
    const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(self.device());
  return at::native::resize_(self, size, memory_format);
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_emu(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Tensor as_strided(
    const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor& set_storage_offset(
    at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size, c10::IntArrayRef stride) {
  const c10::DeviceGuard guard(self.device());
  return at::native::set_storage_cpu_(self, std::move(source), storage_offset, size, stride);
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  return at::native::set_(self, std::move(source));
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  auto storage = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), 0, allocate_on(0, self.device().index()), emu_allocator(), true));
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(storage));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  if (graph_capturing()) {
    refuse_capture("aten::_local_scalar_dense", "a host sync (.item() reads device memory on the host)");
  }
  return at::native::_local_scalar_dense_cpu(cpu_alias_of(self));
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  auto alias = cpu_alias_of(self);
  at::native::fill_(alias, value);
  if (graph_capturing()) {
    record_graph_step("aten::fill_.Scalar", [target = emu_view_of(self.storage(), self), value] {
      auto replayed = cpu_alias_of(target);
      at::native::fill_(replayed, value);
    });
  }
  return self;
}

} // namespace

const std::vector<std::string>& own_kernel_names() {
  static const std::vector<std::string> names = {
      "empty.memory_format", "empty_strided.default", "_copy_from.default", "_copy_from_and_resize.default",
      "as_strided.default", "view.default", "_reshape_alias.default", "resize_.default",
      "set_.source_Storage_storage_offset", "set_.source_Storage", "set_.source_Tensor", "set_.default",
      "_local_scalar_dense.default", "fill_.Scalar",
  };
  return names;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("resize_", TORCH_FN(resize_emu));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
}

} // namespace bringup_emu
