"""The kernel library's matmul variants on the raw runtime (no eager device, no torch_webgpu._C), each
checked against a float64 reference before it is timed, and torch CUDA's figures after them.

`python -m benchmarks library matmul [--smoke] [--only SUBSTRINGS] [--dtypes f32,f16] [--cases REGEX]
[--top N] [--json FILE]`: every variant of every case, TFLOP/s from GPU timestamps (wall clock where the
device has none), the winner per case, and torch CUDA's figure (TF32 off for f32). The harness's `matmul`
suite takes its `webgpu-library` rows from `figures` and their torch CUDA rows from `cuda_rows`.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

from ..json_rows import Option, comma_list, rows_main


def _import_library():
    """torch_webgpu.runtime and .kernels, also where the eager device's _C is not built (the H200)."""
    try:
        importlib.import_module("torch_webgpu")
    except ImportError:
        for name in [m for m in sys.modules if m == "torch_webgpu" or m.startswith("torch_webgpu.")]:
            del sys.modules[name]
        pkg = types.ModuleType("torch_webgpu")
        pkg.__path__ = [str(Path(__file__).resolve().parents[2] / "torch_webgpu")]
        sys.modules["torch_webgpu"] = pkg
    runtime = importlib.import_module("torch_webgpu.runtime")
    kernels = importlib.import_module("torch_webgpu.kernels")
    matmul = importlib.import_module("torch_webgpu.kernels.matmul")
    return runtime, kernels, matmul


def with_experimental_variants(fn):
    """`fn` with the matmul family's experimental variants offered while it runs: these benchmarks compare
    every variant, while what runs after them in the process (a compiled model) sees the shipping ones."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        _, _, matmul = _import_library()
        with matmul.experimental_offered():
            return fn(*args, **kwargs)
    return run


# (label, batch, M, N, K, B stored as [N, K] (a linear layer's weight) instead of [K, N])
CASES = [("4096^3", 1, 4096, 4096, 4096, False),
         ("prefill 128x768x3072 B[K,N]", 1, 128, 3072, 768, False),
         ("prefill 128x768x3072 B[N,K]", 1, 128, 3072, 768, True),
         ("decode 1x768x3072 B[N,K]", 1, 1, 3072, 768, True),
         ("decode 1x768x3072 B[K,N]", 1, 1, 3072, 768, False),
         # ViT-B/16 batch 1 (197 tokens): few output tiles for a large GPU, where split-K variants run
         ("vit 197x768x768 B[N,K]", 1, 197, 768, 768, True),
         ("vit 197x768x3072 B[N,K]", 1, 197, 3072, 768, True),
         ("vit 197x3072x768 B[N,K]", 1, 197, 768, 3072, True)]
SMOKE_CASES = [("64^3", 1, 64, 64, 64, False), ("decode 1x64x96 B[N,K]", 1, 1, 96, 64, True)]


def time_launches(rt, kernels, launches: list, reps: int) -> float:
    """Median seconds of one run of all `launches` ((launch, operands) pairs; timestamps when available)."""
    for launch, ops in launches:
        kernels.record(launch, ops, rt)
    rt.synchronize()
    if "timestamp-query" in rt.info.features:
        with rt.profile() as timings:
            for _ in range(reps):
                for launch, ops in launches:
                    kernels.record(launch, ops, rt)
        per = [t.seconds for t in timings]
        n = len(launches)
        return statistics.median(sum(per[i:i + n]) for i in range(0, len(per) - n + 1, n))
    values = []
    for _ in range(reps):
        start = time.perf_counter()
        for launch, ops in launches:
            kernels.record(launch, ops, rt)
        rt.synchronize()
        values.append(time.perf_counter() - start)
    return statistics.median(values)


def measure_row(row: dict, rt, kernels, build, read, ref: np.ndarray, tol: float, reps: int,
                work: float, unit: str, scale: float) -> None:
    """Run the launches `build()` returns ((launch, operands) pairs) once and compare `read()` with `ref`
    (max error relative to |ref|'s maximum); when it matches, time them: row["us"] and row[unit] = work
    per second / scale. A mismatch or an error is recorded in row["error"] (one variant failing must not
    stop the others)."""
    try:
        launches = build()
        for launch, ops in launches:
            kernels.record(launch, ops, rt)
        got = read()
        err = float(np.nanmax(np.abs(got - ref)) / max(1e-30, float(np.abs(ref).max())))
        row["rel_error"] = err if np.isfinite(got).all() else float("inf")
        if row["rel_error"] > tol:
            row["error"] = f"wrong result (max relative error {row['rel_error']:.3g})"
            return
        seconds = time_launches(rt, kernels, launches, reps)
        row["us"] = seconds * 1e6
        row[unit] = work / max(seconds, 1e-9) / scale
    except Exception as exc:  # noqa: BLE001
        row["error"] = f"{type(exc).__name__}: {str(exc)[-3000:]}"


def one_launch(plan, problem, caps, variant: str, ids: dict) -> list:
    """The (launch, operands) list of one launch: `plan(problem, caps, variant)` over `ids`."""
    return [(plan(problem, caps, variant), ids)]


def plan_launches(mm, rt, problem, caps, variant: str, ids: dict, held: list) -> list:
    """The (launch, operands) list of a matmul variant's dispatches (a split-K variant: its slices and
    the combine, with new scratch buffers that `held` keeps for the caller to free)."""
    plan = mm.plan_matmul_steps(problem, caps, variant)
    ops = dict(ids)
    for role, nbytes in plan.scratch.items():
        ops[role] = rt.allocate(max(4, -(-nbytes // 4) * 4))
        held.append(ops[role])
    return [(launch, ops) for launch in plan.steps]


def _torch_cuda(a: np.ndarray, b: np.ndarray, reps: int) -> float | None:
    """Median seconds of torch CUDA's matmul of the same operands (TF32 off), or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()   # b: B[N,K] cases as a transposed view
    return cuda_event_seconds(lambda: torch.matmul(ta, tb), reps)


