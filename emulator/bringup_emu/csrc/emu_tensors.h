// Tensors between the device and the host without the dispatcher (alias.cpp).
#pragma once

#include "emu.h"

#include <ATen/core/Tensor.h>

namespace bringup_emu {

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

} // namespace bringup_emu
