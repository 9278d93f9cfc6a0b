"""kernels/reduce.py against torch on the CPU: every op, float/int/bool inputs, odd and strided shapes,
NaN propagation, multi-pass chunking, binding windows (a device with tiny bindings) and the subgroup
variant; plus one reduction over a tensor just above lavapipe's 128 MiB binding."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from torch_webgpu.kernels.reduce import ReduceProblem, plan_reduce, variants
from torch_webgpu.ops.reductions import library_reduce

from .conftest import with_limits

FLOAT_CASES = {
    "sum": lambda t, d: t.sum(d), "mean": lambda t, d: t.mean(d),
    "prod": lambda t, d: (t * 0.01 + 1).prod(d[-1]),
    "amax": lambda t, d: t.amax(d), "amin": lambda t, d: t.amin(d), "nansum": lambda t, d: t.nansum(d),
    "var": lambda t, d: t.var(d), "std": lambda t, d: t.std(d, correction=0),
    "norm2": lambda t, d: torch.linalg.vector_norm(t, 2, d),
    "norm1": lambda t, d: torch.linalg.vector_norm(t, 1, d),
    "norm3": lambda t, d: torch.linalg.vector_norm(t, 3, d),
    "norm_inf": lambda t, d: torch.linalg.vector_norm(t, float("inf"), d),
    "logsumexp": lambda t, d: t.logsumexp(d), "any": lambda t, d: (t > 2).any(d),
    "all": lambda t, d: (t > -3).all(d),
    "count_nonzero": lambda t, d: torch.count_nonzero(t > 0, d),
}
SHAPES = [((1000003,), (0,)), ((37, 1029), (1,)), ((37, 1029), (0,)), ((6, 7, 301), (0, 2)),
          ((6, 500, 3), (1,)), ((5, 3), (1,)), ((2, 3, 4), (0, 1, 2))]


def _close(got: torch.Tensor, want: torch.Tensor, rtol=1e-4, atol=1e-4):
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("op", sorted(FLOAT_CASES))
@pytest.mark.parametrize("shape,dims", SHAPES, ids=[f"{s}-{d}" for s, d in SHAPES])
def test_float_ops(webgpu, op, shape, dims):
    """Each float op over full tensors, inner rows, strided outer dims and several dims."""
    torch.manual_seed(0)
    x = torch.randn(shape)
    f = FLOAT_CASES[op]
    rtol = 1e-3 if op == "norm3" else 1e-4  # |x|**3 through exp2/log2 on a million elements
    _close(f(x.to(webgpu), dims), f(x, dims), rtol=rtol, atol=1e-3)


@pytest.mark.parametrize("shape,dims", SHAPES[:5], ids=[f"{s}-{d}" for s, d in SHAPES[:5]])
def test_arg_and_values_with_indices(webgpu, shape, dims):
    """argmax/argmin and max/min(dim) with ties resolved to the first index as torch does."""
    torch.manual_seed(1)
    x = torch.randint(-5, 5, shape).float()  # many ties
    d = dims[0]
    _close(x.to(webgpu).argmax(d), x.argmax(d))
    _close(x.to(webgpu).argmin(d), x.argmin(d))
    v, i = x.to(webgpu).max(d)
    _close(v, x.max(d).values)
    _close(i, x.max(d).indices)


def test_nan_propagates(webgpu):
    """NaN wins amax/amin/argmax/sum/var as on the CPU, nansum skips it."""
    x = torch.randn(9, 2001)
    x[2, 1500] = float("nan")
    x[5, 3] = float("nan")
    for f in (lambda t: t.amax(1), lambda t: t.amin(0), lambda t: t.argmax(1), lambda t: t.sum(1),
              lambda t: t.var(1), lambda t: t.nansum(1), lambda t: t.amax(), lambda t: t.argmin()):
        _close(f(x.to(webgpu)), f(x), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool, torch.int16, torch.uint8])
def test_integer_inputs_are_exact(webgpu, dtype):
    """int and bool reductions return torch's dtypes with exact values (sums in int64)."""
    torch.manual_seed(2)
    x = torch.randint(-3 if dtype not in (torch.bool, torch.uint8) else 0, 3, (13, 4099)).to(dtype)
    xd = x.to(webgpu)
    big = torch.full((70001,), 2**30, dtype=torch.int32)  # sums past 2**31 stay exact
    cases = [lambda t: t.sum(), lambda t: t.sum(1), lambda t: t.sum(0), lambda t: t.amax(1),
             lambda t: t.amin(), lambda t: t.any(1), lambda t: t.all(), lambda t: torch.count_nonzero(t, 0),
             lambda t: t[:, :9].prod(1)]
    if dtype != torch.bool:
        cases += [lambda t: t.argmax(1), lambda t: t.argmin(0)]
    for f in cases:
        want, got = f(x), f(xd)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)
    if dtype == torch.int32:
        assert big.to(webgpu).sum().item() == 70001 * 2**30


def test_int_refusals_match_torch(webgpu):
    """mean/var/norm of integer tensors raise what torch raises."""
    x = torch.arange(6, dtype=torch.int32)
    for f in (lambda t: t.mean(), lambda t: t.var(), lambda t: torch.linalg.vector_norm(t)):
        with pytest.raises(RuntimeError) as cpu:
            f(x)
        with pytest.raises(RuntimeError, match=re.escape(str(cpu.value))):
            f(x.to(webgpu))


