"""f32 matrix multiply throughput (TFLOP/s), eager and compiled, against torch."""

from __future__ import annotations

import torch

from ..backends import available_torch_backends, webgpu_adapter_is_cpu
from ..harness import Measurement, Settings, summarize, time_figure


def sizes(settings: Settings, device: str, adapter_is_cpu: bool) -> list[int]:
    """Square sizes to measure: small in smoke mode and on software adapters / the CPU."""
    if settings.smoke:
        return [64]
    if device == "cpu" or (device == "webgpu" and adapter_is_cpu):
        return [256, 512, 1024]
    return [512, 1024, 2048, 4096]


class MatMul(torch.nn.Module):
    """`a @ b` as a module, for bundles."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def cases(settings: Settings, device: str, adapter_is_cpu: bool) -> list[tuple[str, str, tuple, torch.dtype]]:
    """(figure name, bundle key, (m, k, n), dtype): the square f32 sizes, and on GPUs issue 12's other two
    shapes, GPT-2 prefill's 128×768×3072 in f32 and 4096³ in f16."""
    out = [(f"matmul f32 {n}^3", f"matmul-{n}", (n, n, n), torch.float32)
           for n in sizes(settings, device, adapter_is_cpu)]
    if not settings.smoke and device != "cpu" and not (device == "webgpu" and adapter_is_cpu):
        out += [("matmul f32 prefill 128x768x3072", "matmul-prefill-128x768x3072", (128, 768, 3072),
                 torch.float32),
                ("matmul f16 4096^3", "matmul-f16-4096", (4096, 4096, 4096), torch.float16)]
    return out


def _operands(mkn: tuple, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """A [m, k] and B [k, n] of `dtype`, seeded by m (the square figures' seeds as before)."""
    m, k, n = mkn
    gen = torch.Generator().manual_seed(m)
    return torch.randn(m, k, generator=gen).to(dtype), torch.randn(k, n, generator=gen).to(dtype)


def bundle_cases(settings: Settings, max_binding_bytes: int) -> list[tuple[str, torch.nn.Module, tuple]]:
    """(key, module, example inputs) for every compiled figure, to prepare as bundles."""
    return [(key, MatMul(), _operands(mkn, dtype))
            for _, key, mkn, dtype in cases(settings, "gpu", False)]


LIBRARY_TOP = 8


def library_figures(settings: Settings) -> list[Measurement]:
    """The kernel library's matmul variants on the raw runtime (f32 and f16: 4096³, GPT-2 prefill
    128×768×3072 and decode 1×768×3072), each checked against a float64 reference before timing: the
    best variant per case as `webgpu-library` (every timed variant in its params). The first LIBRARY_TOP
    variants of each case are timed: the autotuner's candidates and two more (every variant of every case
    took ~165 s of a 470 s issue-12 run; `python -m benchmarks library matmul` times them all). torch
    CUDA's figures of the same cases are `library_cuda_figures`, taken in the CUDA process."""
    from ..library import matmul as library

    rows = library.figures(smoke=settings.smoke, reps=max(3, settings.repeats), verbose=False,
                           top=LIBRARY_TOP, cuda=False)
    return _library_measurements(settings, rows)


def library_cuda_figures(settings: Settings) -> list[Measurement]:
    """torch CUDA's (cuBLAS, TF32 off) figure of every case of `library_figures`, on the same operands,
    named like the library's rows; none without CUDA."""
    from ..library import matmul as library

    rows = library.cuda_rows(smoke=settings.smoke, reps=max(3, settings.repeats))
    return _library_measurements(settings, rows)


def _library_measurements(settings: Settings, rows: list[dict]) -> list[Measurement]:
    """Measurements of the library mode's rows: the best timed variant per (case, dtype) as
    `webgpu-library`, torch CUDA's row as `torch-cuda`; variants that failed are recorded as failures."""
    results = []
    for case, dtype in sorted({(r["case"], r["dtype"]) for r in rows}):
        mine = [r for r in rows if (r["case"], r["dtype"]) == (case, dtype)]
        name = f"matmul {dtype} {case} (library)"
        for r in mine:
            if "error" in r and r["variant"] != "-":
                settings.record_failure("micro", f"{name} {r['variant']}", "webgpu-library",
                                        RuntimeError(r["error"]))
        timed = [r for r in mine if "tflops" in r and r["variant"] != "torch-cuda"]
        if timed:
            best = max(timed, key=lambda r: r["tflops"])
            results.append(summarize("micro", name, "webgpu-library", "TFLOP/s", [best["tflops"]],
                                     {"variant": best["variant"],
                                      "variants": {r["variant"]: round(r["tflops"], 3) for r in timed}}))
        for r in mine:
            if r["variant"] == "torch-cuda":
                results.append(summarize("micro", name, "torch-cuda", "TFLOP/s", [r["tflops"]]))
    return results


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """TFLOP/s of an n×n×n f32 matmul per backend (and the library's variants with `dawn`, torch CUDA's
    figures of the same cases with `torch-cuda`)."""
    results = []
    for wanted, figures, label in (("dawn", library_figures, "webgpu-library"),
                                   ("torch-cuda", library_cuda_figures, "torch-cuda")):
        if wanted in backends:
            try:
                results += figures(settings)
            except Exception as exc:  # the library figures must not stop the torch backends' figures
                settings.record_failure("micro", "matmul (library)", label, exc)
    adapter_is_cpu = webgpu_adapter_is_cpu(backends)
    for backend in available_torch_backends(backends, settings.bundle_dir):
        for name, key, mkn, dtype in cases(settings, backend.size_class, adapter_is_cpu):
            args = tuple(t.to(backend.device) for t in _operands(mkn, dtype))
            times = time_figure(settings, backend, "micro", name, MatMul(), key, args,
                                profile=backend.name == "webgpu-compiled")
            if times is not None:
                m, k, n = mkn
                results.append(summarize("micro", name, backend.name, "TFLOP/s",
                                         [2.0 * m * k * n / t / 1e12 for t in times],
                                         {"n": n, "m": m, "k": k}))
    return results
