"""Where a library matmul kernel's time goes: the kernel beside copies of it with one part taken out,
timed on the raw runtime from GPU timestamps (the copies compute wrong results: timing only).

`python -m benchmarks anatomy matmul [--size N] [--f16 VARIANTS] [--f32 VARIANTS] [--reps R] [--json FILE]`
prints one JSON row per (dtype, part): microseconds and the TFLOP/s the full problem would have at that
time. Parts of a tensor-core (sgmat) kernel: `full`; `no staging` (no global loads or stores into the K
tiles: multiplies and fragment loads of whatever the tiles hold); `no staging or barriers` (that without
any workgroupBarrier); `no multiplies` (staging and barriers
only, the tiles kept alive by a read the compiler cannot rule out); `multiplies only` (fragments loaded
once, before the K loop); `global loads only` (no multiplies, the staging's loads folded into one value
instead of stored into the K tiles); `tile stores only` (no multiplies, the staging's stores of values
made from indices instead of loaded). Parts of a register-tiled f32 kernel: `full`, `no staging`, `no
staging or barriers`, `no multiplies`, `global loads only`, `tile stores only`. Pipelined (`.plN`)
kernels stage outside the loop's head: their `no staging` parts drop the staging's lines wherever they are
(and have no `multiplies only`). VARIANTS: comma-separated names of kernels/matmul.py's variants.
"""

from __future__ import annotations

import re

import numpy as np

from ..json_rows import emit, rows_main
from ..library.matmul import _import_library, time_launches, with_experimental_variants


def _keep_alive(tiles: str = "") -> str:
    """An always-false branch the compiler cannot decide (M is a uniform) that keeps A and B bound (a part
    without the staging reads neither) and, with `tiles` (a read of the K tiles into O[li]), the stores
    into the tiles alive."""
    return f"  if (M == 123456789u) {{ {tiles + ' ' if tiles else ''}_ = A[0]; _ = B[0]; }}\n"


def _drop_lines(src: str, pattern: str) -> str:
    return "\n".join(line for line in src.splitlines() if not re.search(pattern, line)) + "\n"


def _before_last_brace(src: str, text: str) -> str:
    cut = src.rstrip().rfind("}")
    return src[:cut] + text + src[cut:]


def _declare_keep(src: str, zero: str) -> str:
    """`src` with `var keep` (what a loads-only part folds its loads into) declared at the entry's top."""
    head = src.index("\n", src.index("  let M = P.mnkb.x;")) + 1
    return src[:head] + f"  var keep = {zero};\n" + src[head:]


def _loads_only(src: str, stash: str, fold: str, zero: str, out: str) -> str:
    """`src` without its stores into the K tiles: each line matching `stash` (group 1: the register
    stored) becomes `fold` of it into `keep`, which an always-false branch writes out as `out`."""
    folded = "\n".join(re.sub(stash, fold, line) for line in src.splitlines()) + "\n"
    return _before_last_brace(_declare_keep(folded, zero), _keep_alive(f"O[li] = {out};"))


def _stores_only(src: str, load: str, fake: str, tiles: str) -> str:
    """`src` without its global loads: each match of `load` becomes `fake` (a value of the invocation's
    indices), the stores into the K tiles kept alive by `tiles`."""
    return _before_last_brace(re.sub(load, fake, src), _keep_alive(tiles))


def sgmat_parts(launch) -> dict[str, str]:
    """The WGSL of each part of tensor-core kernel `launch` (see the module docstring)."""
    src = launch.wgsl
    fragments = r"subgroupMatrixLoad<subgroup_matrix_(left|right)"
    loop = src.index("for (var t = ")
    staged = src[loop:src.index("workgroupBarrier();", loop)]
    no_staging = _before_last_brace(src.replace(staged[staged.index("\n") + 1:], ""), _keep_alive())
    # each fragment's first load (the K tile's 16-deep blocks load them again at other offsets)
    hoisted = list({line.split("=")[0]: line for line in reversed(src.splitlines())
                    if re.search(fragments, line)}.values())[::-1]
    mma_only = _drop_lines(no_staging, fragments)
    head = mma_only.index("  for (var t = ")
    mma_only = mma_only[:head] + "\n".join(hoisted) + "\n" + mma_only[head:]
    no_mma = _drop_lines(src, fragments + "|subgroupMatrixMultiplyAccumulate")
    no_mma = _before_last_brace(no_mma, _keep_alive("O[li] = f16(As[0][li]) + f16(Bs[0][li]);"))
    no_mma_body = _drop_lines(src, fragments + "|subgroupMatrixMultiplyAccumulate")
    loads = _loads_only(_drop_lines(no_mma_body, r"= h\.[xy];$"), r"let h = bitcast<vec2<f16>>\((.+)\);",
                        r"keep ^= \1;", "0u", "f16(f32(keep))")
    stores = _stores_only(no_mma_body, r"= [AB]\[\(.*\) / 8u\];", "= vec4<u32>(gr, gc, li, 7u);",
                          "O[li] = f16(As[0][li]) + f16(Bs[0][li]);")
    parts = {"full": src, "no staging": no_staging,
             "no staging or barriers": _drop_lines(no_staging, "workgroupBarrier"),
             "no multiplies": no_mma, "multiplies only": mma_only,
             "global loads only": loads, "tile stores only": stores}
    if "let tn = " in src:
        parts.pop("multiplies only")
        _drop_pipelined_staging(parts, src, r"= [AB]\[\(.*\) / 8u\];|= h\.[xy];$|let h = bitcast")
    return parts


