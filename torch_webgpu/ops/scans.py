"""Blocked scans along the last dim of a contiguous float32 (rows, length) tensor: cumsum, cumprod,
logcumsumexp and cummax/cummin (with indices); and the exact int64 cumsum of integer tensors (cumsum_i64,
u32 pairs added with carry).

One invocation per row would run a long row serially on one GPU thread (300k steps for a 300k vector) and
round every step in float32. Instead each row is cut into blocks of BLOCK elements:
  1. one invocation scans one block and writes the block's total;
  2. the totals (rows, blocks) are scanned the same way, recursively, until a row fits one block;
  3. every element past a row's first block is combined with the scanned total of the blocks before it.
Work is O(n), the dependency chain O(BLOCK * log_BLOCK n) and rounding error grows with that chain instead
of with n. Launches of steps 1 and 3 cover chunks of blocks whose elements fit one storage binding, and
bind windows of the input and the result, so rows up to the device's max buffer size scan.
"""

from __future__ import annotations

import torch

from ..kernels.wgsl import PRELUDE
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .tensor_buffers import buffer_id, max_binding_bytes, new_empty, runtime, windowed_binding

BLOCK = 128  # elements one invocation scans serially in step 1

# identity and the combination of an accumulated prefix `a` with a later value `b`
# cumsum_i64: the exact int64 cumsum of integer and bool inputs, (low, high) u32 pairs added with carry
_INIT = {"cumsum": "0.0", "cumprod": "1.0", "logcumsumexp": "-inf_()", "cumsum_i64": "vec2<u32>(0u, 0u)"}
_COMBINE = {"cumsum": "a + b", "cumprod": "a * b", "logcumsumexp": "logaddexp_(a, b)",
            "cumsum_i64": "add64(a, b)"}
EXTREMES = {"cummax": ">", "cummin": "<"}


def _accessors(word: str, loads: str, stores: str) -> str:
    """WGSL ld_N(i) for each array N in `loads` and st_N(i, v) for each in `stores`: element i, an f32 or
    an int64 held as two u32 words."""
    out = ""
    for n in loads:
        out += (f"fn ld_{n}(i: u32) -> f32 {{ return {n}[i]; }}\n" if word == "f32" else
                f"fn ld_{n}(i: u32) -> vec2<u32> {{ return vec2<u32>({n}[2u * i], {n}[2u * i + 1u]); }}\n")
    for n in stores:
        out += (f"fn st_{n}(i: u32, v: f32) {{ {n}[i] = v; }}\n" if word == "f32" else
                f"fn st_{n}(i: u32, v: vec2<u32>) {{ {n}[2u * i] = v.x; {n}[2u * i + 1u] = v.y; }}\n")
    return out


# P = [blocks in this launch, length, BLOCK, blocks per row, first block, x offset, y offset, first element,
#      i offset]; block k covers [k % bpr * BLOCK, ..) of row k / bpr
_HEAD = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
{prelude}
@group(0) @binding(1) var<storage, read> X: array<{word}>;
@group(0) @binding(2) var<storage, read_write> Y: array<{word}>;
@group(0) @binding(3) var<storage, read_write> T: array<{word}>;
{extra}{access}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  let k = P[4] + t;
  let c0 = (k % P[3]) * P[2];
  let len = min(P[2], P[1] - c0);
  let rel = (k / P[3]) * P[1] + c0 - P[7];   // the block's first element, from the launch's first
{body}
}}
"""

_BLOCK_SCAN = """
  var acc = {init};
  for (var i = 0u; i < len; i++) {{
    let a = acc; let b = ld_X(P[5] + rel + i);
    acc = {combine};
    st_Y(P[6] + rel + i, acc);
  }}
  st_T(k, acc);
"""

_BLOCK_EXTREME = """
  var acc = 0.0; var idx = 0u;
  for (var i = 0u; i < len; i++) {{
    let x = ld_X(P[5] + rel + i);
    // NaN sticks once seen; ties move to the later index (as torch's CPU kernel does)
    if (i == 0u || (!isnan_(acc) && (isnan_(x) || x {cmp}= acc))) {{ acc = x; idx = c0 + i; }}
    st_Y(P[6] + rel + i, acc);
    I[2u * (P[8] + rel + i)] = idx; I[2u * (P[8] + rel + i) + 1u] = 0u;
  }}
  st_T(k, acc); TI[k] = idx;
"""

_EXTREME_BINDINGS = """
@group(0) @binding(4) var<storage, read_write> I: array<u32>;
@group(0) @binding(5) var<storage, read_write> TI: array<u32>;
"""

# P = [elements in this launch, length, BLOCK, blocks per row, first element, y offset, i offset]
_FIXUP = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
{prelude}
@group(0) @binding(1) var<storage, read> T: array<{word}>;
@group(0) @binding(2) var<storage, read_write> Y: array<{word}>;
{extra}{access}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  let e = P[4] + t;
  let j = (e % P[1]) / P[2];
  if (j == 0u) {{ return; }}
  let p = (e / P[1]) * P[3] + j - 1u;   // the scanned total of the blocks before this element's
{body}
}}
"""

