"""f32 matrix multiply throughput (TFLOP/s), eager and compiled, against torch."""

from __future__ import annotations

import torch

from ..backends import available_torch_backends, webgpu_adapter_is_cpu
from ..harness import Measurement, Settings, summarize, time_figure


def sizes(settings: Settings, device: str, adapter_is_cpu: bool) -> list[int]:
    """Square sizes to measure: small in smoke mode and on software adapters / the CPU."""
    if settings.smoke:
        return [64]
    if device == "cpu" or (device == "webgpu" and adapter_is_cpu):
        return [256, 512, 1024]
    return [512, 1024, 2048, 4096]


class MatMul(torch.nn.Module):
    """`a @ b` as a module, for bundles."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def bundle_cases(settings: Settings, max_binding_bytes: int) -> list[tuple[str, torch.nn.Module, tuple]]:
    """(key, module, example inputs) for every compiled figure, to prepare as bundles."""
    return [(f"matmul-{n}", MatMul(), (torch.randn(n, n), torch.randn(n, n)))
            for n in sizes(settings, "gpu", False)]


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """TFLOP/s of an n×n×n f32 matmul per backend."""
    results = []
    adapter_is_cpu = webgpu_adapter_is_cpu(backends)
    for backend in available_torch_backends(backends, settings.bundle_dir):
        for n in sizes(settings, backend.size_class, adapter_is_cpu):
            gen = torch.Generator().manual_seed(n)
            args = (torch.randn(n, n, generator=gen).to(backend.device),
                    torch.randn(n, n, generator=gen).to(backend.device))
            name = f"matmul f32 {n}^3"
            times = time_figure(settings, backend, "micro", name, MatMul(), f"matmul-{n}", args,
                                profile=backend.name == "webgpu-compiled")
            if times is not None:
                flops = 2.0 * n ** 3
                results.append(summarize("micro", name, backend.name, "TFLOP/s",
                                         [flops / t / 1e12 for t in times], {"n": n}))
    return results
