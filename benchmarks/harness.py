"""Timing and result records shared by every benchmark."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Measurement:
    """One figure: a benchmark on a backend, median/min/max over repeats, in `unit`."""

    suite: str
    name: str
    backend: str
    unit: str
    median: float
    minimum: float
    maximum: float
    repeats: int
    params: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


@dataclass
class Failure:
    """A figure that could not be measured, and why (reported, never silently dropped)."""

    suite: str
    name: str
    backend: str
    error: str


@dataclass
class Settings:
    """How hard to measure: `smoke` shrinks sizes and repeats to a CI-sized run."""

    smoke: bool = False
    repeats: int = 5
    warmup: int = 2
    failures: list[Failure] = field(default_factory=list)
    bundle_dir: Path | None = None  # prepared bundles for webgpu-compiled where the compiler is absent

    def record_failure(self, suite: str, name: str, backend: str, exc: BaseException) -> None:
        """Note that `name` on `backend` failed; the run goes on with the other figures."""
        # Dynamo wraps the backend's own error; report the innermost one, which names the op.
        while getattr(exc, "inner_exception", None) is not None or exc.__cause__ is not None:
            exc = getattr(exc, "inner_exception", None) or exc.__cause__
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        message = f"{type(exc).__name__}: {' '.join(lines[:3])}"
        self.failures.append(Failure(suite, name, backend, message[:400]))

    @property
    def effective_repeats(self) -> int:
        """Repeats actually run (1 in smoke mode)."""
        return 1 if self.smoke else max(5, self.repeats)


def time_repeats(fn: Callable[[], object], settings: Settings) -> list[float]:
    """Wall-clock seconds of `fn()` for each repeat, after warm-up calls."""
    for _ in range(1 if settings.smoke else settings.warmup):
        fn()
    times = []
    for _ in range(settings.effective_repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def summarize(suite: str, name: str, backend: str, unit: str, values: list[float],
              params: dict | None = None) -> Measurement:
    """A Measurement from per-repeat values already converted to `unit`."""
    return Measurement(suite, name, backend, unit, statistics.median(values), min(values), max(values),
                       len(values), params or {})


def time_figure(settings: Settings, backend, suite: str, name: str, module, key: str,
                args: tuple) -> list[float] | None:
    """Seconds per call of `module(*args)` wrapped for `backend` (and synchronised), per repeat.

    None when the figure cannot be measured; the failure is recorded in `settings` with its cause.
    """
    try:
        fn = backend.wrap(module, key)

        def call():
            fn(*args)
            backend.synchronize()

        return time_repeats(call, settings)
    except Exception as exc:  # e.g. an op the compiler cannot lower yet, or no prepared bundle
        settings.record_failure(suite, name, backend.name, exc)
        return None
