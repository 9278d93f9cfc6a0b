"""Convolution family: 2-d (and 1-d as H=1) convolution and transposed convolution as implicit GEMM.

Per group g the convolution is a GEMM: out[c = g*Og + m, pixel] = sum_k W[m, k] * X[k, pixel], with
M = Og output channels, N = batch*OH*OW output pixels and K = Ig*KH*KW (input channel, tap). The X
operand is never built (no im2col buffer): each workgroup gathers its K-tile straight from the NCHW
input — forward: X[n, g*Ig + ci, p*sh - ph + r*dh, q*sw - pw + s*dw]; transposed (gradient-style):
X[n, g*Ig + ci, (p + ph - r*dh) / sh, ...] where the division is exact. A variant is a tile
(TM channels x TN pixels, RM x RN outputs per thread) with KS K-slices per workgroup (intra-workgroup
split-K: small spatial sizes keep every SM busy); depthwise convolutions have a dedicated variant (one
thread per output, the filter in registers). Storage f32 or f16 (with `shader-f16`), f32 accumulation.
The direct variant (`DirectConvProblem`: one invocation per output, any float storage, the backward
kernels) is what the eager device runs where the implicit GEMM does not apply.

Epilogue, in order: `+ bias[c]`, `* scale[c] + shift[c]` (folded batch norm) or, with the running
statistics `mean`/`var`, eval batch norm itself `(v - mean[c]) * scale[c] / sqrt(var[c] + eps) + shift[c]`
(scale = gamma, shift = beta: compiled plans read a model's statistics as they are), `+ residual` (before
the activation, as in a ResNet block, unless `residual_after_activation`), activation (matmul's table).
"""

from __future__ import annotations

from dataclasses import dataclass

from .family import Family, single
from .launch import PARAMS, DeviceCaps, KernelLaunch, LaunchPlan, ceil_div, f32_word, grid_within, linear_grid
from .matmul_wgsl import ACTIVATIONS, activation_functions
from .wgsl import load_fn


@dataclass(frozen=True)
class Strided4:
    """An NCHW operand inside its buffer: element offset and the four strides (n, c, h, w) in elements."""

    offset: int
    strides: tuple[int, int, int, int]

    @staticmethod
    def contiguous(shape: tuple[int, int, int, int], offset: int = 0) -> Strided4:
        """Row-major NCHW layout of `shape`."""
        _, c, h, w = shape
        return Strided4(offset, (c * h * w, h * w, w, 1))


@dataclass(frozen=True)
class Strided1:
    """A per-channel vector (bias, batch-norm scale or shift): element offset and stride."""

    offset: int = 0
    stride: int = 1