_FIXUP_SCAN = """
  let a = ld_T(p); let b = ld_Y(P[5] + t);
  st_Y(P[5] + t, {combine});
"""

_FIXUP_EXTREME = """
  let a = ld_T(p); let b = ld_Y(P[5] + t);
  if (!(!isnan_(a) && (isnan_(b) || b {cmp}= a))) {{
    st_Y(P[5] + t, a); I[2u * (P[6] + t)] = TI[2u * p];
  }}
"""

_FIXUP_EXTREME_BINDINGS = """
@group(0) @binding(3) var<storage, read> TI: array<u32>;
@group(0) @binding(4) var<storage, read_write> I: array<u32>;
"""


def _sources(op: str) -> tuple[str, str]:
    """WGSL of step 1 (block scan) and step 3 (fixup) for `op`."""
    word = "u32" if op.endswith("_i64") else "f32"
    head = dict(prelude=PRELUDE, word=word, access=_accessors(word, "X", "YT"))
    fix = dict(prelude=PRELUDE, word=word, access=_accessors(word, "TY", "Y"))
    if op in EXTREMES:
        cmp = EXTREMES[op]
        return (_HEAD.format(**head, extra=_EXTREME_BINDINGS, body=_BLOCK_EXTREME.format(cmp=cmp)),
                _FIXUP.format(**fix, extra=_FIXUP_EXTREME_BINDINGS, body=_FIXUP_EXTREME.format(cmp=cmp)))
    return (_HEAD.format(**head, extra="", body=_BLOCK_SCAN.format(init=_INIT[op], combine=_COMBINE[op])),
            _FIXUP.format(**fix, extra="", body=_FIXUP_SCAN.format(combine=_COMBINE[op])))


def _chunk_elements(op: str) -> int:
    """Elements one launch may cover: its windows of the result (and the int64 indices) fit one binding."""
    align = int(runtime().info.limits.get("min-storage-buffer-offset-alignment", 256))
    return max(1, (max_binding_bytes() - align) // (8 if op in EXTREMES or op.endswith("_i64") else 4))


def blocked_scan(op: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The scan `op` of each row of contiguous (rows, length) `x` (float32; int64 for cumsum_i64):
    (values, int64 indices for cummax/cummin or None), both contiguous (rows, length)."""
    rows, length = x.shape
    extreme = op in EXTREMES
    y = new_empty(x.shape, x.dtype, x)
    idx = new_empty(x.shape, torch.int64, x) if extreme else None
    if x.numel() == 0:
        return y, idx
    per_row = -(-length // BLOCK)
    totals = new_empty((rows, per_row), x.dtype, x)
    total_idx = new_empty((rows, per_row), torch.int32, x) if extreme else None
    rt = runtime()
    scan_src, fixup_src = _sources(op)
    scan_kernel = rt.kernel(scan_src, label=f"{op}_blocks")
    span = min(BLOCK, length)
    cap = _chunk_elements(op)
    xf, yf = x.view(-1), y.view(-1)
    fi = idx.view(-1) if extreme else None
    nblocks = rows * per_row
    step = max(1, cap // span)
    for k0 in range(0, nblocks, step):
        k1 = min(nblocks, k0 + step)
        e0 = (k0 // per_row) * length + (k0 % per_row) * BLOCK
        last = k1 - 1
        e1 = (last // per_row) * length + min(length, (last % per_row + 1) * BLOCK)
        xb, xo = windowed_binding(xf[e0:e1])
        yb, yo = windowed_binding(yf[e0:e1])
        bindings = [xb, yb, buffer_id(totals)]
        io = 0
        if extreme:
            ib, io = windowed_binding(fi[e0:e1])
            bindings += [ib, buffer_id(total_idx)]
        words = [k1 - k0, length, BLOCK, per_row, k0, xo, yo, e0, io]
        rt.dispatch(scan_kernel, [rt.constant(pack_u32(words)), *bindings], grid(k1 - k0, 64), label=op)
    if per_row == 1:
        return y, idx
    prefix, prefix_block = blocked_scan(op, totals)
    prefix_idx = torch.gather(total_idx.to(torch.int64), 1, prefix_block) if extreme else None
    fixup = rt.kernel(fixup_src, label=f"{op}_fixup")
    # the first block of every row needs no fixup: start at the second
    for e0 in range(BLOCK, rows * length, cap):
        e1 = min(rows * length, e0 + cap)
        yb, yo = windowed_binding(yf[e0:e1])
        bindings = [buffer_id(prefix), yb]
        io = 0
        if extreme:
            ib, io = windowed_binding(fi[e0:e1])
            bindings = [buffer_id(prefix), yb, buffer_id(prefix_idx), ib]
        words = [e1 - e0, length, BLOCK, per_row, e0, yo, io]
        rt.dispatch(fixup, [rt.constant(pack_u32(words)), *bindings], grid(e1 - e0, 64), label=op)
    return y, idx
