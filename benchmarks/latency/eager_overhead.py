"""Where an eager op's time goes: host-only time per call (no synchronisation, amortised over a batch),
synchronised time per call (what the harness's micro figures measure), and GPU time per call from the
runtime's dispatch timestamps, for the webgpu device beside torch CUDA in the same run.

`python -m benchmarks latency eager-overhead [--json FILE] [--reps N]`. `TORCH_WEBGPU_EAGER_LAUNCH=python`
measures the Python replay path (the reference) instead of the native one; each webgpu row names the path
it used.
Synchronised minus GPU time is the host and queue latency a user pays per synchronised op; issue 13's
targets are about that difference. torch CUDA's rows come after every webgpu row (no CUDA context before
them unless `--cuda-context`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ..json_rows import emit, rows_main

MiB = 1 << 20


def _cases(device: str) -> dict[str, Callable[[], Callable[[], object]]]:
    """Case name -> a builder of the call (tensors are made on `device` once per case)."""
    def elementwise(op):
        def build():
            x = torch.randn(MiB // 4, device=device)
            return lambda: op(x)
        return build

    def sum_of(nbytes):
        def build():
            x = torch.randn(nbytes // 4, device=device)
            return lambda: x.sum()
        return build

    def rows(fn):
        def build():
            x = torch.randn(8192, 4096, device=device)
            return lambda: fn(x)
        return build

    def mm16():
        a, b = torch.randn(16, 16, device=device), torch.randn(16, 16, device=device)
        return lambda: a @ b

    def prefill_mm():   # GPT-2 prefill's 128x768 @ 768x3072 (issue 12's eager row)
        a, b = torch.randn(128, 768, device=device), torch.randn(768, 3072, device=device)
        return lambda: a @ b

    return {"add 1 MiB": elementwise(lambda x: x + x), "mul scalar 1 MiB": elementwise(lambda x: x * 2.0),
            "relu 1 MiB": elementwise(torch.relu), "sum 1 MiB": sum_of(MiB), "sum 64 MiB": sum_of(64 * MiB),
            "sum 512 MiB": sum_of(512 * MiB), "mm 16x16": mm16, "mm 128x768x3072": prefill_mm,
            "softmax 8192x4096": rows(lambda x: x.softmax(-1)),
            "layer_norm 8192x4096": rows(lambda x: torch.nn.functional.layer_norm(x, (4096,)))}


def _measure(call: Callable[[], object], sync: Callable[[], None], reps: int) -> tuple[float, float]:
    """(host-only seconds per call, synchronised seconds per call), medians over 5 batches."""
    for _ in range(3):
        call()
        sync()
    host, synced = [], []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps):
            call()
        host.append((time.perf_counter() - start) / reps)
        sync()
        start = time.perf_counter()
        for _ in range(reps):
            call()
            sync()
        synced.append((time.perf_counter() - start) / reps)
    return statistics.median(host), statistics.median(synced)


def _gpu_seconds(call: Callable[[], object], reps: int) -> tuple[float, int]:
    """(GPU seconds per call summed over its dispatches, dispatches per call) from timestamps."""
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    with rt.profile() as timings:
        for _ in range(reps):
            call()
    return sum(t.seconds for t in timings) / reps, len(timings) // reps


def run(reps: int) -> list[dict]:
    """One row per (case, backend)."""
    import torch_webgpu  # noqa: F401  (registers the device)

    rows = []
    backends = [("webgpu-eager", "webgpu", torch.webgpu.synchronize),
                ("torch-cuda", "cuda", lambda: torch.cuda.synchronize())]
    for backend, device, sync in backends:
        if device == "cuda" and not torch.cuda.is_available():   # asked only once the webgpu rows are in
            break
        for name, build in _cases(device).items():
            n = max(3, reps // 20) if "512" in name or "8192" in name else reps
            try:
                call = build()
                host, synced = _measure(call, sync, n)
                row = {"case": name, "backend": backend, "host_us": host * 1e6, "synced_us": synced * 1e6}
                if device == "webgpu":
                    from torch_webgpu.runtime.native_eager import eager_launch_choice

                    gpu, dispatches = _gpu_seconds(call, n)
                    row.update(gpu_us=gpu * 1e6, dispatches=dispatches, eager_launch=eager_launch_choice())
            except Exception as exc:  # a case that cannot run here is reported, not fatal
                row = {"case": name, "backend": backend, "error": f"{type(exc).__name__}: {exc}"[:300]}
            rows.append(emit(row))
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: print one JSON row per figure and optionally write them all to --json."""
    rows_main(run, __doc__, argv, prog, reps=100)
