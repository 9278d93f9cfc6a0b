"""Llama-3.2-1B-shaped language models (random weights; f16, torchao int8 and int4 weights): decode
and prefill tokens/s per backend, vs torch (the `models` suite's measurement on model_zoo.llama_cases),
and the device memory each model uses there (issue 14: int4 ≤ 1.2 GB)."""

from __future__ import annotations

import copy

import torch

from ..backends import available_torch_backends, webgpu_adapter_is_cpu
from ..harness import Failure, Measurement, Settings, cpu_reference, summarize, time_figure
from ..model_zoo import llama_cases as model_cases
from .models import model_bundle_cases

MB = 1e6


def bundle_cases(settings: Settings, max_binding_bytes: int) -> list[tuple[str, torch.nn.Module, tuple]]:
    """(key, module, example inputs) of every model at the size a GPU run measures (seeded like `run`)."""
    return model_bundle_cases(model_cases(settings.smoke))


def _memory_counter(device: str):
    """(synchronize, reset peak, bytes allocated now, peak bytes) of a device's allocator, or None."""
    if device == "webgpu":
        import torch_webgpu.device as webgpu

        return (torch.webgpu.synchronize, webgpu.reset_peak_memory_stats, webgpu.memory_allocated,
                webgpu.max_memory_allocated)
    if device == "cuda":
        return (torch.cuda.synchronize, torch.cuda.reset_peak_memory_stats, torch.cuda.memory_allocated,
                torch.cuda.max_memory_allocated)
    return None


def memory_baseline(device: str) -> int | None:
    """Start counting a figure's device memory: the bytes already allocated (peak reset to them)."""
    counter = _memory_counter(device)
    if counter is None:
        return None
    sync, reset, allocated, _ = counter
    sync()
    reset()
    return allocated()


def memory_used(device: str, baseline: int | None) -> float | None:
    """MB of device memory allocated at the peak since `memory_baseline`, beyond it: the model's
    weights, its inputs (a decode's KV cache), outputs, activations and — on webgpu — every buffer of the
    compiled plan or bundle (they come from the same pool as tensors)."""
    counter = _memory_counter(device)
    if counter is None or baseline is None:
        return None
    sync, _, _, peak = counter
    sync()
    return (peak() - baseline) / MB


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """ms per call, items/s and device MB for each model on each backend (eval mode, no grad)."""
    # Full-size models on a software rasteriser take minutes per call.
    tiny = settings.smoke or webgpu_adapter_is_cpu(backends)
    results = []
    for case in model_cases(tiny):
        if not settings.wants(case.name):
            continue
        runnable = available_torch_backends(backends, settings.bundle_dir, host_io=True)
        if settings.past_deadline():
            # building a 1B-parameter model on the host costs ~15 s: not for figures that would be skipped
            settings.failures += [Failure("models", case.name, b.name, "skipped: time budget spent")
                                  for b in runnable]
            continue
        torch.manual_seed(0)
        model = case.build().eval()
        inputs = case.inputs()
        reference = _shared_reference(model, inputs)
        for backend in runnable:
            baseline = memory_baseline(backend.device)
            # A prepared bundle holds the weights itself (given from the module at load): the module stays
            # on the host, so its weights are not counted twice.
            bundled = backend.name == "webgpu-compiled" and settings.bundle_dir is not None
            # a copy per backend: torchao's weight subclasses cannot be swapped in place once a compiled
            # graph holds them (`_apply(): Couldn't swap Linear.weight`)
            placed = copy.deepcopy(model).to("cpu" if bundled else backend.device)
            args = tuple(t.to(backend.device) for t in inputs)
            with torch.no_grad():
                times = time_figure(settings, backend, "models", case.name, placed, f"model-{case.name}",
                                    args, profile=backend.name == "webgpu-compiled",
                                    reference=reference)
            if times is None:
                del placed, args
                continue
            params = {"items": case.items, "tiny": tiny}
            results.append(summarize("models", f"{case.name} latency", backend.name, "ms",
                                     [t * 1e3 for t in times], params))
            results.append(summarize("models", f"{case.name} throughput", backend.name, case.item_unit,
                                     [case.items / t for t in times], params))
            used = memory_used(backend.device, baseline)
            if used is not None:
                results.append(summarize("models", f"{case.name} device memory", backend.name, "MB", [used],
                                         {**params, "what": "peak allocated beyond the run's start: weights,"
                                          " inputs (KV cache), outputs, activations, plan buffers"}))
            del placed, args
    return results


def _shared_reference(model: torch.nn.Module, inputs: tuple):
    """cpu_reference of `model`, computed on first use and shared by every backend (a 1B-parameter
    model's CPU run costs seconds)."""
    memo: list[tuple] = []

    def reference() -> tuple:
        if not memo:
            memo.append(cpu_reference(model, inputs))
        return memo[0]
    return reference
