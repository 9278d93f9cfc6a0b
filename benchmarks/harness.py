"""Timing and result records shared by every benchmark."""

from __future__ import annotations

import re
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
class DispatchProfile:
    """Where one call of a compiled figure spends GPU time: dispatch count and the costliest kernels."""

    name: str
    backend: str
    dispatches: int
    gpu_ms: float           # sum of per-dispatch GPU times
    wall_ms: float          # the same call's wall-clock time (the rest is host and submission overhead)
    source: str             # "timestamp" (GPU timestamp queries) or "wall-clock"
    top: list[tuple[str, int, float]] = field(default_factory=list)   # (kernel, dispatches, ms)
    # dispatch_kind -> [dispatches, GPU ms]: the kernel library's share against IREE's (absent in old runs)
    by_kind: dict[str, list] = field(default_factory=dict)


def dispatch_kind(label: str) -> str:
    """"library" for a kernel-library dispatch (eager: its variant name, e.g. "matmul.f32.tile64x64",
    "conv2d.…", "attention.…", "reduce.…", "rows.…"; in a compiled plan its entry point
    "lib_<variant, dots as underscores>_<digest>"), "iree" for an IREE executable's entry point
    ("main$async_dispatch_3_matmul_…"), "other" for the runtime's own helpers ("torch-webgpu-fill")."""
    if label.startswith("lib_"):
        return "library"
    if "$" in label or "dispatch_" in label:
        return "iree"
    family, dot, variant = label.partition(".")
    if dot and variant and family.replace("_", "").isalnum() and family[:1].isalpha():
        return "library"
    return "other"


@dataclass
class Settings:
    """How hard to measure: `smoke` shrinks sizes and repeats to a CI-sized run."""

    smoke: bool = False
    repeats: int = 5
    warmup: int = 2
    failures: list[Failure] = field(default_factory=list)
    profiles: list[DispatchProfile] = field(default_factory=list)
    bundle_dir: Path | None = None  # prepared bundles for webgpu-compiled where the compiler is absent
    check: bool = True              # compare each GPU figure's first output with torch CPU before timing
    deadline: float | None = None   # time.monotonic() past which figures are skipped (a device call's budget)
    only: str | None = None         # a regular expression: figures of other benchmark names are not run

    def wants(self, name: str) -> bool:
        """Whether figure `name` is to be measured at all (`only`)."""
        return self.only is None or re.search(self.only, name) is not None

    def past_deadline(self) -> bool:
        """True once the run's time budget is spent (figures after that are listed as skipped)."""
        return self.deadline is not None and time.monotonic() > self.deadline

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


def profile_dispatches(call: Callable[[], object], name: str, backend: str, top: int = 30) -> DispatchProfile:
    """Run `call` once under the runtime's per-dispatch GPU timer and summarise it by kernel (the `top`
    costliest kept in the JSON; the report shows the first five)."""
    from collections import Counter

    from torch_webgpu.runtime import get_runtime

    rt = get_runtime()
    start = time.perf_counter()
    with rt.profile() as timings:
        call()
    wall = time.perf_counter() - start
    counts, seconds = Counter(), Counter()
    by_kind: dict[str, list] = {}
    for t in timings:
        counts[t.label] += 1
        seconds[t.label] += t.seconds
        kind = by_kind.setdefault(dispatch_kind(t.label), [0, 0.0])
        kind[0] += 1
        kind[1] += t.seconds * 1e3
    ranked = [(label, counts[label], s * 1e3) for label, s in seconds.most_common(top)]
    source = timings[0].source if timings else "none"
    return DispatchProfile(name, backend, len(timings), sum(seconds.values()) * 1e3, wall * 1e3, source,
                           ranked, by_kind)


class OutputMismatch(AssertionError):
    """A figure's output differs from torch CPU's: it is not timed."""


def _first_tensor(result):
    while isinstance(result, (list, tuple)):
        result = result[0]
    return result


