"""Offline bundles: a compiled model as manifest.json + WGSL + safetensors weights, loadable without torch.

`load` needs only the runtime, numpy and safetensors; bundles are written by compiler/export (torch,
torch-mlir, IREE), reached as `torch_webgpu.export` / `torch_webgpu.export_decoder`.
"""

from __future__ import annotations

from .format import (
    BUNDLE_FORMAT_VERSION,
    BundleError,
    BundleFormatError,
    BundleIntegrityError,
    BundleRequirementError,
    BundleSignatureError,
    read_manifest,
)
from .loader import Bundle, load

__all__ = [
    "BUNDLE_FORMAT_VERSION", "Bundle", "BundleError", "BundleFormatError", "BundleIntegrityError",
    "BundleRequirementError", "BundleSignatureError", "load", "read_manifest",
]
