"""Which of the `fast` Dawn toggles (runtime.adapter: no robustness, no lazy zero-fill) moves an eager
call's host and wall time: `python -m benchmarks.toggle_split {default,no-robustness,no-lazy-clear,fast}
[--only REGEX] [--reps N] [--json FILE]` runs benchmarks.eager_breakdown with that toggle set on."""

from __future__ import annotations

import argparse
import os


def main() -> None:
    """Set the toggles, then print (and with --json write) eager_breakdown's rows."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("toggles", choices=["default", "no-robustness", "no-lazy-clear", "fast"])
    ap.add_argument("--only", default=None)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json")
    ns = ap.parse_args()
    from torch_webgpu.runtime import adapter

    if ns.toggles != "default":
        os.environ["TORCH_WEBGPU_DAWN_TOGGLES"] = "fast"
        if ns.toggles == "no-robustness":
            adapter.DAWN_FAST_DISABLED_TOGGLES = ()
        elif ns.toggles == "no-lazy-clear":
            adapter.DAWN_FAST_TOGGLES = ()
    from torch_webgpu.runtime import get_runtime

    from . import eager_breakdown

    rows = eager_breakdown.measure(ns.reps, only=ns.only)
    for row in rows:
        row["toggles"] = ns.toggles
        row["dawn_toggles"] = list(get_runtime().info.toggles)
    eager_breakdown.emit(rows, ns.json)


if __name__ == "__main__":
    main()
