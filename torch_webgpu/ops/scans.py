"""Blocked scans along the last dim of a contiguous float32 (rows, length) tensor: cumsum, cumprod,
logcumsumexp and cummax/cummin (with indices).

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

from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .codegen.recording import dispatch
from .codegen.wgsl_math import PRELUDE
from .tensor_buffers import buffer_id, max_binding_bytes, new_empty, runtime, windowed_binding

BLOCK = 128  # elements one invocation scans serially in step 1

# identity and the combination of an accumulated prefix `a` with a later value `b`
_INIT = {"cumsum": "0.0", "cumprod": "1.0", "logcumsumexp": "-inf_()"}
_COMBINE = {"cumsum": "a + b", "cumprod": "a * b", "logcumsumexp": "logaddexp_(a, b)"}
EXTREMES = {"cummax": ">", "cummin": "<"}

# P = [blocks in this launch, length, BLOCK, blocks per row, first block, x offset, y offset, first element,
#      i offset]; block k covers [k % bpr * BLOCK, ..) of row k / bpr
_HEAD = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
{prelude}
@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<storage, read_write> T: array<f32>;
{extra}
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
    let a = acc; let b = X[P[5] + rel + i];
    acc = {combine};
    Y[P[6] + rel + i] = acc;
  }}
  T[k] = acc;
"""

_BLOCK_EXTREME = """
  var acc = 0.0; var idx = 0u;
  for (var i = 0u; i < len; i++) {{
    let x = X[P[5] + rel + i];
    // NaN sticks once seen; ties move to the later index (as torch's CPU kernel does)
    if (i == 0u || (!isnan_(acc) && (isnan_(x) || x {cmp}= acc))) {{ acc = x; idx = c0 + i; }}
    Y[P[6] + rel + i] = acc;
    I[2u * (P[8] + rel + i)] = idx; I[2u * (P[8] + rel + i) + 1u] = 0u;
  }}
  T[k] = acc; TI[k] = idx;
"""

_EXTREME_BINDINGS = """
@group(0) @binding(4) var<storage, read_write> I: array<u32>;
@group(0) @binding(5) var<storage, read_write> TI: array<u32>;
"""

# P = [elements in this launch, length, BLOCK, blocks per row, first element, y offset, i offset]
_FIXUP = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
{prelude}
@group(0) @binding(1) var<storage, read> T: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
{extra}
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
  let a = T[p]; let b = Y[P[5] + t];
  Y[P[5] + t] = {combine};
"""

_FIXUP_EXTREME = """
  let a = T[p]; let b = Y[P[5] + t];
  if (!(!isnan_(a) && (isnan_(b) || b {cmp}= a))) {{
    Y[P[5] + t] = a; I[2u * (P[6] + t)] = TI[2u * p];
  }}
"""

_FIXUP_EXTREME_BINDINGS = """
@group(0) @binding(3) var<storage, read> TI: array<u32>;
@group(0) @binding(4) var<storage, read_write> I: array<u32>;
"""


def _sources(op: str) -> tuple[str, str]:
    """WGSL of step 1 (block scan) and step 3 (fixup) for `op`."""
    if op in EXTREMES:
        cmp = EXTREMES[op]
        return (_HEAD.format(prelude=PRELUDE, extra=_EXTREME_BINDINGS, body=_BLOCK_EXTREME.format(cmp=cmp)),
                _FIXUP.format(prelude=PRELUDE, extra=_FIXUP_EXTREME_BINDINGS,
                              body=_FIXUP_EXTREME.format(cmp=cmp)))
    return (_HEAD.format(prelude=PRELUDE, extra="",
                         body=_BLOCK_SCAN.format(init=_INIT[op], combine=_COMBINE[op])),
            _FIXUP.format(prelude=PRELUDE, extra="", body=_FIXUP_SCAN.format(combine=_COMBINE[op])))


def _chunk_elements(op: str) -> int:
    """Elements one launch may cover: its windows of the result (and the int64 indices) fit one binding."""
    align = int(runtime().info.limits.get("min-storage-buffer-offset-alignment", 256))
    return max(1, (max_binding_bytes() - align) // (8 if op in EXTREMES else 4))


def blocked_scan(op: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The scan `op` of each row of contiguous float32 (rows, length) `x`: (values, int64 indices or
    None), both contiguous (rows, length)."""
    rows, length = x.shape
    extreme = op in EXTREMES
    y = new_empty(x.shape, torch.float32, x)
    idx = new_empty(x.shape, torch.int64, x) if extreme else None
    if x.numel() == 0:
        return y, idx
    per_row = -(-length // BLOCK)
    totals = new_empty((rows, per_row), torch.float32, x)
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
        dispatch(scan_kernel, [rt.constant(pack_u32(words)), *bindings], grid(k1 - k0, 64), label=op)
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
        dispatch(fixup, [rt.constant(pack_u32(words)), *bindings], grid(e1 - e0, 64), label=op)
    return y, idx
