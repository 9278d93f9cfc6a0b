"""The elementwise op table: every op is one declarative line (formulas in WGSL over a, b, c).

`a`, `b`, `c` are the op's operands (tensors or scalars, in schema order `args`), already converted to
the compute kind; names in `params` are scalar arguments of the schema. `f`/`i`/`b` give the formula
for float (f32), integer (i32) and bool compute; a missing one means the op rejects that dtype class.
`promote` follows torch's ELEMENTWISE_TYPE_PROMOTION_KIND: "default", "int_to_float", "always_bool",
plus "logical" (operands seen as bool, bool result) and "int_only" (bitwise).
`mode` names a string argument; the formula is then picked from a dict keyed by its value.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EltOp:
    """One elementwise op: aten base name, formulas, operand and scalar argument names."""

    name: str
    f: str | dict | None = None
    i: str | dict | None = None
    b: str | dict | None = None
    args: tuple[str, ...] = ("self",)
    params: tuple[str, ...] = ()
    promote: str = "default"
    mode: str | None = None
    param_kinds: dict = field(default_factory=dict)  # param name -> fixed kind ("f32"), else compute kind
    aliases: tuple[str, ...] = ()  # more aten base names with the same schema and formula
    l: str | dict | None = None  # noqa: E741  int64 formula (u32-pair helpers: add64, mul64, lt64, ...)


def u(name, f, i=None, b=None, promote="default", **kw) -> EltOp:
    """A unary op."""
    return EltOp(name, f, i, b, promote=promote, **kw)


def fl(name, f, **kw) -> EltOp:
    """A unary float op (integer inputs promote to the default float dtype)."""
    return EltOp(name, f, promote="int_to_float", **kw)


def bi(name, f, i=None, b=None, args=("self", "other"), **kw) -> EltOp:
    """A binary op."""
    return EltOp(name, f, i, b, args=args, **kw)


_CMP64 = {"==": "eq64(a, b)", "!=": "!eq64(a, b)", "<": "lt64(a, b)", "<=": "!lt64(b, a)", ">": "lt64(b, a)",
          ">=": "!lt64(a, b)"}


_CMPBOOL = {"<": "!a && b", "<=": "!a || b", ">": "a && !b", ">=": "a || !b"}  # WGSL has no bool ordering


def cmp(name, op) -> EltOp:
    """A comparison: bool result, operands compared in their promoted type."""
    e = f"a {op} b"
    # WGSL leaves `!=` on NaN to the implementation (lavapipe answers false); `==` is false on NaN.
    f = "!(a == b)" if op == "!=" else e
    return EltOp(name, f, e, _CMPBOOL.get(op, e), args=("self", "other"), promote="always_bool", l=_CMP64[op])


PI = "3.141592653589793"

OPS: list[EltOp] = [
    # ---- unary math -------------------------------------------------------------------------
    u("abs", "abs(a)", "abs(a)", "a", l="abs64(a)"),
    u("neg", "-a", "-a", l="neg64(a)"),
    u("sign", "sign_(a)", "sign(a)", "a"),
    u("sgn", "sign_(a)", "sign(a)", "a"),
    u("square", "a * a", "a * a"),
    u("floor", "floor(a)", "a", "a", l="a"),
    u("ceil", "ceil(a)", "a", "a", l="a"),
    u("trunc", "trunc(a)", "a", "a", aliases=("fix",), l="a"),
    u("round", "round(a)", "a", "a", l="a"),
    u("round", "round_dec_(a, decimals)", params=("decimals",), param_kinds={"decimals": "i32"}),
    u("frac", "a - trunc(a)"),
    u("bitwise_not", None, "~a", "!a", promote="int_only", l="~a"),
    u("logical_not", "!a", "!a", "!a", promote="logical"),
    u("positive", "a", "a", l="a"),
    fl("exp", "exp(a)"),
    fl("exp2", "exp2(a)"),
    fl("expm1", "expm1_(a)"),
    fl("log", "log(a)"),
    fl("log2", "log2(a)"),
    fl("log10", "log(a) * 0.4342944819032518"),
    fl("log1p", "log1p_(a)"),
    fl("sqrt", "sqrt(a)"),
    fl("rsqrt", "inverseSqrt(a)"),
    fl("reciprocal", "1.0 / a"),
    fl("sin", "sin_(a)"),
    fl("cos", "cos_(a)"),
    fl("tan", "tan_(a)"),
    fl("asin", "atan2(a, sqrt((1.0 - a) * (1.0 + a)))", aliases=("arcsin",)),
    fl("acos", "atan2(sqrt((1.0 - a) * (1.0 + a)), a)", aliases=("arccos",)),
    fl("atan", "atan(a)", aliases=("arctan",)),
    fl("sinh", "sinh(a)"),
    fl("cosh", "cosh(a)"),
    fl("tanh", "tanh_(a)"),
    fl("asinh", "asinh(a)", aliases=("arcsinh",)),
    fl("acosh", "acosh(a)", aliases=("arccosh",)),
    fl("atanh", "atanh(a)", aliases=("arctanh",)),
    fl("sigmoid", "sigmoid_(a)"),
    fl("erf", "erf_(a)"),
    fl("erfc", "erfc_(a)"),
    fl("erfinv", "erfinv_(a)"),
    fl("lgamma", "lgamma_(a)"),
    fl("digamma", "digamma_(a)"),
    fl("sinc", "sinc_(a)"),
    fl("deg2rad", f"a * ({PI} / 180.0)"),
    fl("rad2deg", f"a * (180.0 / {PI})"),
    fl("logit", "logit_(a, eps)", params=("eps",)),
    u("isnan", "isnan_(a)", "false", "false", promote="always_bool"),
    u("isinf", "isinf_(a)", "false", "false", promote="always_bool"),
    u("isfinite", "isfinite_(a)", "true", "true", promote="always_bool"),
    u("isposinf", "isinf_(a) && a > 0.0", "false", "false", promote="always_bool"),
    u("isneginf", "isinf_(a) && a < 0.0", "false", "false", promote="always_bool"),
    u("signbit", "signbit_(a)", "a < 0", "false", promote="always_bool"),
    u("nan_to_num", "select(select(select(a, posinf, a == inf_()), neginf, a == -inf_()), nan, isnan_(a))",
      "a", "a", params=("nan", "posinf", "neginf")),
    # ---- activations ------------------------------------------------------------------------
    u("relu", "select(a, 0.0, a < 0.0)", "max(a, 0)"),
    u("relu6", "select(min(a, 6.0), 0.0, a < 0.0)", "clamp(a, 0, 6)"),
    u("silu", "a * sigmoid_(a)"),
    u("mish", "a * tanh_(softplus_(a, 1.0, 20.0))"),
    u("gelu", {"none": "gelu_(a)", "tanh": "gelu_tanh_(a)"}, mode="approximate"),
    u("hardswish", "a * clamp(a + 3.0, 0.0, 6.0) / 6.0"),
    u("hardsigmoid", "clamp(a + 3.0, 0.0, 6.0) / 6.0"),
    u("hardtanh", "clamp(a, min_val, max_val)", "clamp(a, min_val, max_val)", params=("min_val", "max_val")),
    u("leaky_relu", "select(a, a * negative_slope, a < 0.0)", params=("negative_slope",)),
    u("elu", "select(scale * a, scale * alpha * expm1_(a * input_scale), a <= 0.0)",
      params=("alpha", "scale", "input_scale")),
    u("celu", "select(a, alpha * expm1_(a / alpha), a <= 0.0)", params=("alpha",)),
    u("selu", "1.0507009873554805 * select(a, 1.6732632423543772 * expm1_(a), a <= 0.0)"),
    u("softplus", "softplus_(a, beta, threshold)", params=("beta", "threshold")),
    u("hardshrink", "select(a, 0.0, a >= -lambd && a <= lambd)", params=("lambd",)),
    u("softshrink", "select(select(0.0, a + lambd, a < -lambd), a - lambd, a > lambd)", params=("lambd",)),
    u("threshold", "select(a, value, a <= threshold)", "select(a, value, a <= threshold)",
      params=("threshold", "value")),
    u("log_sigmoid_forward_unused", None),
    # ---- activation backwards (grad_output first) -------------------------------------------
    bi("threshold_backward", "select(a, 0.0, b <= threshold)", "select(a, 0, b <= threshold)",
       args=("grad_output", "self"), params=("threshold",)),
    bi("sigmoid_backward", "a * b * (1.0 - b)", args=("grad_output", "output")),
    bi("tanh_backward", "a * (1.0 - b * b)", args=("grad_output", "output")),
    bi("gelu_backward", {"none": "gelu_backward_(a, b)", "tanh": "gelu_tanh_backward_(a, b)"},
       args=("grad_output", "self"), mode="approximate"),
    bi("silu_backward", "a * sigmoid_(b) * (1.0 + b * (1.0 - sigmoid_(b)))", args=("grad_output", "self")),
    bi("mish_backward", "a * (tanh_(softplus_(b, 1.0, 20.0)) + b * sigmoid_(b) * "
       "(1.0 - tanh_(softplus_(b, 1.0, 20.0)) * tanh_(softplus_(b, 1.0, 20.0))))",
       args=("grad_output", "self")),
    bi("hardswish_backward", "select(select(a * (b / 3.0 + 0.5), a, b >= 3.0), 0.0, b <= -3.0)",
       args=("grad_output", "self")),
    bi("hardsigmoid_backward", "select(0.0, a / 6.0, b > -3.0 && b < 3.0)", args=("grad_output", "self")),
    bi("hardtanh_backward", "select(a, 0.0, b <= min_val || b >= max_val)", args=("grad_output", "self"),
       params=("min_val", "max_val")),
    bi("leaky_relu_backward", "select(a * negative_slope, a, b > 0.0)", args=("grad_output", "self"),
       params=("negative_slope", "self_is_result"), param_kinds={"self_is_result": "bool"}),
    bi("softplus_backward", "select(a * (1.0 - 1.0 / (1.0 + exp(b * beta))), a, b * beta > threshold)",
       args=("grad_output", "self"), params=("beta", "threshold")),
    bi("elu_backward", "select(a * scale, select(a * input_scale * scale * alpha * exp(b * input_scale), "
       "a * input_scale * (b + alpha * scale), is_result), b <= 0.0)",
       args=("grad_output", "self_or_result"), params=("alpha", "scale", "input_scale", "is_result"),
       param_kinds={"is_result": "bool"}),
    bi("hardshrink_backward", "select(a, 0.0, b >= -lambd && b <= lambd)", args=("grad_out", "self"),
       params=("lambd",)),
    bi("softshrink_backward", "select(a, 0.0, b >= -lambd && b <= lambd)", args=("grad_output", "self"),
       params=("lambd",)),
    bi("logit_backward", "logit_backward_(a, b, eps)", args=("grad_output", "self"), params=("eps",)),
    # ---- binary arithmetic ------------------------------------------------------------------
    bi("add", "a + alpha * b", "a + alpha * b", "a || (alpha && b)", params=("alpha",),
       l="add64(a, mul64(alpha, b))"),
    bi("sub", "a - alpha * b", "a - alpha * b", params=("alpha",), l="sub64(a, mul64(alpha, b))"),
    bi("rsub", "b - alpha * a", "b - alpha * a", params=("alpha",), l="sub64(b, mul64(alpha, a))"),
    bi("mul", "a * b", "a * b", "a && b", l="mul64(a, b)"),
    EltOp("div", {"": "a / b", "trunc": "trunc(a / b)", "floor": "floor_div_(a, b)"},
          {"trunc": "trunc_div_i(a, b)", "floor": "floor_div_i(a, b)"}, args=("self", "other"),
          mode="rounding_mode", l={"trunc": "trunc_div64(a, b)", "floor": "floor_div64(a, b)"}),
    EltOp("div", "a / b", args=("self", "other"), promote="int_to_float"),
    bi("floor_divide", "floor_div_(a, b)", "floor_div_i(a, b)", l="floor_div64(a, b)"),
    bi("remainder", "remainder_(a, b)", "remainder_i(a, b)", l="remainder64(a, b)"),
    bi("fmod", "fmod_(a, b)", "fmod_i(a, b)", l="fmod64(a, b)"),
    bi("pow", "pow_(a, b)", "pow_i(a, b)", args=("self", "exponent"), l="pow64(a, b)"),
    EltOp("float_power_unused"),
    bi("atan2", "atan2(a, b)", promote="int_to_float", aliases=("arctan2",)),
    bi("hypot", "sqrt(a * a + b * b)"),
    bi("copysign", "copysign_(a, b)", promote="int_to_float"),
    bi("maximum", "max_(a, b)", "max(a, b)", "a || b", l="max64(a, b)"),
    bi("minimum", "min_(a, b)", "min(a, b)", "a && b", l="min64(a, b)"),
    bi("fmax", "fmax_(a, b)", "max(a, b)", "a || b"),
    bi("fmin", "fmin_(a, b)", "min(a, b)", "a && b"),
    bi("xlogy", "xlogy_(a, b)", promote="int_to_float"),
    bi("special_xlog1py", "select(select(a * log1p_(b), 0.0, a == 0.0), b, isnan_(b))",
       promote="int_to_float"),
    fl("special_entr", "select(select(select(-a * log(a), 0.0, a == 0.0), -inf_(), a < 0.0), a, isnan_(a))"),
    bi("logaddexp", "logaddexp_(a, b)"),
    bi("logaddexp2", "logaddexp2_(a, b)"),
    bi("heaviside", "select(select(1.0, b, a == 0.0), 0.0, a < 0.0)",
       "select(select(1, b, a == 0), 0, a < 0)", args=("self", "values")),
    bi("clamp_min", "max_(a, b)", "max(a, b)", "a || b", args=("self", "min"), l="max64(a, b)"),
    bi("clamp_max", "min_(a, b)", "min(a, b)", "a && b", args=("self", "max"), l="min64(a, b)"),
    # ---- ternary ------------------------------------------------------------------------------
    EltOp("lerp", "lerp_(a, b, c)", args=("self", "end", "weight")),
    EltOp("addcmul", "a + value * b * c", "a + value * b * c", args=("self", "tensor1", "tensor2"),
          params=("value",)),
    EltOp("addcdiv", "a + value * b / c", args=("self", "tensor1", "tensor2"), params=("value",)),
    # ---- comparisons, logical, bitwise ----------------------------------------------------------
    cmp("eq", "=="), cmp("ne", "!="), cmp("lt", "<"), cmp("le", "<="), cmp("gt", ">"), cmp("ge", ">="),
    bi("logical_and", "a && b", "a && b", "a && b", promote="logical"),
    bi("logical_or", "a || b", "a || b", "a || b", promote="logical"),
    bi("logical_xor", "a != b", "a != b", "a != b", promote="logical"),
    bi("bitwise_and", None, "a & b", "a && b", promote="int_only", l="a & b"),
    bi("bitwise_or", None, "a | b", "a || b", promote="int_only", l="a | b"),
    bi("bitwise_xor", None, "a ^ b", "a != b", promote="int_only", l="a ^ b"),
    bi("bitwise_left_shift", None, "a << u32(b)", promote="int_only", l="shl64(a, b)",
       aliases=("__lshift__",)),
    bi("bitwise_right_shift", None, "a >> u32(b)", promote="int_only", l="shr64(a, b)",
       aliases=("__rshift__",)),
    # ---- special functions (kernels/wgsl/special.py, ported from ATen's Math.h) --------------------
    fl("i0", "i0_(a)"),
    fl("special_i0e", "i0e_(a)"),
    fl("special_i1", "i1_(a)"),
    fl("special_i1e", "i1e_(a)"),
    fl("special_ndtri", "ndtri_(a)"),
    fl("special_log_ndtr", "log_ndtr_(a)"),
    fl("special_erfcx", "erfcx_(a)"),
    fl("special_airy_ai", "airy_ai_(a)", args=("x",)),
    *(fl(f"special_{f}", f"{f}_(a)", args=("x",)) for f in (
        "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0")),
    *(fl(f"special_{f}", f"{f}_(a)") for f in (
        "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
        "modified_bessel_k0", "modified_bessel_k1")),
    # the degree is truncated to an integer like torch's static_cast<int64_t>(n); inf/NaN count as -1
    *(bi(f"special_{f}", f"{f}_(a, select(trunc(b), -1.0, !isfinite_(b)))", args=("x", "n"),
         promote="int_to_float") for f in (
        "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
        "chebyshev_polynomial_w",
        "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
        "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
        "laguerre_polynomial_l", "legendre_polynomial_p")),
    bi("special_zeta", "zeta_(a, b)", promote="int_to_float"),
    bi("igamma", "igamma_(a, b)", promote="int_to_float"),
    bi("igammac", "igammac_(a, b)", promote="int_to_float"),
    EltOp("polygamma", "polygamma_(n, a)", params=("n",), param_kinds={"n": "i32"}, promote="int_to_float"),
]

OPS = [op for op in OPS if not op.name.endswith("_unused")]
