"""Unsupported inputs raise clear Python exceptions naming the op or dtype; nothing crashes and the
device stays usable."""

import pytest
import torch


def test_int64_math_outside_the_exact_set_raises(webgpu):
    x = torch.arange(6, device=webgpu)  # int64
    ref = torch.arange(6)
    assert torch.equal((x * 3 + 1).cpu(), ref * 3 + 1)  # exact u32-pair int64
    assert torch.equal((x % 4 + x // 4 + x ** 3 + (x << 40 >> 38)).cpu(), ref % 4 + ref // 4 + ref ** 3 +
                       (ref << 40 >> 38))
    with pytest.raises(TypeError, match="fmax.*int64"):
        torch.fmax(x, x)


@pytest.mark.parametrize("dtype", [torch.uint64, torch.uint32, torch.complex128, torch.float8_e4m3fn],
                         ids=str)
def test_unsupported_dtypes_name_the_dtype_and_the_remedy(webgpu, dtype):
    with pytest.raises(TypeError, match=r"not supported on webgpu \(supported:|use float32"):
        torch.zeros(3, dtype=dtype, device=webgpu)
    with pytest.raises(TypeError, match="float64"):
        torch.ones(3, device=webgpu).double()
    assert torch.equal((torch.ones(3, device=webgpu) + 1).cpu(), torch.full((3,), 2.0))  # still usable


def test_float64_is_rejected(webgpu):
    with pytest.raises(TypeError, match="float64"):
        torch.ones(3, dtype=torch.float64, device=webgpu)


def test_bad_shapes_raise_like_torch(webgpu):
    a, b = torch.ones(2, 3, device=webgpu), torch.ones(4, 5, device=webgpu)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.mm(a, b)
    with pytest.raises(RuntimeError):
        a + b
    assert torch.equal((a + 1).cpu(), torch.full((2, 3), 2.0))  # still usable


def test_advanced_indexing_and_missing_kernels(webgpu):
    x_cpu = torch.randn(3, 4)
    x = x_cpu.to(webgpu)
    i, j = torch.tensor([0, 2, -1]), torch.tensor([1, 3, 0])
    assert torch.equal(x[i.to(webgpu), j.to(webgpu)].cpu(), x_cpu[i, j])
    assert torch.equal(x[x > 0].cpu(), x_cpu[x_cpu > 0])
    with pytest.raises(NotImplementedError, match="no webgpu kernel"):  # fallback off: a clean error
        x.to_sparse()
