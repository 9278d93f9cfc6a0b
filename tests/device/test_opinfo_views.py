"""OpInfo contract for the device's own ops: view, copy and *_like factory entries of op_db, every dtype.

Samples are built on the CPU, copied to webgpu, run with the CPU fallback disabled, and compared with
the CPU result; view ops must also alias their input's webgpu storage.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_map

from .helpers import DTYPES

VIEW_OPS = ["view", "reshape", "as_strided", "transpose", "t", "permute", "narrow", "select", "expand",
            "squeeze", "unsqueeze", "unflatten", "diagonal", "movedim", "unfold", "flatten", "view_as",
            "expand_as", "reshape_as", "split", "chunk", "unbind", "T", "mT", "swapaxes", "squeeze_copy"]
COPY_OPS = ["contiguous", "clone", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones",
            "new_full"]
MAX_SAMPLES = 3

_OPS = {}
for _op in op_db:
    if _op.name in VIEW_OPS + COPY_OPS and not _op.variant_test_name and _op.name not in _OPS:
        _OPS[_op.name] = _op


def _device(x):
    return x.to("webgpu") if isinstance(x, torch.Tensor) else x


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(_OPS))
def test_opinfo(no_fallback, name, dtype):
    op = _OPS[name]
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{name} has no CPU {dtype} support")
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:MAX_SAMPLES]
    assert samples, f"no OpInfo samples for {name}"
    for sample in samples:
        args = (sample.input, *sample.args)
        expected = op(*args, **sample.kwargs)
        dev_args = tree_map(_device, args)
        kwargs = {k: "webgpu" if k == "device" else tree_map(_device, v) for k, v in sample.kwargs.items()}
        actual = op(*dev_args, **kwargs)
        actual_leaves, _ = tree_flatten(actual)
        expected_leaves, _ = tree_flatten(expected)
        assert len(actual_leaves) == len(expected_leaves)
        for a, e in zip(actual_leaves, expected_leaves, strict=True):
            if not isinstance(e, torch.Tensor):
                assert a == e
                continue
            assert a.device.type == "webgpu"
            assert_close(a.cpu(), e, rtol=0, atol=0, equal_nan=True)
            if name in VIEW_OPS and name != "squeeze_copy" and a.numel():
                assert a.untyped_storage().data_ptr() == dev_args[0].untyped_storage().data_ptr()
