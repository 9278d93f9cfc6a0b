"""Views share the storage (one buffer id) and see writes through the base, for every dtype."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from .helpers import DTYPES, sample

VIEWS = {
    "view": lambda t: t.view(6, 10),
    "reshape": lambda t: t.reshape(-1),
    "as_strided": lambda t: t.as_strided((3, 3), (20, 2), 1),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t[0].t(),
    "permute": lambda t: t.permute(2, 0, 1),
    "slice": lambda t: t[1:3, ::2, 3:],
    "select": lambda t: t.select(1, 2),
    "narrow": lambda t: t.narrow(2, 1, 3),
    "expand": lambda t: t[:, :1, :].expand(3, 4, 5),
    "squeeze": lambda t: t[:, :1].squeeze(1),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "unflatten": lambda t: t.unflatten(2, (5, 1)),
    "diagonal": lambda t: t.diagonal(0, 1, 2),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "flatten": lambda t: t.flatten(1),
    "movedim": lambda t: t.movedim(0, -1),
    "indexing": lambda t: t[..., None, 1],
}


@pytest.mark.parametrize("name", VIEWS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_view_values_and_shared_storage(no_fallback, dtype, name):
    host = sample((3, 4, 5), dtype)
    base = host.to("webgpu")
    view = VIEWS[name](base)
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert view.data_ptr() == base.data_ptr() + view.storage_offset() * base.element_size()
    assert_close(view.cpu(), VIEWS[name](host), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.int64, torch.bfloat16], ids=str)
def test_writes_through_views_reach_the_base(no_fallback, dtype):
    host = sample((4, 6), dtype)
    base = host.to("webgpu")
    base.t()[2].fill_(3)  # column 2 of the base
    base[1, 1:4].copy_(torch.tensor([7, 8, 9]).to(dtype))
    host.t()[2].fill_(3)
    host[1, 1:4] = torch.tensor([7, 8, 9]).to(dtype)
    assert_close(base.cpu(), host, rtol=0, atol=0)


def test_view_of_view_keeps_offsets(no_fallback):
    host = torch.arange(120.0).reshape(4, 5, 6)
    view = host.to("webgpu")[1:, 2:][:, :, 3:].transpose(0, 2)[1]
    assert_close(view.cpu(), host[1:, 2:][:, :, 3:].transpose(0, 2)[1])
    assert_close(view.contiguous().cpu(), host[1:, 2:][:, :, 3:].transpose(0, 2)[1].contiguous())


def test_resize_keeps_data_and_grows_storage(no_fallback):
    x = torch.arange(6, dtype=torch.float32, device="webgpu")
    ptr = x.untyped_storage().data_ptr()
    x.resize_(2, 3)
    assert x.untyped_storage().data_ptr() == ptr  # shrinking or same size: no new buffer
    x.resize_(40)
    assert x.untyped_storage().nbytes() == 160
    assert_close(x[:6].cpu(), torch.arange(6.0))


def test_set_shares_storage(no_fallback):
    src = torch.arange(12, dtype=torch.int32, device="webgpu")
    dst = torch.empty(0, dtype=torch.int32, device="webgpu")
    dst.set_(src.untyped_storage(), 2, (2, 3), (3, 1))
    assert_close(dst.cpu(), torch.arange(12, dtype=torch.int32)[2:8].view(2, 3))
    other = torch.empty(0, dtype=torch.int32, device="webgpu").set_(src)
    assert other.untyped_storage().data_ptr() == src.untyped_storage().data_ptr()
    whole = torch.empty(0, dtype=torch.int32, device="webgpu").set_(src.untyped_storage())
    assert whole.shape == (12,)
