"""Failures a user can cause give clear Python errors naming the op or value, never a crash."""

import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed

from torch_webgpu.compiler.high_ir import UnsupportedOpError


@pytest.mark.parametrize("fn, op", [(torch.erfinv, "aten.erfinv"), (torch.lgamma, "aten.lgamma")])
def test_unsupported_op_names_op_and_node(fn, op):
    with pytest.raises(BackendCompilerFailed) as info:
        torch.compile(lambda x: fn(x) * 2, backend="webgpu")(torch.rand(8))
    assert isinstance(info.value.inner_exception, UnsupportedOpError)
    message = str(info.value)
    assert op in message and "used by" in message and "f32[8]" in message


def test_int64_input_out_of_int32_range_raises_instead_of_wrapping():
    compiled = torch.compile(lambda x: x + 1, backend="webgpu")
    torch.testing.assert_close(compiled(torch.tensor([1, 2, 3])), torch.tensor([2, 3, 4]))
    with pytest.raises(OverflowError, match="int32"):
        compiled(torch.tensor([1, 2, 1 << 40]))


def test_int64_webgpu_input_is_narrowed_on_the_device_and_checked_at_sync():
    compiled = torch.compile(lambda x: x * 3, backend="webgpu")
    x = torch.tensor([[1, -2, 3], [-(1 << 31), (1 << 31) - 1, 0]])
    got = compiled(x.to("webgpu"))
    torch.testing.assert_close(got.cpu(), (x.to(torch.int32) * 3).to(torch.int64))
    torch.testing.assert_close(compiled(x[1].to("webgpu")).cpu(), (x[1].to(torch.int32) * 3).to(torch.int64))
    # Out of int32 range: found on the GPU, reported at the next sync (no host round trip per call).
    bad = compiled(torch.tensor([1, 1 << 40, 2]).to("webgpu"))
    with pytest.raises(OverflowError, match="int32"):
        bad.cpu()
    torch.testing.assert_close(compiled(torch.tensor([5]).to("webgpu")).cpu(), torch.tensor([15]))


def test_float16_weights_for_a_target_without_f16_name_the_feature():
    # The inputs are token ids: only the weights and intermediates are f16 (IREE would fail on its
    # emulation of f16 storage).
    from torch_webgpu.compiler.export import graph as ex

    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 4)).half().eval()
    traced = ex.trace(model, [torch.zeros(1, 3, dtype=torch.int64)])
    with pytest.raises(TypeError, match="shader-f16"):
        ex.compile_traced(traced, ex.make_target("benchmarks/targets/h200-dawn.json"))
