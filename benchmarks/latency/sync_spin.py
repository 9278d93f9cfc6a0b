"""What a synchronised call costs past its GPU work, by how long the wait for the queue polls before it
blocks (TORCH_WEBGPU_SYNC_SPIN_US), in one process so that the GPU's state is the same for every setting.

`python -m benchmarks latency sync-spin [--spins 1000,20000] [--rounds 3] [--reps 20] [--bundles DIR]
[--only REGEX] [--json FILE]`: for each model of benchmarks/model_zoo (full size; tiny on a software
adapter) and the f32 4096^3 matmul, eager and (with --bundles) compiled from the prepared bundles, the
wall milliseconds per synchronised call with each spin setting; the settings alternate within every round
and each figure is the median over rounds of the mean over `reps` calls. One JSON row per (case, backend,
spin). A wait that outlasts the spin blocks in Dawn's instanceWaitAny, and waking from it took the H200
~0.1-0.3 ms (benchmarks/results/h200-2026-12-04-sync-spin.md).
"""

from __future__ import annotations

import functools
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ..backends import available_torch_backends, webgpu_adapter_is_cpu
from ..json_rows import Option, comma_list, emit, rows_main
from ..model_zoo import model_cases
from ..suites.matmul import MatMul


def _cases(tiny: bool) -> list[tuple[str, str, Callable[[], tuple[torch.nn.Module, tuple]], bool]]:
    """(figure name, bundle key, build -> (module, inputs), host_io): the zoo's models (host arrays in and
    out, as the models suite times them) and the f32 4096^3 matmul (device tensors, as the matmul suite)."""
    def model(case):
        torch.manual_seed(0)
        return case.build().eval(), case.inputs()

    def matmul(n: int):
        gen = torch.Generator().manual_seed(n)
        return MatMul(), (torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen))
    n = 256 if tiny else 4096
    return ([(c.name, f"model-{c.name}", functools.partial(model, c), True) for c in model_cases(tiny)]
            + [(f"matmul f32 {n}^3", f"matmul-{n}", functools.partial(matmul, n), False)])


def _per_call_ms(call: Callable[[], None], reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        call()
    return (time.perf_counter() - start) / reps * 1e3


def run(spins: list[float], rounds: int, reps: int, bundles: Path | None, only: str | None) -> list[dict]:
    """One row per (case, backend, spin): ms per call, median over rounds; the process's own setting is
    restored afterwards."""
    import torch_webgpu._native_plan as native_plan

    from torch_webgpu.runtime import get_runtime
    from torch_webgpu.runtime.native_queue import sync_spin_microseconds

    requested = ["webgpu-eager"] + (["webgpu-compiled"] if bundles else [])
    rows = []
    try:
        for name, key, build, host_io in _cases(webgpu_adapter_is_cpu(requested)):
            if only and not re.search(only, name):
                continue
            module, inputs = build()
            for backend in available_torch_backends(requested, bundles, host_io=host_io):
                call = _synchronised(backend, module, key, inputs)
                figures: dict[float, list[float]] = {s: [] for s in spins}
                for _ in range(rounds):
                    for spin in spins:
                        native_plan.set_spin(int(spin * 1000))
                        figures[spin].append(_per_call_ms(call, reps))
                for spin in spins:
                    row = {"case": name, "backend": backend.name, "spin_us": spin,
                           "ms_per_call": round(statistics.median(figures[spin]), 4),
                           "rounds": [round(x, 4) for x in figures[spin]]}
                    rows.append(emit(row))
            module.to("cpu")
    finally:
        native_plan.set_spin(int(sync_spin_microseconds(get_runtime().info.software) * 1000))
    return rows


def _synchronised(backend, module: torch.nn.Module, key: str, inputs: tuple) -> Callable[[], None]:
    """`module` wrapped for `backend` as a no-grad call that waits for the device, warmed up (autotuned)."""
    fn = backend.wrap(module.to(backend.device), key)
    args = tuple(t.to(backend.device) for t in inputs)

    def call():
        with torch.no_grad():
            fn(*args)
        backend.synchronize()
    for _ in range(3):
        call()
    return call


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: print one JSON row per figure and optionally write them all to --json."""
    rows_main(run, __doc__, argv, prog,
              spins=Option([1000.0, 20000.0], "comma-separated microseconds", comma_list(float)),
              rounds=3, reps=20, bundles=Option(None, "prepared bundles (compiled figures)", Path),
              only=Option(None, "regex over the figure names"))
