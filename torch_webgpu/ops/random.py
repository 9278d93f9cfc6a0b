"""Random numbers on the device: a Philox4x32-10 WGSL kernel keyed by the webgpu Generator.

Element i of a call draws philox(counter=(i, 0, offset_lo, offset_hi), key=(seed_lo, seed_hi)); each call
then advances the generator's offset by one, so calls never reuse a counter and `torch.manual_seed`
reproduces every sequence. Uniforms use the top 24 bits; normals use Box-Muller on two words.
"""

from __future__ import annotations

import threading

import torch

from .. import device_state
from ..kernels.philox import PHILOX_WGSL
from ..runtime.capture import unreplayable
from .dtypes import check_supported
from .producers import produce
from .registry import register
from .tensor_buffers import buffer_id, pack_u32, runtime

_M64 = (1 << 64) - 1
_offset_lock = threading.Lock()  # reading and advancing a generator's offset is one step


def philox_words(generator: torch.Generator | None) -> list[int]:
    """[seed lo, seed hi, offset lo, offset hi] of the generator, whose offset then advances by one."""
    gen = generator if generator is not None else device_state.default_generators[0]
    if gen.device.type != "webgpu":
        raise RuntimeError(f"expected a webgpu Generator, got one for {gen.device}")
    with _offset_lock:
        seed = gen.initial_seed() & _M64
        offset = gen.get_offset()
        gen.set_offset(offset + 1)
    return [seed & 0xFFFFFFFF, seed >> 32, offset & 0xFFFFFFFF, (offset >> 32) & 0xFFFFFFFF]


def _f32(x: float) -> int:
    import struct

    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def _check_float(self: torch.Tensor, op: str) -> None:
    check_supported(self.dtype, op)
    if not self.dtype.is_floating_point:
        raise RuntimeError(f"{op} expects a floating point tensor, got {self.dtype}")


