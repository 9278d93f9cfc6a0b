"""Bundle fixtures: a private compile cache and one MLP bundle exported once per session."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from tests.compiler.models import MLP
from tests.executor_check import check_native_executor  # noqa: F401  (autouse fixture)


@pytest.fixture(scope="session", autouse=True)
def _compile_cache(tmp_path_factory):
    old = os.environ.get("TORCH_WEBGPU_CACHE_DIR")
    os.environ["TORCH_WEBGPU_CACHE_DIR"] = str(tmp_path_factory.mktemp("bundle-compile-cache"))
    yield
    if old is None:
        os.environ.pop("TORCH_WEBGPU_CACHE_DIR", None)
    else:
        os.environ["TORCH_WEBGPU_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def mlp():
    """An MLP with fixed random weights and an input."""
    torch.manual_seed(0)
    return MLP().eval(), torch.randn(4, 16)


@pytest.fixture(scope="session")
def mlp_bundle(mlp, tmp_path_factory):
    """The MLP exported (portable webgpu-core target) as a bundle directory."""
    import torch_webgpu

    model, x = mlp
    return torch_webgpu.export(model, [x], tmp_path_factory.mktemp("bundles") / "mlp", target="webgpu-core")


@pytest.fixture
def bundle_copy(mlp_bundle, tmp_path):
    """A private copy of the MLP bundle to edit."""
    return Path(shutil.copytree(mlp_bundle, tmp_path / "edited"))


def edit_manifest(path: Path, change, reseal: bool = True) -> None:
    """Apply `change(manifest)` to a bundle directory's manifest, re-hashing it unless `reseal` is False."""
    from torch_webgpu.bundle.format import SELF_HASH_KEY, _canonical, sha256

    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    if reseal:
        manifest[SELF_HASH_KEY] = sha256(_canonical(manifest))
    (path / "manifest.json").write_text(json.dumps(manifest))