def test_float16_and_strided_views(webgpu):
    """f16 rows (vec4 of halves), sliced and transposed inputs."""
    torch.manual_seed(3)
    x = torch.randn(40, 1030)
    _close(x.half().to(webgpu).sum(1), x.half().sum(1), rtol=1e-2, atol=5e-2)
    _close(x.half().to(webgpu).amax(0), x.half().amax(0))
    _close(x.to(webgpu)[:, 3:1001].sum(1), x[:, 3:1001].sum(1), rtol=1e-4, atol=1e-3)
    _close(x.to(webgpu).t().sum(0), x.t().sum(0), rtol=1e-4, atol=1e-3)
    _close(x.to(webgpu)[::3, ::2].mean(1), x[::3, ::2].mean(1))


@pytest.mark.parametrize("variant", ["tree", "subgroup"])
@pytest.mark.parametrize("op,compute,shape,dims", [
    ("sum", "f", (10001,), (0,)), ("amax", "f", (7, 3001), (1,)), ("sum", "f", (3001, 7), (0,)),
    ("argmax", "f", (9, 5000), (1,)), ("var", "f", (5, 7, 900), (1,)), ("sum", "i", (20000,), (0,)),
    ("logsumexp", "f", (40, 1000), (1,))])
def test_windows_and_subgroups(webgpu, caps, variant, op, compute, shape, dims):
    """A device whose bindings hold 4 KiB forces every x window split; the subgroup variant (a fixed
    subgroup size) reduces with shuffles."""
    small = with_limits(caps, max_storage_buffer_binding_size=4096, min_storage_buffer_offset_alignment=256)
    if variant == "subgroup":
        if "subgroups" not in caps.features:
            pytest.skip("the adapter has no subgroups")
        small = dataclasses.replace(small, subgroup_size=caps.subgroup_size or 8)
    torch.manual_seed(4)
    x = torch.randn(shape) if compute == "f" else torch.randint(-50, 50, shape, dtype=torch.int32)
    ref = {"sum": lambda t: t.sum(dims), "amax": lambda t: t.amax(dims),
           "argmax": lambda t: t.argmax(dims[0]),
           "var": lambda t: t.var(dims), "logsumexp": lambda t: t.logsumexp(dims)}[op](x)
    p = ReduceProblem(op, "f32" if compute == "f" else "i32", 1, x.numel())
    assert len(plan_reduce(p, small, variant).steps) > 2  # several windows and a combine pass
    v, i = library_reduce(op, x.to(webgpu), dims, ref.shape, compute, 1.0, op == "argmax", caps=small,
                          variant=variant)
    torch.testing.assert_close((i if op == "argmax" else v).cpu().to(ref.dtype), ref, rtol=1e-4, atol=1e-3)


def test_plan_shapes(caps):
    """A big full reduction spreads over many workgroups plus one combine; short rows finish in one pass."""
    roomy = with_limits(caps, max_storage_buffer_binding_size=1 << 30)
    big = plan_reduce(ReduceProblem("sum", "f32", 1, 1 << 27), roomy)
    assert big.steps[0].launch.grid[0] * big.steps[0].launch.grid[1] >= 512 and len(big.steps) >= 2
    assert ".vec4." in big.steps[0].launch.name
    rows = plan_reduce(ReduceProblem("sum", "f32", 8192, 4096), roomy)
    assert len(rows.steps) == 1 and rows.steps[0].launch.grid[0] * rows.steps[0].launch.grid[1] == 8192
    assert "tree" in variants(ReduceProblem("sum", "f32", 1, 8), caps)
    with pytest.raises(TypeError, match="integer"):
        plan_reduce(ReduceProblem("var", "i32", 1, 8), caps)


@pytest.mark.slow
def test_reduction_past_the_binding_limit(webgpu):
    """Issue 11 item 3: a tensor just above lavapipe's 128 MiB binding reduces (windows, no error)."""
    n = (128 << 20) // 4 + 4096  # a multiple of 4: the float32 sum is exact
    x = torch.ones(n, device=webgpu)
    assert x.sum().item() == n
    x[n - 3] = 7.0
    assert x.amax().item() == 7.0 and x.argmax().item() == n - 3


def test_int64_inputs_are_exact(webgpu, caps):
    """int64 elements as u32 pairs: sums, products, extremes and their indices past 2**32, exactly;
    also through 4 KiB binding windows."""
    torch.manual_seed(5)
    x = torch.randint(-2**40, 2**40, (13, 3001), dtype=torch.int64)
    x[3, 5], x[7, 9] = 2**62, -2**62
    small = torch.randint(-1000, 1000, (13, 3), dtype=torch.int64)
    cases = [(lambda t: t.sum(1), x), (lambda t: t.sum(0), x), (lambda t: t.amax(1), x),
             (lambda t: t.amin(), x),
             (lambda t: t.argmax(1), x), (lambda t: t.argmin(0), x), (lambda t: t.any(1), x),
             (lambda t: torch.count_nonzero(t, 0), x), (lambda t: t.prod(1), small),
             (lambda t: t.max(1).values, x)]
    for f, t in cases:
        want, got = f(t), f(t.to(webgpu))
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)
    tiny = with_limits(caps, max_storage_buffer_binding_size=4096, min_storage_buffer_offset_alignment=256)
    v, i = library_reduce("argmax", x.to(webgpu), (1,), (13,), "l", with_index=True, caps=tiny)
    torch.testing.assert_close(i.cpu(), x.argmax(1))
    torch.testing.assert_close(v.cpu(), x.amax(1))
