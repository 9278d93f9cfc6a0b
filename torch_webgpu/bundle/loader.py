"""`load(path)`: a verified bundle bound to the runtime, callable with numpy arrays or torch tensors.

Needs only the runtime, numpy and safetensors: the plan runs through the compiler's one executor
(`torch_webgpu.compiler.lowering`), which imports neither torch, torch-mlir nor IREE.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch_webgpu.compiler.low_ir import Plan
from torch_webgpu.compiler.lowering import lowering

from .format import BundleFormatError, BundleSignatureError, materialize, read_bundle
from .requirements import check_requirements


def _dtype_name(value: Any) -> str:
    return str(value.dtype).removeprefix("torch.")


def format_signature(inputs: Sequence[dict], outputs: Sequence[dict]) -> str:
    """`(x: float32[4, 16]) -> (float32[4, 8])`."""
    ins = ", ".join(f"{t['name']}: {t['dtype']}{list(t['shape'])}" for t in inputs)
    outs = ", ".join(f"{t['dtype']}{list(t['shape'])}" for t in outputs)
    return f"({ins}) -> ({outs})"


class Bundle:
    """A loaded bundle: call it with the model's inputs (numpy arrays or torch tensors)."""

    def __init__(self, path: Path, manifest: dict[str, Any], plan: Plan, rt: Any = None):
        from torch_webgpu.runtime import get_runtime

        self.path = path
        self.manifest = manifest
        self.plan = plan
        self.rt = rt or get_runtime()
        check_requirements(manifest["requires"], self.rt.info.limits, self.rt.info.features,
                           what=f"this adapter ({self.rt.info.name})")
        self._compiled = lowering(plan, self.rt)

    @property
    def inputs(self) -> list[dict]:
        """Name, shape and dtype of every input."""
        return self.manifest["inputs"]

    @property
    def outputs(self) -> list[dict]:
        """Shape and dtype of every output."""
        return self.manifest["outputs"]

    @property
    def signature(self) -> str:
        """The expected call signature, e.g. `(x: float32[4, 16]) -> (float32[4, 8])`."""
        return format_signature(self.inputs, self.outputs)

    def _check(self, args: Sequence[Any]) -> None:
        if len(args) != len(self.inputs):
            raise BundleSignatureError(f"{self.path.name} takes {len(self.inputs)} inputs, got {len(args)}; "
                                       f"expected {self.signature}")
        for k, (value, spec) in enumerate(zip(args, self.inputs, strict=True)):
            if not (hasattr(value, "shape") and hasattr(value, "dtype")):
                raise BundleSignatureError(f"input {k} ({spec['name']}) is a {type(value).__name__}, not a "
                                           f"numpy array or torch tensor; expected {self.signature}")
            shape, dtype = [int(d) for d in value.shape], _dtype_name(value)
            if shape != list(spec["shape"]) or dtype != spec["dtype"]:
                raise BundleSignatureError(
                    f"input {k} ({spec['name']}) is {dtype}{shape}, expected {spec['dtype']}{spec['shape']}; "
                    f"the bundle's signature is {self.signature}")

    def __call__(self, *args: Any) -> Any:
        """Run the model: numpy arrays in give numpy arrays out, torch tensors give torch tensors."""
        self._check(args)
        results = self._compiled(*args)
        return results[0] if self.manifest.get("output_structure") == "single" else results

    def release(self) -> None:
        """Give the bundle's device buffers back to the runtime pool."""
        self._compiled.release()

    def __repr__(self) -> str:
        return f"<torch_webgpu bundle {self.path} {self.signature}>"


def load(path: str | Path, rt: Any = None) -> Bundle:
    """Load a bundle (directory or .zip): verify format and hashes, check the adapter, bind the plan."""
    path = Path(path)
    manifest, files = read_bundle(path)
    for key in ("inputs", "outputs", "requires", "plan"):
        if key not in manifest:
            raise BundleFormatError(f"{path}: manifest has no '{key}'")
    with materialize(files) as directory:
        plan = Plan.from_doc(copy.deepcopy(manifest["plan"]), directory)
    return Bundle(path, manifest, plan, rt)
