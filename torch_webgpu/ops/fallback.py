"""The boxed CPU fallback of the webgpu device (registered in C++), and its per-op statistics.

Any aten op without a webgpu kernel runs on the CPU: inputs are copied to the host, the CPU kernel runs,
results are copied back. The first use of each op warns; `TORCH_WEBGPU_FALLBACK=0` makes every such
op raise NotImplementedError naming it. Counts accumulate until reset_fallback_stats().
"""

from __future__ import annotations

from .. import _C


def fallback_stats() -> dict[str, int]:
    """Per-op counts ("aten::name.overload" -> runs) of ops that ran on the CPU since the last reset."""
    return dict(sorted(_C._fallback_counts().items()))


def reset_fallback_stats() -> None:
    """Forget the fallback counts."""
    _C._reset_fallback_counts()
