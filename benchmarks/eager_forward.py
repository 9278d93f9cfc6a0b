"""What one eager forward of a benchmark model does on the webgpu device: dispatches, submits, waits for
the queue, uploads of host data, readbacks, ops that ran through the CPU fallback, calls that replayed a
launch plan and calls that ran their kernel's Python because they cannot be planned (ops/launch_cache.py),
with its host time (no sync) and its time with the sync, per model of benchmarks/model_zoo.py.

`python -m benchmarks.eager_forward [--full] [--models REGEX] [--reps N] [--json FILE]`: tiny configs by
default (the same code paths; fast on lavapipe), `--full` the sizes the harness measures on a GPU. A forward
that waits or reads back mid-way, uploads constants each call or falls back to the CPU shows it here.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time

import torch


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
    from .harness import profile_dispatches

    def forward():
        with torch.no_grad():
            model(*args)
        torch.webgpu.synchronize()

    profile = profile_dispatches(forward, "", "webgpu-eager", top=8)
    return profile.gpu_ms, [[label, n, round(ms, 4)] for label, n, ms in profile.top]


def main() -> None:
    """Print (and optionally write as JSON) the per-forward counts of each selected model."""
    from .model_zoo import model_cases

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full-size models (default: tiny configs)")
    parser.add_argument("--models", default="ResNet|BERT", help="regex over model names (%(default)s)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--json", help="write the rows to this file")
    opts = parser.parse_args()
    import torch_webgpu  # noqa: F401  (registers the device)

    from .backends import start_cuda

    start_cuda()   # the H200 runs WebGPU work ~3x slower until the process has a CUDA context
    rows = {}
    for case in model_cases(not opts.full):
        if not re.search(opts.models, case.name):
            continue
        torch.manual_seed(0)
        model = case.build().eval().to("webgpu")
        args = tuple(t.to("webgpu") for t in case.inputs())
        rows[case.name] = row = forward_counts(model, args, opts.reps)
        print(f"{case.name}: " + ", ".join(f"{k} {v:.2f}" if k.endswith("ms") else f"{k} {v}"
                                           for k, v in row.items()), flush=True)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"adapter": torch.webgpu.get_device_name(), "full": opts.full, "models": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
