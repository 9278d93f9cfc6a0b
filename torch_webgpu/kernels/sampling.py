"""Token sampling on the device: one workgroup per row of logits (or probabilities) picks token ids, so a
decode loop reads back only the ids (4 or 8 bytes per row), never the vocabulary-sized row.

Modes (one spec, `SampleProblem.mode`):
- "greedy": the first index of the row's maximum (torch.argmax; NaN counts as the maximum).
- "logits": transformers' sampling warpers in their order — temperature, top-k (keep scores >= the k-th
  largest), top-p (keep the smallest top set whose softmax mass is >= p) — then a draw from the softmax
  of what is kept.
- "probs": a draw from non-negative weights (torch.multinomial with replacement).

The k-th largest score and the top-p boundary are found by radix select over the scores' order-preserving
u32 keys: four passes of a 256-bin workgroup histogram (counts for top-k, probabilities in 2**-31 fixed
point for top-p). The draw scans contiguous per-thread chunks after a workgroup prefix sum of their mass.
Uniforms come from Philox4x32-10 (kernels/philox.py) at counter (row, sample, offset), key = seed: the
caller passes torch's generator state, so seeded runs repeat.

torch-free: dtypes "f32", "f16".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .launch import PARAMS, KernelLaunch, f32_word
from .philox import PHILOX_WGSL

MODES = ("greedy", "logits", "probs")
WORKGROUP = 256
MAX_ROWS = 65535      # one workgroup per row on the grid's x dimension
FIXED_ONE = 1 << 31   # top-p masses in fixed point (an atomic u32 histogram)


@dataclass(frozen=True)
class SampleProblem:
    """Sample `num_samples` ids from each of `rows` rows of `n` values (`row_stride` apart from element
    `offset`), writing them as i32 (`out_words` 1) or i64 (2) at element `out_offset` of the output."""

    mode: str
    dtype: str
    rows: int
    n: int
    offset: int = 0
    row_stride: int = -1
    out_offset: int = 0
    out_words: int = 1
    num_samples: int = 1
    temperature: float = 1.0
    top_k: int = 0        # 0: no top-k filter
    top_p: float = 1.0    # 1.0: no top-p filter

    @property
    def stride(self) -> int:
        """Elements between rows."""
        return self.n if self.row_stride < 0 else self.row_stride


def check_problem(p: SampleProblem) -> None:
    """ValueError naming what is wrong with a sampling problem."""
    if p.mode not in MODES:
        raise ValueError(f"sampling: mode {p.mode!r} is not one of {MODES}")
    if p.dtype not in ("f32", "f16"):
        raise ValueError(f"sampling: dtype {p.dtype} is not supported (f32 or f16 scores)")
    if not 0 < p.n < 1 << 31:
        raise ValueError(f"sampling: a row must have 1 to 2**31-1 values, got {p.n}")
    if not 0 < p.rows <= MAX_ROWS:
        raise ValueError(f"sampling: 1 to {MAX_ROWS} rows per launch, got {p.rows}")
    if p.out_words not in (1, 2) or p.num_samples < 1:
        raise ValueError("sampling: out_words must be 1 (int32) or 2 (int64) and num_samples >= 1")
    if p.mode == "logits":
        if not p.temperature > 0 or not math.isfinite(p.temperature):
            raise ValueError(f"sampling: temperature must be a positive float, got {p.temperature}")
        if p.top_k < 0 or not 0.0 <= p.top_p <= 1.0:
            raise ValueError(f"sampling: top_k must be >= 0 and top_p in [0, 1], got {p.top_k}, {p.top_p}")


_WGSL = """
struct Params { w: array<vec4<u32>, 4> }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<SCALAR>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
fn W(k: u32) -> u32 { return P.w[k / 4u][k % 4u]; }
fn X(k: u32) -> u32 { return W(8u + k); }
PHILOX
const WG: u32 = 256u;
const MODE_GREEDY: u32 = 0u;
const MODE_LOGITS: u32 = 1u;
var<workgroup> red_f: array<f32, 256>;
var<workgroup> red_u: array<u32, 256>;
var<workgroup> red_i: array<u32, 256>;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> sel: array<u32, 4>;    // radix select: prefix, mass above, found; last positive thread
var<workgroup> stat: array<f32, 2>;   // row maximum; kept mass

