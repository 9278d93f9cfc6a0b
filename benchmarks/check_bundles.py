"""Correctness of prepared benchmark bundles (and their IREE .vmfb) on this machine, against torch CPU.

`python -m benchmarks check .bundles [--smoke]` — run on the GPU machine before trusting its
timings. Every prepared figure's module is rebuilt here (same seed), run on torch CPU, and compared with
its bundle on the WebGPU adapter and its .vmfb on IREE's Vulkan runtime, given the same weights.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from .bundled import IREE_DIR, bundle_cases, model_weights, prepared_iree_function
from .harness import Settings


def _first(result):
    return result[0] if isinstance(result, (list, tuple)) else result


def _compare(label: str, got, want) -> bool:
    try:
        torch.testing.assert_close(torch.as_tensor(got).float(), want.float(), rtol=2e-3, atol=2e-2)
        print(f"{label}: matches torch CPU")
        return True
    except AssertionError as exc:
        print(f"{label}: MISMATCH {' '.join(str(exc).splitlines()[:3])}")
        return False


def check(bundle_dir: Path, settings: Settings, only: str = "") -> int:
    """Compare every prepared bundle and .vmfb in `bundle_dir` (whose key starts with `only`) with torch
    CPU; returns the failures."""
    import numpy as np

    from torch_webgpu import load

    failures = 0
    for key, module, inputs in bundle_cases(settings, max_binding_bytes=1 << 62):
        path = bundle_dir / key
        if not path.is_dir() or not key.startswith(only):
            continue
        with torch.no_grad():
            want = _first(module(*inputs))
        try:
            bundle = load(path, weights=model_weights(module))
            got = _first(bundle(*[x.numpy() for x in inputs]))
            failures += not _compare(f"{key} (bundle on WebGPU)", np.asarray(got), want)
            if (bundle_dir / IREE_DIR / f"{key}.vmfb").exists():
                fn = prepared_iree_function(bundle_dir, key, bundle.plan)
                failures += not _compare(f"{key} (IREE Vulkan)", fn.to_numpy(_first(fn(*inputs))), want)
            bundle.release()
        except Exception as exc:  # one broken bundle must not hide the others' checks
            failures += 1
            print(f"{key}: FAILED {type(exc).__name__}: {exc}")
    return failures


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and check."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks check", description=__doc__)
    parser.add_argument("bundles", type=Path, nargs="?", default=Path(".bundles"))
    parser.add_argument("--smoke", action="store_true", help="the bundles were prepared with --smoke")
    parser.add_argument("--only", default="", metavar="PREFIX", help="check only bundles whose key starts so")
    args = parser.parse_args(argv)
    return 1 if check(args.bundles, Settings(smoke=args.smoke), args.only) else 0
