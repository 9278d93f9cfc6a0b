"""What moves the GPU's clock without a CUDA context: a fixed workload, one fresh process per variant, the SM
clock sampled beside each.

`python -m benchmarks latency clock [--variants as-is,unpinned,feed,feed-own-device,cuda-context,
cuda-context-first,nvml] [--workloads gpt2-decode,matmul] [--seconds 5] [--gap-ms 0] [--feed-ms 2000]
[--feed-period-us 200] [--settle-s 3] [--bundles DIR] [--eager] [--json FILE]`

Without a CUDA context the driver kept an H100's SM clock at 345 MHz for our bursty Vulkan work, and a
context (`benchmarks.backends.start_cuda`) raised it to 1,980 MHz (/work/shared/design.md, "Facts measured
on 2026-12-07"; issue 42). Each variant runs in a process of its own, after `--settle-s` seconds of idle,
with nvidia-smi sampling the GPU every 250 ms beside it (benchmarks/gpu_clock.py):

- `as-is`: the workloads alone, as the runtime runs them by default (on NVIDIA it pins the clock with a CUDA
  primary context of its own: torch_webgpu/runtime/clock_pin.py).
- `unpinned`: the same with `TORCH_WEBGPU_PIN_CLOCK=0`; every variant below runs unpinned too, so that each
  tests its own mechanism.
- `feed`: a thread dispatches a tiny kernel and submits it every `--feed-period-us` on the workloads' own
  device, from `--feed-ms` before the timing until its end (the runtime's lock keeps it to the gaps between
  the workloads' calls and waits).
- `feed-own-device`: the same from a second Dawn device of the process, so the feed runs during the
  workloads' GPU work too.
- `cuda-context`: a CUDA primary context opened through ctypes on libcuda.so.1 (the runtime's
  `CudaPrimaryContext` without its lean limits, as torch opens one) once the workloads are built, with its
  device memory (nvidia-smi's per-process used memory, and the GPU's used memory before and after);
  `cuda-context-lean` the same with the runtime's lean limits (what `as-is` holds).
- `cuda-context-first`: the same, opened before the WebGPU device exists (as `start_cuda` did).
- `nvml`: NVML's read-only queries through ctypes on libnvidia-ml.so.1, every 100 ms during the timing: SM
  clock, P-state and the clock event reasons (nvmlDeviceGetCurrentClocksEventReasons).

Workloads: `gpt2-decode`, the models suite's GPT-2 small decode step (tiny on a software adapter) from its
bundle in `--bundles`, else torch.compile with our backend where the compiler is, else eager (`--eager`
forces eager), in tokens/s; `matmul`, a synchronised eager 256×256 f32 matmul, in µs per call. Both are
checked against torch CPU first, then called for `--seconds` each, back to back or, with `--gap-ms`, that
long apart (interactive use: a frame or a request at a time; the gaps are not timed). One row per
variant: whether it applied (and why not), each workload's figure with the SM clock of its timed window,
the clock of the settle period and of the whole process, the raw samples, what the variant itself read,
the runtime's clock pin, and whether libcuda was mapped into the process by the end. Without an NVIDIA GPU
the clock is not sampled and `cuda-context` and `nvml` say why they cannot apply; the rest is timed on the
adapter there is (lavapipe).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .. import gpu_clock
from ..json_rows import Option, comma_list, emit, rows_main

VARIANTS = ("as-is", "unpinned", "feed", "feed-own-device", "cuda-context", "cuda-context-lean",
            "cuda-context-first", "nvml")
WORKLOADS = ("gpt2-decode", "matmul")
TINY_WGSL = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { x[g.x] = x[g.x] + 1.0; }
"""
# nvmlClocksEventReasons bits (nvml.h)
CLOCK_EVENT_REASONS = {0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap",
                       0x8: "HwSlowdown", 0x10: "SyncBoost", 0x20: "SwThermalSlowdown",
                       0x40: "HwThermalSlowdown", 0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting"}
NVML_CLOCK_SM = 1


class Unavailable(RuntimeError):
    """A variant that cannot apply on this machine (no NVIDIA driver library, a call that failed)."""


# ---- the workloads ------------------------------------------------------------------------------------

def _gpt2_decode(bundles: Path | None, eager: bool) -> tuple[Callable[[], None], dict]:
    """One synchronised GPT-2 decode step (checked against torch CPU) and what it is."""
    import torch

    from ..backends import available_torch_backends, webgpu_adapter_is_cpu
    from ..harness import check_output, cpu_reference
    from ..model_zoo import model_cases

    tiny = webgpu_adapter_is_cpu(["webgpu-eager"])
    case = next(c for c in model_cases(tiny) if "decode" in c.name)
    torch.manual_seed(0)
    model, inputs = case.build().eval(), case.inputs()
    want, magnitude = cpu_reference(model, inputs)
    candidates = [] if eager else available_torch_backends(["webgpu-compiled"], bundles)
    backend = (candidates or available_torch_backends(["webgpu-eager"]))[0]
    fn = backend.wrap(model.to("webgpu"), f"model-{case.name}")
    args = tuple(t.to("webgpu") for t in inputs)

    def call() -> None:
        with torch.no_grad():
            fn(*args)
        torch.webgpu.synchronize()
    with torch.no_grad():
        check_output(fn(*args), want, case.name, backend.name, magnitude)
    return call, {"name": case.name, "backend": backend.name, "unit": "tokens/s", "items": case.items}


def _matmul(bundles: Path | None, eager: bool) -> tuple[Callable[[], None], dict]:
    """One synchronised eager 256×256 f32 matmul (checked against torch CPU) and what it is."""
    import torch

    gen = torch.Generator().manual_seed(256)
    a, b = torch.randn(256, 256, generator=gen), torch.randn(256, 256, generator=gen)
    da, db = a.to("webgpu"), b.to("webgpu")
    torch.testing.assert_close((da @ db).cpu(), a @ b, rtol=1e-3, atol=1e-3)

    def call() -> None:
        da @ db
        torch.webgpu.synchronize()
    return call, {"name": "eager matmul f32 256^3 (synchronised)", "backend": "webgpu-eager", "unit": "us"}


BUILDERS = {"gpt2-decode": _gpt2_decode, "matmul": _matmul}


def _timed(call: Callable[[], None], seconds: float, gap_ms: float = 0.0) -> tuple[list[float], float, float]:
    """Seconds per call of `call` for `seconds` (at least 3 calls, `gap_ms` apart), and the window
    (time.monotonic())."""
    times = []
    start = time.monotonic()
    while len(times) < 3 or time.monotonic() - start < seconds:
        if gap_ms and times:
            time.sleep(gap_ms / 1e3)
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times, start, time.monotonic()


# ---- the variants -------------------------------------------------------------------------------------

class Feeder:
    """A thread that dispatches a tiny kernel and submits it every `period_us` on runtime `rt` (waiting for
    its queue every 100 submits where the device is its own)."""

    def __init__(self, rt, period_us: float, own_device: bool):
        self.rt, self.period, self.own = rt, period_us * 1e-6, own_device
        self.kernel = rt.kernel(TINY_WGSL, label="clock-feed")
        self.buf = rt.allocate(256)
        rt.fill(self.buf, 0)
        self.submits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        next_tick = time.perf_counter()
        while not self._stop.is_set():
            self.rt.dispatch(self.kernel, [self.buf], (1,))
            self.rt.flush()
            self.submits += 1
            if self.own and self.submits % 100 == 0:
                self.rt.synchronize()
            next_tick += self.period
            delay = next_tick - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            else:
                next_tick = time.perf_counter()

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.rt.synchronize()


class Nvml:
    """Read-only NVML queries of GPU `index` through ctypes on libnvidia-ml.so.1."""

    def __init__(self, index: int = 0):
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            raise Unavailable(f"libnvidia-ml.so.1 cannot be loaded (no NVIDIA driver?): {exc}") from None
        self.lib.nvmlErrorString.restype = ctypes.c_char_p
        self._check("nvmlInit_v2", self.lib.nvmlInit_v2())
        self.handle = ctypes.c_void_p()
        self._check("nvmlDeviceGetHandleByIndex_v2",
                    self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self.handle)))
        try:   # the name since driver 535; "throttle reasons" before
            self._reasons = self.lib.nvmlDeviceGetCurrentClocksEventReasons
        except AttributeError:
            self._reasons = self.lib.nvmlDeviceGetCurrentClocksThrottleReasons

    def _check(self, name: str, code: int) -> None:
        if code != 0:
            raise Unavailable(f"{name} failed: {self.lib.nvmlErrorString(code).decode()} ({code})")

    def read(self) -> dict:
        """The SM clock (MHz), P-state and clock event reasons now."""
        clock, pstate, reasons = ctypes.c_uint(), ctypes.c_int(), ctypes.c_ulonglong()
        self._check("nvmlDeviceGetClockInfo",
                    self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM, ctypes.byref(clock)))
        self._check("nvmlDeviceGetPerformanceState",
                    self.lib.nvmlDeviceGetPerformanceState(self.handle, ctypes.byref(pstate)))
        self._check("nvmlDeviceGetCurrentClocksEventReasons",
                    self._reasons(self.handle, ctypes.byref(reasons)))
        names = [name for bit, name in CLOCK_EVENT_REASONS.items() if reasons.value & bit]
        return {"t": time.monotonic(), "sm_mhz": clock.value, "pstate": f"P{pstate.value}",
                "reasons": names, "reasons_mask": reasons.value}

    def close(self) -> None:
        """nvmlShutdown (NVML counts its initialisations)."""
        self.lib.nvmlShutdown()


