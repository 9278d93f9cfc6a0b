"""Bundles of torchao weight-only quantized models: the packed weights are what constants.safetensors
stores (int4 two per byte), and the bundle runs in a process without torch, matching torchao on CPU."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import torch_webgpu

from .test_bundle import BLOCKER

torchao = pytest.importorskip("torchao")
from torchao.quantization import Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_  # noqa: E402
from torchao.quantization.granularity import PerGroup  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {"int4g32": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
           "int8": Int8WeightOnlyConfig}


def _quantized_mlp(config: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32)).eval()
    quantize_(model, CONFIGS[config]())
    return model


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_quantized_bundle_runs_without_torch(config, tmp_path):
    from safetensors.numpy import load_file

    model = _quantized_mlp(config)
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(1))
    path = torch_webgpu.export(model, [x], tmp_path / "bundle")
    names = sorted(p.name for p in Path(path).iterdir())
    prefix = "lib_qmatmul_i4g32z" if config == "int4g32" else "lib_qmatmul_i8g"
    assert any(n.startswith(prefix) for n in names), names
    constants = load_file(Path(path) / "constants.safetensors")
    packed = sorted(v.shape for v in constants.values() if v.dtype == np.uint32 and v.ndim == 2)
    # [N, K] weights as u32 words: 8 int4 or 4 int8 per word
    assert packed == ([(32, 16), (128, 8)] if config == "int4g32" else [(32, 32), (128, 16)]), packed
    np.save(tmp_path / "x.npy", x.numpy())
    script = BLOCKER + textwrap.dedent(f"""
        import numpy as np
        import torch_webgpu
        y = torch_webgpu.load({str(path)!r})(np.load({str(tmp_path / 'x.npy')!r}))
        np.save({str(tmp_path / 'y.npy')!r}, y)
        loaded = sorted({{m.split(".")[0] for m, v in sys.modules.items() if v is not None}} & BLOCKED)
        assert not loaded, loaded
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with torch.no_grad():
        want = model(x)
    torch.testing.assert_close(torch.from_numpy(np.load(tmp_path / "y.npy")), want, atol=1e-3, rtol=0)


def test_external_quantized_weights_are_packed_at_load(tmp_path):
    """external_weights=True: the caller passes torchao's int8 parts; the loader packs them (int4 two per
    byte) as the compiler did."""
    from torch_webgpu.compiler.export.graph import model_weights

    model = _quantized_mlp("int4g32")
    x = torch.randn(2, 64, generator=torch.Generator().manual_seed(1))
    path = torch_webgpu.export(model, [x], tmp_path / "bundle", external_weights=True)
    y = torch_webgpu.load(path, weights=model_weights(model))(x.numpy())
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(y), model(x), atol=1e-3, rtol=0)


def test_torchao_ops_decompose_whenever_torchao_was_imported():
    """torch-mlir builds its decomposition table once: torchao imported after an earlier export must still
    have dequantize_affine decomposed (else the compiler meets the unregistered op)."""
    import torchao.quantization  # noqa: F401

    from torch_webgpu.compiler.export.graph import _decompositions

    assert torch.ops.torchao.dequantize_affine.default in _decompositions()


class _TokensToFeatures(torch.nn.Module):
    """A token table and a linear over its rows."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(256, 64)
        self.proj = torch.nn.Linear(64, 32)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.table(ids))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_quantized_embedding_bundle_round_trip(config, tmp_path):
    """The quantized table is stored packed like a linear weight ([rows, dim] as u32 words) and the
    bundle gathers from it (quant_embedding), matching torchao on CPU."""
    from safetensors.numpy import load_file

    torch.manual_seed(0)
    model = _TokensToFeatures().eval()
    quantize_(model, CONFIGS[config](),
              filter_fn=lambda m, fqn: isinstance(m, (torch.nn.Linear, torch.nn.Embedding)))
    ids = torch.randint(0, 256, (1, 9), generator=torch.Generator().manual_seed(1))
    path = torch_webgpu.export(model, [ids], tmp_path / "bundle")
    names = sorted(p.name for p in Path(path).iterdir())
    kernel = "lib_qembedding_" + ("i4g32z" if config == "int4g32" else "i8g64")
    assert any(n.startswith(kernel) for n in names), names
    constants = load_file(Path(path) / "constants.safetensors")
    words = sorted(v.shape for v in constants.values() if v.dtype == np.uint32 and v.ndim == 2)
    assert (256, 8 if config == "int4g32" else 16) in words, words
    assert all(v.nbytes <= 256 * 64 for v in constants.values())   # int8 at most, no float table
    with torch.no_grad():
        want = model(ids)
    got = torch_webgpu.load(path)(ids.numpy())
    torch.testing.assert_close(torch.from_numpy(got), want, atol=1e-3, rtol=0)
