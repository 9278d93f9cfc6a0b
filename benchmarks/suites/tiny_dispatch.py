"""Cost of a tiny dispatch: batched in one submit vs one submit each, per WebGPU backend."""

from __future__ import annotations

import numpy as np

from torch_webgpu.runtime import Runtime

from ..harness import Measurement, Settings, summarize, time_repeats

TINY = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = x[g.x] + 1.0; }
"""


def _measure_backend(backend: str, n: int, settings: Settings) -> list[Measurement]:
    rt = Runtime(backend=backend)
    kernel = rt.kernel(TINY, label="tiny")
    buf = rt.allocate(256)
    rt.fill(buf, 0)
    rt.synchronize()

    def batched():
        for _ in range(n):
            rt.dispatch(kernel, [buf], (1,))
        rt.synchronize()

    def submit_each():
        for _ in range(n):
            rt.dispatch(kernel, [buf], (1,))
            rt.flush()
        rt.synchronize()

    results = []
    for mode, fn in (("batched, 1 submit", batched), ("1 submit per dispatch", submit_each)):
        times = time_repeats(fn, settings)
        results.append(summarize("micro", f"tiny dispatch ({mode})", backend, "us/dispatch",
                                 [t / n * 1e6 for t in times], {"dispatches": n}))
    if not np.isfinite(rt.download_array(buf, np.float32, 1)[0]):
        raise RuntimeError(f"tiny dispatch on {backend} produced a non-finite value")
    return results


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """µs per dispatch for each runtime backend (`dawn`, `wgpu`) in both submission modes."""
    n = 20 if settings.smoke else 1000
    results = []
    for backend in backends:
        if backend in ("dawn", "wgpu"):
            results.extend(_measure_backend(backend, n, settings))
    return results