@register("uniform_")
def uniform_(self: torch.Tensor, from_: float = 0.0, to: float = 1.0, *,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.uniform_(from, to) on the device."""
    _check_float(self, "uniform_")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects from <= to, got from={from_} to={to}")
    body = "  return XF(4u) + unit(draw(li).x) * (XF(5u) - XF(4u));"
    produce(self, body, "f", philox_words(generator) + [_f32(from_), _f32(to)], "uniform_", PHILOX_WGSL)
    return self


@register("normal_")
def normal_(self: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.normal_(mean, std) on the device (Box-Muller)."""
    _check_float(self, "normal_")
    if std < 0:
        raise RuntimeError(f"normal_ expects std >= 0.0, but found std {std}")
    body = ("  let r = draw(li);\n"
            "  let u1 = (f32(r.x >> 8u) + 1.0) * (1.0 / 16777216.0);\n"
            "  let z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * unit(r.y));\n"
            "  return XF(4u) + XF(5u) * z;")
    produce(self, body, "f", philox_words(generator) + [_f32(mean), _f32(std)], "normal_", PHILOX_WGSL)
    return self


def _distribution(self: torch.Tensor, op: str, body: str, params: list[float],
                  generator: torch.Generator | None) -> torch.Tensor:
    """Fill a float tensor with `body` (WGSL using u = unit(draw(li).x) and XF(4..)) of Philox draws."""
    _check_float(self, op)
    produce(self, "  let u = unit(draw(li).x);\n" + body, "f",
            philox_words(generator) + [_f32(p) for p in params], op, PHILOX_WGSL)
    return self


@register("exponential_")
def exponential_(self: torch.Tensor, lambd: float = 1.0, *,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.exponential_(lambd): -log(1 - u) / lambd."""
    if lambd <= 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _distribution(self, "exponential_", "  return -log(1.0 - u) / XF(4u);", [lambd], generator)


@register("log_normal_")
def log_normal_(self: torch.Tensor, mean: float = 1.0, std: float = 2.0, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.log_normal_(mean, std): exp of a normal draw."""
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    body = ("  let r = draw(li);\n"
            "  let u1 = (f32(r.x >> 8u) + 1.0) * (1.0 / 16777216.0);\n"
            "  return exp(XF(4u) + XF(5u) * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * unit(r.y)));")
    return _distribution(self, "log_normal_", body, [mean, std], generator)


@register("cauchy_")
def cauchy_(self: torch.Tensor, median: float = 0.0, sigma: float = 1.0, *,
            generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.cauchy_(median, sigma): median + sigma * tan(pi * (u - 1/2))."""
    return _distribution(self, "cauchy_", "  return XF(4u) + XF(5u) * tan(3.141592653589793 * (u - 0.5));",
                         [median, sigma], generator)


@register("geometric_")
def geometric_(self: torch.Tensor, p: float, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.geometric_(p): trials up to the first success, ceil(log(1 - u) / log(1 - p))."""
    check_supported(self.dtype, "geometric_")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    body = "  return max(1.0, ceil(log(1.0 - unit(draw(li).x)) / log(1.0 - XF(4u))));"
    produce(self, body, "f", philox_words(generator) + [_f32(p)], "geometric_", PHILOX_WGSL)
    return self


def _normal_like(mean: torch.Tensor | float, std: torch.Tensor | float,
                 generator: torch.Generator | None) -> torch.Tensor:
    tensors = [t for t in (mean, std) if isinstance(t, torch.Tensor)]
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    dtype = torch.result_type(*(mean, std)) if len(tensors) == 2 else tensors[0].dtype
    out = torch.empty(shape, dtype=dtype, device=tensors[0].device)
    return normal_(out, 0.0, 1.0, generator=generator).mul_(std).add_(mean)


@register("normal.Tensor_float")
def normal_tensor_float(mean: torch.Tensor, std: float = 1.0, *,
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """torch.normal(mean_tensor, std)."""
    return _normal_like(mean, std, generator)


@register("normal.float_Tensor")
def normal_float_tensor(mean: float, std: torch.Tensor, *,
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """torch.normal(mean, std_tensor)."""
    return _normal_like(mean, std, generator)


@register("normal.Tensor_Tensor")
def normal_tensor_tensor(mean: torch.Tensor, std: torch.Tensor, *,
                         generator: torch.Generator | None = None) -> torch.Tensor:
    """torch.normal(mean_tensor, std_tensor)."""
    return _normal_like(mean, std, generator)


@register("bernoulli_.float")
def bernoulli_float(self: torch.Tensor, p: float = 0.5, *,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.bernoulli_(p) on the device: 1 with probability p."""
    check_supported(self.dtype, "bernoulli_")
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    body = "  return select(0, 1, unit(draw(li).x) < XF(4u));"
    produce(self, body, "i", philox_words(generator) + [_f32(p)], "bernoulli_", PHILOX_WGSL)
    return self


_PROB_INPUT = "@group(0) @binding(2) var<storage, read> Q: array<f32>;\n"


@register("bernoulli_.Tensor")
def bernoulli_tensor(self: torch.Tensor, p: torch.Tensor, *,
                     generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.bernoulli_(p_tensor) on the device: element i is 1 with probability p[i] (broadcast)."""
    check_supported(self.dtype, "bernoulli_")
    if p.device.type != "webgpu":
        p = p.to("webgpu")
    probs = torch.empty(self.shape, dtype=torch.float32, device=self.device)
    probs.copy_(p.expand(self.shape))  # device copy: f32, contiguous, broadcast
    body = "  return select(0, 1, unit(draw(li).x) < Q[li]);"
    produce(self, body, "i", philox_words(generator), "bernoulli_tensor", PHILOX_WGSL + _PROB_INPUT,
            inputs=(buffer_id(probs),))
    return self


@register("bernoulli")
def bernoulli(self: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """torch.bernoulli(p): a new tensor of 0/1 drawn with the probabilities in `self`."""
    out = torch.empty_like(self)
    return bernoulli_tensor(out, self, generator=generator)


@register("bernoulli.out")
def bernoulli_out(self: torch.Tensor, *, generator: torch.Generator | None = None,
                  out: torch.Tensor) -> torch.Tensor:
    """torch.bernoulli(p, out=...)."""
    if out.shape != self.shape:
        out.resize_(self.shape)
    return bernoulli_tensor(out, self, generator=generator)


# random_ adds a 64-bit `from` (X(4), X(5)) to a draw below `range` (X(6) lo, X(7) hi).
_RANDOM_BODY = """  let r = draw(li);
  var d = vec2<u32>(0u, 0u);
  if (X(7u) == 0u) { d = vec2<u32>(mulhilo(r.x, X(6u)).y, 0u); }           // range < 2^32
  else if (X(6u) == 0u && X(7u) == 1u) { d = vec2<u32>(r.x, 0u); }          // range == 2^32
  else { d = vec2<u32>(r.x, r.y & (X(7u) - 1u)); }                          // power-of-two range
  let lo = X(4u) + d.x;
  return vec2<u32>(lo, X(5u) + d.y + select(0u, 1u, lo < d.x));"""


def _default_to(dtype: torch.dtype) -> int:
    if dtype.is_floating_point:
        return (1 << torch.finfo(dtype).nmant + 1) + 1  # integers exactly representable, inclusive
    if dtype == torch.bool:
        return 2
    return torch.iinfo(dtype).max + 1


def random_range(self: torch.Tensor, low: int, high: int, generator: torch.Generator | None) -> torch.Tensor:
    """Fill with integers uniformly drawn from [low, high)."""
    check_supported(self.dtype, "random_")
    span = high - low
    if span <= 0:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if span > 1 << 32 and span & (span - 1):
        raise NotImplementedError(f"webgpu random_: a range of {span} values is neither below 2**32 nor a "
                                  "power of two; use a smaller range")
    words = philox_words(generator) + [low & 0xFFFFFFFF, (low >> 32) & 0xFFFFFFFF,
                                       span & 0xFFFFFFFF, (span >> 32) & 0xFFFFFFFF]
    produce(self, _RANDOM_BODY, "l", words, "random_", PHILOX_WGSL)
    return self


@register("random_.from")
def random_from(self: torch.Tensor, from_: int, to: int | None = None, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.random_(from, to) (to=None: up to the dtype's largest value)."""
    return random_range(self, int(from_), _default_to(self.dtype) if to is None else int(to), generator)


@register("random_.to")
def random_to(self: torch.Tensor, to: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.random_(to): integers in [0, to)."""
    return random_range(self, 0, int(to), generator)


@register("random_")
def random_default(self: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.random_(): integers in [0, largest exactly representable value]."""
    return random_range(self, 0, _default_to(self.dtype), generator)


_INIT_KEYS = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> K: array<u32>;
fn X(k: u32) -> u32 { return P[2u + k]; }  // P[0] = padded count, P[1] = n, then the Philox words
""" + PHILOX_WGSL + """
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= P[0]) { return; }
  var key = 0xffffffffu;  // padding sorts last
  if (i < P[1]) { key = min(draw(i).x, 0xfffffffeu); }
  K[2u * i] = key;
  K[2u * i + 1u] = i;
}
"""

# One compare-exchange step of a bitonic sort over (key, index) pairs; P = [count, k, j].
_BITONIC_STEP = """
@group(0) @binding(0) var<storage, read> P: array<u32>;
@group(0) @binding(1) var<storage, read_write> K: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  let l = i ^ P[2];
  if (i >= P[0] || l <= i) { return; }
  let a = vec2<u32>(K[2u * i], K[2u * i + 1u]);
  let b = vec2<u32>(K[2u * l], K[2u * l + 1u]);
  let a_gt_b = a.x > b.x || (a.x == b.x && a.y > b.y);
  if (((i & P[1]) == 0u) == a_gt_b) {
    K[2u * i] = b.x; K[2u * i + 1u] = b.y;
    K[2u * l] = a.x; K[2u * l + 1u] = a.y;
  }
}
"""

_SORTED_INPUT = "@group(0) @binding(2) var<storage, read> K: array<u32>;\n"


def _grid(work: int) -> tuple[int, int, int]:
    from .strided import grid

    return grid(work)


@register("randperm.generator_out")
def randperm_out(n: int, *, generator: torch.Generator | None = None, out: torch.Tensor) -> torch.Tensor:
    """torch.randperm on the device: sort Philox keys with a bitonic network, keep the indices."""
    check_supported(out.dtype, "randperm")
    if n < 0:
        raise RuntimeError(f"randperm: n must be non-negative, got {n}")
    if n >= 1 << 31:
        raise NotImplementedError("webgpu randperm: n must be below 2**31")
    if out.numel() != n or out.dim() != 1:
        out.resize_(n)
    if n == 0:
        return out
    padded = 1 << max(0, (n - 1).bit_length())
    rt = runtime()
    pairs = torch.empty(2 * padded, dtype=torch.int32, device=out.device)
    words = [padded, n] + philox_words(generator)
    init = rt.kernel(_INIT_KEYS, label="randperm_keys")
    unreplayable()   # launches not yet checked to replay: this call is never a launch plan
    rt.dispatch(init, [rt.constant(pack_u32(words)), buffer_id(pairs)], _grid(padded))
    step = rt.kernel(_BITONIC_STEP, label="randperm_bitonic")
    k = 2
    while k <= padded:
        j = k // 2
        while j >= 1:
            rt.dispatch(step, [rt.constant(pack_u32([padded, k, j])), buffer_id(pairs)], _grid(padded))
            j //= 2
        k *= 2
    produce(out, "  return i32(K[2u * li + 1u]);", "i", [], "randperm_indices", _SORTED_INPUT,
            inputs=(buffer_id(pairs),))
    return out


def expected_philox(seed: int, offset: int, index: int) -> tuple[int, int, int, int]:
    """Reference Philox4x32-10 in Python (for tests): the four words element `index` draws."""
    c = [index & 0xFFFFFFFF, 0, offset & 0xFFFFFFFF, (offset >> 32) & 0xFFFFFFFF]
    k = [seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF]
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1], p0 & 0xFFFFFFFF]
        k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return tuple(c)

