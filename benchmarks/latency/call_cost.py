"""Where a bandwidth-bound call's time goes (issue 12: compiled softmax/layer_norm 8192x4096 ran at
0.21x torch CUDA although their one library dispatch moved 2.7 TB/s): per call, the host recording
alone, `flush()` after it, and the wait; the same call's dispatches under the GPU timer; compiled (from
a prepared bundle, both executors) beside eager.

`python -m benchmarks latency call-cost --bundles DIR [--reps N] [--json FILE]` prints one JSON row per case
(wall microseconds, medians over 5 batches of N calls; `gpu_us`: the profiled dispatches' sum).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..json_rows import Option, emit, rows_main


def _cases(bundles: Path, small: bool) -> dict[str, Callable[[], object]]:
    """Case name -> one call (its result stays on the device)."""
    import torch_webgpu

    rows, width = (512, 1024) if small else (8192, 4096)
    numel = (16 if small else 512) * (1 << 20) // 4
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, width, generator=g).to("webgpu")
    flat = torch.randn(numel, generator=g).to("webgpu")
    from ..bundled import model_weights
    from ..suites.nn_ops import LayerNorm

    torch.manual_seed(0)
    norm = LayerNorm(width).to("webgpu")   # the nn_ops suite's module: its bundle's weight names
    cases: dict[str, Callable[[], object]] = {
        "eager softmax": lambda: x.softmax(-1),
        "eager layer_norm": lambda: norm(x),
        "eager sum": lambda: flat.sum()}
    size = "small" if small else "gpu"
    weights = {k: v.detach().cpu() for k, v in model_weights(norm).items()}
    for key, call_args, w in ((f"nn-softmax-{size}", (x,), {}), (f"nn-layernorm-{size}", (x,), weights),
                              (f"sum-{16 if small else 512}mib", (flat, flat), {})):
        path = bundles / key
        if not path.exists():
            emit({"case": key, "skipped": f"no bundle {path}"})
            continue
        bundle = torch_webgpu.load(path, weights=w)
        compiled = bundle._compiled
        for executor in ("native", "python"):
            def call(bundle=bundle, compiled=compiled, executor=executor, args=call_args):
                compiled.executor = executor
                return bundle(*args)
            cases[f"compiled {key} ({executor})"] = call
    return cases


def _batch(call: Callable[[], object], reps: int) -> dict[str, float]:
    """Wall microseconds per call: record (the call), submit (flush) and wait (synchronize) apart, and
    queued (`reps` calls back to back, one synchronize at the end)."""
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    sync, clock = torch.webgpu.synchronize, time.perf_counter
    parts = {"record_us": 0.0, "submit_us": 0.0, "wait_us": 0.0}
    for _ in range(reps):
        t0 = clock()
        out = call()
        t1 = clock()
        rt.flush()
        t2 = clock()
        sync()
        t3 = clock()
        del out
        parts["record_us"] += (t1 - t0) * 1e6 / reps
        parts["submit_us"] += (t2 - t1) * 1e6 / reps
        parts["wait_us"] += (t3 - t2) * 1e6 / reps
    t0 = clock()
    for _ in range(reps):
        call()
    sync()
    parts["queued_us"] = (clock() - t0) * 1e6 / reps
    return parts


def run(bundles: Path, reps: int, small: bool) -> list[dict]:
    """One row per case: medians over 5 batches, and the GPU time of one profiled call."""
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    rows = []
    for name, call in _cases(bundles, small).items():
        for _ in range(5):
            call()
        torch.webgpu.synchronize()
        batches = [_batch(call, reps) for _ in range(5)]
        row: dict = {"case": name}
        row.update({k: round(statistics.median(b[k] for b in batches), 1) for k in batches[0]})
        with rt.profile() as timings:
            call()
            torch.webgpu.synchronize()
        row["gpu_us"] = round(sum(t.seconds for t in timings) * 1e6, 1)
        row["dispatches"] = [f"{t.label}: {t.seconds * 1e6:.1f}" for t in timings][:8]
        rows.append(emit(row))
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: print one JSON row per case and optionally write them all to --json."""
    rows_main(run, __doc__, argv, prog, bundles=Option(Path(".bundles"), "prepared bundles", Path),
              reps=50, small=Option(False, "the software-adapter sizes (bundles of --smoke do not exist: "
                                    "give a folder prepared with the small cases)"))
