"""On-disk compile cache: plans keyed by a hash of (torch module, target, package and compiler versions)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from torch_webgpu.config import CACHE_DIR
from torch_webgpu.plan.format import Plan

_PACKAGES = ("torch", "torch-mlir", "iree-base-compiler", "wgpudawn")


def cache_dir() -> Path:
    """TORCH_WEBGPU_CACHE_DIR, or the platform's user cache dir for torch-webgpu."""
    own = CACHE_DIR.read()
    if own:
        return own
    import platformdirs

    return Path(platformdirs.user_cache_dir("torch-webgpu")) / "compile"


@lru_cache(maxsize=1)
def toolchain_fingerprint() -> str:
    """Package versions plus the source of our compiler passes and kernel library (a change invalidates
    plans)."""
    h = hashlib.sha256()
    for pkg in _PACKAGES:
        try:
            h.update(f"{pkg}={metadata.version(pkg)};".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{pkg}=?;".encode())
    root = Path(__file__).resolve().parents[2]
    package = root / "torch_webgpu"
    for folder in (root / "mlir_passes", package / "compiler", package / "kernels"):
        for path in sorted(folder.rglob("*.py")):
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(torch_text: str, target_key: str, extra: bytes = b"") -> str:
    """The key of one graph: torch-dialect text, target, toolchain, and constant contents (`extra`)."""
    h = hashlib.sha256()
    for part in (torch_text.encode(), target_key.encode(), toolchain_fingerprint().encode(), extra):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:32]


def load(key: str) -> Plan | None:
    """The cached plan for `key`, or None."""
    path = cache_dir() / key
    if not (path / "plan.json").exists():
        return None
    try:
        return Plan.load(path)
    except Exception:
        return None  # a corrupt or older entry is recompiled and overwritten


def store(key: str, plan: Plan) -> None:
    """Write `plan` atomically (write to a temporary folder, then rename)."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    try:
        plan.save(tmp)
        target = root / key
        if target.exists():
            shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
