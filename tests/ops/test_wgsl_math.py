"""The WGSL math helpers (kernels/wgsl/math.py) against float64 references on the CPU.

sin/cos/tan reduce their argument exactly (issue 11, item 4: tan differed from the CPU on the H200, and
on lavapipe every f32 builtin lost all accuracy past |x| ~ 1e5).
"""

import math
import re

import pytest
import torch

from torch_webgpu.kernels.wgsl import math as wgsl_math

TRIG = [torch.sin, torch.cos, torch.tan]


def _all_magnitudes(n: int = 60000) -> torch.Tensor:
    """Finite f32 values of both signs spread uniformly over the exponents (1e-38 .. 3e38)."""
    gen = torch.Generator().manual_seed(0)
    bits = torch.randint(0x00800000, 0x7F800000, (n,), generator=gen, dtype=torch.int64)
    signs = torch.randint(0, 2, (n,), generator=gen, dtype=torch.int64) << 31
    return (bits | signs).to(torch.int32).view(torch.float32)


def _near_multiples_of_half_pi() -> torch.Tensor:
    """The f32 values around k * pi/2 (the hardest inputs: r is tiny, tan has a pole)."""
    k = torch.cat([torch.arange(1, 2000, dtype=torch.float64),
                   torch.logspace(4, 30, 200, dtype=torch.float64)])
    centre = (k * (math.pi / 2)).float()
    steps = torch.arange(-2, 3, dtype=torch.int32)
    return (centre.view(torch.int32)[:, None] + steps).view(torch.float32).flatten()


def _check(fn, x: torch.Tensor) -> None:
    got = fn(x.to("webgpu")).cpu()
    expected = fn(x.double()).float()
    # a few ulp: the reduction is exact to 1 ulp, the polynomials add about as much
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-30, equal_nan=True)


@pytest.mark.parametrize("fn", TRIG, ids=lambda f: f.__name__)
def test_trig_over_every_exponent(webgpu, fn):
    _check(fn, _all_magnitudes())


@pytest.mark.parametrize("fn", TRIG, ids=lambda f: f.__name__)
def test_trig_near_multiples_of_half_pi(webgpu, fn):
    _check(fn, _near_multiples_of_half_pi())


@pytest.mark.parametrize("fn", TRIG, ids=lambda f: f.__name__)
def test_trig_special_values(webgpu, fn):
    quarter = torch.tensor(math.pi / 4, dtype=torch.float32)
    edge = torch.stack([torch.nextafter(quarter, torch.tensor(0.0)), quarter,
                        torch.nextafter(quarter, torch.tensor(1.0))])
    x = torch.cat([torch.tensor([0.0, -0.0, 1e-40, -1e-45, 1.0, 3.4028235e38, -3.4028235e38,
                                 math.inf, -math.inf, math.nan]), edge, -edge])
    got = fn(x.to("webgpu")).cpu()
    expected = fn(x)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=0, equal_nan=True)
    assert torch.equal(torch.signbit(got[:2]), torch.signbit(expected[:2]))   # sin/tan keep -0.0


@pytest.mark.parametrize("fn", TRIG, ids=lambda f: f.__name__)
def test_trig_half_precision_large_arguments(webgpu, fn):
    x = torch.linspace(-60000, 60000, 4001).half()
    got = fn(x.to("webgpu")).cpu()
    torch.testing.assert_close(got, fn(x.float()).half(), rtol=1e-3, atol=1e-3)


