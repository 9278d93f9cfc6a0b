"""OpInfo contract for the device's own ops: view, copy and *_like factory entries of op_db, every dtype.

Samples are built on the CPU, copied to webgpu (a partial view keeps its storage layout, as if the sample
were built on the device), run with the CPU fallback disabled, and compared with the CPU result; view ops
must also alias their input's webgpu storage.
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
VARIANTS = ["as_strided.partial_views"]   # views of a larger storage, addressed by storage offset
MAX_SAMPLES = 3

_OPS = {}
for _op in op_db:
    _name = f"{_op.name}.{_op.variant_test_name}" if _op.variant_test_name else _op.name
    if (_name in VIEW_OPS + COPY_OPS or _name in VARIANTS) and _name not in _OPS:
        _OPS[_name] = _op


def _device(x):
    """x on webgpu; a view of part of its storage keeps the whole storage and its offset and strides."""
    if not isinstance(x, torch.Tensor):
        return x
    whole = x.untyped_storage().nbytes() // x.element_size()
    if not x.numel() or (x.storage_offset() == 0 and whole == x.numel()):
        return x.to("webgpu")
    return x.as_strided((whole,), (1,), 0).to("webgpu").as_strided(x.shape, x.stride(), x.storage_offset())


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
            if op.name in VIEW_OPS and name != "squeeze_copy" and a.numel():
                assert a.untyped_storage().data_ptr() == dev_args[0].untyped_storage().data_ptr()
