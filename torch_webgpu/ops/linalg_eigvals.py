"""torch.linalg.eigvals of batched real float32 matrices on the device: complex64 eigenvalues.

One invocation per matrix (the algorithm is serial: each step's shifts depend on the last): Gaussian
elimination with pivoting to upper Hessenberg form (EISPACK elmhes), then Francis double-shift QR
iterations (EISPACK hqr) until every 1x1 / 2x2 diagonal block has deflated; a 2x2 block gives a complex
pair. Eigenvalues come in the order the blocks sit on the diagonal, which need not be LAPACK's order (torch
documents none).

linalg.eig adds the eigenvectors by inverse iteration, one invocation per (matrix, eigenvalue): two complex
solves with (A - (w + d) I), LU with partial pivoting in a scratch matrix, d a tiny shift that keeps the
factorisation finite. Each vector is normalised as LAPACK's geev does: unit 2-norm, its largest component
real and positive. (Real eigenvectors are unique only up to sign, complex ones up to phase before that rule.)
"""

from __future__ import annotations

import torch

from ..runtime import get_runtime
from .codegen.elementwise import grid
from .codegen.operand import pack_u32
from .linalg_batch import bind, check_matrix, offset, work_copy
from .out_args import write_out
from .registry import register
from .tensor_buffers import new_empty

MAX_DIM = 128  # one invocation does O(n^3) serial work per matrix
MAX_EIG_DIM = 64  # linalg.eig: an n x n complex scratch matrix per eigenvalue
MAX_ITERATIONS = 60  # QR sweeps per eigenvalue before giving up (NaN); ~2-4 are typical