def _drop_pipelined_staging(parts: dict[str, str], src: str, staging: str) -> None:
    """The no-staging parts of a pipelined kernel, which stages before its K loop and at the end of each
    step rather than at the loop's head: every line matching `staging` taken out."""
    parts["no staging"] = _before_last_brace(_drop_lines(src, staging), _keep_alive())
    parts["no staging or barriers"] = _drop_lines(parts["no staging"], "workgroupBarrier")


def tiled_parts(launch) -> dict[str, str]:
    """The WGSL of each part of register-tiled kernel `launch`."""
    src = launch.wgsl
    loop = src.index("  for (var t = ")
    body = src.index("    workgroupBarrier();", loop)
    no_staging = _before_last_brace(src[:src.index("\n", loop) + 1] + src[body:], _keep_alive())
    no_mma = _drop_lines(src, r"= fma\(|let [ab]\d+ = [AB]s\[")
    x = ".x" if "array<vec4<f32>," in src else ""   # K tiles of vec4s (lds4) or of scalars
    keep = _keep_alive(f"O[li] = As[li]{x} + Bs[li]{x};")
    loads = _loads_only(no_mma, r"^\s*[AB]s\[.*\] = (.+);$", r"    keep += \1;", "0.0", "keep")
    stores = _stores_only(no_mma, r"= (vec4<f32>|f32)\([AB]\[.*\]\);", r"= \1(f32(li));",
                          f"O[li] = As[li]{x} + Bs[li]{x};")
    parts = {"full": src, "no staging": no_staging,
             "no staging or barriers": _drop_lines(no_staging, "workgroupBarrier"),
             "no multiplies": _before_last_brace(no_mma, keep),
             "global loads only": loads, "tile stores only": stores}
    if "let tn = " in src:
        _drop_pipelined_staging(parts, src, r"= (vec4<f32>|f32)\([AB]\[|^\s*[AB]s\[.*\] = .+;$")
    return parts


@with_experimental_variants
def run(size: int, f16: str, f32: str, reps: int) -> list[dict]:
    """One row per (dtype, part)."""
    runtime, kernels, mm = _import_library()
    rt = runtime.get_runtime()
    caps = kernels.DeviceCaps.from_runtime(rt)
    rows = []
    wanted = [("f32", v) for v in f32.split(",") if v] + [("f16", v) for v in f16.split(",") if v]
    for dtype, variant in wanted:
        if dtype == "f16" and not caps.shader_f16:
            continue
        npt = np.float32 if dtype == "f32" else np.float16
        ids = {}
        for role in ("a", "b", "out"):
            ids[role] = rt.allocate(size * size * np.dtype(npt).itemsize)
        rt.upload(ids["a"], np.ones((size, size), npt))
        rt.upload(ids["b"], np.ones((size, size), npt))
        lay = mm.Layout(0, 0, size, 1)
        p = mm.MatmulProblem(1, size, size, size, lay, lay, lay, dtype=dtype)
        if variant not in mm.variants(p, caps):
            rows.append(emit({"dtype": dtype, "variant": variant, "error": "not offered on this device"}))
            continue
        launch = mm.plan_matmul(p, caps, variant)
        parts = sgmat_parts(launch) if variant.startswith("sgmat") else tiled_parts(launch)
        for part, src in parts.items():
            row = {"dtype": dtype, "variant": variant, "part": part, "size": size}
            try:
                seconds = time_launches(rt, kernels, [(_with_wgsl(launch, src, part), ids)], reps)
                row["us"] = round(seconds * 1e6, 1)
                row["tflops_equivalent"] = round(2.0 * size ** 3 / seconds / 1e12, 2)
            except Exception as exc:  # noqa: BLE001  (one part failing must not stop the others)
                row["error"] = f"{type(exc).__name__}: {str(exc)[-1500:]}"
            rows.append(emit(row))
        for buf in ids.values():
            rt.free(buf)
    return rows


def _with_wgsl(launch, src: str, part: str):
    import dataclasses

    return dataclasses.replace(launch, wgsl=src, name=f"{launch.name}.{part.replace(' ', '_')}")


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: print one JSON row per part and optionally write them all to --json."""
    rows_main(run, __doc__, argv, prog, size=4096, f16="sgmat.w2x2.f4x4.k32", f32="tile128x64.r8x4.k16.l4.v4",
              reps=10)