def _pi_times_two_to(bits: int) -> int:
    """floor(pi * 2**bits) by Machin's formula in integer arithmetic (64 guard bits)."""
    work = bits + 64

    def arctan_inv(n: int) -> int:
        total, term, k, sign = 0, (1 << work) // n, 1, 1
        while term:
            total, term, k, sign = total + sign * (term // k), term // (n * n), k + 2, -sign
        return total

    return (4 * (4 * arctan_inv(5) - arctan_inv(239))) >> 64


def test_reduction_constants_are_the_bits_of_two_over_pi_and_pi_over_4():
    table = re.search(r"two_over_pi = array<u32, \d+>\(([^)]*)\)", wgsl_math.PRELUDE).group(1)
    zero, *words = [int(w.strip().rstrip("u"), 16) for w in table.split(",")]
    bits = 32 * len(words) + 64
    two_over_pi = (1 << (2 * bits + 1)) // _pi_times_two_to(bits)   # 2/pi * 2**bits
    assert zero == 0   # the integer bits before the point
    assert words == [(two_over_pi >> (bits - 32 * (i + 1))) & 0xFFFFFFFF for i in range(len(words))]
    c = re.search(r"c_hi = (0x[0-9a-f]+)u; let c_lo = (0x[0-9a-f]+)u", wgsl_math.PRELUDE)
    pi_over_4 = int(c.group(1), 16) << 32 | int(c.group(2), 16)
    assert pi_over_4 == (_pi_times_two_to(63) + 1) >> 1   # pi/4 * 2**64, rounded


def test_sinc_of_large_arguments_uses_the_reduced_sine(webgpu):
    # at integers sin(pi * x) is the sine of f32(pi * x) - a multiple of pi: a tiny value, all reduction
    x = torch.randint(-4_000_000, 4_000_000, (20000,), generator=torch.Generator().manual_seed(0)).float()
    torch.testing.assert_close(torch.sinc(x.to("webgpu")).cpu(), torch.sinc(x), rtol=1e-5, atol=0)


INT64_DIVISIONS = {
    "remainder": torch.remainder, "fmod": torch.fmod, "floor_divide": torch.floor_divide,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
}


@pytest.mark.parametrize("name", list(INT64_DIVISIONS))
def test_int64_division_in_u32_pairs(webgpu, name):
    # both signs, operands past 32 bits, int64's minimum (take_along_dim wraps indices with remainder)
    a = torch.tensor([7, -7, 7, -7, 0, 2**40 + 3, -(2**40) - 5, 2**62, -2**63, 5, 123456789012, -1])
    b = torch.tensor([3, 3, -3, -3, 5, 7, 2**33 + 1, -3, 3, 2**40, -1000003, 2**35])
    fn = INT64_DIVISIONS[name]
    torch.testing.assert_close(fn(a.to(webgpu), b.to(webgpu)).cpu(), fn(a, b))
    torch.testing.assert_close(fn(a.to(webgpu), -7).cpu(), fn(a, -7))


@pytest.mark.parametrize("low,high", [(0.01, 2.0), (0.5, 30.0), (50.0, 500.0), (1000.0, 20000.0)], ids=str)
def test_incomplete_gamma_against_float64(webgpu, low, high):
    # large a goes through Stirling's series (a * log(x) - x - lgamma(a) would cancel ~a * log(a) in f32)
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(2000, generator=gen) * (high - low) + low
    x = a * torch.rand(2000, generator=gen) * 2
    for fn in (torch.igamma, torch.igammac):
        err = (fn(a.to(webgpu), x.to(webgpu)).cpu().double() - fn(a.double(), x.double())).abs().max()
        assert err.item() < 5e-6, (fn.__name__, err.item())


def test_incomplete_gamma_special_values(webgpu):
    values = torch.tensor([0.0, 1.0, float("inf"), float("nan"), -1.0, 2.0])
    a, x = torch.meshgrid(values, values, indexing="ij")
    for fn in (torch.igamma, torch.igammac):
        torch.testing.assert_close(fn(a.to(webgpu), x.to(webgpu)).cpu(), fn(a, x), equal_nan=True)


INT64_POWERS_AND_SHIFTS = {"pow": torch.pow, "shl": torch.bitwise_left_shift,
                           "shr": torch.bitwise_right_shift}


@pytest.mark.parametrize("name", list(INT64_POWERS_AND_SHIFTS))
def test_int64_powers_and_shifts_in_u32_pairs(webgpu, name):
    # negative exponents (1, +-1 or 0 as torch), wrapping powers; shifts across the word boundary, past 63
    # and negative (0, or the sign for right shifts)
    a = torch.tensor([3, -3, 2, -1, 1, 0, 7, 2**20, -5, 12345, -(2**62)])
    b = torch.tensor([2, 3, 62, -3, -7, 5, 0, 3, 27, 4, 64])
    if name != "pow":
        b = torch.tensor([0, 1, 31, 32, 33, 63, 64, 70, -1, 5, 61])
    fn = INT64_POWERS_AND_SHIFTS[name]
    torch.testing.assert_close(fn(a.to(webgpu), b.to(webgpu)).cpu(), fn(a, b))
    torch.testing.assert_close(fn(a.to(webgpu), 3).cpu(), fn(a, 3))
