"""Batched matmul with workgroup-memory tiles: out[b] = alpha * A[b] @ B[b] + beta * bias[b] (f32 accumulate).

A, B and bias are read through their own strides (transposed or sliced views need no copy); the output
is f32 with explicit strides. Params: M, N, K, batch, then offset and (batch, row, col) strides of A, B,
output and bias, has_bias, alpha, beta.
"""

from __future__ import annotations

import contextlib

import torch

from ...runtime import get_runtime
from .dtypes import convert, dtype_info
from .operand import Operand, pack_u32
from .recording import dispatch

TILE = 16


def _source(a_dtype: torch.dtype, b_dtype: torch.dtype, bias_dtype: torch.dtype | None,
            t: str = "f32") -> str:
    """WGSL of the tiled kernel computing in `t` (f32, or i32 for exact wrapping int32 products)."""
    zero = "0.0" if t == "f32" else "0"
    step = "fma(As[lid.y][k], Bs[k][lid.x], acc)" if t == "f32" else "acc + As[lid.y][k] * Bs[k][lid.x]"

    def load(name: str, buf: str, dtype: torch.dtype) -> str:
        info = dtype_info(dtype, "matmul")
        body = convert(info.load.replace("B[", f"{buf}["), info.kind, t)
        return f"fn {name}(i: u32) -> {t} {{ return {body}; }}\n"

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
var<workgroup> As: array<array<{t}, {TILE}>, {TILE}>;
var<workgroup> Bs: array<array<{t}, {TILE}>, {TILE}>;
@compute @workgroup_size({TILE}, {TILE})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {{
  let M = P[0]; let N = P[1]; let K = P[2];
  let batch = wid.z;
  let row = wid.y * {TILE}u + lid.y;
  let col = wid.x * {TILE}u + lid.x;
  let abase = P[4] + batch * P[5];
  let bbase = P[8] + batch * P[9];
  var acc = {zero};
  for (var t = 0u; t < K; t += {TILE}u) {{
    let ka = t + lid.x;
    var av = {zero};
    if (row < M && ka < K) {{ av = load_a(abase + row * P[6] + ka * P[7]); }}
    As[lid.y][lid.x] = av;
    let kb = t + lid.y;
    var bv = {zero};
    if (kb < K && col < N) {{ bv = load_b(bbase + kb * P[10] + col * P[11]); }}
    Bs[lid.y][lid.x] = bv;
    workgroupBarrier();
    for (var k = 0u; k < {TILE}u; k++) {{ acc = {step}; }}
    workgroupBarrier();
  }}
  if (row >= M || col >= N) {{ return; }}
  let alpha = bitcast<{t}>(P[25]);
  let beta = bitcast<{t}>(P[26]);
  var r = alpha * acc;
{bias_term}  O[P[12] + batch * P[13] + row * P[14] + col * P[15]] = r;
}}
"""


def launch_matmul(a: Operand, b: Operand, out: Operand, bias: Operand | None = None, alpha: float = 1.0,
                  beta: float = 0.0) -> None:
    """Record out = alpha * a @ b + beta * bias for 3-d operands [batch, rows, cols] (bias broadcast)."""
    batch, m, k = a.sizes
    _, _, n = b.sizes
    if out.dtype not in (torch.float32, torch.int32):
        raise TypeError("launch_matmul writes float32 (or exact int32) outputs")
    t = "f32" if out.dtype == torch.float32 else "i32"
    conv = float if t == "f32" else int
    if batch == 0 or m == 0 or n == 0:
        return
    # layout: 0..3 MNKb, 4..7 A(off,sb,sm,sk), 8..11 B(off,sb,sk,sn), 12..15 O, 16..19 pad, 20..24 bias,
    # 25 alpha, 26 beta
    params = [m, n, k, batch] + [a.offset, *a.strides] + [b.offset, *b.strides] + [out.offset, *out.strides] \
        + [0, 0, 0, 0] + ([bias.offset, *bias.strides, 1] if bias is not None else [0, 0, 0, 0, 0]) \
        + [conv(alpha), conv(beta)]
    rt = get_runtime()
    src = _source(a.dtype, b.dtype, bias.dtype if bias is not None else None, t)
    kernel = rt.kernel(src, label="matmul")
    binds = [rt.constant(pack_u32(params)), a.buffer_id, b.buffer_id, out.buffer_id]
    if bias is not None:
        binds.append(bias.buffer_id)
    if batch > 65535:
        raise NotImplementedError(f"webgpu: matmul batch {batch} exceeds 65535")
    dispatch(kernel, binds, (-(-n // TILE), -(-m // TILE), batch), label="matmul")


# ---- the kernel library (f32 and f16 storage, f32 accumulation) -----------------------------------

LIBRARY_DTYPES = {torch.float32: "f32", torch.float16: "f16"}


def _caps():
    from ...kernels import DeviceCaps

    rt = get_runtime()
    caps = getattr(rt, "_library_caps", None)
    if caps is None:
        caps = rt._library_caps = DeviceCaps.from_runtime(rt)
    return caps


def library_handles(dtype: torch.dtype) -> bool:
    """True when the kernel library computes matmuls of `dtype` on this device (f32; f16 with shader-f16)."""
    name = LIBRARY_DTYPES.get(dtype)
    return name == "f32" or (name == "f16" and _caps().shader_f16)


def launch_library_matmul(a: Operand, b: Operand, out: Operand, bias: Operand | None = None,
                          alpha: float = 1.0, beta: float = 0.0, residual: Operand | None = None,
                          activation: str | None = None) -> None:
    """Record out = act(alpha * a @ b + beta * bias) + residual through kernels.matmul for 3-d operands
    of one float dtype (split into several launches when an operand exceeds the binding limit)."""
    from ...kernels import autotune
    from ...kernels.matmul import (
        Layout,
        MatmulProblem,
        plan_matmul_steps,
        record_matmul,
        split_for_binding,
        variants,
    )
    from ...runtime import BufferSlice

    batch, m, k = a.sizes
    n = b.sizes[2]
    if batch == 0 or m == 0 or n == 0:
        return
    dtype = LIBRARY_DTYPES[out.dtype]
    rt = get_runtime()
    caps = _caps()

    def lay(o: Operand) -> Layout:
        return Layout(o.offset, *o.strides)

    p = MatmulProblem(batch, m, n, k, lay(a), lay(b), lay(out), dtype=dtype,
                      bias=lay(bias) if bias is not None else None,
                      residual=lay(residual) if residual is not None else None,
                      activation=activation, alpha=float(alpha), beta=float(beta))
    ids = {"a": a.buffer_id, "b": b.buffer_id, "out": out.buffer_id}
    if bias is not None:
        ids["bias"] = bias.buffer_id
    if residual is not None:
        ids["residual"] = residual.buffer_id
    itemsize = out.dtype.itemsize
    align = caps.limit("min-storage-buffer-offset-alignment", 256)
    sizes = {role: rt.buffer(i).aligned_nbytes for role, i in ids.items()}
    for piece in split_for_binding(p, itemsize, rt.max_storage_binding, align, rt.max_workgroups, sizes):
        operands = dict(ids) if piece.windows is None else {
            role: BufferSlice(ids[role], *piece.windows[role]) for role in ids}
        q = piece.problem
        names = variants(q, caps)

        def measure(name: str, q=q, operands=operands) -> float:
            plan = plan_matmul_steps(q, caps, name)
            with _scratch(plan, operands) as bound:
                return autotune.time_launches(rt, plan.steps, bound)

        variant = autotune.choose("matmul", q, caps, names, measure)
        plan = plan_matmul_steps(q, caps, variant)
        with _scratch(plan, operands) as bound:
            record_matmul(plan, bound, rt, dispatch=dispatch)


@contextlib.contextmanager
def _scratch(plan, operands: dict):
    """`operands` with a new device buffer per scratch role of `plan` (a split-K variant's partial
    sums), held by webgpu tensors while the plan is recorded (the allocator orders later reuse)."""
    if not plan.scratch:
        yield operands
        return
    held = {role: torch.empty((-(-nbytes // 4),), dtype=torch.int32, device="webgpu")
            for role, nbytes in plan.scratch.items()}
    yield {**operands, **{role: t.untyped_storage().data_ptr() >> 32 for role, t in held.items()}}
