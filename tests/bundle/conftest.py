"""Bundle fixtures: a private compile cache, one MLP bundle and the tiny language models' decode bundles
(tests/language_models.py: Llama and Qwen2, f32 and int4, with their tokenizers) exported once per session."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from tests.compiler.models import MLP
from tests.executor_check import check_native_executor  # noqa: F401  (autouse fixture)
from tests.language_models import KINDS, QUANTS, build_language_model


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


@pytest.fixture(scope="session")
def build_language_bundle(tmp_path_factory):
    """(kind, quant) -> its LanguageModel with the decode bundle exported, each built once per session."""
    built = {}

    def build(kind: str, quant: str):
        if (kind, quant) not in built:
            built[kind, quant] = build_language_model(kind, quant, tmp_path_factory.mktemp("language-models"))
        return built[kind, quant]

    return build


@pytest.fixture(scope="session", params=[(k, q) for k in KINDS for q in QUANTS], ids="-".join)
def language_model(request, build_language_bundle):
    """Each tiny language model (Llama, Qwen2 × f32, int4) with its exported decode bundle."""
    return build_language_bundle(*request.param)


@pytest.fixture(scope="session")
def language_bundle(language_model):
    """The language_model's decode bundle, loaded."""
    import torch_webgpu

    bundle = torch_webgpu.load(language_model.path)
    yield bundle
    bundle.release()


@pytest.fixture(scope="session")
def llama_text(build_language_bundle):
    """The tiny float32 Llama with its decode bundle (for the tests one model serves)."""
    return build_language_bundle("llama", "f32")


@pytest.fixture
def llama_text_copy(llama_text, tmp_path):
    """A private copy of the tiny Llama's decode bundle directory, to edit."""
    return Path(shutil.copytree(llama_text.path, tmp_path / "llama-edited"))
