"""The processes of one harness run (`python -m benchmarks run`): the WebGPU backends in a process in which
the harness never touches CUDA, the CUDA references in their own process after it, merged into one report.

A CUDA context raises the GPU's clock, and a WebGPU user has none (/work/shared/design.md, "Facts measured
on 2026-12-07"), so the "webgpu" part (ours: dawn, wgpu, webgpu-compiled, webgpu-eager; IREE's Vulkan
runtime, ONNX Runtime's WebGPU EP, torch CPU) runs first, in a process that calls no `torch.cuda` function,
makes no CUDA tensor and, unless `--cuda-context` asks it to (`backends.start_cuda`, how every figure before
issue 42 was taken), opens no context; the "cuda" part (torch-cuda, inductor-cuda and the cuBLAS rows of the
library) runs next in a process of its own. Each part is `python -m benchmarks run ... --part NAME`; it
writes OUT/parts/NAME.json after every suite and merges every part so far into OUT/results.json, so a run
stopped from outside keeps its figures. nvidia-smi samples the GPU beside each part (`gpu_clock`); the
report gives each process's SM clock.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from . import gpu_clock
from .backends import CUDA_BACKENDS
from .harness import DispatchProfile, Failure, Measurement, Settings
from .report import autotune_choices, full_report, plot, run_metadata, write_json

PARTS = ("webgpu", "cuda")


@dataclass(frozen=True)
class Part:
    """One process of a run: its name, backends, and those of them run after every suite has run the rest."""

    name: str
    backends: list[str]
    late: list[str]


def split(backends: list[str], late: list[str]) -> list[Part]:
    """The run's parts in the order they run: the WebGPU process (every backend that is not CUDA's), then
    the CUDA one; a part without backends is left out."""
    cuda = [b for b in backends if b in CUDA_BACKENDS]
    webgpu = [b for b in backends if b not in CUDA_BACKENDS]
    return [Part(name, group, [b for b in late if b in group])
            for name, group in (("webgpu", webgpu), ("cuda", cuda)) if group]


def run_part(part: str, names: list[str], backends: list[str], late: list[str], settings: Settings, out: Path,
             budget: float | None, late_margin: float, late_only: str | None, cuda_context: bool) -> None:
    """This process's part of the run: every suite of `names` on the part's backends (the `late` ones
    after every suite has run the others), OUT/parts/<part>.json written after each suite."""
    start = time.monotonic()
    if cuda_context:
        from .backends import start_cuda

        start_cuda()
    results: list[Measurement] = []
    failed: list[str] = []
    passes = [[b for b in backends if b not in late], late]
    steps = [(name, group) for group in passes if group for name in names]
    meta: dict = {"part": part, "backends": backends, "late_backends": late, "cuda_context": cuda_context}
    described = False
    only = settings.only
    for name, group in tqdm(steps, desc=f"benchmarks ({part})", unit="suite"):
        if group is late:
            settings.only = late_only or only
            if budget is not None:
                settings.deadline = start + budget - late_margin
        module = importlib.import_module(f"benchmarks.suites.{name}")
        suite_start = time.monotonic()
        try:
            results.extend(module.run(settings, group))
        except Exception as exc:  # one broken suite must not hide the others' figures
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
            tqdm.write(f"suite {name} failed: {failed[-1]}")
        tqdm.write(f"suite {name} on {','.join(group)}: {time.monotonic() - suite_start:.1f} s "
                   f"(part {part} {time.monotonic() - start:.1f} s)")
        if not described:
            meta.update(_describe(part))
            described = True
        meta.update(failed_suites=failed, wall_s=round(time.monotonic() - start, 1))
        _write_part(out, part, results, meta, settings.failures, settings.profiles)
    autotune = autotune_choices() if part == "webgpu" else None
    meta.update(_process_state(), wall_s=round(time.monotonic() - start, 1))
    _write_part(out, part, results, meta, settings.failures, settings.profiles, autotune)


def _describe(part: str) -> dict:
    """Where this part's numbers come from: the WebGPU adapter, or the CUDA device (each asked only in
    its own process)."""
    if part == "webgpu":
        from torch_webgpu.runtime import get_runtime

        return run_metadata(get_runtime().info.describe())
    import torch

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
    return {**run_metadata(""), "cuda_device": device}


def _process_state() -> dict:
    """Whether CUDA reached this process: the driver mapped (a context needs it) and torch's own flag
    (`torch.cuda.is_initialized` reads a Python flag; it initialises nothing)."""
    torch = sys.modules.get("torch")
    return {"libcuda_loaded": gpu_clock.cuda_driver_loaded(),
            "torch_cuda_initialized": bool(torch is not None and torch.cuda.is_initialized())}


def _write_part(out: Path, part: str, results, meta, failures, profiles, autotune=None) -> None:
    (out / "parts").mkdir(parents=True, exist_ok=True)
    write_json(results, meta, out / "parts" / f"{part}.json", failures, profiles, autotune)
    doc = merge(out)
    write_json(doc["results"], doc["meta"], out / "results.json", doc["failures"], doc["profiles"],
               doc["autotune"])


def merge(out: Path) -> dict:
    """Every part written so far under OUT/parts, as one run: results (each figure's rows together, in the
    order the figures first appear), failures, profiles, the WebGPU part's autotuner choices, and meta
    with each part's own under "processes"."""
    docs = [json.loads(p.read_text()) for name in PARTS if (p := out / "parts" / f"{name}.json").is_file()]
    results = [Measurement(**r) for d in docs for r in d["results"]]
    order: dict[tuple, int] = {}
    for r in results:
        order.setdefault((r.suite, r.name), len(order))
    meta: dict = {}
    for d in docs:
        meta.update({k: v for k, v in d["meta"].items() if k in ("host", "python", "adapter", "cuda_device")
                     and v})
    meta["processes"] = [d["meta"] for d in docs]
    return {"results": sorted(results, key=lambda r: order[(r.suite, r.name)]),
            "failures": [Failure(**f) for d in docs for f in d.get("failures", [])],
            "profiles": [DispatchProfile(**p) for d in docs for p in d.get("profiles", [])],
            "autotune": next((d["autotune"] for d in docs if d.get("autotune") is not None), None),
            "meta": meta}


