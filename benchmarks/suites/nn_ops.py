"""Throughput of the NN building blocks on large inputs: softmax and layer_norm (GB/s), conv2d and
attention (TFLOP/s), eager (softmax/layer_norm through the kernel library's row kernels), compiled and
against torch; every figure is checked against torch on the CPU before it is timed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..backends import available_torch_backends, webgpu_adapter_is_cpu
from ..harness import Measurement, Settings, summarize, time_figure


class Softmax(nn.Module):
    """Row softmax."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class LayerNorm(nn.Module):
    """LayerNorm over the last dim, with affine weights."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


class Attention(nn.Module):
    """Causal scaled dot-product attention."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


@dataclass
class OpCase:
    """One figure: a module, its inputs, and the work one call does (bytes moved or flops)."""

    key: str
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    work: float
    unit: str       # "GB/s" (work in bytes) or "TFLOP/s" (work in flops)


def cases(size: str) -> list[OpCase]:
    """The figures at `size`: "gpu", "small" (CPU and software adapters) or "smoke"."""
    rows, width = {"gpu": (8192, 4096), "small": (512, 1024), "smoke": (16, 64)}[size]
    batch, chans, hw = {"gpu": (8, 64, 56), "small": (1, 32, 28), "smoke": (1, 4, 8)}[size]
    b, h, t, d = {"gpu": (8, 12, 512, 64), "small": (1, 4, 128, 64), "smoke": (1, 2, 16, 8)}[size]
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    return [
        OpCase(f"softmax-{size}", f"softmax {rows}x{width}", Softmax, lambda: (randn(rows, width),),
               2 * rows * width * 4, "GB/s"),
        OpCase(f"layernorm-{size}", f"layer_norm {rows}x{width}", lambda: LayerNorm(width),
               lambda: (randn(rows, width),), 2 * rows * width * 4, "GB/s"),
        OpCase(f"conv2d-{size}", f"conv2d 3x3 {batch}x{chans}x{hw}x{hw}",
               lambda: nn.Conv2d(chans, chans, 3, padding=1), lambda: (randn(batch, chans, hw, hw),),
               2 * batch * chans * chans * 9 * hw * hw, "TFLOP/s"),
        OpCase(f"attention-{size}", f"causal attention {b}x{h}x{t}x{d}", Attention,
               lambda: (randn(b, h, t, d), randn(b, h, t, d), randn(b, h, t, d)),
               4 * b * h * t * t * d / 2, "TFLOP/s"),   # causal: half the score matrix counts
    ]


def _size(settings: Settings, device: str, adapter_is_cpu: bool) -> str:
    if settings.smoke:
        return "smoke"
    return "small" if device == "cpu" or (device == "webgpu" and adapter_is_cpu) else "gpu"


def bundle_cases(settings: Settings, max_binding_bytes: int) -> list[tuple[str, nn.Module, tuple]]:
    """(key, module, example inputs) of every compiled figure at the GPU sizes."""
    out = []
    for case in cases("smoke" if settings.smoke else "gpu"):
        torch.manual_seed(0)
        out.append((f"nn-{case.key}", case.build().eval(), case.inputs()))
    return out


def matches_cpu(settings: Settings, backend, case: OpCase, module: nn.Module, reference: nn.Module,
                cpu_args: tuple, args: tuple) -> bool:
    """Run the figure once on `backend` and compare with the CPU module on the same inputs (GB/s ops to
    1e-4; matmul-like ops to 1e-2, as CUDA may use TF32); a mismatch is recorded as its failure."""
    tol = 1e-4 if case.unit == "GB/s" else 1e-2
    try:
        with torch.no_grad():
            got = backend.wrap(module, f"nn-{case.key}")(*args)
            backend.synchronize()
            want = reference(*cpu_args)
        torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
        return True
    except Exception as exc:
        settings.record_failure("micro", case.name, backend.name, exc)
        return False


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """GB/s or TFLOP/s of each NN op per backend (each checked against the CPU first)."""
    results = []
    adapter_is_cpu = webgpu_adapter_is_cpu(backends)
    for backend in available_torch_backends(backends, settings.bundle_dir):
        for case in cases(_size(settings, backend.size_class, adapter_is_cpu)):
            torch.manual_seed(0)
            reference = case.build().eval()
            torch.manual_seed(0)
            module = case.build().eval().to(backend.device)
            cpu_args = case.inputs()
            args = tuple(x.to(backend.device) for x in cpu_args)
            if not matches_cpu(settings, backend, case, module, reference, cpu_args, args):
                continue
            with torch.no_grad():
                times = time_figure(settings, backend, "micro", case.name, module, f"nn-{case.key}", args,
                                    profile=backend.name == "webgpu-compiled")
            if times is not None:
                scale = 1e9 if case.unit == "GB/s" else 1e12
                results.append(summarize("micro", case.name, backend.name, case.unit,
                                         [case.work / t / scale for t in times]))
    return results
