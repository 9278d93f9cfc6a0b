"""Eager torchao weight-only linears on webgpu tensors through the library's quant_matmul kernel.

torchao's weight subclasses (`IntxUnpackedToInt8Tensor`: IntxWeightOnlyConfig, `Int8Tensor`:
Int8WeightOnlyConfig) implement `F.linear` by dequantizing the whole weight and calling linear, which
runs on the device through the existing ops. `install` wraps those implementations (torchao's own
per-subclass function table, its extension point): a linear whose activation and weight tensors are
webgpu tensors the kernel can read runs as one quant_matmul dispatch that reads the int8 bytes and
dequantizes in registers; anything else (CPU, tracing, activation quantization, other layouts) goes to
torchao's implementation unchanged.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.nn.functional as F

from ..kernels.matmul import Layout
from ..kernels.quant_matmul import QuantMatmulProblem, QuantWeight, plan_quant_matmul, quant_variants
from .library_launch import WGSL_DTYPES, device_caps, record_launch
from .quant_weights import plain, weight_parts
from .tensor_buffers import new_empty

_WRAPPED = "_torch_webgpu_quant_linear"


def quant_linear(x: torch.Tensor, w: Any, bias: torch.Tensor | None) -> torch.Tensor | None:
    """x @ dequant(w)^T + bias as one quant_matmul dispatch, or None when the kernel cannot run it."""
    parts = weight_parts(w)
    if parts is None or not plain(x) or x.dtype not in WGSL_DTYPES or (
            bias is not None and not (plain(bias, x.dtype) and bias.dim() == 1)):
        return None
    q, scale, zero, group = parts
    n, k = q.shape
    if x.shape[-1] != k or scale.dtype not in WGSL_DTYPES:
        return None
    m = x.numel() // k
    dtype = WGSL_DTYPES[x.dtype]
    out = new_empty((*x.shape[:-1], n), x.dtype, like=x)
    p = QuantMatmulProblem(m, n, k, Layout(x.storage_offset(), 0, k, 1), Layout(0, 0, n, 1),
                           QuantWeight("i8", group, zero is not None, WGSL_DTYPES[scale.dtype]), dtype,
                           bias=Layout(bias.storage_offset(), 0, 0, 1) if bias is not None else None)
    caps = device_caps()
    if m == 0 or not quant_variants(p, caps):
        return None
    tensors = {"a": x, "q": q, "scale": scale, "out": out}
    if zero is not None:
        tensors["zero"] = zero
    if bias is not None:
        tensors["bias"] = bias
    record_launch(plan_quant_matmul(p, caps), tensors)
    return out


def _wrap(original: Any) -> Any:
    def linear(func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        x, w = args[0], args[1]
        bias = args[2] if len(args) > 2 else (kwargs or {}).get("bias")
        if not torch.compiler.is_compiling() and not isinstance(x, torch._subclasses.FakeTensor):
            out = quant_linear(x, w, bias)
            if out is not None:
                return out
        return original(func, types, args, kwargs)

    setattr(linear, _WRAPPED, True)
    return linear


def install() -> bool:
    """Route torchao's weight-only linears on webgpu tensors to quant_matmul and their embeddings to
    quant_embedding (idempotent); False when torchao is not imported."""
    if "torchao.quantization" not in sys.modules:
        return False
    try:
        from torchao.quantization import Int8Tensor, IntxUnpackedToInt8Tensor
    except ImportError:
        return False
    from .quant_embedding import wrap_embedding

    for cls in (IntxUnpackedToInt8Tensor, Int8Tensor):
        for table, key in ((getattr(cls, "_TORCH_FN_TABLE", {}), F.linear),
                           (getattr(cls, "_ATEN_OP_TABLE", {}), torch.ops.aten.linear.default)):
            impls = table.get(cls, {})
            if key in impls and not getattr(impls[key], _WRAPPED, False):
                impls[key] = _wrap(impls[key])
        for table, key in ((getattr(cls, "_TORCH_FN_TABLE", {}), F.embedding),
                           (getattr(cls, "_ATEN_OP_TABLE", {}), torch.ops.aten.embedding.default)):
            impls = table.get(cls, {})
            if key in impls:
                impls[key] = wrap_embedding(impls[key])   # idempotent
    return True


class _InstallAfterImport:
    """A meta-path finder that installs the routing once `torchao.quantization` has been imported."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torchao.quantization":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            loader_exec(module)
            sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _InstallAfterImport)]
            install()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install_when_imported() -> None:
    """`install` now if torchao is imported, else as soon as `torchao.quantization` is."""
    if "torchao.quantization" in sys.modules:
        install()
    elif not any(isinstance(f, _InstallAfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _InstallAfterImport())
