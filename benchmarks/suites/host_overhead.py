"""Host cost of a compiled call, Python plan executor vs the native one (issue 13).

The same compiled plan (a bundle: prepared in `--bundles` on GPU machines, else exported here) runs with
each executor on webgpu tensors, so outputs stay on the device and a call only records and submits:
- host CPU per call and per dispatch: this thread's CPU time (`time.thread_time`) over a batch of calls,
  so a software adapter's worker threads (lavapipe) are not counted;
- wall − GPU per call: one call plus `synchronize`, minus the GPU time of that call's dispatches (GPU
  timestamps; the profiled run takes the Python path, the kernels are the same). Only on a hardware
  adapter: on a software one (lavapipe) the "GPU" shares the host's cores and the difference means nothing.
Cases: the models suite's MLP and GPT-2 decode (the same bundle keys, so `prepare` already makes them);
smoke runs the MLP only.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from ..backends import webgpu_adapter_is_cpu
from ..harness import Measurement, Settings, profile_dispatches, summarize
from ..model_zoo import model_cases

EXECUTORS = ("python", "native")


def _cases(tiny: bool) -> list:
    return [c for c in model_cases(tiny)
            if c.name == "MLP" or (c.name.startswith("GPT-2") and "decode" in c.name)]


def _bundle(settings: Settings, key: str, module: Any, inputs: tuple, workdir: Path) -> Any:
    """The figure's bundle: the prepared one (GPU machines), else exported here for this adapter."""
    from torch_webgpu import export, load

    from ..bundled import bundle_key, model_weights

    if settings.bundle_dir is not None:
        return load(settings.bundle_dir / bundle_key(key), weights=model_weights(module))
    path = workdir / bundle_key(key)
    export(module, inputs, path)
    return load(path)


def _host_cpu(call: Any, n: int, repeats: int, synchronize: Any) -> list[float]:
    """Seconds of this thread's CPU per call, per repeat of `n` calls (the device drained in between)."""
    values = []
    for _ in range(repeats):
        synchronize()
        start = time.thread_time()
        for _ in range(n):
            call()
        values.append((time.thread_time() - start) / n)
        synchronize()
    return values


def _synced_wall(call: Any, repeats: int, synchronize: Any) -> list[float]:
    values = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        synchronize()
        values.append(time.perf_counter() - start)
    return values


def _measure(settings: Settings, case: Any, tiny: bool, workdir: Path, software: bool) -> list[Measurement]:
    torch.manual_seed(0)
    module = case.build().eval()
    inputs = case.inputs()
    with torch.no_grad():
        bundle = _bundle(settings, f"model-{case.name}", module, inputs, workdir)
    compiled = bundle._compiled
    args = tuple(t.to("webgpu") for t in inputs)
    sync = torch.webgpu.synchronize
    dispatches = compiled.plan.dispatch_count
    n = 3 if settings.smoke else (50 if tiny else 200)
    repeats = settings.effective_repeats
    gpu_ms = None
    results = []
    for executor in EXECUTORS:
        if executor == "native" and not _native_ready(compiled):
            settings.failures.append(_failure(case.name, executor, compiled))
            continue
        compiled.executor = executor

        def call():
            return bundle(*args)

        for _ in range(1 if settings.smoke else settings.warmup):
            call()
        sync()
        params = {"dispatches": dispatches, "calls_per_repeat": n, "tiny": tiny}
        host = _host_cpu(call, n, repeats, sync)
        results.append(summarize("host", f"{case.name} host CPU per call", f"plan-{executor}", "us",
                                 [t * 1e6 for t in host], params))
        results.append(summarize("host", f"{case.name} host CPU per dispatch", f"plan-{executor}", "us",
                                 [t * 1e6 / max(dispatches, 1) for t in host], params))
        wall = _synced_wall(call, repeats, sync)
        if gpu_ms is None and not software:
            profile = profile_dispatches(call, f"{case.name} ({executor} executor)", "webgpu-compiled")
            gpu_ms = profile.gpu_ms if profile.source == "timestamp" else None
            settings.profiles.append(profile)
        results.append(summarize("host", f"{case.name} wall per call (synchronised)", f"plan-{executor}",
                                 "us", [t * 1e6 for t in wall], params))
        if gpu_ms is not None:
            results.append(summarize("host", f"{case.name} wall - GPU per call", f"plan-{executor}", "us",
                                     [t * 1e6 - gpu_ms * 1e3 for t in wall], {**params, "gpu_ms": gpu_ms}))
    compiled.executor = "native" if _native_ready(compiled) else "python"
    module.to("cpu")
    return results


def _native_ready(compiled: Any) -> bool:
    from torch_webgpu.runtime.native import native_available

    return native_available(compiled.rt)


def _failure(name: str, executor: str, compiled: Any) -> Any:
    from torch_webgpu.runtime.native import unavailable_reason

    from ..harness import Failure

    return Failure("host", f"{name} host CPU per call", f"plan-{executor}",
                   f"native executor unavailable: {unavailable_reason()}")


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """Host µs per compiled call and per dispatch, and wall − GPU, for each plan executor."""
    if "webgpu-compiled" not in backends:
        return []
    software = webgpu_adapter_is_cpu(backends)
    tiny = settings.smoke or software
    cases = _cases(tiny)[:1] if settings.smoke else _cases(tiny)
    results = []
    with tempfile.TemporaryDirectory(prefix="host-overhead-") as tmp:
        for case in cases:
            try:
                results += _measure(settings, case, tiny, Path(tmp), software)
            except Exception as exc:  # e.g. no prepared bundle: reported, the other case still runs
                settings.record_failure("host", case.name, "webgpu-compiled", exc)
            finally:
                torch.compiler.reset()
    return results

