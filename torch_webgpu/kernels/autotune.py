"""Autotuning on the device that runs the code: candidates of a kernel family are timed once per
(kernel, shape class, layout class, dtype, device caps + driver) and the winner is cached on disk.

The cache is one JSON file, `autotune.json`, in TORCH_WEBGPU_AUTOTUNE_DIR, else next to the compile
cache (TORCH_WEBGPU_CACHE_DIR/autotune), else the platform's user cache dir. `TORCH_WEBGPU_AUTOTUNE=0`
uses each family's default variant; problems under TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS (default 2**28)
are never tuned, which keeps the first eager call of small ops cheap. Software adapters (lavapipe) tune
only with TORCH_WEBGPU_AUTOTUNE=1: their timings say nothing about a GPU and compiles cost seconds.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch_webgpu.config import AUTOTUNE, AUTOTUNE_DIR, AUTOTUNE_MIN_FLOPS, CACHE_DIR

from .launch import DeviceCaps, KernelLaunch, record

# Eager ops tune from about a quarter GFLOP: GPT-2 prefill's 128x768x3072 (0.6 GFLOP) kept its default tile
# under a 2**30 floor and ran 15% slower than the split-K form the H200's autotuner picks for it; smaller
# problems stay untuned so that the first call of each new small shape costs nothing extra.
DEFAULT_MIN_FLOPS = 1 << 28
# A compiled plan tunes each of its problems once where it loads (then the disk cache answers), so far
# smaller problems are worth it: at the eager floor ResNet-18's convolutions and every BERT/GPT-2 matmul
# kept the software adapter's default tile (49 workgroups on an H200's 132 SMs).
PLAN_MIN_FLOPS = 1 << 20
MAX_CANDIDATES = 6

_lock = threading.Lock()
_memory: dict[str, dict[str, Any]] = {}
_tunings = [0]  # problems whose candidates were timed, process-wide (see tunings())
_loaded_from: Path | None = None


def enabled() -> bool:
    """False when TORCH_WEBGPU_AUTOTUNE=0 (defaults only)."""
    return AUTOTUNE.read() != "off"


def min_flops(default: int = DEFAULT_MIN_FLOPS) -> int:
    """The FLOP count under which problems keep the default variant (TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS
    overrides `default`)."""
    value = AUTOTUNE_MIN_FLOPS.read()
    return default if value is None else value


def cache_file() -> Path:
    """Where the winners are kept."""
    own = AUTOTUNE_DIR.read()
    if own:
        return own / "autotune.json"
    compile_cache = CACHE_DIR.read()
    if compile_cache:
        return compile_cache / "autotune" / "autotune.json"
    import platformdirs

    return Path(platformdirs.user_cache_dir("torch-webgpu")) / "autotune" / "autotune.json"


def problem_key(kernel: str, problem: Any) -> str:
    """The device-independent part of a cache key: kernel, problem classes and dtype (compiled plans
    carry it, so the machine that loads them completes it with `device_key`)."""
    layout = problem.layout_class() if hasattr(problem, "layout_class") else ""
    return "|".join([kernel, problem.shape_class(), layout, str(getattr(problem, "dtype", ""))])


def device_key(problem: str, caps: DeviceCaps) -> str:
    """A `problem_key` completed with the device identity and driver."""
    return "|".join([problem, caps.key, caps.driver])


def tuning_key(kernel: str, problem: Any, caps: DeviceCaps) -> str:
    """The cache key: kernel, problem classes, dtype, device identity and driver."""
    return device_key(problem_key(kernel, problem), caps)


def tunes_on(caps: DeviceCaps) -> bool:
    """Whether candidates are timed on this device (hardware adapters unless TORCH_WEBGPU_AUTOTUNE=0;
    software adapters only with TORCH_WEBGPU_AUTOTUNE=1)."""
    setting = AUTOTUNE.read()
    return setting != "off" and (not caps.cpu or setting == "on")


def _entries() -> dict[str, dict[str, Any]]:
    global _loaded_from, _memory
    path = cache_file()
    if _loaded_from != path:
        _memory = {}
        try:
            _memory = json.loads(path.read_text())
        except (OSError, ValueError):
            _memory = {}
        _loaded_from = path
    return _memory


def tunings() -> int:
    """How many problems had their candidates timed so far in this process (a call that tuned ran timing
    dispatches and waits its later calls will not: eager launch plans tell the two apart by it)."""
    return _tunings[0]


def cached_choice(key: str) -> str | None:
    """The cached winner for `key`, if any."""
    with _lock:
        entry = _entries().get(key)
    return entry["variant"] if entry else None


def _store(key: str, variant: str, timings: Mapping[str, float]) -> None:
    with _lock:
        entries = _entries()
        entries[key] = {"variant": variant, "seconds": dict(timings)}
        path = cache_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".autotune-")
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f, indent=1, sort_keys=True)
        os.replace(tmp, path)


def choose(kernel: str, problem: Any, caps: DeviceCaps, candidates: Sequence[str],
           measure: Callable[[str], float]) -> str:
    """The variant to run: the cached winner, else (when enabled and the problem is big enough) the
    fastest of `candidates` by `measure(name) -> seconds`, cached; else the default `candidates[0]`."""
    if not candidates:
        raise ValueError(f"{kernel}: no candidate variants")
    if len(candidates) == 1 or not tunes_on(caps):
        return candidates[0]
    return pick(tuning_key(kernel, problem, caps), candidates, getattr(problem, "flops", 0), measure)


def pick(key: str, candidates: Sequence[str], flops: int, measure: Callable[[str], float],
         floor: int = DEFAULT_MIN_FLOPS) -> str:
    """The cached winner for `key` among `candidates`, else the fastest by `measure` (cached) when the
    problem has at least `min_flops(floor)`, else the default `candidates[0]`."""
    hit = cached_choice(key)
    if hit in candidates:
        return hit
    if len(candidates) == 1 or flops < min_flops(floor):
        return candidates[0]
    timings: dict[str, float] = {}
    _tunings[0] += 1
    for name in candidates[:MAX_CANDIDATES]:
        try:
            timings[name] = measure(name)
        except Exception:  # a candidate this driver cannot compile or run is not a winner
            timings[name] = float("inf")
    winner = min(timings, key=timings.__getitem__)
    if timings[winner] == float("inf"):
        return candidates[0]  # nothing ran: the default's own error surfaces when it is recorded
    _store(key, winner, timings)
    return winner


def time_launch(rt: Any, launch: KernelLaunch, operands: Mapping[str, Any], reps: int = 3) -> float:
    """Seconds of one run of `launch` on the device: the best of `reps` (after a warm-up that also
    compiles it), from timestamp queries when the device has them, else the wall clock around
    a synchronize."""
    return time_launches(rt, [launch], operands, reps)


def time_launches(rt: Any, launches: Sequence[KernelLaunch], operands: Mapping[str, Any],
                  reps: int = 3) -> float:
    """Seconds of one run of `launches` in order (a variant of several dispatches, e.g. split-K and its
    combine), measured as `time_launch` measures one."""
    from ..runtime.capture import unrecorded
    from ..runtime.profiling import now

    def run() -> None:
        for launch in launches:
            record(launch, operands, rt)

    with unrecorded():   # timing runs are no part of an eager call's launch plan
        run()
        rt.synchronize()
        best = float("inf")
        for _ in range(reps):
            if "timestamp-query" in rt.info.features:
                with rt.profile() as timings:
                    run()
                seconds = sum(t.seconds for t in timings) or float("inf")
            else:
                start = now()
                run()
                rt.synchronize()
                seconds = now() - start
            best = min(best, seconds)
    return best


def forget() -> None:
    """Drop the in-memory copy of the cache (the file is read again on next use)."""
    global _loaded_from
    with _lock:
        _loaded_from = None
