"""torch.ops.webgpu.create_buffer / write_buffer: eager round trip and inside an aot_eager graph."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from .helpers import DTYPES, sample


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_create_and_write_roundtrip(no_fallback, dtype):
    buf = torch.ops.webgpu.create_buffer([3, 4], [4, 1], dtype)
    assert buf.device.type == "webgpu" and buf.dtype == dtype and buf.shape == (3, 4)
    host = sample((3, 4), dtype)
    torch.ops.webgpu.write_buffer(buf, host)
    assert_close(buf.cpu(), host, rtol=0, atol=0)


def test_write_into_strided_buffer(no_fallback):
    buf = torch.ops.webgpu.create_buffer([3, 2], [1, 3], torch.float32)  # column-major
    torch.ops.webgpu.write_buffer(buf, torch.arange(6.0).view(3, 2))
    assert_close(buf.cpu(), torch.arange(6.0).view(3, 2))
    with pytest.raises(ValueError, match="elements"):
        torch.ops.webgpu.write_buffer(buf, torch.ones(5))


def test_buffer_ops_in_aot_eager_graph(no_fallback):
    def make(x: torch.Tensor) -> torch.Tensor:
        out = torch.ops.webgpu.create_buffer([2, 3], [3, 1], torch.float32)
        torch.ops.webgpu.write_buffer(out, x)
        return out

    compiled = torch.compile(make, backend="aot_eager", fullgraph=True)
    x = torch.arange(6.0).view(2, 3)
    result = compiled(x)
    assert result.device.type == "webgpu"
    assert_close(result.cpu(), x)
    assert_close(compiled(x + 1).cpu(), x + 1)


def test_fake_kernel_shapes(webgpu):
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.ops.webgpu.create_buffer([5, 2], [2, 1], torch.int8)
        torch.ops.webgpu.write_buffer(fake, torch.empty(5, 2, dtype=torch.int8))
    assert fake.shape == (5, 2) and fake.dtype == torch.int8 and fake.device.type == "webgpu"
