"""The torch-level backends a benchmark can run on, each with its device, wrapper and synchronisation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RUNTIME_BACKENDS = ("dawn", "wgpu")  # raw runtime (no torch): tiny-dispatch cost
TORCH_BACKENDS = ("webgpu-compiled", "webgpu-eager", "iree-vulkan", "ort-webgpu", "torch-cpu", "torch-cuda",
                  "inductor-cuda")
# Peers whose calls move every input and output through host memory (ONNX Runtime's session.run with
# host arrays): they time whole models, where inputs are small; on a micro-benchmark's large operands
# they would time the copies, so only the suites that ask for them (`host_io=True`) get them.
HOST_IO_BACKENDS = ("ort-webgpu",)
ALL_BACKENDS = RUNTIME_BACKENDS + TORCH_BACKENDS
# The references that need a CUDA context: the harness runs them in a process of their own, after the
# WebGPU backends' process, in which it never touches CUDA (benchmarks/processes.py).
CUDA_BACKENDS = ("torch-cuda", "inductor-cuda")


@dataclass(frozen=True)
class TorchBackend:
    """How to place inputs, wrap a function and wait for the device, for one backend.

    `wrap(fn, key)` returns the callable to time; `key` names the figure, which the bundle mode uses to
    find the bundle `python -m benchmarks prepare` compiled for it.
    """

    name: str
    device: str
    wrap: Callable[[Callable, str], Callable]
    synchronize: Callable[[], None]
    sizes_of: str = ""    # whose problem sizes to use, if not the device's ("webgpu": the same GPU)

    @property
    def size_class(self) -> str:
        """The device kind that picks problem sizes (a host-side tensor can still run on the GPU)."""
        return self.sizes_of or self.device


def _identity(fn: Callable, key: str = "") -> Callable:
    return fn


def _prepared(bundle_dir: Path, key: str, suffix: str = "") -> Path:
    from .bundled import bundle_key

    path = bundle_dir / (bundle_key(key) + suffix)
    if not path.exists():
        raise FileNotFoundError(f"no prepared bundle {path}; run `python -m benchmarks prepare`")
    return path


def _bundle_wrapper(bundle_dir: Path) -> Callable[[Callable, str], Callable]:
    """Run each figure from its prepared bundle (GPU machines carry bundles, not the compiler); a model's
    weights come from the module built here (bundles are prepared with external weights)."""
    from torch_webgpu import load

    from .bundled import model_weights

    def wrap(fn: Callable, key: str = "") -> Callable:
        return load(_prepared(bundle_dir, key), weights=model_weights(fn))

    return wrap


def _iree_vulkan_wrapper(bundle_dir: Path | None) -> Callable[[Callable, str], Callable]:
    """Run each figure's IREE output on IREE's Vulkan runtime: a prepared .vmfb (weights as for bundles),
    or, where the compiler is installed, one compiled on first call."""
    from .bundled import IREE_DIR, bundle_key, model_weights, prepared_iree_function

    def wrap(fn: Callable, key: str = "") -> Callable:
        if bundle_dir is not None:
            from torch_webgpu.bundle.loader import load_plan

            _, plan = load_plan(_prepared(bundle_dir, key), weights=model_weights(fn))
            _prepared(bundle_dir / IREE_DIR, key, ".vmfb")   # a clear error when it was not prepared
            return prepared_iree_function(bundle_dir, bundle_key(key), plan)
        return _CompileOnFirstCall(fn)

    return wrap


class _CompileOnFirstCall:
    """Trace `fn` with the first call's inputs, compile it to a .vmfb, then run that (no bundles here)."""

    def __init__(self, fn: Callable):
        self.fn, self.compiled = fn, None

    def __call__(self, *args):
        if self.compiled is None:
            import tempfile

            from torch_webgpu.compiler.export import graph as ex

            from .iree_vulkan import IREEVulkanFunction, compile_vmfb

            target = ex.make_target("auto")
            traced = ex.trace(self.fn, list(args))
            path = Path(tempfile.mkdtemp(prefix="torch-webgpu-iree-")) / "main.vmfb"
            path.write_bytes(compile_vmfb(ex.iree_input_text(traced, target), target.iree))
            self.compiled = IREEVulkanFunction(path, ex.prepared_constants(traced))
        return self.compiled(*args)


