"""Where a synchronised eager call's time goes: wall per call against the GPU time of its dispatches.

`python -m benchmarks latency eager-breakdown [--json FILE] [--reps N] [--only REGEX]` runs the eager figures
of issue 12 that sit near their goals (GPT-2 prefill's 128×768×3072 matmul, the bandwidth suite's 512 MiB
`sum`, the dense 4096³ matmuls in f32 and, with shader-f16, f16; smaller sizes on a software adapter) as the
harness does (one call, then synchronize), and for each prints one JSON row: median wall µs per call, the GPU
µs of one call's dispatches (timestamps, per kernel label), wall − GPU, the host µs of recording the call (no
wait) and of each queue submit inside that recording, and torch CUDA's wall per call in the same process where
CUDA exists (measured once every webgpu figure is in: no CUDA context before them unless `--cuda-context`).
`--heavy-bytes N` sets runtime.native_eager.HEAVY_BYTES (replays binding that much are submitted as soon
as they are recorded) for the run, to compare the early submit with none.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

from ..json_rows import Option, rows_main


def _cases(torch, gpu: bool, f16: bool) -> dict[str, tuple[Callable, tuple]]:
    """name -> (function, CPU operands), seeded like the harness's suites (the square matmuls like the
    matmul suite's: its seed is the size)."""
    gen = torch.Generator().manual_seed(128)
    m, k, n = (128, 768, 3072) if gpu else (64, 256, 512)
    mm = (torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen))
    numel = (512 if gpu else 16) * (1 << 20) // 4
    sums = (torch.randn(numel), torch.randn(numel))
    cases = {f"matmul f32 {m}x{k}x{n}": (lambda a, b: a @ b, mm),
             f"sum f32 {numel * 4 >> 20} MiB (+ 0 * b[0])": (lambda a, b: a.sum() + 0 * b[0], sums)}
    size = 4096 if gpu else 256
    gen = torch.Generator().manual_seed(size)
    square = (torch.randn(size, size, generator=gen), torch.randn(size, size, generator=gen))
    cases[f"matmul f32 {size}^3"] = (lambda a, b: a @ b, square)
    if f16:
        cases[f"matmul f16 {size}^3"] = (lambda a, b: a @ b, tuple(t.half() for t in square))
    return cases


def _wall(fn: Callable, args: tuple, sync: Callable, reps: int) -> list[float]:
    """Seconds per synchronised call, per repeat (after warm-up)."""
    for _ in range(3):
        fn(*args)
    sync()
    values = []
    for _ in range(reps):
        start = time.perf_counter()
        fn(*args)
        sync()
        values.append(time.perf_counter() - start)
    return values


def _timed_submits(rt) -> tuple[list[float], Callable | None]:
    """Wrap the runtime's native queue submit so that each call's host seconds land in the returned list
    (with the unwrapped submit, to put back)."""
    queue = rt.recorder.native_queue
    seconds: list[float] = []
    if queue is None:
        return seconds, None
    submit = queue._submit

    def timed(*args):
        start = time.perf_counter()
        try:
            return submit(*args)
        finally:
            seconds.append(time.perf_counter() - start)

    queue._submit = timed
    return seconds, submit


def measure(reps: int, heavy_bytes: int | None = None, only: str | None = None) -> list[dict]:
    """One row per case (see the module docstring); `only`: a regex over the case names."""
    import re

    import torch

    import torch_webgpu  # noqa: F401 (registers the device)
    from torch_webgpu.runtime import get_runtime, native_eager

    if heavy_bytes is not None:
        native_eager.HEAVY_BYTES = heavy_bytes

    rt = get_runtime()
    gpu = not rt.info.software
    rows = []
    cases = _cases(torch, gpu, "shader-f16" in rt.info.features)
    for name, (fn, cpu_args) in cases.items():
        if only and not re.search(only, name):
            continue
        args = tuple(t.to("webgpu") for t in cpu_args)
        want = fn(*(t.float() for t in cpu_args))   # f16 operands: the CPU product in f32, then compared
        tol = dict(rtol=2e-2, atol=5e-1) if cpu_args[0].dtype == torch.float16 else dict(rtol=1e-3, atol=1e-1)
        torch.testing.assert_close(fn(*args).cpu().float(), want, **tol)
        wall = _wall(fn, args, torch.webgpu.synchronize, reps)
        host, submits = [], []
        submitted, unwrapped = _timed_submits(rt)
        for _ in range(reps):
            submitted.clear()
            start = time.perf_counter()
            fn(*args)
            host.append(time.perf_counter() - start)
            submits.append(sum(submitted))
            torch.webgpu.synchronize()
        if unwrapped is not None:
            rt.recorder.native_queue._submit = unwrapped
        kernels: dict[str, float] = {}
        with rt.profile() as timings:
            fn(*args)
            torch.webgpu.synchronize()
        for t in timings:
            kernels[t.label] = kernels.get(t.label, 0.0) + t.seconds * 1e6
        gpu_us = sum(kernels.values())
        row = {"case": name, "wall_us": statistics.median(wall) * 1e6, "wall_min_us": min(wall) * 1e6,
               "host_record_us": statistics.median(host) * 1e6,
               "submit_in_record_us": statistics.median(submits) * 1e6, "gpu_us": gpu_us,
               "wall_minus_gpu_us": statistics.median(wall) * 1e6 - gpu_us, "kernels": kernels,
               "timestamps": bool(timings) and timings[0].source == "timestamp"}
        rows.append(row)
    if rows and torch.cuda.is_available():   # asked only once the webgpu figures are in
        for row in rows:
            fn, cpu_args = cases[row["case"]]
            cargs = tuple(t.cuda() for t in cpu_args)
            cuda_wall = _wall(fn, cargs, torch.cuda.synchronize, reps)
            row["torch_cuda_wall_us"] = statistics.median(cuda_wall) * 1e6
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Print (and with --json write) the rows."""
    rows_main(measure, __doc__, argv, prog, summary=_lines, reps=50,
              heavy_bytes=Option(None, "early-submit threshold in bytes (runtime.native_eager)", int),
              only=Option(None, "regex over the case names"))


def _lines(rows: list[dict]) -> list[str]:
    """Each row as a JSON line (printed once every figure, torch CUDA's too, is in)."""
    return [json.dumps(row) for row in rows]
