"""Eager per-op cost on small tensors (µs/op): dispatch overhead of each backend, not its math."""

from __future__ import annotations

import time

import torch

from ..backends import available_torch_backends
from ..harness import Measurement, Settings, summarize, time_repeats

OPS = {
    "add": lambda a, b: torch.add(a, b),
    "mul_scalar": lambda a, b: a * 2.0,
    "relu": lambda a, b: torch.relu(a),
    "sum": lambda a, b: a.sum(),
    "softmax": lambda a, b: torch.softmax(a, -1),
    "mm 16x16": lambda a, b: a @ b,
    "view+transpose": lambda a, b: a.view(256).view(16, 16).t(),
}


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """µs per op for each op in OPS, per eager backend."""
    n = 10 if settings.smoke else 300
    results = []
    eager = [b for b in backends if b not in ("webgpu-compiled", "inductor-cuda", "iree-vulkan")]
    for backend in available_torch_backends(eager):
        a = torch.randn(16, 16, device=backend.device)
        b = torch.randn(16, 16, device=backend.device)
        for name, op in OPS.items():
            def loop(op=op, a=a, b=b, backend=backend):
                for _ in range(n):
                    op(a, b)
                backend.synchronize()

            times = time_repeats(loop, settings)
            results.append(summarize("micro", f"eager op: {name}", backend.name, "us/op",
                                     [t / n * 1e6 for t in times], {"shape": [16, 16]}))
            # Host side alone (ops recorded, GPU not waited for): the per-op overhead of the op layer,
            # which on a software adapter is otherwise hidden behind the CPU running the shaders.
            host = []
            for _ in range(settings.effective_repeats):
                start = time.perf_counter()
                for _ in range(n):
                    op(a, b)
                host.append(time.perf_counter() - start)
                backend.synchronize()
            results.append(summarize("micro", f"eager op (host only): {name}", backend.name, "us/op",
                                     [t / n * 1e6 for t in host], {"shape": [16, 16]}))
    return results
