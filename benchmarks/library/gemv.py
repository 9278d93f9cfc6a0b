"""The kernel library's matrix-vector (decode) variants on the raw runtime, in GB/s, beside torch CUDA.

Llama-3.2-1B decode shapes (hidden 2048, 8 KV heads of 64, intermediate 8192, vocab 128256, 32 query
heads over a 2048-token cache): every gemv variant of the dense family (f16, f32) and of the quantized
family (int4 group 32 with zero points, int8 per channel; f16 activations and scales) is checked against
a float64 reference, then timed with GPU timestamps (wall clock where the device has none). GB/s counts
the bytes the kernel must read and write (weights as stored, activations, output); torch CUDA's figure
(F.linear / bmm in f16, f32 with TF32 off) is beside it. Problems bigger than one storage binding run
as several launches (split_for_binding; quantized: whole 1024-row blocks) and are timed as their sum.

`python3 -m benchmarks library gemv [--small] [--dtypes f16,f32,i4,i8] [--only SUBSTR,..]
[--cases SUBSTR,..] [--json FILE]`; it needs only the raw runtime (no torch_webgpu._C, no compiler) and
numpy; torch (CUDA) is optional, its rows come after every library row. `--small`: the same shape
classes, shrunk, for software Vulkan.
"""

from __future__ import annotations

import functools
import importlib
import json

import numpy as np

from ..json_rows import Option, comma_list, rows_main
from .matmul import _import_library, cuda_event_seconds, measure_row
from .quant import _weights

# (label, batch, N, K, weight stored [N, K] (a linear layer, QK^T's key cache) or [K, N] (P @ V's values))
CASES = [("q/o proj 2048->2048", 1, 2048, 2048, True),
         ("k/v proj 2048->512", 1, 512, 2048, True),
         ("gate/up 2048->8192", 1, 8192, 2048, True),
         ("down 8192->2048", 1, 2048, 8192, True),
         ("lm_head 2048->128256", 1, 128256, 2048, True),
         ("QK^T 32 heads x 2048 ctx", 32, 2048, 64, True),
         ("P@V 32 heads x 2048 ctx", 32, 64, 2048, False)]
SMALL_CASES = [("q/o proj 256->256", 1, 256, 256, True),
               ("k/v proj 256->64", 1, 64, 256, True),
               ("down 1024->256", 1, 256, 1024, True),
               ("lm_head 256->4000", 1, 4000, 256, True),
               ("QK^T 4 heads x 128 ctx", 4, 128, 64, True),
               ("P@V 4 heads x 128 ctx", 4, 64, 128, False)]
QUANT = {"i4": ("i4", 32, True), "i8": ("i8", 0, False)}   # group 0: one group per row (per channel)
NP = {"f32": np.float32, "f16": np.float16}
ROW_BLOCK = 1024   # quantized problems split into whole blocks of rows (aligned windows of every operand)