def cuda_event_seconds(fn, reps: int) -> float:
    """Median GPU seconds of `fn()` on torch CUDA (CUDA events, after one warm-up call)."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a @ b` in float64 on the host (a CUDA reference would open a CUDA context before the figures)."""
    return a.astype(np.float64) @ b.astype(np.float64)


def _operands(smoke: bool, dtypes, cases: str | None):
    """(label, batch, m, n, k, b_nk, dtype, A, B as stored) of every case and dtype to run, drawn in one
    sequence from one seed as `figures` draws them, so that torch CUDA's pass (later, or in another
    process) multiplies the same operands as the library's variants (on a device without shader-f16,
    `figures` draws no f16 operands and the sequences part)."""
    rng = np.random.default_rng(0)
    for label, batch, m, n, k, b_nk in SMOKE_CASES if smoke else CASES:
        if cases and not re.search(cases, label):
            continue
        for dtype in dtypes:
            npt = np.float32 if dtype == "f32" else np.float16
            a = rng.standard_normal((m, k), dtype=np.float32).astype(npt)
            b_store = rng.standard_normal((n, k) if b_nk else (k, n), dtype=np.float32).astype(npt)
            yield label, batch, m, n, k, b_nk, dtype, a, b_store


@with_experimental_variants
def figures(smoke: bool = False, reps: int = 10, dtypes=("f32", "f16"),
            only: str | None = None, verbose: bool = True, cases: str | None = None,
            top: int | None = None, cuda: bool = True) -> list[dict]:
    """One row per (case, dtype, variant) with TFLOP/s and the check's error, then (`cuda`) torch CUDA's
    rows (`cuda_rows`: after every library row, so that no CUDA context exists before those);
    `cases`: a regex over the case labels to run (all when None); `top`: only the first that many
    variants of each case in the library's order (the autotuner's candidates and a few more)."""
    runtime, kernels, mm = _import_library()
    rt = runtime.get_runtime()
    caps = kernels.DeviceCaps.from_runtime(rt)
    rows: list[dict] = []
    rng = np.random.default_rng(0)
    for label, batch, m, n, k, b_nk in SMOKE_CASES if smoke else CASES:
        if cases and not re.search(cases, label):
            continue
        for dtype in dtypes:
            if dtype == "f16" and not caps.shader_f16:
                rows.append({"case": label, "dtype": dtype, "variant": "-", "error": "no shader-f16"})
                continue
            npt = np.float32 if dtype == "f32" else np.float16
            a = rng.standard_normal((m, k), dtype=np.float32).astype(npt)
            b_store = rng.standard_normal((n, k) if b_nk else (k, n), dtype=np.float32).astype(npt)
            b = b_store.T if b_nk else b_store
            ref = _reference(a.astype(np.float32), np.ascontiguousarray(b).astype(np.float32))
            ids = {}
            for role, arr in (("a", a), ("b", b_store), ("out", np.zeros((m, n), npt))):
                ids[role] = rt.allocate(arr.nbytes)
                rt.upload(ids[role], np.ascontiguousarray(arr))
            b_lay = mm.Layout(0, 0, 1, k) if b_nk else mm.Layout(0, 0, n, 1)
            p = mm.MatmulProblem(batch, m, n, k, mm.Layout(0, 0, k, 1), b_lay, mm.Layout(0, 0, n, 1),
                                 dtype=dtype)
            flops = 2.0 * m * n * k

            def read(out=ids["out"], npt=npt, m=m, n=n):
                return rt.download_array(out, npt, m * n).reshape(m, n).astype(np.float64)
            names = mm.variants(p, caps)
            held: list = []   # scratch buffers of split-K variants
            if only:
                names = [v for v in names if any(o in v for o in only.split(","))]
            if smoke:  # CI-sized: the two default variants only
                names = names[:2]
            if top:
                names = names[:top]
            for variant in names:
                row = {"case": label, "dtype": dtype, "variant": variant, "m": m, "n": n, "k": k}
                rt.fill(ids["out"], 0x7FC00000 if dtype == "f32" else 0x7E007E00)  # NaN: unwritten
                build = functools.partial(plan_launches, mm, rt, p, caps, variant, ids, held)
                measure_row(row, rt, kernels, build, read, ref, 1e-4 if dtype == "f32" else 1e-2, reps, flops,
                            "tflops", 1e12)
                rows.append(row)
                if verbose:
                    print(json.dumps(row), flush=True)
            for i in [*ids.values(), *held]:
                rt.free(i)
    if cuda:
        rows += cuda_rows(smoke, reps, dtypes, cases, verbose)
    return rows


