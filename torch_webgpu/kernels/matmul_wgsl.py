"""WGSL of the matmul family, generated from one parametrized template per kernel shape.

Three bodies share the params struct and the epilogue: `tiled` (register-tiled SIMT: workgroup-memory
K tiles, TM×TN outputs per thread, optional vec4 global loads per operand), `gemv` (one workgroup per
block of N columns, split-K across invocations, reduced through subgroups or workgroup memory) and
`sgmat` (tensor cores through chromium-experimental-subgroup-matrix, K tiles staged in workgroup
memory). Every variant accumulates in f32; `dtype` is only the storage type of the operands.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

ACTIVATIONS = {
    None: "v",
    "relu": "max(v, 0.0)",
    "relu6": "clamp(v, 0.0, 6.0)",
    "gelu": "0.5 * v * (1.0 + erf_approx(v * 0.70710678118654752))",
    "gelu_tanh": ("0.5 * v * (1.0 + tanh(clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), "
                  "-15.0, 15.0)))"),
    "silu": "v / (1.0 + exp(-v))",
    "sigmoid": "1.0 / (1.0 + exp(-v))",
    "tanh": "tanh(clamp(v, -15.0, 15.0))",
}

# Abramowitz–Stegun 7.1.26 is too coarse for torch's tolerances; this erf keeps |err| < 1.2e-7.
ERF_WGSL = """
fn erf_approx(x: f32) -> f32 {
  let z = abs(x);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  return select(r - 1.0, 1.0 - r, x >= 0.0);
}
"""


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
           partials: bool = False) -> str:
    """Enables, the params struct and the bindings (A and B typed `a_elem`/`b_elem`: scalar or vec4).
    `partials`: the first pass of a split-K matmul, whose binding 3 is the f32 scratch W of per-slice
    partial sums (no epilogue operands; `combine_source` applies the epilogue)."""
    t = e.dtype
    lines = [_enables(t, extra_enables), *_params_struct(partials),
             f"@group(0) @binding(1) var<storage, read> A: array<{a_elem}>;",
             f"@group(0) @binding(2) var<storage, read> B: array<{b_elem}>;"]
    if partials:
        return "\n".join(lines + ["@group(0) @binding(3) var<storage, read_write> W: array<f32>;"]) + "\n"
    lines.append(f"@group(0) @binding(3) var<storage, read_write> O: array<{t}>;")
    if e.bias:
        lines.append(f"@group(0) @binding(4) var<storage, read> C: array<{t}>;")
    if e.residual:
        lines.append(f"@group(0) @binding({5 if e.bias else 4}) var<storage, read> R: array<{t}>;")
    return "\n".join(lines) + "\n" + (ERF_WGSL if e.activation == "gelu" else "")


def finish_fn(e: Epilogue) -> str:
    """`finish(batch, row, col, acc)`: bounds check, alpha, bias*beta, activation, residual, store."""
    bias = ("  v = v + P.ab.y * f32(C[P.c.x + batch * P.c.y + row * P.c.z + col * P.c.w]);\n"
            if e.bias else "")
    res = "  v = v + f32(R[P.r.x + batch * P.r.y + row * P.r.z + col * P.r.w]);\n" if e.residual else ""
    return f"""
