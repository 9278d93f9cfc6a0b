"""Whole models with random weights: latency per call and items/s, per backend, vs torch."""

from __future__ import annotations

import torch

from ..backends import available_torch_backends
from ..harness import Measurement, Settings, summarize, time_repeats
from ..model_zoo import model_cases


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """ms per call and items/s for each model on each backend (eval mode, no grad)."""
    tiny = settings.smoke
    adapter_is_cpu = False
    if any(b.startswith("webgpu") for b in backends):
        from torch_webgpu.runtime import get_runtime

        adapter_is_cpu = get_runtime().info.adapter_type.upper() == "CPU"
    tiny = tiny or adapter_is_cpu  # full-size models on a software rasteriser take minutes per call
    results = []
    for case in model_cases(tiny):
        torch.manual_seed(0)
        model = case.build().eval()
        inputs = case.inputs()
        for backend in available_torch_backends(backends, settings.bundle_dir):
            placed = model.to(backend.device)
            args = tuple(t.to(backend.device) for t in inputs)
            try:
                fn = backend.wrap(placed, f"model-{case.name}")
            except Exception as exc:  # e.g. no prepared bundle for this model
                settings.record_failure("models", case.name, backend.name, exc)
                continue

            def call(fn=fn, args=args, backend=backend):
                with torch.no_grad():
                    fn(*args)
                backend.synchronize()

            try:
                times = time_repeats(call, settings)
            except Exception as exc:  # e.g. an op the compiler cannot lower yet
                settings.record_failure("models", case.name, backend.name, exc)
                continue
            params = {"items": case.items, "tiny": tiny}
            results.append(summarize("models", f"{case.name} latency", backend.name, "ms",
                                     [t * 1e3 for t in times], params))
            results.append(summarize("models", f"{case.name} throughput", backend.name, case.item_unit,
                                     [case.items / t for t in times], params))
        model.to("cpu")
    return results