def cuda_rows(smoke: bool = False, reps: int = 10, dtypes=("f32", "f16"), cases: str | None = None,
              verbose: bool = False) -> list[dict]:
    """torch CUDA's row (cuBLAS, TF32 off) of every case and dtype `figures` runs, on the same operands;
    none without CUDA. The harness takes these in its CUDA process, apart from the library's rows."""
    rows: list[dict] = []
    if not _cuda_available():
        return rows
    for label, _, m, n, k, b_nk, dtype, a, b_store in _operands(smoke, dtypes, cases):
        cuda = _torch_cuda(a, b_store.T if b_nk else b_store, reps)
        if cuda is not None:
            rows.append({"case": label, "dtype": dtype, "variant": "torch-cuda",
                         "tflops": 2.0 * m * n * k / cuda / 1e12})
            if verbose:
                print(json.dumps(rows[-1]), flush=True)
    return rows


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def summary(rows: list[dict]) -> list[str]:
    """Per (case, dtype): the best library variant, its TFLOP/s and the ratio to torch CUDA."""
    lines = []
    keys = sorted({(r["case"], r["dtype"]) for r in rows}, key=str)
    for case, dtype in keys:
        ours = [r for r in rows if (r["case"], r["dtype"]) == (case, dtype) and "tflops" in r
                and r["variant"] != "torch-cuda"]
        cuda = [r["tflops"] for r in rows if (r["case"], r["dtype"]) == (case, dtype)
                and r["variant"] == "torch-cuda"]
        if not ours:
            lines.append(f"{case} {dtype}: no variant ran")
            continue
        best = max(ours, key=lambda r: r["tflops"])
        ratio = f" = {best['tflops'] / cuda[0]:.2f}x torch CUDA ({cuda[0]:.1f})" if cuda else ""
        lines.append(f"{case} {dtype}: {best['variant']} {best['tflops']:.2f} TFLOP/s{ratio}")
    return lines


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: run the figures, print the summary, optionally write JSON."""
    def run(**options) -> list[dict]:
        runtime, _, _ = _import_library()
        print(runtime.get_runtime().describe(), flush=True)
        return figures(**options)

    rows_main(run, __doc__, argv, prog, summary=summary, smoke=False, reps=10,
              only=Option(None, "comma-separated substrings of the variants to run"),
              dtypes=Option(("f32", "f16"), "comma-separated", comma_list()),
              cases=Option(None, "regex over the case labels to run (default: all)"),
              top=Option(None, "the first N variants of each case only", int))
