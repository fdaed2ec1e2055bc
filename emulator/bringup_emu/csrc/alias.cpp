// Tensors that move between the device and the host without the dispatcher: CPU tensors aliasing device memory
// (what native ops and the device's own kernels compute on) and device tensors made with memcpy.
#include "emu_tensors.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>

#include <cstring>

namespace bringup_emu {
namespace {

const c10::DispatchKeySet kEmuKeys(c10::DispatchKey::PrivateUse1);
const c10::DispatchKeySet kCpuKeys(c10::DispatchKey::CPU);

void release_storage_ref(void* holder) {
  delete static_cast<c10::Storage*>(holder);
}

at::Tensor tensor_over(c10::Storage storage, const at::Tensor& like, c10::DispatchKeySet keys) {
  auto result = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), keys, like.dtype());
  result.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  result._set_conj(like.is_conj());
  result._set_neg(like.is_neg());
  return result;
}

c10::Storage emu_storage(size_t nbytes, c10::DeviceIndex device) {
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, allocate_on(nbytes, device), emu_allocator(), true));
}

} // namespace

bool is_emu(const at::Tensor& t) {
  return t.defined() && t.device().type() == kEmu;
}

c10::Storage cpu_storage_alias(const c10::Storage& emu) {
  // resizable over the CPU allocator: a host kernel that must grow an output gets fresh host memory, which the
  // caller copies back into device memory afterwards
  auto* holder = new c10::Storage(emu);
  c10::DataPtr data(emu.nbytes() > 0 ? emu.mutable_data() : nullptr, holder, &release_storage_ref,
                    c10::Device(c10::kCPU));
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), emu.nbytes(), std::move(data), c10::GetCPUAllocator(), true));
}

at::Tensor cpu_tensor_over(const c10::Storage& cpu_storage, const at::Tensor& like) {
  return tensor_over(cpu_storage, like, kCpuKeys);
}

at::Tensor cpu_alias_of(const at::Tensor& emu_tensor) {
  return tensor_over(cpu_storage_alias(emu_tensor.storage()), emu_tensor, kCpuKeys);
}

at::Tensor emu_view_of(const c10::Storage& storage, const at::Tensor& like) {
  return tensor_over(storage, like, kEmuKeys);
}

at::Tensor empty_emu_strided(
    c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype, c10::DeviceIndex device) {
  check_dtype_allowed(dtype);
  const auto itemsize = c10::elementSize(dtype);
  const size_t nbytes = at::detail::computeStorageNbytes(size, stride, itemsize);
  auto result = at::detail::make_tensor<c10::TensorImpl>(
      emu_storage(nbytes, device), kEmuKeys, c10::scalarTypeToTypeMeta(dtype));
  result.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  return result;
}

at::Tensor emu_copy_of(const at::Tensor& cpu_tensor, c10::DeviceIndex device) {
  check_dtype_allowed(cpu_tensor.scalar_type());
  at::Tensor result;
  if (cpu_tensor.is_non_overlapping_and_dense()) {
    result = empty_emu_strided(cpu_tensor.sizes(), cpu_tensor.strides(), cpu_tensor.scalar_type(), device);
    const size_t nbytes = static_cast<size_t>(cpu_tensor.numel()) * cpu_tensor.element_size();
    if (nbytes > 0) {
      std::memcpy(result.mutable_data_ptr(), cpu_tensor.const_data_ptr(), nbytes);
    }
  } else {
    const auto& source = cpu_tensor.storage();
    auto storage = emu_storage(source.nbytes(), device);
    if (source.nbytes() > 0) {
      std::memcpy(storage.mutable_data(), source.data(), source.nbytes());
    }
    result = tensor_over(storage, cpu_tensor, kEmuKeys);
  }
  result._set_conj(cpu_tensor.is_conj());
  result._set_neg(cpu_tensor.is_neg());
  return result;
}

} // namespace bringup_emu
