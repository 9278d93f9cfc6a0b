"""kernels/rows.py against torch on the CPU: softmax, log_softmax, layer_norm (weight, bias) and rms_norm
over short, odd, long (registers and streaming) and very long rows (two passes), f32/f16/bf16, views,
masked (-inf) and NaN rows."""

from __future__ import annotations

import pytest
import torch

from torch_webgpu.kernels.rows import RowProblem, plan_rows

F = torch.nn.functional
# scalar and vec4 rows in registers (64- and 256-wide), streamed rows, two passes, 3-D, one element
SHAPES = [(7, 13), (33, 1024), (5, 4096), (3, 12000), (2, 70000), (4, 5, 6), (1, 1)]


def _close(got, want, rtol=1e-4, atol=1e-4):
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_softmax_and_log_softmax(webgpu, shape):
    """Row softmax/log_softmax along the last dim."""
    torch.manual_seed(0)
    x = torch.randn(shape) * 4
    _close(x.to(webgpu).softmax(-1), x.softmax(-1))
    _close(x.to(webgpu).log_softmax(-1), x.log_softmax(-1))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layer_norm_and_rms_norm(webgpu, shape):
    """layer_norm with and without weight/bias (and its mean/rstd), rms_norm with and without weight."""
    torch.manual_seed(1)
    x, w, b = torch.randn(shape) + 3, torch.randn(shape[-1]), torch.randn(shape[-1])
    n = [shape[-1]]
    got = torch.ops.aten.native_layer_norm(x.to(webgpu), n, w.to(webgpu), b.to(webgpu), 1e-5)
    for g, e in zip(got, torch.ops.aten.native_layer_norm(x, n, w, b, 1e-5), strict=True):
        _close(g, e, rtol=1e-4, atol=2e-4)
    _close(F.layer_norm(x.to(webgpu), n), F.layer_norm(x, n), atol=2e-4)
    _close(F.rms_norm(x.to(webgpu), n, w.to(webgpu), 1e-6), F.rms_norm(x, n, w, 1e-6), atol=2e-4)
    _close(F.rms_norm(x.to(webgpu), n), F.rms_norm(x, n), atol=2e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs(webgpu, dtype):
    """f16/bf16 rows (vec4 and scalar layouts), weights in the same dtype."""
    torch.manual_seed(2)
    for shape in [(9, 4096), (5, 1023)]:
        x, w = torch.randn(shape).to(dtype), torch.randn(shape[-1]).to(dtype)
        tol = {"rtol": 1e-2, "atol": 1e-2}
        _close(x.to(webgpu).softmax(-1), x.softmax(-1), **tol)
        _close(F.layer_norm(x.to(webgpu), [shape[-1]], w.to(webgpu)), F.layer_norm(x, [shape[-1]], w), **tol)
        _close(F.rms_norm(x.to(webgpu), [shape[-1]], w.to(webgpu)), F.rms_norm(x, [shape[-1]], w), **tol)


def test_special_rows(webgpu):
    """Fully and partly masked rows (-inf), a NaN, sliced rows and a softmax over another dim."""
    x = torch.randn(6, 64)
    x[1, :] = float("-inf")
    x[2, 5] = float("nan")
    x[3, :60] = float("-inf")
    _close(x.to(webgpu).softmax(-1), x.softmax(-1))
    _close(x.to(webgpu).log_softmax(-1), x.log_softmax(-1))
    y = torch.randn(50, 130)
    _close(y.to(webgpu)[:, 3:67].softmax(-1), y[:, 3:67].softmax(-1))
    _close(y.to(webgpu)[::2, 4:].softmax(-1), y[::2, 4:].softmax(-1))
    _close(y.to(webgpu).softmax(0), y.softmax(0))


def test_plans(caps):
    """8192x4096 keeps rows in registers (one read, vec4); few very long rows take two passes."""
    (one,) = plan_rows(RowProblem("softmax", "f32", 8192, 4096), caps).steps
    assert "vec4" in one.name and "cached" in one.name and one.grid[0] * one.grid[1] == 8192
    two = plan_rows(RowProblem("layer_norm", "f32", 2, 1 << 20, weight=True, bias=True, stats=True), caps)
    assert [s.name.rsplit(".", 1)[-1] for s in two.steps] == ["stats", "apply"]
    assert two.steps[0].grid[0] >= 64
    with pytest.raises(TypeError, match="float"):
        plan_rows(RowProblem("softmax", "i32", 2, 8), caps)


@pytest.mark.parametrize("shape", [(7, 13), (33, 1024), (2, 70001)], ids=str)
def test_softmax_backwards(webgpu, shape):
    """softmax/log_softmax backward rows (output and gradient read together; two passes when long)."""
    torch.manual_seed(3)
    for fn in (lambda t: t.softmax(-1), lambda t: t.log_softmax(-1)):
        x = torch.randn(shape, requires_grad=True)
        g = torch.randn(shape)
        fn(x).backward(g)
        xd = x.detach().to(webgpu).requires_grad_()
        fn(xd).backward(g.to(webgpu))
        _close(xd.grad, x.grad, atol=1e-5)


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm"])
def test_every_variant(webgpu, caps, op):
    """Every threads-per-row and combine variant (subgroup shuffles: lavapipe has subgroups but no fixed
    size, which the kernel reads at run time) gives torch's rows, vec4 and scalar."""
    import dataclasses

    from torch_webgpu.kernels.rows import variants
    from torch_webgpu.runtime import get_runtime

    from .helpers import upload

    rt = get_runtime()
    assert "subgroups" in caps.features
    caps = dataclasses.replace(caps, subgroup_size=caps.subgroup_size or 8)
    for rows, n in [(6, 4096), (5, 1023)]:
        torch.manual_seed(4)
        x = torch.randn(rows, n) * 3 + 1
        want = {"softmax": x.softmax(-1), "layer_norm": F.layer_norm(x, [n]),
                "rms_norm": F.rms_norm(x, [n], eps=1e-5)}[op]
        p = RowProblem(op, "f32", rows, n)
        names = variants(p, caps)
        assert len(names) >= 3 and any(name.startswith("wg1024") for name in names) == (n == 4096)
        assert any(name.endswith(".sg") for name in names)
        for name in names:
            (launch,) = plan_rows(p, caps, name).steps
            ids = {"x": upload(rt, x), "out": upload(rt, torch.zeros(rows, n))}
            binds = [rt.constant(launch.params_bytes()) if r == "params" else ids[r] for r in launch.bindings]
            rt.dispatch(rt.kernel(launch.wgsl, label=launch.name), binds, launch.grid)
            got = torch.frombuffer(bytearray(rt.download(ids["out"], 0, rows * n * 4)), dtype=torch.float32)
            for b in ids.values():
                rt.free(b)
            _close(got.reshape(rows, n), want, atol=2e-4)


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm"])
def test_f16_store(rt, caps, op):
    """out_dtype "f16" (compiled f16 graphs) stores the f32 result rounded once; only vec4 rows."""
    from .helpers import run_launch

    torch.manual_seed(3)
    x, w = torch.randn(6, 40).half(), torch.randn(40).half()
    p = RowProblem(op, "f16", 6, 40, eps=1e-5, weight=op != "softmax", out_dtype="f16")
    operands = {"x": x} | ({"weight": w} if op != "softmax" else {})
    got = run_launch(rt, plan_rows(p, caps).steps[0], operands, torch.zeros(6, 40, dtype=torch.float16))
    xf, wf = x.float(), w.float()
    want = {"softmax": lambda: xf.softmax(-1), "layer_norm": lambda: F.layer_norm(xf, [40], wf, eps=1e-5),
            "rms_norm": lambda: F.rms_norm(xf, [40], wf, 1e-5)}[op]().half()
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
    with pytest.raises(ValueError, match="vec4"):
        plan_rows(RowProblem(op, "f16", 6, 39, out_dtype="f16"), caps)