_HQR = """
// P = [batch, n, offset A, offset W]: A row-major [n, n] working copies; W [n, 2] (real, imag) per matrix
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> A: array<f32>;
@group(0) @binding(2) var<storage, read_write> W: array<f32>;
var<private> ab: u32;
var<private> an: u32;
fn g(i: i32, j: i32) -> f32 { return A[ab + u32(i) * an + u32(j)]; }
fn s(i: i32, j: i32, v: f32) { A[ab + u32(i) * an + u32(j)] = v; }
fn sgn(a: f32, b: f32) -> f32 { return select(-abs(a), abs(a), b >= 0.0); }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let b = gid.x + gid.y * nwg.x * 64u;
  if (b >= P[0]) { return; }
  an = P[1]; ab = P[2] + b * an * an;
  let n = i32(an);
  let wb = P[3] + b * an * 2u;
  // ---- elmhes: A -> upper Hessenberg by stabilised elementary similarity transforms
  for (var m = 1; m < n - 1; m++) {
    var x = 0.0; var piv = m;
    for (var j = m; j < n; j++) { if (abs(g(j, m - 1)) > abs(x)) { x = g(j, m - 1); piv = j; } }
    if (piv != m) {
      for (var j = m - 1; j < n; j++) { let t = g(piv, j); s(piv, j, g(m, j)); s(m, j, t); }
      for (var j = 0; j < n; j++) { let t = g(j, piv); s(j, piv, g(j, m)); s(j, m, t); }
    }
    if (x != 0.0) {
      for (var i = m + 1; i < n; i++) {
        var y = g(i, m - 1);
        if (y != 0.0) {
          y = y / x;
          s(i, m - 1, 0.0);
          for (var j = m; j < n; j++) { s(i, j, g(i, j) - y * g(m, j)); }
          for (var j = 0; j < n; j++) { s(j, m, g(j, m) + y * g(j, i)); }
        }
      }
    }
  }
  // ---- hqr: Francis double-shift QR on the Hessenberg matrix
  var anorm = 0.0;
  for (var i = 0; i < n; i++) { for (var j = max(i - 1, 0); j < n; j++) { anorm += abs(g(i, j)); } }
  var nn = n - 1; var t = 0.0;
  var x = 0.0; var y = 0.0; var z = 0.0; var w = 0.0; var p = 0.0; var q = 0.0; var r = 0.0;
  var failed = false;
  while (nn >= 0 && !failed) {
    var its = 0;
    var l = 0;
    loop {
      l = 0;
      for (var ll = nn; ll >= 1; ll--) {
        var sc = abs(g(ll - 1, ll - 1)) + abs(g(ll, ll));
        if (sc == 0.0) { sc = anorm; }
        if (abs(g(ll, ll - 1)) + sc == sc) { s(ll, ll - 1, 0.0); l = ll; break; }
      }
      x = g(nn, nn);
      if (l == nn) {            // one real root
        W[wb + 2u * u32(nn)] = x + t; W[wb + 2u * u32(nn) + 1u] = 0.0;
        nn -= 1;
      } else {
        y = g(nn - 1, nn - 1); w = g(nn, nn - 1) * g(nn - 1, nn);
        if (l == nn - 1) {      // a 2x2 block: two real roots or a complex pair
          p = 0.5 * (y - x); q = p * p + w; z = sqrt(abs(q)); x += t;
          let k0 = wb + 2u * u32(nn - 1); let k1 = wb + 2u * u32(nn);
          if (q >= 0.0) {
            z = p + sgn(z, p);
            W[k0] = x + z; W[k1] = x + z;
            if (z != 0.0) { W[k1] = x - w / z; }
            W[k0 + 1u] = 0.0; W[k1 + 1u] = 0.0;
          } else {
            W[k0] = x + p; W[k1] = x + p; W[k0 + 1u] = z; W[k1 + 1u] = -z;
          }
          nn -= 2;
        } else {
          if (its == MAX_ITERATIONS) { failed = true; break; }
          if (its == 10 || its == 20) {   // exceptional shift
            t += x;
            for (var i = 0; i <= nn; i++) { s(i, i, g(i, i) - x); }
            let sc = abs(g(nn, nn - 1)) + abs(g(nn - 1, nn - 2));
            x = 0.75 * sc; y = x; w = -0.4375 * sc * sc;
          }
          its += 1;
          var m = nn - 2;
          loop {
            z = g(m, m); r = x - z; let sm = y - z;
            p = (r * sm - w) / g(m + 1, m) + g(m, m + 1);
            q = g(m + 1, m + 1) - z - r - sm; r = g(m + 2, m + 1);
            let sc = abs(p) + abs(q) + abs(r);
            p /= sc; q /= sc; r /= sc;
            if (m == l) { break; }
            let u = abs(g(m, m - 1)) * (abs(q) + abs(r));
            let v = abs(p) * (abs(g(m - 1, m - 1)) + abs(z) + abs(g(m + 1, m + 1)));
            if (u + v == v) { break; }
            m -= 1;
          }
          for (var i = m + 2; i <= nn; i++) { s(i, i - 2, 0.0); if (i != m + 2) { s(i, i - 3, 0.0); } }
          for (var k = m; k <= nn - 1; k++) {
            if (k != m) {
              p = g(k, k - 1); q = g(k + 1, k - 1); r = 0.0;
              if (k != nn - 1) { r = g(k + 2, k - 1); }
              x = abs(p) + abs(q) + abs(r);
              if (x != 0.0) { p /= x; q /= x; r /= x; }
            }
            let sc = sgn(sqrt(p * p + q * q + r * r), p);
            if (sc != 0.0) {
              if (k == m) { if (l != m) { s(k, k - 1, -g(k, k - 1)); } } else { s(k, k - 1, -sc * x); }
              p += sc; x = p / sc; y = q / sc; z = r / sc; q /= p; r /= p;
              for (var j = k; j <= nn; j++) {
                p = g(k, j) + q * g(k + 1, j);
                if (k != nn - 1) { p += r * g(k + 2, j); s(k + 2, j, g(k + 2, j) - p * z); }
                s(k + 1, j, g(k + 1, j) - p * y); s(k, j, g(k, j) - p * x);
              }
              let mmin = min(nn, k + 3);
              for (var i = l; i <= mmin; i++) {
                p = x * g(i, k) + y * g(i, k + 1);
                if (k != nn - 1) { p += z * g(i, k + 2); s(i, k + 2, g(i, k + 2) - p * r); }
                s(i, k + 1, g(i, k + 1) - p * q); s(i, k, g(i, k) - p);
              }
            }
          }
        }
      }
      if (!(l < nn - 1)) { break; }
    }
  }
  if (failed) {   // no convergence: the eigenvalues not found yet are NaN
    var bits = 0x7fc00000u; let nan = bitcast<f32>(bits);
    for (var i = 0; i <= nn; i++) { W[wb + 2u * u32(i)] = nan; W[wb + 2u * u32(i) + 1u] = nan; }
  }
}
""".replace("MAX_ITERATIONS", str(MAX_ITERATIONS))


