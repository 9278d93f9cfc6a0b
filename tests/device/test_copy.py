"""Copies CPU <-> webgpu and on the device, for every dtype, stride pattern and storage offset."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from torch_webgpu.runtime import get_runtime

from .helpers import DTYPES, sample

LAYOUTS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(0, 2),
    "sliced": lambda t: t[1:, ::2, 1:],
    "offset_row": lambda t: t[1],
    "expanded": lambda t: t[:, :1].expand(-1, 3, -1),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip_views(no_fallback, dtype, layout):
    host = sample((3, 4, 5), dtype)
    device = host.to("webgpu")
    assert_close(LAYOUTS[layout](device).cpu(), LAYOUTS[layout](host), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_upload_into_strided_destination(no_fallback, dtype):
    host = sample((4, 6), dtype)
    dst = torch.zeros(6, 4, dtype=dtype, device="webgpu").t()  # non-contiguous destination
    dst.copy_(host)
    assert_close(dst.cpu(), host, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_device_copy_between_views(no_fallback, dtype):
    host = sample((5, 6), dtype)
    src = host.to("webgpu")
    dst = torch.zeros(6, 10, dtype=dtype, device="webgpu")
    dst[:, 2:7].copy_(src.t())  # strided source -> strided destination with an element offset
    expected = torch.zeros(6, 10, dtype=dtype)
    expected[:, 2:7] = host.t()
    assert_close(dst.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.bool, torch.float16, torch.bfloat16,
                                   torch.int16], ids=str)
def test_packed_writes_keep_neighbours(no_fallback, dtype):
    host = sample((7, 9), dtype, seed=1)
    dst = host.to("webgpu")
    patch = sample((7, 3), dtype, seed=2)
    dst[:, 1::3] = patch.to("webgpu")  # every third element: three writers share each u32 word
    expected = host.clone()
    expected[:, 1::3] = patch
    assert_close(dst.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize("src_dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dst_dtype", [torch.float32, torch.int64, torch.float16, torch.int8, torch.bool],
                         ids=str)
def test_dtype_conversion_on_device(no_fallback, src_dtype, dst_dtype):
    host = sample((3, 5), src_dtype)
    if dst_dtype == torch.int8 or src_dtype == torch.int8:
        host = host.clamp(-100, 100) if src_dtype != torch.bool else host
    if dst_dtype == torch.int8 and src_dtype == torch.uint8:
        host = host % 100
    out = host.to("webgpu").t().to(dst_dtype)
    assert_close(out.cpu(), host.t().to(dst_dtype), rtol=0, atol=0)


def test_int64_beyond_int32_is_exact(no_fallback):
    host = torch.tensor([2**40 + 3, -(2**35) - 7, 2**62, -1], dtype=torch.int64)
    device = host.to("webgpu")
    assert_close(device.cpu(), host, rtol=0, atol=0)
    assert_close(device[::2].contiguous().cpu(), host[::2], rtol=0, atol=0)
    assert_close(device.to(torch.float32).cpu(), host.to(torch.float32))


def test_device_to_device_stays_on_device(no_fallback):
    src = torch.arange(64, dtype=torch.float32, device="webgpu").reshape(8, 8)
    dst = torch.empty(8, 8, device="webgpu")
    rt = get_runtime()
    rt.synchronize()
    before = rt.dispatches
    dst.copy_(src.t())
    assert rt.dispatches == before + 1  # one strided-copy kernel, no host round trip
    assert_close(dst.cpu(), torch.arange(64.0).reshape(8, 8).t())


def test_copy_within_one_storage(no_fallback):
    host = torch.arange(10.0)
    device = host.to("webgpu")
    device[1:].copy_(device[:-1].clone())
    device[:5].copy_(device[5:])  # same buffer, disjoint ranges
    host[1:] = host[:-1].clone()
    host[:5] = host[5:].clone()
    assert_close(device.cpu(), host)


def test_non_blocking_and_item(no_fallback):
    x = torch.tensor([[1.5, -2.0], [3.25, 4.0]]).to("webgpu", non_blocking=True)
    assert x[1, 0].item() == 3.25
    assert torch.tensor([7], dtype=torch.int64, device="webgpu").item() == 7
    assert torch.tensor([True], device="webgpu").item() is True
    assert x.cpu(memory_format=torch.contiguous_format).tolist() == [[1.5, -2.0], [3.25, 4.0]]
    back = x.to("cpu", non_blocking=True)  # complete on return (torch may place it in pinned memory)
    assert back.tolist() == [[1.5, -2.0], [3.25, 4.0]]
    assert torch.tensor([1.5], dtype=torch.float64).to("webgpu", torch.float32).item() == 1.5


def test_contiguous_materialises_through_copy_kernel(no_fallback):
    host = sample((4, 5, 6), torch.float32)
    view = host.to("webgpu").permute(2, 0, 1)
    assert not view.is_contiguous()
    dense = view.contiguous()
    assert dense.is_contiguous() and dense.untyped_storage().data_ptr() != view.untyped_storage().data_ptr()
    assert_close(dense.cpu(), host.permute(2, 0, 1))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_float64_and_complex_are_refused(webgpu, dtype):
    with pytest.raises(TypeError, match="WebGPU has no"):
        torch.zeros(3, dtype=torch.float64 if dtype == torch.float64 else dtype, device="webgpu")
    with pytest.raises(TypeError, match="WebGPU has no"):
        torch.ones(2, dtype=dtype).to("webgpu")


def test_float64_message(webgpu):
    with pytest.raises(TypeError, match="WebGPU has no float64 — use float32"):
        torch.tensor([1.0], dtype=torch.float64).to("webgpu")
    with pytest.raises(TypeError, match="WebGPU has no float64 — use float32"):
        torch.ones(2, device="webgpu").to(torch.float64)


def test_unaligned_packed_uploads_need_no_readback(no_fallback, monkeypatch):
    rt = get_runtime()
    x = torch.zeros(10, dtype=torch.int8, device="webgpu")

    def refuse_download(*args, **kwargs):
        raise AssertionError("an upload read the device back")

    monkeypatch.setattr(rt, "download", refuse_download)
    x[1:4] = torch.tensor([1, 2, 3], dtype=torch.int8)
    y = torch.tensor([5, 6, 7], dtype=torch.int8, device="webgpu")
    z = torch.tensor([1.5, 2.5, 3.5], dtype=torch.float16, device="webgpu")
    monkeypatch.undo()
    assert x.cpu().tolist() == [0, 1, 2, 3, 0, 0, 0, 0, 0, 0]
    assert y.cpu().tolist() == [5, 6, 7]
    assert z.cpu().tolist() == [1.5, 2.5, 3.5]


@pytest.fixture
def tiny_bindings(webgpu, monkeypatch):
    """Pretend kernel bindings are limited to 4 KiB, so ordinary tensors exercise the splitting path."""
    monkeypatch.setattr(get_runtime(), "max_storage_binding", 4096)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.int64, torch.float16], ids=str)
def test_copies_wider_than_one_binding(no_fallback, tiny_bindings, dtype):
    host = sample((40, 70), dtype)
    device = host.to("webgpu")  # 40*70 elements: wider than 4 KiB for every dtype here but int8
    assert_close(device.t().contiguous().cpu(), host.t().contiguous(), rtol=0, atol=0)
    dst = torch.zeros(70, 40, dtype=dtype, device="webgpu")
    dst[5:].copy_(device.t()[5:])
    expected = torch.zeros(70, 40, dtype=dtype)
    expected[5:] = host.t()[5:]
    assert_close(dst.cpu(), expected, rtol=0, atol=0)


def test_factories_wider_than_one_binding(no_fallback, tiny_bindings):
    assert_close(torch.arange(5000, device="webgpu").cpu(), torch.arange(5000))
    assert_close(torch.full((3000,), 1.5, device="webgpu")[1:].cpu(), torch.full((2999,), 1.5))
    torch.manual_seed(9)
    chunked = torch.randn(3, 2000, device="webgpu").cpu()
    get_runtime().max_storage_binding = 1 << 27
    torch.manual_seed(9)
    assert torch.equal(torch.randn(3, 2000, device="webgpu").cpu(), chunked)  # same values as one launch
