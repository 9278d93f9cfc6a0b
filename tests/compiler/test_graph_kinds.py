"""Small graphs exercising dtypes and host-program shapes: bool in/out and between dispatches, int64
demotion, f16, scalars, outputs that are inputs, multiple outputs, reductions with -inf seeds (softmax),
scans."""

import pytest
import torch

CASES = {
    "bool_out": (lambda x: x > 0.5, lambda: (torch.rand(7),)),
    "bool_in": (lambda x, m: torch.where(m, x, -x), lambda: (torch.randn(9), torch.rand(9) > 0.5)),
    "softmax": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(4, 33),)),
    "cumsum": (lambda x: torch.cumsum(x, 0), lambda: (torch.randn(17),)),
    "cat_flip_transpose": (lambda x, y: torch.cat([x.flip(0), y], 0).t().contiguous(),
                           lambda: (torch.randn(3, 5), torch.randn(2, 5))),
    "int64": (lambda x: x * 3 + x.sum(), lambda: (torch.randint(-100, 100, (6,)),)),
    "f16_matmul": (lambda x, w: torch.relu(x @ w),
                   lambda: (torch.randn(4, 8).half(), torch.randn(8, 4).half())),
    "mean_var": (lambda x: (x.mean(0), x.var(0)), lambda: (torch.randn(10, 6),)),
    "scalar_out": (lambda x: x.sum(), lambda: (torch.randn(5),)),
    "lifted_constant": (lambda x: x * torch.tensor([1.5, -2.0, 3.0]) + torch.arange(3),
                        lambda: (torch.randn(4, 3),)),
    "all_any_dim": (lambda x: ((x > 0).all(-1, keepdim=True), (x > 1).any(0)),
                    lambda: (torch.randn(4, 64, 64),)),
    "input_passthrough": (lambda x, y: (x, y * 2), lambda: (torch.randn(3), torch.randn(3))),
    # Bool tensors stored between dispatches (IREE writes i1 one i32 per element here): a scattered mask
    # and a concatenated one, each read by two later dispatches and returned.
    "bool_between_dispatches_scatter": (
        lambda x, i: _two_mask_uses(torch.zeros(16, dtype=torch.bool).index_put((i,), x > 0)),
        lambda: (torch.randn(8), torch.randperm(16)[:8])),
    "bool_between_dispatches_cat": (lambda x: _two_mask_uses(torch.cat([x > 0, x < -1], 0)),
                                    lambda: (torch.randn(7, 3),)),
}


def _two_mask_uses(m):
    return torch.where(m, 2.0, 0.5).cumsum(0), m.sum(0), m


@pytest.mark.parametrize("name", list(CASES))
def test_graph_matches_cpu(name):
    fn, make_args = CASES[name]
    if name.startswith("f16"):
        from torch_webgpu.runtime import get_runtime

        if "shader-f16" not in get_runtime().info.features:
            pytest.skip("the adapter has no shader-f16")
    torch.manual_seed(0)
    args = make_args()
    tol = 1e-2 if name.startswith("f16") else 1e-4
    got = torch.compile(fn, backend="webgpu")(*args)
    torch.testing.assert_close(got, fn(*args), atol=tol, rtol=tol)


def test_int64_outputs_on_webgpu_are_widened_on_device():
    def fn(x):
        return x * 3 - 700, (x.float() * 2).argmax(-1)

    x = torch.randint(-100, 100, (5, 7))
    got = torch.compile(fn, backend="webgpu")(x.to("webgpu"))
    for g, e in zip(got, fn(x), strict=True):
        assert g.device.type == "webgpu" and g.dtype == torch.int64
        torch.testing.assert_close(g.cpu(), e)


def test_webgpu_views_at_any_offset_are_bound_correctly():
    def fn(x, y):
        return x * 2 + y

    torch.manual_seed(0)
    xs, ys = torch.randn(40), torch.randn(41)
    xd, yd = xs.to("webgpu"), ys.to("webgpu")
    compiled = torch.compile(fn, backend="webgpu")
    for off in (0, 1, 5, 8):  # 8 floats = 32 bytes: bindable on lavapipe; others are copied first
        got = compiled(xd[off:off + 7], yd[off + 1:off + 8])
        torch.testing.assert_close(got.cpu(), fn(xs[off:off + 7], ys[off + 1:off + 8]))