@contextlib.contextmanager
def _polling(nvml: Nvml, period_s: float, readings: list[dict]) -> Iterator[None]:
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            readings.append(nvml.read())
            stop.wait(period_s)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def _smi(*query: str) -> list[str]:
    """nvidia-smi's CSV lines (no header, no units) for `query`, or none where it is absent or fails."""
    exe = gpu_clock.nvidia_smi()
    if exe is None:
        return []
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        done = subprocess.run([exe, *query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=30)
        if done.returncode == 0:
            return [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return []


def _device_memory() -> dict:
    """The GPU's used memory (MiB, nvidia-smi) and every compute process's with its pid (this one's pid
    beside: in a container nvidia-smi may show host pids)."""
    used = _smi("-i", "0", "--query-gpu=memory.used")
    return {"gpu_used_mib": float(used[0]) if used else None,
            "compute_apps": [line.split(", ") for line in _smi("--query-compute-apps=pid,used_memory")],
            "pid": os.getpid()}


# ---- one variant's process ----------------------------------------------------------------------------

def _open_context(lean: bool = False):
    """A CUDA primary context (the runtime's clock pin, `lean` limits or torch's defaults), and the device
    memory nvidia-smi saw before and after it was opened."""
    from torch_webgpu.runtime.clock_pin import ClockPinUnavailable, CudaPrimaryContext

    before = _device_memory()
    try:
        context = CudaPrimaryContext(lean=lean)
    except ClockPinUnavailable as exc:
        raise Unavailable(str(exc)) from None
    return context, {"before": before, "after": _device_memory(), "lean": lean}


def child(variant: str, workloads: list[str], seconds: float, feed_ms: float, feed_period_us: float,
          bundles: Path | None, eager: bool, gap_ms: float = 0.0) -> dict:
    """Build the workloads, apply `variant`, time each workload; what happened, with monotonic windows."""
    out: dict = {"variant": variant, "pid": os.getpid(), "started": time.monotonic(), "applied": True,
                 "workloads": []}
    context = None
    if variant == "cuda-context-first":   # before the WebGPU device exists
        try:
            context, out["cuda_context"] = _open_context()
        except Unavailable as exc:
            return {**out, "applied": False, "reason": str(exc), "ended": time.monotonic()}
    import torch_webgpu  # noqa: F401  (registers the device)
    from torch_webgpu.runtime import Runtime, get_runtime

    out["adapter"] = get_runtime().info.describe().splitlines()[0]
    out["clock_pin"] = get_runtime().clock_pin.describe()
    prepared = []
    for name in workloads:
        call, info = BUILDERS[name](bundles, eager)
        for _ in range(3):   # compile, tune, first calls
            call()
        prepared.append((name, call, info))
    with contextlib.ExitStack() as stack:
        if context is not None:
            stack.callback(context.release)
        try:
            if variant in ("feed", "feed-own-device"):
                rt = Runtime(backend="dawn") if variant == "feed-own-device" else get_runtime()
                feeder = stack.enter_context(Feeder(rt, feed_period_us, own_device=variant != "feed"))
                time.sleep(feed_ms / 1e3)
            elif variant in ("cuda-context", "cuda-context-lean"):
                context, out["cuda_context"] = _open_context(lean=variant == "cuda-context-lean")
                stack.callback(context.release)
            elif variant == "nvml":
                nvml = Nvml()
                stack.callback(nvml.close)
                readings: list[dict] = [nvml.read()]
                out["nvml"] = readings
                stack.enter_context(_polling(nvml, 0.1, readings))
        except Unavailable as exc:
            out.update(applied=False, reason=str(exc))
            prepared = []
        for name, call, info in prepared:
            times, start, end = _timed(call, seconds, gap_ms)
            per_call = statistics.median(times)
            value = info["items"] / per_call if info["unit"] == "tokens/s" else per_call * 1e6
            out["workloads"].append({"workload": name, **{k: v for k, v in info.items() if k != "items"},
                                     "value": value, "calls": len(times), "window": [start, end]})
        if variant.startswith("feed"):
            out["feed"] = {"submits": feeder.submits, "period_us": feed_period_us, "before_ms": feed_ms}
    out["ended"] = time.monotonic()
    out["libcuda_loaded"] = gpu_clock.cuda_driver_loaded()   # True only where a variant opened CUDA
    return out


# ---- the variants side by side ------------------------------------------------------------------------

def run(variants: list[str], workloads: list[str], seconds: float, feed_ms: float, feed_period_us: float,
        settle_s: float, bundles: Path | None, eager: bool, gap_ms: float = 0.0,
        child_variant: str | None = None, child_out: Path | None = None) -> list[dict]:
    """One row per variant (see the module docstring); `child_variant`: this is one variant's process, which
    writes its result to `child_out` for the parent to read beside its samples (and returns no rows)."""
    unknown = sorted(set(variants) - set(VARIANTS)) + sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        raise SystemExit(f"unknown variants or workloads {unknown}; variants: {VARIANTS}, "
                         f"workloads: {WORKLOADS}")
    if child_variant is not None:
        result = child(child_variant, workloads, seconds, feed_ms, feed_period_us, bundles, eager, gap_ms)
        Path(child_out).write_text(json.dumps(result))
        return []
    idle = gpu_clock.idle_sm_clock()
    rows = []
    for variant in variants:
        with tempfile.TemporaryDirectory() as tmp, gpu_clock.Sampler() as sampler:
            origin = time.monotonic()
            time.sleep(settle_s)
            command = [sys.executable, "-m", "benchmarks", "latency", "clock", "--child-variant", variant,
                       "--child-out", f"{tmp}/child.json", "--workloads", ",".join(workloads),
                       "--seconds", str(seconds), "--gap-ms", str(gap_ms), "--feed-ms", str(feed_ms),
                       "--feed-period-us", str(feed_period_us),
                       *(["--bundles", str(bundles)] if bundles else []), *(["--eager"] if eager else [])]
            began = time.monotonic()
            # every variant but the runtime's default runs unpinned, testing its own mechanism
            env = os.environ | ({} if variant == "as-is" else {"TORCH_WEBGPU_PIN_CLOCK": "0"})
            code = subprocess.run(command, env=env).returncode
            ended = time.monotonic()
            result = json.loads((Path(tmp) / "child.json").read_text()) if code == 0 else {
                "variant": variant, "applied": False, "reason": f"its process exited with {code}",
                "workloads": []}
        # time.monotonic() is CLOCK_MONOTONIC on Linux, one clock for every process: the child's windows
        # select the samples taken here
        for w in result["workloads"]:
            w["clock"] = sampler.summary(idle, *w["window"])
            w["window"] = [round(t - origin, 3) for t in w["window"]]
        row = {**{k: v for k, v in result.items() if k not in ("started", "ended")}, "returncode": code,
               "settle_clock": sampler.summary(idle, origin, began),
               "clock": sampler.summary(idle, began, ended), "samples": sampler.rows(origin),
               "sample_columns": ["s", "index", "pstate", "sm_mhz", "mem_mhz", "util_pct"]}
        if "nvml" in row:
            row["nvml"] = _nvml_summary(row["nvml"], origin)
        rows.append(emit(row))
    return rows


def _nvml_summary(readings: list[dict], origin: float) -> dict:
    """NVML's readings (times from `origin`) and the share of them that named each clock event reason."""
    reasons: dict[str, float] = {}
    for r in readings:
        r["t"] = round(r["t"] - origin, 3)
        for name in r["reasons"]:
            reasons[name] = reasons.get(name, 0) + 1 / len(readings)
    return {"readings": readings, "reason_shares": {k: round(v, 3) for k, v in sorted(reasons.items())}}


def summary(rows: list[dict]) -> list[str]:
    """One line per (variant, workload): its figure and the SM clock of its timed window."""
    lines = []
    for row in rows:
        if not row.get("applied", True):
            lines.append(f"{row['variant']}: not applied: {row.get('reason')}")
        for w in row.get("workloads", []):
            clock = w.get("clock", {})
            gpu = next(iter(clock.get("gpus", {}).values()), {})
            sm = (f"SM {gpu['sm_mhz_median']:.0f} MHz, {100 * (gpu.get('at_idle_share') or 0):.0f}% at idle"
                  if "sm_mhz_median" in gpu else clock.get("error", "no clock"))
            lines.append(f"{row['variant']}: {w['workload']} ({w['backend']}) {w['value']:.4g} {w['unit']} "
                         f"over {w['calls']} calls; {sm}")
    return lines


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: one row per variant, and a line per (variant, workload)."""
    rows_main(run, __doc__, argv, prog, summary=summary, cuda_context=False,
              variants=Option(list(VARIANTS), "comma-separated, of " + ", ".join(VARIANTS), comma_list()),
              workloads=Option(list(WORKLOADS), "comma-separated, of " + ", ".join(WORKLOADS), comma_list()),
              seconds=Option(5.0, "timed seconds per workload"),
              gap_ms=Option(0.0, "idle milliseconds between timed calls (0: back to back)"),
              feed_ms=Option(2000.0, "feed variants: milliseconds of feed before the timing"),
              feed_period_us=Option(200.0, "feed variants: microseconds between tiny submits"),
              settle_s=Option(3.0, "idle seconds before each variant's process (the clock falls back)"),
              bundles=Option(None, "prepared bundles (the GPT-2 decode figure's)", Path),
              eager=Option(False, "run the GPT-2 decode step eagerly"),
              child_variant=Option(None, argparse.SUPPRESS, choices=VARIANTS),
              child_out=Option(None, argparse.SUPPRESS, Path))
