"""High passes on the torch dialect: slice-to-the-end sentinels are clamped, genuine int64 constants are
still refused."""

import pytest
import torch
from torch_mlir import fx

from mlir_passes.torch_passes import Int64RangeError, run_high_passes


class _Slices(torch.nn.Module):
    def forward(self, x):
        return x[:, 1:] * 2 + x[:, :-1], x[2:, ::2]


class _BigConstant(torch.nn.Module):
    def forward(self, x):
        return x.long() + (1 << 40)


def _imported(module: torch.nn.Module, *inputs: torch.Tensor):
    return fx.export_and_import(torch.export.export(module, inputs), output_type="torch")


def test_slice_end_sentinels_are_clamped_to_int32():
    module = _imported(_Slices(), torch.randn(4, 8))
    assert "9223372036854775807" in str(module)
    run_high_passes(module)
    text = str(module)
    assert "9223372036854775807" not in text and "torch.aten.slice.Tensor" in text


def test_genuine_int64_constant_still_refused():
    module = _imported(_BigConstant(), torch.randn(4))
    with pytest.raises(Int64RangeError, match="1099511627776"):
        run_high_passes(module)


def test_compiled_slices_to_the_end_match_cpu(monkeypatch, tmp_path):
    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend

    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    model, x = _Slices(), torch.randn(5, 9)
    out = torch.compile(model, backend=webgpu_backend)(x)
    for got, want in zip(out, model(x), strict=True):
        torch.testing.assert_close(got, want)
    torch._dynamo.reset()
