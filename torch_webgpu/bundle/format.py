"""The bundle on disk: manifest.json, one .wgsl per executable and constants.safetensors, as a directory
or one .zip file; every file is sha256-hashed in the manifest and the manifest hashes itself.

Needs only the standard library (no torch, numpy or device): `torch-webgpu inspect` and the loader's
integrity checks run anywhere.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BUNDLE_FORMAT = "torch-webgpu-bundle"
BUNDLE_FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SELF_HASH_KEY = "manifest_sha256"


class BundleError(ValueError):
    """A bundle that cannot be read or run."""


class BundleFormatError(BundleError):
    """Not a bundle, or a format version this torch-webgpu cannot read."""


class BundleIntegrityError(BundleError):
    """A file of the bundle (or its manifest) does not match its recorded sha256: corrupted or edited."""


class BundleRequirementError(BundleError):
    """The adapter lacks a feature or limit the bundle requires."""


class BundleSignatureError(BundleError, TypeError):
    """Inputs that do not match the bundle's signature (count, shape or dtype)."""


def sha256(data: bytes) -> str:
    """Hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def _canonical(manifest: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in manifest.items() if k != SELF_HASH_KEY}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def seal(manifest: dict[str, Any], files: Mapping[str, bytes]) -> dict[str, Any]:
    """`manifest` with the sha256 of every file and of the manifest itself filled in."""
    manifest = dict(manifest)
    manifest["files"] = {name: sha256(data) for name, data in sorted(files.items())}
    manifest[SELF_HASH_KEY] = sha256(_canonical(manifest))
    return manifest


def is_zip(path: str | Path) -> bool:
    """Whether `path` names the one-file (.zip) form of a bundle."""
    return str(path).lower().endswith(".zip")


def write_bundle(path: str | Path, manifest: dict[str, Any], files: Mapping[str, bytes]) -> Path:
    """Seal `manifest` and write it with `files` as a directory or, for a .zip path, one file."""
    path = Path(path)
    sealed = seal(manifest, files)
    text = json.dumps(sealed, indent=1).encode()
    if is_zip(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(MANIFEST, text)
            for name, data in sorted(files.items()):
                zf.writestr(name, data)
        tmp.replace(path)
        return path
    if path.exists():
        if not (path / MANIFEST).exists() or not path.is_dir():
            raise FileExistsError(f"{path} exists and is not a torch-webgpu bundle; not overwriting it")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    (path / MANIFEST).write_bytes(text)
    return path


def _read_raw(path: Path) -> tuple[dict[str, Any], Any]:
    """The manifest and a function reading one member's bytes."""
    if not path.exists():
        raise FileNotFoundError(f"no bundle at {path}")
    if path.is_dir():
        if not (path / MANIFEST).exists():
            raise BundleFormatError(f"{path}: no {MANIFEST}; not a torch-webgpu bundle")
        text = (path / MANIFEST).read_bytes()

        def member(name: str) -> bytes:
            return (path / name).read_bytes()
    else:
        if not zipfile.is_zipfile(path):
            raise BundleFormatError(f"{path}: neither a bundle directory nor a .zip bundle")
        with zipfile.ZipFile(path) as zf:
            members = {info.filename: zf.read(info) for info in zf.infolist() if not info.is_dir()}
        if MANIFEST not in members:
            raise BundleFormatError(f"{path}: no {MANIFEST} in the zip; not a torch-webgpu bundle")
        text = members[MANIFEST]

        def member(name: str) -> bytes:
            return members[name]
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleIntegrityError(f"{path}: {MANIFEST} is not valid JSON ({exc}); the bundle is corrupted")\
            from None
    if not isinstance(manifest, dict):
        raise BundleFormatError(f"{path}: {MANIFEST} is not a JSON object")
    return manifest, member


def check_format(manifest: Mapping[str, Any], where: Any = "bundle") -> None:
    """BundleFormatError unless `manifest` is a bundle manifest of a version this package reads."""
    if manifest.get("format") != BUNDLE_FORMAT:
        raise BundleFormatError(f"{where}: format {manifest.get('format')!r} is not {BUNDLE_FORMAT!r}")
    version = manifest.get("format_version")
    if version != BUNDLE_FORMAT_VERSION:
        raise BundleFormatError(
            f"{where}: bundle format version {version!r} is not supported (this torch-webgpu reads version "
            f"{BUNDLE_FORMAT_VERSION}); re-export the model with this torch-webgpu, or use the version that "
            "wrote it")


def read_bundle(path: str | Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The verified manifest and file contents of a bundle (format version and every sha256 checked)."""
    path = Path(path)
    manifest, member = _read_raw(path)
    check_format(manifest, path)
    recorded = manifest.get(SELF_HASH_KEY)
    if recorded != sha256(_canonical(manifest)):
        raise BundleIntegrityError(f"{path}: {MANIFEST} hash mismatch (recorded {recorded}); the manifest "
                                   "was edited or corrupted after export — re-export the bundle")
    files: dict[str, bytes] = {}
    for name, digest in manifest.get("files", {}).items():
        if Path(name).name != name:
            raise BundleFormatError(f"{path}: file name {name!r} is not a plain name")
        try:
            data = member(name)
        except (FileNotFoundError, KeyError):
            raise BundleIntegrityError(f"{path}: {name} is missing from the bundle") from None
        if sha256(data) != digest:
            raise BundleIntegrityError(f"{path}: {name} hash mismatch (sha256 {sha256(data)[:16]}…, manifest "
                                       f"says {digest[:16]}…); the file was edited or corrupted — re-export")
        files[name] = data
    return manifest, files


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The verified manifest of a bundle (for inspection; files are hash-checked too)."""
    return read_bundle(path)[0]


def materialize(files: Mapping[str, bytes]) -> tempfile.TemporaryDirectory:
    """A temporary directory holding `files` (for readers that want paths, e.g. safetensors)."""
    tmp = tempfile.TemporaryDirectory(prefix="torch-webgpu-bundle-")
    for name, data in files.items():
        Path(tmp.name, name).write_bytes(data)
    return tmp
