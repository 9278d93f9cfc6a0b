"""Which of the `fast` Dawn toggles (runtime.adapter: no robustness, no lazy zero-fill) moves an eager
call's host and wall time: `python -m benchmarks latency toggles {default,no-robustness,no-lazy-clear,fast}
[--only REGEX] [--reps N] [--json FILE]` runs the eager-breakdown mode with that toggle set on (a process
each: the Dawn instance's toggles are fixed once it exists)."""

from __future__ import annotations

import json
import os

from ..json_rows import Option, rows_main

TOGGLE_SETS = ("default", "no-robustness", "no-lazy-clear", "fast")


def run(toggles: str, only: str | None, reps: int) -> list[dict]:
    """Set the toggles, then eager_breakdown's rows, each tagged with the toggle set and the device's
    Dawn toggles."""
    from torch_webgpu.runtime import adapter

    if toggles != "default":
        os.environ["TORCH_WEBGPU_DAWN_TOGGLES"] = "fast"
        if toggles == "no-robustness":
            adapter.DAWN_FAST_DISABLED_TOGGLES = ()
        elif toggles == "no-lazy-clear":
            adapter.DAWN_FAST_TOGGLES = ()
    from torch_webgpu.runtime import get_runtime

    from . import eager_breakdown

    rows = eager_breakdown.measure(reps, only=only)
    for row in rows:
        row["toggles"] = toggles
        row["dawn_toggles"] = list(get_runtime().info.toggles)
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Print (and with --json write) eager_breakdown's rows under the chosen toggles."""
    rows_main(run, __doc__, argv, prog, summary=lambda rows: [json.dumps(row) for row in rows],
              toggles=Option("default", "the toggle set", choices=TOGGLE_SETS, positional=True),
              only=Option(None, "regex over the case names"), reps=30)
