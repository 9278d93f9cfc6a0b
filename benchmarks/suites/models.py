"""Whole models with random weights: latency per call and items/s, per backend, vs torch."""

from __future__ import annotations

import torch

from ..backends import available_torch_backends, webgpu_adapter_is_cpu
from ..harness import Measurement, Settings, summarize, time_figure
from ..model_zoo import model_cases


def bundle_cases(settings: Settings, max_binding_bytes: int) -> list[tuple[str, torch.nn.Module, tuple]]:
    """(key, module, example inputs) of every model at the size a GPU run measures (seeded like `run`)."""
    return model_bundle_cases(model_cases(settings.smoke))


def model_bundle_cases(cases: list) -> list[tuple[str, torch.nn.Module, tuple]]:
    """(bundle key, module, example inputs) of model_zoo cases, each built under seed 0."""
    from ..bundled import bundle_key

    out = []
    for case in cases:
        torch.manual_seed(0)
        out.append((bundle_key(f"model-{case.name}"), case.build().eval(), case.inputs()))
    return out


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """ms per call and items/s for each model on each backend (eval mode, no grad)."""
    # Full-size models on a software rasteriser take minutes per call.
    tiny = settings.smoke or webgpu_adapter_is_cpu(backends)
    results = []
    for case in model_cases(tiny):
        torch.manual_seed(0)
        model = case.build().eval()
        inputs = case.inputs()
        for backend in available_torch_backends(backends, settings.bundle_dir, host_io=True):
            placed = model.to(backend.device)
            args = tuple(t.to(backend.device) for t in inputs)
            with torch.no_grad():
                times = time_figure(settings, backend, "models", case.name, placed, f"model-{case.name}",
                                    args, profile=backend.name == "webgpu-compiled")
            if times is None:
                continue
            params = {"items": case.items, "tiny": tiny}
            results.append(summarize("models", f"{case.name} latency", backend.name, "ms",
                                     [t * 1e3 for t in times], params))
            results.append(summarize("models", f"{case.name} throughput", backend.name, case.item_unit,
                                     [case.items / t for t in times], params))
        model.to("cpu")
    return results
