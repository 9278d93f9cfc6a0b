"""Hash every launch the kernel library generates over a grid of problems and devices (refactor evidence).

`python -m tools.kernel_hashes OUT.json` enumerates, per family, a grid of problems (dtypes, layouts:
contiguous, transposed, strided, vec4 and not; every epilogue; decode-, prefill-sized and large shapes;
attention masks) on three device presets (this machine's adapter through `DeviceCaps.from_runtime`,
`DeviceCaps.portable()`, and an NVIDIA-like one with subgroups of 32, `shader-f16` and subgroup matrices)
and writes, per (family, problem, device), two ordered lists of sha256:

- "candidates": the first `autotune.MAX_CANDIDATES` variants the family offers (the default first),
  what the autotuner times and compiled plans carry: behaviour;
- "variants": every variant it can run the problem with, shipping and experimental (registered here the
  way benchmarks register them), in the family's order (compared as a multiset: where registered
  experimental variants come in the list is no behaviour).

A variant's hash covers the content of each of its launches (WGSL, grid, workgroup size, bindings,
params, read_only, entry point) and its scratch, never its name. The eager strided kernels (the
general matmul, direct convolutions, strided row ops) are hashed by WGSL, grid, params and binding count.
`python -m tools.kernel_hashes compare BEFORE.json AFTER.json` prints what differs (exit 1 if anything);
`--match REGEX` hashes only the keys it finds (e.g. "gelu": what issue 40's one erf changed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import DeviceCaps


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def launch_content(launch: Any) -> dict:
    """Everything of a KernelLaunch but its name."""
    return {"wgsl": launch.wgsl, "grid": list(launch.grid), "workgroup_size": list(launch.workgroup_size),
            "bindings": list(launch.bindings), "params": list(launch.params),
            "read_only": sorted(launch.read_only), "entry_point": launch.entry_point}


def _steps_hash(steps: list, scratch: dict | None = None) -> str:
    return _sha({"steps": [launch_content(s) for s in steps], "scratch": dict(scratch or {})})


# ---- devices --------------------------------------------------------------------------------------

def nvidia_caps() -> DeviceCaps:
    """An H100/H200-like adapter as Dawn reports it with its toggles (design.md)."""
    configs = tuple((i, o, m, n, k) for i, o in (("f16", "f16"), ("f16", "f32"))
                    for m, n, k in ((16, 16, 16), (16, 8, 16), (16, 8, 8)))
    return DeviceCaps(
        features=frozenset({"shader-f16", "subgroups", "chromium-experimental-subgroup-matrix",
                            "timestamp-query", "subgroup-size-control"}),
        limits={"max-compute-invocations-per-workgroup": 1024, "max-compute-workgroup-storage-size": 49152,
                "max-storage-buffers-per-shader-stage": 10, "max-compute-workgroups-per-dimension": 65535,
                "max-storage-buffer-binding-size": (1 << 31) - 4, "min-storage-buffer-offset-alignment": 32,
                "subgroup-min-size": 32, "subgroup-max-size": 32},
        subgroup_size=32, vendor="nvidia", architecture="hopper", subgroup_matrix_configs=configs,
        driver="NVIDIA 580", cpu=False)


def devices() -> dict[str, DeviceCaps]:
    """The three presets, by name."""
    from torch_webgpu.runtime import get_runtime

    return {"lavapipe": DeviceCaps.from_runtime(get_runtime()), "portable": DeviceCaps.portable(),
            "nvidia": nvidia_caps()}


# ---- families -------------------------------------------------------------------------------------

def _register_experimental() -> None:
    """Offer the experimental variants too, as benchmarks do (no-op where the library has none)."""
    from torch_webgpu.kernels import matmul

    register = getattr(matmul, "register_experimental", None)
    if register is not None:
        register()
        _MEMO.clear()


def _unregister_experimental() -> None:
    from torch_webgpu.kernels import matmul

    unregister = getattr(matmul, "unregister_experimental", None)
    if unregister is not None:
        unregister()
        _MEMO.clear()


Entry = tuple[str, Any, Callable[[Any, DeviceCaps], list[str]], Callable[[Any, DeviceCaps, str], str]]


def _matmul_problems() -> Iterator[tuple[str, Any]]:
    from torch_webgpu.kernels.matmul import Layout, MatmulProblem

    def a_layout(kind: str, m: int, k: int, batch: int) -> Layout:
        if kind == "contig":
            return Layout(0, m * k, k, 1)
        if kind == "trans":        # stored [k, m]
            return Layout(0, m * k, 1, m)
        if kind == "offset":       # contiguous rows from an odd offset: no vec4
            return Layout(3, m * k + 3, k, 1)
        return Layout(0, 2 * m * k, 2 * k, 2)   # every other element: strided

    def b_layout(kind: str, k: int, n: int) -> Layout:
        if kind == "kn":
            return Layout(0, k * n, n, 1)
        if kind == "nk":           # a linear's weight [n, k]
            return Layout(0, k * n, 1, k)
        if kind == "offset":
            return Layout(5, k * n + 5, n, 1)
        return Layout(0, 2 * k * n, 2 * n, 2)

    shapes = [(1, 1, 768, 768), (1, 2, 3072, 768), (1, 4, 768, 3072), (1, 1, 50257, 768), (1, 16, 64, 256),
              (1, 128, 768, 3072), (1, 197, 768, 768), (1, 256, 1024, 1024), (4, 64, 64, 64),
              (12, 128, 128, 64), (1, 512, 512, 2048), (1, 1024, 1024, 1024), (1, 2048, 4096, 1024),
              (1, 4096, 4096, 4096), (1, 768, 3, 768), (1, 1000, 1000, 999), (2, 4, 1000, 512)]
    acts = [None, "relu", "relu6", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"]
    for dtype in ("f32", "f16"):
        for batch, m, n, k in shapes:
            out = Layout(0, m * n, n, 1)
            for ak in ("contig", "trans", "offset", "strided"):
                for bk in ("kn", "nk", "offset", "strided"):
                    p = MatmulProblem(batch, m, n, k, a_layout(ak, m, k, batch), b_layout(bk, k, n), out,
                                      dtype=dtype)
                    yield f"{dtype}|{batch}x{m}x{n}x{k}|{ak}|{bk}", p
            # epilogues on the common layouts
            for bk in ("kn", "nk"):
                a, b = a_layout("contig", m, k, batch), b_layout(bk, k, n)
                bias = Layout(0, 0, 0, 1)
                res = Layout(0, m * n, n, 1)
                for act in acts:
                    yield (f"{dtype}|{batch}x{m}x{n}x{k}|contig|{bk}|act={act}",
                           MatmulProblem(batch, m, n, k, a, b, out, dtype=dtype, activation=act))
                yield (f"{dtype}|{batch}x{m}x{n}x{k}|contig|{bk}|bias+res+gelu|alpha",
                       MatmulProblem(batch, m, n, k, a, b, out, dtype=dtype, bias=bias, residual=res,
                                     activation="gelu", alpha=0.125, beta=0.5))
                yield (f"{dtype}|{batch}x{m}x{n}x{k}|contig|{bk}|bias",
                       MatmulProblem(batch, m, n, k, a, b, out, dtype=dtype, bias=bias))
                yield (f"{dtype}|{batch}x{m}x{n}x{k}|contig|{bk}|res+silu",
                       MatmulProblem(batch, m, n, k, a, b, out, dtype=dtype, residual=res, activation="silu"))
            # an output whose rows are not 4-aligned (strided out)
            yield (f"{dtype}|{batch}x{m}x{n}x{k}|outpad",
                   MatmulProblem(batch, m, n, k, a_layout("contig", m, k, batch), b_layout("kn", k, n),
                                 Layout(1, m * (n + 1), n + 1, 1), dtype=dtype))


_MEMO: dict = {}


def _memoised_variants(module: Any) -> None:
    """`module.variants` answered once per (problem, device): plan_matmul asks it again for every variant,
    which made this grid ten times slower (the answers are the same; `_register_experimental` clears it)."""
    original = getattr(module, "_unmemoised_variants", None) or module.variants
    module._unmemoised_variants = original

    def variants(p, caps):
        key = (p, id(caps))
        if key not in _MEMO:
            _MEMO[key] = (caps, list(original(p, caps)))
        return list(_MEMO[key][1])
    module.variants = variants


def _matmul_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import matmul

    _memoised_variants(matmul)
    def run(p, caps, name):
        plan = matmul.plan_matmul_steps(p, caps, name)
        return _steps_hash(list(plan.steps), plan.scratch)

    for key, p in _matmul_problems():
        yield f"matmul|{key}", p, matmul.variants, run


def _grouped_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import matmul
    from torch_webgpu.kernels.matmul import GroupedGemvProblem, Layout, MatmulProblem

    def run(gp, caps, name):
        return _steps_hash([matmul.plan_grouped_matmul(gp, caps, name)])

    for dtype in ("f32", "f16"):
        for m, k, ns in ((1, 768, (768, 768, 768)), (4, 2048, (2048, 512, 512)), (1, 896, (4864, 4864)),
                         (2, 1024, (1024, 1024)), (1, 770, (768, 768))):
            a = Layout(0, m * k, k, 1)
            for glu in (False, True):
                if glu and len(ns) != 2:
                    continue
                acts = ("silu", None) if glu else (None,) * len(ns)
                start = 0
                problems = []
                for n, act in zip(ns, acts, strict=True):
                    problems.append(MatmulProblem(1, m, n, k, a, Layout(0, k * n, 1, k),
                                                  Layout(start, m * n, n, 1), dtype=dtype, activation=act,
                                                  alpha=0.5 if act is None else 1.0))
                    start += m * n
                gp = GroupedGemvProblem(tuple(problems), glu=glu)
                yield f"grouped|{dtype}|{m}x{k}|{ns}|glu={glu}", gp, matmul.grouped_variants, run


def _quant_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import quant_matmul as qm
    from torch_webgpu.kernels.matmul import Layout

    def run(p, caps, name):
        return _steps_hash([qm.plan_quant_matmul(p, caps, name)])

    def run_grouped(gp, caps, name):
        return _steps_hash([qm.plan_grouped_quant_matmul(gp, caps, name)])

    for fmt in ("i4", "i8"):
        for group, zero, scale in ((32, False, "f32"), (128, True, "f16"), (64, True, "f32")):
            w = qm.QuantWeight(fmt, group, zero, scale)
            for dtype, a_dtype in (("f32", None), ("f16", None), ("f32", "f16")):
                for m, n, k in ((1, 2048, 2048), (4, 8192, 2048), (1, 128256, 2048), (7, 768, 768),
                                (64, 2048, 2048), (512, 8192, 2048), (3, 96, 256)):
                    for ak in ("contig", "offset"):
                        a = Layout(0, m * k, k, 1) if ak == "contig" else Layout(2, m * k + 2, k, 1)
                        out = Layout(0, m * n, n, 1)
                        for epi in ("none", "bias+res+gelu", "silu"):
                            extra: dict = {}
                            if epi == "silu":
                                extra = {"activation": "silu"}
                            elif epi != "none":
                                extra = {"bias": Layout(0, 0, 0, 1), "residual": Layout(0, m * n, n, 1),
                                         "activation": "gelu", "alpha": 0.5}
                            p = qm.QuantMatmulProblem(m, n, k, a, out, w, dtype, a_dtype=a_dtype, **extra)
                            key = f"{fmt}g{group}z{zero}{scale}|{dtype}/{a_dtype}|{m}x{n}x{k}|{ak}|{epi}"
                            yield f"quant|{key}", p, qm.quant_variants, run
                for m, ns in ((1, (2048, 512, 512)), (4, (8192, 8192))):
                    k = 2048
                    for glu in (False, True):
                        if glu and len(ns) != 2:
                            continue
                        start, problems = 0, []
                        for i, n in enumerate(ns):
                            act = "silu" if glu and i == 0 else None
                            problems.append(qm.QuantMatmulProblem(
                                m, n, k, Layout(0, m * k, k, 1), Layout(start, m * n, n, 1), w, dtype,
                                activation=act, a_dtype=a_dtype))
                            start += m * n
                        yield (f"gquant|{fmt}g{group}z{zero}{scale}|{dtype}/{a_dtype}|{m}|{ns}|glu={glu}",
                               qm.GroupedQuantProblem(tuple(problems), glu=glu), qm.grouped_quant_variants,
                               run_grouped)


def _single(kind: str, planner: Callable[[Any, DeviceCaps], Any]) -> tuple:
    def names(p, caps):
        try:
            planner(p, caps)
        except (TypeError, ValueError) as e:
            return [f"error:{type(e).__name__}"]
        return ["default"]

    def run(p, caps, name):
        return _steps_hash([planner(p, caps)])
    return names, run


def _quant_embedding_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import quant_embedding as qe
    from torch_webgpu.kernels.quant_matmul import QuantWeight

    names, run = _single("qembedding", qe.plan_quant_embedding)
    for fmt in ("i4", "i8"):
        for group, zero, scale in ((32, False, "f32"), (64, True, "f16")):
            for dtype in ("f32", "f16"):
                for rows, dim, count, off, words in ((50257, 768, 1, 0, 2), (128256, 2048, 7, 3, 1)):
                    w = QuantWeight(fmt, group, zero, scale)
                    p = qe.QuantEmbeddingProblem(rows, dim, count, w, dtype, off, words)
                    key = f"{fmt}g{group}z{zero}{scale}|{dtype}|{rows}x{dim}x{count}"
                    yield f"qembedding|{key}", p, names, run


def _conv_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import conv
    from torch_webgpu.kernels.conv import Conv2dProblem, Strided1, Strided4

    def run(p, caps, name):
        return _steps_hash([conv.plan_conv2d(p, caps, name)])

    geoms = {
        "resnet-stem": dict(n=1, cin=3, h=224, w=224, cout=64, kh=7, kw=7, stride=(2, 2), padding=(3, 3)),
        "3x3": dict(n=2, cin=64, h=56, w=56, cout=64, kh=3, kw=3, padding=(1, 1)),
        "3x3-small": dict(n=1, cin=512, h=7, w=7, cout=512, kh=3, kw=3, padding=(1, 1)),
        "1x1": dict(n=1, cin=256, h=14, w=14, cout=1024, kh=1, kw=1),
        "depthwise": dict(n=1, cin=96, h=28, w=28, cout=96, kh=3, kw=3, padding=(1, 1), groups=96),
        "grouped": dict(n=1, cin=32, h=16, w=16, cout=64, kh=3, kw=3, groups=4, dilation=(2, 2)),
        "transposed": dict(n=1, cin=64, h=16, w=16, cout=32, kh=4, kw=4, stride=(2, 2), padding=(1, 1),
                           transposed=True, output_padding=(0, 0)),
        "conv1d": dict(n=2, cin=80, h=1, w=3000, cout=384, kh=1, kw=3, padding=(0, 1)),
    }
    for dtype in ("f32", "f16"):
        for gname, g in geoms.items():
            epis = {"none": {}, "bias+relu": {"bias": Strided1(), "activation": "relu"},
                    "bn+res+gelu": {"scale": Strided1(), "shift": Strided1(), "mean": Strided1(),
                                    "var": Strided1(), "residual": None, "activation": "gelu"},
                    "bias+silu+res-after": {"bias": Strided1(0, 1), "activation": "silu", "residual": None,
                                            "residual_after_activation": True}}
            for ename, e in epis.items():
                p = Conv2dProblem(**g, dtype=dtype)
                if "residual" in e:
                    e = {**e, "residual": Strided4.contiguous((p.n, p.cout, p.oh, p.ow))}
                p = dataclasses.replace(p, **e)
                yield f"conv|{dtype}|{gname}|{ename}", p, conv.variants, run
            # channels-last input (strided)
            p = Conv2dProblem(**g, dtype=dtype)
            x = Strided4(0, (p.cin * p.h * p.w, 1, p.w * p.cin, p.cin))
            yield f"conv|{dtype}|{gname}|channels-last", dataclasses.replace(p, x=x), conv.variants, run


def _attention_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import attention as at
    from torch_webgpu.kernels.attention import AttentionProblem, Strided

    def run(p, caps, name):
        launch = at.plan_attention(p, caps, name)
        steps = [launch]
        if name.startswith("split"):
            steps.append(at.plan_attention_combine(p, caps))
        return _steps_hash(steps)

    shapes = {"decode": (1, 12, 1, 100, 64), "decode-long": (1, 32, 1, 4000, 128),
              "gqa-decode": (1, 32, 1, 700, 64, 8), "prefill": (1, 12, 128, 128, 64),
              "prefill-gqa": (2, 8, 77, 77, 64, 2), "vit": (1, 12, 197, 197, 64), "odd": (3, 5, 33, 17, 24)}
    for dtype in ("f32", "f16"):
        for sname, s in shapes.items():
            b, h, lq, lk, d = s[:5]
            kv = s[5] if len(s) > 5 else None
            for mask in (None, "bool", "bool32", "additive", "additive_f32"):
                for causal in (False, True):
                    if causal and mask not in (None, "additive"):
                        continue
                    ml = Strided(0, (0, 0, lk, 1)) if mask else None
                    p = AttentionProblem(b, h, lq, lk, d, kv_heads=kv, causal=causal, mask=mask, dtype=dtype,
                                         mask_layout=ml)
                    yield f"attention|{dtype}|{sname}|{mask}|causal={causal}", p, at.variants, run
            # a strided q (heads interleaved) and a scale
            q = Strided(0, (lq * h * d, d, h * d, 1))
            p = AttentionProblem(b, h, lq, lk, d, kv_heads=kv, dtype=dtype, q=q, scale=0.3, dv=d)
            yield f"attention|{dtype}|{sname}|strided-q", p, at.variants, run


def _rows_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import rows
    from torch_webgpu.kernels.rows import RowProblem

    def run(p, caps, name):
        plan = rows.plan_rows(p, caps, name)
        return _steps_hash(list(plan.steps), plan.scratch)

    for op in rows.OPS:
        for dtype in ("f32", "f16", "bf16"):
            for r, n, off, stride in ((1, 768, 0, -1), (128, 768, 0, -1), (4, 50257, 0, -1), (7, 33, 1, 40),
                                      (2, 200000, 0, -1), (4096, 4096, 0, -1), (8, 1024, 4, 2048)):
                flags = [(False, False, False, "f32")]
                if op == "layer_norm":
                    flags += [(True, True, False, "f32"), (True, False, True, "f32")]
                if op == "rms_norm":
                    flags += [(True, False, False, "f32")]
                if n % 4 == 0 and off % 4 == 0 and op in ("softmax", "layer_norm", "rms_norm"):
                    flags += [(op != "softmax", False, False, "f16")]
                for wt, bs, stats, out in flags:
                    p = RowProblem(op, dtype, r, n, off, stride, 1e-5, wt, bs, stats,
                                   grad_offset=8 if op.endswith("backward") else 0, out_dtype=out)
                    key = f"{op}|{dtype}|{r}x{n}+{off}/{stride}|w{wt}b{bs}s{stats}o{out}"
                    yield f"rows|{key}", p, rows.variants, run


def _reduce_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import reduce
    from torch_webgpu.kernels.reduce import ReduceProblem

    def run(p, caps, name):
        plan = reduce.plan_reduce(p, caps, name)
        return _sha({"steps": [{"launch": launch_content(s.launch), "windows": dict(s.windows)}
                               for s in plan.steps], "scratch": dict(plan.scratch)})

    ops = {"f": ["sum", "mean", "nansum", "prod", "amax", "amin", "norm1", "norm2", "normp", "norm0",
                 "norm_inf", "norm_ninf", "argmax", "argmin", "var", "std", "logsumexp", "any", "all",
                 "count_nonzero"],
           "i": ["sum", "prod", "amax", "amin", "argmax", "argmin", "any", "count_nonzero"],
           "l": ["sum", "prod", "amax", "argmin", "all"]}
    dtypes = {"f": ["f32", "f16", "bf16"], "i": ["i32", "i16", "i8", "u8", "bool"], "l": ["i64"]}
    shapes = ((1, 1000, 1, 0), (1, 1 << 22, 1, 0), (64, 768, 1, 4), (8, 512, 33, 0), (1, 100000, 16, 0),
              (3, 7, 5, 1))
    for kind, names in ops.items():
        for op in names:
            for dtype in dtypes[kind]:
                for outer, length, inner, off in shapes:
                    wi = op.startswith("arg")
                    p = ReduceProblem(op, dtype, outer, length, inner, off,
                                      scalar=2.0 if op == "normp" else 1.0, with_index=wi)
                    yield f"reduce|{op}|{dtype}|{outer}x{length}x{inner}+{off}", p, reduce.variants, run


def _small_entries() -> Iterator[Entry]:
    from torch_webgpu.kernels import narrow, sampling

    names, run = _single("narrow", lambda n, caps: narrow.plan_narrow(n, caps))
    for n in (1, 1000, 1 << 26):
        yield f"narrow|{n}", n, names, run
    names, run = _single("sample", lambda p, caps: sampling.sample_launch(p, (1, 2, 3, 4)))
    for mode in sampling.MODES:
        for dtype in ("f32", "f16"):
            for rows, n, top_k, top_p, t, words in ((1, 50257, 50, 0.9, 0.7, 2), (4, 1000, 0, 1.0, 1.0, 1)):
                p = sampling.SampleProblem(mode, dtype, rows, n, top_k=top_k, top_p=top_p, temperature=t,
                                           out_words=words)
                yield f"sample|{mode}|{dtype}|{rows}x{n}|k{top_k}p{top_p}", p, names, run


# ---- the eager strided kernels (ops/codegen before issue 40; kernels/ after) -------------------------

def _strided_entries() -> Iterator[Entry]:
    def names(job, caps):
        return ["default"]

    def run(job, caps, name):
        return _sha(job(caps))

    for key, job in _strided_jobs():
        yield f"strided|{key}", job, names, run


def _strided_content(plan: Any) -> dict:
    (launch,) = plan.steps
    return {"wgsl": launch.wgsl, "grid": list(launch.grid), "bindings": len(launch.bindings),
            "params": list(launch.params) + [0] * (-len(launch.params) % 4)}


def _strided_jobs() -> Iterator[tuple[str, Callable[[DeviceCaps], dict]]]:
    """The eager strided kernels (the general matmul, direct convolutions, strided row ops) over a grid of
    dtypes, layouts and epilogues, as jobs returning {wgsl, grid, params, bindings}."""
    from torch_webgpu.kernels import rows

    if not hasattr(rows, "StridedRowProblem"):   # before issue 40 they lived in ops/codegen
        yield from _ops_codegen_jobs()
        return
    import torch

    from torch_webgpu.kernels import conv, matmul
    from torch_webgpu.kernels.conv import DirectConvProblem, Strided1, Strided4
    from torch_webgpu.kernels.matmul import Layout, MatmulProblem
    from torch_webgpu.kernels.rows import StridedRowProblem, View
    from torch_webgpu.ops.codegen.dtypes import storage_name

    for dt in (torch.float16, torch.bfloat16, torch.int32):   # f32 takes the tuned variants
        out_dt = torch.int32 if dt == torch.int32 else torch.float32
        for b, m, n, k in ((1, 5, 7, 9), (3, 64, 48, 33), (2, 1, 300, 17)):
            for layout in ("contig", "trans"):
                a = Layout(0, m * k, k, 1) if layout == "contig" else Layout(0, m * k, 1, m)
                for bias in (None, Layout(1, 0, 0, 1)):
                    scale = 2 if out_dt == torch.int32 else 0.5
                    dtype, in_dtype = storage_name(out_dt), storage_name(dt)
                    p = MatmulProblem(b, m, n, k, a, Layout(2, k * n, n, 1), Layout(0, m * n, n, 1),
                                      dtype=dtype, bias=bias, alpha=scale, beta=scale,
                                      in_dtype=in_dtype if in_dtype != dtype else None)

                    def job(caps, p=p):
                        return _strided_content(matmul.FAMILY.steps(p, caps))
                    yield f"matmul|{dt}|{b}x{m}x{n}x{k}|{layout}|bias={bias is not None}", job

    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for kind in ("fwd", "data", "wgrad"):
            for bias in (False, True):
                if bias and kind != "fwd":
                    continue
                name = storage_name(dt)
                p = DirectConvProblem(kind, (2, 16, 5, 6), Strided4(0, (960, 120, 12, 1)), (2, 8, 10, 12),
                                      Strided4(0, (36, 9, 3, 1)), (16, 4, 3, 3), (2, 2), (1, 1), (1, 1),
                                      (3, 3), 4, 8, name, name, Strided1(0, 1) if bias else None,
                                      name if bias else None)

                def job(caps, p=p):
                    return _strided_content(conv.DIRECT_FAMILY.steps(p, caps))
                yield f"conv|{dt}|{kind}|bias={bias}", job

    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for kind in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "layer_norm"):
            grad = View(0, (35, 7, 1)) if kind.endswith("backward") else None
            for dim in (1, 2):
                p = StridedRowProblem(kind, storage_name(dt), (3, 5, 7), dim, View(2, (35, 1, 5)),
                                      View(0, (35, 7, 1)), grad, storage_name(dt) if grad else None, 1e-5,
                                      kind == "layer_norm")

                def job(caps, p=p):
                    return _strided_content(rows.STRIDED_FAMILY.steps(p, caps))
                yield f"rows|{dt}|{kind}|dim={dim}", job


def _ops_codegen_jobs() -> Iterator[tuple[str, Callable[[DeviceCaps], dict]]]:
    """The same jobs through the eager launch functions of ops/codegen (the code before issue 40), with a
    recording stand-in for the runtime."""
    import torch

    from torch_webgpu.ops.codegen.operand import Operand

    def capture(module, call: Callable[[], None]) -> dict:
        got: dict = {}

        class FakeRuntime:
            def kernel(self, src, *a, **k):
                got["wgsl"] = src
                return "kernel"

            def constant(self, data):
                got["params"] = list(memoryview(bytes(data)).cast("I"))
                return "params"

        def dispatch(kernel, binds, grid, label=None):
            got["grid"] = list(grid)
            got["bindings"] = len(binds)

        saved = {name: getattr(module, name) for name in ("get_runtime", "dispatch") if hasattr(module, name)}
        module.get_runtime = FakeRuntime
        module.dispatch = dispatch
        try:
            call()
        finally:
            for name, value in saved.items():
                setattr(module, name, value)
        words = got.get("params", [])
        while words and len(words) % 4:   # params are compared as words, without the uniform's padding
            words.append(0)
        got["params"] = words
        return got

    def op(dtype, sizes, strides, offset=0, buf=1):
        return Operand(buf, offset, dtype, tuple(sizes), tuple(strides))

    mm = _eager_module("matmul")
    for dt in (torch.float16, torch.bfloat16, torch.int32):   # f32 takes the tuned variants
        out_dt = torch.int32 if dt == torch.int32 else torch.float32
        for b, m, n, k in ((1, 5, 7, 9), (3, 64, 48, 33), (2, 1, 300, 17)):
            for layout in ("contig", "trans"):
                a = op(dt, (b, m, k), (m * k, k, 1) if layout == "contig" else (m * k, 1, m))
                bb = op(dt, (b, k, n), (k * n, n, 1), 2, 2)
                o = op(out_dt, (b, m, n), (m * n, n, 1), 0, 3)
                for bias in (None, op(dt, (b, m, n), (0, 0, 1), 1, 4)):
                    scale = 2 if out_dt == torch.int32 else 0.5

                    def job(caps, mm=mm, a=a, bb=bb, o=o, bias=bias, scale=scale):
                        return capture(mm, lambda: mm.launch_matmul(a, bb, o, bias, scale, scale))
                    yield f"matmul|{dt}|{b}x{m}x{n}x{k}|{layout}|bias={bias is not None}", job

    cv = _eager_module("conv")
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for kind in ("fwd", "data", "wgrad"):
            for bias in (False, True):
                if bias and kind != "fwd":
                    continue
                a = op(dt, (2, 8, 10, 12), (960, 120, 12, 1))
                w = op(dt, (16, 4, 3, 3), (36, 9, 3, 1), 0, 2)
                o = op(torch.float32, (2, 16, 5, 6), (480, 30, 6, 1), 0, 3)
                c = op(dt, (16,), (1,), 0, 4) if bias else None

                def job(caps, cv=cv, kind=kind, a=a, w=w, o=o, c=c):
                    return capture(cv, lambda: cv.launch_conv(kind, a, w, o, (2, 2), (1, 1), (1, 1), (3, 3),
                                                              4, 8, c))
                yield f"conv|{dt}|{kind}|bias={bias}", job

    rw = _eager_module("rowwise")
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for kind in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "layer_norm"):
            x = op(dt, (3, 5, 7), (35, 1, 5), 2)
            o = op(torch.float32, (3, 5, 7), (35, 7, 1), 0, 3)
            g = op(dt, (3, 5, 7), (35, 7, 1), 0, 2) if kind.endswith("backward") else None
            extra = 9 if kind == "layer_norm" else None
            for dim in (1, 2):
                def job(caps, rw=rw, kind=kind, x=x, o=o, g=g, extra=extra, dim=dim):
                    return capture(rw, lambda: rw.launch_rows(kind, x, dim, o, g, 1e-5, extra))
                yield f"rows|{dt}|{kind}|dim={dim}", job


def _eager_module(name: str):
    import importlib

    return importlib.import_module(f"torch_webgpu.ops.codegen.{name}")


FAMILIES: dict[str, Callable[[], Iterator[Entry]]] = {
    "matmul": _matmul_entries, "grouped": _grouped_entries, "quant": _quant_entries,
    "qembedding": _quant_embedding_entries, "conv": _conv_entries, "attention": _attention_entries,
    "rows": _rows_entries, "reduce": _reduce_entries, "small": _small_entries, "strided": _strided_entries,
}


def _variant_hashes(p: Any, caps: DeviceCaps, names: list[str], run: Callable) -> list[str]:
    out = []
    for name in names:
        if name.startswith("error:"):
            out.append(name)
            continue
        try:
            out.append(run(p, caps, name))
        except (TypeError, ValueError, NotImplementedError) as e:
            out.append(f"error:{type(e).__name__}")
    return out


def _offered(variants_of: Callable, p: Any, caps: DeviceCaps) -> list[str]:
    try:
        return list(variants_of(p, caps))
    except (TypeError, ValueError) as e:
        return [f"error:{type(e).__name__}"]


def collect(only: set[str] | None = None, match: str | None = None) -> dict[str, dict[str, list[str]]]:
    """{family|problem|device: {"candidates": [...], "variants": [...]}} over the whole grid (`only`: these
    families; `match`: the keys a regex finds in)."""
    result: dict[str, dict[str, list[str]]] = {}
    caps_by_name = devices()
    for family, entries in FAMILIES.items():
        if only and family not in only:
            continue
        for key, p, variants_of, run in entries():
            for cname, caps in caps_by_name.items():
                if match and not re.search(match, f"{key}|{cname}"):
                    continue
                _unregister_experimental()
                shipping = _offered(variants_of, p, caps)[:autotune.MAX_CANDIDATES]
                _register_experimental()   # planned while offered: a variant runs only what is offered
                every = _offered(variants_of, p, caps)
                hashes = dict(zip(every, _variant_hashes(p, caps, every, run), strict=True))
                _unregister_experimental()
                result[f"{key}|{cname}"] = {
                    "candidates": [hashes[n] if n in hashes else _variant_hashes(p, caps, [n], run)[0]
                                   for n in shipping],
                    "variants": [hashes[n] for n in every]}
    return result


def compare(before_path: str, after_path: str) -> int:
    """Print the differences between two outputs; 1 if any. "candidates" must be equal in order (the
    default and what the autotuner times); "variants" as multisets (where registered experimental variants
    come in a family's list is no behaviour; their order is reported apart)."""
    before, after = json.loads(open(before_path).read()), json.loads(open(after_path).read())
    differ = 0
    for kind, same_as in (("candidates", list), ("variants", sorted)):
        common = [k for k in before if k in after]
        changed = [k for k in common if same_as(before[k][kind]) != same_as(after[k][kind])]
        reordered = [k for k in common if k not in changed and before[k][kind] != after[k][kind]]
        total_b = sum(len(v[kind]) for v in before.values())
        total_a = sum(len(v[kind]) for v in after.values())
        print(f"{kind}: {len(before)} keys before, {len(after)} after; {len(common) - len(changed)} identical"
              f"{' as sets' if same_as is sorted else ''}, {len(changed)} differ"
              f"{f' ({len(reordered)} in another order)' if reordered else ''}; {total_b} variant hashes "
              f"before, {total_a} after")
        for k in changed[:40]:
            b, a = before[k][kind], after[k][kind]
            print(f"  {k}: {len(b)} -> {len(a)}; {len(set(b) - set(a))} only before, "
                  f"{len(set(a) - set(b))} only after")
        differ |= bool(changed)
    missing = sorted(set(before) ^ set(after))
    if missing:
        print(f"{len(missing)} keys on one side only:", *missing[:20], sep="\n  ")
    return int(differ or bool(missing))


def main(argv: list[str]) -> int:
    """`OUT.json [FAMILY...] [--match REGEX]` or `compare BEFORE AFTER`."""
    if argv[:1] == ["compare"] and len(argv) == 3:
        return compare(argv[1], argv[2])
    match = None
    if "--match" in argv:
        i = argv.index("--match")
        match, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    if not argv:
        print("usage: python -m tools.kernel_hashes OUT.json [FAMILY...] [--match REGEX] | "
              "compare BEFORE.json AFTER.json")
        return 2
    result = collect(set(argv[1:]) or None, match)
    with open(argv[0], "w") as f:
        json.dump(result, f, indent=0, sort_keys=True)
    n = sum(len(v["variants"]) for v in result.values())
    print(f"{len(result)} (family, problem, device) keys, {n} variant hashes -> {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
