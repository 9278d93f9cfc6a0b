"""Bundles without their weights (supplied at load) and bundles compiled for another machine's adapter."""

import json

import pytest
import torch

import torch_webgpu
from torch_webgpu.bundle import BundleSignatureError
from torch_webgpu.bundle.requirements import WEBGPU_CORE_LIMITS, target_limits


@pytest.fixture(scope="module")
def external_bundle(mlp, tmp_path_factory):
    model, x = mlp
    return torch_webgpu.export(model, [x], tmp_path_factory.mktemp("ext") / "mlp", target="webgpu-core",
                               external_weights=True)


def test_external_weights_are_not_stored(external_bundle):
    manifest = json.loads((external_bundle / "manifest.json").read_text())
    assert "constants.safetensors" not in manifest["files"]
    names = {w["name"] for w in manifest["external_weights"]["weights"].values()}
    assert names and all("." in n for n in names)   # the model's state-dict names


def test_weights_given_at_load_are_used(mlp, external_bundle):
    model, x = mlp
    other = type(model)().eval()        # different random weights than the traced model
    with torch.no_grad():
        want = other(x)
        assert not torch.allclose(want, model(x))
    got = torch_webgpu.load(external_bundle, weights=other.state_dict())(x)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_missing_or_wrong_weights_raise(mlp, external_bundle):
    model, _ = mlp
    with pytest.raises(BundleSignatureError, match="external weights"):
        torch_webgpu.load(external_bundle)
    state = dict(model.state_dict())
    name = next(iter(state))
    with pytest.raises(BundleSignatureError, match=name):
        torch_webgpu.load(external_bundle, weights={k: v for k, v in state.items() if k != name})
    state[name] = torch.zeros(3)
    with pytest.raises(BundleSignatureError, match="compiled for"):
        torch_webgpu.load(external_bundle, weights=state)


def test_adapter_file_target(tmp_path):
    path = tmp_path / "gpu.json"
    limits = dict(WEBGPU_CORE_LIMITS, **{"max-compute-invocations-per-workgroup": 1024})
    path.write_text(json.dumps({"limits": limits, "features": ["timestamp-query"]}))
    got, features = target_limits(str(path))
    assert got["max-compute-invocations-per-workgroup"] == 1024 and features == {"timestamp-query"}
    path.write_text(json.dumps({"limits": {"max-buffer-size": 4}}))
    with pytest.raises(ValueError, match="lacks the limits"):
        target_limits(str(path))
    with pytest.raises(ValueError, match="torch-webgpu adapter --json"):
        target_limits(str(tmp_path / "absent.json"))


def test_adapter_file_subgroup_matrix_configs_reach_f16_targets_only(tmp_path):
    from torch_webgpu.bundle.requirements import target_subgroup_matrix_configs
    from torch_webgpu.compiler.export.graph import make_target

    path = tmp_path / "gpu.json"
    limits = dict(WEBGPU_CORE_LIMITS, **{"subgroup-min-size": 32, "subgroup-max-size": 32})
    features = ["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"]
    path.write_text(json.dumps({"limits": limits, "features": features,
                                "subgroup_matrix_configs": [["f16", "f32", 16, 16, 16]]}))
    assert target_subgroup_matrix_configs(str(path)) == (("f16", "f32", 16, 16, 16),)
    assert make_target(str(path), f16=True).iree.subgroup_matrix_configs == (("f16", "f32", 16, 16, 16),)
    assert make_target(str(path)).iree.subgroup_matrix_configs == ()
    assert target_subgroup_matrix_configs("webgpu-core") == ()


def test_int64_and_scalar_weights(tmp_path):
    """BatchNorm's num_batches_tracked is a 0-d int64 weight; the plan holds it as int32."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.BatchNorm1d(4)).eval()
    x = torch.randn(3, 6)
    path = torch_webgpu.export(model, [x], tmp_path / "bn", target="webgpu-core", external_weights=True)
    got = torch_webgpu.load(path, weights=model.state_dict())(x)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), atol=1e-4, rtol=1e-4)


def test_subgroup_size_is_required_exactly():
    from torch_webgpu.bundle.requirements import unmet

    requires = {"features": ["subgroups"], "limits": {"subgroup-min-size": 32, "subgroup-max-size": 32}}
    nvidia = {"subgroup-min-size": 32, "subgroup-max-size": 32}
    assert not unmet(requires, nvidia, ["subgroups"])
    problems = unmet(requires, {"subgroup-min-size": 4, "subgroup-max-size": 128}, ["subgroups"])
    assert len(problems) == 2 and "subgroup size 32" in problems[0]