fn key_of(v: f32) -> u32 {
  // order-preserving u32 of an f32 (NaN above everything, as torch.argmax treats it)
  if (v != v) { return 0xffffffffu; }
  let b = bitcast<u32>(v);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn value_of(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

fn load(base: u32, i: u32) -> f32 { return f32(x[base + i]); }

// Radix select: the largest key t with sum over kept elements of weight(key >= t) >= goal, where an
// element is kept when its key >= floor_key; weight is 1 (counting) or its softmax mass in fixed point.
fn radix_select(t: u32, base: u32, n: u32, floor_key: u32, goal: u32, by_mass: bool, m: f32,
                inv_t: f32, z: f32) -> u32 {
  if (t == 0u) { sel[0] = 0u; sel[1] = 0u; sel[2] = 1u; }
  for (var level = 0u; level < 4u; level++) {
    let shift = 24u - 8u * level;
    atomicStore(&hist[t], 0u);
    workgroupBarrier();
    let prefix = workgroupUniformLoad(&sel[0]);
    let high_mask = select(0xffffffffu << (shift + 8u), 0u, level == 0u);
    for (var i = t; i < n; i += WG) {
      let v = load(base, i);
      let k = key_of(v);
      if (k >= floor_key && (k & high_mask) == (prefix & high_mask)) {
        var w = 1u;
        if (by_mass) { w = u32(min(exp((v - m) * inv_t) / z, 1.0) * 2147483648.0); }
        atomicAdd(&hist[(k >> shift) & 255u], w);
      }
    }
    workgroupBarrier();
    if (t == 0u && sel[2] == 1u) {
      var above = sel[1];
      var chosen = 256u;
      for (var b = 255; b >= 0; b--) {
        let h = atomicLoad(&hist[u32(b)]);
        if (above + h >= goal) { chosen = u32(b); break; }
        above += h;
      }
      if (chosen == 256u) {
        sel[0] = 0u; sel[2] = 0u;     // the goal exceeds everything kept: keep all
      } else {
        sel[0] = prefix | (chosen << shift); sel[1] = above;
      }
    }
  }
  let found = workgroupUniformLoad(&sel[2]);
  let result = workgroupUniformLoad(&sel[0]);
  return select(floor_key, max(result, floor_key), found == 1u);
}

fn weight(mode: u32, v: f32, threshold: u32, m: f32, inv_t: f32) -> f32 {
  if (mode == MODE_LOGITS) {
    return select(0.0, exp((v - m) * inv_t), key_of(v) >= threshold);
  }
  return select(0.0, v, v > 0.0);   // probabilities: NaN and negatives weigh nothing
}

fn write_id(slot: u32, id: u32) {
  let words = W(13u);
  let at = W(3u) + slot * words;
  out[at] = id;
  if (words == 2u) { out[at + 1u] = 0u; }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let n = W(0u);
  let row = g.x;
  let base = W(2u) + row * W(1u);
  let mode = W(4u);
  let samples = W(12u);
  // row maximum (key, first index)
  var best = 0u;
  var best_i = 0xffffffffu;
  for (var i = t; i < n; i += WG) {
    let k = key_of(load(base, i));
    if (best_i == 0xffffffffu || k > best) { best = k; best_i = i; }
  }
  red_u[t] = best; red_i[t] = best_i;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) {
      let k = red_u[t + s]; let i = red_i[t + s];
      if (i != 0xffffffffu && (red_i[t] == 0xffffffffu || k > red_u[t] || (k == red_u[t] && i < red_i[t]))) {
        red_u[t] = k; red_i[t] = i;
      }
    }
    workgroupBarrier();
  }
  if (mode == MODE_GREEDY) {
    if (t == 0u) { for (var s = 0u; s < samples; s++) { write_id(row * samples + s, red_i[0]); } }
    return;
  }
  let m = value_of(workgroupUniformLoad(&red_u[0]));
  let inv_t = bitcast<f32>(W(7u));
  var threshold = 0u;
  if (mode == MODE_LOGITS) {
    let top_k = W(5u);
    if (top_k > 0u && top_k < n) {
      threshold = radix_select(t, base, n, 0u, top_k, false, m, inv_t, 1.0);
    }
    let p_target = W(6u);
    if (p_target < 0x80000000u) {
      var z = 0.0;
      for (var i = t; i < n; i += WG) { z += weight(mode, load(base, i), threshold, m, inv_t); }
      red_f[t] = z;
      workgroupBarrier();
      for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (t < s) { red_f[t] += red_f[t + s]; }
        workgroupBarrier();
      }
      let total = workgroupUniformLoad(&red_f[0]);
      threshold = radix_select(t, base, n, threshold, p_target, true, m, inv_t, total);
    }
  }
  // each thread's contiguous chunk: its kept mass, then an exclusive prefix over threads
  let chunk = (n + WG - 1u) / WG;
  let lo = min(n, t * chunk);
  let hi = min(n, lo + chunk);
  var mass = 0.0;
  for (var i = lo; i < hi; i++) { mass += weight(mode, load(base, i), threshold, m, inv_t); }
  workgroupBarrier();
  red_f[t] = mass;
  workgroupBarrier();
  if (t == 0u) {
    var acc = 0.0;
    var last = 0u;
    for (var j = 0u; j < WG; j++) {
      let s = red_f[j];
      red_f[j] = acc;
      acc += s;
      if (s > 0.0) { last = j; }
    }
    stat[1] = acc; sel[3] = last;
  }
  workgroupBarrier();
  let total = stat[1];
  let last = sel[3];
  let start = red_f[t];
  var next = total;
  if (t + 1u < WG) { next = red_f[t + 1u]; }
  for (var s = 0u; s < samples; s++) {
    let r = philox(vec4<u32>(row, s, X(2u), X(3u)), vec2<u32>(X(0u), X(1u)));
    let goal = min(unit(r.x) * total, total);
    if (total <= 0.0) {
      if (t == 0u) { write_id(row * samples + s, 0u); }   // nothing to draw from (invalid weights)
    } else if (mass > 0.0 && start <= goal && (goal < next || t == last)) {
      var acc = 0.0;
      var pick = 0xffffffffu;
      var positive = lo;
      for (var i = lo; i < hi; i++) {
        let w = weight(mode, load(base, i), threshold, m, inv_t);
        if (w > 0.0) {
          positive = i;
          if (pick == 0xffffffffu && start + acc + w > goal) { pick = i; }
        }
        acc += w;
      }
      write_id(row * samples + s, select(pick, positive, pick == 0xffffffffu));
    }
  }
}
"""


def sample_wgsl(dtype: str) -> str:
    """The sampling shader for f32 or f16 scores."""
    scalar = {"f32": "f32", "f16": "f16"}[dtype]
    head = "enable f16;\n" if dtype == "f16" else ""
    return head + _WGSL.replace("SCALAR", scalar).replace("PHILOX", PHILOX_WGSL)


def top_p_target(top_p: float) -> int:
    """top_p as the fixed-point mass the radix select reaches (>= FIXED_ONE: no top-p filter)."""
    return FIXED_ONE if top_p >= 1.0 else int(math.ceil(top_p * FIXED_ONE))


def sample_launch(p: SampleProblem, rng: tuple[int, int, int, int] = (0, 0, 0, 0)) -> KernelLaunch:
    """The launch that samples `p` with Philox state `rng` (seed lo, seed hi, offset lo, offset hi);
    bindings: params, "x" (the scores), "out" (the ids)."""
    check_problem(p)
    mode = MODES.index(p.mode)
    params = (p.n, p.stride, p.offset, p.out_offset, mode, p.top_k, top_p_target(p.top_p),
              f32_word(1.0 / p.temperature), *[int(w) & 0xFFFFFFFF for w in rng], p.num_samples,
              p.out_words, p.rows, 0)
    return KernelLaunch(name=f"sample.{p.mode}.{p.dtype}", wgsl=sample_wgsl(p.dtype), grid=(p.rows, 1, 1),
                        workgroup_size=(WORKGROUP, 1, 1), bindings=(PARAMS, "x", "out"), params=params,
                        read_only=frozenset({1}))