def compiler_available() -> bool:
    """True when torch.compile's webgpu backend can run here (it needs torch-mlir and IREE's compiler)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(m) is not None for m in ("torch_mlir", "iree.compiler"))
    except ModuleNotFoundError:  # `iree` itself is absent
        return False


def _ort_wrapper(fn: Callable, key: str = "") -> Callable:
    from .bundled import bundle_key
    from .ort_webgpu import ORTWebGPUFunction

    return ORTWebGPUFunction(fn, bundle_key(key) or "model")


def start_cuda() -> None:
    """Create this process's CUDA context before any figure runs, where CUDA is available: only where
    asked (`--cuda-context`). A CUDA context raises the GPU's clock (/work/shared/design.md, "Facts
    measured on 2026-12-07": webgpu figures ran 3-4x faster once a process had one, the same kernels), so
    every figure before issue 42 was taken after this; a WebGPU user has no context, and the harness now
    opens none in its WebGPU process unless asked to reproduce those figures."""
    import torch

    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()


def available_torch_backends(requested: list[str], bundle_dir: Path | None = None,
                             host_io: bool = False) -> list[TorchBackend]:
    """The requested torch-level backends that this machine can run (CUDA ones only with a GPU).

    `webgpu-compiled` uses the bundles in `bundle_dir` if given, else torch.compile where the compiler is;
    the HOST_IO_BACKENDS only with `host_io` (whole-model suites) and where they are installed.
    """
    import torch

    out = []
    for name in requested:
        if name in HOST_IO_BACKENDS and not host_io:
            continue
        if name in ("webgpu-eager", "webgpu-compiled"):
            import torch_webgpu  # noqa: F401  (registers the device)

            if name == "webgpu-compiled":
                if bundle_dir is not None:   # asked for: what a GPU machine runs (dry runs here too)
                    wrap = _bundle_wrapper(bundle_dir)
                elif compiler_available():
                    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend

                    def wrap(fn, key="", _backend=webgpu_backend):
                        return torch.compile(fn, backend=_backend)
                else:
                    continue
            else:
                wrap = _identity
            out.append(TorchBackend(name, "webgpu", wrap, torch.webgpu.synchronize))
        elif name == "iree-vulkan":
            from .bundled import IREE_DIR

            prepared = bundle_dir is not None and (bundle_dir / IREE_DIR).is_dir()
            if not (prepared or compiler_available()):
                continue
            # IREE's `main` returns once the GPU is done: nothing to synchronise.
            out.append(TorchBackend(name, "cpu", _iree_vulkan_wrapper(bundle_dir if prepared else None),
                                    lambda: None, sizes_of="webgpu"))
        elif name == "ort-webgpu":
            from .ort_webgpu import available

            if available():
                # Host arrays in and out, the GPU's problem sizes; session.run returns when it is done.
                out.append(TorchBackend(name, "cpu", _ort_wrapper, lambda: None, sizes_of="webgpu"))
        elif name == "torch-cpu":
            out.append(TorchBackend(name, "cpu", _identity, lambda: None))
        elif name in ("torch-cuda", "inductor-cuda") and torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False  # compare f32 with f32
            torch.backends.cudnn.allow_tf32 = False
            wrap = (lambda fn, key="": torch.compile(fn)) if name == "inductor-cuda" else _identity
            out.append(TorchBackend(name, "cuda", wrap, torch.cuda.synchronize))
    return out


def webgpu_adapter_is_cpu(backends: list[str]) -> bool:
    """True when a webgpu backend is requested and the adapter is a software one (sizes shrink then)."""
    if not any(b.startswith("webgpu") or b in ("iree-vulkan", "ort-webgpu") for b in backends):
        return False
    from torch_webgpu.runtime import get_runtime

    return get_runtime().info.adapter_type.upper() == "CPU"
