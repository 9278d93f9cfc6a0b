"""torch.compile time with the webgpu backend, cold (empty compile cache) and cached (a new process's
view: dynamo reset, same disk cache), from the compile call to the first result."""

from __future__ import annotations

import os
import tempfile
import time

import torch

from ..backends import compiler_available
from ..harness import Measurement, Settings, summarize
from ..model_zoo import model_cases

MODELS = ("MLP", "BERT")


def _compile_and_run(model, args) -> float:
    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend

    torch.compiler.reset()
    start = time.perf_counter()
    compiled = torch.compile(model, backend=webgpu_backend)
    with torch.no_grad():
        compiled(*args)
    torch.webgpu.synchronize()
    return time.perf_counter() - start


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """Seconds to compile and first-run each model, cold and cached (tiny models: compile time is host
    time, the same on any GPU)."""
    if "webgpu-compiled" not in backends or not compiler_available():
        return []
    import torch_webgpu  # noqa: F401  (registers the device)

    repeats = 1 if settings.smoke else 3
    results = []
    old = os.environ.get("TORCH_WEBGPU_CACHE_DIR")
    try:
        for case in model_cases(tiny=True):
            if not case.name.startswith(MODELS):
                continue
            torch.manual_seed(0)
            model = case.build().eval().to("webgpu")
            args = tuple(x.to("webgpu") for x in case.inputs())
            cold, cached = [], []
            for _ in range(repeats):
                with tempfile.TemporaryDirectory(prefix="torch-webgpu-bench-cache-") as cache:
                    os.environ["TORCH_WEBGPU_CACHE_DIR"] = cache
                    cold.append(_compile_and_run(model, args))
                    cached.append(_compile_and_run(model, args))
            for label, values in (("cold", cold), ("cached", cached)):
                results.append(summarize("micro", f"compile {case.name} ({label})", "webgpu-compiled", "s",
                                         values, {"tiny": True}))
    finally:
        torch.compiler.reset()
        if old is None:
            os.environ.pop("TORCH_WEBGPU_CACHE_DIR", None)
        else:
            os.environ["TORCH_WEBGPU_CACHE_DIR"] = old
    return results
