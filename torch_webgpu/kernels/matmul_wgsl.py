"""WGSL of the matmul family, generated from one parametrized template per kernel shape.

Three bodies share the params struct and the epilogue: `tiled` (register-tiled SIMT: workgroup-memory
K tiles, TM×TN outputs per thread, optional vec4 global loads per operand), `gemv` (one workgroup per
block of N columns, split-K across invocations, reduced through subgroups or workgroup memory) and
`sgmat` (tensor cores through chromium-experimental-subgroup-matrix, K tiles staged in workgroup
memory: `sgmat_wgsl`, which builds on this module's params struct, epilogue and tile helpers). Every
variant accumulates in f32; `dtype` is only the storage type of the operands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from .wgsl import functions_for, load_fn

# The epilogue's activations of `v` (f32); their functions come from the one prelude (`activation_functions`),
# so a fused GELU computes the eager GELU's numbers.
ACTIVATIONS = {
    None: "v",
    "relu": "max(v, 0.0)",
    "relu6": "clamp(v, 0.0, 6.0)",
    "gelu": "0.5 * v * (1.0 + erf_(v * 0.70710678118654752))",
    "gelu_tanh": ("0.5 * v * (1.0 + tanh(clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), "
                  "-15.0, 15.0)))"),
    "silu": "v / (1.0 + exp(-v))",
    "sigmoid": "1.0 / (1.0 + exp(-v))",
    "tanh": "tanh(clamp(v, -15.0, 15.0))",
}


def activation_functions(*activations: str | None) -> str:
    """WGSL of the prelude functions the given activations call (`erf_` and its helpers for "gelu")."""
    return functions_for(*(ACTIVATIONS[a] for a in activations))


@dataclass(frozen=True)
class Epilogue:
    """What follows the product: storage dtype, bias (with beta), activation, residual."""

    dtype: str
    bias: bool
    residual: bool
    activation: str | None


def _params_struct(split: bool) -> list[str]:
    """The params struct; split-K kernels add `sk` = (K per slice, slices, 0, 0)."""
    return ["struct Params { mnkb: vec4<u32>, a: vec4<u32>, b: vec4<u32>, o: vec4<u32>, c: vec4<u32>,",
            "                r: vec4<u32>, ab: vec4<f32>" + (", sk: vec4<u32> }" if split else " }"),
            "@group(0) @binding(0) var<uniform> P: Params;"]


def _enables(t: str, extra: tuple[str, ...] = ()) -> str:
    return "".join(f"enable {x};\n" for x in (("f16",) if t == "f16" else ()) + extra)


def header(e: Epilogue, a_elem: str, b_elem: str, extra_enables: tuple[str, ...] = (),
           partials: bool = False, out_vec: bool = False) -> str:
    """Enables, the params struct and the bindings (A and B typed `a_elem`/`b_elem`: scalar or vec4).
    `partials`: the first pass of a split-K matmul, whose binding 3 is the f32 scratch W of per-slice
    partial sums (no epilogue operands; `combine_source` applies the epilogue). `out_vec`: O is an array
    of vec4 (finish_fn's `finish4`)."""
    t = e.dtype
    lines = [_enables(t, extra_enables), *_params_struct(partials),
             f"@group(0) @binding(1) var<storage, read> A: array<{a_elem}>;",
             f"@group(0) @binding(2) var<storage, read> B: array<{b_elem}>;"]
    if partials:
        return "\n".join(lines + ["@group(0) @binding(3) var<storage, read_write> W: array<f32>;"]) + "\n"
    out_t = f"vec4<{t}>" if out_vec else t
    lines.append(f"@group(0) @binding(3) var<storage, read_write> O: array<{out_t}>;")
    if e.bias:
        lines.append(f"@group(0) @binding(4) var<storage, read> C: array<{t}>;")
    if e.residual:
        lines.append(f"@group(0) @binding({5 if e.bias else 4}) var<storage, read> R: array<{t}>;")
    return "\n".join(lines) + "\n" + activation_functions(e.activation)


def finish_fn(e: Epilogue, out_vec: bool = False) -> str:
    """`finish(batch, row, col, acc)`: bounds check, alpha, bias*beta, activation, residual, store.
    `out_vec` (O an array of vec4, the output's rows contiguous and 4-aligned): also `finish4(batch,
    row, col, acc)` for the 4 columns from `col` (a multiple of 4), one 16-byte (f32) or 8-byte (f16)
    store where all 4 are inside the output."""
    bias = ("  v = v + P.ab.y * f32(C[P.c.x + batch * P.c.y + row * P.c.z + col * P.c.w]);\n"
            if e.bias else "")
    res = "  v = v + f32(R[P.r.x + batch * P.r.y + row * P.r.z + col * P.r.w]);\n" if e.residual else ""
    steps = f"  var v = P.ab.x * acc;\n{bias}  v = {ACTIVATIONS[e.activation]};\n{res}"
    if out_vec:
        return f"""
fn epilogue(batch: u32, row: u32, col: u32, acc: f32) -> f32 {{
{steps}  return v;
}}

fn finish(batch: u32, row: u32, col: u32, acc: f32) {{
  if (row >= P.mnkb.x || col >= P.mnkb.y) {{ return; }}
  let at = P.o.x + batch * P.o.y + row * P.o.z + col * P.o.w;
  O[at / 4u][at % 4u] = {e.dtype}(epilogue(batch, row, col, acc));
}}

fn finish4(batch: u32, row: u32, col: u32, acc: vec4<f32>) {{
  if (row >= P.mnkb.x) {{ return; }}
  if (col + 4u > P.mnkb.y) {{
    for (var j = 0u; j < 4u; j++) {{ finish(batch, row, col + j, acc[j]); }}
    return;
  }}
  let v = vec4<f32>(epilogue(batch, row, col, acc.x), epilogue(batch, row, col + 1u, acc.y),
                    epilogue(batch, row, col + 2u, acc.z), epilogue(batch, row, col + 3u, acc.w));
  O[(P.o.x + batch * P.o.y + row * P.o.z + col) / 4u] = vec4<{e.dtype}>(v);
}}
"""
    return f"""
fn finish(batch: u32, row: u32, col: u32, acc: f32) {{
  if (row >= P.mnkb.x || col >= P.mnkb.y) {{ return; }}
{steps}  O[P.o.x + batch * P.o.y + row * P.o.z + col * P.o.w] = {e.dtype}(v);
}}
"""


# `finish` of a split-K first pass: the slice's raw f32 sum of (slice * batches + batch, row, col), dense
PARTIAL_FINISH = """
fn finish(zb: u32, row: u32, col: u32, acc: f32) {
  if (row >= P.mnkb.x || col >= P.mnkb.y) { return; }
  W[(zb * P.mnkb.x + row) * P.mnkb.y + col] = acc;
}
"""


def combine_source(e: Epilogue, splits: int, threads: int = 256) -> str:
    """The second pass of a split-K matmul: one invocation per output element sums its `splits` f32
    partials (scratch W, [splits, batch, M, N]) and applies the whole epilogue (`finish_fn`)."""
    t = e.dtype
    lines = [_enables(t), *_params_struct(True),
             "@group(0) @binding(1) var<storage, read> W: array<f32>;",
             f"@group(0) @binding(2) var<storage, read_write> O: array<{t}>;"]
    if e.bias:
        lines.append(f"@group(0) @binding(3) var<storage, read> C: array<{t}>;")
    if e.residual:
        lines.append(f"@group(0) @binding({4 if e.bias else 3}) var<storage, read> R: array<{t}>;")
    head = "\n".join(lines) + "\n" + activation_functions(e.activation)
    return f"""{head}{finish_fn(e)}
@compute @workgroup_size({threads})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let M = P.mnkb.x; let N = P.mnkb.y;
  let total = M * N * P.mnkb.w;
  let e = gid.x + gid.y * nwg.x * {threads}u;
  if (e >= total) {{ return; }}
  var acc = 0.0;
  for (var s = 0u; s < {splits}u; s++) {{ acc += W[s * total + e]; }}
  let col = e % N; let r = e / N;
  finish(r / M, r % M, col, acc);
}}
"""


def _tile_load(src: str, lay: str, tile: str, bi: int, bk: int, i0: str, dim: str, mode: str,
               threads: int, i_is_row: bool, lds4: bool = False, whole: bool = False, pad: int = 0) -> str:
    """Code that copies a (bi × bk) tile of operand `src` (outer index i, inner k) into the workgroup
    array `tile` laid out [k][i] (f32). `mode`: "k" / "i" (vec4 along that axis, stride 1) or a
    scalar order "sk" / "si" (which axis consecutive invocations walk). `whole` (vec4 tiles): each vec4
    stored at once (_vec4_stash), A's "k" mode into an [i][k] tile (tiled_source's `a_rows`). `pad`:
    words after each k line of the [k][i] tile (tiled_source's `a_pad`)."""
    # element (i, k) of the operand sits at base + i * si + k * sk
    si, sk = (f"P.{lay}.z", f"P.{lay}.w") if i_is_row else (f"P.{lay}.w", f"P.{lay}.z")
    base = f"(P.{lay}.x + batch * P.{lay}.y)"
    vec = mode in ("k", "i")
    units = bi * bk // (4 if vec else 1)
    iters = -(-units // threads)
    out = [f"  for (var u = 0u; u < {iters}u; u++) {{", f"    let e = li + u * {threads}u;"]
    if units % threads:
        out.append(f"    if (e >= {units}u) {{ break; }}")
    k_line = bi + pad   # words from one k line of the [k][i] tile to the next
    if mode in ("sk", "k"):
        kw = bk // 4 if vec else bk
        out += [f"    let kk = (e % {kw}u){' * 4u' if vec else ''};", f"    let ii = e / {kw}u;"]
    else:
        iw = bi // 4 if vec else bi
        out += [f"    let ii = (e % {iw}u){' * 4u' if vec else ''};", f"    let kk = e / {iw}u;"]
    out.append(f"    let gi = {i0} + ii; let gk = t + kk;")
    if not vec:
        out += ["    var x = 0.0;",
                f"    if (gi < {dim} && gk < K) {{ x = f32({src}[{base} + gi * {si} + gk * {sk}]); }}",
                f"    {_lds_at(tile, f'kk * {k_line}u + ii', lds4)} = x;"]
    else:
        index = (f"({base} + gi * {si} + gk) / 4u" if mode == "k" else f"({base} + gi + gk * {sk}) / 4u")
        out += ["    var x = vec4<f32>(0.0);",
                f"    if (gi < {dim} && gk < K) {{ x = vec4<f32>({src}[{index}]); }}"]
        at_once = _vec4_stash(tile, "x", "ii", "kk", bi, bk, mode, i_is_row, "") if whole and lds4 else ""
        for q in range(0 if at_once else 4):
            dst = f"(kk + {q}u) * {k_line}u + ii" if mode == "k" else f"kk * {k_line}u + ii + {q}u"
            out.append(f"    {_lds_at(tile, dst, lds4)} = x[{q}];")
        if at_once:
            out.append(at_once)
    out.append("  }")
    return "\n".join(out)


def _tile_fetch_stash(src: str, lay: str, tile: str, bi: int, bk: int, i0: str, dim: str, mode: str,
                      threads: int, i_is_row: bool, lds4: bool, k0: str, base: str, tag: str = "",
                      declare: bool = True, whole: bool = False, pad: int = 0) -> tuple[str, str]:
    """`_tile_load` in two halves, for double-buffered K tiles: `fetch` reads this invocation's share of
    the tile at K offset `k0` into registers (so the loads are in flight while the previous tile is
    multiplied), `stash` writes them into the workgroup array `tile` from element `base` on. `tag` names
    another register set; `declare` False assigns registers declared before (they outlive a step);
    `whole` and `pad` as in _tile_load."""
    si, sk = (f"P.{lay}.z", f"P.{lay}.w") if i_is_row else (f"P.{lay}.w", f"P.{lay}.z")
    origin = f"(P.{lay}.x + batch * P.{lay}.y)"
    vec = mode in ("k", "i")
    units = bi * bk // (4 if vec else 1)
    fetch, stash = [], []
    var = "var " if declare else ""
    k_line = bi + pad   # words from one k line of the [k][i] tile to the next
    for u in range(-(-units // threads)):
        r = f"{tile.lower()}{tag}{u}"
        fetch.append(f"    let {r}e = li + {u * threads}u;")
        if mode in ("sk", "k"):
            kw = bk // 4 if vec else bk
            fetch += [f"    let {r}k = ({r}e % {kw}u){' * 4u' if vec else ''};",
                      f"    let {r}i = {r}e / {kw}u;"]
        else:
            iw = bi // 4 if vec else bi
            fetch += [f"    let {r}i = ({r}e % {iw}u){' * 4u' if vec else ''};",
                      f"    let {r}k = {r}e / {iw}u;"]
        fetch.append(f"    let {r}gi = {i0} + {r}i; let {r}gk = {k0} + {r}k;")
        last = (u + 1) * threads > units
        inside = f"{r}gi < {dim} && {r}gk < K" + (f" && {r}e < {units}u" if last else "")
        # the last round of a tile that does not divide among the invocations: the rest stash nothing
        open_, close = (f"    if ({r}e < {units}u) {{", "    }") if last else ("", "")
        stash.append(open_)
        if not vec:
            fetch += [f"    {var}{r} = 0.0;",
                      f"    if ({inside}) {{ {r} = f32({src}[{origin} + {r}gi * {si} + {r}gk * {sk}]); }}"]
            stash.append(f"    {_lds_at(tile, f'{r}k * {k_line}u + {r}i', lds4, base)} = {r};")
        else:
            index = (f"({origin} + {r}gi * {si} + {r}gk) / 4u" if mode == "k"
                     else f"({origin} + {r}gi + {r}gk * {sk}) / 4u")
            fetch += [f"    {var}{r} = vec4<f32>(0.0);",
                      f"    if ({inside}) {{ {r} = vec4<f32>({src}[{index}]); }}"]
            at_once = (_vec4_stash(tile, r, f"{r}i", f"{r}k", bi, bk, mode, i_is_row, base)
                       if whole and lds4 else "")
            for q in range(0 if at_once else 4):
                dst = (f"({r}k + {q}u) * {k_line}u + {r}i" if mode == "k"
                       else f"{r}k * {k_line}u + {r}i + {q}u")
                stash.append(f"    {_lds_at(tile, dst, lds4, base)} = {r}[{q}];")
            if at_once:
                stash.append(at_once)
        stash.append(close)
    return "\n".join(fetch), "\n".join(line for line in stash if line)


# f32 padding (one vec4) of each k line of a [k][i] A tile (tiled_source's `a_pad`): a warp's transposing
# stores of a K-contiguous A (32 / (bk/4) rows x bk/4 k-quads of 16-byte units) then spread over 32 banks
# at bk = 8 and 16 at bk = 16, where unpadded lines put them on 16 and 8. Units two per row (16 rows a
# warp, 32 banks at any bk) ran slower on the H100 (128x64.k16.db 33.6 TFLOP/s against 38.6): twice the
# 128-byte lines per warp load
LINE_PAD = 4


# f32 padding (one vec4) of each row of an [i][k] A tile (tiled_source's `a_rows`): the two rows one
# warp's vec4 reads take (4 apart) then start 16 banks apart
ROWS_PAD = 4


def _vec4_stash(tile: str, x: str, ii: str, kk: str, bi: int, bk: int, mode: str, i_is_row: bool,
                base: str) -> str:
    """The one store of the loaded vec4 `x` (unit at element (ii, kk)) into a vec4 K tile, or "" where it
    needs four (a K-contiguous B, transposed into the [k][i] tile): an "i"-mode unit at its place in the
    [k][i] tile, a K-contiguous A unit into the [i][k] tile of rows padded by ROWS_PAD."""
    at = f"{base} + " if base else ""
    if mode == "i":
        return f"    {tile}[{at}({kk} * {bi}u + {ii}) / 4u] = {x};"
    if mode == "k" and i_is_row:
        return f"    {tile}[{at}{ii} * {(bk + ROWS_PAD) // 4}u + {kk} / 4u] = {x};"
    return ""


def _rows_multiply(bm: int, bn: int, bk: int, tm: int, tn: int, abase: str, bbase: str) -> str:
    """The FMAs over a K tile whose A part is stored [i][k] (tiled_source's `a_rows`, `lds4` rows): four k
    per iteration, one vec4 read per row of A (its 4 k) and per 4 columns of B and k."""
    tx, ty = bn // tn, bm // tm
    stride = (bk + ROWS_PAD) // 4
    lines = [f"      let a{i} = As[{abase}({(i // 4) * 4 * ty + i % 4}u + 4u * lid.y) * {stride}u + kq];"
             for i in range(tm)]
    for s in range(4):
        lines += [f"      let b{s}_{g} = Bs[{bbase}(kq * 4u + {s}u) * {bn // 4}u + {g * tx}u + lid.x];"
                  for g in range(tn // 4)]
        lines += [f"      acc{i}_{j} = fma(a{i}[{s}], b{s}_{j // 4}[{j % 4}], acc{i}_{j});"
                  for i in range(tm) for j in range(tn)]
    body = "\n".join(lines)
    return f"""    for (var kq = 0u; kq < {bk // 4}u; kq++) {{
{body}
    }}"""


def _lds_at(tile: str, index: str, lds4: bool, base: str = "") -> str:
    """Element `index` of a workgroup K tile: scalar array, or a component of its vec4 array."""
    at = f"{base} + " if base else ""
    return f"{tile}[{at}({index}) / 4u][({index}) % 4u]" if lds4 else f"{tile}[{at}{index}]"


NUM_WORKGROUPS = ", @builtin(num_workgroups) nwg: vec3<u32>"   # the entry parameter tile_origin reads


def tile_origin(bm: int, bn: int, group: int) -> str:
    """WGSL for `m0`, `n0`: the first row and column of this workgroup's output tile. `group` > 0: tiles
    in launch order (x fastest) walk `group` tile rows down before the next column, so the workgroups
    resident together read a few panels of both operands instead of all of B (reuse in L2); needs the
    entry point's `nwg` (num_workgroups)."""
    if group <= 0:
        return f"  let m0 = wid.y * {bm}u; let n0 = wid.x * {bn}u;"
    return f"""  let pid = wid.y * nwg.x + wid.x;
  let row0 = (pid / ({group}u * nwg.x)) * {group}u;
  let rows = min(nwg.y - row0, {group}u);
  let q = pid % ({group}u * nwg.x);
  let m0 = (row0 + q % rows) * {bm}u; let n0 = (q / rows) * {bn}u;"""


class TileParams(Protocol):
    """What tiled_source reads of its variant's spec (matmul_variants.TiledSpec)."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    lds4: bool
    splits: int
    double: bool
    group: int
    pipelined: int
    a_rows: bool
    a_pad: bool
    out_vec: bool
    vec_stores: bool


def tiled_source(e: Epilogue, spec: TileParams, a_mode: str, b_mode: str) -> str:
    """Register-tiled SIMT matmul (the spec's fields named below): a (bm × bn) output tile per workgroup,
    (tm × tn) per invocation at rows ty + i * TY and cols tx + j * TX (conflict-free workgroup reads,
    coalesced stores). `lds4`: each invocation owns groups of 4 adjacent rows and columns (rows g·4·TY +
    4·ty + i), so it reads the K tiles as vec4 (a quarter of the workgroup-memory loads). `splits` > 1:
    split-K, the first pass: workgroup z = slice * batches + batch sums K slice [slice·P.sk.x, +P.sk.x) of
    its tile and stores the raw f32 sums to the scratch W (`combine_source` finishes them). `double`: two
    K-tile buffers; the next tile's global loads are issued before this one is multiplied and stored after
    it, one barrier per K tile. `group`: the launch order of the tiles (tile_origin). `pipelined` = D > 0:
    one buffer; each step fetches the K tile D ahead into registers before this tile's FMAs and stores the
    next one after them (_tile_fetch_stash), two barriers per K tile as in the plain loop. `a_rows` (a
    K-contiguous A read as vec4, `lds4`): the A tile is kept as it is in memory, [i][k] with rows padded
    by ROWS_PAD, and both tiles are stored in whole vec4s (no transposing scalar stores, which hit 2-4
    invocations per bank); the FMAs read A four k at a time (_rows_multiply). `a_pad` (a K-contiguous A
    read as vec4, `lds4`): the [k][i] A tile's lines LINE_PAD words apart, so that its transposing stores
    spread over the banks. `out_vec` (`lds4`, one pass): each invocation's groups of 4 adjacent outputs
    stored as one vector (finish_fn's `finish4`; O an array of vec4). `vec_stores` (`lds4`): a B loaded in
    vec4s along N is stored in whole vec4s (one 16-byte store per unit where its four components took four
    stores at a dynamic component index, four invocations a bank)."""
    bm, bn, bk, tm, tn, lds4 = spec.bm, spec.bn, spec.bk, spec.tm, spec.tn, spec.lds4
    splits, double, group, pipelined = spec.splits, spec.double, spec.group, spec.pipelined
    a_rows, a_pad, out_vec, vec_stores = spec.a_rows, spec.a_pad, spec.out_vec, spec.vec_stores
    t = e.dtype
    tx, ty = bn // tn, bm // tm
    threads = tx * ty
    a_elem = f"vec4<{t}>" if a_mode in ("k", "i") else t
    b_elem = f"vec4<{t}>" if b_mode in ("k", "i") else t
    accs = "\n".join(f"  var acc{i}_{j} = 0.0;" for i in range(tm) for j in range(tn))
    a_rows = a_rows and lds4 and a_mode == "k"
    pad = LINE_PAD if a_pad and lds4 and a_mode == "k" and not a_rows else 0
    a_words, b_words = (bm * bk // 4, bn * bk // 4) if lds4 else (bm * bk, bn * bk)
    if a_rows:
        a_words = bm * (bk + ROWS_PAD) // 4
    a_words += pad * bk // 4

    def multiply(buffer: int) -> str:
        """The loop over the K tile in `buffer` (the double-buffered form's 2nd): workgroup reads, FMAs."""
        abase, bbase = (f"{a_words}u + ", f"{b_words}u + ") if buffer else ("", "")
        if a_rows:
            return _rows_multiply(bm, bn, bk, tm, tn, abase, bbase)
        if lds4:
            reads = ([f"      let a{g} = As[{abase}k * {(bm + pad) // 4}u + {g * ty}u + lid.y];"
                      for g in range(tm // 4)]
                     + [f"      let b{g} = Bs[{bbase}k * {bn // 4}u + {g * tx}u + lid.x];"
                        for g in range(tn // 4)])
            fmas = [f"      acc{i}_{j} = fma(a{i // 4}[{i % 4}], b{j // 4}[{j % 4}], acc{i}_{j});"
                    for i in range(tm) for j in range(tn)]
        else:
            reads = ([f"      let a{i} = As[{abase}k * {bm}u + lid.y + {i * ty}u];" for i in range(tm)]
                     + [f"      let b{j} = Bs[{bbase}k * {bn}u + lid.x + {j * tx}u];" for j in range(tn)])
            fmas = [f"      acc{i}_{j} = fma(a{i}, b{j}, acc{i}_{j});" for i in range(tm) for j in range(tn)]
        return f"""    for (var k = 0u; k < {bk}u; k++) {{
{chr(10).join(reads)}
{chr(10).join(fmas)}
    }}"""
    if lds4:
        row = [f"{(i // 4) * 4 * ty}u + 4u * lid.y + {i % 4}u" for i in range(tm)]
        col = [f"{(j // 4) * 4 * tx}u + 4u * lid.x + {j % 4}u" for j in range(tn)]
        lds_t = "vec4<f32>"
    else:
        row = [f"lid.y + {i * ty}u" for i in range(tm)]
        col = [f"lid.x + {j * tx}u" for j in range(tn)]
        lds_t = "f32"
    zb = "wid.z" if splits > 1 else "batch"
    out_vec = out_vec and lds4 and splits == 1
    if out_vec:
        stores = "\n".join(f"  finish4(batch, m0 + {row[i]}, n0 + {col[j]}, vec4<f32>("
                           + ", ".join(f"acc{i}_{j + x}" for x in range(4)) + "));"
                           for i in range(tm) for j in range(0, tn, 4))
    else:
        stores = "\n".join(f"  finish({zb}, m0 + {row[i]}, n0 + {col[j]}, acc{i}_{j});"
                           for i in range(tm) for j in range(tn))
    load_a = _tile_load("A", "a", "As", bm, bk, "m0", "M", a_mode, threads, True, lds4, whole=a_rows, pad=pad)
    b_whole = a_rows or (vec_stores and lds4)   # B's units in whole vec4s where its layout allows
    load_b = _tile_load("B", "b", "Bs", bn, bk, "n0", "N", b_mode, threads, False, lds4, whole=b_whole)
    if splits > 1:
        # K of this slice ends at K (the loads' bound); slices past the end store zeros
        head = header(e, a_elem, b_elem, partials=True) + PARTIAL_FINISH
        ks = ("  let batch = wid.z % P.mnkb.w;\n  let k0 = (wid.z / P.mnkb.w) * P.sk.x;\n"
              "  let M = P.mnkb.x; let N = P.mnkb.y; let K = min(P.mnkb.z, k0 + P.sk.x);")
        k_first = "k0"
    else:
        head = header(e, a_elem, b_elem, out_vec=out_vec) + finish_fn(e, out_vec)
        ks = "  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;\n  let batch = wid.z;"
        k_first = "0u"
    copies = 2 if double else 1
    if double:
        k_loop = _double_buffered_k_loop(bm, bn, bk, a_mode, b_mode, threads, lds4, k_first,
                                         [multiply(0), multiply(1)], a_words, b_words, a_rows, pad, b_whole)
    elif pipelined:
        k_loop = _pipelined_k_loop(bm, bn, bk, a_mode, b_mode, threads, lds4, k_first, multiply(0),
                                   pipelined, a_rows, pad, b_whole)
    else:
        k_loop = f"""  for (var t = {k_first}; t < K; t += {bk}u) {{
{load_a}
{load_b}
    workgroupBarrier();
{multiply(0)}
    workgroupBarrier();
  }}"""
    return f"""{head}
var<workgroup> As: array<{lds_t}, {copies * a_words}>;
var<workgroup> Bs: array<{lds_t}, {copies * b_words}>;
@compute @workgroup_size({tx}, {ty})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) li: u32{NUM_WORKGROUPS if group else ""}) {{
{ks}
{tile_origin(bm, bn, group)}
{accs}
{k_loop}
{stores}
}}
"""


def stepped_k_loop(k_first: str, bk: int, steps: list[str]) -> str:
    """A K loop whose iteration is len(steps) steps, one K tile each (so register sets and buffer offsets
    are constants in each step), leaving after the step whose tile is the last one."""
    body = "\n".join((f"    if (t + {s * bk}u >= K) {{ break; }}\n" if s else "") + step
                      for s, step in enumerate(steps))
    return f"""  for (var t = {k_first}; t < K; t += {len(steps) * bk}u) {{
{body}
  }}"""


def declarations(loads: str) -> str:
    """The `var` lines of a register set's loads (staging code made with declare=True): declared once,
    before a loop whose steps assign them (declare=False), so the registers outlive a step."""
    return "\n".join(ln for ln in loads.splitlines() if ln.lstrip().startswith("var "))


def register_pipelined_loop(k_first: str, bk: int, sets: list[tuple[str, str]], multiply: str) -> str:
    """The K loop of D = len(sets) register sets of loads in flight: step s (a barrier, then `tn` = the
    tile D ahead) issues set s's loads, multiplies this tile (`multiply`, ending in a barrier) and stores
    set s + 1, which holds the next tile; `sets` = (loads, stores) of each set at `tn`."""
    depth = len(sets)
    steps = [f"""    {{
    workgroupBarrier();
    let tn = t + {(s + depth) * bk}u;
{sets[s][0]}
{multiply}
{sets[(s + 1) % depth][1]}
    }}""" for s in range(depth)]
    return stepped_k_loop(k_first, bk, steps)


def _pipelined_k_loop(bm: int, bn: int, bk: int, a_mode: str, b_mode: str, threads: int, lds4: bool,
                      k_first: str, k_tile: str, depth: int = 1, a_rows: bool = False, pad: int = 0,
                      b_whole: bool = False) -> str:
    """The K loop of tiled_source's `pipelined` form: tile 0 staged before it; each step fetches the tile
    `depth` ahead (at `tn`) into registers, multiplies this one, and stores the next one (fetched
    `depth` - 1 steps before) after a barrier. With depth D > 1 a loop iteration is D steps, register set
    s fetched in step s, and tiles 1 … D-1 are fetched before the loop. `k_tile`: the loop over the K
    tile (its reads and FMAs); `a_rows`: tiled_source's; `pad`: the A tile's (_tile_load's); `b_whole`:
    B's units stored in whole vec4s where its layout allows (tiled_source's `a_rows` or `vec_stores`)."""
    def halves(k0: str, tag: str = "", declare: bool = True) -> tuple[str, str]:
        fa, sa = _tile_fetch_stash("A", "a", "As", bm, bk, "m0", "M", a_mode, threads, True, lds4, k0, "",
                                   tag, declare, whole=a_rows, pad=pad)
        fb, sb = _tile_fetch_stash("B", "b", "Bs", bn, bk, "n0", "N", b_mode, threads, False, lds4, k0, "",
                                   tag, declare, whole=b_whole)
        return fa + "\n" + fb, sa + "\n" + sb
    fetch0, stash0 = halves(k_first)
    multiply = f"""{k_tile}
    workgroupBarrier();"""
    if depth == 1:
        fetch, stash = halves("tn")
        return f"""  {{
{fetch0}
{stash0}
  }}
  for (var t = {k_first}; t < K; t += {bk}u) {{
    workgroupBarrier();
    let tn = t + {bk}u;
{fetch}
{multiply}
{stash}
  }}"""
    tags = [f"s{d}" for d in range(depth)]
    decls = "\n".join(declarations(halves(k_first, tag)[0]) for tag in tags)
    ahead = "\n".join(f"  {{\n{halves(f'{k_first} + {d * bk}u', tags[d], False)[0]}\n  }}"
                      for d in range(1, depth))
    # a set is stored a step after its fetch, in another block: its stores recompute the fetch's indices
    sets = [(fetch, "\n".join(ln for ln in fetch.splitlines() if ln.lstrip().startswith("let ")
                               and "gi = " not in ln) + "\n" + stash)
            for fetch, stash in (halves("tn", tag, False) for tag in tags)]
    return f"""  {{
{fetch0}
{stash0}
  }}
{decls}
{ahead}
{register_pipelined_loop(k_first, bk, sets, multiply)}"""


def _double_buffered_k_loop(bm: int, bn: int, bk: int, a_mode: str, b_mode: str, threads: int,
                            lds4: bool, k_first: str, steps: list[str], a_words: int, b_words: int,
                            a_rows: bool = False, pad: int = 0, b_whole: bool = False) -> str:
    """The K loop of tiled_source's `double` form: tile 0 staged before it into buffer 0; each step fetches
    the next tile into registers, multiplies this one (`steps[b]`: the loop over K-tile buffer b) and
    stashes the fetched one into the other buffer, one barrier per tile. A loop iteration is two
    steps, so that every buffer offset is a constant (a `cur` index took the H200's 128x128.k8.l4 from
    37.9 to 32.9 TFLOP/s, benchmarks/results/h200-2026-12-04-pipelines.md). `a_rows`: tiled_source's;
    `pad`: the A tile's (_tile_load's); `b_whole`: as _pipelined_k_loop's."""
    def halves(k0: str, buf: int) -> tuple[str, str]:
        fa, sa = _tile_fetch_stash("A", "a", "As", bm, bk, "m0", "M", a_mode, threads, True, lds4, k0,
                                   f"{buf * a_words}u" if buf else "", whole=a_rows, pad=pad)
        fb, sb = _tile_fetch_stash("B", "b", "Bs", bn, bk, "n0", "N", b_mode, threads, False, lds4, k0,
                                   f"{buf * b_words}u" if buf else "", whole=b_whole)
        return fa + "\n" + fb, sa + "\n" + sb
    fetch0, stash0 = halves(k_first, 0)

    def step(s: int) -> str:
        fetch, stash = halves(f"t + {(s + 1) * bk}u", 1 - s)
        return f"""    {{
{fetch}
{steps[s]}
{stash}
    }}
    workgroupBarrier();"""
    return f"""  {{
{fetch0}
{stash0}
  }}
  workgroupBarrier();
{stepped_k_loop(k_first, bk, [step(0), step(1)])}"""


def gemv_source(e: Epilogue, lk: int, ln: int, mr: int, vec: bool, k_fast: bool,
                subgroup: int | None) -> str:
    """Matrix-vector / few-row matmul: each workgroup owns `ln` columns and `mr` rows; `lk` invocations
    split K per column and are reduced by subgroupAdd (`subgroup` = size) or a workgroup-memory tree.
    `k_fast`: consecutive invocations walk K (B contiguous along K: linear weights), else N."""
    t = e.dtype
    v = 4 if vec else 1
    elem = f"vec4<{t}>" if vec else t
    kl, nl = ("lid.x", "lid.y") if k_fast else ("lid.y", "lid.x")
    wg = (lk, ln) if k_fast else (ln, lk)
    enables = ("subgroups",) if subgroup else ()
    a_idx = "abase + row * P.a.z + k * P.a.w" if not vec else "(abase + row * P.a.z + k) / 4u"
    b_idx = "bbase + k * P.b.z + col * P.b.w" if not vec else "(bbase + k + col * P.b.w) / 4u"
    wide = "vec4<f32>" if vec else "f32"
    loads = [f"      let bv = {wide}(B[{b_idx}]);"]
    for r in range(mr):
        loads.append(f"      if (m0 + {r}u < M) {{ let row = m0 + {r}u; "
                     f"acc{r} += {'dot(' if vec else ''}{wide}(A[{a_idx}]){', bv)' if vec else ' * bv'}; }}")
    accs = "\n".join(f"  var acc{r} = 0.0;" for r in range(mr))
    parts = lk // subgroup if subgroup else lk
    red_size = mr * ln * parts
    if subgroup:
        reduce = "\n".join(f"  acc{r} = subgroupAdd(acc{r});" for r in range(mr))
        reduce += f"\n  let part = {kl} / {subgroup}u;\n  if ({kl} % {subgroup}u == 0u) {{\n"
        reduce += "\n".join(f"    red[({r}u * {ln}u + {nl}) * {parts}u + part] = acc{r};" for r in range(mr))
        reduce += "\n  }\n  workgroupBarrier();\n"
    else:
        reduce = "\n".join(f"  red[({r}u * {ln}u + {nl}) * {parts}u + {kl}] = acc{r};" for r in range(mr))
        reduce += "\n  workgroupBarrier();\n"
    # tree over the `parts` partials of each (row, col), then the first lane finishes
    tree = ""
    if parts > 1:
        tree = f"""  for (var s = {parts // 2}u; s > 0u; s = s >> 1u) {{
    if ({kl} < s) {{
      for (var r = 0u; r < {mr}u; r++) {{
        let i = (r * {ln}u + {nl}) * {parts}u + {kl};
        red[i] += red[i + s];
      }}
    }}
    workgroupBarrier();
  }}
"""
    done = "\n".join(f"    finish(batch, m0 + {r}u, col, red[({r}u * {ln}u + {nl}) * {parts}u]);"
                     for r in range(mr))
    return f"""{header(e, elem, elem, enables)}{finish_fn(e)}
var<workgroup> red: array<f32, {red_size}>;
@compute @workgroup_size({wg[0]}, {wg[1]})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let batch = wid.z;
  let m0 = wid.y * {mr}u;
  let col = wid.x * {ln}u + {nl};
  let abase = P.a.x + batch * P.a.y;
  let bbase = P.b.x + batch * P.b.y;
{accs}
  for (var kb = 0u; kb < K; kb += {lk * v}u) {{
    let k = kb + {kl} * {v}u;
    if (k < K && col < N) {{
{chr(10).join(loads)}
    }}
  }}
{reduce}{tree}  if ({kl} == 0u) {{
{done}
  }}
}}
"""


def tile_at(store: str, r: str, c: str) -> str:
    """The workgroup-memory lvalue `store` (written in terms of r and c) at element (r, c)."""
    return re.sub(r"\bc\b", f"({c})", re.sub(r"\br\b", f"({r})", store))


def lane_reduce(names: list[str], lanes: int, groups: int, subgroup: int | None) -> tuple[str, str]:
    """(module-scope declarations, body) that sum each f32 variable of `names` over the `lanes`
    consecutive invocations of one group (`lane` = li % lanes, `slot` = li / lanes, `groups` slots per
    workgroup); lane 0 of each group then holds the totals. With a subgroup size: butterfly shuffles
    (lanes <= subgroup, lanes of a group inside one subgroup) or subgroupAdd plus a workgroup-memory sum of
    the lanes / subgroup partials; without: a workgroup-memory tree. Must run in uniform control flow."""
    if subgroup and lanes <= subgroup:
        if lanes == subgroup:
            return "", "\n".join(f"  {x} = subgroupAdd({x});" for x in names)
        body = []
        off = lanes // 2
        while off:
            body += [f"  {x} += subgroupShuffleXor({x}, {off}u);" for x in names]
            off //= 2
        return "", "\n".join(body)
    parts = lanes // subgroup if subgroup else lanes
    decl = f"var<workgroup> red: array<f32, {len(names) * groups * parts}>;"
    at = [f"({i}u * {groups}u + slot) * {parts}u" for i in range(len(names))]
    if subgroup:
        body = [f"  {x} = subgroupAdd({x});" for x in names]
        body.append(f"  if (lane % {subgroup}u == 0u) {{")
        body += [f"    red[{at[i]} + lane / {subgroup}u] = {x};" for i, x in enumerate(names)]
        body += ["  }", "  workgroupBarrier();", "  if (lane == 0u) {"]
        for i, x in enumerate(names):
            body.append(f"    {x} = 0.0;")
            body.append(f"    for (var q = 0u; q < {parts}u; q++) {{ {x} += red[{at[i]} + q]; }}")
        body.append("  }")
        return decl, "\n".join(body)
    body = [f"  red[{at[i]} + lane] = {x};" for i, x in enumerate(names)]
    body += ["  workgroupBarrier();",
             f"  for (var s = {parts // 2}u; s > 0u; s = s >> 1u) {{", "    if (lane < s) {"]
    body += [f"      red[{a} + lane] += red[{a} + lane + s];" for a in at]
    body += ["    }", "    workgroupBarrier();", "  }", "  if (lane == 0u) {"]
    body += [f"    {x} = red[{at[i]}];" for i, x in enumerate(names)]
    body.append("  }")
    return decl, "\n".join(body)


DOT8_F16 = """
// the dot product of two 16-byte vectors of 8 halves, accumulated in f32
fn dot8(a: vec4<u32>, b: vec4<u32>) -> f32 {
  var s = 0.0;
  for (var q = 0u; q < 4u; q++) {
    s += dot(vec2<f32>(bitcast<vec2<f16>>(a[q])), vec2<f32>(bitcast<vec2<f16>>(b[q])));
  }
  return s;
}
"""


def _stream_elem(t: str, vw: int) -> str:
    """The binding element of a 16-byte (vw > 1) or scalar load of storage type `t`."""
    if vw == 1:
        return t
    return "vec4<u32>" if t == "f16" else "vec4<f32>"


def grouped_select(groups: int, cols: int) -> str:
    """WGSL that finds the problem `g` of this workgroup of a grouped matrix-vector (problem i's
    workgroups start at P.g{i}.x, its N is P.g{i}.y) and its output column `col`; workgroup-uniform."""
    lines = ["  var g = 0u; var wx = wid.x; var N = P.g0.y;"]
    for i in range(1, groups):
        lines.append(f"  if (wid.x >= P.g{i}.x) {{ g = {i}u; wx = wid.x - P.g{i}.x; N = P.g{i}.y; }}")
    lines.append(f"  let col = wx * {cols}u + slot;")
    return "\n".join(lines)


def grouped_finish(dtype: str, activations: tuple[str | None, ...]) -> str:
    """`finish{i}(row, col, acc)` per problem i of a grouped matrix-vector: bounds, alpha (P.g{i}.z
    as f32 bits), the problem's activation, the store at its output layout P.o{i} into the shared O."""
    out = []
    for i, act in enumerate(activations):
        out.append(f"""
fn finish{i}(row: u32, col: u32, acc: f32) {{
  if (row >= P.mnkb.x || col >= P.g{i}.y) {{ return; }}
  var v = bitcast<f32>(P.g{i}.z) * acc;
  v = {ACTIVATIONS[act]};
  O[P.o{i}.x + row * P.o{i}.z + col * P.o{i}.w] = {dtype}(v);
}}""")
    return activation_functions(*activations) + "\n".join(out) + "\n"


def glu_finish(dtype: str, activation: str | None) -> str:
    """`finish_glu(row, col, acc, up)`: act(alpha0 * acc) * (alpha1 * up) stored at problem 0's output
    layout (the gated linear unit of an MLP: silu(x W_gate^T) * (x W_up^T))."""
    return f"""{activation_functions(activation)}
fn finish_glu(row: u32, col: u32, acc: f32, up: f32) {{
  if (row >= P.mnkb.x || col >= P.g0.y) {{ return; }}
  var v = bitcast<f32>(P.g0.z) * acc;
  v = {ACTIVATIONS[activation]};
  O[P.o0.x + row * P.o0.z + col * P.o0.w] = {dtype}(v * (bitcast<f32>(P.g1.z) * up));
}}
"""


def glu_parts(walk, mr: int, cols: int) -> tuple[str, str, str, list[str]]:
    """(column WGSL, body, stores, accumulators) of a grouped matrix-vector in GLU form: every workgroup
    walks both weights for its columns (`walk(i, acc)`: the K loop of problem i into `acc{r}`)."""
    find = f"  let N = P.g0.y;\n  let col = wid.x * {cols}u + slot;"
    body = "\n".join(["  {", *walk(0, "acc"), "  }", "  {", *walk(1, "up"), "  }"])
    done = "\n".join(f"    finish_glu(m0 + {r}u, col, acc{r}, up{r});" for r in range(mr))
    return find, body, done, [f"{x}{r}" for x in ("acc", "up") for r in range(mr)]


def grouped_branches(groups: int, body) -> str:
    """`body(i)` (WGSL lines of problem i) behind a workgroup-uniform branch on g."""
    out = []
    for i in range(groups):
        out.append(("  if" if i == 0 else "  } else if") + f" (g == {i}u) {{")
        out += body(i)
    out.append("  }")
    return "\n".join(out)


def gemv_stream_k_source(e: Epilogue, lanes: int, cols: int, unroll: int, mr: int, vw: int,
                         subgroup: int | None, grouped: tuple[str | None, ...] = (),
                         glu: bool = False) -> str:
    """Bandwidth-bound matrix-vector for B contiguous along K (linear weights): `lanes` consecutive
    invocations own one output column (a weight row) and walk K with `unroll` independent loads of
    `vw` elements each (16 bytes: 8 halves or 4 floats; vw = 1: scalar loads, any strides), `cols`
    columns per workgroup, `mr` rows of A per workgroup; lanes combine through `lane_reduce`.
    Out-of-range columns and rows are clamped for the loads (no divergent branch around them) and
    dropped by `finish`.

    `grouped` (one activation per problem, 2 or more): several products of the same A with their own
    weights B0, B1, ... in ONE dispatch (sibling linears: q/k/v, gate/up); the grid is the sum of the
    problems' workgroups and each workgroup finds its problem from its index (`grouped_select`); outputs
    go to one buffer O at each problem's layout. No bias or residual. `glu` (two problems of one N):
    one output, act0(x W0^T) * (x W1^T), each workgroup computing both products of its columns."""
    t = e.dtype
    elem = _stream_elem(t, vw)
    step = lanes * vw
    unroll = max(1, unroll // mr)   # several rows reuse each load already; keeps the code (and compile) small
    rows = "\n".join(f"  let arow{r} = abase + min(m0 + {r}u, M - 1u) * P.a.z;" for r in range(mr))
    accs = "\n".join(f"  var acc{r} = 0.0;" for r in range(mr))

    def loads(u: int, b: str, lay: str) -> list[str]:
        # a load past K re-reads the last vector (no branch around it) and counts zero
        out = [f"    let j{u} = kb + lane * {vw}u + {u * step}u; let k{u} = min(j{u}, K - {vw}u);"]
        if vw == 1:
            return out + [f"    let b{u} = select(0.0, f32({b}[bbase + k{u} * {lay}.z + cc * {lay}.w]), "
                          f"j{u} < K);"]
        return out + [f"    let b{u} = {b}[(bcol + k{u}) / {vw}u];"]

    def math(u: int, acc: str) -> list[str]:
        if vw == 1:
            return [f"    {acc}{r} = fma(f32(A[arow{r} + k{u} * P.a.w]), b{u}, {acc}{r});" for r in range(mr)]
        dot = "dot8" if t == "f16" else "dot"
        return [f"    {acc}{r} += select(0.0, {dot}(A[(arow{r} + k{u}) / {vw}u], b{u}), j{u} < K);"
                for r in range(mr)]

    def k_loop(b: str, lay: str, indent: str = "", acc: str = "acc") -> list[str]:
        # all loads of one unrolled step first, then the math: `unroll` loads in flight per invocation
        main = [x for u in range(unroll) for x in loads(u, b, lay)]
        main += [x for u in range(unroll) for x in math(u, acc)]
        return [indent + x for x in [f"  for (var kb = 0u; kb < K; kb += {step * unroll}u) {{", *main, "  }"]]

    enables = ("subgroups",) if subgroup else ()
    diag = "diagnostic(off, subgroup_uniformity);\n" if subgroup else ""
    dot8 = DOT8_F16 if t == "f16" and vw > 1 else ""
    if grouped:
        n = len(grouped)
        head = grouped_header(t, elem, [elem] * n, enables)

        def problem(i: int, acc: str = "acc") -> list[str]:
            return ["    let cc = min(col, N - 1u);", f"    let bbase = P.b{i}.x;",
                    f"    let bcol = bbase + cc * P.b{i}.w;", *k_loop(f"B{i}", f"P.b{i}", "  ", acc)]

        if glu:
            head += glu_finish(t, grouped[0])
            select, walk, done, names = glu_parts(problem, mr, cols)
        else:
            head += grouped_finish(t, grouped)
            select = grouped_select(n, cols)
            walk = grouped_branches(n, problem)
            done = grouped_branches(n, lambda i: [f"    finish{i}(m0 + {r}u, col, acc{r});"
                                                  for r in range(mr)])
            names = [f"acc{r}" for r in range(mr)]
        decl, reduce = lane_reduce(names, lanes, cols, subgroup)
        accs += "\n" + "\n".join(f"  var up{r} = 0.0;" for r in range(mr)) if glu else ""
        return f"""{diag}{head}{dot8}
{decl}
@compute @workgroup_size({lanes * cols})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
  let M = P.mnkb.x; let K = P.mnkb.z;
  let m0 = wid.y * {mr}u;
  let lane = li % {lanes}u; let slot = li / {lanes}u;
{select}
  let abase = P.a.x;
{rows}
{accs}
{walk}
{reduce}
  if (lane == 0u) {{
{done}
  }}
}}
"""
    decl, reduce = lane_reduce([f"acc{r}" for r in range(mr)], lanes, cols, subgroup)
    done = "\n".join(f"    finish(batch, m0 + {r}u, col, acc{r});" for r in range(mr))
    return f"""{diag}{header(e, elem, elem, enables)}{finish_fn(e)}{dot8}
{decl}
@compute @workgroup_size({lanes * cols})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let batch = wid.z;
  let m0 = wid.y * {mr}u;
  let lane = li % {lanes}u; let slot = li / {lanes}u;
  let col = wid.x * {cols}u + slot;
  let cc = min(col, N - 1u);
  let abase = P.a.x + batch * P.a.y;
  let bbase = P.b.x + batch * P.b.y;
  let bcol = bbase + cc * P.b.w;
{rows}
{accs}
{chr(10).join(k_loop("B", "P.b"))}
{reduce}
  if (lane == 0u) {{
{done}
  }}
}}
"""


def grouped_header(dtype: str, a_elem: str, weights: list[str], enables: tuple[str, ...] = (),
                   per_problem: int = 1, extra: str = "") -> str:
    """Enables, params and bindings of a grouped matrix-vector: A, then `per_problem` weight bindings
    per problem (`weights[j]` is the declaration's element type, or "Name: array<...>" in full), then
    the shared output O. Params: mnkb, a (A's layout), `extra` fields, then per problem i its weight
    layout b{i}, output layout o{i} and g{i} = (first workgroup, N, alpha bits, 0)."""
    n = len(weights) // per_problem
    enable = "".join(f"enable {x};\n" for x in (("f16",) if "f16" in dtype + a_elem + "".join(weights)
                                                 else ()) + enables)
    fields = ["mnkb: vec4<u32>", "a: vec4<u32>", *([extra] if extra else [])]
    fields += [f"{f}{i}: vec4<u32>" for i in range(n) for f in ("b", "o", "g")]
    lines = [enable, "struct Params { " + ", ".join(fields) + " }",
             "@group(0) @binding(0) var<uniform> P: Params;",
             f"@group(0) @binding(1) var<storage, read> A: array<{a_elem}>;"]
    for j, w in enumerate(weights):
        decl = w if ":" in w else f"B{j}: array<{w}>"
        lines.append(f"@group(0) @binding({2 + j}) var<storage, read> {decl};")
    lines.append(f"@group(0) @binding({2 + len(weights)}) var<storage, read_write> O: array<{dtype}>;")
    return "\n".join(lines) + "\n"


def gemv_stream_n_source(e: Epilogue, cols: int, slices: int, unroll: int, mr: int, vw: int) -> str:
    """Matrix-vector for B contiguous along N ([K, N] weights, attention's P @ V): each invocation owns
    `vw` consecutive columns (one 16-byte load per K row; vw = 1: scalar, any strides), `cols`
    invocations side by side along N and `slices` of them splitting K (`unroll` rows in flight each),
    partial sums combined by a workgroup-memory tree, one row of A at a time."""
    t = e.dtype
    elem = _stream_elem(t, vw)
    unroll = max(1, unroll // mr)   # several rows reuse each load already; keeps the code (and compile) small
    nv = max(1, vw // 4)                      # vec4<f32> accumulators per row (vw 4 or 8), or one f32
    acc_t = "f32" if vw == 1 else "vec4<f32>"
    accs = "\n".join(f"  var acc{r}_{q} = {acc_t}(0.0);" for r in range(mr) for q in range(nv))
    rows = "\n".join(f"  let arow{r} = abase + min(m0 + {r}u, M - 1u) * P.a.z;" for r in range(mr))

    def wide(u: int) -> list[str]:
        """f32 vectors of load u."""
        if vw == 1:
            return [f"f32(b{u})"]
        if t == "f32":
            return [f"b{u}"]
        return [f"vec4<f32>(bitcast<vec4<f16>>(b{u}.{'xy' if q == 0 else 'zw'}))" for q in range(nv)]

    def loads(k: str, u: int) -> list[str]:
        if vw == 1:
            return [f"    let b{u} = B[bbase + ({k}) * P.b.z + cc * P.b.w];"]
        return [f"    let b{u} = B[(bbase + ({k}) * P.b.z + cc) / {vw}u];"]

    def math(k: str, u: int) -> list[str]:
        out = [f"    let w{u}_{q} = {w};" for q, w in enumerate(wide(u))]
        for r in range(mr):
            out.append(f"    {{ let a = f32(A[arow{r} + ({k}) * P.a.w]);")
            out += [f"      acc{r}_{q} = fma(vec4<f32>(a), w{u}_{q}, acc{r}_{q});" if vw > 1 else
                    f"      acc{r}_{q} = fma(a, w{u}_{q}, acc{r}_{q});" for q in range(nv)]
            out.append("    }")
        return out

    main = [f"    let k{u} = kb + ks + {u * slices}u;" for u in range(unroll)]
    main += [x for u in range(unroll) for x in loads(f"k{u}", u)]
    main += [x for u in range(unroll) for x in math(f"k{u}", u)]
    threads = cols * slices
    red_t = "f32" if vw == 1 else "vec4<f32>"
    passes = []
    for r in range(mr):
        stores = "\n".join(f"  red[li * {nv}u + {q}u] = acc{r}_{q};" for q in range(nv))
        sums = "\n".join(f"      red[li * {nv}u + {q}u] += red[(li + s * {cols}u) * {nv}u + {q}u];"
                         for q in range(nv))
        if vw == 1:
            fin = f"    finish(batch, m0 + {r}u, col0, red[li]);"
        else:
            fin = "\n".join(f"    finish(batch, m0 + {r}u, col0 + {j}u, "
                            f"red[li * {nv}u + {j // 4}u][{j % 4}]);"
                            for j in range(vw))
        passes.append(f"""{stores}
  workgroupBarrier();
  for (var s = {slices // 2}u; s > 0u; s = s >> 1u) {{
    if (ks < s) {{
{sums}
    }}
    workgroupBarrier();
  }}
  if (ks == 0u && col0 < N) {{
{fin}
  }}
  workgroupBarrier();""")
    return f"""{header(e, t, elem)}{finish_fn(e)}
var<workgroup> red: array<{red_t}, {threads * nv}>;
@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let batch = wid.z;
  let m0 = wid.y * {mr}u;
  let cg = li % {cols}u; let ks = li / {cols}u;
  let col0 = (wid.x * {cols}u + cg) * {vw}u;
  let cc = min(col0, N - {vw}u);
  let abase = P.a.x + batch * P.a.y;
  let bbase = P.b.x + batch * P.b.y;
{rows}
{accs}
  let kfull = (K / {slices * unroll}u) * {slices * unroll}u;
  for (var kb = 0u; kb < kfull; kb += {slices * unroll}u) {{
{chr(10).join(main)}
  }}
  for (var k = kfull + ks; k < K; k += {slices}u) {{
{chr(10).join(loads("k", 0) + math("k", 0))}
  }}
{chr(10).join(passes)}
}}
"""


GENERAL_TILE = 16


def general_source(a_dtype: str, b_dtype: str, bias_dtype: str | None, t: str = "f32") -> str:
    """WGSL of the general matmul: 16x16 workgroup-memory tiles, one output per invocation, any storage
    dtype of A, B and the bias (kernels/wgsl/storage.py), computing in `t` (f32, or i32 for exact wrapping
    int32 products) and writing `t`. Params (a storage array, not a uniform): M, N, K, batch, then
    offset and (batch, row, col) strides of A, B and the output, 4 unused words, the bias's offset,
    strides and 1 (or 5 zeros), alpha, beta (bits of `t`)."""
    zero = "0.0" if t == "f32" else "0"
    step = "fma(As[lid.y][k], Bs[k][lid.x], acc)" if t == "f32" else "acc + As[lid.y][k] * Bs[k][lid.x]"

    def load(name: str, buf: str, dtype: str) -> str:
        return load_fn(name, buf, dtype, t)

    bias_decl = "@group(0) @binding(4) var<storage, read> C: array<u32>;\n" if bias_dtype else ""
    bias_load = load("load_c", "C", bias_dtype) if bias_dtype else ""
    bias_term = ("  let bias = load_c(P[20] + batch * P[21] + row * P[22] + col * P[23]);\n"
                 f"  r = select(r + beta * bias, r, beta == {zero});\n") if bias_dtype else ""
    return f"""
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> A: array<u32>;
@group(0) @binding(2) var<storage, read> B: array<u32>;
@group(0) @binding(3) var<storage, read_write> O: array<{t}>;
{bias_decl}
{load("load_a", "A", a_dtype)}{load("load_b", "B", b_dtype)}{bias_load}
var<workgroup> As: array<array<{t}, {GENERAL_TILE}>, {GENERAL_TILE}>;
var<workgroup> Bs: array<array<{t}, {GENERAL_TILE}>, {GENERAL_TILE}>;
@compute @workgroup_size({GENERAL_TILE}, {GENERAL_TILE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
  let M = P[0]; let N = P[1]; let K = P[2];
  let batch = wid.z;
  let row = wid.y * {GENERAL_TILE}u + lid.y;
  let col = wid.x * {GENERAL_TILE}u + lid.x;
  let abase = P[4] + batch * P[5];
  let bbase = P[8] + batch * P[9];
  var acc = {zero};
  for (var t = 0u; t < K; t += {GENERAL_TILE}u) {{
    let ka = t + lid.x;
    var av = {zero};
    if (row < M && ka < K) {{ av = load_a(abase + row * P[6] + ka * P[7]); }}
    As[lid.y][lid.x] = av;
    let kb = t + lid.y;
    var bv = {zero};
    if (kb < K && col < N) {{ bv = load_b(bbase + kb * P[10] + col * P[11]); }}
    Bs[lid.y][lid.x] = bv;
    workgroupBarrier();
    for (var k = 0u; k < {GENERAL_TILE}u; k++) {{ acc = {step}; }}
    workgroupBarrier();
  }}
  if (row >= M || col >= N) {{ return; }}
  let alpha = bitcast<{t}>(P[25]);
  let beta = bitcast<{t}>(P[26]);
  var r = alpha * acc;
{bias_term}  O[P[12] + batch * P[13] + row * P[14] + col * P[15]] = r;
}}
"""