def eigvals(A: torch.Tensor) -> torch.Tensor:
    """complex64 eigenvalues [..., n] of real float32 square matrices A [..., n, n]."""
    check_matrix("torch.linalg.eigvals", A)
    n = A.shape[-1]
    if n > MAX_DIM:
        raise NotImplementedError(f"webgpu: torch.linalg.eigvals on {n}x{n} matrices: the device kernel (one "
                                  f"invocation per matrix) handles dimensions up to {MAX_DIM}")
    work = work_copy(A)
    batch = work.shape[0]
    pairs = new_empty((batch, n, 2), torch.float32, A)
    if batch and n:
        rt = get_runtime()
        words = [batch, n, offset(work), offset(pairs)]
        bindings = [rt.constant(pack_u32(words)), bind(work)[0], bind(pairs)[0]]
        rt.dispatch(rt.kernel(_HQR, label="linalg_eigvals"), bindings, grid(batch, 64),
                    label="linalg_eigvals")
    return torch.view_as_complex(pairs).reshape(*A.shape[:-1])


@register("_linalg_eigvals", planned=False)
def linalg_eigvals(self):
    """torch.linalg.eigvals (no autograd): Hessenberg reduction and Francis double-shift QR."""
    return eigvals(self)


_EIGVEC = """
// P = [batch * n, n, offset A, offset W, offset V, offset S]: A [n, n] real; W [n, 2]; V [n, n, 2] (row i,
// column k = eigenvector k); S scratch [n, n, 2] per invocation
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> W: array<f32>;
@group(0) @binding(3) var<storage, read_write> V: array<f32>;
@group(0) @binding(4) var<storage, read_write> S: array<f32>;
var<private> sb: u32;
var<private> nn: u32;
fn gm(i: u32, j: u32) -> vec2<f32> { let o = sb + 2u * (i * nn + j); return vec2<f32>(S[o], S[o + 1u]); }
fn sm(i: u32, j: u32, v: vec2<f32>) { let o = sb + 2u * (i * nn + j); S[o] = v.x; S[o + 1u] = v.y; }
fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
fn cdiv(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  // Smith's division (no overflow of |b|^2)
  if (abs(b.x) >= abs(b.y)) {
    let r = b.y / b.x; let d = b.x + b.y * r;
    return vec2<f32>((a.x + a.y * r) / d, (a.y - a.x * r) / d);
  }
  let r = b.x / b.y; let d = b.x * r + b.y;
  return vec2<f32>((a.x * r + a.y) / d, (a.y * r - a.x) / d);
}
fn cabs1(a: vec2<f32>) -> f32 { return abs(a.x) + abs(a.y); }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = gid.x + gid.y * nwg.x * 64u;
  if (t >= P[0]) { return; }
  let n = P[1]; nn = n;
  let b = t / n; let k = t % n;
  let ab = P[2] + b * n * n;
  let vb = P[4] + b * n * n * 2u;
  sb = P[5] + t * n * n * 2u;
  var norm = 0.0;
  for (var i = 0u; i < n * n; i++) { norm = max(norm, abs(A[ab + i])); }
  norm = max(norm, 1e-30);
  // the shift d: large enough that the pivots stay finite, far below the eigenvalue gaps f32 resolves
  let lam = vec2<f32>(W[P[3] + 2u * t] + norm * 1e-6, W[P[3] + 2u * t + 1u]);
  for (var i = 0u; i < n; i++) {
    for (var j = 0u; j < n; j++) {
      var v = vec2<f32>(A[ab + i * n + j], 0.0);
      if (i == j) { v = v - lam; }
      sm(i, j, v);
    }
  }
  // LU with partial pivoting, the row interchanges applied to the right-hand side as they happen: the
  // right-hand side lives in V's column k
  for (var i = 0u; i < n; i++) { V[vb + 2u * (i * n + k)] = 1.0; V[vb + 2u * (i * n + k) + 1u] = 0.0; }
  var perm: array<u32, MAX_EIG_DIM>;
  for (var c = 0u; c < n; c++) {
    var piv = c; var best = cabs1(gm(c, c));
    for (var i = c + 1u; i < n; i++) { let m = cabs1(gm(i, c)); if (m > best) { best = m; piv = i; } }
    perm[c] = piv;
    if (piv != c) { for (var j = 0u; j < n; j++) { let x = gm(c, j); sm(c, j, gm(piv, j)); sm(piv, j, x); } }
    if (best == 0.0) { sm(c, c, vec2<f32>(norm * 1e-7, 0.0)); }
    let d = gm(c, c);
    for (var i = c + 1u; i < n; i++) {
      let f = cdiv(gm(i, c), d);
      sm(i, c, f);
      for (var j = c + 1u; j < n; j++) { sm(i, j, gm(i, j) - cmul(f, gm(c, j))); }
    }
  }
  for (var it = 0u; it < 2u; it++) {
    var x: array<vec2<f32>, MAX_EIG_DIM>;
    for (var i = 0u; i < n; i++) {
      x[i] = vec2<f32>(V[vb + 2u * (i * n + k)], V[vb + 2u * (i * n + k) + 1u]);
    }
    for (var c = 0u; c < n; c++) { let p = perm[c]; if (p != c) { let y = x[c]; x[c] = x[p]; x[p] = y; } }
    for (var i = 1u; i < n; i++) { for (var j = 0u; j < i; j++) { x[i] = x[i] - cmul(gm(i, j), x[j]); } }
    for (var ii = 0u; ii < n; ii++) {
      let i = n - 1u - ii;
      for (var j = i + 1u; j < n; j++) { x[i] = x[i] - cmul(gm(i, j), x[j]); }
      x[i] = cdiv(x[i], gm(i, i));
    }
    // normalise: unit 2-norm, the largest component real and positive (LAPACK geev's convention)
    var big = 0u; var bigv = -1.0; var ss = 0.0;
    for (var i = 0u; i < n; i++) { let m = dot(x[i], x[i]); ss += m; if (m > bigv) { bigv = m; big = i; } }
    let phase = x[big] / sqrt(bigv);
    let scale = vec2<f32>(phase.x, -phase.y) / sqrt(ss);
    for (var i = 0u; i < n; i++) {
      let y = cmul(x[i], scale);
      V[vb + 2u * (i * n + k)] = y.x; V[vb + 2u * (i * n + k) + 1u] = select(y.y, 0.0, i == big);
    }
  }
}
""".replace("MAX_EIG_DIM", str(MAX_EIG_DIM))


