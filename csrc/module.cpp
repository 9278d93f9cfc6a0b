// Python entry point of torch_webgpu._C: build facts the Python side checks at import.
#include <torch/extension.h>

#ifndef TORCH_WEBGPU_DAWN_PREFIX
#define TORCH_WEBGPU_DAWN_PREFIX ""
#endif

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch-webgpu native shim (PrivateUse1 plumbing)";
  m.def("dawn_prefix", [] { return std::string(TORCH_WEBGPU_DAWN_PREFIX); },
        "The DAWN_PREFIX this extension was configured with ('' = wgpudawn's bundled Dawn).");
  m.def("built_torch_version", [] { return std::string(TORCH_VERSION); },
        "The torch version this extension was compiled against.");
}
