"""The GPU's clock beside a process: `nvidia-smi` sampled every 250 ms from outside it, and a summary.

A CUDA context raises an NVIDIA GPU's SM clock; without one the driver kept bursty Vulkan work at the idle
clock (345 MHz on an H100, /work/shared/design.md "Facts measured on 2026-12-07"). So every harness
process is sampled (`Sampler`), and the report gives per process the median, 5th and 95th percentile SM
clock and the share of samples at the idle clock (the GPU's lowest supported graphics clock). Nothing
here touches CUDA: nvidia-smi reads the GPU through NVML in its own process. Where there is no nvidia-smi
(no NVIDIA GPU, lavapipe), the summary says so.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import astuple, dataclass
from pathlib import Path

QUERY = "pstate,clocks.sm,clocks.mem,utilization.gpu"
PERIOD_MS = 250
IDLE_TOLERANCE = 1.05   # a sample within 5% of the idle clock counts as at it


@dataclass(frozen=True)
class Sample:
    """One nvidia-smi reading of one GPU, `t` in time.monotonic() seconds of the sampling process."""

    t: float
    index: int
    pstate: str
    sm_mhz: float | None
    mem_mhz: float | None
    util_pct: float | None


def _number(text: str) -> float | None:
    """"1980 MHz" -> 1980.0; "[N/A]" (a field the GPU does not report) -> None."""
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None


def parse_line(line: str, t: float) -> Sample | None:
    """A Sample of one `--query-gpu=index,<QUERY> --format=csv` line (None for the header or noise)."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 5 or not fields[0].isdigit():
        return None
    return Sample(t, int(fields[0]), fields[1], _number(fields[2]), _number(fields[3]), _number(fields[4]))


def nvidia_smi() -> str | None:
    """The nvidia-smi executable, or None where there is none (no NVIDIA driver)."""
    return shutil.which("nvidia-smi")


def idle_sm_clock() -> float | None:
    """The lowest graphics (SM) clock GPU 0 supports, which the driver holds it at when idle; None where
    nvidia-smi cannot say."""
    exe = nvidia_smi()
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, "-i", "0", "--query-supported-clocks=graphics",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    clocks = [_number(line) for line in done.stdout.splitlines()]
    clocks = [c for c in clocks if c]
    return min(clocks) if done.returncode == 0 and clocks else None


class Sampler:
    """`with Sampler() as s:` runs `nvidia-smi --query-gpu=index,pstate,clocks.sm,clocks.mem,utilization.gpu
    --format=csv -lms 250` while the block runs; `s.samples` holds what it printed, stamped on arrival."""

    def __init__(self, period_ms: int = PERIOD_MS):
        self.period_ms = period_ms
        self.samples: list[Sample] = []
        self.error: str | None = None
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._stderr = ""

    def __enter__(self) -> Sampler:
        exe = nvidia_smi()
        if exe is None:
            self.error = "not sampled: no nvidia-smi on this machine"
            return self
        command = [exe, f"--query-gpu=index,{QUERY}", "--format=csv", "-lms", str(self.period_ms)]
        try:
            self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                          bufsize=1)
        except OSError as exc:
            self.error = f"not sampled: nvidia-smi did not start ({exc})"
            return self
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            sample = parse_line(line, time.monotonic())
            if sample is not None:
                self.samples.append(sample)

    def __exit__(self, *exc) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            _, self._stderr = self._proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            _, self._stderr = self._proc.communicate()
        if self._reader is not None:
            self._reader.join(timeout=10)
        if not self.samples:
            self.error = f"no samples: nvidia-smi said {' '.join((self._stderr or '').split())[:300]!r}"

    def summary(self, idle_mhz: float | None, start: float | None = None, end: float | None = None) -> dict:
        """`summarize` of the samples taken between `start` and `end` (time.monotonic(); default: all)."""
        if self.error is not None:
            return {"error": self.error}
        window = [s for s in self.samples if (start is None or s.t >= start) and (end is None or s.t <= end)]
        return summarize(window, idle_mhz)

    def rows(self, origin: float) -> list[list]:
        """The samples as [seconds since `origin`, index, pstate, SM MHz, memory MHz, utilisation %]."""
        return [[round(s.t - origin, 3), *astuple(s)[1:]] for s in self.samples]


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summarize(samples: list[Sample], idle_mhz: float | None) -> dict:
    """Per GPU index: the number of samples, the SM clock's median / 5th / 95th percentile, the share of
    samples at the idle clock (within 5%; None where the idle clock is unknown), the P-states' shares,
    and the median memory clock and utilisation."""
    out: dict = {"idle_sm_mhz": idle_mhz, "period_ms": PERIOD_MS, "gpus": {}}
    for index in sorted({s.index for s in samples}):
        mine = [s for s in samples if s.index == index]
        sm = sorted(s.sm_mhz for s in mine if s.sm_mhz is not None)
        mem = [s.mem_mhz for s in mine if s.mem_mhz is not None]
        util = [s.util_pct for s in mine if s.util_pct is not None]
        states = [s.pstate for s in mine]
        gpu: dict = {"samples": len(mine),
                     "pstates": {p: round(states.count(p) / len(states), 3) for p in sorted(set(states))}}
        if sm:
            gpu.update(sm_mhz_median=statistics.median(sm), sm_mhz_p5=_percentile(sm, 0.05),
                       sm_mhz_p95=_percentile(sm, 0.95),
                       at_idle_share=None if idle_mhz is None else
                       round(sum(c <= idle_mhz * IDLE_TOLERANCE for c in sm) / len(sm), 3))
        if mem:
            gpu["mem_mhz_median"] = statistics.median(mem)
        if util:
            gpu["util_pct_median"] = statistics.median(util)
        out["gpus"][str(index)] = gpu
    if not samples:
        out["error"] = "no samples in this window"
    return out


def cuda_driver_loaded() -> bool:
    """Whether this process has mapped the CUDA driver (libcuda), which a CUDA context needs; read from
    /proc/self/maps (False where there is none, as on macOS)."""
    maps = Path("/proc/self/maps")
    try:
        return "libcuda.so" in maps.read_text()
    except OSError:
        return False
