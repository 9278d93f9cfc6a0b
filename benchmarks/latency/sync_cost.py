"""Host cost of one synchronised call (issue 13): `synchronize()` with nothing queued, a tiny eager
`a + b` (256 floats) + `synchronize()`, a compiled one-dispatch plan call + `synchronize()`, and a
readback (`a.cpu()`, which waits for the queue itself).

`python -m benchmarks latency sync-cost [--reps N] [--json FILE]` prints one JSON row per case:
microseconds per call of this thread's CPU time (`time.thread_time`: the host cost proper), of the process's
(`time.process_time`: on lavapipe the "GPU" worker threads count too) and of wall time
(`time.perf_counter`), medians over 5 batches; then the same split into recording (the op or the plan
call alone), submitting (`flush()` after it) and waiting (`synchronize()` after the flush).
`TORCH_WEBGPU_SUBMIT=python` measures the Python submit-and-wait path (the fallback) instead of C++'s.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ..json_rows import emit, rows_main

CLOCKS = {"thread": time.thread_time, "cpu": time.process_time, "wall": time.perf_counter}


def _cases() -> dict[str, Callable[[], object] | None]:
    """Case name -> the call before the synchronize (None: nothing queued)."""
    import torch_webgpu  # noqa: F401  (registers the device)

    # the backend object, not its name: a GPU machine's PYTHONPATH checkout has no entry points
    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend

    a, b = torch.randn(256, device="webgpu"), torch.randn(256, device="webgpu")
    cases: dict[str, Callable[[], object] | None] = {
        "synchronize() alone": None, "eager a + b (256 f32) + synchronize()": lambda: a + b,
        "readback a.cpu() (256 f32) + synchronize()": lambda: a.cpu()}
    plan = torch.compile(lambda x, y: x + y, backend=webgpu_backend)
    try:
        plan(a, b)
    except Exception as exc:  # a GPU machine without torch-mlir and IREE still measures the rest
        emit({"case": "compiled 1-dispatch plan + synchronize()",
              "skipped": f"{type(exc).__name__}: {str(exc)[:200]}"})
    else:
        cases["compiled 1-dispatch plan + synchronize()"] = lambda: plan(a, b)
    return cases


def _per_call(call: Callable[[], object] | None, reps: int, split: bool) -> dict[str, float]:
    """Microseconds per call on each clock; with `split`, record / submit / wait apart (more clock reads)."""
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    sync, flush = torch.webgpu.synchronize, rt.flush
    if not split:
        start = {k: c() for k, c in CLOCKS.items()}
        for _ in range(reps):
            if call is not None:
                call()
            sync()
        return {f"{k}_us": (c() - start[k]) / reps * 1e6 for k, c in CLOCKS.items()}
    parts = {f"{k}_{p}_us": 0.0 for k in CLOCKS for p in ("record", "submit", "wait")}
    for _ in range(reps):
        t0 = {k: c() for k, c in CLOCKS.items()}
        if call is not None:
            call()
        t1 = {k: c() for k, c in CLOCKS.items()}
        flush()
        t2 = {k: c() for k, c in CLOCKS.items()}
        sync()
        t3 = {k: c() for k, c in CLOCKS.items()}
        for k in CLOCKS:
            parts[f"{k}_record_us"] += (t1[k] - t0[k]) * 1e6 / reps
            parts[f"{k}_submit_us"] += (t2[k] - t1[k]) * 1e6 / reps
            parts[f"{k}_wait_us"] += (t3[k] - t2[k]) * 1e6 / reps
    return parts


def run(reps: int) -> list[dict]:
    """One row per case: medians over 5 batches of `reps` calls."""
    rows = []
    for name, call in _cases().items():
        for _ in range(50):
            if call is not None:
                call()
            torch.webgpu.synchronize()
        row: dict = {"case": name}
        for split in (False, True):
            batches = [_per_call(call, reps, split) for _ in range(5)]
            row.update({k: round(statistics.median(b[k] for b in batches), 2) for k in batches[0]})
        rows.append(emit(row))
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: print one JSON row per figure and optionally write them all to --json."""
    rows_main(run, __doc__, argv, prog, reps=400)
