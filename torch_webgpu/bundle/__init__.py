"""Offline bundles: a compiled model as manifest.json + WGSL + safetensors weights, loadable without torch.

`load` needs only the runtime, numpy and safetensors; `export` (torch, torch-mlir, IREE) is imported on
first use.
"""

from __future__ import annotations

from typing import Any

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


def export(model: Any, example_inputs: Any, path: Any, **options: Any) -> Any:
    """Compile `model` into a bundle at `path` (see torch_webgpu.bundle.exporter.export for options)."""
    from .exporter import export as _export

    return _export(model, example_inputs, path, **options)


def export_decoder(lm: Any, path: Any, **options: Any) -> Any:
    """A decode bundle of a causal LM (see torch_webgpu.bundle.decoder_export.export_decoder)."""
    from .decoder_export import export_decoder as _export_decoder

    return _export_decoder(lm, path, **options)


__all__ = [
    "BUNDLE_FORMAT_VERSION", "Bundle", "BundleError", "BundleFormatError", "BundleIntegrityError",
    "BundleRequirementError", "BundleSignatureError", "export", "export_decoder", "load", "read_manifest",
]
