"""Export and load a bundle: outputs match torch CPU, the format holds what it promises, bad input fails."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import torch_webgpu
from torch_webgpu.bundle import (
    BUNDLE_FORMAT_VERSION,
    BundleFormatError,
    BundleIntegrityError,
    BundleRequirementError,
    BundleSignatureError,
)
from torch_webgpu.bundle.requirements import WEBGPU_CORE_LIMITS, check_requirements, unmet

from .conftest import edit_manifest

REPO = Path(__file__).resolve().parents[2]


def test_numpy_in_numpy_out(mlp, mlp_bundle):
    model, x = mlp
    bundle = torch_webgpu.load(mlp_bundle)
    y = bundle(x.numpy())
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(y), model(x), atol=1e-4, rtol=1e-4)


def test_torch_in_torch_out(mlp, mlp_bundle):
    model, x = mlp
    y = torch_webgpu.load(mlp_bundle)(x)
    assert isinstance(y, torch.Tensor)
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


def test_weights_are_baked_in(mlp, mlp_bundle):
    model, x = mlp
    bundle = torch_webgpu.load(mlp_bundle)
    assert [t["name"] for t in bundle.inputs] == ["x"]      # only the model input, no parameters
    with torch.no_grad():
        expected = model(x)
        changed = {k: v + 1 for k, v in model.state_dict().items()}
        other = type(model)().eval()
        other.load_state_dict(changed)
        assert not torch.allclose(other(x), expected)
    torch.testing.assert_close(torch.from_numpy(bundle(x.numpy())), expected, atol=1e-4, rtol=1e-4)


def test_manifest_contents(mlp_bundle):
    manifest = json.loads((Path(mlp_bundle) / "manifest.json").read_text())
    assert manifest["format_version"] == BUNDLE_FORMAT_VERSION
    assert manifest["inputs"] == [{"name": "x", "shape": [4, 16], "dtype": "float32"}]
    assert manifest["outputs"][0]["shape"] == [4, 8]
    assert manifest["plan"]["main"] and manifest["plan"]["executables"]
    wgsl = {e["wgsl_file"] for e in manifest["plan"]["executables"].values()}
    assert wgsl and set(manifest["files"]) == wgsl | {"constants.safetensors"}
    assert sorted(p.name for p in Path(mlp_bundle).iterdir()) == sorted([*manifest["files"], "manifest.json"])
    limits = manifest["requires"]["limits"]
    assert manifest["requires"]["features"] == []
    assert limits["max-compute-invocations-per-workgroup"] <= 256
    assert not unmet(manifest["requires"], WEBGPU_CORE_LIMITS, [])


def test_zip_round_trip(mlp, tmp_path):
    model, x = mlp
    path = torch_webgpu.export(model, [x], tmp_path / "mlp.zip", target="webgpu-core")
    assert path.is_file()
    y = torch_webgpu.load(path)(x.numpy())
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(y), model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("bad, message", [
    (lambda x: x[:2], r"float32\[2, 16\], expected float32\[4, 16\]"),
    (lambda x: x.astype(np.float64), r"float64\[4, 16\], expected float32\[4, 16\]"),
    (lambda x: x.astype(np.int32), r"int32\[4, 16\], expected float32\[4, 16\]"),
])
def test_wrong_input_names_signature(mlp, mlp_bundle, bad, message):
    bundle = torch_webgpu.load(mlp_bundle)
    with pytest.raises(BundleSignatureError, match=message) as info:
        bundle(bad(mlp[1].numpy()))
    assert r"(x: float32[4, 16]) -> (float32[4, 8])" in str(info.value)


def test_wrong_input_count(mlp, mlp_bundle):
    bundle = torch_webgpu.load(mlp_bundle)
    with pytest.raises(BundleSignatureError, match=r"takes 1 inputs, got 2.*\(x: float32\[4, 16\]\)"):
        bundle(mlp[1].numpy(), mlp[1].numpy())


def test_missing_feature_is_named(bundle_copy):
    edit_manifest(bundle_copy, lambda m: m["requires"]["features"].append("quantum-shader"))
    with pytest.raises(BundleRequirementError, match="feature 'quantum-shader'"):
        torch_webgpu.load(bundle_copy)


def test_insufficient_limit_is_named(bundle_copy):
    def change(m):
        m["requires"]["limits"]["max-compute-invocations-per-workgroup"] = 1 << 30
    edit_manifest(bundle_copy, change)
    with pytest.raises(BundleRequirementError,
                       match=r"'max-compute-invocations-per-workgroup' >= 1073741824"):
        torch_webgpu.load(bundle_copy)


def test_alignment_requirement_is_checked():
    requires = {"limits": {"min-storage-buffer-offset-alignment": 64}}
    with pytest.raises(BundleRequirementError, match="min-storage-buffer-offset-alignment"):
        check_requirements(requires, {"min-storage-buffer-offset-alignment": 256}, [])
    check_requirements(requires, {"min-storage-buffer-offset-alignment": 16}, [])


def test_edited_wgsl_is_a_hash_mismatch(bundle_copy):
    wgsl = next(bundle_copy.glob("*.wgsl"))
    wgsl.write_text(wgsl.read_text().replace("main", "mian", 1) + "\n")
    with pytest.raises(BundleIntegrityError, match=f"{wgsl.name} hash mismatch"):
        torch_webgpu.load(bundle_copy)


def test_corrupted_weights_are_a_hash_mismatch(bundle_copy):
    weights = bundle_copy / "constants.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(BundleIntegrityError, match="constants.safetensors hash mismatch"):
        torch_webgpu.load(bundle_copy)


def test_edited_manifest_is_a_hash_mismatch(bundle_copy):
    edit_manifest(bundle_copy, lambda m: m["plan"]["main"].pop(0), reseal=False)
    with pytest.raises(BundleIntegrityError, match="manifest.json hash mismatch"):
        torch_webgpu.load(bundle_copy)


def test_missing_file(bundle_copy):
    next(bundle_copy.glob("*.wgsl")).unlink()
    with pytest.raises(BundleIntegrityError, match="missing"):
        torch_webgpu.load(bundle_copy)


def test_unknown_format_version(bundle_copy):
    edit_manifest(bundle_copy, lambda m: m.update(format_version=99))
    with pytest.raises(BundleFormatError, match="format version 99 is not supported.*reads version 1"):
        torch_webgpu.load(bundle_copy)


def test_not_a_bundle(tmp_path):
    with pytest.raises(BundleFormatError, match="not a torch-webgpu bundle"):
        torch_webgpu.load(tmp_path)


def test_f16_on_webgpu_core_is_refused(mlp, tmp_path):
    with pytest.raises(ValueError, match="shader-f16.*webgpu-core"):
        torch_webgpu.export(mlp[0], [mlp[1]], tmp_path / "f16", target="webgpu-core", f16=True)


def test_f16_export_requires_shader_f16(mlp, tmp_path):
    from torch_webgpu.runtime import get_runtime

    if "shader-f16" not in get_runtime().info.features:
        pytest.skip("this adapter has no shader-f16")
    model, x = mlp
    bundle = torch_webgpu.load(torch_webgpu.export(model, [x], tmp_path / "f16", f16=True))
    assert bundle.manifest["requires"]["features"] == ["shader-f16"]
    assert bundle.signature == "(x: float16[4, 16]) -> (float16[4, 8])"
    y = bundle(x.half().numpy())
    assert y.dtype == np.float16
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(torch.from_numpy(y).float(), expected, atol=1e-2, rtol=1e-2)


def test_unknown_target(mlp, tmp_path):
    with pytest.raises(ValueError, match="unknown target 'webgpu-ultra'"):
        torch_webgpu.export(mlp[0], [mlp[1]], tmp_path / "x", target="webgpu-ultra")


BLOCKER = """
import sys
BLOCKED = {"torch", "torch_mlir", "iree", "functorch", "torchgen"}

