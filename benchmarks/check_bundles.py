"""Correctness of prepared benchmark bundles on this machine's adapter, against torch CPU (f64 reference).

`python -m benchmarks.check_bundles .bundles` — run on the GPU machine before trusting its timings.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from torch_webgpu import load

REFERENCES = {
    "matmul": lambda a, b: a @ b,
    "add": lambda a, b: a + b,
    "sum": lambda a, b: a.sum() + 0 * b[0],
}


def check(bundle_dir: Path) -> int:
    """Run every bundle in `bundle_dir` on webgpu tensors and compare with torch; returns failures."""
    failures = 0
    for path in sorted(p for p in bundle_dir.iterdir() if p.is_dir()):
        reference = REFERENCES[path.name.split("-")[0]]
        bundle = load(path)
        a, b = (torch.randn(*spec["shape"]) for spec in bundle.inputs)
        got = bundle(a.to("webgpu"), b.to("webgpu"))
        got = (got[0] if isinstance(got, (list, tuple)) else got).to("cpu")
        want = reference(a.double(), b.double()).float()
        try:
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-2)
            print(f"{path.name}: matches torch CPU")
        except AssertionError as exc:
            failures += 1
            print(f"{path.name}: MISMATCH {str(exc).splitlines()[0:3]}")
    return failures


if __name__ == "__main__":
    sys.exit(1 if check(Path(sys.argv[1] if len(sys.argv) > 1 else ".bundles")) else 0)
