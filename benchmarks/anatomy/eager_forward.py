"""What one eager forward of a benchmark model does on the webgpu device: dispatches, submits, waits for
the queue, uploads of host data, readbacks, ops that ran through the CPU fallback, calls that replayed a
launch plan and calls that ran their kernel's Python because they cannot be planned (ops/launch_cache.py),
with its host time (no sync) and its time with the sync, per model of benchmarks/model_zoo.py.

`python -m benchmarks anatomy eager-forward [--full] [--models REGEX] [--reps N] [--json FILE]`: tiny
configs by default (the same code paths; fast on lavapipe), `--full` the sizes the harness measures on a
GPU. A forward that waits or reads back mid-way, uploads constants each call or falls back to the CPU
shows it here.
"""

from __future__ import annotations

import re
import statistics
import time

import torch

from ..json_rows import Option, rows_main


def forward_counts(model: torch.nn.Module, args: tuple, reps: int) -> dict:
    """Per-forward counts (means over `reps` forwards after 3 warm-up ones) and host / synchronised ms."""
    import torch_webgpu
    from torch_webgpu.ops import launch_cache
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    with torch.no_grad():
        for _ in range(3):
            model(*args)
            torch.webgpu.synchronize()
        torch_webgpu.reset_fallback_stats()
        names = ("dispatches", "submits", "waits", "uploads", "readbacks")
        before = {n: getattr(rt, n) for n in names}
        plans = launch_cache.stats()
        host, synced = [], []
        for _ in range(reps):
            start = time.perf_counter()
            model(*args)
            host.append(time.perf_counter() - start)
            torch.webgpu.synchronize()
            synced.append(time.perf_counter() - start)
        after = launch_cache.stats()
    out = {n: (getattr(rt, n) - before[n]) / reps for n in names}
    out["waits"] -= 1   # the sync after each forward
    out["fallbacks"] = sum(torch_webgpu.fallback_stats().values()) / reps
    out["plan replays"] = (after["hits"] - plans["hits"]) / reps
    out["unplanned calls"] = (after["unplanned"] - plans["unplanned"]) / reps
    out["host ms"] = 1e3 * statistics.median(host)
    out["host+sync ms"] = 1e3 * statistics.median(synced)
    if "timestamp-query" in rt.info.features:
        out["gpu ms"], out["top kernels"] = _gpu_time(model, args)
    return out


def _gpu_time(model: torch.nn.Module, args: tuple) -> tuple[float, list]:
    """GPU ms of one forward (its dispatches' timestamps summed) and its costliest kernels
    ([label, count, ms], by total time), from the harness's per-dispatch profile."""
    from ..harness import profile_dispatches

    def forward():
        with torch.no_grad():
            model(*args)
        torch.webgpu.synchronize()

    profile = profile_dispatches(forward, "", "webgpu-eager", top=8)
    return profile.gpu_ms, [[label, n, round(ms, 4)] for label, n, ms in profile.top]


def run(full: bool, models: str, reps: int) -> dict:
    """{adapter, full, models: {name: per-forward counts}} of each model of the zoo matching `models`."""
    import torch_webgpu  # noqa: F401  (registers the device)

    from ..model_zoo import model_cases

    rows = {}
    for case in model_cases(not full):
        if not re.search(models, case.name):
            continue
        torch.manual_seed(0)
        model = case.build().eval().to("webgpu")
        args = tuple(t.to("webgpu") for t in case.inputs())
        rows[case.name] = row = forward_counts(model, args, reps)
        print(f"{case.name}: " + ", ".join(f"{k} {v:.2f}" if k.endswith("ms") else f"{k} {v}"
                                           for k, v in row.items()), flush=True)
    return {"adapter": torch.webgpu.get_device_name(), "full": full, "models": rows}


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Print (and optionally write as JSON) the per-forward counts of each selected model."""
    rows_main(run, __doc__, argv, prog, full=Option(False, "full-size models (default: tiny configs)"),
              models=Option("ResNet|BERT", "regex over model names (%(default)s)"), reps=10)
