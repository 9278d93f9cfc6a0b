"""WGSL for batched dense linear algebra: one workgroup (or one invocation) per matrix.

Every family is one template; the variant is where the matrix lives while the workgroup works on it:
"local" copies each matrix of at most LOCAL_DIM x LOCAL_DIM floats into workgroup memory (fast barriers,
16 KiB budget of WebGPU's default limits), "global" works in place in the storage buffer (any size, one
workgroup per matrix, storage barriers). The templates call `ga(i, j)` / `sa(i, j, v)` (matrix A) and
`gv` / `sv` (a second matrix V, for the Jacobi methods), `sync()` and `load_all` / `store_all`; the
variant supplies them. Matrices are row-major [batch, rows, cols] f32 at an element offset.

Families (parameter words P in the comment of each template):
  lu        LU with partial pivoting (LAPACK getrf: 1-based pivots, info = first zero pivot, continues)
  cholesky  right-looking Cholesky of the lower triangle (info = order of the first non-positive minor)
  geqrf     Householder QR (LAPACK geqrf: reflectors below the diagonal, tau, R on and above it)
  orgqr     Q = H_0 ... H_{k-1} applied to the identity, one invocation per column of Q
  trsm      triangular solve with optional row interchanges, one invocation per right-hand column
  lu_det    det, sign and log|det| from an LU factorization, one invocation per matrix
  eigh      cyclic Jacobi rotations of a symmetric matrix (A -> diag, V accumulates the rotations)
  svd       one-sided (Hestenes) Jacobi: orthogonalises the columns of A (m >= n), V accumulates
  ldl       Bunch-Kaufman L D L^T (LAPACK sytf2, lower), one invocation per matrix (serial pivoting)
  ldl_solve LAPACK sytrs (lower) with ldl's factors, one invocation per right-hand column
"""

from __future__ import annotations

from ...runtime import Kernel, get_runtime

WG = 64  # invocations per workgroup
LOCAL_DIM = 32  # a matrix with rows, cols <= LOCAL_DIM lives in workgroup memory (2 x 4 KiB at most)
MAX_SWEEPS = 30  # Jacobi sweeps before giving up on convergence (quadratic: ~6-10 are typical)
# Largest matrix dimension per workgroup-per-matrix family: one workgroup does O(n^3) work (Jacobi: per
# sweep), and one dispatch that runs for seconds risks the GPU watchdog (device lost)
MAX_DIM = {"lu": 1024, "cholesky": 1024, "geqrf": 1024, "eigh": 256, "svd": 256}

_HEADER = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
var<private> base: u32;
var<private> ld: u32;
var<private> vbase: u32;
var<private> vld: u32;
"""

_LOCAL = f"""
var<workgroup> S: array<f32, {LOCAL_DIM * LOCAL_DIM}>;
var<workgroup> SV: array<f32, {LOCAL_DIM * LOCAL_DIM}>;
fn ga(i: u32, j: u32) -> f32 {{ return S[i * ld + j]; }}
fn sa(i: u32, j: u32, v: f32) {{ S[i * ld + j] = v; }}
fn gv(i: u32, j: u32) -> f32 {{ return SV[i * vld + j]; }}
fn sv(i: u32, j: u32, v: f32) {{ SV[i * vld + j] = v; }}
fn sync() {{ workgroupBarrier(); }}
fn load_all(lid: u32, rows: u32) {{
  for (var t = lid; t < rows * ld; t += {WG}u) {{ S[t] = W[base + t]; }}
  workgroupBarrier();
}}
fn store_all(lid: u32, rows: u32) {{
  workgroupBarrier();
  for (var t = lid; t < rows * ld; t += {WG}u) {{ W[base + t] = S[t]; }}
}}
fn store_v(lid: u32, rows: u32) {{
  workgroupBarrier();
  for (var t = lid; t < rows * vld; t += {WG}u) {{ WV[vbase + t] = SV[t]; }}
}}
"""

_GLOBAL = """
fn ga(i: u32, j: u32) -> f32 { return W[base + i * ld + j]; }
fn sa(i: u32, j: u32, v: f32) { W[base + i * ld + j] = v; }
fn gv(i: u32, j: u32) -> f32 { return WV[vbase + i * vld + j]; }
fn sv(i: u32, j: u32, v: f32) { WV[vbase + i * vld + j] = v; }
fn sync() { storageBarrier(); workgroupBarrier(); }
fn load_all(lid: u32, rows: u32) { }
fn store_all(lid: u32, rows: u32) { storageBarrier(); }
fn store_v(lid: u32, rows: u32) { storageBarrier(); }
"""

_MAIN = f"""
@compute @workgroup_size({WG})
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
  let b = wid.x + wid.y * nwg.x;
  if (b >= P[0]) {{ return; }}