def cpu_reference(module, args: tuple) -> tuple:
    """The first output of `module(*args)` run by torch on the CPU (a copy of the module and inputs; f16
    and bf16 ones in f32, so the reference does not round where the GPU accumulates in f32), and the
    sum of the inputs' absolute values (a full reduction's tolerance scales with it)."""
    import copy

    import torch

    low = (torch.float16, torch.bfloat16)
    widen = any(isinstance(a, torch.Tensor) and a.dtype in low for a in args)
    ref = copy.deepcopy(module).to("cpu") if isinstance(module, torch.nn.Module) else module
    if widen and isinstance(ref, torch.nn.Module):
        ref = ref.float()
    cpu_args = tuple(a.cpu().float() if isinstance(a, torch.Tensor) and a.dtype in low
                     else a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
    try:
        with torch.no_grad():
            want = _first_tensor(ref(*cpu_args))
    except RuntimeError:
        if not (widen and isinstance(module, torch.nn.Module)):
            raise
        # a module that does not run in f32 (torchao's quantized weights keep f16 scales): as it is
        ref = copy.deepcopy(module).to("cpu")
        cpu_args = tuple(a.cpu() if isinstance(a, torch.Tensor) else a for a in args)
        with torch.no_grad():
            want = _first_tensor(ref(*cpu_args)).float()
    floats = [a for a in cpu_args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    magnitude = float(sum(a.abs().double().sum() for a in floats)) if want.dim() == 0 else 0.0
    return want, magnitude


def check_output(got, want, name: str, backend: str, magnitude: float = 0.0) -> None:
    """Raise OutputMismatch unless `got` (a device tensor or array) matches torch CPU's `want`; a full
    reduction (0-d `want`) may differ by 1e-5 of `magnitude`, the sum of its inputs' absolute values."""
    import torch

    got = torch.as_tensor(_first_tensor(got)).cpu()
    low = got.dtype in (torch.float16, torch.bfloat16)
    rtol, atol = (2e-2, 1e-1) if low else (2e-3, 2e-2)   # as check_bundles.py; f16 output rounding
    if want.dim() == 0:   # summation order: the error grows with the magnitudes summed, not the result
        atol = max(atol, 1e-5 * magnitude)
    try:
        torch.testing.assert_close(got.to(want.dtype) if got.is_floating_point() else got, want,
                                   rtol=rtol, atol=atol, check_dtype=False)
    except AssertionError as exc:
        raise OutputMismatch(f"{name} on {backend} differs from torch CPU: "
                             f"{' '.join(str(exc).splitlines()[:3])}") from None


def time_figure(settings: Settings, backend, suite: str, name: str, module, key: str,
                args: tuple, profile: bool = False, check: bool = True,
                reference: Callable[[], tuple] | None = None) -> list[float] | None:
    """Seconds per call of `module(*args)` wrapped for `backend` (and synchronised), per repeat; with
    `profile`, a webgpu figure is also run once under the per-dispatch GPU timer (`settings.profiles`).

    On a GPU backend the first call's output is compared with torch CPU first (`settings.check`; `check`
    False where the suite has just compared it itself); host backends are torch CPU itself or check
    themselves (ort-webgpu, IREE's .vmfb in check_bundles). `reference` (optional) returns
    cpu_reference's (want, magnitude) for a suite that shares one CPU run among its backends.
    None when the figure cannot be measured (or the run's time budget is spent); the failure is
    recorded in `settings` with its cause.
    """
    if not settings.wants(name):
        return None
    if settings.past_deadline():
        settings.failures.append(Failure(suite, name, backend.name, "skipped: time budget spent"))
        return None
    try:
        fn = backend.wrap(module, key)

        def call():
            fn(*args)
            backend.synchronize()

        if check and settings.check and backend.device != "cpu":
            want, magnitude = reference() if reference is not None else cpu_reference(module, args)
            got = fn(*args)
            backend.synchronize()
            check_output(got, want, name, backend.name, magnitude)
        times = time_repeats(call, settings)
        if profile and backend.device == "webgpu":
            settings.profiles.append(profile_dispatches(call, name, backend.name))
        return times
    except Exception as exc:  # e.g. an op the compiler cannot lower yet, or no prepared bundle
        settings.record_failure(suite, name, backend.name, exc)
        return None
