"""RNG on the device: Philox keyed by the webgpu Generator — reproducible, and statistically sound."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from torch_webgpu.ops.random import expected_philox

N = 100_000


def test_philox_matches_reference(no_fallback):
    torch.manual_seed(1234)  # offset restarts at 0
    words = torch.empty(16, dtype=torch.int64, device="webgpu").random_(0, 2**32).cpu().tolist()
    assert words == [expected_philox(1234, 0, i)[0] for i in range(16)]
    again = torch.empty(4, dtype=torch.int64, device="webgpu").random_(0, 2**32).cpu().tolist()
    assert again == [expected_philox(1234, 1, i)[0] for i in range(4)]  # next call: offset 1


@pytest.mark.parametrize("factory", [
    lambda g: torch.randn(64, device="webgpu", generator=g),
    lambda g: torch.rand(3, 5, device="webgpu", generator=g),
    lambda g: torch.randint(-5, 5, (40,), device="webgpu", generator=g),
    lambda g: torch.randperm(50, device="webgpu", generator=g),
    lambda g: torch.empty(30, device="webgpu").bernoulli_(0.3, generator=g),
    lambda g: torch.empty(30, device="webgpu").normal_(2.0, 3.0, generator=g),
])
def test_reproducible_under_manual_seed(no_fallback, factory):
    torch.manual_seed(7)
    first = factory(None).cpu()
    torch.manual_seed(7)
    assert torch.equal(factory(None).cpu(), first)
    gen = torch.Generator(device="webgpu").manual_seed(7)
    assert torch.equal(factory(gen).cpu(), first)  # same seed and offset as the default generator
    assert not torch.equal(factory(gen).cpu(), first)  # the offset advanced


def test_rng_state_roundtrip(no_fallback):
    torch.webgpu.manual_seed(3)
    state = torch.webgpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    a = torch.rand(10, device="webgpu").cpu()
    torch.webgpu.set_rng_state(state)
    assert torch.equal(torch.rand(10, device="webgpu").cpu(), a)
    assert torch.webgpu.initial_seed() == 3
    torch.webgpu.seed()


def test_normal_statistics(no_fallback):
    torch.manual_seed(0)
    x = torch.randn(N, device="webgpu").cpu().double()
    assert abs(x.mean().item()) < 0.02  # standard error 0.003
    assert abs(x.std().item() - 1) < 0.02
    assert abs(((x > 1.96).double().mean() - 0.025).item()) < 0.003  # the tail is Gaussian too
    y = torch.empty(N, device="webgpu").normal_(5.0, 0.5).cpu().double()
    assert abs(y.mean().item() - 5) < 0.01 and abs(y.std().item() - 0.5) < 0.01


def test_uniform_statistics(no_fallback):
    torch.manual_seed(1)
    x = torch.rand(N, device="webgpu").cpu().double()
    assert 0 <= x.min() and x.max() < 1
    ks = (x.sort().values - torch.arange(1, N + 1, dtype=torch.float64) / N).abs().max().item()
    assert ks < 1.63 / math.sqrt(N)  # Kolmogorov-Smirnov at the 1% level
    y = torch.empty(N, device="webgpu").uniform_(-2.0, 6.0).cpu()
    assert -2 <= y.min() and y.max() < 6 and abs(y.mean().item() - 2) < 0.05


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_random(no_fallback, dtype):
    x = torch.randn(N, dtype=dtype, device="webgpu").cpu().float()
    assert abs(x.mean().item()) < 0.03 and abs(x.std().item() - 1) < 0.03


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                                   torch.float32])
def test_randint_uniform_over_range(no_fallback, dtype):
    torch.manual_seed(2)
    x = torch.randint(3, 13, (N,), dtype=dtype, device="webgpu").cpu().long()
    assert x.min() == 3 and x.max() == 12
    counts = torch.bincount(x - 3, minlength=10).double()
    chi2 = ((counts - N / 10) ** 2 / (N / 10)).sum().item()
    assert chi2 < 27.9  # chi-square, 9 degrees of freedom, 0.1% level


def test_random_default_ranges(no_fallback):
    assert 0.4 < torch.empty(1000, dtype=torch.bool, device="webgpu").random_().cpu().float().mean() < 0.6
    u8 = torch.empty(5000, dtype=torch.uint8, device="webgpu").random_().cpu()
    assert u8.max() > 240 and u8.min() < 15
    big = torch.empty(1000, dtype=torch.int64, device="webgpu").random_().cpu()
    assert big.min() >= 0 and big.max() > 2**60  # full non-negative int64 range
    f = torch.empty(1000, device="webgpu").random_(0, 100).cpu()
    assert torch.equal(f, f.round()) and f.max() <= 99


def test_bernoulli(no_fallback):
    torch.manual_seed(4)
    x = torch.empty(N, device="webgpu").bernoulli_(0.3).cpu()
    assert set(x.unique().tolist()) == {0.0, 1.0}
    assert abs(x.mean().item() - 0.3) < 0.01
    p = torch.tensor([0.0, 1.0, 0.5]).repeat(N // 3).to("webgpu")
    y = torch.bernoulli(p).cpu().view(-1, 3)
    assert y[:, 0].sum() == 0 and y[:, 1].all() and abs(y[:, 2].mean().item() - 0.5) < 0.02
    z = torch.empty(N, dtype=torch.bool, device="webgpu").bernoulli_(0.9).cpu()
    assert abs(z.float().mean().item() - 0.9) < 0.01


@pytest.mark.parametrize("n", [1, 7, 256, 1000])
def test_randperm_is_a_permutation(no_fallback, n):
    p = torch.randperm(n, device="webgpu").cpu()
    assert p.dtype == torch.int64
    assert torch.equal(p.sort().values, torch.arange(n))


def test_randperm_positions_are_uniform(no_fallback):
    torch.manual_seed(5)
    firsts = torch.tensor([torch.randperm(8, device="webgpu")[0].item() for _ in range(240)])
    counts = torch.bincount(firsts, minlength=8).double()
    assert ((counts - 30) ** 2 / 30).sum().item() < 24.3  # chi-square, 7 dof, 0.1% level


def test_non_float_normal_is_refused(webgpu):
    with pytest.raises(RuntimeError, match="floating point"):
        torch.empty(3, dtype=torch.int32, device="webgpu").normal_()


def test_other_distributions(no_fallback):
    torch.manual_seed(6)
    e = torch.empty(N, device="webgpu").exponential_(2.0).cpu().double()
    assert e.min() >= 0 and abs(e.mean().item() - 0.5) < 0.01
    ln = torch.empty(N, device="webgpu").log_normal_(0.0, 0.5).cpu().double()
    assert abs(ln.log().mean().item()) < 0.01 and abs(ln.log().std().item() - 0.5) < 0.01
    c = torch.empty(N, device="webgpu").cauchy_(1.0, 2.0).cpu().double()
    assert abs(c.median().item() - 1.0) < 0.05
    assert abs((c - 1).abs().median().item() - 2.0) < 0.1  # half the mass within one sigma
    g = torch.empty(N, device="webgpu").geometric_(0.25).cpu().double()
    assert g.min() >= 1 and abs(g.mean().item() - 4.0) < 0.1


def test_normal_with_tensor_parameters(no_fallback):
    torch.manual_seed(8)
    mean = torch.tensor([0.0, 10.0, -5.0], device="webgpu").repeat(N // 3)
    x = torch.normal(mean, 2.0).cpu().view(-1, 3)
    assert_close(x.mean(0), torch.tensor([0.0, 10.0, -5.0]), atol=0.05, rtol=0)
    assert_close(x.std(0), torch.full((3,), 2.0), atol=0.05, rtol=0)
    y = torch.normal(1.0, torch.full((N,), 3.0, device="webgpu")).cpu()
    assert abs(y.mean().item() - 1) < 0.05 and abs(y.std().item() - 3) < 0.05
