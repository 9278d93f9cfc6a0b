"""WGSL helper functions the op formulas use where WGSL lacks a builtin or its builtin is too loose.

Helpers are written for f32 and chosen to match torch CPU within float32 tolerances (e.g. erf uses a
series near zero and a rational erfc elsewhere; expm1/log1p use the classic cancellation-free forms;
sin/cos/tan reduce their argument exactly (Payne-Hanek in u32 arithmetic) before a polynomial, since
WGSL bounds the builtins' error only on [-pi, pi] and drivers lose all accuracy for large arguments).
Eager elementwise shaders carry the whole PRELUDE; a library kernel takes only the functions its
expressions reach (`kernels.wgsl.functions_for`), so a fused epilogue computes what the eager op does.
"""

from __future__ import annotations

PRELUDE = r"""
fn isnan_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isinf_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn isfinite_(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }
fn nan_() -> f32 { var u = 0x7fc00000u; return bitcast<f32>(u); }
fn inf_() -> f32 { var u = 0x7f800000u; return bitcast<f32>(u); }
fn signbit_(x: f32) -> bool { return (bitcast<u32>(x) & 0x80000000u) != 0u; }
fn copysign_(x: f32, y: f32) -> f32 {
  return bitcast<f32>((bitcast<u32>(x) & 0x7fffffffu) | (bitcast<u32>(y) & 0x80000000u));
}
fn bf16_bits(v: f32) -> u32 {
  if (isnan_(v)) { return 0x7fc0u; }
  let b = bitcast<u32>(v);
  return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
fn min_(a: f32, b: f32) -> f32 { if (isnan_(a) || isnan_(b)) { return nan_(); } return select(b, a, a < b); }
fn max_(a: f32, b: f32) -> f32 { if (isnan_(a) || isnan_(b)) { return nan_(); } return select(b, a, a > b); }
fn fmin_(a: f32, b: f32) -> f32 {
  if (isnan_(a)) { return b; } if (isnan_(b)) { return a; } return min(a, b);
}
fn fmax_(a: f32, b: f32) -> f32 {
  if (isnan_(a)) { return b; } if (isnan_(b)) { return a; } return max(a, b);
}
fn expm1_(x: f32) -> f32 {
  let u = exp(x);
  if (u == 1.0) { return x; }
  let um1 = u - 1.0;
  if (um1 == -1.0) { return -1.0; }
  if (isinf_(u) || isnan_(x)) { return u; }
  return um1 * x / log(u);
}
fn log1p_(x: f32) -> f32 {
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  if (isinf_(u) || isnan_(x)) { return log(u); }
  return log(u) * x / (u - 1.0);
}
fn tanh_(x: f32) -> f32 {
  if (isnan_(x)) { return x; }
  let t = expm1_(-2.0 * abs(x));
  return copysign_(-t / (2.0 + t), x);
}
fn sigmoid_(x: f32) -> f32 {
  if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
  let e = exp(x);
  return e / (1.0 + e);
}
fn softplus_(x: f32, beta: f32, threshold: f32) -> f32 {
  if (x * beta > threshold) { return x; }
  return log1p_(exp(x * beta)) / beta;
}
fn erfc_pos(z: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.5 * z);
  return t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
      + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
}
fn erf_(x: f32) -> f32 {
  if (isnan_(x)) { return x; }
  let z = abs(x);
  if (z < 0.5) {
    let x2 = x * x;
    return 1.1283791670955126 * x * (1.0 + x2 * (-0.3333333333 + x2 * (0.1 + x2 * (-0.0238095238
        + x2 * (0.0046296296 + x2 * (-0.0007575758 + x2 * 0.0001068376))))));
  }
  return copysign_(1.0 - erfc_pos(z), x);
}
fn erfc_(x: f32) -> f32 {
  if (isnan_(x)) { return x; }
  if (abs(x) < 0.5) { return 1.0 - erf_(x); }
  if (x > 0.0) { return erfc_pos(x); }
  return 2.0 - erfc_pos(-x);
}
fn erfinv_(x: f32) -> f32 {
  if (abs(x) > 1.0 || isnan_(x)) { return nan_(); }
  if (x == 1.0) { return inf_(); }
  if (x == -1.0) { return -inf_(); }
  var w = -log((1.0 - x) * (1.0 + x));
  var p: f32;
  if (w < 5.0) {
    w = w - 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w; p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w; p = 2.83297682 + p * w;
  }
  var y = p * x;
  // one Newton step on erf(y) = x sharpens the f32 result
  y = y - (erf_(y) - x) / (1.1283791670955126 * exp(-y * y));
  return y;
}
fn is_odd_int(b: f32) -> bool { let h = b * 0.5; return abs(b) < 16777216.0 && trunc(h) != h; }
fn powi_(a: f32, n: u32) -> f32 {
  var r = 1.0; var base = a; var e = n;
  loop { if (e == 0u) { break; } if ((e & 1u) == 1u) { r = r * base; } base = base * base; e = e >> 1u; }
  return r;
}
fn pow_(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (a == 1.0) { return 1.0; }
  if (isnan_(a) || isnan_(b)) { return nan_(); }
  if (b == 1.0) { return a; }
  if (b == 2.0) { return a * a; }
  if (b == 0.5 && a >= 0.0) { return sqrt(a); }
  if (trunc(b) == b && abs(b) <= 64.0) {
    let r = powi_(a, u32(abs(b)));
    return select(r, 1.0 / r, b < 0.0);
  }
  if (a == 0.0) {
    if (b > 0.0) { return select(0.0, a, is_odd_int(b)); }
    return select(inf_(), copysign_(inf_(), a), is_odd_int(b));
  }
  if (isinf_(b)) {
    if (abs(a) == 1.0) { return 1.0; }
    return select(0.0, inf_(), (abs(a) > 1.0) == (b > 0.0));
  }
  let r = exp2(b * log2(abs(a)));
  if (a < 0.0) {
    if (trunc(b) != b) { return nan_(); }
    if (is_odd_int(b)) { return -r; }
  }
  return r;
}
fn pow_i(a: i32, b: i32) -> i32 {
  if (b < 0) { if (a == 1) { return 1; } if (a == -1) { return select(1, -1, (b & 1) == 1); } return 0; }
  var r = 1; var base = a; var e = u32(b);
  loop { if (e == 0u) { break; } if ((e & 1u) == 1u) { r = r * base; } base = base * base; e = e >> 1u; }
  return r;
}
fn fmod_(a: f32, b: f32) -> f32 { return a - b * trunc(a / b); }
fn remainder_(a: f32, b: f32) -> f32 {
  var r = fmod_(a, b);
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) { r = r + b; }
  return r;
}
fn floor_div_(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return a / b; }
  let m = fmod_(a, b);
  var d = (a - m) / b;
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { d = d - 1.0; }
  if (d == 0.0) { return copysign_(0.0, a / b); }
  var f = floor(d);
  if (d - f > 0.5) { f = f + 1.0; }
  return f;
}
fn floor_div_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  var q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) { q = q - 1; }
  return q;
}
fn remainder_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  var r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) { r = r + b; }
  return r;
}
fn fmod_i(a: i32, b: i32) -> i32 { if (b == 0) { return 0; } return a % b; }
fn trunc_div_i(a: i32, b: i32) -> i32 { if (b == 0) { return 0; } return a / b; }
fn sign_(x: f32) -> f32 { if (isnan_(x)) { return 0.0; } return sign(x); }
fn lerp_(a: f32, b: f32, w: f32) -> f32 {
  if (abs(w) < 0.5) { return a + w * (b - a); }
  return b - (b - a) * (1.0 - w);
}
fn gelu_(x: f32) -> f32 { return 0.5 * x * (1.0 + erf_(x * 0.7071067811865476)); }
fn gelu_tanh_(x: f32) -> f32 {
  return 0.5 * x * (1.0 + tanh_(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
fn gelu_backward_(g: f32, x: f32) -> f32 {
  let cdf = 0.5 * (1.0 + erf_(x * 0.7071067811865476));
  let pdf = exp(-0.5 * x * x) * 0.3989422804014327;
  return g * (cdf + x * pdf);
}
fn gelu_tanh_backward_(g: f32, x: f32) -> f32 {
  let k = 0.7978845608028654;
  let inner = k * (x + 0.044715 * x * x * x);
  let t = tanh_(inner);
  let left = 0.5 * x;
  let right = 1.0 + t;
  let dinner = k * (1.0 + 3.0 * 0.044715 * x * x);
  return g * (0.5 * right + left * (1.0 - t * t) * dinner);
}
fn xlogy_(x: f32, y: f32) -> f32 {
  if (isnan_(y)) { return y; }
  if (x == 0.0) { return 0.0; }
  return x * log(y);
}
fn logaddexp_(a: f32, b: f32) -> f32 {
  if (isinf_(a) && a == b) { return a; }
  let m = max_(a, b);
  return m + log1p_(exp(-abs(a - b)));
}
fn logaddexp2_(a: f32, b: f32) -> f32 {
  if (isinf_(a) && a == b) { return a; }
  let m = max_(a, b);
  return m + log1p_(exp2(-abs(a - b))) * 1.4426950408889634;
}
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn neg64(a: vec2<u32>) -> vec2<u32> { return add64(~a, vec2<u32>(1u, 0u)); }
fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return add64(a, neg64(b)); }
fn mulhi32(a: u32, b: u32) -> u32 {
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x * b.x, mulhi32(a.x, b.x) + a.x * b.y + a.y * b.x);
}
fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool {
  if (a.y != b.y) { return bitcast<i32>(a.y) < bitcast<i32>(b.y); }
  return a.x < b.x;
}
fn eq64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }
fn max64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(a, b, lt64(a, b)); }
fn min64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return select(b, a, lt64(a, b)); }
fn abs64(a: vec2<u32>) -> vec2<u32> { return select(a, neg64(a), bitcast<i32>(a.y) < 0); }
struct DivMod64 { q: vec2<u32>, r: vec2<u32> }
fn ult64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.y < b.y || (a.y == b.y && a.x < b.x); }
// unsigned 64-bit quotient and remainder by shift-subtract (b != 0); one u32 division when both fit
fn udivmod64(a: vec2<u32>, b: vec2<u32>) -> DivMod64 {
  if (a.y == 0u && b.y == 0u) { return DivMod64(vec2<u32>(a.x / b.x, 0u), vec2<u32>(a.x % b.x, 0u)); }
  var q = vec2<u32>(0u, 0u); var r = vec2<u32>(0u, 0u);
  for (var i = 63; i >= 0; i--) {
    let w = select(a.x, a.y, i >= 32);
    let bit = (w >> (u32(i) & 31u)) & 1u;
    r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
    if (!ult64(r, b)) {
      r = sub64(r, b);
      if (i >= 32) { q.y = q.y | (1u << (u32(i) - 32u)); } else { q.x = q.x | (1u << u32(i)); }
    }
  }
  return DivMod64(q, r);
}
fn neg64_if(a: vec2<u32>, c: bool) -> vec2<u32> { return select(a, neg64(a), c); }
// signed division truncating toward zero: (quotient, remainder with the dividend's sign); b == 0 gives 0
fn tdivmod64(a: vec2<u32>, b: vec2<u32>) -> DivMod64 {
  if (b.x == 0u && b.y == 0u) { return DivMod64(vec2<u32>(0u, 0u), vec2<u32>(0u, 0u)); }
  let na = bitcast<i32>(a.y) < 0; let nb = bitcast<i32>(b.y) < 0;
  let u = udivmod64(abs64(a), abs64(b));
  return DivMod64(neg64_if(u.q, na != nb), neg64_if(u.r, na));
}
fn trunc_div64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return tdivmod64(a, b).q; }
fn fmod64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return tdivmod64(a, b).r; }
fn floor_div64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let d = tdivmod64(a, b);
  let fix = (d.r.x != 0u || d.r.y != 0u) && ((bitcast<i32>(d.r.y) < 0) != (bitcast<i32>(b.y) < 0));
  return select(d.q, sub64(d.q, vec2<u32>(1u, 0u)), fix);
}
fn remainder64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let r = tdivmod64(a, b).r;
  let fix = (r.x != 0u || r.y != 0u) && ((bitcast<i32>(r.y) < 0) != (bitcast<i32>(b.y) < 0));
  return select(r, add64(r, b), fix);
}
fn pow64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  // integer power by squaring (wraps like torch's int64); negative exponents as torch: 1, +-1 or 0
  let one = vec2<u32>(1u, 0u);
  if (bitcast<i32>(b.y) < 0) {
    if (eq64(a, one)) { return one; }
    if (a.x == 0xffffffffu && a.y == 0xffffffffu) { return select(one, a, (b.x & 1u) == 1u); }
    return vec2<u32>(0u, 0u);
  }
  var r = one; var base = a; var e = b;
  loop {
    if (e.x == 0u && e.y == 0u) { break; }
    if ((e.x & 1u) == 1u) { r = mul64(r, base); }
    base = mul64(base, base);
    e = vec2<u32>((e.x >> 1u) | (e.y << 31u), e.y >> 1u);
  }
  return r;
}
fn shl64(a: vec2<u32>, s: vec2<u32>) -> vec2<u32> {
  // a << s; shifts past 63 (or negative) give 0, as torch's CPU kernel
  if (s.y != 0u || s.x >= 64u) { return vec2<u32>(0u, 0u); }
  let n = s.x;
  if (n == 0u) { return a; }
  if (n >= 32u) { return vec2<u32>(0u, a.x << (n - 32u)); }
  return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}
fn shr64(a: vec2<u32>, s: vec2<u32>) -> vec2<u32> {
  // arithmetic a >> s; shifts past 63 (or negative) fill with the sign, as torch's CPU kernel
  let sign = select(0u, 0xffffffffu, bitcast<i32>(a.y) < 0);
  if (s.y != 0u || s.x >= 64u) { return vec2<u32>(sign, sign); }
  let n = s.x;
  if (n == 0u) { return a; }
  if (n >= 32u) { return vec2<u32>(bitcast<u32>(bitcast<i32>(a.y) >> (n - 32u)), sign); }
  return vec2<u32>((a.x >> n) | (a.y << (32u - n)), bitcast<u32>(bitcast<i32>(a.y) >> n));
}
fn i64_to_f32(a: vec2<u32>) -> f32 {
  let neg = bitcast<i32>(a.y) < 0;
  let m = select(a, neg64(a), neg);
  let r = f32(m.y) * 4294967296.0 + f32(m.x);
  return select(r, -r, neg);
}
fn f32_to_i64(x: f32) -> vec2<u32> {
  let v = trunc(abs(x));
  let hi = floor(v / 4294967296.0);
  let m = vec2<u32>(u32(v - hi * 4294967296.0), u32(hi));
  return select(m, neg64(m), x < 0.0);
}
fn i32_to_i64(x: i32) -> vec2<u32> { return vec2<u32>(bitcast<u32>(x), select(0u, 0xffffffffu, x < 0)); }
fn i64_to_i32(a: vec2<u32>) -> i32 { return bitcast<i32>(a.x); }
fn bool_to_i64(b: bool) -> vec2<u32> { return vec2<u32>(select(0u, 1u, b), 0u); }
fn i64_to_bool(a: vec2<u32>) -> bool { return a.x != 0u || a.y != 0u; }
fn logit_(a: f32, eps: f32) -> f32 {
  let x = select(a, clamp(a, eps, 1.0 - eps), eps >= 0.0);
  return log(x / (1.0 - x));
}
fn logit_backward_(g: f32, x: f32, eps: f32) -> f32 {
  if (eps >= 0.0 && (x < eps || x > 1.0 - eps)) { return 0.0; }
  return g / (x * (1.0 - x));
}
fn sinc_(x: f32) -> f32 {
  if (x == 0.0) { return 1.0; }
  let px = 3.141592653589793 * x;
  return sin_(px) / px;
}
fn round_dec_(x: f32, d: i32) -> f32 {
  if (d >= 0) { let s = pow_(10.0, f32(d)); return round(x * s) / s; }
  let s = pow_(10.0, f32(-d)); return round(x / s) * s;
}
fn lgamma_(x0: f32) -> f32 {
  // Lanczos (g=7, n=9) with the reflection formula for x < 0.5
  if (isinf_(x0)) { return inf_(); }
  var x = x0;
  if (x <= 0.0 && trunc(x) == x) { return inf_(); }
  if (x < 0.5) {
    let s = sin_(3.141592653589793 * x);
    return log(3.141592653589793 / abs(s)) - lgamma_pos(1.0 - x);
  }
  return lgamma_pos(x);
}
fn lgamma_pos(x0: f32) -> f32 {
  let x = x0 - 1.0;
  var a = 0.99999999999980993;
  a = a + 676.5203681218851 / (x + 1.0);
  a = a - 1259.1392167224028 / (x + 2.0);
  a = a + 771.32342877765313 / (x + 3.0);
  a = a - 176.61502916214059 / (x + 4.0);
  a = a + 12.507343278686905 / (x + 5.0);
  a = a - 0.13857109526572012 / (x + 6.0);
  a = a + 9.9843695780195716e-6 / (x + 7.0);
  a = a + 1.5056327351493116e-7 / (x + 8.0);
  let t = x + 7.5;
  return 0.9189385332046727 + (x + 0.5) * log(t) - t + log(a);
}
fn digamma_(x0: f32) -> f32 {
  // torch's calc_digamma(float): reflection through the fractional part (pi*r is exact enough for
  // sin/cos, unlike tan(pi*x) of a large x), recurrence up to 10, then the asymptotic series
  var x = x0;
  if (x == 0.0) { return copysign_(inf_(), -x); }
  if (x < 0.0) {
    if (trunc(x) == x) { return nan_(); }
    let pr = 3.141592653589793 * (x - trunc(x));
    return digamma_pos(1.0 - x) - 3.141592653589793 * cos(pr) / sin(pr);
  }
  return digamma_pos(x);
}
fn digamma_pos(x0: f32) -> f32 {
  var x = x0; var r = 0.0;
  loop { if (x >= 10.0) { break; } r = r - 1.0 / x; x = x + 1.0; }
  if (x == 10.0) { return r + 2.25175258906672110764; }
  let z = 1.0 / (x * x);
  let y = z * ((((((8.33333333333333333333E-2 * z - 2.10927960927960927961E-2) * z
      + 7.57575757575757575758E-3) * z - 4.16666666666666666667E-3) * z + 3.96825396825396825397E-3) * z
      - 8.33333333333333333333E-3) * z + 8.33333333333333333333E-2);
  return r + log(x) - 0.5 / x - select(0.0, y, x < 1.0e17);
}
fn mulwide_(a: u32, b: u32) -> vec2<u32> {
  // the 64-bit product a * b as (low word, high word)
  let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
  let ll = al * bl; let lh = al * bh; let hl = ah * bl;
  let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
  return vec2<u32>((ll & 0xffffu) | (mid << 16u), ah * bh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u));
}
fn add_carry_(a: u32, b: u32, c: u32) -> vec2<u32> {
  // (a + b + c) as (low word, carry) for c in {0, 1}
  let s = a + b; let t = s + c;
  return vec2<u32>(t, select(0u, 1u, s < a) + select(0u, 1u, t < s));
}
fn reduce_pio2_(ax: f32) -> vec2<f32> {
  // Payne-Hanek for finite ax >= pi/4: (r, k) with ax = k * pi/2 + r, |r| <= pi/4, k mod 4, all in
  // integer arithmetic (the f32 builtins lose every digit of r once ax is large).
  var two_over_pi = array<u32, 10>(0u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u, 0xdb629599u,
                                   0x3c439041u, 0xfe5163abu, 0xdebbc561u, 0xb7246e3au);
  let bits = bitcast<u32>(ax);
  let m = (bits & 0x7fffffu) | 0x800000u;          // ax = m * 2^e, m of 24 bits
  let e = i32(bits >> 23u) - 150;
  // 96 bits of 2/pi from bit e - 1 after the point (word 0 holds the zero bits before it): the dropped
  // leading bits add multiples of 4 to ax * 2/pi, and bit 94 of m * window is its units bit.
  let j = u32(30 + e);
  let w = j / 32u; let sh = j % 32u;
  var win: array<u32, 3>;
  for (var i = 0u; i < 3u; i++) {
    win[i] = select((two_over_pi[w + i] << sh) | (two_over_pi[w + i + 1u] >> (32u - sh)),
                    two_over_pi[w + i], sh == 0u);
  }
  let a2 = mulwide_(m, win[2]); let a1 = mulwide_(m, win[1]); let a0 = mulwide_(m, win[0]);
  let p1 = add_carry_(a2.y, a1.x, 0u);
  let p2 = add_carry_(a1.y, a0.x, p1.y);
  var k = (p2.x >> 30u) & 3u;                         // bits 94 and 95: the quadrant
  var hi = (p2.x << 2u) | (p1.x >> 30u);              // bits 93..30: the fraction of ax * 2/pi
  var lo = (p1.x << 2u) | (a2.x >> 30u);
  let neg = (hi & 0x80000000u) != 0u;
  if (neg) {                                         // fraction >= 1/2: next quadrant, negative r
    k = (k + 1u) & 3u;
    lo = ~lo + 1u; hi = ~hi + select(0u, 1u, lo == 0u);
  }
  // r = fraction * pi/2 = (hi:lo) * (pi/4 * 2^64) * 2^-127
  let c_hi = 0xc90fdaa2u; let c_lo = 0x2168c235u;
  let ll = mulwide_(lo, c_lo); let lh = mulwide_(lo, c_hi); let hl = mulwide_(hi, c_lo);
  let hh = mulwide_(hi, c_hi);
  let q1a = add_carry_(ll.y, lh.x, 0u); let q1 = add_carry_(q1a.x, hl.x, 0u);
  let q2a = add_carry_(lh.y, hl.y, q1a.y); let q2 = add_carry_(q2a.x, hh.x, q1.y);
  var q = vec3<u32>(hh.y + q2a.y + q2.y, q2.x, q1.x); // the top 96 of 128 bits
  var ex = 0;                                        // value of bit 31 of q.x is 2^ex
  for (var i = 0; i < 2 && q.x == 0u; i++) { q = vec3<u32>(q.y, q.z, 0u); ex -= 32; }
  if (q.x == 0u) { return vec2<f32>(0.0, f32(k)); }
  let lz = countLeadingZeros(q.x);
  let top = select((q.x << lz) | (q.y >> (32u - lz)), q.x, lz == 0u);
  ex -= i32(lz);
  var mant = (top >> 8u) + ((top >> 7u) & 1u);       // 24 bits, rounded to nearest
  if (mant == 0x1000000u) { mant = 0x800000u; ex += 1; }
  let r = bitcast<f32>((u32(ex + 127) << 23u) | (mant & 0x7fffffu));
  return vec2<f32>(select(r, -r, neg), f32(k));
}
fn trig_arg_(ax: f32) -> vec2<f32> {
  if (ax <= 0.7853981633974483) { return vec2<f32>(ax, 0.0); }
  return reduce_pio2_(ax);
}
fn sin_poly_(r: f32) -> f32 {   // |r| <= pi/4 (Cephes sinf)
  let z = r * r;
  return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
}
fn cos_poly_(r: f32) -> f32 {   // |r| <= pi/4 (Cephes cosf)
  let z = r * r;
  return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2) * z * z
      - 0.5 * z + 1.0;
}
fn tan_poly_(r: f32) -> f32 {   // |r| <= pi/4 (Cephes tanf)
  let z = r * r;
  return (((((9.38540185543e-3 * z + 3.11992232697e-3) * z + 2.44301354525e-2) * z + 5.34112807005e-2) * z
      + 1.33387994085e-1) * z + 3.33331568548e-1) * z * r + r;
}
fn sin_(x: f32) -> f32 {
  if (!isfinite_(x)) { return nan_(); }
  let t = trig_arg_(abs(x));
  let k = u32(t.y);
  let v = select(sin_poly_(t.x), cos_poly_(t.x), (k & 1u) == 1u);
  return copysign_(1.0, x) * select(v, -v, k >= 2u);
}
fn cos_(x: f32) -> f32 {
  if (!isfinite_(x)) { return nan_(); }
  let t = trig_arg_(abs(x));
  let k = u32(t.y);
  let v = select(cos_poly_(t.x), sin_poly_(t.x), (k & 1u) == 1u);
  return select(v, -v, k == 1u || k == 2u);
}
fn tan_(x: f32) -> f32 {
  if (!isfinite_(x)) { return nan_(); }
  let t = trig_arg_(abs(x));
  let v = tan_poly_(t.x);
  return copysign_(1.0, x) * select(v, -1.0 / v, (u32(t.y) & 1u) == 1u);
}
"""


def _chunks(source: str) -> dict[str, str]:
    """Each `fn` or `struct` of `source` by name, with the comment lines just above it, in order."""
    chunks: dict[str, str] = {}
    pending: list[str] = []   # blank and comment lines: they belong to what follows them
    name = None
    for line in source.splitlines(keepends=True):
        if line.startswith(("fn ", "struct ")):
            name = line.split("(", 1)[0].split("{", 1)[0].split()[1]
            chunks[name] = "".join(pending) + line
            pending = []
        elif line.startswith("//") or not line.strip():
            pending.append(line)
        elif name is not None:
            chunks[name] += "".join(pending) + line
            pending = []
    return chunks


FUNCTIONS: dict[str, str] = _chunks(PRELUDE)   # name -> its WGSL (functions and the structs they return)