def run_all(argv: list[str], parts: list[Part], out: Path, budget: float | None, cuda_reserve: float,
            run_meta: dict) -> tuple[dict, list[str]]:
    """Run each part in a process of its own (`python -m benchmarks <argv> --part NAME ...`), nvidia-smi
    sampling the GPU beside each, and write the merged results.json, results.md and results.png.
    Returns the merged document and the failed suites and parts."""
    start = time.monotonic()
    for stale in (out / "parts").glob("*.json"):
        stale.unlink()
    idle = gpu_clock.idle_sm_clock()
    clocks, samples, problems = {}, {}, []
    for i, part in enumerate(parts):
        extra = ["--part", part.name, "--backends", ",".join(part.backends),
                 "--late-backends", ",".join(part.late)]
        if budget is not None:
            # the WebGPU part leaves `cuda_reserve` seconds to the CUDA references after it
            later = cuda_reserve if any(p.name == "cuda" for p in parts[i + 1:]) else 0.0
            extra += ["--budget", f"{max(30.0, budget - (time.monotonic() - start) - later):.1f}"]
        with gpu_clock.Sampler() as sampler:
            began = time.monotonic()
            code = subprocess.run([sys.executable, "-m", "benchmarks", *argv, *extra]).returncode
            ended = time.monotonic()
        clocks[part.name] = {**sampler.summary(idle, began, ended), "returncode": code,
                             "process_wall_s": round(ended - began, 1)}
        samples[part.name] = sampler.rows(start)
        if code != 0:
            problems.append(f"the {part.name} process exited with {code}")
    doc = merge(out)
    written = {process["part"] for process in doc["meta"]["processes"]}
    doc["meta"]["processes"] += [{"part": p.name, "backends": p.backends, "late_backends": p.late,
                                  "failed_suites": ["wrote no results"]}
                                 for p in parts if p.name not in written]
    for process in doc["meta"]["processes"]:
        process["gpu_clock"] = clocks.get(process["part"], {})
        problems += [f"{process['part']}: {f}" for f in process.get("failed_suites", [])]
    doc["meta"].update(run_meta, wall_s=round(time.monotonic() - start, 1))
    columns = ["s", "index", "pstate", "sm_mhz", "mem_mhz", "util_pct"]
    write_json(doc["results"], doc["meta"], out / "results.json", doc["failures"], doc["profiles"],
               doc["autotune"], extra={"gpu_samples": {"columns": columns, **samples}})
    table = full_report(doc["results"], doc["profiles"], doc["failures"], doc["autotune"],
                        doc["meta"]["processes"])
    (out / "results.md").write_text(table)
    plot(doc["results"], out / "results.png")
    print(table)
    return doc, problems