fn finish(batch: u32, row: u32, col: u32, acc: f32) {{
  if (row >= P.mnkb.x || col >= P.mnkb.y) {{ return; }}
  var v = P.ab.x * acc;
{bias}  v = {ACTIVATIONS[e.activation]};
{res}  O[P.o.x + batch * P.o.y + row * P.o.z + col * P.o.w] = {e.dtype}(v);
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
    head = "\n".join(lines) + "\n" + (ERF_WGSL if e.activation == "gelu" else "")
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
               threads: int, i_is_row: bool, lds4: bool = False) -> str:
    """Code that copies a (bi × bk) tile of operand `src` (outer index i, inner k) into the workgroup
    array `tile` laid out [k][i] (f32). `mode`: "k" / "i" (vec4 along that axis, stride 1) or a
    scalar order "sk" / "si" (which axis consecutive invocations walk)."""
    # element (i, k) of the operand sits at base + i * si + k * sk
    si, sk = (f"P.{lay}.z", f"P.{lay}.w") if i_is_row else (f"P.{lay}.w", f"P.{lay}.z")
    base = f"(P.{lay}.x + batch * P.{lay}.y)"
    vec = mode in ("k", "i")
    units = bi * bk // (4 if vec else 1)
    iters = -(-units // threads)
    out = [f"  for (var u = 0u; u < {iters}u; u++) {{", f"    let e = li + u * {threads}u;"]
    if units % threads:
        out.append(f"    if (e >= {units}u) {{ break; }}")
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
                f"    {_lds_at(tile, f'kk * {bi}u + ii', lds4)} = x;"]
    else:
        index = (f"({base} + gi * {si} + gk) / 4u" if mode == "k" else f"({base} + gi + gk * {sk}) / 4u")
        out += ["    var x = vec4<f32>(0.0);",
                f"    if (gi < {dim} && gk < K) {{ x = vec4<f32>({src}[{index}]); }}"]
        for q in range(4):
            dst = f"(kk + {q}u) * {bi}u + ii" if mode == "k" else f"kk * {bi}u + ii + {q}u"
            out.append(f"    {_lds_at(tile, dst, lds4)} = x[{q}];")
    out.append("  }")
    return "\n".join(out)


def _tile_fetch_stash(src: str, lay: str, tile: str, bi: int, bk: int, i0: str, dim: str, mode: str,
                      threads: int, i_is_row: bool, lds4: bool, k0: str, base: str, tag: str = "",
                      declare: bool = True) -> tuple[str, str]:
    """`_tile_load` in two halves, for double-buffered K tiles: `fetch` reads this invocation's share of
    the tile at K offset `k0` into registers (so the loads are in flight while the previous tile is
    multiplied), `stash` writes them into the workgroup array `tile` from element `base` on. `tag` names
    another register set; `declare` False assigns registers declared before (they outlive a step)."""
    si, sk = (f"P.{lay}.z", f"P.{lay}.w") if i_is_row else (f"P.{lay}.w", f"P.{lay}.z")
    origin = f"(P.{lay}.x + batch * P.{lay}.y)"
    vec = mode in ("k", "i")
    units = bi * bk // (4 if vec else 1)
    fetch, stash = [], []
    var = "var " if declare else ""
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
            stash.append(f"    {_lds_at(tile, f'{r}k * {bi}u + {r}i', lds4, base)} = {r};")
        else:
            index = (f"({origin} + {r}gi * {si} + {r}gk) / 4u" if mode == "k"
                     else f"({origin} + {r}gi + {r}gk * {sk}) / 4u")
            fetch += [f"    {var}{r} = vec4<f32>(0.0);",
                      f"    if ({inside}) {{ {r} = vec4<f32>({src}[{index}]); }}"]
            for q in range(4):
                dst = f"({r}k + {q}u) * {bi}u + {r}i" if mode == "k" else f"{r}k * {bi}u + {r}i + {q}u"
                stash.append(f"    {_lds_at(tile, dst, lds4, base)} = {r}[{q}];")
        stash.append(close)
    return "\n".join(fetch), "\n".join(line for line in stash if line)


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


def tiled_source(e: Epilogue, bm: int, bn: int, bk: int, tm: int, tn: int, a_mode: str,
                 b_mode: str, lds4: bool = False, splits: int = 1, double: bool = False,
                 group: int = 0, pipelined: int = 0) -> str:
    """Register-tiled SIMT matmul: a (bm × bn) output tile per workgroup, (tm × tn) per invocation at
    rows ty + i * TY and cols tx + j * TX (conflict-free workgroup reads, coalesced stores). `lds4`:
    each invocation owns groups of 4 adjacent rows and columns (rows g·4·TY + 4·ty + i), so it reads
    the K tiles as vec4 (a quarter of the workgroup-memory loads). `splits` > 1: split-K, the first
    pass: workgroup z = slice * batches + batch sums K slice [slice·P.sk.x, +P.sk.x) of its tile and
    stores the raw f32 sums to the scratch W (`combine_source` finishes them). `double`: two K-tile
    buffers; the next tile's global loads are issued before this one is multiplied and stored after
    it, one barrier per K tile. `group`: the launch order of the tiles (tile_origin). `pipelined` = D > 0: one
    buffer; each step fetches the K tile D ahead into registers before this tile's FMAs and stores the
    next one after them (_tile_fetch_stash), two barriers per K tile as in the plain loop."""
    t = e.dtype
    tx, ty = bn // tn, bm // tm
    threads = tx * ty
    a_elem = f"vec4<{t}>" if a_mode in ("k", "i") else t
    b_elem = f"vec4<{t}>" if b_mode in ("k", "i") else t
    accs = "\n".join(f"  var acc{i}_{j} = 0.0;" for i in range(tm) for j in range(tn))
    a_words, b_words = (bm * bk // 4, bn * bk // 4) if lds4 else (bm * bk, bn * bk)

    def k_step(buffer: int) -> str:
        """Workgroup reads and FMAs of one k of the K tile in `buffer` (the double-buffered form's 2nd)."""
        abase, bbase = (f"{a_words}u + ", f"{b_words}u + ") if buffer else ("", "")
        if lds4:
            reads = ([f"      let a{g} = As[{abase}k * {bm // 4}u + {g * ty}u + lid.y];"
                      for g in range(tm // 4)]
                     + [f"      let b{g} = Bs[{bbase}k * {bn // 4}u + {g * tx}u + lid.x];"
                        for g in range(tn // 4)])
            fmas = [f"      acc{i}_{j} = fma(a{i // 4}[{i % 4}], b{j // 4}[{j % 4}], acc{i}_{j});"
                    for i in range(tm) for j in range(tn)]
        else:
            reads = ([f"      let a{i} = As[{abase}k * {bm}u + lid.y + {i * ty}u];" for i in range(tm)]
                     + [f"      let b{j} = Bs[{bbase}k * {bn}u + lid.x + {j * tx}u];" for j in range(tn)])
            fmas = [f"      acc{i}_{j} = fma(a{i}, b{j}, acc{i}_{j});" for i in range(tm) for j in range(tn)]
        return "\n".join(reads) + "\n" + "\n".join(fmas)
    reads_fmas = k_step(0)
    reads, fmas = reads_fmas.split("\n      acc0_0 = fma(", 1)
    fmas = "      acc0_0 = fma(" + fmas
    if lds4:
        row = [f"{(i // 4) * 4 * ty}u + 4u * lid.y + {i % 4}u" for i in range(tm)]
        col = [f"{(j // 4) * 4 * tx}u + 4u * lid.x + {j % 4}u" for j in range(tn)]
        lds_t = "vec4<f32>"
    else:
        row = [f"lid.y + {i * ty}u" for i in range(tm)]
        col = [f"lid.x + {j * tx}u" for j in range(tn)]
        lds_t = "f32"
    zb = "wid.z" if splits > 1 else "batch"
    stores = "\n".join(f"  finish({zb}, m0 + {row[i]}, n0 + {col[j]}, acc{i}_{j});"
                       for i in range(tm) for j in range(tn))
    load_a = _tile_load("A", "a", "As", bm, bk, "m0", "M", a_mode, threads, True, lds4)
    load_b = _tile_load("B", "b", "Bs", bn, bk, "n0", "N", b_mode, threads, False, lds4)
    if splits > 1:
        # K of this slice ends at K (the loads' bound); slices past the end store zeros
        head = header(e, a_elem, b_elem, partials=True) + PARTIAL_FINISH
        ks = ("  let batch = wid.z % P.mnkb.w;\n  let k0 = (wid.z / P.mnkb.w) * P.sk.x;\n"
              "  let M = P.mnkb.x; let N = P.mnkb.y; let K = min(P.mnkb.z, k0 + P.sk.x);")
        k_first = "k0"
    else:
        head = header(e, a_elem, b_elem) + finish_fn(e)
        ks = "  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;\n  let batch = wid.z;"
        k_first = "0u"
    copies = 2 if double else 1
    if double:
        k_loop = _double_buffered_k_loop(bm, bn, bk, a_mode, b_mode, threads, lds4, k_first,
                                         [k_step(0), k_step(1)], a_words, b_words)
    elif pipelined:
        k_loop = _pipelined_k_loop(bm, bn, bk, a_mode, b_mode, threads, lds4, k_first, reads, fmas,
                                   int(pipelined))
    else:
        k_loop = f"""  for (var t = {k_first}; t < K; t += {bk}u) {{
{load_a}
{load_b}
    workgroupBarrier();
    for (var k = 0u; k < {bk}u; k++) {{
{reads}
{fmas}
    }}
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


def _pipelined_k_loop(bm: int, bn: int, bk: int, a_mode: str, b_mode: str, threads: int, lds4: bool,
                      k_first: str, reads: str, fmas: str, depth: int = 1) -> str:
    """The K loop of tiled_source's `pipelined` form: tile 0 staged before it; each step fetches the tile
    `depth` ahead (at `tn`) into registers, multiplies this one, and stores the next one (fetched
    `depth` - 1 steps before) after a barrier. With depth D > 1 a loop iteration is D steps, register set
    s fetched in step s, and tiles 1 … D-1 are fetched before the loop."""
    def halves(k0: str, tag: str = "", declare: bool = True) -> tuple[str, str]:
        fa, sa = _tile_fetch_stash("A", "a", "As", bm, bk, "m0", "M", a_mode, threads, True, lds4, k0, "",
                                   tag, declare)
        fb, sb = _tile_fetch_stash("B", "b", "Bs", bn, bk, "n0", "N", b_mode, threads, False, lds4, k0, "",
                                   tag, declare)
        return fa + "\n" + fb, sa + "\n" + sb
    fetch0, stash0 = halves(k_first)
    multiply = f"""    for (var k = 0u; k < {bk}u; k++) {{
{reads}
{fmas}
    }}
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
    decls = "\n".join(ln for tag in tags for ln in halves(k_first, tag)[0].splitlines()
                      if ln.lstrip().startswith("var "))
    ahead = "\n".join(f"  {{\n{halves(f'{k_first} + {d * bk}u', tags[d], False)[0]}\n  }}"
                      for d in range(1, depth))
    # a set is stored a step after its fetch, in another block: its stores recompute the fetch's indices
    sets = [(fetch, "\n".join(ln for ln in fetch.splitlines() if ln.lstrip().startswith("let ")
                               and "gi = " not in ln) + "\n" + stash)
            for fetch, stash in (halves("tn", tag, False) for tag in tags)]
    steps = "\n".join(f"""    {f"if (t + {s * bk}u >= K) {{ break; }}" if s else ""}
    {{
    workgroupBarrier();
    let tn = t + {(s + depth) * bk}u;
{sets[s][0]}
{multiply}
{sets[(s + 1) % depth][1]}
    }}""" for s in range(depth))
    return f"""  {{
{fetch0}
{stash0}
  }}
{decls}
{ahead}
  for (var t = {k_first}; t < K; t += {depth * bk}u) {{
{steps}
  }}"""


def _double_buffered_k_loop(bm: int, bn: int, bk: int, a_mode: str, b_mode: str, threads: int,
                            lds4: bool, k_first: str, steps: list[str], a_words: int, b_words: int) -> str:
    """The K loop of tiled_source's `double` form: tile 0 staged before it into buffer 0; each step fetches
    the next tile into registers, multiplies this one (`steps[b]`: the reads and FMAs of one k of buffer
    b) and stashes the fetched one into the other buffer, one barrier per tile. A loop iteration is two
    steps, so that every buffer offset is a constant (a `cur` index took the H200's 128x128.k8.l4 from
    37.9 to 32.9 TFLOP/s, benchmarks/results/h200-2026-12-04-pipelines.md)."""
    def halves(k0: str, buf: int) -> tuple[str, str]:
        fa, sa = _tile_fetch_stash("A", "a", "As", bm, bk, "m0", "M", a_mode, threads, True, lds4, k0,
                                   f"{buf * a_words}u" if buf else "")
        fb, sb = _tile_fetch_stash("B", "b", "Bs", bn, bk, "n0", "N", b_mode, threads, False, lds4, k0,
                                   f"{buf * b_words}u" if buf else "")
        return fa + "\n" + fb, sa + "\n" + sb
    fetch0, stash0 = halves(k_first, 0)

    def step(s: int) -> str:
        fetch, stash = halves(f"t + {(s + 1) * bk}u", 1 - s)
        return f"""    {{
{fetch}
    for (var k = 0u; k < {bk}u; k++) {{
{steps[s]}
    }}
{stash}
    }}
    workgroupBarrier();"""
    return f"""  {{
{fetch0}
{stash0}
  }}
  workgroupBarrier();
  for (var t = {k_first}; t < K; t += {2 * bk}u) {{
{step(0)}
    if (t + {bk}u >= K) {{ break; }}
{step(1)}
  }}"""


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


# f16 elements of padding per workgroup-tile row, so the 16 rows one matrix load reads do not start in
# the same banks (H200: benchmarks/results/h200-2026-12-01-sgmat-pad.md)
SGMAT_ROW_PAD = 8


@dataclass(frozen=True)
class SgmatTile:
    """The geometry of a tensor-core tile: `sg_m × sg_n` subgroups per workgroup, each owning fm × fn
    16×16 results, bk-deep f16 K tiles whose workgroup rows are padded by `pad` halves."""

    sg_m: int
    sg_n: int
    fm: int
    fn: int
    bk: int
    sg_size: int
    pad: int = SGMAT_ROW_PAD
    b_cols: bool = False   # the B tile stored column by column ([n][k]), read as column-major matrices
    group: int = 0         # launch order of the tiles (tile_origin)
    buffers: int = 1       # K-tile buffers in workgroup memory (2: sgmat_source's `double`)

    @property
    def threads(self) -> int:
        """Invocations per workgroup."""
        return self.sg_m * self.sg_n * self.sg_size

    @property
    def bm(self) -> int:
        """Rows of the workgroup's output tile."""
        return self.sg_m * self.fm * 16

    @property
    def bn(self) -> int:
        """Columns of the workgroup's output tile."""
        return self.sg_n * self.fn * 16

    @property
    def workgroup_bytes(self) -> int:
        """Workgroup memory: the padded f16 A and B tiles and one f32 16×16 scratch per subgroup."""
        b_rows, b_row = (self.fn * 16, self.bk) if self.b_cols else (self.bk, self.fn * 16)
        a_tile = self.bm * (self.bk + self.pad)
        b_tile = self.sg_n * b_rows * (b_row + self.pad)
        return 2 * self.buffers * (a_tile + b_tile) + self.results_bytes

    @property
    def results_bytes(self) -> int:
        """Workgroup memory of the results scratch: one f32 16×16 matrix per subgroup."""
        return 4 * 256 * self.sg_m * self.sg_n

    @property
    def a_store(self) -> str:
        """The workgroup lvalue of A-tile element (r, c): one sub-array per subgroup row."""
        return self.a_store_in("")

    def a_store_in(self, buffer: str) -> str:
        """a_store in K-tile buffer `buffer` (WGSL; "" the first): buffers are sg_m sub-arrays apart."""
        am = self.fm * 16
        return f"As[{buffer_row(buffer, self.sg_m)}r / {am}u][(r % {am}u) * {self.bk + self.pad}u + c]"

    def a_flat(self, r: int, c: int) -> int:
        """The f16 offset of A-tile element (r, c) in As taken as one flat array (a_store's layout)."""
        am, sa = self.fm * 16, self.bk + self.pad
        return (r // am) * am * sa + (r % am) * sa + c

    def b_flat(self, r: int, c: int) -> int:
        """The f16 offset of B-tile element (r, c) in Bs taken as one flat array (b_store's layout)."""
        bw = self.fn * 16
        if self.b_cols:
            return (c // bw) * bw * (self.bk + self.pad) + (c % bw) * (self.bk + self.pad) + r
        return (c // bw) * self.bk * (bw + self.pad) + r * (bw + self.pad) + c % bw

    @property
    def b_store(self) -> str:
        """The workgroup lvalue of B-tile element (r, c): one sub-array per subgroup column."""
        return self.b_store_in("")

    def b_store_in(self, buffer: str) -> str:
        """b_store in K-tile buffer `buffer` (WGSL; "" the first): buffers are sg_n sub-arrays apart."""
        bw, at = self.fn * 16, buffer_row(buffer, self.sg_n)
        if self.b_cols:
            return f"Bs[{at}c / {bw}u][(c % {bw}u) * {self.bk + self.pad}u + r]"
        return f"Bs[{at}c / {bw}u][r * {bw + self.pad}u + c % {bw}u]"


def buffer_row(buffer: str, rows: int) -> str:
    """The WGSL prefix of a sub-array index in K-tile buffer `buffer` of `rows` sub-arrays each."""
    return f"{buffer} * {rows}u + " if buffer else ""


def sgmat_source(e: Epilogue, sg_m: int, sg_n: int, fm: int, fn: int, bk: int, sg_size: int,
                 vec_a: str = "", vec_b: str = "", pad: int = SGMAT_ROW_PAD, group: int = 0,
                 pipelined: int = 0, rotate: bool = False, double: bool = False) -> str:
    """Tensor-core matmul (f16 operands, f32 results, 16×16×16 subgroup matrices) of two dense operands:
    see sgmat_main for the tile.

    `vec_a`/`vec_b`: "cols" or "rows" when that operand's tile is staged 8 f16 at a time along its
    contiguous axis (the operand is then bound as array<vec4<u32>>, one 16-byte load each); "" stages
    element by element. `pipelined` = D > 0 (both operands staged 8 at a time): the loads of the K tile
    D ahead are issued before this tile's multiplies, the next tile stored after them (sgmat_main's
    `next_tiles`). `rotate`: the staging stores rotated per invocation (store_rotation): on the H200
    the unrotated stores of 16-byte units hit 4 invocations per bank (f16 4096^3 w4x2.f4x4.k32.pl: the
    stores alone 367 us of 775, benchmarks/results/h200-2026-12-04-anatomy2.md). `double` (both operands
    staged 8 at a time): two K-tile buffers, the next tile's loads before this tile's multiplies and its
    stores into the other buffer after them, one barrier per K tile (sgmat_main's `double`)."""
    # a K-contiguous B (a linear layer's [N, K] weight) is stored by columns: 16-byte runs stay runs
    double = double and bool(vec_a and vec_b)
    g = SgmatTile(sg_m, sg_n, fm, fn, bk, sg_size, pad, b_cols=vec_b == "rows", group=group,
                  buffers=2 if double else 1)
    head = header(e, "vec4<u32>" if vec_a else e.dtype, "vec4<u32>" if vec_b else e.dtype,
                  ("chromium_experimental_subgroup_matrix",))

    def operands(k0: str, buffer: str = ""):
        return ((g.bm, bk, "A", "a", "m0", "M", k0, "K", g.a_store_in(buffer), vec_a),
                (bk, g.bn, "B", "b", k0, "K", "n0", "N", g.b_store_in(buffer), vec_b))
    # rotated stores where a unit's 8 halves are adjacent in workgroup memory too (not A transposed)
    rotations = ((store_rotation(g.bm, bk, vec_a, g.threads, g.a_flat) if rotate and vec_a == "cols" else ""),
                 (store_rotation(bk, g.bn, vec_b, g.threads, g.b_flat) if rotate and vec_b else ""))

    def split(k0: str, tag: str = "", declare: bool = True, buffer: str = "") -> tuple[str, str]:
        """(loads, stores) of both tiles at K offset k0 through register set `tag` into `buffer`."""
        staged = zip(operands(k0, buffer), rotations, strict=True)
        (load_a, store_a), (load_b, store_b) = (staging_vec8_split(*o, g.threads, tag, declare, rot)
                                                for o, rot in staged)
        return load_a + "\n" + load_b, store_a + "\n" + store_b
    if double:
        loads, stores = split("0u")
        steps = [split("tn", buffer=f"{1 - s}u") for s in (0, 1)]
        main = sgmat_main(g, f"  {{\n{loads}\n{stores}\n  }}", steps, double=True)
        return SGMAT_DIAGNOSTICS + head + finish_fn(e) + main
    if pipelined and vec_a and vec_b:
        loads, stores = split("0u")
        staging = f"  {{\n{loads}\n{stores}\n  }}"
        if pipelined == 1:
            return SGMAT_DIAGNOSTICS + head + finish_fn(e) + sgmat_main(g, staging, [split("tn")])
        tags = [f"s{d}" for d in range(pipelined)]
        # registers that live across loop steps: declared once, loaded with tiles 1 … depth-1 up front
        for d, tag in enumerate(tags):
            decl, _ = split("0u", tag)
            staging += "\n" + "\n".join(ln for ln in decl.splitlines() if ln.lstrip().startswith("var "))
            if d:
                staging += "\n" + split(f"{d * bk}u", tag, declare=False)[0]
        main = sgmat_main(g, staging, [split("tn", tag, declare=False) for tag in tags])
        return SGMAT_DIAGNOSTICS + head + finish_fn(e) + main
    lds = []
    for operand, rot in zip(operands("t"), rotations, strict=True):
        rows, cols, src, lay, r0, rdim, c0, cdim, store, vec = operand
        if vec:
            lds.append(staging_vec8(rows, cols, src, lay, r0, rdim, c0, cdim, store, vec, g.threads, rot))
        else:
            lds.append(staging_scalar(rows, cols, src, lay, r0, rdim, c0, cdim, store, e.dtype, g.threads))
    return SGMAT_DIAGNOSTICS + head + finish_fn(e) + sgmat_main(g, "\n".join(lds))


SGMAT_DIAGNOSTICS = ("diagnostic(off, subgroup_uniformity);\n"
                     "diagnostic(off, chromium.subgroup_matrix_uniformity);\n")


def staging_scalar(rows: int, cols: int, src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str,
                   store: str, dtype: str, threads: int) -> str:
    """WGSL staging of a rows x cols tile element by element (zero outside the matrix) as f16."""
    return f"""  for (var u = 0u; u < {-(-rows * cols // threads)}u; u++) {{
    let e = li + u * {threads}u;
    if (e < {rows * cols}u) {{
      let r = e / {cols}u; let c = e % {cols}u;
      let gr = {r0} + r; let gc = {c0} + c;
      var x = {dtype}(0.0);
      if (gr < {rdim} && gc < {cdim}) {{ x = {dtype}({src}[P.{lay}.x + batch * P.{lay}.y + gr * P.{lay}.z
                                                     + gc * P.{lay}.w]); }}
      {store} = f16(x);
    }}
  }}"""


def sgmat_main(g: SgmatTile, staging: str, next_tiles: list[tuple[str, str]] | None = None,
               double: bool = False) -> str:
    """The workgroup arrays and entry point of a tensor-core matmul; `staging` fills the f16 tiles As and
    Bs (through g.a_store / g.b_store) with the K tile at `t`. With `next_tiles`, one (loads, stores) per
    register set, each loading the K tile at `tn`: `staging` fills the first tile once before the K loop
    (and, for D > 1 sets, loads tiles 1 … D-1 into sets 1 … D-1); step s of the loop loads the tile D
    ahead into set s before its multiplies and stores set s + 1 (the next tile) after them, so D tiles
    of global loads are in flight behind the multiplies (past K the loads give zeros). `double`
    (g.buffers = 2, `next_tiles` = the (loads, stores) of step 0 and step 1): two steps per loop
    iteration, step s multiplying buffer s and storing the next tile into the other one, one barrier
    per K tile (constant buffer offsets: a `cur` index ran at 90-109 TFLOP/s where .pl ran at 156-181).

    Tint's uniformity analysis wants subgroup-matrix pointers and offsets workgroup-uniform; they only
    need to be uniform per subgroup, which a subgroup index `li / subgroup_size` is, so the
    `chromium.subgroup_matrix_uniformity` diagnostic is off (SGMAT_DIAGNOSTICS). Workgroup memory is one
    sub-array per subgroup row (A), column (B) and subgroup (results), so offsets inside them are loop
    counters and constants.

    Rows are padded by g.pad halves so the 16 rows a matrix load reads do not start in the same banks (a
    row of 32, 64 or 128 halves is a multiple of half the 128-byte bank cycle); on the H200 8 took f16
    4096^3 from 92 to 148 TFLOP/s (16 was slower than none)."""
    fm, fn, bk = g.fm, g.fn, g.bk
    am, bw = fm * 16, fn * 16          # rows of A per subgroup row, columns of B per subgroup column
    sa, sb = bk + g.pad, (bk if g.b_cols else bw) + g.pad   # row strides of the A and B tiles
    multiplies = _sgmat_product(g, "") + "\n    workgroupBarrier();"
    if double:
        assert next_tiles and len(next_tiles) == 2 and g.buffers == 2
        steps = [f"""    {{
    let tn = t + {(s + 1) * bk}u;
{next_tiles[s][0]}
{_sgmat_product(g, f"{s}u" if s else "")}
{next_tiles[s][1]}
    }}
    workgroupBarrier();""" for s in (0, 1)]
        k_loop = f"""{staging}
  workgroupBarrier();
  for (var t = 0u; t < K; t += {2 * bk}u) {{
{steps[0]}
    if (t + {bk}u >= K) {{ break; }}
{steps[1]}
  }}"""
    elif not next_tiles:
        k_loop = f"""  for (var t = 0u; t < K; t += {bk}u) {{
{staging}
    workgroupBarrier();
{multiplies}
  }}"""
    elif len(next_tiles) == 1:
        k_loop = f"""{staging}
  for (var t = 0u; t < K; t += {bk}u) {{
    workgroupBarrier();
    let tn = t + {bk}u;
{next_tiles[0][0]}
{multiplies}
{next_tiles[0][1]}
  }}"""
    else:
        depth = len(next_tiles)
        steps = [f"""    {f"if (t + {s * bk}u >= K) {{ break; }}" if s else ""}
    {{
    workgroupBarrier();
    let tn = t + {(s + depth) * bk}u;
{next_tiles[s][0]}
{multiplies}
{next_tiles[(s + 1) % depth][1]}
    }}""" for s in range(depth)]
        k_loop = f"""{staging}
  for (var t = 0u; t < K; t += {depth * bk}u) {{
{chr(10).join(steps)}
  }}"""
    return f"""
var<workgroup> As: array<array<f16, {am * sa}>, {g.sg_m * g.buffers}>;
var<workgroup> Bs: array<array<f16, {(bw if g.b_cols else bk) * sb}>, {g.sg_n * g.buffers}>;
{_sgmat_entry(g)}
{k_loop}
{_sgmat_stores(g)}
}}
"""


def _sgmat_product(g: SgmatTile, buffer: str) -> str:
    """WGSL of one K tile's multiplies: this subgroup's fragments of K-tile buffer `buffer` (WGSL; "" the
    first) into its results c{i}_{j}."""
    bw = g.fn * 16
    sa, sb = g.bk + g.pad, (g.bk if g.b_cols else bw) + g.pad   # row strides of the A and B tiles
    a_row, b_row = buffer_row(buffer, g.sg_m), buffer_row(buffer, g.sg_n)
    mma = []
    for i in range(g.fm):
        mma.append(f"      let a{i} = subgroupMatrixLoad<subgroup_matrix_left<f16, 16, 16>>(&As[{a_row}sm], "
                   f"{i * 16 * sa}u + kk, false, {sa}u);")
    for j in range(g.fn):
        at = f"{j * 16 * sb}u + kk, true" if g.b_cols else f"kk * {sb}u + {j * 16}u, false"
        mma.append(f"      let b{j} = subgroupMatrixLoad<subgroup_matrix_right<f16, 16, 16>>(&Bs[{b_row}sn], "
                   f"{at}, {sb}u);")
    for i in range(g.fm):
        for j in range(g.fn):
            mma.append(f"      c{i}_{j} = subgroupMatrixMultiplyAccumulate(a{i}, b{j}, c{i}_{j});")
    return f"""    for (var kk = 0u; kk < {g.bk}u; kk += 16u) {{
{chr(10).join(mma)}
    }}"""


def _sgmat_entry(g: SgmatTile) -> str:
    """The results scratch and the entry point's head of a tensor-core matmul: tile origin (m0, n0),
    subgroup `sg` at row `sm`, column `sn` of the workgroup's subgroups, its `lane`, and its zeroed result
    matrices c{i}_{j}."""
    nwg = NUM_WORKGROUPS if g.group else ""
    decl = "\n".join(f"  var c{i}_{j} = subgroup_matrix_result<f32, 16, 16>();"
                     for i in range(g.fm) for j in range(g.fn))
    return f"""var<workgroup> Cs: array<array<f32, 256>, {g.sg_m * g.sg_n}>;
@compute @workgroup_size({g.threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32{nwg}) {{
  let M = P.mnkb.x; let N = P.mnkb.y; let K = P.mnkb.z;
  let batch = wid.z;
{tile_origin(g.bm, g.bn, g.group)}
  let sg = li / {g.sg_size}u; let lane = li % {g.sg_size}u;
  let sm = sg / {g.sg_n}u; let sn = sg % {g.sg_n}u;
{decl}"""


def _sgmat_stores(g: SgmatTile) -> str:
    """Each result matrix c{i}_{j} through the subgroup's scratch into `finish` (the epilogue)."""
    am, bw, per_lane = g.fm * 16, g.fn * 16, 256 // g.sg_size
    return "\n".join(f"""  subgroupMatrixStore(&Cs[sg], 0u, c{i}_{j}, false, 16u);
  workgroupBarrier();
  for (var q = 0u; q < {per_lane}u; q++) {{
    let x = lane + q * {g.sg_size}u;
    finish(batch, m0 + sm * {am}u + {i * 16}u + x / 16u, n0 + sn * {bw}u + {j * 16}u + x % 16u, Cs[sg][x]);
  }}
  workgroupBarrier();""" for i in range(g.fm) for j in range(g.fn))


def _vec8_unit(rows: int, cols: int, store: str, along: str, w: str,
               rotation: str = "") -> tuple[str, str]:
    """(position, stores) of staging unit `e` of a rows x cols f16 tile: WGSL for its first element
    (r, c), and the 8 stores of the loaded vec4<u32> `w` into the tile's lvalue `store`. `rotation` (a
    WGSL u32 in 0…3 per invocation, store_rotation): the invocation's q-th pair of stores writes word
    (q + rotation) % 4 of its unit, so that one store instruction's invocations spread over the banks
    (the words are picked by selects, not by indexing `w`: a dynamically indexed vector goes to memory)."""
    word = "((q + rot) & 3u)" if rotation else "q"
    if along == "cols":
        pos = f"let r = e / {cols // 8}u; let c = (e % {cols // 8}u) * 8u;"
        lo, hi = ("r", f"c + 2u * {word}"), ("r", f"c + 2u * {word} + 1u")
    else:
        pos = f"let r = (e % {rows // 8}u) * 8u; let c = e / {rows // 8}u;"
        lo, hi = (f"r + 2u * {word}", "c"), (f"r + 2u * {word} + 1u", "c")
    src = w
    head = ""
    if rotation:
        src = "wr"
        head = (f"let rot = {rotation};\n        let wr = select(select({w}, {w}.yzwx, rot == 1u), "
                f"select({w}.zwxy, {w}.wxyz, rot == 3u), rot >= 2u);\n        ")
    return pos, f"""{head}for (var q = 0u; q < 4u; q++) {{
        let h = bitcast<vec2<f16>>({src}[q]);
        {unit_at(store, *lo)} = h.x;
        {unit_at(store, *hi)} = h.y;
      }}"""


def unit_at(store: str, r: str, c: str) -> str:
    """tile_at for an element of the staging unit at (r, c) in a tile of sub-arrays (`X[sub][index]`): a
    unit never straddles two sub-arrays, so the sub-array index takes the unit's own (r, c)."""
    if "][" not in store:
        return tile_at(store, r, c)
    outer, inner = store.split("][", 1)
    return tile_at(outer, "r", "c") + "][" + tile_at(inner, r, c)


BANKS = 32          # 4-byte workgroup-memory banks (NVIDIA, AMD, Intel)
BANK_WARP = 32      # invocations whose stores issue together (an NVIDIA warp)


def unit_origin(e: int, rows: int, cols: int, along: str) -> tuple[int, int]:
    """Element (r, c) that staging unit `e` of a rows x cols tile starts at (_vec8_unit's `pos`)."""
    if along == "cols":
        return e // (cols // 8), (e % (cols // 8)) * 8
    return (e % (rows // 8)) * 8, e // (rows // 8)


def store_cycles(words: np.ndarray, rotation: np.ndarray) -> int:
    """Bank cycles of a tile's staging stores: `words` [round, invocation] is the first 4-byte word of each
    unit (-1: none), `rotation` [invocation] its rotation; each of the 4 store pairs costs, per warp, the
    most distinct words any bank gets."""
    rounds, threads = words.shape
    warp = np.arange(threads) // BANK_WARP
    group = (np.arange(rounds)[:, None] * (warp[-1] + 1) + warp[None, :]) * BANKS
    live = (words >= 0).ravel()
    cycles = 0
    for q in range(4):   # units are disjoint: the invocations of one store write distinct words
        bank = (words + (q + rotation[None, :]) % 4) % BANKS
        counts = np.bincount((group + bank).ravel()[live], minlength=rounds * (warp[-1] + 1) * BANKS)
        cycles += int(counts.reshape(-1, BANKS).max(axis=1).sum())
    return cycles


@functools.cache
def store_rotation(rows: int, cols: int, along: str, threads: int, flat) -> str:
    """The WGSL rotation (0…3, from `li`) of a tile's staging stores with the fewest bank cycles
    (store_cycles) on a model of 32 banks and 32-wide warps, among ((li >> p) * a + (li >> p2) * b) & 3;
    `flat(r, c)` is the f16 offset of element (r, c) in the tile's workgroup array. "" where no rotation
    beats none."""
    units = rows * cols // 8
    rounds = -(-units // threads)
    li = np.arange(threads)
    words = np.full((rounds, threads), -1)
    for u in range(rounds):
        for i in range(threads):
            if u * threads + i < units:
                words[u, i] = flat(*unit_origin(u * threads + i, rows, cols, along)) // 2
    best, choice = store_cycles(words, np.zeros(threads, dtype=int)), ""
    for p in range(6):
        for a in range(1, 4):
            for p2 in range(p + 1, 7):
                for b in range(4):
                    cycles = store_cycles(words, ((li >> p) * a + (li >> p2) * b) % 4)
                    if cycles < best:
                        best, choice = cycles, _rotation_wgsl(p, a, p2, b)
    return choice


def _rotation_wgsl(p: int, a: int, p2: int, b: int) -> str:
    terms = [f"(li >> {q}u)" if q else "li" for q in (p, p2)]
    terms = [t if k == 1 else f"{t} * {k}u" for t, k in zip(terms, (a, b), strict=True) if k]
    return f"(({' + '.join(terms)}) & 3u)"


def _vec8_load(src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str, w: str,
               inside: str = "") -> tuple[str, str]:
    """(coordinates, load): WGSL for unit (r, c)'s matrix row and column `gr`, `gc`, and loading it into
    `w` where it lies inside the rdim x cdim matrix (and `inside`)."""
    return f"let gr = {r0} + r; let gc = {c0} + c;", f"""if ({inside}gr < {rdim} && gc < {cdim}) {{
        {w} = {src}[(P.{lay}.x + batch * P.{lay}.y + gr * P.{lay}.z + gc * P.{lay}.w) / 8u];
      }}"""


def staging_vec8(rows: int, cols: int, src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str,
                  store: str, along: str, threads: int, rotation: str = "") -> str:
    """WGSL staging of a rows x cols f16 tile in 8-element units along its contiguous axis ("cols":
    stride 1 along columns, or "rows"), one 16-byte load each; a unit is wholly inside or outside the
    matrix (the contiguous extent, offset and other strides are multiples of 8), outside ones are 0."""
    units = rows * cols // 8
    pos, stores = _vec8_unit(rows, cols, store, along, "w", rotation)
    coords, load = _vec8_load(src, lay, r0, rdim, c0, cdim, "w")
    return f"""  for (var u = 0u; u < {-(-units // threads)}u; u++) {{
    let e = li + u * {threads}u;
    if (e < {units}u) {{
      {pos}
      {coords}
      var w = vec4<u32>(0u);
      {load}
      {stores}
    }}
  }}"""


def staging_vec8_split(rows: int, cols: int, src: str, lay: str, r0: str, rdim: str, c0: str, cdim: str,
                       store: str, along: str, threads: int, tag: str = "",
                       declare: bool = True, rotation: str = "") -> tuple[str, str]:
    """staging_vec8 in two halves, (loads, stores): every 16-byte load of this invocation's units into
    its own register `w<lay><u>` first, then every store. In staging_vec8's loop each unit's stores wait
    for its own load before the next load is issued: on the H200 staging alone took twice as long as the
    whole f16 4096^3 kernel (benchmarks/results/h200-2026-12-04-anatomy.md). `tag` names a second set
    of registers; `declare` False assigns registers declared elsewhere (staging_registers) so that they
    outlive a loop step."""
    units = rows * cols // 8
    loads, stores = [], []
    for u in range(-(-units // threads)):
        w = f"w{lay}{tag}{u}"
        pos, stash = _vec8_unit(rows, cols, store, along, w, rotation)
        tail = (u + 1) * threads > units   # the last round of units that do not divide among the invocations
        coords, load = _vec8_load(src, lay, r0, rdim, c0, cdim, w, f"e < {units}u && " if tail else "")
        var = "var " if declare else ""
        loads.append(f"  {var}{w} = vec4<u32>(0u);\n  {{\n    let e = li + {u * threads}u;\n      {pos}\n"
                     f"      {coords}\n      {load}\n  }}")
        body = f"      {pos}\n      {stash}"
        if tail:
            body = f"    if (e < {units}u) {{\n{body}\n    }}"
        stores.append(f"  {{\n    let e = li + {u * threads}u;\n{body}\n  }}")
    return "\n".join(loads), "\n".join(stores)


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
    return (ERF_WGSL if "gelu" in activations else "") + "\n".join(out) + "\n"


def glu_finish(dtype: str, activation: str | None) -> str:
    """`finish_glu(row, col, acc, up)`: act(alpha0 * acc) * (alpha1 * up) stored at problem 0's output
    layout (the gated linear unit of an MLP: silu(x W_gate^T) * (x W_up^T))."""
    return f"""{ERF_WGSL if activation == "gelu" else ""}
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
