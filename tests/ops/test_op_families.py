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
