"""How long one tiny dispatch takes from record to "GPU done" under each way of waiting for the queue,
on the raw runtime (no torch): the floor under every synchronised eager op and compiled call.

`python -m benchmarks latency sync-latency [--reps N] [--json FILE]` prints one JSON row per strategy:
microseconds per (record + submit + wait), split into recording the dispatch, finishing + submitting, and
waiting.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from ..json_rows import emit, rows_main

WGSL = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = x[g.x] + 1.0; }
"""


def _strategies(rt):
    """Name -> wait() after a submit; each returns when the GPU finished the submitted work."""
    from wgpudawn.backends.dawn import _api

    queue = rt.device.queue

    def work_done_wait_any():
        queue.on_submitted_work_done_sync()

    def work_done_spin():
        promise = queue.on_submitted_work_done_async()
        while promise._state == "pending":
            _api.process_events()

    def work_done_spin_yield():
        promise = queue.on_submitted_work_done_async()
        while promise._state == "pending":
            _api.process_events()
            time.sleep(0)

    return {"on_submitted_work_done + WaitAny (today)": work_done_wait_any,
            "on_submitted_work_done + spin on ProcessEvents": work_done_spin,
            "on_submitted_work_done + ProcessEvents, sleep(0)": work_done_spin_yield,
            "runtime.synchronize()": None}


def run(reps: int) -> list[dict]:
    """Rows of {strategy, total_us, record_us, submit_us, wait_us} (medians)."""
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    buf = rt.allocate(4096)
    rt.upload(buf, np.zeros(1024, np.float32))
    kernel = rt.kernel(WGSL, label="sync_latency_probe")
    rows = []
    for name, wait in _strategies(rt).items():
        parts: list[list[float]] = [[], [], [], []]
        for i in range(reps + 10):
            t0 = time.perf_counter()
            rt.dispatch(kernel, [buf], (16, 1, 1))
            t1 = time.perf_counter()
            if wait is None:
                rt.synchronize()
                t2 = t3 = time.perf_counter()
            else:
                rt.flush()
                t2 = time.perf_counter()
                wait()
                t3 = time.perf_counter()
            if i >= 10:
                for k, v in enumerate((t3 - t0, t1 - t0, t2 - t1, t3 - t2)):
                    parts[k].append(v * 1e6)
        keys = ("total_us", "record_us", "submit_us", "wait_us")
        row = {"strategy": name, **{k: statistics.median(v) for k, v in zip(keys, parts, strict=True)}}
        rows.append(emit(row))
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: print one JSON row per figure and optionally write them all to --json."""
    rows_main(run, __doc__, argv, prog, reps=300)
