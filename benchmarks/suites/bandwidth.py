"""Bandwidth-bound ops (GB/s): elementwise add (2 reads + 1 write) and a full sum (1 read), eager (the
kernel library's multi-pass reduction) and compiled; every figure is checked against torch on the CPU
before it is timed."""

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


def matches_cpu(settings: Settings, backend, suite: str, name: str, module: torch.nn.Module, key: str,
                cpu_args: tuple, args: tuple) -> bool:
    """Run the figure once on `backend` and compare with the CPU (f64 reference, tolerance scaled by the
    sum of magnitudes for reductions); a mismatch or error is recorded as the figure's failure."""
    try:
        got = backend.wrap(module, key)(*args)
        backend.synchronize()
        want = module(*(a.double() for a in cpu_args))
        scale = float(sum(a.abs().sum() for a in cpu_args)) if want.dim() == 0 else 1.0
        torch.testing.assert_close(got.detach().cpu().double(), want, rtol=1e-4, atol=1e-5 * scale)
        return True
    except Exception as exc:
        settings.record_failure(suite, name, backend.name, exc)
        return False


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """GB/s for add and sum per size and backend (each checked against the CPU first)."""
    results = []
    adapter_is_cpu = webgpu_adapter_is_cpu(backends)
    for backend in available_torch_backends(backends, settings.bundle_dir):
        for size in sizes_mb(settings, backend.size_class, adapter_is_cpu):
            numel = size * MB // 4
            cpu_args = (torch.randn(numel), torch.randn(numel))
            args = tuple(a.to(backend.device) for a in cpu_args)
            for op, (module, passes) in OPS.items():
                name = f"{op} f32 {size} MiB"
                if not matches_cpu(settings, backend, "micro", name, module(), f"{op}-{size}mib", cpu_args,
                                   args):
                    continue
                times = time_figure(settings, backend, "micro", name, module(), f"{op}-{size}mib", args,
                                    profile=backend.name == "webgpu-compiled")
                if times is not None:
                    moved = passes * numel * 4
                    results.append(summarize("micro", name, backend.name, "GB/s",
                                             [moved / t / 1e9 for t in times], {"mib": size}))
    return results
