"""Binding a compiled plan's inputs (plan/binding.py): webgpu tensors of every view kind.

A non-contiguous webgpu input is materialised on the device and bound zero-copy; that temporary must
live until every node of the call is recorded (issue 11, item 1: it was freed first, and the dispatch
found `webgpu buffer N is not allocated`). Each case runs twice: the second call reuses the layout.
"""

import pytest
import torch


def _softmax_mix(x, y):
    return (x * y).softmax(-1) + x.sum()


def _views(*pairs):
    """(CPU inputs, webgpu inputs): each pair is a CPU base tensor and the view to take of it."""
    return [view(base) for base, view in pairs], [view(base.to("webgpu")) for base, view in pairs]


def _same_view_twice():
    base = torch.randn(16, 8)
    return [base.t(), base.t()], [base.to("webgpu").t()] * 2


def _identity(t):
    return t


VIEW_CASES = {
    "transpose": lambda: _views((torch.randn(16, 8), lambda t: t.t()), (torch.randn(8, 16), _identity)),
    "offset_rows": lambda: _views((torch.randn(12, 16), lambda t: t[3:11]), (torch.randn(8, 16), _identity)),
    # 4- and 12-byte offsets: below any storage binding alignment (lavapipe 32 bytes, most GPUs 256)
    "sub_binding_alignment_offsets": lambda: _views((torch.randn(200), lambda t: t[1:129].view(8, 16)),
                                                    (torch.randn(200), lambda t: t[3:131].view(8, 16))),
    "strided_with_offset": lambda: _views((torch.randn(20, 16), lambda t: t[1::2][:8]),
                                          (torch.randn(16, 8), lambda t: t.t())),
    "expanded_stride0": lambda: _views((torch.randn(16), lambda t: t.expand(8, 16)),
                                       (torch.randn(8, 1), lambda t: t.expand(8, 16))),
    "same_view_twice": _same_view_twice,
}


@pytest.mark.parametrize("name", list(VIEW_CASES))
def test_compiled_graph_binds_webgpu_views(name):
    torch.manual_seed(0)
    cpu, dev = VIEW_CASES[name]()
    assert any(not t.is_contiguous() or t.storage_offset() for t in dev)
    compiled = torch.compile(_softmax_mix, backend="webgpu")
    expected = _softmax_mix(*cpu)
    for _ in range(2):
        got = compiled(*dev)
        assert got.device.type == "webgpu"
        torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)


def test_issue11_repro_transposed_and_sliced_matmul():
    def fn(x, y):
        return (x @ y).softmax(-1) + x.sum()

    torch.manual_seed(0)
    a, b = torch.randn(16, 8), torch.randn(32, 16)
    compiled = torch.compile(fn, backend="webgpu")
    expected = fn(a.t(), b[::2].t()[:, :8])
    for _ in range(2):
        got = compiled(a.to("webgpu").t(), b.to("webgpu")[::2].t()[:, :8])
        torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)


def test_same_contiguous_tensor_passed_twice():
    def fn(x, y):
        return x @ y + y.t()

    torch.manual_seed(0)
    a = torch.randn(8, 8)
    ad = a.to("webgpu")
    got = torch.compile(fn, backend="webgpu")(ad, ad)
    torch.testing.assert_close(got.cpu(), fn(a, a), atol=1e-4, rtol=1e-4)


def test_int64_and_bool_views_on_webgpu():
    def fn(x, i, m):
        return torch.where(m, x, -x) * i

    torch.manual_seed(0)
    x, i, m = torch.randn(8, 6), torch.randint(-5, 5, (6, 16)), torch.rand(3, 8, 6) > 0.5
    views = (lambda t: t, lambda t: t.t()[::2], lambda t: t[1])   # transposed/strided int64, offset bool
    cpu = [v(t) for v, t in zip(views, (x, i, m), strict=True)]
    dev = [v(t.to("webgpu")) for v, t in zip(views, (x, i, m), strict=True)]
    compiled = torch.compile(fn, backend="webgpu")
    for _ in range(2):
        got = compiled(*dev)
        torch.testing.assert_close(got.cpu(), fn(*cpu))


def test_mutated_view_input_is_written_back():
    def fn(x, y):
        x.mul_(2)
        return x + y.softmax(-1)

    torch.manual_seed(0)
    a, y = torch.randn(16, 8), torch.randn(8, 16)
    ad, yd = a.to("webgpu"), y.to("webgpu")
    got = torch.compile(fn, backend="webgpu")(ad.t(), yd.t().t())
    expected = fn(a.t(), y)
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(ad.cpu(), a)   # a (through its transposed view) was doubled in place


def test_view_input_returned_unchanged():
    def fn(x, y):
        return x, x.sum() + y

    torch.manual_seed(0)
    a, y = torch.randn(16, 8), torch.randn(3)
    ad = a.to("webgpu")
    got = torch.compile(fn, backend="webgpu")(ad.t(), y.to("webgpu"))
    for g, e in zip(got, fn(a.t(), y), strict=True):
        torch.testing.assert_close(g.cpu(), e, atol=1e-4, rtol=1e-4)
