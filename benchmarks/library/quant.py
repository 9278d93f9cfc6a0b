"""The kernel library's quantized-weight matmul variants on the raw runtime (no eager device, no
torch_webgpu._C), each checked against a float64 reference before it is timed, and torch CUDA's dense
f16 matmul of the same shape after them (same run).

`python -m benchmarks library quant [--smoke] [--only SUBSTR,...] [--json FILE]`: the Llama-3.2-1B
prefill GEMMs (1,024 tokens) with torchao's int4 (group 32, zero points) and int8 (per channel) weights
and f16 activations, TFLOP/s from GPU timestamps per variant.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from ..json_rows import Option, rows_main
from .matmul import _import_library, cuda_event_seconds, measure_row, one_launch

# (label, M, N, K): Llama-3.2-1B's q/o, k/v, gate/up and down projections over a 1,024-token prompt
CASES = [("prefill 1024x2048x2048", 1024, 2048, 2048), ("prefill 1024x512x2048", 1024, 512, 2048),
         ("prefill 1024x8192x2048", 1024, 8192, 2048), ("prefill 1024x2048x8192", 1024, 2048, 8192)]
SMOKE_CASES = [("prefill 40x48x64", 40, 48, 64)]
FORMATS = {"i4g32z": ("i4", 32, True), "i8": ("i8", None, False)}   # group None: per channel


def _weights(rng, n: int, k: int, fmt: str, group: int, zero: bool):
    """q [N, K] in the format's range, zero points [N, G] (or None), f16 scales [N, G]."""
    lo, hi = (-8, 7) if fmt == "i4" else (-128, 127)
    q = rng.integers(lo, hi + 1, (n, k), dtype=np.int8)
    z = rng.integers(lo, hi + 1, (n, k // group), dtype=np.int8) if zero else None
    s = (rng.random((n, k // group), dtype=np.float32) * 0.05 + 0.01).astype(np.float16)
    return q, z, s


def figures(smoke: bool = False, reps: int = 10, only: str | None = None, verbose: bool = True) -> list[dict]:
    """One row per (case, format, variant) with TFLOP/s and the check's error, then torch CUDA's rows
    (after every library row: no CUDA context exists before those)."""
    runtime, kernels, mm = _import_library()
    import importlib

    qm = importlib.import_module("torch_webgpu.kernels.quant_matmul")
    rt = runtime.get_runtime()
    caps = kernels.DeviceCaps.from_runtime(rt)
    rows: list[dict] = []
    rng = np.random.default_rng(0)
    if not caps.shader_f16:
        return [{"case": "-", "variant": "-", "error": "no shader-f16"}]
    activations = []   # (label, A, N) of each case, for torch CUDA's pass
    for label, m, n, k in SMOKE_CASES if smoke else CASES:
        a = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
        activations.append((label, a, n))
        for fname, (fmt, group, zero) in FORMATS.items():
            group = group or k
            q, z, s = _weights(rng, n, k, fmt, group, zero)
            w = q.astype(np.float64) - (np.repeat(z, group, 1) if zero else 0)
            w = w * np.repeat(s.astype(np.float64), group, 1)
            ref = a.astype(np.float64) @ w.T
            arrays = {"a": a, "q": qm.pack_weight(q, fmt), "scale": qm.pack_scales(s),
                      "out": np.zeros((m, n), np.float16)}
            if zero:
                arrays["zero"] = qm.pack_bytes(z)
            ids = {}
            for role, arr in arrays.items():
                ids[role] = rt.allocate(arr.nbytes)
                rt.upload(ids[role], np.ascontiguousarray(arr))
            p = qm.QuantMatmulProblem(m, n, k, mm.Layout(0, 0, k, 1), mm.Layout(0, 0, n, 1),
                                      qm.QuantWeight(fmt, group, zero, "f16"), "f16")
            names = qm.quant_variants(p, caps)

            def read(out=ids["out"], m=m, n=n):
                return rt.download_array(out, np.float16, m * n).reshape(m, n).astype(np.float64)
            if only:
                names = [v for v in names if any(o in v for o in only.split(","))]
            for variant in names:
                row = {"case": label, "format": fname, "variant": variant, "m": m, "n": n, "k": k}
                rt.fill(ids["out"], 0x7E007E00)   # NaN: unwritten
                build = functools.partial(one_launch, qm.plan_quant_matmul, p, caps, variant, ids)
                measure_row(row, rt, kernels, build, read, ref, 1e-2, reps, 2.0 * m * n * k, "tflops", 1e12)
                rows.append(row)
                if verbose:
                    print(json.dumps(row), flush=True)
            for i in ids.values():
                rt.free(i)
    for label, a, n in activations:
        cuda = _torch_cuda_f16(a, n, reps)
        if cuda is not None:
            rows.append({"case": label, "format": "f16 dense", "variant": "torch-cuda",
                         "tflops": 2.0 * a.shape[0] * n * a.shape[1] / cuda / 1e12})
            if verbose:
                print(json.dumps(rows[-1]), flush=True)
    return rows


def _torch_cuda_f16(a: np.ndarray, n: int, reps: int) -> float | None:
    """Median seconds of torch CUDA's f16 linear (dense weight) of the same shape, or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    ta = torch.from_numpy(a).cuda()
    w = torch.randn(n, a.shape[1], dtype=torch.float16, device="cuda")
    return cuda_event_seconds(lambda: torch.nn.functional.linear(ta, w), reps)


def summary(rows: list[dict]) -> list[str]:
    """Per (case, format): the best variant and its TFLOP/s."""
    lines = []
    for key in sorted({(r["case"], r.get("format")) for r in rows}, key=str):
        ours = [r for r in rows if (r["case"], r.get("format")) == key and "tflops" in r]
        if ours:
            best = max(ours, key=lambda r: r["tflops"])
            lines.append(f"{key[0]} {key[1]}: {best['variant']} {best['tflops']:.2f} TFLOP/s")
    return lines


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: run the figures, print the best variant per case and format, optionally write JSON."""
    rows_main(figures, __doc__, argv, prog, summary=summary, smoke=False, reps=10,
              only=Option(None, "comma-separated substrings of the variants to run"))