class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked in this test")

sys.meta_path.insert(0, _Block())
try:
    import torch
except ImportError:
    pass
else:
    raise SystemExit("torch imported despite the blocker")
"""


def test_load_without_torch_mlir_or_iree(mlp, mlp_bundle, tmp_path):
    model, x = mlp
    np.save(tmp_path / "x.npy", x.numpy())
    script = BLOCKER + textwrap.dedent(f"""
        import numpy as np
        import torch_webgpu
        assert not hasattr(torch_webgpu, "fallback_stats")   # the device was not registered
        bundle = torch_webgpu.load({str(mlp_bundle)!r})
        y = bundle(np.load({str(tmp_path / 'x.npy')!r}))
        assert isinstance(y, np.ndarray), type(y)
        from torch_webgpu.plan.native_executor import STATS   # the native executor needs no torch either
        assert bundle._compiled.executor == "native" and STATS["built"] == 1, STATS
        assert "torch_webgpu.compiler" not in sys.modules   # bundles load through torch_webgpu.plan alone
        np.save({str(tmp_path / 'y.npy')!r}, y)
        from torch_webgpu.cli.main import main
        assert main(["inspect", {str(mlp_bundle)!r}]) == 0       # nor do the CLI's inspect and run
        assert main(["run", {str(mlp_bundle)!r}, "--input", "4x16xf32=1"]) == 0
        loaded = sorted({{m.split(".")[0] for m, v in sys.modules.items() if v is not None}} & BLOCKED)
        assert not loaded, loaded
        print("ok")
    """)
    # The repo first; a worktree run's own path entries after it (they keep its code importable).
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok")
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(np.load(tmp_path / "y.npy")), model(x), atol=1e-4,
                                   rtol=1e-4)


class _TwoInTwoOut(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x, y):
        h = self.lin(x)
        return torch.relu(h), (h * y).sum(-1)


@pytest.mark.slow
def test_several_inputs_and_outputs_and_int64(tmp_path):
    from tests.compiler.models import EmbeddingArgmax

    torch.manual_seed(0)
    model, x, y = _TwoInTwoOut().eval(), torch.randn(3, 8), torch.randn(3, 4)
    bundle = torch_webgpu.load(torch_webgpu.export(model, [x, y], tmp_path / "two.zip"))
    assert bundle.signature == "(x: float32[3, 8], y: float32[3, 4]) -> (float32[3, 4], float32[3])"
    got = bundle(x.numpy(), y.numpy())
    with torch.no_grad():
        for g, e in zip(got, model(x, y), strict=True):
            torch.testing.assert_close(torch.from_numpy(g), e, atol=1e-4, rtol=1e-4)
    emb, idx = EmbeddingArgmax().eval(), torch.randint(0, 50, (2, 5))
    bundle = torch_webgpu.load(torch_webgpu.export(emb, [idx], tmp_path / "emb"))
    out = bundle(idx.numpy())
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, emb(idx).numpy())
    with pytest.raises(OverflowError, match="int32"):
        bundle(np.full((2, 5), 1 << 40, dtype=np.int64))


def _zip_dir(directory: Path, target: Path, edit: str | None = None) -> Path:
    import zipfile

    with zipfile.ZipFile(target, "w") as zf:
        for p in sorted(directory.iterdir()):
            data = p.read_bytes()
            zf.writestr(p.name, data + b"\n// edited\n" if p.name == edit else data)
    return target


def test_zip_member_hashes_are_checked(mlp, mlp_bundle, tmp_path):
    model, x = mlp
    good = torch_webgpu.load(_zip_dir(Path(mlp_bundle), tmp_path / "good.zip"))
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(good(x.numpy())), model(x), atol=1e-4, rtol=1e-4)
    wgsl = next(Path(mlp_bundle).glob("*.wgsl")).name
    with pytest.raises(BundleIntegrityError, match=f"{wgsl} hash mismatch"):
        torch_webgpu.load(_zip_dir(Path(mlp_bundle), tmp_path / "bad.zip", edit=wgsl))


def test_export_drops_dtype_assertions_so_attention_is_one_library_op(tmp_path):
    """torch.export's `_assert_tensor_metadata` after `.to()` would be a second user of the scores and
    hide softmax(scores.float()).to(q.dtype) from the attention matcher (Llama decode's pattern)."""
    from torch_webgpu.compiler.export.graph import trace

    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            scores = q @ k.transpose(-1, -2) * 0.25
            return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, n, 16) for n in (1, 24, 24))
    traced = trace(Attention(), (q, k, v))
    assert not [n for n in traced.graph_module.graph.nodes
                if n.target is torch.ops.aten._assert_tensor_metadata.default]
    torch_webgpu.export(Attention(), (q, k, v), tmp_path / "b")
    assert any(f.name.startswith("lib_attention") for f in (tmp_path / "b").iterdir())
    got = torch_webgpu.load(tmp_path / "b")(q, k, v)
    torch.testing.assert_close(torch.as_tensor(got), Attention()(q, k, v), atol=1e-4, rtol=1e-4)
