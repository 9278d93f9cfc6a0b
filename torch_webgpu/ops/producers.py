"""Kernels that compute each element of a strided webgpu tensor from its logical index (no inputs).

Factories (fill, arange, linspace, eye) and the random generators share one template: a WGSL body
computes `v` (in the compute kind of its choice) from the logical index `li` and parameter words
`X(k)`; the template converts v to the output dtype and stores it without clobbering packed neighbours.
"""

from __future__ import annotations

import torch

from ..runtime.capture import unreplayable
from . import strided
from .tensor_buffers import fits_one_binding, pack_u32, runtime, split_for_binding, windowed_binding

EXTRA = strided.HEADER + 16  # first parameter word after [header, sizes[8], strides[8]]

_SOURCES: dict[tuple, str] = {}


def producer_wgsl(body: str, kind: str, dtype: torch.dtype, helpers: str = "") -> str:
    """WGSL storing `value(li)` (a `kind` value computed by `body`) into every element of the output."""
    key = (body, kind, dtype, helpers)
    source = _SOURCES.get(key)
    if source is None:
        # kind "raw": value() already returns the stored bit pattern (low, high words).
        out_kind = strided.compute_kind(dtype)
        converted = strided.convert_expr("value(li)", kind, out_kind) if kind != "raw" else ""
        store = "value(li)" if kind == "raw" else f"encode({converted})"
        value_type = strided.KIND_TYPE["l" if kind == "raw" else kind]
        source = (
            "@group(0) @binding(0) var<storage, read> P: array<u32>;\n"
            + strided.dst_decl(1, dtype) + "\n" + strided.INDEX_HELPERS + strided.CONVERT_PRELUDE
            + strided.encode(dtype) + strided.store_raw(dtype)
            + f"fn X(k: u32) -> u32 {{ return P[{EXTRA}u + k]; }}\n"
            + "fn XF(k: u32) -> f32 { return bitcast<f32>(X(k)); }\n"
            + "fn XI(k: u32) -> i32 { return bitcast<i32>(X(k)); }\n"
            + helpers
            + f"fn value(li: u32) -> {value_type} {{\n{body}\n}}\n"
            + f"""
@compute @workgroup_size({strided.WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let li = linear_id(gid, nwg);
  if (li >= P[0]) {{ return; }}
  store_raw(strided_index(li, 2u, {strided.HEADER + 8}u), {store.replace("value(li)", "value(li + P[3])")});
}}
""")
        _SOURCES[key] = source
    return source


def produce(out: torch.Tensor, body: str, kind: str, extra: list[int], label: str, helpers: str = "",
            inputs: tuple[int, ...] = ()) -> None:
    """Fill `out` (any strides) with value(li) computed by `body`; `extra` are the X(k) words.

    `inputs` are buffer ids bound at bindings 2, 3, ... (declared by `helpers`, read-only).
    """
    _produce(out, body, kind, extra, label, helpers, inputs, 0)


def _produce(out: torch.Tensor, body: str, kind: str, extra: list[int], label: str, helpers: str,
             inputs: tuple[int, ...], first: int) -> None:
    # `first`: logical index of out's first element within the whole tensor (P[3]), so chunks of a
    # tensor wider than one binding compute the same values as one launch would.
    if out.numel() == 0:
        return
    if not fits_one_binding(out):
        if inputs:
            raise NotImplementedError(f"webgpu '{label}': outputs wider than one kernel binding")
        dim = split_for_binding(out)
        half = out.shape[dim] // 2
        _produce(out.narrow(dim, 0, half), body, kind, extra, label, helpers, inputs, first)
        rest = first + out.narrow(dim, 0, half).numel()  # dims before `dim` have size 1
        tail = out.narrow(dim, half, out.shape[dim] - half)
        _produce(tail, body, kind, extra, label, helpers, inputs, rest)
        return
    binding, offset = windowed_binding(out)
    lay = strided.layout(out.shape, out.stride(), op=label)
    words = lay.words([offset, first]) + [int(x) & 0xFFFFFFFF for x in extra]
    rt = runtime()
    unreplayable()   # launches not yet checked to replay: this call is never a launch plan
    kernel = rt.kernel(producer_wgsl(body, kind, out.dtype, helpers), label=label)
    rt.dispatch(kernel, [rt.constant(pack_u32(words)), binding, *inputs], strided.grid(lay.numel))
