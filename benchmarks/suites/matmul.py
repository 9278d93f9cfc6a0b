"""f32 matrix multiply throughput (TFLOP/s), eager and compiled, against torch."""

from __future__ import annotations

import torch

from ..backends import available_torch_backends
from ..harness import Measurement, Settings, summarize, time_repeats


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


def bundle_cases(settings: Settings) -> list[tuple[str, torch.nn.Module, tuple]]:
    """(key, module, example inputs) for every compiled figure, to prepare as bundles."""
    return [(f"matmul-{n}", MatMul(), (torch.randn(n, n), torch.randn(n, n)))
            for n in sizes(settings, "gpu", False)]


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """TFLOP/s of an n×n×n f32 matmul per backend."""
    results = []
    adapter_is_cpu = False
    if any(b.startswith("webgpu") for b in backends):
        from torch_webgpu.runtime import get_runtime

        adapter_is_cpu = get_runtime().info.adapter_type.upper() == "CPU"
    for backend in available_torch_backends(backends, settings.bundle_dir):
        for n in sizes(settings, backend.device, adapter_is_cpu):
            gen = torch.Generator().manual_seed(n)
            a = torch.randn(n, n, generator=gen).to(backend.device)
            b = torch.randn(n, n, generator=gen).to(backend.device)

            try:
                fn = backend.wrap(MatMul(), f"matmul-{n}")

                def call(fn=fn, a=a, b=b, backend=backend):
                    fn(a, b)
                    backend.synchronize()

                times = time_repeats(call, settings)
            except Exception as exc:
                settings.record_failure("micro", f"matmul f32 {n}^3", backend.name, exc)
                continue
            flops = 2.0 * n ** 3
            results.append(summarize("micro", f"matmul f32 {n}^3", backend.name, "TFLOP/s",
                                     [flops / t / 1e12 for t in times], {"n": n}))
    return results