def eig(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(complex64 eigenvalues [..., n], complex64 eigenvectors [..., n, n]) of real float32 matrices A."""
    check_matrix("torch.linalg.eig", A)
    n = A.shape[-1]
    if n > MAX_EIG_DIM:
        raise NotImplementedError(f"webgpu: torch.linalg.eig on {n}x{n} matrices: the device kernel handles "
                                  f"dimensions up to {MAX_EIG_DIM} (torch.linalg.eigvals: {MAX_DIM})")
    w = eigvals(A)
    original = work_copy(A)
    batch = original.shape[0]
    pairs = torch.view_as_real(w.reshape(batch, n)).contiguous()
    vectors = new_empty((batch, n, n, 2), torch.float32, A)
    if batch and n:
        scratch = new_empty((batch * n * n * n * 2,), torch.float32, A)
        rt = get_runtime()
        words = [batch * n, n, offset(original), offset(pairs), offset(vectors), offset(scratch)]
        bindings = [rt.constant(pack_u32(words)), *(bind(t)[0] for t in (original, pairs, vectors, scratch))]
        rt.dispatch(rt.kernel(_EIGVEC, label="linalg_eig_vectors"), bindings, grid(batch * n, 64),
                 label="linalg_eig_vectors")
    return w, torch.view_as_complex(vectors).reshape(*A.shape[:-2], n, n)


@register("linalg_eig", planned=False)
def linalg_eig(self):
    """torch.linalg.eig: eigenvalues by Francis QR, eigenvectors by inverse iteration (LAPACK's scaling)."""
    return eig(self)


@register("linalg_eig.out", planned=False)
def linalg_eig_out(self, *, eigenvalues, eigenvectors):
    """torch.linalg.eig(out=)."""
    w, v = eig(self)
    return write_out(eigenvalues, w), write_out(eigenvectors, v)
