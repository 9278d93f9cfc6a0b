"""torch-webgpu: PyTorch on WebGPU — an eager `webgpu` device and a torch.compile backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the loader and exporter are imported on first use
    import os
    from pathlib import Path
    from typing import Any

    from . import bundle

__version__ = "0.1.0"

from . import runtime  # noqa: E402, F401  (the HAL needs neither torch nor the compiler)


def load(path: str | os.PathLike, weights: Any = None) -> bundle.Bundle | Any:
    """Load a bundle written by `export` (or `torch-webgpu compile`); works without torch. `weights`
    (name -> array) supplies a bundle exported with `external_weights=True`."""
    from .bundle import load as _load

    return _load(path, weights=weights)


def export(model: Any, example_inputs: Any, path: str | os.PathLike, **options: Any) -> Path:
    """Compile `model` for `example_inputs` into a bundle at `path` (directory, or one file if .zip)."""
    from .compiler.export import export as _export

    return _export(model, example_inputs, path, **options)


def export_decoder(lm: Any, path: str | os.PathLike, **options: Any) -> Path:
    """Compile a Llama-style causal LM into a decode bundle (prefill plans per prompt bucket + one decode
    plan sharing weights and KV cache) whose `load(path).generate(...)` runs without torch (options:
    max_len, prompt_buckets, target, f16, tokenizer — a fast tokenizer or its directory, for text in and
    text out; see torch_webgpu.compiler.export.decoder)."""
    from .compiler.export import export_decoder as _export_decoder

    return _export_decoder(lm, path, **options)


try:
    import torch as _torch  # noqa: F401
except ImportError:  # torch-less install: only the runtime (and offline bundles) are offered
    _torch = None

if _torch is not None:
    from . import device as _device

    _device.register()

    from .ops.quant_linear import install_when_imported as _install_quant_linear

    _install_quant_linear()   # torchao's weight-only linears on webgpu tensors run the library kernel

    def fallback_stats() -> dict[str, int]:
        """Per-op counts of aten ops that ran on the CPU through the fallback since the last reset."""
        from .ops.fallback import fallback_stats as _stats

        return _stats()

    def reset_fallback_stats() -> None:
        """Clear the per-op fallback counts."""
        from .ops.fallback import reset_fallback_stats as _reset

        _reset()
