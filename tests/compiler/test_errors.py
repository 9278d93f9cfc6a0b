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