@dataclass(frozen=True)
class Conv2dProblem:
    """One 2-d convolution (NCHW) with its epilogue; every field an int, a string or a tuple of ints.

    Weights are [cout, cin/groups, kh, kw] (transposed: [cin, cout/groups, kh, kw]). `x`, `weight`,
    `out`, `residual` default to contiguous layouts at offset 0. `dtype`: storage type of every operand.
    """

    n: int
    cin: int
    h: int
    w: int
    cout: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    transposed: bool = False
    output_padding: tuple[int, int] = (0, 0)
    dtype: str = "f32"
    x: Strided4 | None = None
    weight: Strided4 | None = None
    out: Strided4 | None = None
    bias: Strided1 | None = None
    scale: Strided1 | None = None
    shift: Strided1 | None = None
    residual: Strided4 | None = None
    activation: str | None = None
    residual_after_activation: bool = False
    mean: Strided1 | None = None
    var: Strided1 | None = None
    eps: float = 1e-5

    @property
    def oh(self) -> int:
        """Output height."""
        return self._out_size(self.h, 0)

    @property
    def ow(self) -> int:
        """Output width."""
        return self._out_size(self.w, 1)

    def _out_size(self, size: int, d: int) -> int:
        s, p, dl = self.stride[d], self.padding[d], self.dilation[d]
        k = (self.kh, self.kw)[d]
        if self.transposed:
            return (size - 1) * s - 2 * p + dl * (k - 1) + self.output_padding[d] + 1
        return (size + 2 * p - dl * (k - 1) - 1) // s + 1

    @property
    def in_per_group(self) -> int:
        """Input channels per group (Ig)."""
        return self.cin // self.groups

    @property
    def out_per_group(self) -> int:
        """Output channels per group (Og)."""
        return self.cout // self.groups

    @property
    def gemm_k(self) -> int:
        """The GEMM's reduction length Ig*KH*KW."""
        return self.in_per_group * self.kh * self.kw

    @property
    def pixels(self) -> int:
        """The GEMM's N: batch * OH * OW."""
        return self.n * self.oh * self.ow

    @property
    def flops(self) -> int:
        """Multiply-adds times two."""
        return 2 * self.cout * self.pixels * self.gemm_k

    def weight_shape(self) -> tuple[int, int, int, int]:
        """The weight's logical shape."""
        if self.transposed:
            return (self.cin, self.out_per_group, self.kh, self.kw)
        return (self.cout, self.in_per_group, self.kh, self.kw)

    def layouts(self) -> tuple[Strided4, Strided4, Strided4]:
        """(x, weight, out) layouts with the contiguous defaults filled in."""
        return (self.x or Strided4.contiguous((self.n, self.cin, self.h, self.w)),
                self.weight or Strided4.contiguous(self.weight_shape()),
                self.out or Strided4.contiguous((self.n, self.cout, self.oh, self.ow)))

    def is_depthwise(self) -> bool:
        """One input channel per group (groups == cin), the dedicated depthwise variant applies."""
        return not self.transposed and self.groups == self.cin and self.groups > 1

    def shape_class(self) -> str:
        """A coarse key for autotuning: shapes in one class share a winner."""
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        kind = "dw" if self.is_depthwise() else ("t" if self.transposed else "f")
        return (f"{kind}g{bucket(self.groups)}m{bucket(self.out_per_group)}n{bucket(self.pixels)}"
                f"k{bucket(self.gemm_k)}")

    def check(self) -> None:
        """Raise ValueError naming what is inconsistent."""
        if min(self.n, self.cin, self.h, self.w, self.cout, self.kh, self.kw, self.groups) <= 0:
            raise ValueError(f"conv2d: sizes must be positive, got {self}")
        if self.cin % self.groups or self.cout % self.groups:
            raise ValueError(f"conv2d: groups={self.groups} must divide cin={self.cin} and cout={self.cout}")
        if min(self.stride) <= 0 or min(self.dilation) <= 0 or min(self.padding) < 0:
            raise ValueError(f"conv2d: stride/dilation must be positive and padding non-negative, got "
                             f"stride={self.stride} padding={self.padding} dilation={self.dilation}")
        if self.oh <= 0 or self.ow <= 0:
            raise ValueError(f"conv2d: output size {self.oh}x{self.ow} is not positive "
                             "(input too small for the kernel)")
        if (self.scale is None) != (self.shift is None):
            raise ValueError("conv2d epilogue: batch-norm scale and shift come together")
        if (self.mean is None) != (self.var is None) or (self.var is not None and self.scale is None):
            raise ValueError("conv2d epilogue: batch-norm mean and var come together, with scale and shift")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"conv2d epilogue: unknown activation {self.activation!r} "
                             f"({sorted(map(str, ACTIVATIONS))})")
        if self.dtype not in ("f32", "f16"):
            raise TypeError(f"conv2d: storage dtype {self.dtype!r} is not supported (f32, f16)")


def conv1d_problem(n: int, cin: int, length: int, cout: int, k: int, stride: int = 1, padding: int = 0,
                   dilation: int = 1, groups: int = 1, **fields) -> Conv2dProblem:
    """A 1-d convolution [n, cin, length] as the 2-d problem with H = 1 (layouts' h strides are unused);
    `fields`: the other Conv2dProblem fields (transposed, output_padding as an int, epilogue, layouts)."""
    if "output_padding" in fields:
        fields["output_padding"] = (0, int(fields["output_padding"]))
    return Conv2dProblem(n, cin, 1, length, cout, 1, k, (1, stride), (0, padding), (1, dilation), groups,
                         **fields)