def _upload(rt, arr: np.ndarray) -> int:
    data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
    buf = rt.allocate(max(16, -(-data.size // 16) * 16))
    rt.upload(buf, data.tobytes() + b"\0" * (-data.size % 4))
    return buf


def _torch_seconds(fn_build, reps: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    return cuda_event_seconds(fn_build(torch), reps)


def _dense_operands(case, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """x [batch, 1, K] and the weight as stored of one dense case (seeded per case: torch CUDA's pass
    multiplies the same ones)."""
    _, batch, n, k, w_nk = case
    npt = NP[dtype]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 1, k), dtype=np.float32).astype(npt)
    w = (rng.standard_normal((batch, n, k) if w_nk else (batch, k, n), dtype=np.float32) * 0.05).astype(npt)
    return x, w


def dense_rows(rt, kernels, mm, case, dtype: str, reps: int, only, verbose: bool) -> list[dict]:
    """Every dense gemv variant of one case in `dtype` (torch CUDA's row: `dense_cuda_row`)."""
    runtime = importlib.import_module("torch_webgpu.runtime")
    label, batch, n, k, w_nk = case
    npt = NP[dtype]
    x, w = _dense_operands(case, dtype)
    wk = w.transpose(0, 2, 1) if w_nk else w           # [batch, K, N] view
    ref = np.einsum("bmk,bkn->bmn", x.astype(np.float64), wk.astype(np.float64))
    itemsize = np.dtype(npt).itemsize
    ids = {"a": _upload(rt, x), "b": _upload(rt, w), "out": rt.allocate(-(-batch * n * itemsize // 16) * 16)}
    b_lay = mm.Layout(0, n * k, 1, k) if w_nk else mm.Layout(0, n * k, n, 1)
    p = mm.MatmulProblem(batch, 1, n, k, mm.Layout(0, k, k, 1), b_lay, mm.Layout(0, n, n, 1), dtype=dtype)
    caps = kernels.DeviceCaps.from_runtime(rt)
    align = caps.limit("min-storage-buffer-offset-alignment", 256)
    sizes = {r: rt.buffer(i).aligned_nbytes for r, i in ids.items()}
    pieces = mm.split_for_binding(p, itemsize, rt.max_storage_binding, align, rt.max_workgroups, sizes)
    nbytes = batch * (n * k + k + n) * itemsize
    names = [v for v in mm.variants(p, caps) if v.startswith("gemv")]
    default = names[0] if names else None
    if only:
        names = [v for v in names if any(o in v for o in only)]
    rows = []

    def launches_of(variant: str) -> list:
        return [(mm.plan_matmul(piece.problem, caps, variant), dict(ids) if piece.windows is None else {
            r: runtime.BufferSlice(ids[r], *piece.windows[r]) for r in ids}) for piece in pieces]

    def read():
        return rt.download_array(ids["out"], npt, batch * n).reshape(batch, 1, n).astype(np.float64)
    for variant in names:
        row = {"case": label, "dtype": dtype, "variant": variant, "default": variant == default,
               "batch": batch, "n": n, "k": k, "pieces": len(pieces)}
        rt.fill(ids["out"], 0x7FC00000 if dtype == "f32" else 0x7E007E00)   # NaN: unwritten
        measure_row(row, rt, kernels, functools.partial(launches_of, variant), read, ref,
                    1e-4 if dtype == "f32" else 1e-2, reps, nbytes, "gbps", 1e9)
        rows.append(row)
        if verbose:
            print(json.dumps(row), flush=True)
    for i in ids.values():
        rt.free(i)
    return rows


def dense_cuda_row(case, dtype: str, reps: int, verbose: bool) -> list[dict]:
    """torch CUDA's row of one dense case (bmm; f32 with TF32 off), or none without CUDA."""
    label, batch, n, k, w_nk = case
    x, w = _dense_operands(case, dtype)
    nbytes = batch * (n * k + k + n) * np.dtype(NP[dtype]).itemsize

    def build(torch):
        tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
        if w_nk:
            return lambda: torch.bmm(tx, tw.transpose(1, 2))
        return lambda: torch.bmm(tx, tw)
    cuda = _torch_seconds(build, reps)
    if cuda is None:
        return []
    row = {"case": label, "dtype": dtype, "variant": "torch-cuda", "us": cuda * 1e6,
           "gbps": nbytes / cuda / 1e9}
    if verbose:
        print(json.dumps(row), flush=True)
    return [row]


def quant_rows(rt, kernels, qm, mm, case, fmt: str, reps: int, only, verbose: bool) -> list[dict]:
    """Every quantized gemv variant of one linear case (f16 activations and scales)."""
    runtime = importlib.import_module("torch_webgpu.runtime")
    label, batch, n, k, w_nk = case
    wfmt, group, zero = QUANT[fmt]
    group = group or k
    rng = np.random.default_rng(0)
    q, z, s = _weights(rng, n, k, wfmt, group, zero)
    x = (rng.standard_normal((1, k), dtype=np.float32) * 0.5).astype(np.float16)
    wdq = q.astype(np.float64) - (np.repeat(z, group, 1) if zero else 0)
    ref = x.astype(np.float64) @ (wdq * np.repeat(s.astype(np.float64), group, 1)).T
    words = qm.pack_weight(q, wfmt)
    ids = {"a": _upload(rt, x), "q": _upload(rt, words), "scale": _upload(rt, qm.pack_scales(s)),
           "out": rt.allocate(-(-n * 2 // 16) * 16)}
    if zero:
        ids["zero"] = _upload(rt, qm.pack_bytes(z))
    nbytes = words.nbytes + s.nbytes + (z.nbytes if zero else 0) + 2 * (k + n)
    caps = kernels.DeviceCaps.from_runtime(rt)
    weight = qm.QuantWeight(wfmt, group, zero, "f16")
    row_bytes = {"q": words.shape[1] * 4, "scale": 2 * (k // group), "zero": k // group, "out": 2}
    widest = max(row_bytes.values())
    block = n if n * widest <= rt.max_storage_binding else max(
        ROW_BLOCK, rt.max_storage_binding // widest // ROW_BLOCK * ROW_BLOCK)
    blocks = [(n0, min(block, n - n0)) for n0 in range(0, n, block)]

    def problem(rows: int):
        return qm.QuantMatmulProblem(1, rows, k, mm.Layout(0, 0, k, 1), mm.Layout(0, 0, rows, 1), weight,
                                     "f16")
    names = [v for v in qm.quant_variants(problem(n), caps) if v.startswith("gemv")]
    default = names[0] if names else None
    if only:
        names = [v for v in names if any(o in v for o in only)]
    rows = []
    def launches_of(variant: str) -> list:
        launches = []
        for n0, rows_here in blocks:
            ops = {"a": ids["a"]} if len(blocks) > 1 else dict(ids)
            if len(blocks) > 1:
                for role, per in row_bytes.items():
                    if role in ids:
                        ops[role] = runtime.BufferSlice(ids[role], n0 * per, -(-rows_here * per // 4) * 4)
            launches.append((qm.plan_quant_matmul(problem(rows_here), caps, variant), ops))
        return launches

    def read():
        return rt.download_array(ids["out"], np.float16, n).reshape(1, n).astype(np.float64)
    for variant in names:
        row = {"case": label, "dtype": f"{wfmt}g{group}{'z' if zero else ''}", "variant": variant,
               "default": variant == default, "n": n, "k": k, "pieces": len(blocks)}
        rt.fill(ids["out"], 0x7E007E00)   # NaN: unwritten
        measure_row(row, rt, kernels, functools.partial(launches_of, variant), read, ref, 1e-2, reps, nbytes,
                    "gbps", 1e9)
        rows.append(row)
        if verbose:
            print(json.dumps(row), flush=True)
    for i in ids.values():
        rt.free(i)
    return rows


def figures(small: bool = False, reps: int = 20, dtypes=("f16", "f32", "i4", "i8"), only=None,
            cases=None, verbose: bool = True) -> list[dict]:
    """One row per (case, dtype, variant) with us, GB/s and the check's error, then torch CUDA's rows
    (after every library row: no CUDA context exists before those)."""
    runtime, kernels, mm = _import_library()
    qm = importlib.import_module("torch_webgpu.kernels.quant_matmul")
    rt = runtime.get_runtime()
    caps = kernels.DeviceCaps.from_runtime(rt)
    rows: list[dict] = []
    dense = []   # the (case, dtype) pairs torch CUDA runs after
    for case in SMALL_CASES if small else CASES:
        if cases and not any(c in case[0] for c in cases):
            continue
        for dtype in dtypes:
            if dtype in QUANT:
                if case[1] != 1 or not case[4] or not caps.shader_f16:
                    continue   # quantized weights are linear layers ([N, K], one batch)
                rows += quant_rows(rt, kernels, qm, mm, case, dtype, reps, only, verbose)
            elif dtype == "f16" and not caps.shader_f16:
                rows.append({"case": case[0], "dtype": dtype, "variant": "-", "error": "no shader-f16"})
            else:
                rows += dense_rows(rt, kernels, mm, case, dtype, reps, only, verbose)
                dense.append((case, dtype))
    for case, dtype in dense:
        rows += dense_cuda_row(case, dtype, reps, verbose)
    return rows


def summary(rows: list[dict]) -> list[str]:
    """Per (case, dtype): the default's and the best variant's GB/s, torch CUDA's f16 figure beside."""
    lines = []
    for case, dtype in sorted({(r["case"], r["dtype"]) for r in rows}, key=str):
        ours = [r for r in rows if (r["case"], r["dtype"]) == (case, dtype) and "gbps" in r
                and r["variant"] != "torch-cuda"]
        cuda = [r for r in rows if r["case"] == case and r["variant"] == "torch-cuda" and r["dtype"] == "f16"]
        if not ours:
            lines.append(f"{case} {dtype}: no variant ran")
            continue
        best = max(ours, key=lambda r: r["gbps"])
        dflt = next((r for r in ours if r.get("default")), None)
        text = f"{case} {dtype}: best {best['variant']} {best['gbps']:.3g} GB/s ({best['us']:.1f} us)"
        if dflt is not None and dflt is not best:
            text += f", default {dflt['variant']} {dflt['gbps']:.3g} GB/s"
        if cuda:
            text += f"; torch CUDA f16 {cuda[0]['gbps']:.3g} GB/s ({cuda[0]['us']:.1f} us)"
        lines.append(text)
    return lines


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: run the figures, print the summary, optionally write JSON."""
    def run(**options) -> list[dict]:
        runtime, _, _ = _import_library()
        print(runtime.get_runtime().describe(), flush=True)
        return figures(**options)

    rows_main(run, __doc__, argv, prog, summary=summary,
              small=Option(False, "shrunk shapes (software Vulkan)"), reps=20,
              dtypes=Option(("f16", "f32", "i4", "i8"), "comma-separated", comma_list()),
              only=Option(None, "comma-separated substrings of the variants to run", comma_list()),
              cases=Option(None, "comma-separated substrings of the case labels", comma_list()))
