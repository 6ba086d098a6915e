// Kernels that only touch tensor metadata, so they live next to the
// dispatcher: allocation, views, resize_/set_, and host<->device copies.
// Everything that computes goes to the engine through the boxed fallback.
#include <ATen/EmptyTensor.h>
#include <ATen/Tensor.h>
#include <ATen/core/op_registration/adaption.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <vector>

#include "tpu_common.h"

namespace torch_tpu {

// Fills a TpuTensor describing a tpu tensor; sizes/strides point into `t`.
TpuTensor describe(const at::Tensor& t) {
  TpuTensor d{};
  d.storage = t.storage().data_ptr().get();
  d.host_data = nullptr;
  d.dtype = static_cast<int32_t>(t.scalar_type());
  d.device_type = static_cast<int32_t>(t.device().type());
  d.device_index = t.device().index();
  d.is_wrapped_number = t.unsafeGetTensorImpl()->is_wrapped_number();
  d.ndim = t.dim();
  d.sizes = t.sizes().data();
  d.strides = t.strides().data();
  d.storage_offset = t.storage_offset();
  d.storage_nbytes = t.storage().nbytes();
  d.math_bits = (t.is_conj() ? 1 : 0) | (t.is_neg() ? 2 : 0);
  return d;
}

namespace {

c10::DispatchKeySet tpu_keys() { return c10::DispatchKeySet(c10::DispatchKey::PrivateUse1); }

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, tpu_allocator(), tpu_keys(),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory) {
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, tpu_allocator(), tpu_keys(),
                                           c10::dtype_or_default(dtype));
}

// Grows the storage when the tensor's extent needs more bytes than it has.
void ensure_storage_bytes(const at::Tensor& self) {
  if (self.numel() == 0) return;
  int64_t extent = 1;
  for (int64_t i = 0; i < self.dim(); ++i) extent += (self.size(i) - 1) * self.stride(i);
  size_t needed = static_cast<size_t>((self.storage_offset() + extent) * self.itemsize());
  if (needed > self.storage().nbytes())
    at::detail::getPrivateUse1Hooks().resizePrivateUse1Bytes(self.storage(), needed);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  const std::vector<int64_t> old_sizes = self.sizes().vec(), old_strides = self.strides().vec();
  // Same size: strides stay as they are, or in-place ops on views break.
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  try {
    ensure_storage_bytes(self);
  } catch (...) {
    // Out of memory: the tensor keeps its shape, so it still matches its storage.
    impl->set_sizes_and_strides(old_sizes, old_strides);
    throw;
  }
  return self;
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, int64_t offset,
                               c10::IntArrayRef size, c10::IntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset);
  if (stride.empty())
    impl->set_sizes_contiguous(size);
  else
    impl->set_sizes_and_strides(size, stride);
  ensure_storage_bytes(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return set_storage_offset(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(),
                            source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, tpu_allocator(), true);
  return set_storage_offset(self, std::move(storage), 0, {0}, {});
}

// The same memory without the lazy conjugate/negative bits of conj() and
// _neg_view() (each of those views toggles its bit).
at::Tensor physical(const at::Tensor& t) {
  at::Tensor p = t.is_conj() ? t.conj() : t;
  return p.is_neg() ? p._neg_view() : p;
}

at::Tensor copy_physical(const at::Tensor& self, const at::Tensor& dst);

// Host<->device copies. The host side (dtype conversion, strides,
// broadcasting) is done by PyTorch's CPU kernels; the engine moves bytes.
// The conjugate/negative bits are resolved as copy_ does on the CPU: copy the
// stored values, then conjugate or negate the destination where they differ.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (self.is_conj() || self.is_neg() || dst.is_conj() || dst.is_neg()) {
    at::Tensor d = physical(dst);
    copy_physical(physical(self), d);
    if (self.is_conj() != dst.is_conj()) d.conj_physical_();
    if (self.is_neg() != dst.is_neg()) d.neg_();
    return dst;
  }
  return copy_physical(self, dst);
}

at::Tensor copy_physical(const at::Tensor& self, const at::Tensor& dst) {
  if (self.is_cpu()) {
    auto src = self.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
    TpuTensor d = describe(dst);
    check_status(tpu_engine_upload(&d, src.data_ptr(), src.nbytes()));
  } else if (dst.is_cpu()) {
    auto tmp = at::empty(self.sizes(), self.options().device(at::kCPU));
    TpuTensor s = describe(self);
    check_status(tpu_engine_download(&s, tmp.data_ptr(), tmp.nbytes()));
    const_cast<at::Tensor&>(dst).copy_(tmp);
  } else {
    // tpu -> tpu: the engine's copy_ (dtype conversion, broadcasting, views).
    TpuTensor d = describe(dst), s = describe(self);
    TpuArg args[2] = {};
    args[0].kind = TPU_ARG_TENSOR;
    args[0].is_write = 1;
    args[0].tensors = &d;
    args[0].len = 1;
    args[1].kind = TPU_ARG_TENSOR;
    args[1].tensors = &s;
    args[1].len = 1;
    int32_t ret_alias = 0, ret_kind = 0;
    TpuResults res{};
    check_status(tpu_engine_dispatch("aten::copy_", args, 2, &ret_alias, &ret_kind, 1, 0, &res));
  }
  return dst;
}

// Each device runs its work on one in-order queue, so every stream is that
// queue and a buffer can never be freed while another stream still uses it:
// there is nothing to record.
void record_stream(at::Tensor& self, c10::Stream stream) {}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

// Whether `tensor.data = from` may swap one TensorImpl's contents for the
// other's. PyTorch's rule (TensorImpl::has_compatible_shallow_copy_type)
// counts only in-tree backends as dense, so without this `module.to("tpu")`
// made new Parameters instead of moving their data as it does for CUDA:
// tied weights came apart and optimizers built before `.to()` held stale
// CPU tensors. tpu tensors are plain dense TensorImpls, like CPU ones.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    auto ks = t.key_set();
    return ks.has(c10::DispatchKey::Dense) && t.layout() == c10::kStrided &&
           (t.device().is_cpu() || t.device().is_privateuseone());
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  // Complex <-> (re, im) float pairs: views; the engine reinterprets the bytes.
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage_offset));
  m.impl("set_.source_Storage", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("record_stream", TORCH_FN(record_stream));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

// Dispatch picks the key of the highest backend among both arguments, so a
// CPU tensor with a tpu one lands here; Autograd first, PrivateUse1 under
// inference mode.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

// copy_ reaches _copy_from with the lazy conj/neg bits still set; copy_from
// resolves them (the generic fallbacks would clone, i.e. copy_, again).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// Autocast on tpu: no per-op rules yet, so every op passes straight through.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

}  // namespace torch_tpu