@dataclass(frozen=True)
class Tile:
    """A GEMM variant: TM channels x TN pixels per workgroup, RM x RN per thread, KS K-slices of TK."""

    tm: int
    tn: int
    rm: int
    rn: int
    ks: int
    tk: int

    @property
    def threads(self) -> int:
        """Invocations per workgroup."""
        return (self.tm // self.rm) * (self.tn // self.rn) * self.ks

    @property
    def kt(self) -> int:
        """K rows staged per iteration (all slices)."""
        return self.ks * self.tk

    @property
    def shared_floats(self) -> int:
        """Workgroup memory in f32 words: the W and X tiles, or the split-K reduction, whichever is more."""
        tiles = self.kt * (self.tm + 1) + self.kt * self.tn
        return max(tiles, (self.ks - 1) * self.tm * self.tn)


TILES: dict[str, Tile] = {
    "m64n64": Tile(64, 64, 4, 4, 1, 16),
    "m64n32": Tile(64, 32, 4, 4, 1, 16),
    "m32n64": Tile(32, 64, 4, 4, 1, 16),
    "m32n32": Tile(32, 32, 4, 4, 1, 16),
    "m32n32k4": Tile(32, 32, 4, 4, 4, 8),
    "m64n16k4": Tile(64, 16, 4, 4, 4, 8),
    "m16n64k4": Tile(16, 64, 4, 4, 4, 8),
    "m16n16k16": Tile(16, 16, 4, 4, 16, 4),
}
DEPTHWISE = "depthwise"
DEPTHWISE_THREADS = 64
# Enough invocations to fill a large GPU; below it the default prefers the K-split tiles.
_BUSY_THREADS = 32768

_PARAMS_STRUCT = """struct Params {
  d0: vec4<u32>,   // n, cin, h, w
  d1: vec4<u32>,   // cout, oh, ow, groups
  g0: vec4<u32>,   // stride h, w; padding h, w
  g1: vec4<u32>,   // dilation h, w; kh, kw
  gm: vec4<u32>,   // Ig, Og, K, pixels
  off: vec4<u32>,  // offsets of x, weight, out, residual
  ep: vec4<u32>,   // bias offset, stride; scale offset, stride
  ep2: vec4<u32>,  // shift offset, stride; pixel tiles per grid row, pixel tiles
  xs: vec4<u32>, ws: vec4<u32>, os: vec4<u32>, rs: vec4<u32>,
  bn: vec4<u32>,   // mean offset, stride; var offset, stride
  bn2: vec4<u32>,  // eps (f32 bits)
}
@group(0) @binding(0) var<uniform> P: Params;
"""


def _declarations(p: Conv2dProblem) -> tuple[str, list[str]]:
    t = p.dtype
    roles = [PARAMS, "x", "weight", "out"]
    decl = [f"@group(0) @binding(1) var<storage, read> X: array<{t}>;",
            f"@group(0) @binding(2) var<storage, read> W: array<{t}>;",
            f"@group(0) @binding(3) var<storage, read_write> O: array<{t}>;"]
    for role, name, present in (("bias", "Bias", p.bias), ("scale", "Scale", p.scale),
                                ("shift", "Shift", p.shift), ("residual", "R", p.residual),
                                ("mean", "Mean", p.mean), ("var", "Var", p.var)):
        if present is not None:
            decl.append(f"@group(0) @binding({len(roles)}) var<storage, read> {name}: array<{t}>;")
            roles.append(role)
    head = ("enable f16;\n" if t == "f16" else "") + _PARAMS_STRUCT + "\n".join(decl) + "\n"
    head += activation_functions(p.activation)
    return head, roles


def _epilogue(p: Conv2dProblem, indent: str) -> str:
    """WGSL turning `v` (f32, output channel `c`, pixel `nb, pp, qq`) into the stored value."""
    lines = []
    if p.bias is not None:
        lines.append("v = v + f32(Bias[P.ep.x + c * P.ep.y]);")
    if p.var is not None:
        lines.append("v = (v - f32(Mean[P.bn.x + c * P.bn.y])) * (f32(Scale[P.ep.z + c * P.ep.w]) / "
                     "sqrt(f32(Var[P.bn.z + c * P.bn.w]) + bitcast<f32>(P.bn2.x))) "
                     "+ f32(Shift[P.ep2.x + c * P.ep2.y]);")
    elif p.scale is not None:
        lines.append("v = v * f32(Scale[P.ep.z + c * P.ep.w]) + f32(Shift[P.ep2.x + c * P.ep2.y]);")
    res = "v = v + f32(R[P.off.w + nb * P.rs.x + c * P.rs.y + pp * P.rs.z + qq * P.rs.w]);"
    if p.residual is not None and not p.residual_after_activation:
        lines.append(res)
    lines.append(f"v = {ACTIVATIONS[p.activation]};")
    if p.residual is not None and p.residual_after_activation:
        lines.append(res)
    lines.append(f"O[P.off.z + nb * P.os.x + c * P.os.y + pp * P.os.z + qq * P.os.w] = {p.dtype}(v);")
    return "".join(indent + line + "\n" for line in lines)


def _x_gather(p: Conv2dProblem) -> str:
    """WGSL setting `v` to X at GEMM row k (input channel ci, tap r, s) for this thread's pixel."""
    decompose = "let ci = k / khw; let rs = k % khw; let r = rs / P.g1.w; let s = rs % P.g1.w;\n"
    if not p.transposed:
        return decompose + """
        let ih = i32(pp * P.g0.x + r * P.g1.x) - i32(P.g0.z);
        let iw = i32(qq * P.g0.y + s * P.g1.y) - i32(P.g0.w);
        if (ih >= 0 && ih < i32(P.d0.z) && iw >= 0 && iw < i32(P.d0.w)) {
          v = f32(X[xbase + ci * P.xs.y + u32(ih) * P.xs.z + u32(iw) * P.xs.w]);
        }"""
    return decompose + """
        let hn = i32(pp + P.g0.z) - i32(r * P.g1.x);
        let wn = i32(qq + P.g0.w) - i32(s * P.g1.y);
        if (hn >= 0 && wn >= 0 && u32(hn) % P.g0.x == 0u && u32(wn) % P.g0.y == 0u) {
          let ih = u32(hn) / P.g0.x; let iw = u32(wn) / P.g0.y;
          if (ih < P.d0.z && iw < P.d0.w) {
            v = f32(X[xbase + ci * P.xs.y + ih * P.xs.z + iw * P.xs.w]);
          }
        }"""


def _w_index(p: Conv2dProblem) -> str:
    """WGSL index of W at (output channel m of group g, GEMM row k)."""
    _, wl, _ = p.layouts()
    s0, s1, s2, s3 = wl.strides
    if p.transposed:
        return ("P.off.y + (g * P.gm.x + k / khw) * P.ws.x + m * P.ws.y + (k % khw) / P.g1.w * P.ws.z"
                " + (k % khw) % P.g1.w * P.ws.w")
    if s1 == p.kh * p.kw * s3 and s2 == p.kw * s3:  # (ci, r, s) flatten to one stride: no division
        return "P.off.y + (g * P.gm.y + m) * P.ws.x + k * P.ws.w"
    return ("P.off.y + (g * P.gm.y + m) * P.ws.x + k / khw * P.ws.y + (k % khw) / P.g1.w * P.ws.z"
            " + (k % khw) % P.g1.w * P.ws.w")


def _gemm_source(p: Conv2dProblem, tile: Tile) -> str:
    head, _ = _declarations(p)
    tm, tn, rm, rn, ks, tk = tile.tm, tile.tn, tile.rm, tile.rn, tile.ks, tile.tk
    threads, kt = tile.threads, tile.kt
    slice_threads = threads // ks
    wstr = tm + 1                       # padded W rows: the k-fastest tile stores hit distinct banks
    xb = kt * wstr
    w_loads, x_loads = ceil_div(kt * tm, threads), ceil_div(kt * tn, threads)
    w_guard = "" if kt * tm % threads == 0 else f"if (e >= {kt * tm}u) {{ break; }}"
    x_guard = "" if kt * tn % threads == 0 else f"if (e >= {kt * tn}u) {{ break; }}"
    sx, sy = tm // rm, tn // rn
    acc_decl = "".join(f"  var c{i}_{j} = 0.0;\n" for i in range(rm) for j in range(rn))
    a_loads = "".join(f"      let a{i} = S[kr * {wstr}u + ty + {i * sx}u];\n" for i in range(rm))
    b_loads = "".join(f"      let b{j} = S[{xb}u + kr * {tn}u + tx + {j * sy}u];\n" for j in range(rn))
    fmas = "".join(f"      c{i}_{j} = fma(a{i}, b{j}, c{i}_{j});\n" for i in range(rm) for j in range(rn))
    loads = f"""    for (var i = 0u; i < {w_loads}u; i++) {{
      let e = lid + i * {threads}u;
      {w_guard}
      let k = kn + e % {kt}u; let m = m0 + e / {kt}u;
      var v = 0.0;
      if (k < K && m < og) {{ v = f32(W[{_w_index(p)}]); }}
      wv[i] = v;
    }}
    for (var i = 0u; i < {x_loads}u; i++) {{
      let e = lid + i * {threads}u;
      {x_guard}
      let k = kn + e / {tn}u;
      var v = 0.0;
      if (k < K && xvalid) {{
        let pp = xp; let qq = xq;
        {_x_gather(p)}
      }}
      xv[i] = v;
    }}
"""
    reduce = ""
    if ks > 1:
        # slice s > 0 parks its accumulators at S[((s - 1) * RM*RN + r) * slice_threads + l]
        park = f"(({{}} - 1u) * {rm * rn}u + {{}}u) * {slice_threads}u + l"
        stores = "".join(f"    S[{park.format('slice', i * rn + j)}] = c{i}_{j};\n"
                         for i in range(rm) for j in range(rn))
        adds = "".join(f"      c{i}_{j} += S[{park.format('s2', i * rn + j)}];\n"
                       for i in range(rm) for j in range(rn))
        reduce = f"""  if (slice > 0u) {{
{stores}  }}
  workgroupBarrier();
  if (slice != 0u) {{ return; }}
  for (var s2 = 1u; s2 < {ks}u; s2++) {{
{adds}  }}
"""
    # The epilogue runs in a loop over the thread's outputs: one copy of its code (activations are long).
    accs = ", ".join(f"c{i}_{j}" for i in range(rm) for j in range(rn))
    stores_out = f"""  let accs = array<f32, {rm * rn}>({accs});
  for (var r = 0u; r < {rm * rn}u; r++) {{
    let m = m0 + ty + (r / {rn}u) * {sx}u; let pix = n0 + tx + (r % {rn}u) * {sy}u;
    if (m < og && pix < npix) {{
      let qq = pix % ow; let t1 = pix / ow; let pp = t1 % oh; let nb = t1 / oh;
      let c = g * og + m;
      var v = accs[r];
{_epilogue(p, "      ")}    }}
  }}
"""
    return f"""{head}
var<workgroup> S: array<f32, {tile.shared_floats}>;
@compute @workgroup_size({threads})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
  let groups = P.d1.w;
  let g = wid.z % groups;
  let tile_n = wid.x + (wid.z / groups) * P.ep2.z;
  if (tile_n >= P.ep2.w) {{ return; }}
  let m0 = wid.y * {tm}u; let n0 = tile_n * {tn}u;
  let og = P.gm.y; let K = P.gm.z; let npix = P.gm.w;
  let oh = P.d1.y; let ow = P.d1.z;
  let khw = P.g1.z * P.g1.w;
  // The X tile is gathered pixel-fastest: this thread always loads the same output pixel.
  let xcol = lid % {tn}u;
  let xpix = n0 + xcol;
  let xvalid = xpix < npix;
  let xq = xpix % ow; let xt = xpix / ow; let xp = xt % oh; let xn = xt / oh;
  let xbase = P.off.x + xn * P.xs.x + g * P.gm.x * P.xs.y;
  let slice = lid / {slice_threads}u; let l = lid % {slice_threads}u;
  let tx = l % {sy}u; let ty = l / {sy}u;
  let kr0 = slice * {tk}u;
{acc_decl}  // Register prefetch: the next K-tile's global loads are in flight while this one is multiplied.
  var wv: array<f32, {w_loads}>;
  var xv: array<f32, {x_loads}>;
  var kn = 0u;
{loads}  for (var k0 = 0u; k0 < K; k0 += {kt}u) {{
    for (var i = 0u; i < {w_loads}u; i++) {{
      let e = lid + i * {threads}u;
      {w_guard}
      S[(e % {kt}u) * {wstr}u + e / {kt}u] = wv[i];
    }}
    for (var i = 0u; i < {x_loads}u; i++) {{
      let e = lid + i * {threads}u;
      {x_guard}
      S[{xb}u + (e / {tn}u) * {tn}u + xcol] = xv[i];
    }}
    workgroupBarrier();
    kn = k0 + {kt}u;
    if (kn < K) {{
{loads}    }}
    for (var kk = 0u; kk < {tk}u; kk++) {{
      let kr = kr0 + kk;
{a_loads}{b_loads}{fmas}    }}
    workgroupBarrier();
  }}
{reduce}{stores_out}}}
"""


def _depthwise_source(p: Conv2dProblem) -> str:
    head, _ = _declarations(p)
    taps = p.kh * p.kw
    wl = p.layouts()[1]
    w_flat = wl.strides[2] == p.kw * wl.strides[3]
    w_at = ("W[P.off.y + c * P.ws.x + t * P.ws.w]" if w_flat else
            "W[P.off.y + c * P.ws.x + (t / P.g1.w) * P.ws.z + (t % P.g1.w) * P.ws.w]")
    return f"""{head}
@compute @workgroup_size({DEPTHWISE_THREADS})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let idx = gid.x + gid.y * nwg.x * {DEPTHWISE_THREADS}u;
  let oh = P.d1.y; let ow = P.d1.z; let cout = P.d1.x;
  if (idx >= P.d0.x * cout * oh * ow) {{ return; }}
  let qq = idx % ow; let t1 = idx / ow; let pp = t1 % oh; let t2 = t1 / oh;
  let c = t2 % cout; let nb = t2 / cout;
  let ci = c / P.gm.y;     // Og output channels read input channel c / Og
  var wr: array<f32, {taps}>;
  for (var t = 0u; t < {taps}u; t++) {{ wr[t] = f32({w_at}); }}
  let xbase = P.off.x + nb * P.xs.x + ci * P.xs.y;
  let h0 = i32(pp * P.g0.x) - i32(P.g0.z); let w0 = i32(qq * P.g0.y) - i32(P.g0.w);
  var acc = 0.0;
  for (var r = 0u; r < {p.kh}u; r++) {{
    let ih = h0 + i32(r * P.g1.x);
    if (ih < 0 || ih >= i32(P.d0.z)) {{ continue; }}
    for (var s = 0u; s < {p.kw}u; s++) {{
      let iw = w0 + i32(s * P.g1.y);
      if (iw < 0 || iw >= i32(P.d0.w)) {{ continue; }}
      acc = fma(f32(X[xbase + u32(ih) * P.xs.z + u32(iw) * P.xs.w]), wr[r * {p.kw}u + s], acc);
    }}
  }}
  var v = acc;
{_epilogue(p, "  ")}}}
"""


def _params(p: Conv2dProblem, grid_x: int, tiles_n: int) -> tuple[int, ...]:
    xl, wl, ol = p.layouts()
    rl = p.residual or Strided4(0, (0, 0, 0, 0))
    bias, scale, shift = p.bias or Strided1(0, 0), p.scale or Strided1(0, 0), p.shift or Strided1(0, 0)
    mean, var = p.mean or Strided1(0, 0), p.var or Strided1(0, 0)
    return (p.n, p.cin, p.h, p.w, p.cout, p.oh, p.ow, p.groups,
            *p.stride, *p.padding, *p.dilation, p.kh, p.kw,
            p.in_per_group, p.out_per_group, p.gemm_k, p.pixels,
            xl.offset, wl.offset, ol.offset, rl.offset,
            bias.offset, bias.stride, scale.offset, scale.stride,
            shift.offset, shift.stride, grid_x, tiles_n,
            *xl.strides, *wl.strides, *ol.strides, *rl.strides,
            mean.offset, mean.stride, var.offset, var.stride, f32_word(p.eps), 0, 0, 0)


def _fits(tile: Tile, caps: DeviceCaps) -> bool:
    return (tile.threads <= caps.limit("max-compute-invocations-per-workgroup", 256)
            and tile.shared_floats * 4 <= caps.limit("max-compute-workgroup-storage-size", 16384))


def _workgroups(p: Conv2dProblem, tile: Tile) -> int:
    return ceil_div(p.out_per_group, tile.tm) * ceil_div(p.pixels, tile.tn) * p.groups


def _default_order(p: Conv2dProblem, names: list[str], caps: DeviceCaps) -> list[str]:
    """Big tiles when they fill the GPU; else K-split tiles (small spatial sizes, long K); else smaller.
    A software adapter (a few CPU cores, slow shader JIT) takes the big tile: it compiles fastest."""
    def busy(name: str) -> bool:
        t = TILES[name]
        return _workgroups(p, t) * t.threads >= _BUSY_THREADS and (t.ks == 1 or p.gemm_k >= 4 * t.kt)
    gemm = [n for n in names if n in TILES]
    first = next((n for n in gemm if busy(n) or caps.architecture == "software"), None)
    if first is None:  # nothing fills the GPU: the most invocations that still has work for each K-slice
        useful = [n for n in gemm if TILES[n].ks == 1 or p.gemm_k >= 4 * TILES[n].kt] or gemm
        first = max(useful, key=lambda n: _workgroups(p, TILES[n]) * TILES[n].threads)
    order = [first] + [n for n in gemm if n != first]
    return ([DEPTHWISE] if DEPTHWISE in names else []) + order


def variants(p: Conv2dProblem, caps: DeviceCaps) -> list[str]:
    """Variant names that can run `p` on `caps`, best default first."""
    if p.dtype == "f16" and not caps.shader_f16:
        return []
    names = [name for name, tile in TILES.items() if _fits(tile, caps)]
    if p.is_depthwise():
        names.append(DEPTHWISE)
    return _default_order(p, names, caps)


def plan_conv2d(p: Conv2dProblem, caps: DeviceCaps, variant: str | None = None) -> KernelLaunch:
    """The launch of `p` on `caps` (`variant`: one of `variants(p, caps)`, default the first)."""
    p.check()
    names = variants(p, caps)
    if not names:
        raise TypeError(f"conv2d: dtype {p.dtype} needs the adapter feature 'shader-f16'")
    variant = variant or names[0]
    if variant not in names:
        raise ValueError(f"conv2d variant {variant!r} is not one of {names}")
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    _, roles = _declarations(p)
    read_only = frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS))
    kind = "convt" if p.transposed else "conv"
    if variant == DEPTHWISE:
        total = p.n * p.cout * p.oh * p.ow
        gx, gy = grid_within(ceil_div(total, DEPTHWISE_THREADS), limit)
        return KernelLaunch(name=f"{kind}2d.{p.dtype}.{variant}", wgsl=_depthwise_source(p),
                            grid=(gx, gy, 1), workgroup_size=(DEPTHWISE_THREADS, 1, 1),
                            bindings=tuple(roles), params=_params(p, 0, 0), read_only=read_only)
    tile = TILES[variant]
    tiles_n, tiles_m = ceil_div(p.pixels, tile.tn), ceil_div(p.out_per_group, tile.tm)
    gx, fold = grid_within(tiles_n, limit)
    if tiles_m > limit or p.groups * fold > limit:
        raise ValueError(f"conv2d: {p.cout} channels x {p.pixels} pixels in {p.groups} groups exceed the "
                         "device's workgroup grid")
    return KernelLaunch(name=f"{kind}2d.{p.dtype}.{variant}", wgsl=_gemm_source(p, tile),
                        grid=(gx, tiles_m, p.groups * fold), workgroup_size=(tile.threads, 1, 1),
                        bindings=tuple(roles), params=_params(p, gx, tiles_n), read_only=read_only)