"""

# ---- workgroup-per-matrix families (variant: local | global) -------------------------------------------

_LU = """
// P = [batch, m, n, offset A, offset pivots, offset info]
@group(0) @binding(1) var<storage, read_write> W: array<f32>;
@group(0) @binding(2) var<storage, read_write> PIV: array<i32>;
@group(0) @binding(3) var<storage, read_write> INFO: array<i32>;
@group(0) @binding(4) var<storage, read_write> WV: array<f32>;
var<workgroup> pivot: u32;
{variant}
{main}
  let m = P[1]; let n = P[2]; let k = min(m, n);
  base = P[3] + b * m * n; ld = n;
  load_all(lid, m);
  var info = 0i;
  for (var j = 0u; j < k; j++) {
    if (lid == 0u) {
      var p = j; var best = abs(ga(j, j));
      for (var i = j + 1u; i < m; i++) { let v = abs(ga(i, j)); if (v > best) { best = v; p = i; } }
      pivot = p;
      PIV[P[4] + b * k + j] = i32(p + 1u);
      if (best == 0.0 && info == 0i) { info = i32(j + 1u); }
    }
    let p = workgroupUniformLoad(&pivot);
    if (p != j) {
      for (var c = lid; c < n; c += WGu) { let t = ga(j, c); sa(j, c, ga(p, c)); sa(p, c, t); }
    }
    sync();
    let d = ga(j, j);
    if (d != 0.0) {
      let r = 1.0 / d;
      for (var i = j + 1u + lid; i < m; i += WGu) { sa(i, j, ga(i, j) * r); }
    }
    sync();
    let rows = m - j - 1u; let cols = n - j - 1u;
    for (var t = lid; t < rows * cols; t += WGu) {
      let i = j + 1u + t / cols; let c = j + 1u + t % cols;
      sa(i, c, ga(i, c) - ga(i, j) * ga(j, c));
    }
    sync();
  }
  store_all(lid, m);
  if (lid == 0u) { INFO[P[5] + b] = info; }
}
"""

_CHOLESKY = """
// P = [batch, n, offset A, offset info]; reads the lower triangle, writes L (upper triangle zeroed)
@group(0) @binding(1) var<storage, read_write> W: array<f32>;
@group(0) @binding(2) var<storage, read_write> INFO: array<i32>;
@group(0) @binding(3) var<storage, read_write> WV: array<f32>;
var<workgroup> diag: f32;
{variant}
{main}
  let n = P[1];
  base = P[2] + b * n * n; ld = n;
  load_all(lid, n);
  if (lid == 0u) { INFO[P[3] + b] = 0i; }
  for (var j = 0u; j < n; j++) {
    if (lid == 0u) { diag = ga(j, j); }
    let d = workgroupUniformLoad(&diag);
    if (!(d > 0.0)) {
      if (lid == 0u) { INFO[P[3] + b] = i32(j + 1u); }
      break;
    }
    let r = sqrt(d);
    if (lid == 0u) { sa(j, j, r); }
    for (var i = j + 1u + lid; i < n; i += WGu) { sa(i, j, ga(i, j) / r); }
    sync();
    let rows = n - j - 1u;
    for (var t = lid; t < rows * rows; t += WGu) {
      let i = j + 1u + t / rows; let c = j + 1u + t % rows;
      if (c <= i) { sa(i, c, ga(i, c) - ga(i, j) * ga(c, j)); }
    }
    sync();
  }
  for (var t = lid; t < n * n; t += WGu) {
    let i = t / n; let c = t % n;
    if (c > i) { sa(i, c, 0.0); }
  }
  store_all(lid, n);
}
"""

_GEQRF = """
// P = [batch, m, n, offset A, offset tau]
@group(0) @binding(1) var<storage, read_write> W: array<f32>;
@group(0) @binding(2) var<storage, read_write> TAU: array<f32>;
@group(0) @binding(3) var<storage, read_write> WV: array<f32>;
var<workgroup> red: array<f32, WG>;
var<workgroup> coef: vec2<f32>;
{variant}
{main}
  let m = P[1]; let n = P[2]; let k = min(m, n);
  base = P[3] + b * m * n; ld = n;
  load_all(lid, m);
  for (var j = 0u; j < k; j++) {
    var part = 0.0;
    for (var i = j + 1u + lid; i < m; i += WGu) { let x = ga(i, j); part += x * x; }
    red[lid] = part;
    sync();
    if (lid == 0u) {
      var s = 0.0;
      for (var t = 0u; t < WGu; t++) { s += red[t]; }
      let alpha = ga(j, j);
      var tau = 0.0; var scale = 1.0;
      if (s > 0.0) {  // LAPACK larfg: beta = -sign(alpha) |(alpha, x)|, v = x / (alpha - beta)
        let h = sqrt(alpha * alpha + s);
        let beta = select(h, -h, alpha >= 0.0);
        tau = (beta - alpha) / beta;
        scale = 1.0 / (alpha - beta);
        sa(j, j, beta);
      }
      coef = vec2<f32>(tau, scale);
      TAU[P[4] + b * k + j] = tau;
    }
    sync();
    let cf = coef;
    for (var i = j + 1u + lid; i < m; i += WGu) { sa(i, j, ga(i, j) * cf.y); }
    sync();
    for (var c = j + 1u + lid; c < n; c += WGu) {
      var w = ga(j, c);
      for (var i = j + 1u; i < m; i++) { w += ga(i, j) * ga(i, c); }
      w *= cf.x;
      sa(j, c, ga(j, c) - w);
      for (var i = j + 1u; i < m; i++) { sa(i, c, ga(i, c) - ga(i, j) * w); }
    }
    sync();
  }
  store_all(lid, m);
}
"""

_EIGH = """
// P = [batch, n, offset A, offset V]; A symmetric (both triangles), V receives the eigenvectors
@group(0) @binding(1) var<storage, read_write> W: array<f32>;
@group(0) @binding(2) var<storage, read_write> WV: array<f32>;
var<workgroup> rot: vec2<f32>;
var<workgroup> done: u32;
{variant}
{main}
  let n = P[1];
  base = P[2] + b * n * n; ld = n; vbase = P[3] + b * n * n; vld = n;
  load_all(lid, n);
  for (var t = lid; t < n * n; t += WGu) { sv(t / n, t % n, select(0.0, 1.0, t / n == t % n)); }
  sync();
  for (var sweep = 0u; sweep < MAX_SWEEPSu; sweep++) {
    if (lid == 0u) {
      var off = 0.0; var total = 0.0;
      for (var t = 0u; t < n * n; t++) {
        let a = ga(t / n, t % n); total += a * a;
        if (t / n != t % n) { off += a * a; }
      }
      done = select(0u, 1u, off <= 1e-14 * total);
    }
    if (workgroupUniformLoad(&done) == 1u) { break; }
    for (var p = 0u; p + 1u < n; p++) {
      for (var q = p + 1u; q < n; q++) {
        if (lid == 0u) {
          let apq = ga(p, q);
          var cs = vec2<f32>(1.0, 0.0);
          if (apq != 0.0) {
            let theta = (ga(q, q) - ga(p, p)) / (2.0 * apq);
            let t = select(-1.0, 1.0, theta >= 0.0) / (abs(theta) + sqrt(theta * theta + 1.0));
            let c = 1.0 / sqrt(t * t + 1.0);
            cs = vec2<f32>(c, t * c);
          }
          rot = cs;
        }
        sync();
        let cs = rot;
        if (cs.y != 0.0) {
          for (var r = lid; r < n; r += WGu) {
            let ap = ga(r, p); let aq = ga(r, q);
            sa(r, p, cs.x * ap - cs.y * aq); sa(r, q, cs.y * ap + cs.x * aq);
            let vp = gv(r, p); let vq = gv(r, q);
            sv(r, p, cs.x * vp - cs.y * vq); sv(r, q, cs.y * vp + cs.x * vq);
          }
        }
        sync();
        if (cs.y != 0.0) {
          for (var r = lid; r < n; r += WGu) {
            let ap = ga(p, r); let aq = ga(q, r);
            sa(p, r, cs.x * ap - cs.y * aq); sa(q, r, cs.y * ap + cs.x * aq);
          }
        }
        sync();
      }
    }
  }
  store_all(lid, n);
  store_v(lid, n);
}
"""

_SVD = """
// P = [batch, m, n, offset A, offset V]; m >= n. A's columns end orthogonal (A V = U S), V accumulates
@group(0) @binding(1) var<storage, read_write> W: array<f32>;
@group(0) @binding(2) var<storage, read_write> WV: array<f32>;
var<workgroup> red: array<vec3<f32>, WG>;
var<workgroup> rot: vec2<f32>;
var<workgroup> rotated: u32;
{variant}
{main}
  let m = P[1]; let n = P[2];
  base = P[3] + b * m * n; ld = n; vbase = P[4] + b * n * n; vld = n;
  load_all(lid, m);
  for (var t = lid; t < n * n; t += WGu) { sv(t / n, t % n, select(0.0, 1.0, t / n == t % n)); }
  sync();
  for (var sweep = 0u; sweep < MAX_SWEEPSu; sweep++) {
    if (lid == 0u) { rotated = 0u; }
    for (var p = 0u; p + 1u < n; p++) {
      for (var q = p + 1u; q < n; q++) {
        var acc = vec3<f32>(0.0);
        for (var r = lid; r < m; r += WGu) {
          let up = ga(r, p); let uq = ga(r, q); acc += vec3<f32>(up * up, uq * uq, up * uq);
        }
        red[lid] = acc;
        sync();
        if (lid == 0u) {
          var s = vec3<f32>(0.0);
          for (var t = 0u; t < WGu; t++) { s += red[t]; }
          var cs = vec2<f32>(1.0, 0.0);
          if (abs(s.z) > 1.2e-7 * sqrt(s.x * s.y) && s.z != 0.0) {
            let zeta = (s.y - s.x) / (2.0 * s.z);
            let t = select(-1.0, 1.0, zeta >= 0.0) / (abs(zeta) + sqrt(1.0 + zeta * zeta));
            let c = 1.0 / sqrt(1.0 + t * t);
            cs = vec2<f32>(c, c * t);
            rotated = 1u;
          }
          rot = cs;
        }
        sync();
        let cs = rot;
        if (cs.y != 0.0) {
          for (var r = lid; r < m; r += WGu) {
            let up = ga(r, p); let uq = ga(r, q);
            sa(r, p, cs.x * up - cs.y * uq); sa(r, q, cs.y * up + cs.x * uq);
          }
          for (var r = lid; r < n; r += WGu) {
            let vp = gv(r, p); let vq = gv(r, q);
            sv(r, p, cs.x * vp - cs.y * vq); sv(r, q, cs.y * vp + cs.x * vq);
          }
        }
        sync();
      }
    }
    if (workgroupUniformLoad(&rotated) == 0u) { break; }
  }
  store_all(lid, m);
  store_v(lid, n);
}
"""

# ---- invocation-per-column / per-matrix families ------------------------------------------------------

_TRSM = """
// P = [batch * k, n, k, offset T, offset X, offset pivots, flags, T batch stride, T row stride, T col stride,
//      pivots per matrix]
// flags: 1 lower, 2 unit diagonal, 4 interchange rows of X first (pivots in order), 8 interchange last
// (pivots in reverse order), 16 no solve (only the interchanges). X is [batch, n, k]; one invocation per
// column.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> T: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read> PIV: array<i32>;
fn t_at(b: u32, i: u32, j: u32) -> f32 { return T[P[3] + b * P[7] + i * P[8] + j * P[9]]; }
fn swap_rows(xb: u32, k: u32, i: u32, p: u32) {
  if (p != i) { let t = X[xb + i * k]; X[xb + i * k] = X[xb + p * k]; X[xb + p * k] = t; }
}
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let g = gid.x + gid.y * nwg.x * WGu;
  if (g >= P[0]) { return; }
  let n = P[1]; let k = P[2]; let flags = P[6];
  let b = g / k; let c = g % k;
  let xb = P[4] + b * n * k + c;
  if ((flags & 4u) != 0u) {
    for (var i = 0u; i < P[10]; i++) { swap_rows(xb, k, i, u32(PIV[P[5] + b * P[10] + i] - 1)); }
  }
  if ((flags & 16u) != 0u) {
  } else if ((flags & 1u) != 0u) {
    for (var i = 0u; i < n; i++) {
      var s = X[xb + i * k];
      for (var j = 0u; j < i; j++) { s -= t_at(b, i, j) * X[xb + j * k]; }
      if ((flags & 2u) == 0u) { s /= t_at(b, i, i); }
      X[xb + i * k] = s;
    }
  } else {
    for (var ii = 0u; ii < n; ii++) {
      let i = n - 1u - ii;
      var s = X[xb + i * k];
      for (var j = i + 1u; j < n; j++) { s -= t_at(b, i, j) * X[xb + j * k]; }
      if ((flags & 2u) == 0u) { s /= t_at(b, i, i); }
      X[xb + i * k] = s;
    }
  }
  if ((flags & 8u) != 0u) {
    for (var ii = 0u; ii < P[10]; ii++) {
      let i = P[10] - 1u - ii;
      swap_rows(xb, k, i, u32(PIV[P[5] + b * P[10] + i] - 1));
    }
  }
}
"""

_ORGQR = """
// P = [batch * cols, m, nv, k, cols, offset V, offset tau, offset Q]: Q [batch, m, cols] = H_0 .. H_{k-1} I,
// H_j = I - tau_j v_j v_j^T with v_j = (0.., 1, V[j+1.., j]). One invocation per column of Q.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> V: array<f32>;
@group(0) @binding(2) var<storage, read> TAU: array<f32>;
@group(0) @binding(3) var<storage, read_write> Q: array<f32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let g = gid.x + gid.y * nwg.x * WGu;
  if (g >= P[0]) { return; }
  let m = P[1]; let nv = P[2]; let k = P[3]; let cols = P[4];
  let b = g / cols; let c = g % cols;
  let vb = P[5] + b * m * nv; let qb = P[7] + b * m * cols + c;
  for (var i = 0u; i < m; i++) { Q[qb + i * cols] = select(0.0, 1.0, i == c); }
  for (var jj = 0u; jj < k; jj++) {
    let j = k - 1u - jj;
    let tau = TAU[P[6] + b * k + j];
    var w = Q[qb + j * cols];
    for (var i = j + 1u; i < m; i++) { w += V[vb + i * nv + j] * Q[qb + i * cols]; }
    w *= tau;
    Q[qb + j * cols] -= w;
    for (var i = j + 1u; i < m; i++) { Q[qb + i * cols] -= V[vb + i * nv + j] * w; }
  }
}
"""

_LU_DET = """
// P = [batch, n, offset LU, offset pivots]; OUT [batch, 3] = (det, sign, log|det|)
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> LU: array<f32>;
@group(0) @binding(2) var<storage, read> PIV: array<i32>;
@group(0) @binding(3) var<storage, read_write> OUT: array<f32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let b = gid.x + gid.y * nwg.x * WGu;
  if (b >= P[0]) { return; }
  let n = P[1];
  var det = 1.0; var sgn = 1.0; var logabs = 0.0;
  for (var i = 0u; i < n; i++) {
    let d = LU[P[2] + b * n * n + i * n + i];
    let flip = PIV[P[3] + b * n + i] != i32(i + 1u);
    det *= select(d, -d, flip);
    sgn *= select(sign(d), -sign(d), flip);
    logabs += log(abs(d));
  }
  OUT[3u * b] = det; OUT[3u * b + 1u] = sgn; OUT[3u * b + 2u] = logabs;
}
"""

_LDL = """
// P = [batch, n, offset A, offset pivots, offset info]: LAPACK sytf2 (lower) Bunch-Kaufman L D L^T, serial
// per matrix (its pivot choices depend on every previous step). A row-major, A(i, j) with i >= j used.
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> A: array<f32>;
@group(0) @binding(2) var<storage, read_write> PIV: array<i32>;
@group(0) @binding(3) var<storage, read_write> INFO: array<i32>;
var<private> ab: u32;
var<private> an: u32;
fn g(i: u32, j: u32) -> f32 { return A[ab + i * an + j]; }
fn s(i: u32, j: u32, v: f32) { A[ab + i * an + j] = v; }
fn swap(i0: u32, j0: u32, i1: u32, j1: u32) { let t = g(i0, j0); s(i0, j0, g(i1, j1)); s(i1, j1, t); }
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let b = gid.x + gid.y * nwg.x * WGu;
  if (b >= P[0]) { return; }
  let n = P[1]; an = n; ab = P[2] + b * n * n;
  let alpha = (1.0 + sqrt(17.0)) / 8.0;
  var info = 0i;
  var k = 0u;
  while (k < n) {
    var kstep = 1u;
    let absakk = abs(g(k, k));
    var imax = k; var colmax = 0.0;
    for (var i = k + 1u; i < n; i++) { let v = abs(g(i, k)); if (v > colmax) { colmax = v; imax = i; } }
    var kp = k;
    if (max(absakk, colmax) == 0.0 || absakk != absakk) {
      if (info == 0i) { info = i32(k + 1u); }
    } else if (absakk < alpha * colmax) {
      var rowmax = 0.0;
      for (var j = k; j < imax; j++) { rowmax = max(rowmax, abs(g(imax, j))); }
      for (var i = imax + 1u; i < n; i++) { rowmax = max(rowmax, abs(g(i, imax))); }
      if (absakk >= alpha * colmax * (colmax / rowmax)) {
        kp = k;
      } else if (abs(g(imax, imax)) >= alpha * rowmax) {
        kp = imax;
      } else {
        kp = imax; kstep = 2u;
      }
    }
    let kk = k + kstep - 1u;
    if (kp != kk) {
      for (var i = kp + 1u; i < n; i++) { swap(i, kk, i, kp); }
      for (var j = kk + 1u; j < kp; j++) { swap(j, kk, kp, j); }
      swap(kk, kk, kp, kp);
      if (kstep == 2u) { swap(k + 1u, k, kp, k); }
    }
    if (kstep == 1u) {
      if (k + 1u < n && g(k, k) != 0.0) {
        let d11 = 1.0 / g(k, k);
        for (var j = k + 1u; j < n; j++) {
          let xj = g(j, k);
          for (var i = j; i < n; i++) { s(i, j, g(i, j) - d11 * g(i, k) * xj); }
        }
        for (var i = k + 1u; i < n; i++) { s(i, k, g(i, k) * d11); }
      }
      PIV[P[3] + b * n + k] = i32(kp + 1u);
    } else {
      if (k + 2u < n) {
        var d21 = g(k + 1u, k);
        let d11 = g(k + 1u, k + 1u) / d21;
        let d22 = g(k, k) / d21;
        let t = 1.0 / (d11 * d22 - 1.0);
        d21 = t / d21;
        for (var j = k + 2u; j < n; j++) {
          let wk = d21 * (d11 * g(j, k) - g(j, k + 1u));
          let wkp1 = d21 * (d22 * g(j, k + 1u) - g(j, k));
          for (var i = j; i < n; i++) { s(i, j, g(i, j) - g(i, k) * wk - g(i, k + 1u) * wkp1); }
          s(j, k, wk); s(j, k + 1u, wkp1);
        }
      }
      PIV[P[3] + b * n + k] = -i32(kp + 1u);
      PIV[P[3] + b * n + k + 1u] = -i32(kp + 1u);
    }
    k += kstep;
  }
  for (var i = 0u; i < n; i++) { for (var j = i + 1u; j < n; j++) { s(i, j, 0.0); } }
  INFO[P[4] + b] = info;
}
"""

_LDL_SOLVE = """
// P = [batch * k, n, k, offset LD, offset X, offset pivots]: LAPACK sytrs (lower), one invocation per column
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> LD: array<f32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read> PIV: array<i32>;
var<private> lb: u32;
var<private> ln: u32;
var<private> xb: u32;
var<private> xk: u32;
fn a(i: u32, j: u32) -> f32 { return LD[lb + i * ln + j]; }
fn x(i: u32) -> f32 { return X[xb + i * xk]; }
fn sx(i: u32, v: f32) { X[xb + i * xk] = v; }
fn swap(i: u32, p: u32) { if (i != p) { let t = x(i); sx(i, x(p)); sx(p, t); } }
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let g = gid.x + gid.y * nwg.x * WGu;
  if (g >= P[0]) { return; }
  let n = P[1]; let kc = P[2];
  let b = g / kc; let c = g % kc;
  ln = n; lb = P[3] + b * n * n; xk = kc; xb = P[4] + b * n * kc + c;
  let pb = P[5] + b * n;
  var k = 0u;
  while (k < n) {  // L D y = P^T b
    let pv = PIV[pb + k];
    if (pv > 0) {
      swap(k, u32(pv - 1));
      for (var i = k + 1u; i < n; i++) { sx(i, x(i) - a(i, k) * x(k)); }
      sx(k, x(k) / a(k, k));
      k += 1u;
    } else {
      swap(k + 1u, u32(-pv - 1));
      for (var i = k + 2u; i < n; i++) { sx(i, x(i) - a(i, k) * x(k) - a(i, k + 1u) * x(k + 1u)); }
      let akm1k = a(k + 1u, k);
      let akm1 = a(k, k) / akm1k; let ak = a(k + 1u, k + 1u) / akm1k;
      let denom = akm1 * ak - 1.0;
      let bkm1 = x(k) / akm1k; let bk = x(k + 1u) / akm1k;
      sx(k, (ak * bkm1 - bk) / denom); sx(k + 1u, (akm1 * bk - bkm1) / denom);
      k += 2u;
    }
  }
  var kk = i32(n) - 1;
  while (kk >= 0) {  // L^T x = y, then the interchanges back
    let k1 = u32(kk);
    let pv = PIV[pb + k1];
    var sum = 0.0;
    for (var i = k1 + 1u; i < n; i++) { sum += a(i, k1) * x(i); }
    sx(k1, x(k1) - sum);
    if (pv > 0) {
      swap(k1, u32(pv - 1));
      kk -= 1;
    } else {
      var sum2 = 0.0;
      for (var i = k1 + 1u; i < n; i++) { sum2 += a(i, k1 - 1u) * x(i); }
      sx(k1 - 1u, x(k1 - 1u) - sum2);
      swap(k1, u32(-pv - 1));
      kk -= 2;
    }
  }
}
"""

_WORKGROUP_FAMILIES = {"lu": _LU, "cholesky": _CHOLESKY, "geqrf": _GEQRF, "eigh": _EIGH, "svd": _SVD}
_INVOCATION_FAMILIES = {"trsm": _TRSM, "orgqr": _ORGQR, "lu_det": _LU_DET, "ldl": _LDL,
                        "ldl_solve": _LDL_SOLVE}


def fits_local(rows: int, cols: int) -> bool:
    """True if a rows x cols matrix fits the workgroup-memory variant."""
    return rows <= LOCAL_DIM and cols <= LOCAL_DIM


def wgsl(family: str, local: bool = True) -> str:
    """The WGSL of one family (and, for workgroup-per-matrix families, one variant)."""
    if family in _INVOCATION_FAMILIES:
        return _INVOCATION_FAMILIES[family].replace("WGu", f"{WG}u").replace("WG)", f"{WG})")
    body = _WORKGROUP_FAMILIES[family]
    source = _HEADER + body.replace("{variant}", _LOCAL if local else _GLOBAL).replace("{main}", _MAIN)
    return (source.replace("MAX_SWEEPSu", f"{MAX_SWEEPS}u").replace("WGu", f"{WG}u")
            .replace("array<f32, WG>", f"array<f32, {WG}>").replace("array<vec3<f32>, WG>",
                                                                      f"array<vec3<f32>, {WG}>"))


def kernel(family: str, local: bool = True) -> Kernel:
    """The compiled pipeline of one family/variant (built once per content)."""
    variant = "" if family in _INVOCATION_FAMILIES else ("_local" if local else "_global")
    return get_runtime().kernel(wgsl(family, local), label=f"linalg_{family}{variant}")
