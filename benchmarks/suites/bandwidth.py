"""Bandwidth-bound ops (GB/s): elementwise add (2 reads + 1 write) and a full sum (1 read)."""

from __future__ import annotations

import torch

from ..backends import available_torch_backends, webgpu_adapter_is_cpu
from ..harness import Measurement, Settings, summarize, time_figure

MB = 1 << 20


def sizes_mb(settings: Settings, device: str, adapter_is_cpu: bool) -> list[int]:
    """Tensor sizes in MiB: up to 512 on GPUs, 64 on the CPU and software adapters."""
    if settings.smoke:
        return [1]
    if device == "cpu" or (device == "webgpu" and adapter_is_cpu):
        return [1, 16, 64]
    return [1, 16, 64, 256, 512]


class Add(torch.nn.Module):
    """Elementwise add: two reads and one write per element."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class Sum(torch.nn.Module):
    """A full reduction: one read per element (`b` is unused, to share the signature)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.sum() + 0 * b[0]


OPS = {"add": (Add, 3), "sum": (Sum, 1)}


def bundle_cases(settings: Settings, max_binding_bytes: int) -> list[tuple[str, torch.nn.Module, tuple]]:
    """(key, module, example inputs) for every compiled figure that fits the target's storage bindings."""
    cases = []
    for size in sizes_mb(settings, "gpu", False):
        if size * MB <= max_binding_bytes:
            numel = size * MB // 4
            for name, (module, _) in OPS.items():
                cases.append((f"{name}-{size}mib", module(), (torch.randn(numel), torch.randn(numel))))
    return cases


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """GB/s for add and sum per size and backend."""
    results = []
    adapter_is_cpu = webgpu_adapter_is_cpu(backends)
    for backend in available_torch_backends(backends, settings.bundle_dir):
        for size in sizes_mb(settings, backend.size_class, adapter_is_cpu):
            numel = size * MB // 4
            args = (torch.randn(numel).to(backend.device), torch.randn(numel).to(backend.device))
            for op, (module, passes) in OPS.items():
                name = f"{op} f32 {size} MiB"
                times = time_figure(settings, backend, "micro", name, module(), f"{op}-{size}mib", args,
                                    profile=backend.name == "webgpu-compiled")
                if times is not None:
                    moved = passes * numel * 4
                    results.append(summarize("micro", name, backend.name, "GB/s",
                                             [moved / t / 1e9 for t in times], {"mib": size}))
    return results
