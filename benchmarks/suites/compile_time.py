"""torch.compile time with the webgpu backend, cold (empty compile cache) and cached (a new process's
view: dynamo reset, same disk cache), from the compile call to the first result.

Besides the MLP and BERT-tiny: issue 12's small transformers CNNs (ResNet, ConvNeXt, MobileNetV2 at
16-128 channels, 64x64, batch 1), each checked against torch on the CPU. A cold figure's params carry
where its time went (`phases`: torch-mlir import, IREE, SPIR-V to WGSL, pipelines... from
torch_webgpu.plan.phases; `dynamo+aot+first call`: the rest of the compile call; medians over the
repeats). The CNNs are also compiled cold in a new process (`python -m benchmarks.suites.compile_time
CASE`): what a script's first torch.compile costs, the lazy imports of dynamo, torch-mlir and IREE and
the first pipelines included (the model built and on the device before the clock starts)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from ..backends import compiler_available
from ..harness import Measurement, Settings, summarize
from ..model_zoo import ModelCase, cnn_cases, model_cases

MODELS = ("MLP", "BERT")
SMOKE_CNNS = ("ResNet",)   # one tiny CNN in smoke mode keeps CI fast


def _compile_and_run(model, args) -> tuple[float, dict[str, float], torch.Tensor]:
    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend
    from torch_webgpu.plan import phases

    torch.compiler.reset()
    phases.reset()
    start = time.perf_counter()
    compiled = torch.compile(model, backend=webgpu_backend)
    with torch.no_grad():
        out = compiled(*args)
    torch.webgpu.synchronize()
    seconds = time.perf_counter() - start
    taken = phases.reset()
    taken["dynamo+aot+first call"] = seconds - taken.get("backend", 0.0)
    return seconds, taken, out


def _cases(smoke: bool) -> list[tuple[ModelCase, bool]]:
    """(case, checked against CPU) for every model the suite compiles."""
    cases = [(c, False) for c in model_cases(tiny=True) if c.name.startswith(MODELS)]
    cnns = [c for c in cnn_cases(tiny=smoke) if not smoke or c.name.startswith(SMOKE_CNNS)]
    return cases + [(c, True) for c in cnns]


def _find_case(name: str) -> ModelCase:
    for tiny in (False, True):
        for case in cnn_cases(tiny):
            if case.name == name:
                return case
    raise KeyError(f"no CNN case named {name!r}")


def _new_process_cold(name: str) -> tuple[float, dict[str, float]]:
    """(seconds, phases) of compiling CNN case `name` cold in a fresh Python process (this module's
    main; the caller's TORCH_WEBGPU_CACHE_DIR, to be empty)."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks.suites.compile_time", name], check=True,
                          capture_output=True, text=True, timeout=900)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result["seconds"], result["phases"]


def main(name: str) -> None:
    """Compile CNN case `name` cold, check it against the CPU and print {"seconds", "phases"} as JSON."""
    import torch_webgpu  # noqa: F401  (registers the device)

    case = _find_case(name)
    torch.manual_seed(0)
    model = case.build().eval()
    inputs = case.inputs()
    with torch.no_grad():
        expected = model(*inputs)
    model, args = model.to("webgpu"), tuple(x.to("webgpu") for x in inputs)
    torch.webgpu.synchronize()
    seconds, taken, out = _compile_and_run(model, args)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-4, rtol=1e-4)
    print(json.dumps({"seconds": seconds, "phases": taken}))


def _median_phases(runs: list[dict[str, float]]) -> dict[str, float]:
    names = {k for r in runs for k in r}
    return {k: round(statistics.median(r.get(k, 0.0) for r in runs), 3) for k in sorted(names)}


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """Seconds to compile and first-run each model, cold and cached (small models: compile time is host
    time, the same on any GPU)."""
    if "webgpu-compiled" not in backends or not compiler_available():
        return []
    import torch_webgpu  # noqa: F401  (registers the device)

    repeats = 1 if settings.smoke else 3
    results = []
    old = os.environ.get("TORCH_WEBGPU_CACHE_DIR")
    try:
        for case, checked in _cases(settings.smoke):
            torch.manual_seed(0)
            model = case.build().eval()
            inputs = case.inputs()
            with torch.no_grad():
                expected = model(*inputs) if checked else None
            model = model.to("webgpu")
            args = tuple(x.to("webgpu") for x in inputs)
            cold, cached, cold_phases = [], [], []
            for _ in range(repeats):
                with tempfile.TemporaryDirectory(prefix="torch-webgpu-bench-cache-") as cache:
                    os.environ["TORCH_WEBGPU_CACHE_DIR"] = cache
                    seconds, taken, out = _compile_and_run(model, args)
                    if checked:
                        torch.testing.assert_close(out.cpu(), expected, atol=1e-4, rtol=1e-4)
                    cold.append(seconds)
                    cold_phases.append(taken)
                    cached.append(_compile_and_run(model, args)[0])
            params = {"tiny": True} if not checked else {"tiny": settings.smoke, "checked": "atol 1e-4"}
            results.append(summarize("micro", f"compile {case.name} (cold)", "webgpu-compiled", "s", cold,
                                     {**params, "phases": _median_phases(cold_phases)}))
            results.append(summarize("micro", f"compile {case.name} (cached)", "webgpu-compiled", "s",
                                     cached, params))
            if checked and not settings.smoke:
                fresh, fresh_phases = [], []
                for _ in range(repeats):
                    with tempfile.TemporaryDirectory(prefix="torch-webgpu-bench-cache-") as cache:
                        os.environ["TORCH_WEBGPU_CACHE_DIR"] = cache
                        seconds, taken = _new_process_cold(case.name)
                    fresh.append(seconds)
                    fresh_phases.append(taken)
                results.append(summarize("micro", f"compile {case.name} (cold, new process)",
                                         "webgpu-compiled", "s", fresh,
                                         {**params, "phases": _median_phases(fresh_phases)}))
    finally:
        torch.compiler.reset()
        if old is None:
            os.environ.pop("TORCH_WEBGPU_CACHE_DIR", None)
        else:
            os.environ["TORCH_WEBGPU_CACHE_DIR"] = old
    return results


if __name__ == "__main__":
    main(sys.argv[1])
