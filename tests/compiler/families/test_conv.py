"""Compiled plans run convolutions (with bias, folded batch norm, residual and activation) as
kernel-library dispatches; IREE compiles the rest."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_webgpu
from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.plan.format import LowIROp

from ..models import BasicBlock, SmallResNet


def _randomize_batch_norms(model):
    """Non-trivial running statistics and affine parameters (eval mode reads them)."""
    for module in model.modules():
        if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(module.weight, 0.5, 1.5)
            nn.init.uniform_(module.bias, -0.5, 0.5)
    return model.eval()


def _dispatched(plan):
    """The library variant (or "iree") of each dispatch of one call of `plan`."""
    library = plan.meta.get("library", {})
    return [library.get(n.args["entry_point"], "iree") for n in plan.main if n.op is LowIROp.DISPATCH]


def _compile_and_check(model, *inputs):
    """Compile `model`, check it against CPU; (library conv dispatches, other dispatches) of the plan."""
    with torch.no_grad():
        expected = model(*inputs)
        got = torch.compile(model, backend="webgpu")(*inputs)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    dispatched = _dispatched(STATS.plans[-1])
    convs = sum(v.startswith(("conv2d.", "convt2d.")) for v in dispatched)
    return convs, len(dispatched) - convs


def test_conv_batch_norm_relu_is_one_dispatch_per_conv():
    torch.manual_seed(0)
    model = _randomize_batch_norms(nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(),
        nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8), nn.ReLU6()))
    convs, others = _compile_and_check(model, torch.randn(2, 3, 8, 8))
    # The kernel computes batch norm from the running statistics (plan inputs, read as they are): nothing
    # runs outside the library.
    assert convs == 3 and others == 0


def test_residual_block_with_strided_downsample():
    torch.manual_seed(0)
    model = _randomize_batch_norms(BasicBlock(4, 8, 2))
    convs, others = _compile_and_check(model, torch.randn(1, 4, 8, 8))
    # conv1+bn+relu, downsample+bn (moved before conv2), conv2+bn+residual+relu: the explicit padding of
    # the stride-2 conv (crop_conv_padding) is read by the kernel, not materialized.
    assert convs == 3 and others == 0


def test_geometries_depthwise_strided_dilated_grouped_1d_and_transposed():
    class Convs(nn.Module):
        def __init__(self):
            super().__init__()
            self.depthwise = nn.Conv2d(6, 6, 3, padding=1, groups=6)
            self.dilated = nn.Conv2d(6, 4, 3, stride=2, padding=2, dilation=2)
            self.grouped = nn.Conv2d(4, 6, (3, 1), padding=(1, 0), groups=2, bias=False)
            self.multiplier = nn.Conv2d(6, 12, 3, groups=6)          # depthwise, 2 filters per channel
            self.transposed = nn.ConvTranspose2d(12, 3, 3, stride=2, padding=1, output_padding=1)
            self.conv1d = nn.Conv1d(6, 5, 3, stride=2, padding=1)

        def forward(self, x, s):
            y = self.transposed(torch.relu(self.multiplier(self.grouped(self.dilated(self.depthwise(x))))))
            return y, torch.tanh(self.conv1d(s))

    torch.manual_seed(0)
    model = Convs().eval()
    with torch.no_grad():
        x, s = torch.randn(2, 6, 11, 9), torch.randn(2, 6, 13)
        expected = model(x, s)
        got = torch.compile(model, backend="webgpu")(x, s)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    dispatched = _dispatched(STATS.plans[-1])
    assert len(dispatched) == 6 and "iree" not in dispatched
    assert any(v.endswith(".depthwise") for v in dispatched)
    assert any(v.startswith("convt2d.") for v in dispatched)


def test_dump_lists_library_convs_and_switch_off_compiles_with_iree(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = _randomize_batch_norms(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()))
    x = torch.randn(1, 3, 6, 6)
    monkeypatch.setenv("TORCH_WEBGPU_DUMP_DIR", str(tmp_path / "on"))
    assert _compile_and_check(model, x)[0] == 1
    (listing,) = (tmp_path / "on").glob("graph_*/dispatches.txt")
    assert any(line.startswith("library:conv2d.f32.") and "\tlib_conv2d" in line
               for line in listing.read_text().splitlines())
    torch._dynamo.reset()
    monkeypatch.setenv("TORCH_WEBGPU_LIBRARY", "0")
    monkeypatch.setenv("TORCH_WEBGPU_DUMP_DIR", str(tmp_path / "off"))
    assert _compile_and_check(model, x) [0] == 0
    (listing,) = (tmp_path / "off").glob("graph_*/dispatches.txt")
    assert all(line.startswith("iree\t") for line in listing.read_text().splitlines())


def test_running_statistics_are_read_at_run_time():
    # Folded batch norm keeps the statistics as plan inputs: updating them changes the result.
    torch.manual_seed(0)
    model = _randomize_batch_norms(nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)))
    compiled = torch.compile(model, backend="webgpu")
    x = torch.randn(1, 3, 4, 4)
    with torch.no_grad():
        compiled(x)
        model[1].running_mean.add_(1.0)
        torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)


def test_small_resnet_convs_are_library_dispatches():
    torch.manual_seed(0)
    model = _randomize_batch_norms(SmallResNet(width=8))
    convs, _ = _compile_and_check(model, torch.randn(2, 3, 16, 16))
    assert convs == 4


def test_bundle_round_trip_carries_library_convs(tmp_path):
    torch.manual_seed(0)
    model = _randomize_batch_norms(BasicBlock(4, 4, 1))
    x = torch.randn(1, 4, 6, 6)
    path = torch_webgpu.export(model, [x], tmp_path / "block", target="webgpu-core")
    bundle = torch_webgpu.load(path)
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(bundle(x.numpy())), model(x), atol=1e-4, rtol=1e-4)
    assert any(k.startswith("lib_conv2d") for k in bundle.plan.executables)


@pytest.mark.parametrize("dtype", [torch.float16])
def test_half_precision_conv(dtype):
    from torch_webgpu.runtime import get_runtime

    if "shader-f16" not in get_runtime().info.features:
        pytest.skip("the adapter has no shader-f16")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU()).to(dtype)
    x = torch.randn(1, 4, 6, 6, dtype=dtype)
    with torch.no_grad():
        expected = model.float()(x.float())
        got = torch.compile(model.to(dtype), backend="webgpu")(x)
    torch.testing.assert_close(got.float(), expected, atol=2e-2, rtol=2e-2)
    assert any(v.startswith("conv2d.f16.") for v in _dispatched(STATS.plans[-1]))


def _partition_of(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    from torch_webgpu.compiler.conv_padding import crop_conv_padding
    from torch_webgpu.compiler.partition import partition
    from torch_webgpu.kernels.launch import DeviceCaps

    gm = make_fx(fn, tracing_mode="fake")(*args)
    crop_conv_padding(gm.graph)   # as prepare_graph does
    return gm, partition(gm, DeviceCaps.portable())


def test_partition_reads_batch_norm_statistics_and_the_cropped_padding():
    # CPU only: eval batch norm as the backend's decompositions write it is computed by the kernel from
    # the statistics; the explicit padding of a stride-2 conv is read through the kernel's bounds.
    from torch_webgpu.compiler.families.conv import ConvOp

    def fn(x, w, mean, var, gamma, beta, r):
        y = F.conv2d(x, w, stride=2, padding=1)
        c = (slice(None), None, None)
        y = (y - mean[c]) * (1.0 / torch.sqrt(var + 1e-3))[c] * gamma[c] + beta[c]
        return (torch.relu(y + r),)

    args = (torch.randn(1, 4, 8, 8), torch.randn(8, 4, 3, 3), *(torch.rand(8) for _ in range(4)),
            torch.randn(1, 8, 4, 4))
    gm, part = _partition_of(fn, *args)
    assert any(n.target is torch.ops.aten.constant_pad_nd.default for n in gm.graph.nodes)
    (op,) = part.steps
    assert isinstance(op, ConvOp) and op.problem.padding == (1, 1) and op.problem.activation == "relu"
    assert op.mean is not None and op.var is not None and op.problem.eps == 1e-3
    assert op.scale is not None and op.shift is not None and op.residual is not None


def test_partition_folds_other_per_channel_chains_into_scale_and_shift():
    from torch_webgpu.compiler.families.conv import ConvOp
    from torch_webgpu.compiler.partition import Segment

    def fn(x, w, a, b, c):
        y = F.conv2d(x, w, padding=1)
        return (torch.sigmoid((y - a[:, None, None]) / b[:, None, None] * c[:, None, None]),)

    _, part = _partition_of(fn, torch.randn(1, 3, 5, 5), torch.randn(6, 3, 3, 3),
                            *(torch.rand(6) + 0.5 for _ in range(3)))
    # IREE computes scale and shift from a, b, c before the convolution; nothing after it.
    assert [type(s) for s in part.steps] == [Segment, ConvOp]
    op = part.steps[1]
    assert op.scale is not None and op.shift is not None and op.mean is None
    assert op.problem.activation == "sigmoid"


def test_conv_carries_its_variants_for_tuning():
    # The machine that loads the plan times them once (software adapters run the default, untimed).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())
    assert _compile_and_check(model, torch.randn(1, 4, 6, 6))[0] == 1
    (node,) = [n for n in STATS.plans[-1].main if n.op is LowIROp.DISPATCH and "tune" in n.args]
    assert node.args["tune"]["key"].startswith("conv2d|") and len(node.args["tune"]["variants"]) > 1


def test_training_step_of_a_conv_batch_norm_block_matches_eager():
    # Training batch norm (batch statistics of the conv output) is not folded; gradients match.
    import copy

    torch.manual_seed(0)
    eager = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="webgpu")
    x = torch.randn(2, 3, 6, 6)
    for m in (eager, compiled):
        m(x).square().mean().backward()
    for pe, pc in zip(eager.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(pc.grad, pe.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(model[1].running_mean, eager[1].running_mean, atol=1e-5, rtol=1e-5)
