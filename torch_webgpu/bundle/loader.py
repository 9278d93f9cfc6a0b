"""`load(path)`: a verified bundle bound to the runtime, callable with numpy arrays or torch tensors.

Needs only the runtime, numpy and safetensors: the plan runs on the plan runtime (`torch_webgpu.plan`),
which imports neither torch, torch-mlir nor IREE.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch_webgpu.plan import Plan, lowering

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
        # Per input: its shape, and the dtype objects a full check accepted (a call compares just these).
        self._shapes = [tuple(spec["shape"]) for spec in self.inputs]
        self._accepted: list[set[Any]] = [set() for _ in self.inputs]
        self._single = manifest.get("output_structure") == "single"

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
        if len(args) == len(self._shapes):
            try:
                if all(getattr(value, "dtype", None) in dtypes and value.shape == shape
                       for value, shape, dtypes in zip(args, self._shapes, self._accepted, strict=True)):
                    return
            except TypeError:   # an unhashable dtype: the full check says what is wrong
                pass
        self._check_fully(args)
        for value, dtypes in zip(args, self._accepted, strict=True):
            try:
                dtypes.add(value.dtype)
            except TypeError:
                pass

    def _check_fully(self, args: Sequence[Any]) -> None:
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
        # The steady-state call accepts only webgpu tensors of exactly the bundle's dtypes and shapes, a
        # subset of what _check lets through, so it needs no check of its own.
        fast = self._compiled.fast_call
        results = fast(args) if fast is not None else None
        if results is None:
            self._check(args)
            results = self._compiled(*args)
        return results[0] if self._single else results

    def release(self) -> None:
        """Give the bundle's device buffers back to the runtime pool."""
        self._compiled.release()

    def __repr__(self) -> str:
        return f"<torch_webgpu bundle {self.path} {self.signature}>"


def _as_array(value: Any) -> Any:
    import numpy as np

    if hasattr(value, "detach"):  # a torch tensor, on any device
        value = value.detach().to("cpu").numpy()
    return np.asarray(value, order="C")   # (ascontiguousarray would make a 0-d weight 1-d)


def _bind_external_weights(path: Path, plan: Plan, external: dict[str, Any], weights: Mapping | None) -> None:
    """Put the caller's weights into `plan.constants`, in the order the compiled graph takes them."""
    specs = external["weights"]
    if weights is None:
        raise BundleSignatureError(
            f"{path.name} was exported with external weights ({len(specs)} tensors); pass them: "
            "load(path, weights=model.state_dict()) or a mapping of name -> numpy array")
    bound = {}
    for const, spec in specs.items():
        if spec["name"] not in weights:
            raise BundleSignatureError(f"{path.name} needs the weight {spec['name']!r}, missing in `weights`")
        value = _as_array(weights[spec["name"]])
        if spec["dtype"] == "int32" and value.dtype == "int64":
            # The plan holds 64-bit integer weights as int32 (WebGPU has no 64-bit ints), range-checked.
            if value.size and (value.min() < -2**31 or value.max() >= 2**31):
                raise BundleSignatureError(f"weight {spec['name']!r} has int64 values beyond int32")
            value = value.astype("int32")
        if list(value.shape) != spec["shape"] or str(value.dtype) != spec["dtype"]:
            raise BundleSignatureError(
                f"weight {spec['name']!r} is {value.dtype}{list(value.shape)}, the bundle was compiled for "
                f"{spec['dtype']}{spec['shape']}")
        if "pack" in spec:   # a quantized weight, packed as the compiler packed it (numpy only)
            from ..kernels.quant_matmul import pack_constant

            value = pack_constant(value, spec["pack"])
        bound[const] = value
    plan.constants = {name: bound.get(name, plan.constants.get(name)) for name in external["order"]}


def load_plan(path: str | Path, weights: Mapping | None = None) -> tuple[dict[str, Any], Plan]:
    """The verified manifest and plan of a bundle, with its weights bound (no device needed)."""
    path = Path(path)
    return _plan_of(path, *read_bundle(path), weights)


def _plan_of(path: Path, manifest: dict[str, Any], files: dict[str, bytes],
             weights: Mapping | None) -> tuple[dict[str, Any], Plan]:
    if manifest.get("kind") == "decoder":
        raise BundleFormatError(f"{path}: a decode bundle holds several plans; load it with "
                                "torch_webgpu.load(path) and call its generate()")
    for key in ("inputs", "outputs", "requires", "plan"):
        if key not in manifest:
            raise BundleFormatError(f"{path}: manifest has no '{key}'")
    with materialize(files) as directory:
        plan = Plan.from_doc(copy.deepcopy(manifest["plan"]), directory)
    if "external_weights" in manifest:
        _bind_external_weights(path, plan, manifest["external_weights"], weights)
    return manifest, plan


def load(path: str | Path, rt: Any = None, weights: Mapping | None = None) -> Any:
    """Load a bundle (directory or .zip): verify format and hashes, check the adapter, bind the plan.

    `weights` (name -> array or tensor) supplies the weights of a bundle exported with external weights.
    A decode bundle (torch_webgpu.export_decoder) gives a DecoderBundle, with its own generate()."""
    path = Path(path)
    manifest, files = read_bundle(path)
    if manifest.get("kind") == "decoder":
        from .decoder import DecoderBundle

        return DecoderBundle(path, manifest, files, rt)
    manifest, plan = _plan_of(path, manifest, files, weights)
    return Bundle(path, manifest, plan, rt)
