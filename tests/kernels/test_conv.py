"""kernels/conv.py: implicit-GEMM and depthwise convolution variants against torch CPU (lavapipe)."""

import pytest
import torch
import torch.nn.functional as F

import torch_webgpu  # noqa: F401  (the webgpu device holds the buffers)
from torch_webgpu.kernels import DeviceCaps
from torch_webgpu.kernels.conv import (
    DEPTHWISE,
    TILES,
    Conv2dProblem,
    Strided1,
    Strided4,
    conv1d_problem,
    plan_conv2d,
    variants,
)
from torch_webgpu.ops.library_launch import device_caps, record_launch

ACTS = {None: lambda v: v, "relu": torch.relu, "gelu": F.gelu, "silu": F.silu, "sigmoid": torch.sigmoid,
        "tanh": torch.tanh, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"), "relu6": F.relu6}


def _layout(t: torch.Tensor) -> Strided4:
    return Strided4(t.storage_offset(), tuple(t.stride()))


def _run(problem: Conv2dProblem, variant: str, tensors: dict, out_shape, dtype=torch.float32):
    """Run one variant; the output lands in a fresh webgpu tensor returned on the CPU."""
    dev = {k: v.to("webgpu") for k, v in tensors.items()}
    out = torch.full(out_shape, float("nan"), dtype=dtype, device="webgpu")
    record_launch(plan_conv2d(problem, device_caps(), variant), dev | {"out": out})
    return out.cpu()


def pair(v):
    """(v, v) for an int, else the tuple."""
    return (v, v) if isinstance(v, int) else tuple(v)


def _conv_case(n, cin, h, w, cout, k, stride=1, padding=0, dilation=1, groups=1, transposed=False,
               opad=0, dtype=torch.float32):
    kh, kw = (k, k) if isinstance(k, int) else k
    x = torch.randn(n, cin, h, w, dtype=dtype)
    wshape = (cin, cout // groups, kh, kw) if transposed else (cout, cin // groups, kh, kw)
    wt = torch.randn(wshape, dtype=dtype)
    b = torch.randn(cout, dtype=dtype)
    if transposed:
        ref = F.conv_transpose2d(x.float(), wt.float(), b.float(), pair(stride), pair(padding), pair(opad),
                                 groups, pair(dilation))
    else:
        ref = F.conv2d(x.float(), wt.float(), b.float(), pair(stride), pair(padding), pair(dilation), groups)
    p = Conv2dProblem(n, cin, h, w, cout, kh, kw, pair(stride), pair(padding), pair(dilation), groups,
                      transposed, pair(opad), "f16" if dtype == torch.float16 else "f32", bias=Strided1())
    assert (p.oh, p.ow) == tuple(ref.shape[2:])
    return p, {"x": x, "weight": wt, "bias": b}, ref


FORWARD = [  # n, cin, h, w, cout, k, stride, padding, dilation, groups
    (2, 5, 9, 7, 6, 3, 1, 1, 1, 1),
    (1, 8, 7, 7, 8, 3, 2, 1, 2, 2),
    (1, 3, 11, 5, 7, (3, 2), (2, 1), (1, 0), 1, 1),
    (1, 4, 10, 9, 5, 3, 1, 2, 2, 1),
    (3, 6, 5, 5, 9, 1, 2, 0, 1, 3),
    (1, 37, 4, 3, 19, 2, 1, 1, 1, 1),     # K = 148: several K-tiles, ragged tiles everywhere
]


def test_every_variant():
    torch.manual_seed(0)
    p, tensors, ref = _conv_case(2, 5, 9, 7, 6, 3, 1, 1, 1, 1)
    names = variants(p, device_caps())
    assert set(TILES) <= set(names)
    for name in names:
        got = _run(p, name, tensors, ref.shape)
        torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


# one variant for the geometry (the same WGSL as above: shapes travel in params)
@pytest.mark.parametrize("case", FORWARD, ids=[str(c) for c in FORWARD])
def test_geometry(case):
    torch.manual_seed(0)
    p, tensors, ref = _conv_case(*case)
    torch.testing.assert_close(_run(p, "m32n32", tensors, ref.shape), ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("case", [(2, 6, 9, 8, 6, 3, 1, 1, 1), (1, 4, 8, 7, 8, 3, 2, 1, 1),
                                  (1, 5, 9, 9, 5, (5, 3), 1, 2, 2)])
def test_depthwise(case):
    n, c, h, w, cout, k, stride, padding, dilation = case
    torch.manual_seed(1)
    p, tensors, ref = _conv_case(n, c, h, w, cout, k, stride, padding, dilation, groups=c)
    assert variants(p, device_caps())[0] == DEPTHWISE
    for name in (DEPTHWISE, "m32n32"):
        torch.testing.assert_close(_run(p, name, tensors, ref.shape), ref, atol=1e-4, rtol=1e-4)


def test_conv1d_as_height_one():
    torch.manual_seed(2)
    x, wt, b = torch.randn(2, 6, 17), torch.randn(4, 3, 5), torch.randn(4)
    ref = F.conv1d(x, wt, b, stride=2, padding=3, dilation=2, groups=2)
    p = conv1d_problem(2, 6, 17, 4, 5, stride=2, padding=3, dilation=2, groups=2, bias=Strided1())
    assert p == Conv2dProblem(2, 6, 1, 17, 4, 1, 5, (1, 2), (0, 3), (1, 2), 2, bias=Strided1())
    got = _run(p, variants(p, device_caps())[0], {"x": x[:, :, None], "weight": wt[:, :, None], "bias": b},
               (2, 4, 1, ref.shape[-1]))
    torch.testing.assert_close(got[:, :, 0], ref, atol=1e-4, rtol=1e-4)


TRANSPOSED = [  # n, cin, h, w, cout, k, stride, padding, dilation, groups, output_padding
    (2, 4, 5, 6, 3, 3, 2, 1, 1, 1, 1),
    (1, 6, 4, 4, 4, (2, 3), (3, 2), (0, 1), (2, 1), 2, (1, 0)),
    (1, 3, 7, 3, 5, 1, 1, 0, 1, 1, 0),
]


@pytest.mark.parametrize("case", TRANSPOSED, ids=[str(c) for c in TRANSPOSED])
def test_conv_transpose2d(case):
    n, cin, h, w, cout, k, stride, padding, dilation, groups, opad = case
    torch.manual_seed(3)
    p, tensors, ref = _conv_case(n, cin, h, w, cout, k, stride, padding, dilation, groups, True, opad)
    for name in ("m32n32", "m16n64k4") if case == TRANSPOSED[0] else ("m32n32",):
        got = _run(p, name, tensors, ref.shape)
        torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


EPILOGUES = [(None, "none"), ("relu", "before"), ("gelu", "after"), ("gelu_tanh", "before"), ("silu", "none"),
             ("sigmoid", "after"), ("tanh", "before"), ("relu6", "before")]


@pytest.mark.parametrize(("activation", "residual"), EPILOGUES, ids=[f"{a}-{r}" for a, r in EPILOGUES])
def test_epilogues(activation, residual):
    torch.manual_seed(4)
    x, wt, b = torch.randn(1, 8, 6, 6), torch.randn(10, 8, 3, 3) * 0.2, torch.randn(10)
    scale, shift, res = torch.randn(10), torch.randn(10), torch.randn(1, 10, 6, 6)
    v = F.conv2d(x, wt, b, padding=1) * scale[:, None, None] + shift[:, None, None]
    if residual == "before":
        v = v + res
    v = ACTS[activation](v)
    if residual == "after":
        v = v + res
    p = Conv2dProblem(1, 8, 6, 6, 10, 3, 3, padding=(1, 1), bias=Strided1(), scale=Strided1(),
                      shift=Strided1(),
                      residual=None if residual == "none" else Strided4.contiguous((1, 10, 6, 6)),
                      activation=activation, residual_after_activation=residual == "after")
    tensors = {"x": x, "weight": wt, "bias": b, "scale": scale, "shift": shift}
    if residual != "none":
        tensors["residual"] = res
    torch.testing.assert_close(_run(p, "m32n32", tensors, v.shape), v, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("variant", ["m32n32", DEPTHWISE])
def test_batch_norm_statistics_epilogue(variant):
    # Eval batch norm from the running statistics, with the residual and ReLU of a ResNet block.
    torch.manual_seed(6)
    groups = 8 if variant == DEPTHWISE else 1
    x, wt = torch.randn(1, 8, 6, 6), torch.randn(8, 8 // groups, 3, 3) * 0.2
    mean, var, gamma, beta = torch.randn(8), torch.rand(8) + 0.5, torch.randn(8), torch.randn(8)
    res = torch.randn(1, 8, 6, 6)
    v = F.batch_norm(F.conv2d(x, wt, padding=1, groups=groups), mean, var, gamma, beta, eps=1e-3)
    v = torch.relu(v + res)
    p = Conv2dProblem(1, 8, 6, 6, 8, 3, 3, padding=(1, 1), groups=groups, scale=Strided1(),
                      shift=Strided1(), mean=Strided1(), var=Strided1(), eps=1e-3,
                      residual=Strided4.contiguous((1, 8, 6, 6)), activation="relu")
    tensors = {"x": x, "weight": wt, "scale": gamma, "shift": beta, "mean": mean, "var": var,
               "residual": res}
    torch.testing.assert_close(_run(p, variant, tensors, v.shape), v, atol=1e-4, rtol=1e-4)


def test_f16_storage():
    caps = device_caps()
    if not caps.shader_f16:
        pytest.skip("the adapter has no shader-f16")
    torch.manual_seed(5)
    for case, groups in (((2, 8, 7, 7, 12, 3, 1, 1), 1), ((1, 6, 8, 8, 6, 3, 2, 1), 6)):
        p, tensors, ref = _conv_case(*case, groups=groups, dtype=torch.float16)
        for name in ("m32n32",) if groups == 1 else (DEPTHWISE,):
            got = _run(p, name, tensors, ref.shape, torch.float16)
            torch.testing.assert_close(got.float(), ref, atol=2e-2, rtol=2e-2)
    p, tensors, ref = _conv_case(1, 4, 5, 5, 3, 3, 2, 1, transposed=True, opad=1, dtype=torch.float16)
    torch.testing.assert_close(_run(p, "m32n32", tensors, ref.shape, torch.float16).float(), ref,
                               atol=2e-2, rtol=2e-2)


def test_strided_operands_and_output_offset():
    torch.manual_seed(6)
    x = torch.randn(2, 5, 6, 7).to(memory_format=torch.channels_last)
    big_w = torch.randn(2, 4, 5, 3, 3)
    wt = big_w[1].transpose(2, 3)                     # offset and non-flat K strides
    ref = F.conv2d(x, wt, padding=1)
    xd, wd = x.to("webgpu"), big_w.to("webgpu")[1].transpose(2, 3)
    assert xd.stride() == x.stride() and wd.storage_offset() == 180
    out_full = torch.zeros(3, 2, 4, 6, 7, device="webgpu")
    out = out_full[1]
    p = Conv2dProblem(2, 5, 6, 7, 4, 3, 3, padding=(1, 1), x=_layout(xd), weight=_layout(wd),
                      out=_layout(out))
    record_launch(plan_conv2d(p, device_caps(), "m32n32"), {"x": xd, "weight": wd, "out": out})
    torch.testing.assert_close(out.cpu(), ref, atol=1e-4, rtol=1e-4)
    assert out_full[0].cpu().abs().sum() == 0 and out_full[2].cpu().abs().sum() == 0


def test_default_variant_keeps_a_large_gpu_busy():
    caps = DeviceCaps(features=frozenset(), limits={"max-compute-invocations-per-workgroup": 1024,
                                                    "max-compute-workgroup-storage-size": 49152})
    small = Conv2dProblem(1, 512, 7, 7, 512, 3, 3, padding=(1, 1))   # ResNet-18's last stage
    assert TILES[variants(small, caps)[0]].ks > 1
    big = Conv2dProblem(8, 64, 56, 56, 64, 3, 3, padding=(1, 1))
    assert variants(big, caps)[0] == "m64n64"
    assert variants(Conv2dProblem(1, 32, 8, 8, 32, 3, 3, groups=32), caps)[0] == DEPTHWISE


def test_errors_name_the_problem():
    caps = DeviceCaps.portable()
    with pytest.raises(ValueError, match="activation"):
        plan_conv2d(Conv2dProblem(1, 2, 4, 4, 2, 3, 3, activation="swish"), caps)
    with pytest.raises(ValueError, match="output size"):
        plan_conv2d(Conv2dProblem(1, 2, 2, 2, 2, 3, 3), caps)
    with pytest.raises(ValueError, match="groups"):
        plan_conv2d(Conv2dProblem(1, 3, 4, 4, 2, 3, 3, groups=2), caps)
    with pytest.raises(TypeError, match="shader-f16"):
        plan_conv2d(Conv2dProblem(1, 2, 4, 4, 2, 3, 3, dtype="f16"), caps)
    with pytest.raises(ValueError, match="variant"):
        plan_conv2d(Conv2dProblem(1, 2, 4, 4, 2, 3, 3), caps, "m128n128")
