"""Behaviour of the issue-11 op families that OpInfo does not pin down (integer inputs, random modes,
subnormals, error paths), on the webgpu device with the fallback off."""

import pytest
import torch


def test_bincount_counts_and_float_weights(webgpu):
    x = torch.tensor([0, 3, 3, 1, 7, 3], dtype=torch.int64)
    w = torch.tensor([0.5, 1.0, 2.0, -1.0, 4.0, 0.25])
    torch.testing.assert_close(torch.bincount(x.to(webgpu)).cpu(), torch.bincount(x))
    torch.testing.assert_close(torch.bincount(x.to(webgpu), minlength=12).cpu(),
                               torch.bincount(x, minlength=12))
    torch.testing.assert_close(torch.bincount(x.to(webgpu), w.to(webgpu)).cpu(), torch.bincount(x, w))


def test_bincount_rejects_negative_and_float64_weights(webgpu):
    with pytest.raises(RuntimeError, match="non-negative"):
        torch.bincount(torch.tensor([1, -2]).to(webgpu))
    with pytest.raises(NotImplementedError, match="float64"):
        torch.bincount(torch.tensor([1, 2]).to(webgpu), torch.tensor([1, 2]).to(webgpu))


def test_rrelu_eval_matches_cpu_and_training_draws_slopes(webgpu):
    x = torch.linspace(-3, 3, 64)
    torch.testing.assert_close(torch.nn.functional.rrelu(x.to(webgpu)).cpu(), torch.nn.functional.rrelu(x))
    y = torch.nn.functional.rrelu(x.to(webgpu), 0.1, 0.3, training=True).cpu()
    neg = x < 0
    torch.testing.assert_close(y[~neg], x[~neg])
    slopes = y[neg] / x[neg]
    assert bool(((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)).all())
    assert slopes.unique().numel() > 1  # drawn per element, not one slope


def test_frexp_splits_subnormals_and_specials(webgpu):
    x = torch.tensor([0.0, -0.0, 1e-40, -3e-39, 1e-45, 1.5, -7.0, 3.4e38, float("inf"), float("nan")])
    m, e = torch.frexp(x)
    mw, ew = torch.frexp(x.to(webgpu))
    torch.testing.assert_close(mw.cpu(), m, equal_nan=True)
    assert torch.equal(ew.cpu(), e)


def test_equal_shapes_and_nan(webgpu):
    a = torch.tensor([1.0, float("nan")])
    assert not torch.equal(a.to(webgpu), a.to(webgpu))
    assert not torch.equal(torch.ones(2).to(webgpu), torch.ones(3).to(webgpu))
    assert torch.equal(torch.arange(6).reshape(2, 3).to(webgpu), torch.arange(6).reshape(2, 3).to(webgpu))


def test_masked_scatter_needs_enough_source(webgpu):
    mask = torch.tensor([True, True, True]).to(webgpu)
    with pytest.raises(RuntimeError, match="at least as many elements"):
        torch.zeros(3).to(webgpu).masked_scatter(mask, torch.ones(2).to(webgpu))


def test_put_rejects_out_of_range_index(webgpu):
    with pytest.raises(IndexError, match="out of range"):
        torch.zeros(4).to(webgpu).put(torch.tensor([4]).to(webgpu), torch.ones(1).to(webgpu))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_nextafter_steps_in_the_result_dtype(webgpu, dtype):
    a = torch.tensor([0.0, 1.0, -1.0, 2.5, 0.0, 65504.0, 1e-7, float("nan")]).to(dtype)
    b = torch.tensor([1.0, 2.0, 0.0, -3.0, -1.0, float("inf"), 0.0, 1.0]).to(dtype)
    torch.testing.assert_close(torch.nextafter(a.to(webgpu), b.to(webgpu)).cpu(), torch.nextafter(a, b),
                               rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize(("k", "shape", "kernel", "out"), [(2, (2, 3, 9, 11), (2, 3), (4, 5)),
                                                           (2, (3, 10, 10), (3, 3), (5, 5)),
                                                           (3, (2, 2, 7, 8, 9), (2, 2, 3), (3, 4, 5))])
def test_fractional_max_pool_given_samples_matches_cpu(webgpu, k, shape, kernel, out):
    gen = torch.Generator().manual_seed(k)
    x = torch.randn(shape, generator=gen)
    samples = torch.rand(shape[0] if len(shape) == k + 2 else 1, shape[-k - 1], k, generator=gen)
    fwd = getattr(torch.ops.aten, f"fractional_max_pool{k}d")
    bwd = getattr(torch.ops.aten, f"fractional_max_pool{k}d_backward")
    values, indices = fwd(x, kernel, out, samples)
    wv, wi = fwd(x.to(webgpu), kernel, out, samples.to(webgpu))
    assert torch.equal(wv.cpu(), values) and torch.equal(wi.cpu(), indices)
    g = torch.randn(values.shape, generator=gen)
    torch.testing.assert_close(bwd(g.to(webgpu), x.to(webgpu), kernel, out, wi).cpu(),
                               bwd(g, x, kernel, out, indices))


def test_fractional_max_pool_functional_draws_on_device(webgpu):
    y = torch.nn.functional.fractional_max_pool2d(torch.randn(1, 2, 8, 8).to(webgpu), 2, output_size=4)
    assert y.device.type == "webgpu" and y.shape == (1, 2, 4, 4)