# ---- the direct variant: one invocation per output element -------------------------------------------

DIRECT = "direct"
DIRECT_KINDS = ("fwd", "data", "wgrad")


@dataclass(frozen=True)
class DirectConvProblem:
    """One direct 2-d convolution kernel (1-d runs as H = 1): one invocation per element of the contiguous
    f32 output, f32 accumulation, each operand read through its own offset, sizes and 4 strides; what the
    eager device runs where the implicit GEMM does not: the backward pass and bfloat16 (or f16 without
    shader-f16).

      fwd:   out[n,o,p,q] = sum_{i,kh,kw} A[n, g*Ig+i, p*s-pad+kh*d, q*s-pad+kw*d] * B[o, i, kh, kw]
             (+ bias[o])
      data:  out[n,c,h,w] = sum_{o in group, kh, kw} A[n, o, (h+pad-kh*d)/s, (w+pad-kw*d)/s]
             * B[o, c%Ig, kh, kw]
      wgrad: out[o,i,kh,kw] = sum_{n,p,q} A[n, o, p, q] * B[n, g*Ig+i, p*s-pad+kh*d, q*s-pad+kw*d]

    `in_per_group` = Ig, `out_per_group` = Og; A and B are storage `a_dtype`/`b_dtype` ("f32", "f16",
    "bf16"), the bias `bias_dtype`."""

    kind: str
    out_sizes: tuple[int, int, int, int]
    a: Strided4
    a_sizes: tuple[int, int, int, int]
    b: Strided4
    b_sizes: tuple[int, int, int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    kernel: tuple[int, int]
    in_per_group: int
    out_per_group: int
    a_dtype: str = "f32"
    b_dtype: str = "f32"
    bias: Strided1 | None = None
    bias_dtype: str | None = None

    @property
    def total(self) -> int:
        """Output elements (one invocation each)."""
        total = 1
        for s in self.out_sizes:
            total *= s
        return total

    def shape_class(self) -> str:
        """A coarse autotuning key (the family's `problem_key`): the kind, power-of-two buckets of the
        output elements and of the channels a group reads and writes, the window, the storage dtypes."""
        def bucket(x: int) -> int:
            return 1 << max(0, (x - 1).bit_length())
        return (f"{self.kind}.n{bucket(self.total)}i{bucket(self.in_per_group)}o{bucket(self.out_per_group)}"
                f"w{self.kernel[0]}x{self.kernel[1]}.{self.a_dtype}.{self.b_dtype}")

    def check(self) -> None:
        """ValueError naming what the direct kernels cannot run."""
        if self.kind not in DIRECT_KINDS:
            raise ValueError(f"direct conv: kind {self.kind!r} is not one of {DIRECT_KINDS}")
        if self.bias is not None and self.kind != "fwd":
            raise ValueError("direct conv: only the forward kernel adds a bias")


_DIRECT_BODIES = {
    "fwd": """
  let o = c1; let g = o / P[16];
  for (var i = 0u; i < P[15]; i++) {
    for (var kh = 0u; kh < P[13]; kh++) {
      let h = i32(c2 * P[5] + kh * P[11]) - i32(P[9]);
      if (h < 0 || h >= i32(P[20])) { continue; }
      for (var kw = 0u; kw < P[14]; kw++) {
        let w = i32(c3 * P[6] + kw * P[12]) - i32(P[10]);
        if (w < 0 || w >= i32(P[21])) { continue; }
        acc += la(P[17] + c0 * P[22] + (g * P[15] + i) * P[23] + u32(h) * P[24] + u32(w) * P[25])
             * lb(P[26] + o * P[31] + i * P[32] + kh * P[33] + kw * P[34]);
      }
    }
  }
""",
    "data": """
  let c = c1; let g = c / P[15]; let cl = c % P[15];
  for (var oo = 0u; oo < P[16]; oo++) {
    let o = g * P[16] + oo;
    for (var kh = 0u; kh < P[13]; kh++) {
      let hn = i32(c2) + i32(P[9]) - i32(kh * P[11]);
      if (hn < 0 || hn % i32(P[5]) != 0) { continue; }
      let h = u32(hn) / P[5];
      if (h >= P[20]) { continue; }
      for (var kw = 0u; kw < P[14]; kw++) {
        let wn = i32(c3) + i32(P[10]) - i32(kw * P[12]);
        if (wn < 0 || wn % i32(P[6]) != 0) { continue; }
        let w = u32(wn) / P[6];
        if (w >= P[21]) { continue; }
        acc += la(P[17] + c0 * P[22] + o * P[23] + h * P[24] + w * P[25])
             * lb(P[26] + o * P[31] + cl * P[32] + kh * P[33] + kw * P[34]);
      }
    }
  }
""",
    "wgrad": """
  let o = c0; let i = c1; let kh = c2; let kw = c3; let g = o / P[16];
  for (var n = 0u; n < P[18]; n++) {
    for (var p = 0u; p < P[20]; p++) {
      let h = i32(p * P[5] + kh * P[11]) - i32(P[9]);
      if (h < 0 || h >= i32(P[29])) { continue; }
      for (var q = 0u; q < P[21]; q++) {
        let w = i32(q * P[6] + kw * P[12]) - i32(P[10]);
        if (w < 0 || w >= i32(P[30])) { continue; }
        acc += la(P[17] + n * P[22] + o * P[23] + p * P[24] + q * P[25])
             * lb(P[26] + n * P[31] + (g * P[15] + i) * P[32] + u32(h) * P[33] + u32(w) * P[34]);
      }
    }
  }
""",
}



def _direct_source(kind: str, a_dtype: str, b_dtype: str, bias_dtype: str | None) -> str:
    def load(name, buf, dtype):
        return load_fn(name, buf, dtype, "f32")

    decl = """@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> A: array<u32>;
@group(0) @binding(2) var<storage, read> Bw: array<u32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
"""
    if bias_dtype is not None:
        decl += "@group(0) @binding(4) var<storage, read> Cb: array<u32>;\n"
    fns = load("la", "A", a_dtype) + load("lb", "Bw", b_dtype)
    bias = ""
    if bias_dtype is not None:
        fns += load("lc", "Cb", bias_dtype)
        bias = "  acc += lc(P[36] + c1 * P[37]);\n"
    return decl + fns + f"""
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {{
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) {{ return; }}
  let c3 = t % P[4]; let r3 = t / P[4];
  let c2 = r3 % P[3]; let r2 = r3 / P[3];
  let c1 = r2 % P[2]; let c0 = r2 / P[2];
  var acc = 0.0;
{_DIRECT_BODIES[kind]}{bias}  O[t] = acc;
}}
"""



def direct_variants(p: DirectConvProblem, caps: DeviceCaps) -> list[str]:
    """The direct kernel's one variant."""
    p.check()
    return [DIRECT]


def plan_direct_conv(p: DirectConvProblem, caps: DeviceCaps, variant: str | None = None) -> LaunchPlan:
    """The launch of `p` (none for an empty output): bindings params, "a", "b", "out" (contiguous f32 from
    element 0), "bias"."""
    p.check()
    if variant not in (None, DIRECT):
        raise ValueError(f"direct conv variant {variant!r} is not one of {[DIRECT]}")
    if p.total == 0:
        return LaunchPlan(())
    params = (p.total, *p.out_sizes, *p.stride, 0, 0, *p.padding, *p.dilation, *p.kernel, p.in_per_group,
              p.out_per_group, p.a.offset, *p.a_sizes, *p.a.strides, p.b.offset, *p.b_sizes, *p.b.strides)
    params += (1, p.bias.offset, p.bias.stride) if p.bias is not None else (0, 0, 0)
    roles = (PARAMS, "a", "b", "out") + (("bias",) if p.bias is not None else ())
    launch = KernelLaunch(name=f"conv2d.{DIRECT}.{p.kind}.{p.a_dtype}",
                          wgsl=_direct_source(p.kind, p.a_dtype, p.b_dtype, p.bias_dtype if p.bias else None),
                          grid=linear_grid(p.total), workgroup_size=(64, 1, 1), bindings=roles, params=params,
                          read_only=frozenset(i for i, r in enumerate(roles) if r not in ("out", PARAMS)))
    return LaunchPlan((launch,))


FAMILY = Family("conv2d", variants, single(plan_conv2d))
DIRECT_FAMILY = Family("conv2d_direct", direct_variants, plan_direct_conv)

__all__ = ["FAMILY", "DIRECT_FAMILY", "Conv2dProblem", "Strided4", "Strided1", "Tile", "TILES", "DEPTHWISE",
           "conv1d_problem", "variants", "plan_conv2d", "DirectConvProblem", "DIRECT", "direct_variants",
           "plan_direct_conv"]
