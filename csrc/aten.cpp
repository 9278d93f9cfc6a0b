// Metadata-only aten kernels of the webgpu device, the boxed CPU fallback, and the webgpu:: custom ops.
#include "webgpu_device.h"

#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <pybind11/pybind11.h>
#include <torch/library.h>

#include <cstdlib>
#include <mutex>
#include <unordered_set>

namespace torch_webgpu {
namespace {

constexpr c10::DispatchKeySet kWebGPUKeys(c10::DispatchKey::PrivateUse1);

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory,
                   std::optional<c10::Device> device) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "webgpu supports only strided tensors, got layout ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pin_memory applies to CPU tensors only");
  if (device.has_value()) {
    TORCH_CHECK(device->index() <= 0, "webgpu has one device (webgpu:0), got ", *device);
  }
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory, device);
  const auto scalar_type = c10::dtype_or_default(dtype);
  check_dtype(scalar_type, "torch.empty on webgpu");
  return at::detail::empty_generic(size, webgpu_allocator(), kWebGPUKeys, scalar_type, memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_options(layout, pin_memory, device);
  const auto scalar_type = c10::dtype_or_default(dtype);
  check_dtype(scalar_type, "torch.empty_strided on webgpu");
  return at::detail::empty_strided_generic(size, stride, webgpu_allocator(), kWebGPUKeys, scalar_type);
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset.has_value()) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), offset);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// Grow the storage (new buffer + device copy) when the tensor's extent no longer fits in it.
void ensure_storage_fits(c10::TensorImpl* impl) {
  if (impl->numel() == 0) return;
  const size_t needed = at::detail::computeStorageNbytes(impl->sizes(), impl->strides(),
                                                         impl->dtype().itemsize(), impl->storage_offset());
  if (needed > impl->storage().nbytes()) {
    resize_storage_bytes(impl->storage(), needed);
  }
}

// at::native::resize_ memcpy's through the storage pointer, which is a buffer id here.
const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size_sym,
                          std::optional<c10::MemoryFormat> memory_format) {
  const auto size = C10_AS_INTARRAYREF_SLOW(size_sym);
  auto* impl = self.unsafeGetTensorImpl();
  if (impl->sizes() == size && !memory_format.has_value()) return self;
  impl->set_sizes_contiguous(size);
  ensure_storage_fits(impl);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "unsupported memory format Preserve");
    impl->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, const c10::Storage& source, int64_t storage_offset,
                        c10::IntArrayRef size, std::optional<c10::IntArrayRef> stride) {
  TORCH_CHECK(source.device_type() == c10::DeviceType::PrivateUse1,
              "set_: expected a webgpu storage, got one on ", source.device());
  TORCH_CHECK(storage_offset >= 0, "set_: negative storage offset ", storage_offset);
  auto* impl = self.unsafeGetTensorImpl();
  if (!impl->storage().is_alias_of(source)) {
    impl->set_storage_keep_dtype(source);
  }
  impl->set_storage_offset(storage_offset);
  if (stride.has_value()) {
    impl->set_sizes_and_strides(size, *stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  ensure_storage_fits(impl);
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  std::optional<c10::IntArrayRef> strides;
  if (!stride.empty()) strides = C10_AS_INTARRAYREF_SLOW(stride);
  return set_storage(self, source, storage_offset.expect_int(), C10_AS_INTARRAYREF_SLOW(size), strides);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, source, 0, {numel}, std::nullopt);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  TORCH_CHECK(self.dtype() == source.dtype(), "set_: dtype mismatch, ", self.dtype(), " vs ", source.dtype());
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, webgpu_allocator(), /*resizable=*/true);
  return set_storage(self, empty, 0, {0}, std::nullopt);
}

// ---- boxed CPU fallback -------------------------------------------------------------------------
std::mutex g_fallback_mutex;
std::unordered_map<std::string, int64_t> g_fallback_counts;
std::unordered_set<std::string> g_warned;

bool fallback_allowed() {
  const char* env = std::getenv("TORCH_WEBGPU_FALLBACK");
  return env == nullptr || std::string(env) != "0";
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(fallback_allowed(), "'", full, "' has no webgpu kernel and the CPU fallback "
                              "is disabled (TORCH_WEBGPU_FALLBACK=0); unset it to run this op on the CPU");
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_fallback_mutex);
    ++g_fallback_counts[full];
    first = g_warned.insert(full).second;
  }
  if (first) {
    // A Python UserWarning (TORCH_WARN only reaches Python from some call paths, e.g. not torch.ops.*).
    const std::string message = "'" + full + "' has no webgpu kernel; it runs on the CPU (copies to and "
                                "from the device). Set TORCH_WEBGPU_FALLBACK=0 to make this an error.";
    pybind11::gil_scoped_acquire gil;
    if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) {
      PyErr_Clear();  // warnings filtered into errors
      TORCH_CHECK(false, message);
    }
  }
  at::native::cpu_fallback(op, stack);
}

// ---- webgpu:: custom ops ------------------------------------------------------------------------
at::Tensor create_buffer(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype) {
  TORCH_CHECK(size.size() == stride.size(), "webgpu::create_buffer: size has ", size.size(),
              " dims but stride has ", stride.size());
  return at::empty_strided(size, stride, at::TensorOptions().dtype(dtype).device(webgpu_device()));
}

}  // namespace

std::unordered_map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  return g_fallback_counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_fallback_mutex);
  g_fallback_counts.clear();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

TORCH_LIBRARY(webgpu, m) {
  m.def("create_buffer(int[] size, int[] stride, ScalarType? dtype=None) -> Tensor");
  m.def("write_buffer(Tensor(a!) dst, Tensor src) -> ()");
}

TORCH_LIBRARY_IMPL(webgpu, CompositeExplicitAutograd, m) {
  m.impl("create_buffer", create_buffer);
}

}  // namespace torch_webgpu
