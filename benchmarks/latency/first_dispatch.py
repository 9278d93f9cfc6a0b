"""How long the f16 4096³ eager matmul takes by what ran before it in its submit (GPU timestamps).

`python -m benchmarks latency first-dispatch [--reps N] [--size N] [--json FILE]` records, one submit per
scenario and N submits each, the matmul alone, twice, after a matmul of other operands, after a tiny add,
after `b.sum()` / `a.sum()` (operands read into L2), after a 256 MiB multiply (L2 evicted) and after that
multiply and `b.sum()`, under the per-dispatch GPU timer; one JSON row per scenario with each dispatch's
median µs, then the synchronised eager call's wall µs. Why a dispatch alone in its submit (as the
autotuner and a synchronised call run it) is slower than back to back:
`results/h200-2026-12-06-issue12-stop38.md`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ..json_rows import emit, rows_main


def _scenarios(size: int) -> dict[str, Callable[[], list]]:
    """Scenario name -> the eager ops of one submit (the matmul last)."""
    gen = torch.Generator().manual_seed(size)

    def operand() -> torch.Tensor:
        return torch.randn(size, size, generator=gen).half().to("webgpu")

    a, b, a2, b2 = operand(), operand(), operand(), operand()
    tiny = torch.randn(256, device="webgpu")
    big = torch.randn(size * size * 4, device="webgpu")   # 256 MiB at 4096: more than the L2 holds
    return {"alone": lambda: [a @ b], "twice": lambda: [a @ b, a @ b],
            "after a matmul of other operands": lambda: [a2 @ b2, a @ b],
            "after a 256-float add": lambda: [tiny + 1, a @ b],
            "after b.sum()": lambda: [b.sum(), a @ b], "after a.sum()": lambda: [a.sum(), a @ b],
            "after a large multiply": lambda: [big * 2, a @ b],
            "after a large multiply and b.sum()": lambda: [big * 2, b.sum(), a @ b]}


def run(reps: int, size: int) -> list[dict]:
    """One row per scenario (dispatch labels and median µs in submit order), then the eager wall row."""
    import torch_webgpu  # noqa: F401  (registers the device)
    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    scenarios = _scenarios(size)
    for _ in range(3):   # compile, tune, and bring the clocks up
        for ops in scenarios.values():
            ops()
    torch.webgpu.synchronize()
    rows = []
    for name, ops in scenarios.items():
        per_submit = []
        for _ in range(reps):
            with rt.profile() as timings:
                keep = ops()   # noqa: F841  (the outputs stay alive until the submit is timed)
            per_submit.append([(t.label, t.seconds * 1e6) for t in timings])
        labels = [label for label, _ in per_submit[0]]
        medians = [round(statistics.median(s[i][1] for s in per_submit), 1) for i in range(len(labels))]
        row = {"scenario": name, "dispatches": labels, "median_us": medians}
        rows.append(emit(row))
    walls = []
    for _ in range(max(reps, 30)):   # the "alone" scenario's matmul, as the harness times a call
        start = time.perf_counter()
        scenarios["alone"]()
        torch.webgpu.synchronize()
        walls.append((time.perf_counter() - start) * 1e6)
    row = {"scenario": "synchronised eager call", "wall_us": round(statistics.median(walls), 1)}
    rows.append(emit(row))
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: print one JSON row per scenario and optionally write them all to --json."""
    rows_main(run, __doc__, argv, prog, reps=8, size=4096)
