// Python entry point of torch_webgpu._C: build facts, runtime callbacks, allocator and fallback state.
#include "launch_plans.h"
#include "webgpu_device.h"

#include <torch/extension.h>

#ifndef TORCH_WEBGPU_DAWN_PREFIX
#define TORCH_WEBGPU_DAWN_PREFIX ""
#endif

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch-webgpu native shim (PrivateUse1 plumbing)";
  m.def("dawn_prefix", [] { return std::string(TORCH_WEBGPU_DAWN_PREFIX); },
        "The DAWN_PREFIX this extension was configured with ('' = wgpudawn's bundled Dawn).");
  m.def("built_torch_version", [] { return std::string(TORCH_VERSION); },
        "The torch version this extension was compiled against.");
  m.def("_set_runtime_callbacks",
        [](py::object allocate, py::object copy, py::object synchronize) {
          torch_webgpu::set_runtime_callbacks(allocate.ptr(), copy.ptr(), synchronize.ptr());
        },
        "Install allocate(nbytes)->id, copy(src, dst, nbytes) and synchronize() of the Python runtime.");
  m.def("_drain_freed", &torch_webgpu::drain_freed_ids, py::arg("all") = true,
        "Buffer ids whose storages died since the last call (for the runtime pool); all=False keeps the "
        "recycled ids of small storages for replays.");
  m.def("_live_buffer_count", &torch_webgpu::live_buffer_count, "Storages currently holding a buffer.");
  m.def("_live_buffer_bytes", &torch_webgpu::live_buffer_bytes, "Bytes requested by live storages.");
  m.def("_default_generator", [] { return torch_webgpu::default_generator(0); },
        "The default webgpu Generator (Philox seed and offset).");
  m.def("_fallback_counts", &torch_webgpu::fallback_counts, "Per-op counts of CPU fallback runs.");
  m.def("_reset_fallback_counts", &torch_webgpu::reset_fallback_counts, "Clear the CPU fallback counts.");
  torch_webgpu::register_launch_plans(m);
}
