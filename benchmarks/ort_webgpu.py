"""ONNX Runtime's WebGPU execution provider as a peer in the benchmark tables (`ort-webgpu`).

The peer a user would otherwise pick for WebGPU: the `onnxruntime-webgpu` wheel (its own Dawn), each
figure's module exported on the machine that runs it with `torch.onnx.export(dynamo=True,
external_data=True)`, same seeds and inputs as the other backends, and `session.run` with host arrays
in and out. Its first output is checked against torch CPU before any timing.

Where another `onnxruntime` is installed (the H200 image has the CPU build, under the same package name),
install the wheel with `pip --target DIR` and set `ORT_WEBGPU_SITE=DIR`: that folder is put first on
`sys.path` before `onnxruntime` is imported.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

SITE_ENV = "ORT_WEBGPU_SITE"
PROVIDERS = ["WebGpuExecutionProvider", "CPUExecutionProvider"]
# The tolerance of the bundle check (check_bundles.py): whole models in f32, different reduction orders.
RTOL, ATOL = 2e-3, 2e-2


def _use_site() -> None:
    site = os.environ.get(SITE_ENV)
    if site and site not in sys.path:
        sys.path.insert(0, site)


def available() -> bool:
    """True when onnxruntime (from `ORT_WEBGPU_SITE` if set), onnx and onnxscript can be imported."""
    _use_site()
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx", "onnxscript"))


def import_onnxruntime() -> Any:
    """The `onnxruntime` module, which must offer the WebGPU execution provider."""
    _use_site()
    import onnxruntime as ort

    site = os.environ.get(SITE_ENV)
    if site and not Path(ort.__file__).resolve().is_relative_to(Path(site).resolve()):
        raise RuntimeError(f"onnxruntime was imported from {ort.__file__} before {SITE_ENV}={site} took "
                           "effect; import benchmarks.ort_webgpu before anything that imports onnxruntime")
    if PROVIDERS[0] not in ort.get_available_providers():
        raise RuntimeError(f"onnxruntime {ort.__version__} at {ort.__file__} has no {PROVIDERS[0]} "
                           f"(providers: {ort.get_available_providers()}); install onnxruntime-webgpu "
                           f"(`pip install --target DIR` and {SITE_ENV}=DIR beside another onnxruntime)")
    return ort


def export_onnx(module: Callable, args: Sequence[Any], path: Path) -> Path:
    """`module(*args)` exported by torch's dynamo ONNX exporter, weights beside it as external data."""
    import torch

    torch.onnx.export(module, tuple(args), str(path), dynamo=True, external_data=True, verbose=False)
    return path


def _first(result: Any) -> Any:
    while isinstance(result, (list, tuple)):
        result = result[0]
    return result


class ORTWebGPUFunction:
    """`module` on ONNX Runtime's WebGPU EP: exported and checked against torch CPU on the first call,
    then `session.run` with host arrays (the inputs as numpy, every output back as numpy)."""

    def __init__(self, module: Callable, name: str = "model"):
        self.module, self.name = module, name
        self.session = None
        self.input_names: list[str] = []

    def _prepare(self, args: Sequence[Any]) -> None:
        import torch

        ort = import_onnxruntime()
        workdir = Path(tempfile.mkdtemp(prefix="torch-webgpu-ort-"))
        weakref.finalize(self, shutil.rmtree, workdir, True)
        path = export_onnx(self.module, args, workdir / f"{self.name}.onnx")
        session = ort.InferenceSession(str(path), providers=PROVIDERS)
        if session.get_providers()[0] != PROVIDERS[0]:
            raise RuntimeError(f"ONNX Runtime gave {self.name} the providers {session.get_providers()}, not "
                               f"{PROVIDERS[0]} first (no WebGPU adapter?)")
        self.input_names = [i.name for i in session.get_inputs()]
        if len(self.input_names) != len(args):
            raise RuntimeError(f"{self.name}: the exported graph takes {len(self.input_names)} inputs "
                               f"({self.input_names}), the module {len(args)}")
        self.session = session
        with torch.no_grad():
            want = _first(self.module(*args))
        got = torch.from_numpy(_first(self._run(args)))
        try:
            torch.testing.assert_close(got.float(), want.float(), rtol=RTOL, atol=ATOL)
        except AssertionError as exc:
            self.session = None
            raise AssertionError(f"{self.name} on ONNX Runtime WebGPU differs from torch CPU: "
                                 f"{' '.join(str(exc).splitlines()[:3])}") from None

    def _run(self, args: Sequence[Any]) -> list[Any]:
        return self.session.run(None, {n: a.numpy() for n, a in zip(self.input_names, args, strict=True)})

    def __call__(self, *args: Any) -> list[Any]:
        """Outputs of the session for host tensors `args` (numpy arrays)."""
        if self.session is None:
            self._prepare(args)
        return self._run(args)
