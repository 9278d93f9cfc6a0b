"""Wall time of each phase of compiling a graph and loading its plan, summed per process (the compiler's
phases and the plan's own: autotune, pipelines; benchmarks read it to say where compile time goes;
`TORCH_WEBGPU_COMPILE_TIMING=1` logs each graph's phases at INFO level)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from torch_webgpu.config import COMPILE_TIMING

log = logging.getLogger(__name__)

# phase name -> seconds since the last reset(); nested phases count in their own entry and their parent's
SECONDS: dict[str, float] = {}


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the wall time of the `with` body to phase `name`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        SECONDS[name] = SECONDS.get(name, 0.0) + time.perf_counter() - start


def reset() -> dict[str, float]:
    """The phases' seconds so far, then zero them."""
    taken = dict(SECONDS)
    SECONDS.clear()
    return taken


def log_enabled() -> bool:
    """True when TORCH_WEBGPU_COMPILE_TIMING=1."""
    return COMPILE_TIMING.read()


def log_phases(label: str, seconds: dict[str, float]) -> None:
    """Log `seconds` (a reset() result) under `label` when TORCH_WEBGPU_COMPILE_TIMING=1."""
    if log_enabled():
        log.info("%s: %s", label, ", ".join(f"{k} {v:.3f}s" for k, v in sorted(seconds.items(),
                                                                                 key=lambda kv: -kv[1])))
